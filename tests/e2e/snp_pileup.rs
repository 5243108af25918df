//! `sortase snp-pileup` (issue 7) against counts derived from `samtools mpileup`.
//!
//! FACETS' snp-pileup cannot be built in CI, so the expected CSV is rebuilt here from the oracle's
//! `samtools mpileup` (same htslib pileup engine, with equivalent filters: `-q max(1, q)` because
//! snp-pileup skips MAPQ 0, `-Q 0` so every base is shown and the base-quality rules of snp-pileup are
//! applied here, `-B`, `-d`, `-A`, `-x` passed through) by a line-for-line port of snp-pileup's loop
//! over the mpileup columns. The generated BAMs have overlapping proper pairs (without indels in the
//! overlap: htslib after 1.16 treats those differently), deletions and insertions, soft clips,
//! quality-0 and low-quality bases, duplicates, secondary, QC-failed and unmapped reads, MAPQ 0 and
//! low MAPQ, improper pairs; the VCF names contigs without the `chr` prefix the BAMs use, and holds
//! multi-allelic, indel, repeated and unknown-contig lines. Each case runs with 1 and 3 threads and
//! with tiny batches, so batch boundaries fall everywhere. Local comparisons with FACETS itself on
//! the benchmark data are in bench/RESULTS.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::common::{gunzip, p, sortase, tempdir, Rng};
use crate::oracle::{oracle, Oracle};

const CONTIGS: [(&str, usize); 2] = [("chr1", 60_000), ("chr2", 40_000)];
const READ_LEN: usize = 60;

struct Genome {
    seqs: Vec<Vec<u8>>,
    /// Alternate base per position (sites where reads carry it sometimes).
    alts: Vec<Vec<u8>>,
}

fn genome() -> Genome {
    let mut rng = Rng::new(77);
    let mut seqs = Vec::new();
    let mut alts = Vec::new();
    for &(_, len) in &CONTIGS {
        let seq: Vec<u8> = rng.bases(len).into_bytes();
        let alt = seq
            .iter()
            .map(|&b| {
                let others: Vec<u8> = b"ACGT".iter().copied().filter(|&x| x != b).collect();
                others[rng.below(3) as usize]
            })
            .collect();
        seqs.push(seq);
        alts.push(alt);
    }
    Genome { seqs, alts }
}

/// One SAM record line.
#[allow(clippy::too_many_arguments)]
fn record(
    out: &mut String,
    name: &str,
    flag: u16,
    tid: usize,
    pos: usize,
    mapq: u8,
    cigar: &str,
    mate: Option<(usize, i64)>,
    seq: &str,
    qual: &str,
) {
    let (rnext, pnext, tlen) = match mate {
        Some((mp, tlen)) => ("=", mp + 1, tlen),
        None => ("*", 0, 0),
    };
    let _ = writeln!(
        out,
        "{name}\t{flag}\t{}\t{}\t{mapq}\t{cigar}\t{rnext}\t{pnext}\t{tlen}\t{seq}\t{qual}",
        CONTIGS[tid].0,
        pos + 1
    );
}

/// A read copied from the genome at `pos` with the alternate allele at 1 in 3 positions divisible by
/// 7, 1 % random errors and random qualities (some 0).
fn read_seq(g: &Genome, rng: &mut Rng, tid: usize, pos: usize, len: usize) -> (String, String) {
    let mut seq = String::new();
    let mut qual = String::new();
    for i in pos..pos + len {
        let mut b = g.seqs[tid][i];
        if i % 7 == 0 && rng.below(3) == 0 {
            b = g.alts[tid][i];
        }
        if rng.below(100) == 0 {
            b = b"ACGTN"[rng.below(5) as usize];
        }
        seq.push(b as char);
        let q = match rng.below(20) {
            0 => 0,
            1 => 5,
            _ => 10 + rng.below(31) as u8,
        };
        qual.push((b'!' + q) as char);
    }
    (seq, qual)
}

/// SAM text of one sample.
fn sample_sam(g: &Genome, seed: u64, pairs: usize) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::from("@HD\tVN:1.6\tSO:unsorted\n");
    for &(name, len) in &CONTIGS {
        let _ = writeln!(out, "@SQ\tSN:{name}\tLN:{len}");
    }
    for i in 0..pairs {
        let tid = (rng.below(5) / 3) as usize; // 3:2 between the contigs
        let clen = CONTIGS[tid].1;
        let p1 = rng.below((clen - 200) as u64) as usize;
        let name = format!("r{seed}_{i}");
        let kind = rng.below(100);
        let mapq = match rng.below(20) {
            0 => 0,
            1 => 10,
            _ => 60,
        };
        let extra: u16 = match kind {
            0..=3 => 0x400,
            4..=5 => 0x100,
            6 => 0x200,
            _ => 0,
        };
        if kind < 80 {
            // A proper pair, often overlapping (insert 40..160 with 60 bp reads); soft clips only.
            let p2 = p1 + rng.below(100) as usize;
            let tlen = (p2 + READ_LEN - p1) as i64;
            let (s1, q1) = read_seq(g, &mut rng, tid, p1, READ_LEN);
            let (s2, q2) = read_seq(g, &mut rng, tid, p2, READ_LEN);
            let cigar1 = if rng.below(10) == 0 {
                format!("5S{}M", READ_LEN - 5)
            } else {
                format!("{READ_LEN}M")
            };
            let start1 = if cigar1.starts_with("5S") { p1 + 5 } else { p1 };
            record(
                &mut out,
                &name,
                0x1 | 0x2 | 0x20 | 0x40 | extra,
                tid,
                start1,
                mapq,
                &cigar1,
                Some((p2, tlen)),
                &s1,
                &q1,
            );
            record(
                &mut out,
                &name,
                0x1 | 0x2 | 0x10 | 0x80 | extra,
                tid,
                p2,
                mapq,
                &format!("{READ_LEN}M"),
                Some((start1, -tlen)),
                &s2,
                &q2,
            );
        } else if kind < 90 {
            // A single read with a deletion or an insertion (or a reference skip).
            let (s, q) = read_seq(g, &mut rng, tid, p1, READ_LEN);
            let cigar = match rng.below(3) {
                0 => format!("20M3D{}M", READ_LEN - 20),
                1 => format!("25M2I{}M", READ_LEN - 27),
                _ => format!("30M10N{}M", READ_LEN - 30),
            };
            record(
                &mut out,
                &name,
                ((rng.below(2) as u16) * 0x10) | extra,
                tid,
                p1,
                mapq,
                &cigar,
                None,
                &s,
                &q,
            );
        } else if kind < 96 {
            // An improper pair (counted only with -A), mates far apart.
            let p2 = (p1 + 150).min(clen - READ_LEN - 1);
            let (s1, q1) = read_seq(g, &mut rng, tid, p1, READ_LEN);
            let (s2, q2) = read_seq(g, &mut rng, tid, p2, READ_LEN);
            record(
                &mut out,
                &name,
                0x1 | 0x20 | 0x40,
                tid,
                p1,
                mapq,
                &format!("{READ_LEN}M"),
                Some((p2, 0)),
                &s1,
                &q1,
            );
            record(
                &mut out,
                &name,
                0x1 | 0x10 | 0x80,
                tid,
                p2,
                mapq,
                &format!("22M1D{}M", READ_LEN - 22),
                Some((p1, 0)),
                &s2,
                &q2,
            );
        } else {
            // Unmapped, placed at a position.
            let (s, q) = read_seq(g, &mut rng, tid, p1, READ_LEN);
            record(&mut out, &name, 0x4, tid, p1, 0, "*", None, &s, &q);
        }
    }
    out
}

/// VCF of sites every 7th position (plus corner-case lines), contigs without the `chr` prefix.
fn vcf_text(g: &Genome) -> String {
    let mut rng = Rng::new(5);
    let mut out =
        String::from("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n");
    out.push_str("3\t100\t.\tA\tG\t.\t.\t.\n");
    for (tid, &(name, len)) in CONTIGS.iter().enumerate() {
        let chrom = name.trim_start_matches("chr");
        let mut pos = 0;
        while pos < len {
            let (r, a) = (g.seqs[tid][pos] as char, g.alts[tid][pos] as char);
            let _ = match rng.below(50) {
                0 => writeln!(out, "{chrom}\t{}\t.\t{r}\t{a},T\t.\t.\t.", pos + 1),
                1 => writeln!(out, "{chrom}\t{}\t.\t{r}A\t{a}\t.\t.\t.", pos + 1),
                2 => writeln!(
                    out,
                    "{chrom}\t{}\t.\t{r}\t{a}\n{chrom}\t{}\t.\t{r}\tN\t.\t.\t.",
                    pos + 1,
                    pos + 1
                ),
                3 => writeln!(
                    out,
                    "{chrom}\t{}\t.\t{}\t{a}\t.\t.\t.",
                    pos + 1,
                    r.to_ascii_lowercase()
                ),
                4 => writeln!(out, "3\t{}\t.\t{r}\t{a}\t.\t.\t.", pos + 1),
                _ => writeln!(out, "{chrom}\t{}\t.\t{r}\t{a}\t.\t.\t.", pos + 1),
            };
            pos += 3 + rng.below(9) as usize;
        }
    }
    out
}

/// One mpileup column of one file: (base, quality) per read.
type Column = Vec<(u8, u8)>;

/// `samtools mpileup` columns: (tid, 0-based pos, per-file columns), in order.
fn mpileup(
    st: &Oracle,
    bams: &[PathBuf],
    q: i32,
    d: i32,
    a: bool,
    x: bool,
) -> Vec<(usize, i64, Vec<Column>)> {
    let (q, d) = (q.max(1).to_string(), d.to_string());
    let mut args = vec![
        "mpileup",
        "-B",
        "-Q",
        "0",
        "-q",
        &q,
        "-d",
        &d,
        "--no-output-ins",
        "--no-output-ins",
        "--no-output-del",
        "--no-output-del",
        "--no-output-ends",
    ];
    if a {
        args.push("-A");
    }
    if x {
        args.push("-x");
    }
    let names: Vec<&str> = bams.iter().map(|b| p(b)).collect();
    args.extend(names);
    let run = st.run(&args);
    assert!(run.ok(), "samtools mpileup failed: {}", run.failure());
    let mut out = Vec::new();
    for line in run.text().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let tid = CONTIGS
            .iter()
            .position(|c| c.0 == f[0])
            .expect("known contig");
        let pos: i64 = f[1].parse::<i64>().unwrap() - 1;
        let mut cols = Vec::new();
        for i in 0..bams.len() {
            let (depth, bases, quals) = (f[3 + 3 * i], f[4 + 3 * i], f[5 + 3 * i]);
            let depth: usize = depth.parse().unwrap();
            let col: Column = if depth == 0 {
                Vec::new()
            } else {
                assert_eq!(bases.len(), depth, "one base per read at {line}");
                bases.bytes().zip(quals.bytes().map(|c| c - 33)).collect()
            };
            cols.push(col);
        }
        out.push((tid, pos, cols));
    }
    out
}

struct Opts {
    q: i32,
    big_q: i32,
    r: Vec<i32>,
    d: i32,
    p: i64,
    a: bool,
    x: bool,
}

/// snp-pileup's `program_main` loop, transliterated, over mpileup's columns.
fn expected(vcf: &str, cols: &[(usize, i64, Vec<Column>)], o: &Opts, n: usize) -> String {
    let mut out = String::from("Chromosome,Position,Ref,Alt");
    for i in 1..=n {
        let _ = write!(out, ",File{i}R,File{i}A,File{i}E,File{i}D");
    }
    out.push('\n');
    let mut min = o.r.clone();
    min.resize(min.len().max(n), 0);
    let passes = |c: u8| c != 0 && i32::from(c) >= o.big_q;
    let is_del = |b: u8| matches!(b, b'*' | b'#' | b'>' | b'<');
    let (mut idx, mut first) = (0usize, true);
    let (mut tid, mut pos) = (0i64, 0i64);
    for line in vcf.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let (r, a) = (f[3].as_bytes(), f[4].as_bytes());
        if r.len() != 1 || a.len() != 1 || a == b"." {
            continue;
        }
        let chrom = f[0].trim_start_matches("chr");
        let vcf_tid = CONTIGS
            .iter()
            .position(|c| &c.0[3..] == chrom)
            .map_or(-1, |t| t as i64);
        let lpos: i64 = f[1].parse::<i64>().unwrap() - 1;
        if !first && tid > vcf_tid {
            continue;
        }
        if !first && tid == vcf_tid && lpos < pos {
            continue;
        }
        while idx < cols.len() {
            let (t, ps, col) = &cols[idx];
            idx += 1;
            (tid, pos, first) = (*t as i64, *ps, false);
            if vcf_tid > tid {
                continue;
            }
            let fails = col.iter().zip(&min).any(|(c, &m)| (c.len() as i32) < m);
            if tid == vcf_tid && pos == lpos {
                let counts: Vec<[u32; 4]> = col
                    .iter()
                    .map(|c| {
                        let mut k = [0u32; 4];
                        for &(b, _) in c.iter().filter(|&&(_, q)| passes(q)) {
                            let b = b.to_ascii_uppercase();
                            k[if is_del(b) {
                                3
                            } else if b == r[0] {
                                0
                            } else if b == a[0] {
                                1
                            } else {
                                2
                            }] += 1;
                        }
                        k
                    })
                    .collect();
                if !fails && counts.iter().any(|k| k[0] + k[1] + k[2] > 0) {
                    let _ = write!(
                        out,
                        "{},{},{},{}",
                        CONTIGS[*t].0,
                        lpos + 1,
                        r[0] as char,
                        a[0] as char
                    );
                    for k in counts {
                        let _ = write!(out, ",{},{},{},{}", k[0], k[1], k[2], k[3]);
                    }
                    out.push('\n');
                }
                break;
            }
            if o.p > 0 && (pos + 1) % o.p == 0 {
                let refs: Vec<usize> = col
                    .iter()
                    .map(|c| c.iter().filter(|x| passes(x.1)).count())
                    .collect();
                if !fails && refs.iter().any(|&k| k > 0) {
                    let _ = write!(out, "{},{},.,.", CONTIGS[*t].0, pos + 1);
                    for k in refs {
                        let _ = write!(out, ",{k},0,0,0");
                    }
                    out.push('\n');
                }
            }
            if tid > vcf_tid || (tid == vcf_tid && pos > lpos) {
                break;
            }
        }
    }
    out
}

/// Sorted, indexed BAMs and the VCF in `dir`.
fn inputs(st: &Oracle, dir: &Path) -> (Vec<PathBuf>, PathBuf, String) {
    let g = genome();
    let mut bams = Vec::new();
    for (seed, pairs) in [(11u64, 9000usize), (12, 6000)] {
        let sam = dir.join(format!("s{seed}.sam"));
        std::fs::write(&sam, sample_sam(&g, seed, pairs)).unwrap();
        let bam = dir.join(format!("s{seed}.bam"));
        let sort = st.run(&["sort", "-o", p(&bam), p(&sam)]);
        assert!(sort.ok(), "samtools sort: {}", sort.failure());
        let index = st.run(&["index", p(&bam)]);
        assert!(index.ok(), "samtools index: {}", index.failure());
        bams.push(bam);
    }
    let vcf_text = vcf_text(&g);
    let vcf = dir.join("sites.vcf");
    std::fs::write(&vcf, &vcf_text).unwrap();
    (bams, vcf, vcf_text)
}

fn opts_args(o: &Opts) -> Vec<String> {
    let mut v = vec![
        format!("-q{}", o.q),
        format!("-Q{}", o.big_q),
        format!("-d{}", o.d),
        format!("-P{}", o.p),
    ];
    if !o.r.is_empty() {
        v.push(format!(
            "-r{}",
            o.r.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    if o.a {
        v.push("-A".into());
    }
    if o.x {
        v.push("-x".into());
    }
    v
}

#[test]
fn issue_7_snp_pileup_matches_mpileup_counts() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let (bams, vcf, vcf_text) = inputs(st, dir.path());
    let cases = [
        Opts {
            q: 0,
            big_q: 0,
            r: vec![],
            d: 4000,
            p: 0,
            a: false,
            x: false,
        },
        Opts {
            q: 15,
            big_q: 20,
            r: vec![10, 0],
            d: 1000,
            p: 100,
            a: false,
            x: false,
        },
        Opts {
            q: 0,
            big_q: 0,
            r: vec![],
            d: 4000,
            p: 0,
            a: true,
            x: true,
        },
        Opts {
            q: 0,
            big_q: 13,
            r: vec![2],
            d: 4,
            p: 7,
            a: false,
            x: false,
        },
    ];
    let mut failures = Vec::new();
    for (ci, o) in cases.iter().enumerate() {
        let cols = mpileup(st, &bams, o.q, o.d, o.a, o.x);
        for files in [&bams[..], &bams[1..]] {
            let want = expected(
                &vcf_text,
                &cols_for(st, files, o, &bams, &cols),
                o,
                files.len(),
            );
            assert!(
                want.lines().count() > 50,
                "case {ci}: expected output is too small to mean much"
            );
            for (k, extra) in [vec!["-@", "1"], vec!["-@", "3", "--batch-bytes", "20000"]]
                .iter()
                .enumerate()
            {
                let out = dir.path().join(format!("out{ci}_{}_{k}.csv", files.len()));
                let mut args: Vec<String> = vec!["snp-pileup".into()];
                args.extend(opts_args(o));
                args.extend(extra.iter().map(|s| s.to_string()));
                args.push(p(&vcf).into());
                args.push(p(&out).into());
                args.extend(files.iter().map(|b| p(b).to_string()));
                let argv: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                let run = sortase(&argv);
                if !run.ok() {
                    failures.push(format!("{argv:?}: {}", run.failure()));
                    continue;
                }
                let got = std::fs::read_to_string(&out).unwrap();
                if got != want {
                    let diff = got
                        .lines()
                        .zip(want.lines())
                        .find(|(a, b)| a != b)
                        .map(|(a, b)| format!("ours {a:?} vs expected {b:?}"))
                        .unwrap_or_else(|| {
                            format!("{} vs {} lines", got.lines().count(), want.lines().count())
                        });
                    failures.push(format!("{argv:?}: {diff}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// mpileup columns for a subset of the files (one run per subset).
fn cols_for(
    st: &Oracle,
    files: &[PathBuf],
    o: &Opts,
    all: &[PathBuf],
    cols_all: &[(usize, i64, Vec<Column>)],
) -> Vec<(usize, i64, Vec<Column>)> {
    if files.len() == all.len() {
        return cols_all.to_vec();
    }
    mpileup(st, files, o.q, o.d, o.a, o.x)
}

#[test]
fn issue_7_snp_pileup_gzip_and_no_overwrite() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let (bams, vcf, _) = inputs(st, dir.path());
    let plain = dir.path().join("plain.csv");
    sortase(&[
        "snp-pileup",
        "-P50",
        p(&vcf),
        p(&plain),
        p(&bams[0]),
        p(&bams[1]),
    ])
    .expect_ok();
    let gz = dir.path().join("packed.csv");
    sortase(&[
        "snp-pileup",
        "-g",
        "-P50",
        p(&vcf),
        p(&gz),
        p(&bams[0]),
        p(&bams[1]),
    ])
    .expect_ok();
    let gz = dir.path().join("packed.csv.gz");
    assert_eq!(
        gunzip(&gz),
        std::fs::read(&plain).unwrap(),
        "-g output decompresses to the plain CSV"
    );
    // An existing output is refused and left as it was.
    let before = std::fs::read(&plain).unwrap();
    let run = sortase(&["snp-pileup", p(&vcf), p(&plain), p(&bams[0])]);
    assert!(!run.ok());
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    assert_eq!(std::fs::read(&plain).unwrap(), before);
}

#[test]
fn issue_7_snp_pileup_errors() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let (bams, vcf, _) = inputs(st, d);
    let out = d.join("out.csv");
    let fails = |args: &[&str], needle: &str| {
        let mut argv = vec!["snp-pileup"];
        argv.extend_from_slice(args);
        let run = sortase(&argv);
        assert!(!run.ok(), "{argv:?} should fail");
        assert!(
            run.stderr.contains(needle),
            "{argv:?}: {:?} lacks {needle:?}",
            run.stderr
        );
        assert_eq!(
            run.stderr.trim().lines().count(),
            1,
            "one-line error: {:?}",
            run.stderr
        );
        assert!(!out.exists(), "{argv:?} left an output");
        let leftovers: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    };
    let missing = d.join("missing.bam");
    fails(&[p(&vcf), p(&out), p(&bams[0]), p(&missing)], "missing.bam");
    fails(&[p(&d.join("nope.vcf")), p(&out), p(&bams[0])], "nope.vcf");
    // Unindexed: a copy without its .bai.
    let bare = d.join("bare.bam");
    std::fs::copy(&bams[0], &bare).unwrap();
    fails(&[p(&vcf), p(&out), p(&bare)], "no index");
    // Unsorted: samtools view -b of the SAM as generated (SO:unsorted), with an index file beside it.
    let unsorted = d.join("unsorted.bam");
    let conv = st.run(&["view", "-b", "-o", p(&unsorted), p(&d.join("s11.sam"))]);
    assert!(conv.ok());
    std::fs::copy(
        format!("{}.bai", p(&bams[0])),
        format!("{}.bai", p(&unsorted)),
    )
    .unwrap();
    fails(&[p(&vcf), p(&out), p(&unsorted)], "not sorted");
    // A VCF whose contigs match no BAM reference.
    let other = d.join("other.vcf");
    std::fs::write(
        &other,
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\nchrZ\t5\t.\tA\tG\nMT\t7\t.\tC\tT\n",
    )
    .unwrap();
    fails(&[p(&other), p(&out), p(&bams[0])], "no VCF contig");
    // Different reference lists.
    let renamed = d.join("renamed.sam");
    let text = std::fs::read_to_string(d.join("s12.sam"))
        .unwrap()
        .replace("chr2", "chrB");
    std::fs::write(&renamed, text).unwrap();
    let renamed_bam = d.join("renamed.bam");
    assert!(st.run(&["sort", "-o", p(&renamed_bam), p(&renamed)]).ok());
    assert!(st.run(&["index", p(&renamed_bam)]).ok());
    fails(
        &[p(&vcf), p(&out), p(&bams[0]), p(&renamed_bam)],
        "reference sequences differ",
    );
}

/// CRAM inputs (issue 21): samtools 1.24's CRAMs of the test BAMs, alone and beside a BAM, with
/// `--reference`, give the CSV expected from `samtools mpileup` of the BAMs.
#[test]
fn issue_21_snp_pileup_on_cram() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let (bams, vcf, vcf_text) = inputs(st, d);
    let g = genome();
    let fasta = d.join("genome.fa");
    let mut fa = String::new();
    for ((name, _), seq) in CONTIGS.iter().zip(&g.seqs) {
        let _ = writeln!(fa, ">{name}");
        for chunk in seq.chunks(60) {
            fa.push_str(std::str::from_utf8(chunk).unwrap());
            fa.push('\n');
        }
    }
    std::fs::write(&fasta, &fa).unwrap();
    // Encoded against a copy that is then deleted, so that no @SQ UR leads back to a FASTA.
    let enc = d.join("enc.fa");
    std::fs::write(&enc, &fa).unwrap();
    let crams: Vec<PathBuf> = bams
        .iter()
        .map(|b| {
            let c = b.with_extension("cram");
            st.run(&["view", "-C", "-T", p(&enc), "-o", p(&c), p(b)])
                .expect_ok();
            c
        })
        .collect();
    std::fs::remove_file(&enc).unwrap();
    let _ = std::fs::remove_file(d.join("enc.fa.fai"));
    let o = Opts {
        q: 15,
        big_q: 20,
        r: vec![10, 0],
        d: 1000,
        p: 100,
        a: false,
        x: false,
    };
    let cols = mpileup(st, &bams, o.q, o.d, o.a, o.x);
    let want = expected(&vcf_text, &cols_for(st, &bams, &o, &bams, &cols), &o, 2);
    assert!(want.lines().count() > 50, "expected output is too small");
    let mut failures = Vec::new();
    for (k, files) in [
        vec![crams[0].clone(), crams[1].clone()],
        vec![bams[0].clone(), crams[1].clone()],
    ]
    .iter()
    .enumerate()
    {
        let out = d.join(format!("cram{k}.csv"));
        let mut args: Vec<String> = vec!["snp-pileup".into(), "--reference".into()];
        args.push(p(&fasta).into());
        args.extend(opts_args(&o));
        args.extend(["-@", "3", "--batch-bytes", "20000"].map(String::from));
        args.push(p(&vcf).into());
        args.push(p(&out).into());
        args.extend(files.iter().map(|b| p(b).to_string()));
        let argv: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let run = sortase(&argv);
        if !run.ok() {
            failures.push(format!("{argv:?}: {}", run.failure()));
            continue;
        }
        let got = std::fs::read_to_string(&out).unwrap();
        if got != want {
            failures.push(format!(
                "{argv:?}: differs from the expected CSV ({} vs {} lines)",
                got.lines().count(),
                want.lines().count()
            ));
        }
    }
    // Without the reference (the FASTA is not reachable through @SQ UR or REF_PATH): one line
    // naming the @SQ and its M5.
    let out = d.join("noref.csv");
    let run = sortase(&["snp-pileup", p(&vcf), p(&out), p(&crams[0])]);
    let err = run.failure();
    if run.ok() || !(err.contains("@SQ SN:chr1") && err.contains("M5:")) {
        failures.push(format!("snp-pileup without the reference: {err}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
