//! `sortase fq2bam` against the pipeline it replaces, with minimap2's own CLI of the same version
//! as the library (built from the vendored sources by scripts/build-minimap2-cli.sh, or
//! `$SORTASE_MINIMAP2`): `minimap2 -ax PRESET | samblaster --ignoreUnmated | samtools sort`.
//! Records (`samtools view`, @PG aside) must be equal, duplicate flags included, on simulated
//! data: a small genome with a duplicated segment, read pairs with errors, indels, N and IUPAC
//! bases, reads past the reference ends, discordant and chimeric pairs, unmapped reads and mates,
//! exact duplicates; single-end and interleaved reads; long reads with chimeras (supplementary
//! alignments, SA tags, hard clips) under map-ont. Bad input fails with no output left.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::{assert_no_failures, check_same, p, records, run, sortase, tempdir, Rng};
use crate::oracle::oracle;

/// minimap2's CLI of the library's version, or `None` after printing SKIP.
fn minimap2() -> Option<&'static Path> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("SORTASE_MINIMAP2") {
            return Ok(PathBuf::from(bin));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-minimap2-cli.sh");
        let out = run(Path::new("bash"), &[], &[p(&script)]);
        match out.text().lines().last() {
            Some(path) if out.ok() && Path::new(path).is_file() => Ok(PathBuf::from(path)),
            _ => Err(format!(
                "cannot build minimap2's CLI: {}",
                out.stderr.lines().last().unwrap_or("")
            )),
        }
    });
    match found {
        Ok(bin) => Some(bin),
        Err(reason) => {
            crate::common::skip(reason);
            None
        }
    }
}

fn samblaster() -> Option<PathBuf> {
    crate::common::tool("SORTASE_SAMBLASTER", "/usr/bin/samblaster")
}

fn revcomp(s: &[u8]) -> Vec<u8> {
    s.iter()
        .rev()
        .map(|&c| match c {
            b'A' => b'T',
            b'C' => b'G',
            b'G' => b'C',
            b'T' => b'A',
            c => c,
        })
        .collect()
}

/// A reference of three contigs; the third carries a copy of a piece of the first (multi-mapping
/// reads, MAPQ 0).
fn genome(rng: &mut Rng) -> Vec<(String, Vec<u8>)> {
    let mut contigs: Vec<(String, Vec<u8>)> = [("c1", 60_000), ("c2", 30_000), ("c3", 12_000)]
        .iter()
        .map(|&(n, len)| (n.to_string(), rng.bases(len).into_bytes()))
        .collect();
    let copy = contigs[0].1[20_000..21_500].to_vec();
    contigs[2].1[4_000..5_500].copy_from_slice(&copy);
    contigs
}

fn write_fasta(path: &Path, contigs: &[(String, Vec<u8>)]) {
    let mut text = String::new();
    for (name, seq) in contigs {
        text += &format!(">{name}\n");
        for line in seq.chunks(70) {
            text += std::str::from_utf8(line).unwrap();
            text.push('\n');
        }
    }
    std::fs::write(path, text).unwrap();
}

/// Sequencing errors: substitutions at `sub` per base, rare short indels, an occasional N.
fn errors(rng: &mut Rng, s: &[u8], sub: u64, indel: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 8);
    for &c in s {
        let x = rng.below(10_000);
        if x < sub {
            out.push(b"ACGT"[rng.below(4) as usize]);
        } else if x < sub + indel {
            if rng.below(2) == 0 {
                out.push(c);
                let n = 1 + rng.below(3) as usize;
                out.extend(rng.bases(n).bytes());
            }
        } else if x < sub + indel + 3 {
            out.push(b'N');
        } else {
            out.push(c);
        }
    }
    out
}

fn fastq(name: &str, seq: &[u8], rng: &mut Rng) -> String {
    format!(
        "@{name}\n{}\n+\n{}\n",
        String::from_utf8_lossy(seq),
        rng.quals(seq.len())
    )
}

/// Short read pairs (150 bp, FR, inserts 200-600) of many kinds; returns (R1, R2) FASTQ text.
fn short_pairs(rng: &mut Rng, g: &[(String, Vec<u8>)], n: usize) -> (String, String) {
    const L: usize = 150;
    let (mut r1, mut r2) = (String::new(), String::new());
    let mut last: Option<(Vec<u8>, Vec<u8>)> = None;
    for i in 0..n {
        let name = format!("HWI-1:5:FC:1:{}:{}:{}", 1101 + i % 3, rng.below(20_000), i);
        let (a, b) = match (last.take(), rng.below(100)) {
            // An exact copy of the previous pair: a PCR duplicate under a new name.
            (Some(prev), 0..=9) => prev,
            (_, kind) => {
                let c = &g[rng.below(g.len() as u64) as usize].1;
                let ins = 200 + rng.below(400) as usize;
                // Some fragments hang over a contig end (clipped alignments).
                let start = if kind < 14 {
                    c.len() - ins + rng.below(60) as usize
                } else {
                    rng.below((c.len() - ins) as u64) as usize
                };
                let end = (start + ins).min(c.len());
                let mut frag = c[start..end].to_vec();
                if frag.len() < L + 10 {
                    frag.extend(rng.bases(L + 10 - frag.len()).bytes());
                }
                if rng.below(2) == 0 {
                    frag = revcomp(&frag);
                }
                let mut a = errors(rng, &frag[..L], 80, 4);
                let mut b = errors(rng, &revcomp(&frag)[..L], 80, 4);
                match kind {
                    // Unmapped read, or unmapped pair.
                    20..=21 => a = rng.bases(L).into_bytes(),
                    22 => (a, b) = (rng.bases(L).into_bytes(), rng.bases(L).into_bytes()),
                    // Discordant: R2 from elsewhere.
                    23..=25 => {
                        let o = &g[rng.below(g.len() as u64) as usize].1;
                        let s = rng.below((o.len() - L) as u64) as usize;
                        b = o[s..s + L].to_vec();
                    }
                    // Chimeric R1: 80 bases here, 70 from another contig.
                    26..=28 => {
                        let o = &g[(rng.below(2) + 1) as usize].1;
                        let s = rng.below((o.len() - 80) as u64) as usize;
                        a.truncate(80);
                        a.extend_from_slice(&o[s..s + 70]);
                    }
                    // IUPAC codes and lower case.
                    29 => {
                        a[10] = b'R';
                        a[40] = b'y';
                        a[41..60].make_ascii_lowercase();
                    }
                    _ => {}
                }
                (a, b)
            }
        };
        r1 += &fastq(&format!("{name}/1"), &a, rng);
        r2 += &fastq(&format!("{name}/2"), &b, rng);
        last = Some((a, b));
    }
    (r1, r2)
}

/// Long reads (1-6 kb, ~6% errors), a third of them chimeric across contigs.
fn long_reads(rng: &mut Rng, g: &[(String, Vec<u8>)], n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let mut read = Vec::new();
        let pieces = if i % 3 == 0 { 2 } else { 1 };
        for _ in 0..pieces {
            let c = &g[rng.below(g.len() as u64) as usize].1;
            let len = 1000 + rng.below(5000 / pieces) as usize;
            let s = rng.below((c.len() - len) as u64) as usize;
            let mut piece = c[s..s + len].to_vec();
            if rng.below(2) == 0 {
                piece = revcomp(&piece);
            }
            read.extend(errors(rng, &piece, 300, 300));
        }
        out += &fastq(&format!("long{i} comment"), &read, rng);
    }
    out
}

/// The whole data set in `dir`: ref.fa, r1.fq, r2.fq, se.fq (R1 plus interleaved pairs), long.fq.
pub(crate) fn dataset(dir: &Path, pairs: usize) {
    let mut rng = Rng::new(20);
    let g = genome(&mut rng);
    write_fasta(&dir.join("ref.fa"), &g);
    let (r1, r2) = short_pairs(&mut rng, &g, pairs);
    std::fs::write(dir.join("r1.fq"), &r1).unwrap();
    std::fs::write(dir.join("r2.fq"), &r2).unwrap();
    // Single-end: R1 without /1, and a few interleaved pairs (minimap2's fragment mode pairs
    // consecutive reads of one name).
    let mut se = String::new();
    let mut lines1 = r1.lines();
    let mut lines2 = r2.lines();
    let mut i = 0;
    while let Some(h) = lines1.next() {
        let rec1: Vec<&str> = [h].into_iter().chain(lines1.by_ref().take(3)).collect();
        let rec2: Vec<&str> = lines2.by_ref().take(4).collect();
        if i % 50 == 0 {
            se += &(rec1.join("\n") + "\n" + &rec2.join("\n") + "\n");
        } else {
            se +=
                &(rec1[0].trim_end_matches("/1").to_string() + "\n" + &rec1[1..].join("\n") + "\n");
        }
        i += 1;
    }
    std::fs::write(dir.join("se.fq"), se).unwrap();
    std::fs::write(dir.join("long.fq"), long_reads(&mut rng, &g, 40)).unwrap();
}

/// `minimap2 ARGS -o mm.sam`, then samblaster (if `mark`), then samtools sort; the sorted text.
fn pipeline(dir: &Path, mm_args: &[&str], mark: bool) -> Option<String> {
    let sam = dir.join("mm.sam");
    let mut args = mm_args.to_vec();
    args.extend(["-o", p(&sam)]);
    run(minimap2()?, &[], &args).expect_ok();
    let marked = if mark {
        let sb = samblaster()?;
        let out = dir.join("mm.sb.sam");
        run(
            &sb,
            &[],
            &["-q", "--ignoreUnmated", "-i", p(&sam), "-o", p(&out)],
        )
        .expect_ok();
        out
    } else {
        sam
    };
    let bam = dir.join("mm.bam");
    let o = oracle()?;
    o.run(&["sort", "-o", p(&bam), p(&marked)]).expect_ok();
    Some(o.run(&["view", p(&bam)]).expect_ok().text())
}

fn ours(bam: &Path) -> Option<String> {
    Some(oracle()?.run(&["view", p(bam)]).expect_ok().text())
}

fn dup_records(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.split('\t')
                .nth(1)
                .and_then(|f| f.parse::<u32>().ok())
                .is_some_and(|f| f & 0x400 != 0)
        })
        .count()
}

#[test]
fn issue_20_fq2bam_matches_minimap2_samblaster_samtools_sort() {
    let (Some(_), Some(_), Some(_)) = (minimap2(), oracle(), samblaster()) else {
        return;
    };
    let dir = tempdir();
    let d = dir.path();
    dataset(d, 1500);
    let f = |n: &str| p(&d.join(n)).to_string();
    let mut failures = Vec::new();

    // Paired, samblaster marking, on-the-fly index, one thread.
    let theirs = pipeline(
        d,
        &[
            "-ax",
            "sr",
            "-t",
            "2",
            &f("ref.fa"),
            &f("r1.fq"),
            &f("r2.fq"),
        ],
        true,
    )
    .unwrap();
    let out = d.join("pe.bam");
    sortase(&[
        "fq2bam",
        "-@",
        "1",
        "-x",
        &f("ref.fa"),
        "--write-index",
        "-o",
        p(&out),
        &f("r1.fq"),
        &f("r2.fq"),
    ])
    .expect_ok();
    let mine = ours(&out).unwrap();
    check_same(
        &mut failures,
        "paired sr, samblaster",
        &mine,
        &records(&theirs),
    );
    let csi = d.join("pe.re.csi");
    oracle()
        .unwrap()
        .run(&["index", "-c", "-o", p(&csi), p(&out)])
        .expect_ok();
    if std::fs::read(d.join("pe.bam.csi")).ok() != std::fs::read(&csi).ok() {
        failures.push("paired sr: the on-the-fly CSI differs from samtools index -c".into());
    }
    let dups = dup_records(&theirs);
    assert!(dups > 100, "weak test data: {dups} duplicates");

    // Paired, -R, --MD, 2 threads, a tiny memory budget (spills and merges), gzip and BGZF input.
    let gz = d.join("r1.fq.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, &std::fs::read(d.join("r1.fq")).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    sortase(&["bgzip", "-k", &f("r2.fq")]).expect_ok();
    let rg = "@RG\\tID:lane1\\tSM:s1";
    let theirs = pipeline(
        d,
        &[
            "-ax",
            "sr",
            "-R",
            rg,
            "--MD",
            &f("ref.fa"),
            &f("r1.fq"),
            &f("r2.fq"),
        ],
        false,
    )
    .unwrap();
    let out = d.join("pe-md.bam");
    sortase(&[
        "fq2bam",
        "-@",
        "2",
        "--max-memory",
        "3M",
        "-x",
        &f("ref.fa"),
        "-R",
        rg,
        "--MD",
        "--markdup",
        "none",
        "-o",
        p(&out),
        &f("r1.fq.gz"),
        &f("r2.fq.gz"),
    ])
    .expect_ok();
    check_same(
        &mut failures,
        "paired sr, -R --MD, gzip/BGZF, 3M",
        &ours(&out).unwrap(),
        &records(&theirs),
    );

    // Single-end (with a few interleaved pairs), samblaster marking.
    let theirs = pipeline(d, &["-ax", "sr", &f("ref.fa"), &f("se.fq")], true).unwrap();
    let out = d.join("se.bam");
    sortase(&["fq2bam", "-x", &f("ref.fa"), "-o", p(&out), &f("se.fq")]).expect_ok();
    check_same(
        &mut failures,
        "single-end sr, samblaster",
        &ours(&out).unwrap(),
        &records(&theirs),
    );

    // A prebuilt index.
    let mmi = d.join("ref.mmi");
    run(
        minimap2().unwrap(),
        &[],
        &["-x", "sr", "-d", p(&mmi), &f("ref.fa")],
    )
    .expect_ok();
    let out = d.join("mmi.bam");
    sortase(&[
        "fq2bam",
        "-x",
        p(&mmi),
        "--markdup",
        "none",
        "-o",
        p(&out),
        &f("r1.fq"),
        &f("r2.fq"),
    ])
    .expect_ok();
    let theirs = pipeline(d, &["-ax", "sr", p(&mmi), &f("r1.fq"), &f("r2.fq")], false).unwrap();
    check_same(
        &mut failures,
        "paired sr, .mmi",
        &ours(&out).unwrap(),
        &records(&theirs),
    );

    // Long reads (samblaster refuses reads longer than its --maxReadLength: no marking).
    let theirs = pipeline(d, &["-ax", "map-ont", &f("ref.fa"), &f("long.fq")], false).unwrap();
    let out = d.join("long.bam");
    sortase(&[
        "fq2bam",
        "--preset",
        "map-ont",
        "--markdup",
        "none",
        "-x",
        &f("ref.fa"),
        "-o",
        p(&out),
        &f("long.fq"),
    ])
    .expect_ok();
    check_same(
        &mut failures,
        "map-ont",
        &ours(&out).unwrap(),
        &records(&theirs),
    );
    assert!(
        theirs.contains("SA:Z:"),
        "no supplementary alignments in the long reads"
    );

    assert_no_failures("fq2bam vs minimap2 | samblaster | samtools sort", &failures);
}

/// Columns 1-11 (Picard rewrites the tags in its own order and adds `PG:Z:`).
fn core_fields(text: &str) -> String {
    text.lines()
        .map(|l| l.split('\t').take(11).collect::<Vec<_>>().join("\t") + "\n")
        .collect()
}

#[test]
fn issue_20_fq2bam_picard_matches_minimap2_samtools_sort_picard() {
    let Some(picard) = crate::common::tool("SORTASE_PICARD", "/usr/bin/PicardCommandLine") else {
        return crate::common::skip("Picard not installed (/usr/bin/PicardCommandLine)");
    };
    let (Some(_), Some(o)) = (minimap2(), oracle()) else {
        return;
    };
    let dir = tempdir();
    let d = dir.path();
    dataset(d, 1500);
    let f = |n: &str| p(&d.join(n)).to_string();
    let mut failures = Vec::new();
    let reference = f("ref.fa");
    for (label, reads) in [
        ("paired", vec![f("r1.fq"), f("r2.fq")]),
        ("single-end", vec![f("se.fq")]),
    ] {
        let mut mm = vec!["-ax", "sr", reference.as_str()];
        mm.extend(reads.iter().map(String::as_str));
        pipeline(d, &mm, false).unwrap();
        let marked = d.join("picard.bam");
        run(
            &picard,
            &[],
            &[
                "MarkDuplicates",
                &format!("I={}", f("mm.bam")),
                &format!("O={}", p(&marked)),
                &format!("M={}", f("picard.metrics")),
                "VALIDATION_STRINGENCY=SILENT",
            ],
        )
        .expect_ok();
        let theirs = o.run(&["view", p(&marked)]).expect_ok().text();
        let out = d.join("picard-ours.bam");
        let mut args = vec![
            "fq2bam",
            "--markdup",
            "picard",
            "--write-index",
            "-x",
            &reference,
        ];
        let out_s = p(&out).to_string();
        args.extend(["-o", &out_s]);
        args.extend(reads.iter().map(String::as_str));
        sortase(&args).expect_ok();
        let mine = ours(&out).unwrap();
        check_same(
            &mut failures,
            &format!("{label}: columns 1-11"),
            &core_fields(&mine),
            &core_fields(&theirs),
        );
        assert!(dup_records(&theirs) > 100, "{label}: weak test data");
    }
    assert_no_failures(
        "fq2bam --markdup picard vs minimap2 | samtools sort | Picard",
        &failures,
    );
}

#[test]
fn issue_20_fq2bam_bad_input_fails_and_leaves_nothing() {
    let dir = tempdir();
    let d = dir.path();
    let mut rng = Rng::new(3);
    let g = genome(&mut rng);
    write_fasta(&d.join("ref.fa"), &g[1..2]);
    let (r1, r2) = short_pairs(&mut rng, &g[1..2], 20);
    std::fs::write(d.join("r1.fq"), &r1).unwrap();
    std::fs::write(d.join("r2.fq"), &r2).unwrap();
    let short: String = r2.lines().take(4 * 19).map(|l| format!("{l}\n")).collect();
    std::fs::write(d.join("short.fq"), short).unwrap();
    std::fs::write(d.join("renamed.fq"), r2.replacen("/2\n", "x/2\n", 3)).unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, r1.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    std::fs::write(d.join("cut.fq.gz"), &gz[..gz.len() / 2]).unwrap();
    std::fs::write(d.join("junk.mmi"), b"this is not an index\n").unwrap();
    let mut mmi = b"MMI\x02".to_vec();
    mmi.extend_from_slice(&[
        10, 0, 0, 0, 15, 0, 0, 0, 14, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
    ]);
    std::fs::write(d.join("cut.mmi"), &mmi).unwrap();
    let f = |n: &str| p(&d.join(n)).to_string();
    let before = crate::common::dir_listing(d);
    let cases: [(&str, Vec<String>, &str); 7] = [
        (
            "unequal counts",
            vec![f("ref.fa"), f("r1.fq"), f("short.fq")],
            "ends after 19 records",
        ),
        (
            "mismatched names",
            vec![f("ref.fa"), f("r1.fq"), f("renamed.fq")],
            "differ in name",
        ),
        (
            "truncated gzip",
            vec![f("ref.fa"), f("cut.fq.gz"), f("r2.fq")],
            "cut.fq.gz",
        ),
        (
            "missing index",
            vec![f("none.fa"), f("r1.fq"), f("r2.fq")],
            "none.fa",
        ),
        (
            "wrong index",
            vec![f("junk.mmi"), f("r1.fq"), f("r2.fq")],
            "not a minimap2 index",
        ),
        (
            "truncated index",
            vec![f("cut.mmi"), f("r1.fq"), f("r2.fq")],
            "truncated minimap2 index",
        ),
        (
            "missing reads",
            vec![f("ref.fa"), f("r1.fq"), f("none.fq")],
            "none.fq",
        ),
    ];
    let mut failures = Vec::new();
    for (label, args, expect) in cases {
        let out = d.join("out.bam");
        let mut a = vec![
            "fq2bam",
            "--write-index",
            "-o",
            p(&out),
            "-x",
            &args[0],
            &args[1],
        ];
        a.push(&args[2]);
        let r = sortase(&a);
        if r.ok() || !r.stderr.contains(expect) {
            failures.push(format!(
                "{label}: exit {}, stderr {:?} (expected {expect:?})",
                r.status, r.stderr
            ));
        }
        let after = crate::common::dir_listing(d);
        if after != before {
            failures.push(format!("{label}: left {after:?}"));
        }
    }
    assert_no_failures("fq2bam bad input", &failures);
}
