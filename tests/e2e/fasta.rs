//! Issue 5: `sortase bgzip`, `faidx`, `loc` and `fetch` against htslib's `bgzip` (Debian's tabix
//! package) and samtools 1.24's faidx, byte for byte: the htslib-test FASTA/FASTQ files and generated
//! edge cases (multi-line, single-line, empty sequences, CR-LF, FASTQ, duplicates), plain and bgzipped,
//! with 1 and 4 threads; error cases compared on exit status and leftover files.

use std::path::{Path, PathBuf};

use crate::common::{assert_no_failures, p, run, skip, sortase, tempdir, Rng, Run};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::corpus_dir;

/// htslib's bgzip, or `None` after SKIP.
fn bgzip() -> Option<PathBuf> {
    let bin = PathBuf::from(std::env::var_os("SORTASE_BGZIP").unwrap_or_else(|| "bgzip".into()));
    match std::process::Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => Some(bin),
        _ => {
            skip("htslib bgzip not found (apt-get install tabix)");
            None
        }
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

/// Copies `src` into `dir` as `name` and returns the path.
fn copy_as(src: &Path, dir: &Path, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(src, &dst).unwrap();
    dst
}

/// bgzips `plain` with htslib's bgzip into `dir/name`.
fn htslib_bgzip(bgzip: &Path, plain: &Path, dir: &Path, name: &str) -> PathBuf {
    let out = run(bgzip, &[], &["-c", p(plain)]).expect_ok();
    let dst = dir.join(name);
    std::fs::write(&dst, out.stdout).unwrap();
    dst
}

/// Builds the index of `input` with both tools on separate copies; compares status, `.fai`, `.gzi`.
/// Returns whether samtools succeeded.
fn compare_build(st: &Oracle, input: &Path, label: &str, failures: &mut Vec<String>) -> bool {
    let mut indexed = false;
    let dir = tempdir();
    let name = input.file_name().unwrap().to_str().unwrap();
    let ours = copy_as(input, dir.path(), &format!("ours-{name}"));
    let theirs = copy_as(input, dir.path(), &format!("theirs-{name}"));
    for threads in ["1", "4"] {
        let a = sortase(&["faidx", "-@", threads, p(&ours)]);
        let b = st.run(&["faidx", p(&theirs)]);
        indexed = b.ok();
        if a.ok() != b.ok() {
            failures.push(format!(
                "{label} -@{threads}: sortase ok={} samtools ok={} ({} | {})",
                a.ok(),
                b.ok(),
                a.stderr.trim(),
                b.stderr.trim()
            ));
            continue;
        }
        for ext in [".fai", ".gzi"] {
            let (x, y) = (with_suffix(&ours, ext), with_suffix(&theirs, ext));
            match (x.exists(), y.exists()) {
                (true, true) if read(&x) != read(&y) => {
                    failures.push(format!("{label} -@{threads}: {ext} differs"))
                }
                (true, true) | (false, false) => {}
                (e1, e2) if !b.ok() && !e2 && e1 => {
                    failures.push(format!("{label}: sortase left a {ext} after failing"))
                }
                (e1, e2) => {
                    failures.push(format!("{label}: {ext} exists: ours {e1}, samtools {e2}"))
                }
            }
            let _ = std::fs::remove_file(&x);
            let _ = std::fs::remove_file(&y);
        }
    }
    indexed
}

/// Runs `faidx ARGS` with both tools (index built on the fly); compares stdout and exit status.
fn compare_fetch(
    st: &Oracle,
    input: &Path,
    args: &[&str],
    label: &str,
    failures: &mut Vec<String>,
) {
    let dir = tempdir();
    let name = input.file_name().unwrap().to_str().unwrap();
    let ours = copy_as(input, dir.path(), &format!("o-{name}"));
    let theirs = copy_as(input, dir.path(), &format!("t-{name}"));
    let mut a_args = vec!["faidx", "-@", "2", p(&ours)];
    a_args.extend_from_slice(args);
    let mut b_args = vec!["faidx", p(&theirs)];
    b_args.extend_from_slice(args);
    let (a, b) = (sortase(&a_args), st.run(&b_args));
    if a.ok() != b.ok() || a.stdout != b.stdout {
        failures.push(format!(
            "{label} faidx {}: status {} vs {}, stdout {} vs {} bytes{}",
            args.join(" "),
            a.status,
            b.status,
            a.stdout.len(),
            b.stdout.len(),
            first_text_diff(&a, &b)
        ));
    }
}

fn first_text_diff(a: &Run, b: &Run) -> String {
    crate::common::first_diff(&a.text(), &b.text())
        .map(|d| format!(": {d}"))
        .unwrap_or_default()
}

/// The htslib-test FASTA/FASTQ files.
fn corpus_fastx(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in [dir.to_path_buf(), dir.join("fastq")] {
        for e in std::fs::read_dir(&sub).into_iter().flatten() {
            let path = e.unwrap().path();
            if path
                .extension()
                .is_some_and(|x| x == "fa" || x == "fq" || x == "fasta" || x == "fastq")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn faidx_corpus_identical_to_samtools() {
    let (Some(st), Some(dir), Some(bgzip)) = (oracle(), corpus_dir(), bgzip()) else {
        return;
    };
    let files = corpus_fastx(&dir);
    assert!(
        files.len() >= 20,
        "only {} FASTA/FASTQ files in the corpus",
        files.len()
    );
    let mut failures = Vec::new();
    let tmp = tempdir();
    let mut indexed = 0;
    for f in &files {
        let label = f.file_name().unwrap().to_string_lossy().into_owned();
        indexed += usize::from(compare_build(st, f, &label, &mut failures));
        let gz = htslib_bgzip(&bgzip, f, tmp.path(), &format!("{label}.gz"));
        indexed += usize::from(compare_build(
            st,
            &gz,
            &format!("{label}.gz"),
            &mut failures,
        ));
        // Retrieval: the first sequences of the file, whole and cut.
        let Ok(idx) = std::fs::read_to_string(with_suffix(f, ".fai")).or_else(|_| {
            let copy = copy_as(f, tmp.path(), &format!("idx-{label}"));
            sortase(&["faidx", p(&copy)]);
            std::fs::read_to_string(with_suffix(&copy, ".fai"))
        }) else {
            continue;
        };
        let names: Vec<&str> = idx
            .lines()
            .take(3)
            .filter_map(|l| l.split('\t').next())
            .collect();
        let fastq = f.extension().is_some_and(|x| x == "fq");
        let mut args: Vec<String> = if fastq { vec!["-f".into()] } else { Vec::new() };
        for n in &names {
            args.push(n.to_string());
            args.push(format!("{n}:2-7"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        compare_fetch(st, f, &args, &label, &mut failures);
        compare_fetch(st, &gz, &args, &format!("{label}.gz"), &mut failures);
    }
    assert!(
        indexed >= 30,
        "samtools indexed only {indexed} corpus files: lost the corpus?"
    );
    assert_no_failures("faidx on the htslib-test corpus", &failures);
}

/// Generated inputs: (name, bytes).
fn edge_cases() -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = Rng::new(5);
    let mut multi = String::new();
    let mut single = String::new();
    for i in 0..200 {
        let len = rng.below(300) as usize + 1;
        let seq: String = rng.bases(len);
        multi.push_str(&format!(">m{i} some description {i}\n"));
        for c in seq.as_bytes().chunks(60) {
            multi.push_str(std::str::from_utf8(c).unwrap());
            multi.push('\n');
        }
        single.push_str(&format!(">s{i}\n{seq}\n"));
    }
    let crlf = multi.replace('\n', "\r\n");
    let mut fastq = String::new();
    for i in 0..100 {
        let len = rng.below(150) as usize + 1;
        fastq.push_str(&format!(
            "@r{i} x\n{}\n+\n{}\n",
            rng.bases(len),
            rng.quals(len)
        ));
    }
    let mut fastq_multi = String::new();
    for i in 0..50 {
        let (s, q) = (rng.bases(95), rng.quals(95));
        fastq_multi.push_str(&format!(
            "@q{i}\n{}\n{}\n+\n{}\n{}\n",
            &s[..50],
            &s[50..],
            &q[..50],
            &q[50..]
        ));
    }
    vec![
        ("multi.fa", multi.into_bytes()),
        ("single.fa", single.into_bytes()),
        ("crlf.fa", crlf.into_bytes()),
        (
            "empty_seqs.fa",
            b">e1\n>a desc\nACGT\nAC\n\n>e2\n>b\nAAAA\n>a\nTT\n".to_vec(),
        ),
        ("no_final_newline.fa", b">a\nACGTAC\nAC".to_vec()),
        ("last_empty.fa", b">a\nACGT\n>b\n".to_vec()),
        ("lone_marker_at_eof.fa", b">a\nAC\n\n>".to_vec()),
        ("name_at_eof.fa", b">a\nAC\n>b".to_vec()),
        ("ragged.fa", b">a\nACGT\nACGTA\n".to_vec()),
        ("blank_lines.fa", b"\n\n>a\nACG\n\n\n>b\nT\n".to_vec()),
        ("lower_iupac.fa", b">x\nacgtNNRYKMbdhv\nACGTU\n".to_vec()),
        (
            "spaces_in_header.fa",
            b">  lead tail\nACGT\n>tab\tname\nGG\n".to_vec(),
        ),
        (
            "colon_names.fa",
            b">chr1\nACGTACGT\n>chr1:2-3\nTTTT\n>HLA:1\nCCCC\n".to_vec(),
        ),
        ("reads.fq", fastq.into_bytes()),
        ("multi.fq", fastq_multi.into_bytes()),
        ("bad_quality.fq", b"@a\nACGT\n+\nII\n".to_vec()),
        ("empty.fa", Vec::new()),
    ]
}

#[test]
fn faidx_edge_cases_identical_to_samtools() {
    let (Some(st), Some(bgzip)) = (oracle(), bgzip()) else {
        return;
    };
    let dir = tempdir();
    let mut failures = Vec::new();
    for (name, bytes) in edge_cases() {
        let plain = dir.path().join(name);
        std::fs::write(&plain, &bytes).unwrap();
        let gz = htslib_bgzip(&bgzip, &plain, dir.path(), &format!("{name}.gz"));
        for input in [&plain, &gz] {
            let label = input.file_name().unwrap().to_string_lossy().into_owned();
            compare_build(st, input, &label, &mut failures);
            let fq = name.ends_with(".fq");
            let first = if fq { "r1" } else { "m3" };
            let cut = format!("{first}:5-70");
            let regions: Vec<Vec<&str>> = vec![
                vec!["a", "b", "a:2-3", "a:3-100", "a:10-20", "x", "x:3-9"],
                vec![first, cut.as_str(), "s0", "s1:1-1"],
                vec!["-i", first, "a", "x:2-10"],
                vec!["-n", "7", first, "a"],
                vec!["-n", "0", first, "a:2-"],
                vec!["--mark-strand", "sign", "-i", first, "a"],
                vec!["--mark-strand", "custom,<,>", first, "a"],
                vec!["-c", "nope", "a", first],
                vec!["a", "nope", "b"],
                vec![
                    "chr1",
                    "chr1:2-3",
                    "{chr1:2-3}",
                    "{chr1}:2-3",
                    "HLA:1",
                    "HLA:1:2-3",
                ],
                vec!["a:0-5", "a:0", "a:-2", "a:1,0-1,2"],
            ];
            for args in regions {
                let mut args = args;
                if fq {
                    args.insert(0, "-f");
                }
                compare_fetch(st, input, &args, &label, &mut failures);
            }
        }
    }
    assert_no_failures("faidx on generated edge cases", &failures);
}

#[test]
fn faidx_region_file_and_output_file() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let (_, bytes) = edge_cases().remove(0);
    let fa = dir.path().join("m.fa");
    std::fs::write(&fa, &bytes).unwrap();
    let regions = dir.path().join("regions.txt");
    std::fs::write(&regions, "m5\nm7:3-40\nm199\nm0:1-1\n").unwrap();
    let out = dir.path().join("out.fa");
    sortase(&["faidx", p(&fa), "-r", p(&regions), "-o", p(&out)]).expect_ok();
    let theirs = st.run(&["faidx", p(&fa), "-r", p(&regions)]).expect_ok();
    assert_eq!(read(&out), theirs.stdout);
    // A missing name with -o: error, and no output file left behind.
    std::fs::write(&regions, "m5\nnope\n").unwrap();
    let bad = dir.path().join("bad.fa");
    let r = sortase(&["faidx", p(&fa), "-r", p(&regions), "-o", p(&bad)]);
    assert!(!r.ok() && r.stderr.contains("nope"), "{}", r.stderr);
    assert!(!bad.exists());
    assert!(!crate::common::dir_listing(dir.path())
        .iter()
        .any(|n| n.contains("sortase")));
}

#[test]
fn faidx_refuses_plain_gzip_like_samtools() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let fa = dir.path().join("a.fa");
    std::fs::write(&fa, ">a\nACGT\n").unwrap();
    let py = "import gzip,sys;open(sys.argv[2],'wb').write(gzip.compress(open(sys.argv[1],'rb').read()))";
    let gz = dir.path().join("a.fa.gz");
    run(
        Path::new("python3"),
        &["-c".into(), py.into()],
        &[p(&fa), p(&gz)],
    )
    .expect_ok();
    let a = sortase(&["faidx", p(&gz)]);
    let b = st.run(&["faidx", p(&gz)]);
    assert!(!a.ok() && !b.ok());
    assert!(a.stderr.contains("gzip"), "{}", a.stderr);
    assert!(!with_suffix(&gz, ".fai").exists() || b.ok());
    let r = sortase(&["fetch", "-p", "/dev/null", p(&gz)]);
    assert!(!r.ok() && r.stderr.contains("plain gzip"), "{}", r.stderr);
    // bgzip -d decompresses plain gzip, as htslib's bgzip does.
    let d = sortase(&["bgzip", "-d", "-c", p(&gz)]).expect_ok();
    assert_eq!(d.stdout, b">a\nACGT\n");
    assert!(!sortase(&["bgzip", "-r", p(&gz)]).ok());
}

/// Text of `n` bytes that is not a multiple of anything in particular.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = rng.below(120) as usize;
        let line = rng.bases(len);
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.truncate(n);
    out
}

#[test]
fn bgzip_identical_to_htslib() {
    let Some(bgzip) = bgzip() else { return };
    let dir = tempdir();
    let mut failures = Vec::new();
    for (i, n) in [0usize, 1, 0xff00, 2 * 0xff00, 300_001]
        .into_iter()
        .enumerate()
    {
        let data = text(n, i as u64);
        let plain = dir.path().join(format!("in{i}.txt"));
        std::fs::write(&plain, &data).unwrap();
        let theirs = dir.path().join(format!("theirs{i}.gz"));
        let their_gzi = with_suffix(&theirs, ".gzi");
        // Levels 0 and 3-8 match htslib byte for byte; at 9 (libdeflate 12) libdeflate 1.14 (Debian's,
        // under bgzip) and 1.2x (ours) compress differently, and at 1-2 sortase deflates with ISA-L
        // (crates/bgzf `deflate`), so there only the block boundaries can agree.
        for level in ["-1", "1", "6", "9"] {
            // htslib's file and index at this level (compressed offsets depend on the level).
            let t = run(
                &bgzip,
                &[],
                &["-c", "-l", level, "-i", "-I", p(&their_gzi), p(&plain)],
            )
            .expect_ok();
            std::fs::write(&theirs, &t.stdout).unwrap();
            for threads in ["1", "4"] {
                let ours = dir.path().join(format!("ours{i}-{threads}-{level}.gz"));
                let ours_gzi = with_suffix(&ours, ".gzi");
                sortase(&[
                    "bgzip",
                    "-@",
                    threads,
                    "-l",
                    level,
                    "-o",
                    p(&ours),
                    "-i",
                    "-I",
                    p(&ours_gzi),
                    p(&plain),
                ])
                .expect_ok();
                let (a, b) = (read(&ours_gzi), read(&their_gzi));
                let uncompressed = |g: &[u8]| -> Vec<u8> {
                    g.chunks(8)
                        .enumerate()
                        .filter(|(i, _)| i % 2 == 0)
                        .flat_map(|(_, c)| c.to_vec())
                        .collect()
                };
                let same_library = !matches!(level, "1" | "9");
                if (same_library && a != b) || uncompressed(&a) != uncompressed(&b) {
                    failures.push(format!("{n} bytes -@{threads} -l{level}: .gzi differs"));
                }
                let back = sortase(&["bgzip", "-d", "-c", p(&ours)]).expect_ok();
                if back.stdout != data {
                    failures.push(format!("{n} bytes -@{threads} -l{level}: -d differs"));
                }
                let back = run(&bgzip, &[], &["-d", "-c", p(&ours)]).expect_ok();
                if back.stdout != data {
                    failures.push(format!("{n} bytes: htslib cannot read our output"));
                }
            }
        }
        // -r on htslib's file, and -b/-s against htslib's -b/-s.
        let copy = copy_as(&theirs, dir.path(), &format!("copy{i}.gz"));
        sortase(&["bgzip", "-r", p(&copy)]).expect_ok();
        if read(&with_suffix(&copy, ".gzi")) != read(&their_gzi) {
            failures.push(format!("{n} bytes: -r .gzi differs"));
        }
        let mut rng = Rng::new(n as u64);
        for _ in 0..8 {
            let off = rng.below(n as u64 + 1).to_string();
            let size = rng.below(70_000).to_string();
            let a = sortase(&["bgzip", "-b", &off, "-s", &size, p(&theirs)]);
            let b = run(&bgzip, &[], &["-b", &off, "-s", &size, p(&theirs)]);
            if a.stdout != b.stdout || !a.ok() {
                failures.push(format!(
                    "{n} bytes: -b {off} -s {size}: {} vs {} bytes {}",
                    a.stdout.len(),
                    b.stdout.len(),
                    a.stderr.trim()
                ));
            }
        }
    }
    assert_no_failures("bgzip against htslib", &failures);
}

/// An output past the 64 MiB from which sortase writes files with `O_DIRECT` (crates/bgzf
/// `direct_io`): stored blocks (level 0) of 80 MB of text, byte-identical to htslib's, whatever part
/// went to disk directly and however the unaligned tail was written.
#[test]
fn bgzip_large_output_written_directly_identical_to_htslib() {
    let Some(bgzip) = bgzip() else { return };
    let dir = tempdir();
    let plain = dir.path().join("big.txt");
    std::fs::write(&plain, text(80_000_123, 7)).unwrap();
    let theirs = run(&bgzip, &[], &["-c", "-l", "0", p(&plain)])
        .expect_ok()
        .stdout;
    let ours = dir.path().join("big.txt.gz");
    sortase(&["bgzip", "-@", "2", "-l", "0", "-o", p(&ours), p(&plain)]).expect_ok();
    let ours = read(&ours);
    assert!(
        ours.len() > 64 << 20,
        "output too small to reach direct writes"
    );
    assert_eq!(ours.len(), theirs.len(), "output sizes differ");
    assert!(ours == theirs, "bytes differ from htslib's bgzip -l 0");
}

#[test]
fn bgzip_files_keep_and_errors() {
    let Some(bgzip) = bgzip() else { return };
    let dir = tempdir();
    let data = text(200_000, 9);
    let f = dir.path().join("a.txt");
    std::fs::write(&f, &data).unwrap();
    // Default: FILE -> FILE.gz, input removed after success; -i writes FILE.gz.gzi.
    sortase(&["bgzip", "-i", p(&f)]).expect_ok();
    let gz = with_suffix(&f, ".gz");
    assert!(!f.exists() && gz.exists() && with_suffix(&gz, ".gzi").exists());
    // -d: back to FILE, .gz removed; -k keeps it.
    sortase(&["bgzip", "-d", "-k", p(&gz)]).expect_ok();
    assert_eq!(read(&f), data);
    assert!(gz.exists());
    // Existing output without -f: error, nothing touched.
    let r = sortase(&["bgzip", p(&f)]);
    assert!(
        !r.ok() && r.stderr.contains("already exists"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&f), data);
    sortase(&["bgzip", "-f", "-k", p(&f)]).expect_ok();
    assert!(f.exists());
    let theirs = run(&bgzip, &[], &["-c", p(&f)]).expect_ok();
    assert_eq!(
        read(&gz),
        theirs.stdout,
        "same level and libdeflate map: same bytes"
    );
    // -b past the end: error, no output; without a .gzi: error.
    std::fs::remove_file(with_suffix(&gz, ".gzi")).unwrap();
    assert!(!sortase(&["bgzip", "-b", "5", "-s", "5", p(&gz)]).ok());
    sortase(&["bgzip", "-r", p(&gz)]).expect_ok();
    let r = sortase(&["bgzip", "-b", "300000", "-s", "5", p(&gz)]);
    assert!(!r.ok() && r.stdout.is_empty());
    // A corrupt file: error naming the offset, input kept, no output left.
    let mut bad = read(&gz);
    let n = bad.len();
    bad[n / 2] ^= 0x55;
    let badgz = dir.path().join("bad.txt.gz");
    std::fs::write(&badgz, &bad).unwrap();
    let r = sortase(&["bgzip", "-d", p(&badgz)]);
    assert!(!r.ok() && r.stderr.contains("offset"), "{}", r.stderr);
    assert!(badgz.exists() && !dir.path().join("bad.txt").exists());
    assert!(!crate::common::dir_listing(dir.path())
        .iter()
        .any(|n| n.contains(".tmp")));
    // Concatenated BGZF files (an EOF block in the middle): -r as htslib.
    let cat = dir.path().join("cat.gz");
    let mut both = read(&gz);
    both.extend_from_slice(&read(&gz));
    std::fs::write(&cat, &both).unwrap();
    let cat2 = copy_as(&cat, dir.path(), "cat2.gz");
    sortase(&["bgzip", "-r", p(&cat)]).expect_ok();
    run(&bgzip, &[], &["-r", p(&cat2)]).expect_ok();
    assert_eq!(
        read(&with_suffix(&cat, ".gzi")),
        read(&with_suffix(&cat2, ".gzi"))
    );
}

/// A protein FASTA of `n` records (60-residue lines) and the records' text.
fn proteins(n: usize, seed: u64) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let mut rng = Rng::new(seed);
    let mut all = Vec::new();
    let mut recs = Vec::new();
    for i in 0..n {
        let len = 50 + rng.below(400) as usize;
        let seq: Vec<u8> = (0..len)
            .map(|_| b"ACDEFGHIKLMNPQRSTVWY"[rng.below(20) as usize])
            .collect();
        let name = format!("sp|P{i:05}|PROT_{i}");
        let mut rec = format!(">{name} protein {i} OS=Test\n").into_bytes();
        for c in seq.chunks(60) {
            rec.extend_from_slice(c);
            rec.push(b'\n');
        }
        all.extend_from_slice(&rec);
        recs.push((name, rec));
    }
    (all, recs)
}

#[test]
fn loc_and_fetch_cut_records_exactly() {
    let Some(bgzip) = bgzip() else { return };
    let dir = tempdir();
    let (all, recs) = proteins(6000, 11);
    let plain = dir.path().join("p.fa");
    std::fs::write(&plain, &all).unwrap();
    let gz = htslib_bgzip(&bgzip, &plain, dir.path(), "p.fa.gz");
    // .loc: same for plain and bgzipped input and any thread count; records tile the file.
    sortase(&["loc", "-@", "1", p(&plain)]).expect_ok();
    sortase(&["loc", "-@", "4", p(&gz)]).expect_ok();
    let loc = std::fs::read_to_string(with_suffix(&plain, ".loc")).unwrap();
    assert_eq!(
        loc,
        std::fs::read_to_string(with_suffix(&gz, ".loc")).unwrap()
    );
    let mut at = 0u64;
    for (line, (name, rec)) in loc.lines().zip(&recs) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f, [name.as_str(), &at.to_string(), &rec.len().to_string()]);
        at += rec.len() as u64;
    }
    assert_eq!(loc.lines().count(), recs.len());
    // 3000 random names (with repeats), in request order and --sorted.
    let mut rng = Rng::new(3);
    let picks: Vec<usize> = (0..3000)
        .map(|_| rng.below(recs.len() as u64) as usize)
        .collect();
    let names: String = picks.iter().map(|&i| format!("{}\n", recs[i].0)).collect();
    let names_file = dir.path().join("names.txt");
    std::fs::write(&names_file, &names).unwrap();
    let expected: Vec<u8> = picks.iter().flat_map(|&i| recs[i].1.clone()).collect();
    let mut sorted_picks = picks.clone();
    sorted_picks.sort();
    let expected_sorted: Vec<u8> = sorted_picks
        .iter()
        .flat_map(|&i| recs[i].1.clone())
        .collect();
    std::fs::remove_file(with_suffix(&gz, ".loc")).unwrap();
    std::fs::remove_file(with_suffix(&gz, ".gzi")).ok();
    for threads in ["1", "4"] {
        for input in [&plain, &gz] {
            let r = sortase(&["fetch", "-@", threads, "-n", p(&names_file), p(input)]).expect_ok();
            assert!(
                r.stdout == expected,
                "fetch -@{threads} {}",
                input.display()
            );
            let r = sortase(&[
                "fetch",
                "-@",
                threads,
                "--sorted",
                "-n",
                p(&names_file),
                p(input),
            ])
            .expect_ok();
            assert!(
                r.stdout == expected_sorted,
                "fetch --sorted {}",
                input.display()
            );
            // Whole blocks inflated and CRC-checked: the same bytes.
            let args = [
                "fetch",
                "-@",
                threads,
                "--verify",
                "-n",
                p(&names_file),
                p(input),
            ];
            let r = sortase(&args).expect_ok();
            assert!(r.stdout == expected, "fetch --verify {}", input.display());
        }
    }
    // OFFSET SIZE pairs, read from the .loc.
    let pairs: String = loc
        .lines()
        .step_by(7)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            format!("{} {}\n", f[1], f[2])
        })
        .collect();
    let pairs_file = dir.path().join("pairs.txt");
    std::fs::write(&pairs_file, pairs).unwrap();
    let expected: Vec<u8> = recs.iter().step_by(7).flat_map(|r| r.1.clone()).collect();
    let out = dir.path().join("out.fa");
    sortase(&["fetch", "-p", p(&pairs_file), "-o", p(&out), p(&gz)]).expect_ok();
    assert!(read(&out) == expected);
    // A name that is not there, a range past the end: error, nothing written.
    std::fs::write(&names_file, format!("{}\nno_such_protein\n", recs[0].0)).unwrap();
    let out2 = dir.path().join("out2.fa");
    let r = sortase(&["fetch", "-n", p(&names_file), "-o", p(&out2), p(&gz)]);
    assert!(
        !r.ok() && r.stderr.contains("no_such_protein") && !out2.exists(),
        "{}",
        r.stderr
    );
    std::fs::write(&pairs_file, format!("0 10\n{} 5\n", all.len() - 2)).unwrap();
    let r = sortase(&["fetch", "-p", p(&pairs_file), p(&gz)]);
    assert!(!r.ok() && r.stdout.is_empty(), "{}", r.stderr);
}

#[test]
fn loc_fastq_records() {
    let dir = tempdir();
    let mut rng = Rng::new(4);
    let mut text = Vec::new();
    let mut recs = Vec::new();
    for i in 0..500 {
        let len = 1 + rng.below(100) as usize;
        let mut q = rng.quals(len).into_bytes();
        q[0] = b'@'; // qualities may start with '@'
        let rec = format!(
            "@read{i} extra\n{}\n+\n{}\n",
            rng.bases(len),
            String::from_utf8(q).unwrap()
        );
        text.extend_from_slice(rec.as_bytes());
        recs.push(rec);
    }
    let fq = dir.path().join("r.fq");
    std::fs::write(&fq, &text).unwrap();
    sortase(&["loc", p(&fq)]).expect_ok();
    let loc = std::fs::read_to_string(with_suffix(&fq, ".loc")).unwrap();
    assert_eq!(loc.lines().count(), 500);
    let names = dir.path().join("n.txt");
    std::fs::write(&names, "read7\nread3\n").unwrap();
    let r = sortase(&["fetch", "-n", p(&names), p(&fq)]).expect_ok();
    assert_eq!(r.text(), format!("{}{}", recs[7], recs[3]));
}
