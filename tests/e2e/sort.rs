//! `sortase sort` against `samtools sort` (1.24): coordinate, `-n`, `-N` and `-t TAG` orders on the
//! htslib corpus, the edge-case generators and tie-heavy inputs, each with a large budget (in memory)
//! and a tiny one with a fan-in of 3 (many runs, compaction); output bytes identical for any `-@` and
//! memory; `--write-index` identical to `samtools index`; signals, bad input and options.

use std::path::{Path, PathBuf};

use crate::checks::oracle_text;
use crate::common::{assert_no_failures, check_same, dir_listing, line, p, sortase, tempdir, Rng};
use crate::edge_cases;
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::{corpus_dir, find_sams, par_map};

/// Orders compared everywhere.
const ORDERS: &[&[&str]] = &[&[], &["-n"], &["-N"], &["-t", "RG"]];
/// In memory, and out of core with many runs and compaction.
const BUDGETS: &[&[&str]] = &[&[], &["--max-memory", "1", "--max-fan-in", "3"]];

/// Sorts `input` with samtools and with sortase (every order × budget × a thread count) and compares
/// the decoded outputs, header included. Returns failures; `Err` if samtools rejects the input.
fn compare_sorts(
    st: &Oracle,
    input: &Path,
    dir: &Path,
    label: &str,
) -> Result<Vec<String>, String> {
    let mut failures = Vec::new();
    for (k, order) in ORDERS.iter().enumerate() {
        let theirs = dir.join(format!("theirs{k}.bam"));
        let mut args = vec!["sort", "--no-PG", "-o", p(&theirs)];
        args.extend_from_slice(order);
        args.push(p(input));
        let r = st.run(&args);
        if !r.ok() {
            return Err(r.failure());
        }
        let expected = oracle_text(st, &theirs, &[])?;
        for (b, budget) in BUDGETS.iter().enumerate() {
            let ours = dir.join(format!("ours{k}-{b}.bam"));
            let threads = if b == 0 { "4" } else { "1" };
            let mut args = vec!["sort", "--no-PG", "-@", threads, "-o", p(&ours)];
            args.extend_from_slice(order);
            args.extend_from_slice(budget);
            args.push(p(input));
            let what = format!("{label} sort {}", args[1..].join(" "));
            let r = sortase(&args);
            if !r.ok() {
                failures.push(format!("{what}: {}", r.failure()));
                continue;
            }
            match oracle_text(st, &ours, &[]) {
                Ok(got) => check_same(&mut failures, &what, &got, &expected),
                Err(e) => failures.push(format!("{what}: oracle cannot read our output: {e}")),
            }
        }
    }
    Ok(failures)
}

#[test]
fn sort_corpus_matches_samtools() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&dir, &mut sams);
    sams.sort();
    let results = par_map(&sams, |sam| {
        let tmp = tempdir();
        let name = sam.strip_prefix(&dir).unwrap().display().to_string();
        (name.clone(), compare_sorts(st, sam, tmp.path(), &name))
    });
    let (mut compared, mut failures) = (0, Vec::new());
    for (name, r) in results {
        match r {
            Ok(f) => {
                compared += 1;
                failures.extend(f);
            }
            Err(why) => eprintln!("sort corpus: samtools rejects {name}: {why}"),
        }
    }
    eprintln!("sort corpus: compared {compared} of {} files", sams.len());
    assert!(compared > 60, "only {compared} corpus files sorted");
    assert_no_failures("sort on the htslib corpus", &failures);
}

/// Ties everywhere: equal coordinates and strands under different names (input order must hold),
/// names differing only in digits, read1/read2/secondary/supplementary of one name, unmapped reads
/// with and without placed mates, RG present/absent, tags of mixed types for `-t`.
fn ties() -> String {
    let mut s = edge_cases::rows(
        "@HD VN:1.6 SO:unsorted
         @SQ SN:chr1 LN:100000
         @SQ SN:chr2 LN:100000
         @RG ID:b
         @RG ID:a",
    );
    let names = [
        "a9", "a10", "a09", "a1", "a01", "a001", "b2c10", "b2c9", "b02c9", "x", "x0", "x00",
        "r:1:2", "r:1:10", "r:01:3", "A9", "a9b", "a9a",
    ];
    let mut rng = Rng::new(42);
    for round in 0..3 {
        for (i, name) in names.iter().enumerate() {
            for flag in [99u16, 147, 355, 2147, 65, 129, 97, 145, 4, 73, 133, 137, 69] {
                let unmapped = flag & 4 != 0;
                let (rname, pos) = match rng.below(5) {
                    0 => ("*", 0),
                    1 => ("chr2", 500),
                    _ => ("chr1", 1000 + 10 * (i as u64 % 3)),
                };
                let (rname, pos) = if unmapped && rng.below(2) == 0 {
                    ("*", 0)
                } else {
                    (rname, pos)
                };
                let cigar = if unmapped || rname == "*" { "*" } else { "5M" };
                let rg = match (round + i) % 3 {
                    0 => "RG:Z:a".to_string(),
                    1 => "RG:Z:b".to_string(),
                    _ => String::new(),
                };
                let nm = match rng.below(4) {
                    0 => format!("NM:i:{}", rng.below(3)),
                    1 => format!("NM:f:{}.5", rng.below(3)),
                    2 => "NM:Z:1".to_string(),
                    _ => "NM:A:x".to_string(),
                };
                let pos_s = pos.to_string();
                let mut fields = vec![
                    *name,
                    &format!("{flag}"),
                    rname,
                    &pos_s,
                    "30",
                    cigar,
                    "*",
                    "0",
                    "0",
                    "ACGTA",
                    "IIIII",
                ]
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>();
                if !rg.is_empty() {
                    fields.push(rg);
                }
                fields.push(nm);
                fields.push(format!("XI:i:{round}"));
                let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
                s += &line(&refs);
            }
        }
    }
    s
}

/// More references than a signed 16-bit count, reads spread over them and unplaced at the end.
fn many_references() -> String {
    let mut s = edge_cases::rows("@HD VN:1.6");
    let n = 40_000;
    for i in 0..n {
        s += &line(&["@SQ", &format!("SN:c{i}"), "LN:1000"]);
    }
    let mut rng = Rng::new(9);
    for i in 0..3000 {
        let tid = rng.below(n);
        let pos = 1 + rng.below(900);
        let flag = if i % 7 == 0 { "16" } else { "0" };
        s += &line(&[
            &format!("q{}", rng.below(500)),
            flag,
            &format!("c{tid}"),
            &pos.to_string(),
            "9",
            "4M",
            "*",
            "0",
            "0",
            "ACGT",
            "*",
        ]);
    }
    s
}

#[test]
fn sort_generated_inputs_match_samtools() {
    let Some(st) = oracle() else { return };
    let mut cases: Vec<(String, String)> = edge_cases::all()
        .into_iter()
        .map(|(n, g)| (n.to_string(), g()))
        .collect();
    cases.push(("ties".into(), ties()));
    cases.push(("many_references".into(), many_references()));
    let results = par_map(&cases, |(name, text)| {
        let tmp = tempdir();
        let sam = tmp.path().join(format!("{name}.sam"));
        std::fs::write(&sam, text).unwrap();
        compare_sorts(st, &sam, tmp.path(), name).unwrap_or_else(|e| vec![format!("{name}: {e}")])
    });
    let failures: Vec<String> = results.into_iter().flatten().collect();
    assert_no_failures("sort on generated inputs", &failures);
}

/// A BAM of `n` random records over three references (some unmapped), made by samtools.
pub(crate) fn random_bam(st: &Oracle, dir: &Path, n: usize) -> PathBuf {
    let mut s = edge_cases::rows(
        "@HD VN:1.6 SO:unsorted
         @SQ SN:chr1 LN:2000000
         @SQ SN:chr2 LN:2000000
         @SQ SN:chr3 LN:500",
    );
    let mut rng = Rng::new(n as u64);
    for i in 0..n {
        let seq = rng.bases(100);
        let qual = rng.quals(100);
        let (rname, pos, flag) = match rng.below(20) {
            0 => ("*", 0, 4),
            1 => ("chr3", 1 + rng.below(400), 16),
            2 => ("chr2", 1 + rng.below(1_900_000), 16),
            _ => ("chr1", 1 + rng.below(1_900_000), 0),
        };
        let cigar = if flag == 4 { "*" } else { "100M" };
        s += &line(&[
            &format!("read{}", rng.below(n as u64)),
            &flag.to_string(),
            rname,
            &pos.to_string(),
            "60",
            cigar,
            "*",
            "0",
            "0",
            &seq,
            &qual,
            &format!("XI:i:{i}"),
        ]);
    }
    let sam = dir.join("random.sam");
    std::fs::write(&sam, s).unwrap();
    let bam = dir.join("random.bam");
    st.run(&["view", "-b", "-o", p(&bam), p(&sam)]).expect_ok();
    bam
}

#[test]
fn sort_bytes_identical_for_any_threads_and_memory() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = random_bam(st, tmp.path(), 60_000);
    for order in ORDERS {
        let mut outputs = Vec::new();
        for (i, extra) in [
            &["-@", "1"][..],
            &["-@", "4"],
            &["-@", "2", "-m", "1M"],
            &["-@", "3", "--max-memory", "200K", "--max-fan-in", "2"],
        ]
        .iter()
        .enumerate()
        {
            let out = tmp.path().join(format!("o{i}.bam"));
            let mut args = vec!["sort", "--no-PG", "-o", p(&out)];
            args.extend_from_slice(order);
            args.extend_from_slice(extra);
            args.push(p(&bam));
            sortase(&args).expect_ok();
            outputs.push((extra.join(" "), std::fs::read(&out).unwrap()));
        }
        for (label, bytes) in &outputs[1..] {
            assert!(
                bytes == &outputs[0].1,
                "sort {order:?}: output with {label} differs from -@ 1"
            );
        }
    }
    // No temporary files left next to the outputs.
    let left: Vec<String> = dir_listing(tmp.path())
        .into_iter()
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn sort_write_index_matches_samtools_index() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = random_bam(st, tmp.path(), 40_000);
    let d = tmp.path();
    let at = |n: &str| p(&d.join(n)).to_string();
    for (target, index, oracle_flags) in [
        (at("a.bam"), "a.bam.csi", &["-c"][..]),
        (
            format!("{}##idx##{}", at("b.bam"), at("b.bam.bai")),
            "b.bam.bai",
            &[][..],
        ),
        (
            format!("{}##idx##{}", at("c.bam"), at("c.custom.csi")),
            "c.custom.csi",
            &["-c"][..],
        ),
    ] {
        for extra in [&[][..], &["--max-memory", "300K"][..]] {
            let mut args = vec!["sort", "--write-index", "-@", "2", "-o", &target];
            args.extend_from_slice(extra);
            args.push(p(&bam));
            sortase(&args).expect_ok();
            let data = PathBuf::from(target.split("##").next().unwrap());
            let theirs = d.join("theirs.idx");
            let mut a = vec!["index"];
            a.extend_from_slice(oracle_flags);
            a.extend_from_slice(&["-o", p(&theirs), p(&data)]);
            st.run(&a).expect_ok();
            let ours = std::fs::read(d.join(index)).expect("index written");
            assert!(
                ours == std::fs::read(&theirs).unwrap(),
                "{target} {extra:?}: index differs from samtools index"
            );
        }
    }
    // --index-format bai without ##idx## names the index out.bam.bai.
    let out = d.join("e.bam");
    sortase(&[
        "sort",
        "--write-index",
        "--index-format",
        "bai",
        "-o",
        p(&out),
        p(&bam),
    ])
    .expect_ok();
    assert!(d.join("e.bam.bai").exists());
}

#[test]
fn sort_sam_and_stdin_stdout() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = random_bam(st, tmp.path(), 5_000);
    let theirs = st
        .run(&["sort", "--no-PG", "-O", "sam", p(&bam)])
        .expect_ok();
    let ours = sortase(&["sort", "--no-PG", "-O", "sam", p(&bam)]).expect_ok();
    let mut failures = Vec::new();
    check_same(&mut failures, "sort -O sam", &ours.text(), &theirs.text());
    let sam_out = tmp.path().join("x.sam");
    sortase(&["sort", "--no-PG", "-n", "-o", p(&sam_out), p(&bam)]).expect_ok();
    let theirs_n = st
        .run(&["sort", "--no-PG", "-n", "-O", "sam", p(&bam)])
        .expect_ok();
    check_same(
        &mut failures,
        "sort -n -o x.sam",
        &std::fs::read_to_string(&sam_out).unwrap(),
        &theirs_n.text(),
    );
    assert_no_failures("SAM output", &failures);
}

#[test]
fn sort_pg_line_and_header_sort_order() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = random_bam(st, tmp.path(), 100);
    let out = tmp.path().join("pg.bam");
    sortase(&["sort", "-o", p(&out), p(&bam)]).expect_ok();
    let header = st.run(&["view", "-H", p(&out)]).expect_ok().text();
    assert!(
        header.starts_with("@HD\tVN:1.6\tSO:coordinate\n"),
        "{header}"
    );
    assert!(
        header.contains("@PG\tID:sortase\tPN:sortase\tPP:samtools"),
        "{header}"
    );
}

#[test]
fn sort_refuses_bad_input_and_options_leaving_nothing() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let bam = random_bam(st, d, 20_000);
    let bytes = std::fs::read(&bam).unwrap();
    let truncated = d.join("truncated.bam");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let mut corrupt = bytes.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0xff;
    let corrupt_path = d.join("corrupt.bam");
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    let out_dir = d.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("o.bam");
    for (input, extra) in [
        (&truncated, &[][..]),
        (&truncated, &["--max-memory", "100K"][..]),
        (&corrupt_path, &["--max-memory", "100K"][..]),
        (&d.join("missing.bam"), &[][..]),
    ] {
        let mut args = vec!["sort", "--write-index", "-T", p(&out_dir), "-o", p(&out)];
        args.extend_from_slice(extra);
        args.push(p(input));
        let r = sortase(&args);
        assert!(!r.ok(), "sort of {} succeeded", input.display());
        let msg = r.stderr.trim();
        assert_eq!(msg.lines().count(), 1, "not one line: {msg}");
        assert!(
            msg.contains(p(input)),
            "error does not name the file: {msg}"
        );
        assert!(
            dir_listing(&out_dir).is_empty(),
            "left: {:?}",
            dir_listing(&out_dir)
        );
    }
    for bad in [
        &["-m", "1.5G"][..],
        &["-m", "100K"],
        &["-t", "RGX"],
        &["--max-fan-in", "1"],
    ] {
        let mut args = vec!["sort", "-o", p(&out)];
        args.extend_from_slice(bad);
        args.push(p(&bam));
        let r = sortase(&args);
        assert!(!r.ok(), "sort {bad:?} was accepted");
        assert!(dir_listing(&out_dir).is_empty());
    }
}

/// SIGINT/SIGTERM while runs exist and the input is still being read: no temporary files, no output.
#[test]
fn sort_signals_leave_no_files() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = random_bam(st, tmp.path(), 30_000);
    let bytes = std::fs::read(&bam).unwrap();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let work = tmp.path().join(format!("w{sig}"));
        std::fs::create_dir(&work).unwrap();
        let out = work.join("o.bam");
        let mut child = Command::new(crate::common::sortase_bin())
            .args(["sort", "-@", "2", "--max-memory", "64K", "-T"])
            .arg(&work)
            .arg("-o")
            .arg(&out)
            .stdin(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // Most of the input, then stall with the pipe open.
        stdin.write_all(&bytes[..bytes.len() * 3 / 4]).unwrap();
        stdin.flush().unwrap();
        let started = std::time::Instant::now();
        let has_runs = || {
            dir_listing(&work).iter().any(|n| {
                let d = work.join(n);
                d.is_dir() && std::fs::read_dir(&d).unwrap().count() > 0
            })
        };
        while !has_runs() {
            assert!(
                started.elapsed().as_secs() < 60,
                "no temporary runs appeared"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        drop(stdin);
        assert!(!status.success());
        assert!(
            dir_listing(&work).is_empty(),
            "signal {sig} left {:?}",
            dir_listing(&work)
        );
    }
}

/// Issue 3: the final phase cuts the output into key ranges at (key, input order) points sampled
/// from the input, so long runs of equal keys are split across ranges. A BAM that is mostly ties
/// (an unmapped tail and a deep stack at one position and strand, ~10 MB, so ~10 ranges fall
/// inside the tie groups) must still sort exactly as samtools sorts it, in memory and out of core.
#[test]
fn issue_3_tie_groups_split_across_ranges() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let mut s = edge_cases::rows(
        "@HD VN:1.6 SO:unsorted
         @SQ SN:chr1 LN:100000
         @RG ID:a
         @RG ID:b",
    );
    let mut rng = Rng::new(33);
    for i in 0..40_000u64 {
        let (seq, qual) = (rng.bases(150), rng.quals(150));
        let rg = if rng.below(2) == 0 {
            "RG:Z:a"
        } else {
            "RG:Z:b"
        };
        let name = format!("r{}", rng.below(30_000));
        let (flag, pos, cigar) = match rng.below(10) {
            0..=5 => ("4", "0", "*"),
            6..=8 => ("0", "1000", "150M"),
            _ => ("16", &*format!("{}", 1 + rng.below(90_000)), "150M"),
        };
        let rname = if flag == "4" { "*" } else { "chr1" };
        let xi = format!("XI:i:{i}");
        s += &line(&[
            &name, flag, rname, pos, "60", cigar, "*", "0", "0", &seq, &qual, rg, &xi,
        ]);
    }
    let sam = tmp.path().join("ties.sam");
    std::fs::write(&sam, s).unwrap();
    let bam = tmp.path().join("ties.bam");
    st.run(&["view", "-b", "-o", p(&bam), p(&sam)]).expect_ok();
    let failures = compare_sorts(st, &bam, tmp.path(), "tie groups").unwrap();
    assert_no_failures("sort of tie groups split across ranges", &failures);
}

/// `--input-fmt-option filter=EXPR` (samtools sort's htslib record filter): the records the
/// expression passes, sorted, equal to samtools', in memory and out of core; other input options
/// are refused with nothing written.
#[test]
fn sort_input_filter_matches_samtools() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = random_bam(st, tmp.path(), 20_000);
    let mut failures = Vec::new();
    for expr in [
        "filter=flag.reverse || pos < 500000",
        "filter=([XI] & 3) == 0 && rname != \"chr3\"",
    ] {
        for order in [&[][..], &["-n"]] {
            let theirs = tmp.path().join("theirs.bam");
            let mut args = vec![
                "sort",
                "--no-PG",
                "--input-fmt-option",
                expr,
                "-o",
                p(&theirs),
            ];
            args.extend_from_slice(order);
            args.push(p(&bam));
            let r = st.run(&args);
            assert!(r.ok(), "samtools {args:?}: {}", r.failure());
            let expected = oracle_text(st, &theirs, &[]).unwrap();
            for budget in BUDGETS {
                let ours = tmp.path().join("ours.bam");
                let mut args = vec!["sort", "--no-PG", "--input-fmt-option", expr];
                args.extend_from_slice(&["-@", "2", "-o", p(&ours)]);
                args.extend_from_slice(order);
                args.extend_from_slice(budget);
                args.push(p(&bam));
                let what = format!("sort {}", args[1..].join(" "));
                sortase(&args).expect_ok();
                let got = oracle_text(st, &ours, &[]).unwrap();
                check_same(&mut failures, &what, &got, &expected);
            }
        }
    }
    assert_no_failures("sort --input-fmt-option filter=", &failures);
    let out = tmp.path().join("refused.bam");
    let r = sortase(&[
        "sort",
        "--input-fmt-option",
        "decode_md=0",
        "-o",
        p(&out),
        p(&bam),
    ]);
    assert!(!r.ok() && r.stderr.contains("decode_md=0"), "{}", r.stderr);
    assert!(!out.exists());
}
