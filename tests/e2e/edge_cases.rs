//! Generators of edge-case SAM texts (header + records).
//!
//! Records are written one per line with space-separated fields (see
//! [`rows`]); fields that contain spaces go through [`line`] instead.

use crate::common::{line, Rng};

/// Space-separated fields, one record per line, to tab-separated SAM.
pub fn rows(text: &str) -> String {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines
        .map(|l| line(&l.split_whitespace().collect::<Vec<_>>()))
        .collect()
}

fn header(contigs: &[(&str, u64)]) -> String {
    let mut h = rows("@HD VN:1.6 SO:unsorted");
    for (name, len) in contigs {
        h += &rows(&format!("@SQ SN:{name} LN:{len}"));
    }
    h
}

/// Reads with unmapped mates, unmapped reads placed at their mate, and fully
/// unmapped reads (with and without SEQ), plus an unmapped read with a CIGAR.
pub fn unmapped() -> String {
    header(&[("chr1", 5000), ("chr2", 5000)])
        + &rows(
            "p1 73  chr1 100  30 10M    = 100  0 ACGTACGTAC IIIIIIIIII
             p1 133 chr1 100  0  *      = 100  0 TTTTTGGGGG IIIIIIIIII
             p2 137 chr2 4991 25 5M1I4M = 4991 0 ACGTACGTAC #########I
             p2 69  chr2 4991 0  *      = 4991 0 CCCCCAAAAA *
             p3 77  *    0    0  *      * 0    0 ACGT       IIII
             p3 141 *    0    0  *      * 0    0 TGCA       IIII
             u1 4   *    0    0  *      * 0    0 ACGTN      *
             u2 4   *    0    0  *      * 0    0 *          *
             u3 4   chr1 5000 0  *      * 0    0 ACG        III
             u4 4   chr2 1    0  10M    * 0    0 ACGTACGTAC *
             u5 4   chr1 1    0  *   chr2 77   0 ACGT       *",
        )
}

/// Secondary (0x100), supplementary (0x800) and both, with SA tags.
pub fn secondary_supplementary() -> String {
    let mut rng = Rng::new(7);
    let (seq, qual) = (rng.bases(100), rng.quals(100));
    let (s50, q50, s30) = (&seq[50..], &qual[50..], &seq[30..50]);
    let sa1 = "SA:Z:chr1,5000,+,50S50M,60,0;";
    let sa2 = "SA:Z:chr1,100,+,50M50S,60,0;chr2,300,-,30H20M50H,10,1;";
    header(&[("chr1", 10000), ("chr2", 10000)])
        + &rows(&format!(
            "s1 0    chr1 100  60 50M50S    * 0 0 {seq} {qual} {sa1} NM:i:0
             s1 2048 chr1 5000 60 50H50M    * 0 0 {s50} {q50}  {sa2}
             s1 2064 chr2 300  10 30H20M50H * 0 0 {s30} *      {sa2}
             s1 256  chr1 7000 0  100M      * 0 0 *     *      NM:i:3
             s1 2304 chr2 9951 0  50M       * 0 0 {}    *
             s2 1536 chr1 1    0  4M        * 0 0 ACGT  !!!!",
            &seq[..50]
        ))
}

/// 40000 contigs; reads on the first, around index 32767/32768 and the last.
pub fn many_contigs() -> String {
    let mut s = rows("@HD VN:1.6 SO:unsorted");
    for i in 0..40_000 {
        s += &rows(&format!("@SQ SN:ctg{i} LN:{}", 1000 + i));
    }
    s + &rows(
        "r0 1 ctg0     1   20 8M ctg39999 11  0 ACGTACGT *
         r1 1 ctg32767 100 20 8M =        110 0 ACGTACGT *
         r2 1 ctg32768 900 20 8M ctg0     910 0 ACGTACGT *
         r3 1 ctg39998 2   20 8M ctg32768 12  0 ACGTACGT *
         r4 1 ctg39999 5   20 8M =        15  0 ACGTACGT *",
    )
}

/// CIGARs with 65535 (the most a BAM record holds), 65536 and 70000 ops;
/// samtools stores the longer ones in a CG:B:I tag.
pub fn huge_cigar() -> String {
    let mut rng = Rng::new(11);
    let mut s = header(&[("big", 200_000)]);
    for (name, ops, flag, with_qual) in [
        ("ops65535", 65535, "0", false),
        ("ops65536", 65536, "16", false),
        ("ops70000", 70000, "0", true),
    ] {
        // Alternating 1M1I..., ending in 1M when the count is odd.
        let cigar: String = (0..ops)
            .map(|i| if i % 2 == 0 { "1M" } else { "1I" })
            .collect();
        let (seq, qual) = (rng.bases(ops), rng.quals(ops));
        let qual = if with_qual { qual.as_str() } else { "*" };
        s += &rows(&format!(
            "{name} {flag} big 1000 60 {cigar} * 0 0 {seq} {qual} NM:i:1"
        ));
    }
    s
}

/// A header and no records.
pub fn header_only() -> String {
    header(&[("chr1", 1000), ("chrM", 16569), ("HLA-A*01:01:01:01", 3503)])
        + &line(&["@RG", "ID:grp1", "SM:sample one", "PL:ILLUMINA"])
        + &line(&[
            "@PG",
            "ID:bwa",
            "PN:bwa",
            "VN:0.7.17",
            "CL:bwa mem ref.fa r1.fq",
        ])
        + &line(&["@CO", "free text, with: punctuation"])
}

fn one_read_with_tags(tags: &str) -> String {
    header(&[("chr1", 1000)]) + &rows(&format!("t1 0 chr1 10 42 4M * 0 0 ACGT ABCD {tags}"))
}

/// B arrays of every subtype, at their bounds, including empty ones.
pub fn array_tags() -> String {
    one_read_with_tags(
        "Bc:B:c,-128,-1,0,127 BC:B:C,0,1,254,255 Bs:B:s,-32768,-129,128,32767
         BS:B:S,0,256,65535 Bi:B:i,-2147483648,-32769,65536,2147483647
         BI:B:I,0,65536,2147483648,4294967295 Bf:B:f,0,1.5,-2.25e-10,3.4e+38,-0.125
         Be:B:i Bg:B:c,5"
            .replace('\n', " ")
            .as_str(),
    )
}

/// A, H, Z tags and integers at every type boundary.
pub fn scalar_tags() -> String {
    let ints = "0 -1 -128 127 -129 128 255 256 -32768 -32769 32767 32768 65535 65536 \
                -2147483648 2147483647 2147483648 4294967295";
    let names = "abcdefghijklmnopqr".chars();
    let tags: Vec<String> = names
        .zip(ints.split_whitespace())
        .map(|(c, v)| format!("i{c}:i:{v}"))
        .collect();
    let read = one_read_with_tags(&(tags.join(" ") + " XA:A:x XB:A:~ XH:H:1AE301 XI:H: XE:Z:"));
    // A Z value with spaces cannot go through `rows`.
    read.trim_end().to_string() + "\tXZ:Z:hello world, with: colons\n"
}

/// Floats, formatted by samtools with `%g`.
pub fn float_tags() -> String {
    one_read_with_tags("f0:f:0 f1:f:3.14159 f2:f:-1e-10 f3:f:1e+20 f4:f:123456789 f5:f:-0.5")
        + &rows(
            "t2 0 chr1 20 42 4M * 0 0 ACGT * g0:f:1.17549e-38 g1:f:3.40282e+38 g2:f:1e-45
             t3 0 chr1 30 42 4M * 0 0 ACGT * g3:f:0.1 g4:f:100000 g5:f:1000000 g6:f:1e-5
             t4 0 chr1 40 42 4M * 0 0 ACGT * n0:f:nan n1:f:inf n2:f:-inf",
        )
}

/// 100 kb reads with and without qualities.
pub fn long_reads() -> String {
    let mut rng = Rng::new(3);
    let n = 100_000;
    let (s1, q1, s2, s3, q3) = (
        rng.bases(n),
        rng.quals(n),
        rng.bases(n),
        rng.bases(n),
        rng.quals(n),
    );
    let m = n - 10_000;
    header(&[("chr1", 300_000)])
        + &rows(&format!(
            "long1 0  chr1 1      60 {n}M           * 0 0 {s1} {q1}
             long2 16 chr1 150001 60 {n}M           * 0 0 {s2} *
             long3 0  chr1 777    3  5000S{m}M5000S * 0 0 {s3} {q3}"
        ))
}

/// `*` qualities, `=` and IUPAC/lowercase bases in SEQ, extreme qualities.
pub fn sequences() -> String {
    header(&[("chr1", 1000)])
        + &rows(
            "q1 0 chr1 1 0 10M * 0 0 ACGT=ACGT=       *
             q2 0 chr1 2 0 10M * 0 0 ==========       !!!!!!!!!!
             q3 0 chr1 3 0 16M * 0 0 acgtnACGTNRYKMBD ~~~~~~~~~~~~~~~~
             q4 0 chr1 4 0 10M * 0 0 *                *
             q5 0 chr1 5 0 7M  * 0 0 SWHVN.=          *
             q6 0 chr1 6 0 1M  * 0 0 A                I",
        )
}

/// Extreme values in the fixed fields and every CIGAR operation.
pub fn misc_fields() -> String {
    let long_name = "n".repeat(254);
    header(&[("chr1", 1000), ("chr2", 2_000_000_000)])
        + &rows(&format!(
            "{long_name} 4095 chr1 990 255 2S3M1I2D1N1P2=1X3H chr2 1999999999 -2147483647 ACGTACGTA *
             mq0     99  chr1 1          0  5M  =    996 1000       ACGTA      *
             tlenmax 163 chr2 1999999990 60 10M chr1 1   2147483647 ACGTACGTAC *
             end     0   chr1 1000       1  1M  *    0   0          C          *"
        ))
}

/// A named SAM generator.
pub type Generator = (&'static str, fn() -> String);

/// Every generator, by name.
pub fn all() -> Vec<Generator> {
    vec![
        ("unmapped", unmapped),
        ("secondary_supplementary", secondary_supplementary),
        ("many_contigs", many_contigs),
        ("huge_cigar", huge_cigar),
        ("header_only", header_only),
        ("array_tags", array_tags),
        ("scalar_tags", scalar_tags),
        ("float_tags", float_tags),
        ("long_reads", long_reads),
        ("sequences", sequences),
        ("misc_fields", misc_fields),
    ]
}
