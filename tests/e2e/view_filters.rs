//! samtools view's record filters beyond `-f/-F/-q/-r/-l`: `-L` (BED), `-R` (read-group file),
//! `-n`, `-d`/`-D` (tags), `-N` (read names), `-e` (htslib filter expressions), alone and together,
//! with regions and `-c`, on `-@1` and `-@4`, each compared with samtools; and `-1`.

use std::path::{Path, PathBuf};

use crate::common::{assert_no_failures, line, p, sortase, tempdir, Rng};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::corpus_dir;
use crate::view_query::compare;

const CONTIGS: [(&str, u64); 3] = [("chr1", 10_000), ("chr2", 20_000), ("chr3", 5_000)];

/// Reads on three contigs with four read groups (two in library libA, one without LB, some reads
/// in none) and tags of every kind a filter reads: NM (int, sometimes missing), XS (string), XC
/// (char), XF (float).
fn filter_sam() -> String {
    let mut rng = Rng::new(7);
    let mut s = line(&["@HD", "VN:1.6", "SO:unsorted"]);
    for (name, len) in CONTIGS {
        s += &line(&["@SQ", &format!("SN:{name}"), &format!("LN:{len}")]);
    }
    s += &line(&["@RG", "ID:g1", "SM:x", "LB:libA"]);
    s += &line(&["@RG", "ID:g2", "SM:x", "LB:libB"]);
    s += &line(&["@RG", "ID:g3", "SM:y", "LB:libA"]);
    s += &line(&["@RG", "ID:g4", "SM:y"]);
    let cigars = [
        ("50M", 50),
        ("20M5D30M", 50),
        ("10S40M", 50),
        ("25M300N25M", 50),
        ("30M2I18M", 50),
        ("5H45M", 45),
        ("3H10S30M2S", 42),
    ];
    let flags = [
        "0", "16", "1024", "512", "256", "99", "147", "2048", "83", "163", "65", "129",
    ];
    let groups = ["g1", "g2", "g3", "g4", "", "gX"];
    let strings = ["abc", "abd", "m", "zz", "ABC"];
    for i in 0..500 {
        let (ctg, len) = CONTIGS[rng.below(3) as usize];
        let (cigar, qlen) = cigars[rng.below(cigars.len() as u64) as usize];
        let pos = (1 + rng.below(len - 400)).to_string();
        let flag = flags[rng.below(flags.len() as u64) as usize];
        let mapq = rng.below(61).to_string();
        let (mate, mpos, tlen) = if flag.parse::<u32>().unwrap() & 1 != 0 {
            let d = rng.below(400) as i64 - 200;
            ("=", (1 + rng.below(len - 400)).to_string(), d.to_string())
        } else {
            ("*", "0".to_string(), "0".to_string())
        };
        let (seq, qual) = (rng.bases(qlen), rng.quals(qlen));
        let name = format!("r{i:03}");
        let mut fields = vec![
            name.as_str(),
            flag,
            ctg,
            &pos,
            &mapq,
            cigar,
            mate,
            &mpos,
            &tlen,
            &seq,
            &qual,
        ];
        let nm = format!("NM:i:{}", rng.below(5));
        if rng.below(5) != 0 {
            fields.push(&nm);
        }
        let xs = format!("XS:Z:{}", strings[rng.below(strings.len() as u64) as usize]);
        if rng.below(3) != 0 {
            fields.push(&xs);
        }
        let xc = format!("XC:A:{}", ["q", "r"][rng.below(2) as usize]);
        if rng.below(2) == 0 {
            fields.push(&xc);
        }
        let xf = format!("XF:f:{}", rng.below(40) as f64 / 16.0);
        if rng.below(2) == 0 {
            fields.push(&xf);
        }
        let rg = format!("RG:Z:{}", groups[rng.below(groups.len() as u64) as usize]);
        if !rg.ends_with(':') {
            fields.push(&rg);
        }
        s += &line(&fields);
    }
    for i in 0..10 {
        s += &line(&[
            &format!("u{i:02}"),
            "4",
            "*",
            "0",
            "0",
            "*",
            "*",
            "0",
            "0",
            &rng.bases(30),
            "*",
            "RG:Z:g1",
        ]);
    }
    s
}

/// The SAM, a coordinate-sorted indexed BAM of it (made by samtools), and the filter files.
pub struct Data {
    _tmp: tempfile::TempDir,
    pub sam: PathBuf,
    pub bam: PathBuf,
    bed: PathBuf,
    groups: PathBuf,
    names: PathBuf,
    values: PathBuf,
}

pub fn data(st: &Oracle) -> Data {
    let tmp = tempdir();
    let dir = tmp.path();
    let sam = dir.join("reads.sam");
    std::fs::write(&sam, filter_sam()).unwrap();
    let bam = dir.join("sorted.bam");
    st.run(&["sort", "-o", p(&bam), p(&sam)]).expect_ok();
    st.run(&["index", p(&bam)]).expect_ok();
    let bed = dir.join("targets.bed");
    // A comment, a track line, overlapping and nested intervals, a VCF-style position, an empty
    // interval, a contig the header lacks.
    std::fs::write(
        &bed,
        "# targets\ntrack name=t\nchr1\t1000\t2000\tA\nchr1\t1500\t2500\nchr1\t1600\t1700\n\
         chr2 5000 9000\nchr2\t12000\nchr3\t3000\t3000\nchrZ\t1\t100\n",
    )
    .unwrap();
    let groups = dir.join("groups.txt");
    std::fs::write(&groups, "g1\ng3 gX\n").unwrap();
    let names = dir.join("names.txt");
    let listed: Vec<String> = (0..500).step_by(3).map(|i| format!("r{i:03}")).collect();
    std::fs::write(&names, listed.join("\n") + "\nu03\n").unwrap();
    let values = dir.join("values.txt");
    std::fs::write(&values, "0\n3\n").unwrap();
    Data {
        _tmp: tmp,
        sam,
        bam,
        bed,
        groups,
        names,
        values,
    }
}

/// The filter expressions compared with samtools: operators, fields, tags (present, missing,
/// string, char, float), regexes, arithmetic, functions and htslib's precedence.
const EXPRESSIONS: &[&str] = &[
    "mapq>=30 && flag.paired",
    "qname =~ \"^r0[0-5]\"",
    "qname !~ \"1$\" && !flag.reverse",
    "[NM] >= 2",
    "!([NM] >= 2)",
    "[NM]",
    "![NM]",
    "[NM] == 0",
    "[NM] != 1",
    "exists([XS]) && [XS] != \"abc\"",
    "[XS] > \"m\" || [XS] == \"ABC\"",
    "[XS] =~ \"^a\"",
    "[XC] == \"q\" || [ZZ] == 1",
    "[XF] * 2 > 1.5",
    "[XF] >= 0.5 && [XF] < 1.25",
    "pos % 7 == 3 || (flag & 16) != 0",
    "rname == \"chr2\" && endpos - pos > 40",
    "cigar =~ \"D\" || sclen > 0 || hclen > 0",
    "sclen >= 10 && hclen == 3",
    "library == \"libA\"",
    "library != \"libA\" && library != \"\"",
    "rnext == \"*\" || pnext > pos",
    "tlen < 0 || qlen != rlen",
    "seq =~ \"(AC){2}\" && avg(qual) > 20",
    "length(seq) > 45 && min(qual) >= 5",
    "max(qual) < 70",
    "-mapq < -30",
    "~flag & 4",
    "default([NM], 9) > 3",
    "ncigar > 1 && flag.reverse",
    "mapq > 10 && mapq < 40 || flag.unmap",
    "flag.read1 || flag.read2 && flag.proper_pair",
    "flag.secondary || flag.supplementary || flag.dup || flag.qcfail",
    "flag.mreverse && !flag.munmap",
    "sqrt(mapq) >= 5 && log(mapq+1) < 4 && pow(2, 3) == 8",
    "refid == 1 || mrefid == 2",
    "mapq / 3 > 10",
    "(mapq + 5) * 2 >= 100",
    "mapq & 1 | 8 == 9",
    "\"a\" < \"b\"",
    "1.5e1 == 15 && 0x10 == 16",
];

/// `view` with `opts` on `input` (and `regions`), by sortase and samtools, on `-@1` and `-@4`,
/// as records and as a count.
fn check(st: &Oracle, failures: &mut Vec<String>, opts: &[&str], input: &Path, regions: &[&str]) {
    for threads in ["1", "4"] {
        for count in [false, true] {
            let mut args = vec!["-@", threads];
            if count {
                args.push("-c");
            }
            args.extend_from_slice(opts);
            compare(st, failures, &args, input, regions);
        }
    }
}

#[test]
fn bed_read_group_tag_and_name_filters() {
    let Some(st) = oracle() else { return };
    let d = data(st);
    let (bed, groups, names) = (p(&d.bed), p(&d.groups), p(&d.names));
    let not_groups = format!("^{groups}");
    let not_names = format!("^{names}");
    let tag_file = format!("NM:{}", p(&d.values));
    let cases: Vec<Vec<&str>> = vec![
        vec!["-L", bed],
        vec!["-L", bed, "-F", "4", "-q", "20"],
        vec!["-R", groups],
        vec!["-R", &not_groups],
        vec!["-R", groups, "-r", "g2"],
        vec!["-n"],
        vec!["-R", groups, "-n"],
        vec!["-l", "libA", "-R", groups],
        vec!["-d", "NM"],
        vec!["-d", "NM:2"],
        vec!["-d", "NM:1", "-d", "NM:3"],
        vec!["-d", "XS:abc"],
        vec!["-d", "XC:q"],
        vec!["-d", "RG:g1"],
        vec!["-D", &tag_file],
        vec!["-D", &tag_file, "-d", "NM:4"],
        vec!["-N", names],
        vec!["-N", &not_names],
        vec!["-N", names, "-L", bed, "-d", "NM", "-R", groups],
    ];
    let mut failures = Vec::new();
    for opts in &cases {
        for input in [&d.sam, &d.bam] {
            check(st, &mut failures, opts, input, &[]);
        }
    }
    // With regions: the records of the regions that also pass the filter (samtools iterates the
    // regions and filters each record, so overlapping regions repeat records).
    for regions in [&["chr1"][..], &["chr1:1200-1800", "chr2", "chr1:1500-3000"]] {
        check(st, &mut failures, &["-L", bed], &d.bam, regions);
        check(
            st,
            &mut failures,
            &["-N", names, "-d", "NM"],
            &d.bam,
            regions,
        );
    }
    assert_no_failures("BED, read-group, tag and name filters", &failures);
}

#[test]
fn filter_expressions() {
    let Some(st) = oracle() else { return };
    let d = data(st);
    let mut failures = Vec::new();
    for expr in EXPRESSIONS {
        for input in [&d.sam, &d.bam] {
            check(st, &mut failures, &["-e", expr], input, &[]);
        }
    }
    // Together with the other filters and with regions.
    let bed = p(&d.bed);
    let combined: &[&[&str]] = &[
        &["-e", "mapq>=30 && flag.paired", "-L", bed],
        &["-e", "[NM] > 1", "-d", "XS", "-F", "0x900"],
        &["-e", "!flag.unmap", "-q", "5", "-R", p(&d.groups)],
    ];
    for opts in combined {
        check(st, &mut failures, opts, &d.bam, &[]);
        check(
            st,
            &mut failures,
            opts,
            &d.bam,
            &["chr1", "chr2:3000-15000"],
        );
    }
    assert_no_failures("filter expressions", &failures);
}

/// htslib's own filter tests (test/sam_filter/filter.tst) on its corpus files, and `-e` on CRAM.
#[test]
fn htslib_filter_tests_on_the_corpus() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let cases: &[(&str, &str)] = &[
        ("ce#1000.sam", "qname =~ \"\\.1\" && cigar =~ \"D\""),
        ("ce#5b.sam", "rname==\"CHROMOSOME_II\""),
        ("ce#5b.sam", "rname=~\"CHROMOSOME_II\""),
        ("ce#1000.sam", "cigar=~\"D\""),
        ("ce#1000.sam", "seq =~ \"(AT){2}\""),
        ("xx#rg.sam", "library==\"x\""),
        ("xx#rg.sam", "library!=\"x\""),
        ("ce#1000.sam", "pos % 23 == 11"),
        ("ce#1000.sam", "qlen/(flag*mapq+pos)>5"),
        ("ce#1000.sam", "[NM]>=10 || [MD]=~\"A.*A.*A\""),
        ("ce#5b.sam", "length(seq) != qlen"),
        ("ce#1000.sam", "min(qual) >= 20"),
        ("ce#1000.sam", "max(qual) <= 20"),
        ("ce#1000.sam", "avg(qual) >= 20 && avg(qual) <= 30"),
        ("realn02.sam", "sclen>=20"),
        ("realn02.sam", "rlen<50"),
        ("realn02.sam", "qlen>100"),
        ("ce#1000.sam", "[XS] > -20 && [AS] - [XS] < 5"),
        ("xx#rg.sam", "[RG] == \"x1\" || ![RG]"),
    ];
    let mut failures = Vec::new();
    for (file, expr) in cases {
        check(st, &mut failures, &["-e", expr], &dir.join(file), &[]);
    }
    // CRAM input: every field decoded (the expression may read any).
    let tmp = tempdir();
    let cram = tmp.path().join("ce.cram");
    let fasta = dir.join("ce.fa");
    st.run(&[
        "view",
        "-C",
        "-T",
        p(&fasta),
        "-o",
        p(&cram),
        p(&dir.join("ce#1000.sam")),
    ])
    .expect_ok();
    for expr in ["[NM]>=3 && cigar =~ \"I\"", "seq =~ \"GATTA\" || mapq < 10"] {
        check(
            st,
            &mut failures,
            &["-T", p(&fasta), "-e", expr],
            &cram,
            &[],
        );
    }
    assert_no_failures("htslib's filter tests", &failures);
}

/// A bad expression, a missing file or a malformed option is a one-line error naming the problem,
/// with no output file left behind; samtools fails on them too.
#[test]
fn filter_errors() {
    let Some(st) = oracle() else { return };
    let d = data(st);
    let out = d.sam.with_file_name("out.bam");
    let missing = d.sam.with_file_name("missing.txt");
    let bad_bed = d.sam.with_file_name("bad.bed");
    std::fs::write(&bad_bed, "chr1\t100\t50\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["-e", "mapq >= "], "filter expression"),
        (vec!["-e", "mapq = 3"], "unexpected text"),
        (vec!["-e", "(mapq > 3"], "missing ')'"),
        (vec!["-e", "mapp > 3"], "unknown field or function"),
        (vec!["-e", "[XS] + 1"], "arithmetic on a string"),
        (vec!["-e", "qname =~ \"(\""], "regular expression"),
        (vec!["-L", p(&missing)], "missing.txt"),
        (vec!["-L", p(&bad_bed)], "must not be less than start"),
        (vec!["-N", p(&missing)], "missing.txt"),
        (vec!["-d", "NMX"], "TAG:VALUE"),
        (vec!["-d", "NM", "-d", "XS"], "one tag"),
    ];
    let mut failures = Vec::new();
    for (opts, expected) in &cases {
        for input in [&d.sam, &d.bam] {
            let mut args = vec!["view", "-b", "-o", p(&out)];
            args.extend_from_slice(opts);
            args.push(p(input));
            let ours = sortase(&args);
            let label = format!("view {}", opts.join(" "));
            let lines: Vec<&str> = ours.stderr.lines().collect();
            if ours.ok() || lines.len() != 1 || !lines[0].contains(expected) {
                failures.push(format!(
                    "{label}: expected one error line mentioning {expected:?}, got (ok={}) {:?}",
                    ours.ok(),
                    ours.stderr
                ));
            }
            if out.exists() {
                failures.push(format!("{label}: left {}", out.display()));
                std::fs::remove_file(&out).unwrap();
            }
            let mut counted = vec!["view", "-c"];
            counted.extend_from_slice(opts);
            counted.push(p(input));
            if st.run(&counted).ok() {
                failures.push(format!("{label}: samtools accepts it"));
            }
        }
    }
    assert_no_failures("filter errors", &failures);
}

/// `-1`: level-1 BAM that samtools reads back as the same records; SAM or CRAM when the output's
/// name says so, as samtools.
#[test]
fn fast_compression() {
    let Some(st) = oracle() else { return };
    let d = data(st);
    let mut failures = Vec::new();
    let expected = st.run(&["view", p(&d.bam)]).expect_ok().text();
    let fast = d.sam.with_file_name("fast.out");
    let default = d.sam.with_file_name("default.bam");
    sortase(&["view", "-1", "-o", p(&fast), p(&d.bam)]).expect_ok();
    sortase(&["view", "-b", "-o", p(&default), p(&d.bam)]).expect_ok();
    let back = st.run(&["view", p(&fast)]).expect_ok().text();
    crate::common::check_same(&mut failures, "view -1", &back, &expected);
    let size = |f: &Path| std::fs::metadata(f).unwrap().len();
    if size(&fast) <= size(&default) {
        failures.push(format!(
            "-1 output ({} bytes) is not larger than the default level's ({} bytes)",
            size(&fast),
            size(&default)
        ));
    }
    let sam = d.sam.with_file_name("fast.sam");
    sortase(&["view", "-1", "-o", p(&sam), p(&d.bam)]).expect_ok();
    let text = std::fs::read_to_string(&sam).unwrap_or_default();
    crate::common::check_same(&mut failures, "view -1 -o x.sam", &text, &expected);
    assert_no_failures("-1", &failures);
}
