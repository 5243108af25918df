//! `sortase idxstats` on CRAM against samtools 1.24: runs of containers counted on all threads
//! (FLAG and RNAME decoded only) must print samtools' lines, with any number of threads, for files
//! of many containers (CRAM 3.1 and 2.1, single- and multi-reference slices), unmapped-only and
//! empty files, and unsorted files (both fail). samtools reads no index for CRAM idxstats, so a
//! `.crai` (and a BAM index next to the file) must change nothing.

use std::fmt::Write;
use std::path::Path;

use crate::common::{assert_no_failures, check_same, p, sortase};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::corpus_dir;

/// A SAM of `n` records on three references (the third empty): mapped reads, unmapped reads placed
/// at their mate, then unplaced reads; coordinate-sorted unless `unsorted`.
fn mixed_sam(n: usize, unsorted: bool) -> String {
    let mut text = String::from("@HD\tVN:1.6\tSO:coordinate\n");
    for (name, len) in [("a", 50_000), ("b", 40_000), ("c", 1_000)] {
        let _ = writeln!(text, "@SQ\tSN:{name}\tLN:{len}");
    }
    let mut lines = Vec::new();
    for i in 0..n {
        let rname = if i < n / 2 { "a" } else { "b" };
        let pos = 1 + (i % (n / 2)) * 50;
        let line = match i % 5 {
            4 => format!("u{i}\t4\t{rname}\t{pos}\t0\t*\t*\t0\t0\tACGT\tIIII"),
            _ => format!(
                "r{i}\t{}\t{rname}\t{pos}\t30\t4M\t*\t0\t0\tACGT\tIIII",
                (i % 3) * 16
            ),
        };
        lines.push(line);
    }
    for i in 0..n / 4 {
        lines.push(format!("z{i}\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII"));
    }
    if unsorted {
        lines.swap(1, n - 1);
    }
    for l in lines {
        text.push_str(&l);
        text.push('\n');
    }
    text
}

/// Only unmapped reads: some placed on the first reference, the rest unplaced.
fn unmapped_sam() -> String {
    let mut text =
        String::from("@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:a\tLN:1000\n@SQ\tSN:b\tLN:900\n");
    for i in 0..20 {
        let _ = writeln!(
            text,
            "p{i}\t4\ta\t{}\t0\t*\t*\t0\t0\tACGT\tIIII",
            1 + i * 10
        );
    }
    for i in 0..30 {
        let _ = writeln!(text, "u{i}\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII");
    }
    text
}

/// Writes `input` as CRAM with samtools (no reference: sequences stored whole) and `opts`.
fn to_cram(st: &Oracle, input: &Path, cram: &Path, reference: Option<&Path>, opts: &[&str]) {
    let mut args = vec!["view", "-C", "-o", p(cram)];
    match reference {
        Some(fa) => args.extend(["-T", p(fa)]),
        None => args.extend(["--output-fmt-option", "no_ref"]),
    }
    for o in opts {
        args.extend(["--output-fmt-option", o]);
    }
    args.push(p(input));
    st.run(&args).expect_ok();
}

/// Compares `idxstats -@ N` (stdout and exit status) with samtools' for several thread counts.
fn compare(st: &Oracle, failures: &mut Vec<String>, label: &str, cram: &Path) {
    let theirs = st.run(&["idxstats", p(cram)]);
    for t in ["1", "2", "5"] {
        let ours = sortase(&["idxstats", "-@", t, p(cram)]);
        let label = format!("{label}: idxstats -@ {t}");
        if ours.ok() != theirs.ok() {
            failures.push(format!(
                "{label}: exit status differs (samtools ok: {}; ours: {})",
                theirs.ok(),
                if ours.ok() {
                    "ok".into()
                } else {
                    ours.failure()
                }
            ));
        } else {
            check_same(failures, &label, &ours.text(), &theirs.text());
        }
    }
}

#[test]
fn cram_idxstats_over_runs_of_containers() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = crate::common::tempdir();
    let d = tmp.path();
    let fa = dir.join("ce.fa");
    let mut cases: Vec<(String, std::path::PathBuf)> = Vec::new();
    for (label, opts) in [
        ("range 3.1", &["version=3.1", "seqs_per_slice=7"][..]),
        ("range 2.1", &["version=2.1", "seqs_per_slice=7"]),
        ("range 3.0 one container", &["version=3.0"]),
    ] {
        let cram = d.join(format!("{}.cram", label.replace(' ', "_")));
        to_cram(st, &dir.join("range.bam"), &cram, Some(&fa), opts);
        cases.push((label.into(), cram));
    }
    let texts = [
        ("mixed", mixed_sam(400, false)),
        ("unsorted", mixed_sam(400, true)),
        ("unmapped only", unmapped_sam()),
        (
            "empty",
            "@SQ\tSN:a\tLN:1000\n@SQ\tSN:b\tLN:900\n".to_string(),
        ),
        ("no references", "@HD\tVN:1.6\n".to_string()),
    ];
    for (label, text) in texts {
        let sam = d.join(format!("{}.sam", label.replace(' ', "_")));
        std::fs::write(&sam, text).unwrap();
        for (variant, opts) in [
            ("", &["seqs_per_slice=6"][..]),
            (" multi-ref", &["seqs_per_slice=9", "multi_seq_per_slice=1"]),
        ] {
            let cram = d.join(format!("{}{}.cram", label, variant).replace(' ', "_"));
            to_cram(st, &sam, &cram, None, opts);
            cases.push((format!("{label}{variant}"), cram));
        }
    }
    let mut failures = Vec::new();
    for (label, cram) in &cases {
        compare(st, &mut failures, label, cram);
    }
    // With a .crai (samtools reads none for idxstats) and unrelated BAM indexes next to the file.
    for (label, cram) in &cases {
        if st.run(&["index", p(cram)]).ok() {
            for ext in ["bai", "csi"] {
                std::fs::write(format!("{}.{ext}", p(cram)), b"not an index").unwrap();
            }
            compare(st, &mut failures, &format!("{label} with indexes"), cram);
        }
    }
    assert_no_failures("idxstats on CRAM", &failures);
}
