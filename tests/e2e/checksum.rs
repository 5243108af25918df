//! `sortase checksum` against `samtools checksum`: every SAM file of the htslib-test corpus with
//! three sets of options (the defaults; every record and field with QC rows and empty rows; tabs,
//! no reverse complement, all flag bits and other tags). Files samtools cannot read are counted, not
//! compared. Then the sums that sort, merge (both engines), markdup (both modes) and agd
//! import/export print with `--checksums -v` equal `samtools checksum -F 0 -P -C -M` of their input
//! and output, on generated files and on the corpus; fq2bam's equal `samtools checksum` of
//! `samtools import` of its reads and of its output; and each of them, with a record corrupted
//! between reading and writing (the test fault `SORTASE_TEST_CORRUPT_READ`), fails with one line
//! and leaves no output.

use crate::common::{assert_no_failures, check_same, p, sortase, tempdir};
use crate::oracle::oracle;
use crate::view_corpus::{corpus_dir, find_sams};

const OPTION_SETS: [&[&str]; 3] = [
    &[],
    &["-F", "0", "-P", "-C", "-M", "-q", "-v"],
    &["-T", "-c", "-b", "0xfff", "-t", "RG,NM,MD,BC", "-@", "3"],
];

/// Whether a record of `sam` has an aux tag whose name has a character outside `0`..`z`:
/// samtools 1.24's checksum loops forever on one (its selected-tags loop in bam_checksum.c
/// `continue`s without stepping to the next tag), so such files cannot be compared.
fn has_illegal_tag_name(sam: &std::path::Path) -> bool {
    let text = String::from_utf8_lossy(&std::fs::read(sam).unwrap_or_default()).into_owned();
    text.lines()
        .filter(|l| !l.starts_with('@'))
        .flat_map(|l| l.split('\t').skip(11))
        .any(|tag| {
            tag.as_bytes()
                .iter()
                .take(2)
                .any(|c| !(b'0'..=b'z').contains(c))
        })
}

#[test]
fn corpus_checksums_equal_samtools() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&dir, &mut sams);
    sams.sort();
    let (mut compared, mut failures) = (0, Vec::new());
    for sam in &sams {
        if sam.components().any(|c| c.as_os_str() == "longrefs") {
            // Positions past 2^31 do not fit a BAM record: sortase refuses these for every job.
            continue;
        }
        if has_illegal_tag_name(sam) {
            eprintln!(
                "checksum corpus: skipped {}: samtools never returns",
                sam.display()
            );
            continue;
        }
        for opts in OPTION_SETS {
            let mut args = vec!["checksum"];
            args.extend_from_slice(opts);
            args.push(p(sam));
            let theirs = st.run(&args);
            if !theirs.ok() {
                continue;
            }
            let ours = sortase(&args);
            let label = format!("{} {}", sam.display(), opts.join(" "));
            if !ours.ok() {
                failures.push(format!("{label}: sortase fails: {}", ours.failure()));
                continue;
            }
            compared += 1;
            check_same(&mut failures, &label, &ours.text(), &theirs.text());
        }
    }
    eprintln!(
        "checksum corpus: {compared} comparisons of {} files",
        sams.len()
    );
    assert!(compared > 120, "only {compared} comparisons");
    assert_no_failures("checksum corpus", &failures);
}

#[test]
fn sort_prints_the_sums_samtools_computes_of_its_input_and_output() {
    let Some(st) = oracle() else {
        return;
    };
    let dir = tempdir();
    let input = dir.path().join("in.sam");
    let mut sam = String::from("@SQ\tSN:chr1\tLN:100000\n@RG\tID:g1\n");
    for i in 0..300u32 {
        let flag = [0, 16, 99, 147, 4, 256, 2048][i as usize % 7];
        sam += &format!(
            "r{}\t{flag}\tchr1\t{}\t{}\t6M\t=\t{}\t0\tACGTTG\tIIJJ#A\tRG:Z:g1\tBC:Z:AC{}\n",
            i / 2,
            (i * 7919) % 90000 + 1,
            i % 61,
            (i * 13) % 90000 + 1,
            i % 5
        );
    }
    std::fs::write(&input, sam).unwrap();
    let out = dir.path().join("out.bam");
    let run = sortase(&[
        "sort",
        "--checksums",
        "-v",
        "-m",
        "1M",
        "-@",
        "2",
        "-o",
        p(&out),
        p(&input),
    ])
    .expect_ok();
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("checksums ("))
        .unwrap_or_else(|| panic!("no checksum line in: {}", run.stderr))
        .to_string();
    for file in [&input, &out] {
        let theirs = st.run(&["checksum", "-F", "0", "-P", "-C", "-M", p(file)]);
        let text = theirs.text();
        let all = text
            .lines()
            .find(|l| l.starts_with("all "))
            .expect("samtools all row")
            .to_string();
        let cols: Vec<&str> = all.split_whitespace().collect();
        // all all COUNT SEQ NAME QUAL AUX POS CIGAR MATE COMBINED
        let want = format!(
            "read {} records, wrote {}; flag+seq {} +name {} +qual {} +aux {} combined {}",
            cols[2], cols[2], cols[3], cols[4], cols[5], cols[6], cols[10]
        );
        assert!(line.contains(&want), "{line}\nwant {want}\nsamtools: {all}");
    }
}

/// `samtools checksum -F 0 -P -C -M FILE`'s "all" row as `-v` prints it (`None`: samtools cannot
/// read the file).
fn samtools_sums(st: &crate::oracle::Oracle, file: &std::path::Path) -> Option<String> {
    let theirs = st.run(&["checksum", "-F", "0", "-P", "-C", "-M", p(file)]);
    if !theirs.ok() {
        return None;
    }
    let text = theirs.text();
    let all = text.lines().find(|l| l.starts_with("all "))?.to_string();
    let c: Vec<&str> = all.split_whitespace().collect();
    // all all COUNT SEQ NAME QUAL AUX POS CIGAR MATE COMBINED
    Some(format!(
        "flag+seq {} +name {} +qual {} +aux {} combined {}",
        c[3], c[4], c[5], c[6], c[10]
    ))
}

/// The sums a job's `-v` printed (`flag+seq … combined …`), and the number of records read.
fn printed_sums(stderr: &str) -> Option<(String, String)> {
    let line = stderr.lines().find(|l| l.contains("checksums ("))?;
    let count = line.split("read ").nth(1)?.split(' ').next()?.to_string();
    let sums = line
        .split("; ")
        .nth(1)?
        .trim_end_matches(": equal")
        .to_string();
    Some((count, sums))
}

/// The jobs that prove their records, each run on `input` (a corpus SAM) and on its sorted copy:
/// (label, arguments before `-o OUT INPUT`, whether it reads the sorted copy).
const JOBS: [(&str, &[&str], bool); 5] = [
    ("sort", &["sort"], false),
    ("merge one-thread", &["merge"], false),
    ("merge key ranges", &["merge"], true),
    (
        "markdup coordinate",
        &["markdup", "--mode", "coordinate"],
        true,
    ),
    ("markdup query", &["markdup", "--mode", "query"], false),
];

#[test]
fn every_job_prints_the_sums_samtools_computes_of_its_input_and_output_on_the_corpus() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&dir, &mut sams);
    sams.sort();
    let tmp = tempdir();
    let (mut compared, mut refused, mut failures) = (0, 0, Vec::new());
    for (n, sam) in sams.iter().enumerate() {
        if sam.components().any(|c| c.as_os_str() == "longrefs") || has_illegal_tag_name(sam) {
            continue;
        }
        let Some(want) = samtools_sums(st, sam) else {
            continue;
        };
        let sorted = tmp.path().join(format!("{n}.sorted.bam"));
        if !sortase(&["sort", "-o", p(&sorted), p(sam)]).ok() {
            refused += 1;
            continue;
        }
        for (label, args, from_sorted) in JOBS {
            let out = tmp.path().join(format!("{n}.out.bam"));
            let input = if from_sorted { &sorted } else { sam };
            let mut a = args.to_vec();
            a.extend(["--checksums", "-v", "-o", p(&out), p(input)]);
            let run = sortase(&a);
            let what = format!("{} {label}", sam.display());
            if !run.ok() {
                // Some corpus files are not what a job takes (markdup query wants read-name groups,
                // samblaster's record rules): refused with a message, never a checksum failure.
                if run.stderr.contains("do not match the records read") {
                    failures.push(format!("{what}: {}", run.failure()));
                } else {
                    refused += 1;
                }
                continue;
            }
            let Some((_, got)) = printed_sums(&run.stderr) else {
                failures.push(format!("{what}: no checksum line in {}", run.stderr));
                continue;
            };
            check_same(&mut failures, &format!("{what} (input)"), &got, &want);
            match samtools_sums(st, &out) {
                Some(of_out) => {
                    check_same(&mut failures, &format!("{what} (output)"), &got, &of_out)
                }
                None => failures.push(format!("{what}: samtools cannot read the output")),
            }
            compared += 1;
            let _ = std::fs::remove_file(&out);
        }
        let _ = std::fs::remove_file(&sorted);
        // agd import into a dataset, and its export back to BAM.
        let ds = tmp.path().join(format!("{n}.ds"));
        let out = tmp.path().join(format!("{n}.back.bam"));
        let runs = [
            (
                "agd import",
                vec!["agd", "import", "--checksums", "-v", "-o", p(&ds), p(sam)],
            ),
            (
                "agd export",
                vec!["agd", "export", "--checksums", "-v", "-o", p(&out), p(&ds)],
            ),
        ];
        for (label, a) in runs {
            let run = sortase(&a);
            let what = format!("{} {label}", sam.display());
            if !run.ok() {
                if run.stderr.contains("do not match the records read") {
                    failures.push(format!("{what}: {}", run.failure()));
                } else {
                    refused += 1;
                }
                break;
            }
            let Some((_, got)) = printed_sums(&run.stderr) else {
                failures.push(format!("{what}: no checksum line in {}", run.stderr));
                break;
            };
            check_same(&mut failures, &format!("{what} (input)"), &got, &want);
            if label == "agd export" {
                match samtools_sums(st, &out) {
                    Some(of_out) => {
                        check_same(&mut failures, &format!("{what} (output)"), &got, &of_out)
                    }
                    None => failures.push(format!("{what}: samtools cannot read the output")),
                }
            }
            compared += 1;
        }
        let _ = std::fs::remove_dir_all(&ds);
        let _ = std::fs::remove_file(&out);
    }
    eprintln!("job checksums on the corpus: {compared} job runs compared, {refused} refused");
    assert!(compared > 100, "only {compared} comparisons");
    assert_no_failures("job checksums on the corpus", &failures);
}

/// Runs sortase with the test fault naming read `name` ([`FAULT`]).
fn sortase_with_fault(name: &str, args: &[&str]) -> crate::common::Run {
    let prefix = [
        std::ffi::OsString::from(format!("{FAULT}={name}")),
        crate::common::sortase_bin().into_os_string(),
    ];
    crate::common::run(std::path::Path::new("/usr/bin/env"), &prefix, args)
}

/// The test fault's environment variable (crates/bam `checksum::FAULT_ENV`).
const FAULT: &str = "SORTASE_TEST_CORRUPT_READ";

#[test]
fn a_record_corrupted_in_flight_fails_every_job_and_leaves_no_output() {
    let dir = tempdir();
    // Pairs in name order (for markdup query), reverse strands, mates; p0006 and p0007 share
    // their ends (one pair is a duplicate to mark or remove).
    let mut sam = String::from("@HD\tVN:1.6\tSO:queryname\n@SQ\tSN:chr1\tLN:100000\n");
    for i in 0..400u32 {
        let pos = if i == 6 || i == 7 {
            1001
        } else {
            (i * 7919) % 90000 + 1
        };
        let mpos = pos + 150;
        sam += &format!(
            "p{i:04}\t99\tchr1\t{pos}\t60\t8M\t=\t{mpos}\t158\tACGTTGCA\tIIJJ#AII\tBC:Z:AC\n\
             p{i:04}\t147\tchr1\t{mpos}\t60\t8M\t=\t{pos}\t-158\tTTGCAACG\tIIIIJJ#A\n"
        );
    }
    let input = dir.path().join("in.sam");
    std::fs::write(&input, &sam).unwrap();
    let sorted = dir.path().join("sorted.bam");
    sortase(&["sort", "-o", p(&sorted), p(&input)]).expect_ok();
    let outs = dir.path().join("outs");
    std::fs::create_dir(&outs).unwrap();
    let out = outs.join("out.bam");
    let jobs: [(&str, Vec<&str>); 7] = [
        ("sort", vec!["sort", p(&input)]),
        ("merge key ranges", vec!["merge", p(&sorted), p(&sorted)]),
        ("merge one-thread", vec!["merge", p(&input), p(&input)]),
        ("markdup coordinate", vec!["markdup", p(&sorted)]),
        ("markdup coordinate -r", vec!["markdup", "-r", p(&sorted)]),
        ("markdup query", vec!["markdup", p(&input)]),
        ("markdup query -r", vec!["markdup", "-r", p(&input)]),
    ];
    for (label, args) in jobs {
        let (cmd, rest) = args.split_first().unwrap();
        let mut a = vec![*cmd, "--checksums", "-v", "-o", p(&out)];
        a.extend_from_slice(rest);
        // Without the fault: the sums agree (so the failure below is the fault's).
        let clean = sortase(&a);
        assert!(clean.ok(), "{label}: {}", clean.failure());
        let (count, _) = printed_sums(&clean.stderr)
            .unwrap_or_else(|| panic!("{label}: no checksum line in {}", clean.stderr));
        let want = if label.starts_with("merge") {
            "1600"
        } else {
            "800"
        };
        assert_eq!(count, want, "{label}: {}", clean.stderr);
        if label.ends_with("-r") {
            assert!(
                clean.stderr.contains("and left out 2;"),
                "{label}: {}",
                clean.stderr
            );
        }
        std::fs::remove_file(&out).unwrap();

        let bad = sortase_with_fault("p0123", &a);
        assert!(!bad.ok(), "{label}: the corrupted run succeeded");
        assert!(
            bad.stderr.contains("do not match the records read")
                && bad.stderr.contains("flag+seq column differs"),
            "{label}: {}",
            bad.stderr
        );
        assert_eq!(
            bad.stderr.trim().lines().count(),
            1,
            "{label}: not one line: {}",
            bad.stderr
        );
        let left: Vec<_> = std::fs::read_dir(&outs).unwrap().collect();
        assert!(left.is_empty(), "{label}: output left behind: {left:?}");
        // Without --checksums the fault is never read: the job succeeds.
        let plain: Vec<&str> = a.iter().copied().filter(|x| *x != "--checksums").collect();
        sortase_with_fault("p0123", &plain).expect_ok();
        std::fs::remove_file(&out).unwrap();
    }
}

/// `samtools checksum [OPTS] FILE`'s "all" row as `-v` prints it (`flag+seq … combined …`), for the
/// default columns (`every` false) or those of `-F 0 -P -C -M`.
fn samtools_row(st: &crate::oracle::Oracle, file: &std::path::Path, every: bool) -> String {
    let mut args = vec!["checksum"];
    if every {
        args.extend(["-F", "0", "-P", "-C", "-M"]);
    }
    args.push(p(file));
    let text = st.run(&args).expect_ok().text();
    let all = text
        .lines()
        .find(|l| l.starts_with("all "))
        .unwrap_or_else(|| panic!("no all row in {text}"))
        .to_string();
    let c: Vec<&str> = all.split_whitespace().collect();
    // all all COUNT SEQ NAME QUAL AUX [POS CIGAR MATE] COMBINED
    format!(
        "flag+seq {} +name {} +qual {} +aux {} combined {}",
        c[3],
        c[4],
        c[5],
        c[6],
        c[c.len() - 1]
    )
}

/// The `-v` line of a run, its record count and its sums (`None`: no line).
fn checksum_line(stderr: &str) -> Option<(String, String, String)> {
    let line = stderr.lines().find(|l| l.contains("checksums ("))?;
    let (_, rest) = line.split_once("): read ")?;
    let count = rest.split(' ').next()?.to_string();
    let (_, sums) = rest.split_once("; ")?;
    Some((
        line.to_string(),
        count,
        sums.trim_end_matches(": equal").to_string(),
    ))
}

#[test]
fn fq2bam_prints_the_sums_samtools_computes_of_the_imported_reads_and_of_its_output() {
    let Some(st) = oracle() else {
        return;
    };
    let dir = tempdir();
    let d = dir.path();
    crate::fq2bam::dataset(d, 300);
    let (fa, r1, r2, se, long) = (
        d.join("ref.fa"),
        d.join("r1.fq"),
        d.join("r2.fq"),
        d.join("se.fq"),
        d.join("long.fq"),
    );
    // (label, fq2bam options, reads, samtools import's options for them, reads in the input)
    type Case<'a> = (&'a str, &'a [&'a str], Vec<&'a str>, Vec<&'a str>, &'a str);
    let cases: [Case; 5] = [
        (
            "pairs",
            &[],
            vec![p(&r1), p(&r2)],
            vec!["-1", p(&r1), "-2", p(&r2)],
            "600",
        ),
        (
            "pairs, Picard",
            &["--markdup", "picard"],
            vec![p(&r1), p(&r2)],
            vec!["-1", p(&r1), "-2", p(&r2)],
            "600",
        ),
        (
            "pairs to CRAM",
            &["--markdup", "none", "-O", "cram"],
            vec![p(&r1), p(&r2)],
            vec!["-1", p(&r1), "-2", p(&r2)],
            "600",
        ),
        // Single reads without a suffix and interleaved pairs with /1 /2 (minimap2's fragments).
        ("interleaved", &[], vec![p(&se)], vec!["-s", p(&se)], "306"),
        // Long reads: supplementary records with hard clips are left out of the sums.
        (
            "long reads",
            &["--preset", "map-ont", "--markdup", "none"],
            vec![p(&long)],
            vec!["-0", p(&long)],
            "40",
        ),
    ];
    let imported = d.join("imported.bam");
    for (label, opts, reads, import, count) in cases {
        let out = d.join(if label.contains("CRAM") {
            "out.cram"
        } else {
            "out.bam"
        });
        let mut args = vec!["fq2bam", "--checksums", "-v", "-@", "2", "-x", p(&fa)];
        args.extend_from_slice(opts);
        args.extend(["-o", p(&out)]);
        args.extend(&reads);
        let run = sortase(&args);
        assert!(run.ok(), "{label}: {}", run.failure());
        let (line, got_count, got) = checksum_line(&run.stderr)
            .unwrap_or_else(|| panic!("{label}: no checksum line in {}", run.stderr));
        assert_eq!(got_count, count, "{label}: {line}");
        let want_command = format!(
            "samtools import {} | samtools checksum; samtools checksum {}",
            import.join(" "),
            p(&out)
        );
        assert!(line.contains(&want_command), "{label}: {line}");
        let mut a = vec!["import"];
        a.extend(&import);
        a.extend(["-o", p(&imported)]);
        st.run(&a).expect_ok();
        assert_eq!(
            got,
            samtools_row(st, &imported, false),
            "{label}: the reads"
        );
        let of_out = if label.contains("CRAM") {
            // samtools checksum reads the CRAM with the reference.
            let bam = d.join("from-cram.bam");
            st.run(&["view", "-b", "-T", p(&fa), "-o", p(&bam), p(&out)])
                .expect_ok();
            samtools_row(st, &bam, false)
        } else {
            samtools_row(st, &out, false)
        };
        assert_eq!(got, of_out, "{label}: the output");
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn agd_import_and_export_print_the_sums_samtools_computes_of_their_input_and_output() {
    let Some(st) = oracle() else {
        return;
    };
    let dir = tempdir();
    let d = dir.path();
    let sam = d.join("in.sam");
    let mut text = String::from("@SQ\tSN:chr1\tLN:100000\n@RG\tID:g1\n");
    for i in 0..700u32 {
        let flag = [0, 16, 99, 147, 4, 256, 2048, 1024 + 99][i as usize % 8];
        text += &format!(
            "r{}\t{flag}\tchr1\t{}\t{}\t6M\t=\t{}\t{}\tACGTTG\tIIJJ#A\tRG:Z:g1\tBC:Z:AC{}\tXi:i:{}\n",
            i / 2,
            (i * 7919) % 90000 + 1,
            i % 61,
            (i * 13) % 90000 + 1,
            i as i32 - 350,
            i % 5,
            i * 1000
        );
    }
    std::fs::write(&sam, text).unwrap();
    crate::fq2bam::dataset(d, 100);
    let (r1, r2) = (d.join("r1.fq"), d.join("r2.fq"));
    let imported = d.join("imported.bam");
    st.run(&["import", "-1", p(&r1), "-2", p(&r2), "-o", p(&imported)])
        .expect_ok();
    // (label, import's inputs, the file samtools sums for them, records)
    let cases: [(&str, Vec<&str>, &std::path::Path, &str); 2] = [
        ("SAM", vec![p(&sam)], &sam, "700"),
        ("FASTQ pairs", vec![p(&r1), p(&r2)], &imported, "200"),
    ];
    for (label, inputs, summed, count) in cases {
        let want = samtools_row(st, summed, true);
        let ds = d.join("ds");
        let mut a = vec!["agd", "import", "--checksums", "-v", "--chunk-size", "64"];
        a.extend(["-@", "2", "-o", p(&ds)]);
        a.extend(&inputs);
        let run = sortase(&a);
        assert!(run.ok(), "{label}: {}", run.failure());
        let (line, n, got) = checksum_line(&run.stderr)
            .unwrap_or_else(|| panic!("{label}: no checksum line in {}", run.stderr));
        assert_eq!(
            (n.as_str(), got.as_str()),
            (count, want.as_str()),
            "{label}: {line}"
        );
        if label.starts_with("FASTQ") {
            assert!(line.contains("(samtools import -1 "), "{label}: {line}");
        }
        for fmt in ["bam", "sam"] {
            let out = d.join(format!("back.{fmt}"));
            let run = sortase(&[
                "agd",
                "export",
                "--checksums",
                "-v",
                "-@",
                "2",
                "-o",
                p(&out),
                p(&ds),
            ]);
            assert!(run.ok(), "{label} {fmt}: {}", run.failure());
            let (line, n, got) = checksum_line(&run.stderr)
                .unwrap_or_else(|| panic!("{label}: no checksum line in {}", run.stderr));
            assert_eq!(
                (n.as_str(), got.as_str()),
                (count, want.as_str()),
                "{label} {fmt}: {line}"
            );
            assert_eq!(
                got,
                samtools_row(st, &out, true),
                "{label} {fmt}: the output"
            );
        }
        let fq = sortase(&[
            "agd",
            "export",
            "--checksums",
            "-o",
            p(&d.join("x.fq")),
            p(&ds),
        ]);
        assert!(
            !fq.ok() && fq.stderr.contains("FASTQ output is not summed"),
            "{}",
            fq.stderr
        );
        std::fs::remove_dir_all(&ds).unwrap();
    }
}

#[test]
fn a_record_corrupted_in_flight_fails_fq2bam_and_agd_jobs_and_leaves_no_output() {
    let dir = tempdir();
    let d = dir.path();
    crate::fq2bam::dataset(d, 150);
    let sam = d.join("in.sam");
    let mut text = String::from("@SQ\tSN:chr1\tLN:100000\n");
    for i in 0..300u32 {
        text += &format!(
            "p{i:04}\t0\tchr1\t{}\t60\t8M\t*\t0\t0\tACGTTGCA\tIIJJ#AII\n",
            (i * 7919) % 90000 + 1
        );
    }
    std::fs::write(&sam, text).unwrap();
    let ds = d.join("ds");
    sortase(&["agd", "import", "--chunk-size", "50", "-o", p(&ds), p(&sam)]).expect_ok();
    // The name of the 10th pair (as the output records carry it: no /1).
    let r1 = std::fs::read_to_string(d.join("r1.fq")).unwrap();
    let pair = r1.lines().nth(36).unwrap()[1..]
        .trim_end_matches("/1")
        .to_string();
    let outs = d.join("outs");
    std::fs::create_dir(&outs).unwrap();
    let (fa, fq1, fq2) = (d.join("ref.fa"), d.join("r1.fq"), d.join("r2.fq"));
    let out_bam = outs.join("out.bam");
    let out_ds = outs.join("ds");
    let jobs: [(&str, &str, Vec<&str>, &std::path::Path); 5] = [
        ("fq2bam", &pair, vec!["fq2bam", "-x", p(&fa)], &out_bam),
        (
            "fq2bam picard",
            &pair,
            vec!["fq2bam", "--markdup", "picard", "-x", p(&fa)],
            &out_bam,
        ),
        (
            "agd import",
            "p0123",
            vec!["agd", "import", "--chunk-size", "50"],
            &out_ds,
        ),
        ("agd import FASTQ", &pair, vec!["agd", "import"], &out_ds),
        ("agd export", "p0123", vec!["agd", "export"], &out_bam),
    ];
    for (label, name, head, out) in jobs {
        let mut a = head.clone();
        a.extend(["--checksums", "-v", "-o", p(out)]);
        match label {
            "agd import" => a.push(p(&sam)),
            "agd export" => a.push(p(&ds)),
            _ => a.extend([p(&fq1), p(&fq2)]),
        }
        let clean = sortase(&a);
        assert!(clean.ok(), "{label}: {}", clean.failure());
        assert!(
            checksum_line(&clean.stderr).is_some(),
            "{label}: no checksum line in {}",
            clean.stderr
        );
        if out.is_dir() {
            std::fs::remove_dir_all(out).unwrap();
        } else {
            std::fs::remove_file(out).unwrap();
        }

        let bad = sortase_with_fault(name, &a);
        assert!(!bad.ok(), "{label}: the corrupted run succeeded");
        assert!(
            bad.stderr.contains("do not match the records read")
                && bad.stderr.contains("flag+seq column differs"),
            "{label}: {}",
            bad.stderr
        );
        assert_eq!(
            bad.stderr.trim().lines().count(),
            1,
            "{label}: not one line: {}",
            bad.stderr
        );
        let left: Vec<_> = std::fs::read_dir(&outs).unwrap().collect();
        assert!(left.is_empty(), "{label}: output left behind: {left:?}");
        // Nothing hidden next to it either (agd import stages its dataset beside the output).
        let hidden: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".ds"))
            .collect();
        assert!(
            hidden.is_empty(),
            "{label}: staging left behind: {hidden:?}"
        );
        // Without --checksums the fault is never read: the job succeeds.
        let plain: Vec<&str> = a.iter().copied().filter(|x| *x != "--checksums").collect();
        sortase_with_fault(name, &plain).expect_ok();
        if out.is_dir() {
            std::fs::remove_dir_all(out).unwrap();
        } else {
            std::fs::remove_file(out).unwrap();
        }
    }
}
