//! `sortase agd import` from FASTQ (issue 19) against `samtools import`: the dataset made from
//! FASTQ equals, chunk file for chunk file, the dataset made from samtools import's BAM of the same
//! files, its export prints as samtools import's output, and `agd export -O fastq` gives back an
//! interleaved FASTQ byte for byte. Bad FASTQ fails with one line naming the file and leaves nothing.

use std::path::{Path, PathBuf};

use crate::common::{assert_no_failures, check_same, dir_listing, p, sortase, tempdir, Rng, Run};
use crate::oracle::{oracle, Oracle};

/// `n` reads named `prefix:<i>` with `suffix` (e.g. `/1`) and `comment` after a space.
fn fastq(rng: &mut Rng, n: usize, prefix: &str, suffix: &str, comment: &str) -> String {
    let mut s = String::new();
    for i in 0..n {
        let len = 1 + rng.below(60) as usize;
        let name = format!("@{prefix}:{i}{suffix}");
        let header = if comment.is_empty() {
            name
        } else {
            format!("{name} {comment}")
        };
        s.push_str(&format!(
            "{header}\n{}\n+\n{}\n",
            rng.bases(len),
            rng.quals(len)
        ));
    }
    s
}

/// R1 and R2 of `n` pairs, Illumina style (`@name 1:N:0:1`).
fn pairs(rng: &mut Rng, n: usize) -> (String, String) {
    (
        fastq(rng, n, "HWI:1:FC", "", "1:N:0:1"),
        fastq(rng, n, "HWI:1:FC", "", "2:N:0:1"),
    )
}

/// An interleaved file: `/1` `/2` pairs with single reads (no suffix) between them.
fn interleaved(rng: &mut Rng, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let one = fastq(rng, 1, &format!("p{i}"), "/1", "");
        let two = fastq(rng, 1, &format!("p{i}"), "/2", "");
        s.push_str(&one);
        s.push_str(&two);
        if i % 3 == 0 {
            s.push_str(&fastq(rng, 1, &format!("s{i}"), "", ""));
        }
    }
    s
}

/// gzip-compresses `text` into `path` (plain gzip, as most sequencers' FASTQ.gz).
fn write_gz(path: &Path, text: &str) {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

/// The chunk files and manifest of dataset `ds`: (relative path, bytes), the manifest without
/// its provenance (the command lines differ).
fn dataset_files(ds: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for group in dir_listing(ds) {
        let dir = ds.join(&group);
        if group == "manifest.json" {
            let text = std::fs::read_to_string(&dir).unwrap();
            let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
            m.as_object_mut().unwrap().remove("provenance");
            out.push((group, m.to_string().into_bytes()));
            continue;
        }
        for f in dir_listing(&dir) {
            out.push((format!("{group}/{f}"), std::fs::read(dir.join(&f)).unwrap()));
        }
    }
    out
}

/// Imports with `ours` (FASTQ arguments of `sortase agd import`) and `theirs` (of `samtools
/// import`), and checks: `agd export -O sam` prints samtools import's SAM (`--no-PG`), and the
/// dataset equals the one imported from samtools import's BAM, file for file.
fn compare(
    st: &Oracle,
    dir: &Path,
    label: &str,
    ours: &[&str],
    theirs: &[&str],
    failures: &mut Vec<String>,
) -> Option<PathBuf> {
    let ds = dir.join(format!("{label}.ds"));
    for (chunk, threads) in [("3", "1"), ("1000", "4")] {
        let _ = std::fs::remove_dir_all(&ds);
        let mut args = vec![
            "agd",
            "import",
            "-@",
            threads,
            "--chunk-size",
            chunk,
            "-o",
            p(&ds),
        ];
        args.extend_from_slice(ours);
        let run = sortase(&args);
        if !run.ok() {
            failures.push(format!("{label}: {}", run.failure()));
            return None;
        }
        let sam = sortase(&["agd", "export", "-O", "sam", p(&ds)]);
        let mut st_args = vec!["import", "--no-PG", "-O", "sam"];
        st_args.extend_from_slice(theirs);
        let expected = st.run(&st_args);
        if !expected.ok() || !sam.ok() {
            failures.push(format!(
                "{label}: {} / {}",
                sam.failure(),
                expected.failure()
            ));
            return None;
        }
        check_same(
            failures,
            &format!("{label}, chunks of {chunk}: SAM"),
            &sam.text(),
            &expected.text(),
        );
        let bam = dir.join(format!("{label}.bam"));
        let mut st_args = vec!["import", "--no-PG", "-o", p(&bam)];
        st_args.extend_from_slice(theirs);
        st.run(&st_args).expect_ok();
        let from_bam = dir.join(format!("{label}.bam.ds"));
        let _ = std::fs::remove_dir_all(&from_bam);
        sortase(&[
            "agd",
            "import",
            "--chunk-size",
            chunk,
            p(&bam),
            "-o",
            p(&from_bam),
        ])
        .expect_ok();
        if dataset_files(&ds) != dataset_files(&from_bam) {
            failures.push(format!(
                "{label}, chunks of {chunk}: the dataset differs from the one imported from samtools import's BAM"
            ));
        }
    }
    Some(ds)
}

/// Single, paired (R1/R2 as arguments and as -1 -2, plain and gzip), interleaved (-s and as one
/// argument), unpaired plus pairs with a read group: each as samtools import makes it.
#[test]
fn agd_fastq_import_equals_samtools_import() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let mut rng = Rng::new(19);
    let (r1, r2) = pairs(&mut rng, 40);
    let il = interleaved(&mut rng, 30);
    let single = fastq(&mut rng, 25, "single", "", "comment here");
    // samtools import reads one record of each file per round: -0 with -1 -2 needs as many reads.
    let single40 = fastq(&mut rng, 40, "single", "/3", "");
    for (name, text) in [
        ("r1.fq", &r1),
        ("r2.fq", &r2),
        ("il.fq", &il),
        ("s.fq", &single),
        ("s40.fq", &single40),
    ] {
        std::fs::write(d.join(name), text).unwrap();
    }
    write_gz(&d.join("r1.fq.gz"), &r1);
    write_gz(&d.join("r2.fq.gz"), &r2);
    write_gz(&d.join("il.fastq.gz"), &il);
    let f = |n: &str| d.join(n).to_str().unwrap().to_string();
    let (r1, r2, il, s, s40) = (f("r1.fq"), f("r2.fq"), f("il.fq"), f("s.fq"), f("s40.fq"));
    let (r1gz, r2gz, ilgz) = (f("r1.fq.gz"), f("r2.fq.gz"), f("il.fastq.gz"));
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        ("pair-args", vec![&r1, &r2], vec![&r1, &r2]),
        (
            "pair-gz",
            vec!["-1", &r1gz, "-2", &r2gz],
            vec!["-1", &r1gz, "-2", &r2gz],
        ),
        ("single", vec!["-0", &s], vec!["-0", &s]),
        ("single-arg", vec![&s], vec![&s]),
        ("interleaved", vec!["-s", &il], vec!["-s", &il]),
        ("interleaved-gz-arg", vec![&ilgz], vec![&ilgz]),
        ("read1-only", vec!["-1", &r1], vec!["-1", &r1]),
        (
            "mixed-rg",
            vec!["-0", &s40, "-1", &r1, "-2", &r2, "-R", "grp"],
            vec!["-0", &s40, "-1", &r1, "-2", &r2, "-R", "grp"],
        ),
        (
            "rg-line",
            vec!["-s", &il, "-r", "ID:x", "-r", "SM:y"],
            vec!["-s", &il, "-r", "ID:x", "-r", "SM:y"],
        ),
    ];
    let mut failures = Vec::new();
    for (label, ours, theirs) in &cases {
        compare(st, d, label, ours, theirs, &mut failures);
    }
    assert_no_failures("FASTQ import vs samtools import", &failures);
}

/// FASTQ → AGD → FASTQ: an interleaved file with `/1` `/2` names (and single reads without a
/// suffix), no comments, a bare `+` line, one line of upper-case bases and one of qualities comes
/// back byte for byte. What is not kept: comments after the name, the name repeated on the `+` line
/// (exported as a bare `+`); R1/R2 files come back interleaved with `/1` `/2` appended, as samtools
/// fastq prints samtools import's BAM.
#[test]
fn agd_fastq_round_trip() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let mut rng = Rng::new(7);
    let il = interleaved(&mut rng, 50);
    let path = d.join("il.fq");
    std::fs::write(&path, &il).unwrap();
    let ds = d.join("il.ds");
    sortase(&["agd", "import", "--chunk-size", "4", p(&path), "-o", p(&ds)]).expect_ok();
    let back = sortase(&["agd", "export", "-O", "fastq", p(&ds)]).expect_ok();
    assert!(back.stdout == il.as_bytes(), "FASTQ round trip differs");

    let plus = il.replace("\n+\n", "\n+name\n");
    let path = d.join("plus.fq");
    std::fs::write(&path, &plus).unwrap();
    let ds = d.join("plus.ds");
    sortase(&["agd", "import", p(&path), "-o", p(&ds)]).expect_ok();
    let back = sortase(&["agd", "export", "-O", "fastq", p(&ds)]).expect_ok();
    assert!(
        back.stdout == il.as_bytes(),
        "a '+name' line is not exported as '+'"
    );

    let (r1, r2) = pairs(&mut rng, 20);
    let (a, b) = (d.join("r1.fq"), d.join("r2.fq"));
    std::fs::write(&a, r1).unwrap();
    std::fs::write(&b, r2).unwrap();
    let ds = d.join("pairs.ds");
    sortase(&["agd", "import", p(&a), p(&b), "-o", p(&ds)]).expect_ok();
    let ours = sortase(&["agd", "export", "-O", "fastq", p(&ds)]).expect_ok();
    let bam = d.join("pairs.bam");
    st.run(&["import", "-o", p(&bam), p(&a), p(&b)]).expect_ok();
    let theirs = st.run(&["fastq", p(&bam)]).expect_ok();
    assert_eq!(ours.text(), theirs.text());
}

/// A failed run whose stderr is one line holding every piece of `expected`.
fn assert_one_line_error(run: &Run, expected: &[&str]) {
    assert!(!run.ok(), "`{}` succeeded on bad input", run.cmd);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {}", run.stderr);
    for e in expected {
        assert!(lines[0].contains(e), "{:?} lacks {e:?}", lines[0]);
    }
}

/// A truncated record, R1/R2 of different lengths, names that do not pair, a FASTA record: one
/// line naming the file, and no dataset (nor a hidden temporary directory) left behind.
#[test]
fn agd_fastq_bad_input_errors() {
    let tmp = tempdir();
    let d = tmp.path();
    let mut rng = Rng::new(3);
    let (r1, r2) = pairs(&mut rng, 5);
    let write = |name: &str, text: &str| {
        let path = d.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let good1 = write("r1.fq", &r1);
    let good2 = write("r2.fq", &r2);
    let cut = r2.len() - 5;
    let truncated = write("cut.fq", &r2[..cut]);
    let short: String = r2.lines().take(12).map(|l| format!("{l}\n")).collect();
    let short = write("short.fq", &short);
    let renamed = write("renamed.fq", &r2.replacen("HWI:1:FC:2", "other:2", 1));
    let fasta = write("x.fq", ">r\nACGT\n");
    let sam = write("r.sam", "r\t4\t*\t0\t0\t*\t*\t0\t0\tA\tI\n");
    let gz = d.join("cut.fq.gz");
    write_gz(&gz, &r2[..cut]);
    let gz = gz.to_str().unwrap().to_string();
    let before = dir_listing(d);
    let ds = d.join("ds");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec![&good1, &truncated],
            vec!["cut.fq", "record 5", "truncated"],
        ),
        (
            vec!["-1", &good1, "-2", &gz],
            vec!["cut.fq.gz", "record 5", "truncated"],
        ),
        (
            vec![&good1, &short],
            vec!["short.fq ends after 3 records", "r1.fq has more"],
        ),
        (
            vec![&short, &good1],
            vec!["short.fq ends after 3 records", "r1.fq has more"],
        ),
        (
            vec![&good1, &renamed],
            vec!["renamed.fq", "record 3", "other:2"],
        ),
        (vec!["-0", &fasta], vec!["x.fq", "record 1", "FASTA"]),
        // Which inputs are FASTQ is the library's reading (`AgdImportJob::from_inputs`).
        (
            vec!["-1", &good1, &good2],
            vec!["with -0/-1/-2/-s or as arguments, not both"],
        ),
        (vec![&sam, &good1], vec!["r.sam: not FASTQ"]),
        (
            vec!["-R", "grp", &sam],
            vec!["-R and -r apply to FASTQ input only"],
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["agd", "import", "--chunk-size", "2", "-o", p(&ds)];
        all.extend_from_slice(&args);
        let run = sortase(&all);
        assert_one_line_error(&run, &expected);
        assert_eq!(dir_listing(d), before, "`{}` left files", run.cmd);
    }
    sortase(&["agd", "import", "-o", p(&ds), &good1, &good2]).expect_ok();
}
