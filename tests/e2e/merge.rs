//! `sortase merge` against `samtools merge` (1.24): header combination (@SQ union and remapping, lost
//! coordinate order, @RG/@PG collisions renamed with `-s` or combined with `-c`/`-p`, @CO), RG/PG tag
//! translation, `-r`, `-n`/`-N`/`-t`, `-b`, `--write-index`, and refusing to overwrite without `-f`.

use std::path::{Path, PathBuf};

use crate::checks::oracle_text;
use crate::common::{assert_no_failures, check_same, line, p, sortase, tempdir, Rng};
use crate::oracle::{oracle, Oracle};

/// A SAM file with `header` lines and `n` random records on `refs`, tagged with RG/PG from `rgs`.
fn sam(header: &str, refs: &[&str], rgs: &[&str], n: usize, seed: u64) -> String {
    let mut s = crate::edge_cases::rows(header);
    let mut rng = Rng::new(seed);
    for i in 0..n {
        let (rname, pos, flag) = match rng.below(12) {
            0 => ("*".to_string(), 0, 4),
            k => (
                refs[k as usize % refs.len()].to_string(),
                1 + rng.below(5000),
                if k % 3 == 0 { 16 } else { 0 },
            ),
        };
        let cigar = if flag == 4 { "*" } else { "8M" };
        let mut fields = vec![
            format!("r{}", rng.below(300)),
            flag.to_string(),
            rname,
            pos.to_string(),
            "20".into(),
            cigar.into(),
            "*".into(),
            "0".into(),
            "0".into(),
            rng.bases(8),
            "*".into(),
        ];
        if !rgs.is_empty() && i % 5 != 0 {
            fields.push(format!("RG:Z:{}", rgs[i % rgs.len()]));
        }
        fields.push(format!("XI:i:{i}"));
        if i % 7 == 0 {
            fields.push("PG:Z:bwa".into());
        }
        if i % 11 == 0 {
            fields.push("RG:Z:unknown".into());
        }
        let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
        s += &line(&refs);
    }
    s
}

/// The orders merge is tested in: coordinate, `-n`, `-N`, `-t RG` (flags of sort and merge alike).
const ORDERS: [&[&str]; 4] = [&[], &["-n"], &["-N"], &["-t", "RG"]];

/// Sorts `text` with samtools (`order` flags) into `dir/name.bam`.
fn sorted(st: &Oracle, dir: &Path, name: &str, text: &str, order: &[&str]) -> PathBuf {
    let s = dir.join(format!("{name}.sam"));
    std::fs::write(&s, text).unwrap();
    let out = dir.join(format!("{name}.bam"));
    let mut args = vec!["sort", "--no-PG", "-o", p(&out)];
    args.extend_from_slice(order);
    args.push(p(&s));
    st.run(&args).expect_ok();
    out
}

fn compare_merge(
    st: &Oracle,
    dir: &Path,
    label: &str,
    flags: &[&str],
    inputs: &[&Path],
    failures: &mut Vec<String>,
) {
    let theirs = dir.join("theirs.bam");
    let ours = dir.join("ours.bam");
    for (bin_is_ours, out) in [(false, &theirs), (true, &ours)] {
        let mut args = vec!["merge", "-f", "--no-PG", "-o", p(out)];
        args.extend_from_slice(flags);
        args.extend(inputs.iter().map(|i| p(i)));
        let r = if bin_is_ours {
            sortase(&args)
        } else {
            st.run(&args)
        };
        if !r.ok() {
            failures.push(format!("{label}: {}", r.failure()));
            return;
        }
    }
    match (oracle_text(st, &ours, &[]), oracle_text(st, &theirs, &[])) {
        (Ok(a), Ok(b)) => check_same(failures, &format!("{label} merge {flags:?}"), &a, &b),
        (a, b) => failures.push(format!("{label}: {:?} {:?}", a.err(), b.err())),
    }
}

#[test]
fn merge_matches_samtools() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let h_a = "@HD VN:1.6 SO:coordinate
               @SQ SN:chr1 LN:10000
               @SQ SN:chr2 LN:10000
               @RG ID:x SM:one
               @RG ID:y SM:one PG:bwa
               @PG ID:bwa PN:bwa
               @CO from a";
    let h_b = "@HD VN:1.6 SO:coordinate
               @SQ SN:chr2 LN:10000
               @SQ SN:chr3 LN:10000
               @RG ID:x SM:two
               @RG ID:z SM:two PG:bwa
               @PG ID:bwa PN:bwa VN:2
               @PG ID:sam PN:samtools PP:bwa
               @CO from b";
    let h_c = "@SQ SN:chr1 LN:10000
               @SQ SN:chr2 LN:10000";
    let mut failures = Vec::new();
    for flags in ORDERS {
        // The same flags sort the inputs (samtools sort) and merge them.
        let order = flags;
        let a = sorted(
            st,
            d,
            "a",
            &sam(h_a, &["chr1", "chr2"], &["x", "y"], 400, 1),
            order,
        );
        let b = sorted(
            st,
            d,
            "b",
            &sam(h_b, &["chr2", "chr3"], &["x", "z"], 300, 2),
            order,
        );
        let c = sorted(st, d, "c", &sam(h_c, &["chr1", "chr2"], &[], 200, 3), order);
        let a2 = sorted(
            st,
            d,
            "a2",
            &sam(h_a, &["chr1", "chr2"], &["x", "y"], 250, 4),
            order,
        );
        for extra in [
            &["-s", "7"][..],
            &["-s", "7", "-c"],
            &["-s", "7", "-p"],
            &["-c", "-p"],
            &["-s", "3", "-r"],
        ] {
            let mut f = flags.to_vec();
            f.extend_from_slice(extra);
            compare_merge(st, d, "a+b+c", &f, &[&a, &b, &c], &mut failures);
            compare_merge(st, d, "a+a2 same header", &f, &[&a, &a2], &mut failures);
            compare_merge(
                st,
                d,
                "b+a (reference order lost)",
                &f,
                &[&b, &a],
                &mut failures,
            );
        }
        compare_merge(st, d, "single input", flags, &[&a], &mut failures);
    }
    assert_no_failures("merge against samtools", &failures);
}

#[test]
fn merge_write_index_list_and_force() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let h = "@HD VN:1.6 SO:coordinate
             @SQ SN:chr1 LN:10000
             @SQ SN:chr2 LN:10000";
    let inputs: Vec<PathBuf> = (0..5)
        .map(|i| {
            sorted(
                st,
                d,
                &format!("in{i}"),
                &sam(h, &["chr1", "chr2"], &[], 3000, i),
                &[],
            )
        })
        .collect();
    let list = d.join("list.txt");
    let names: String = inputs[..3].iter().map(|i| format!("{}\n", p(i))).collect();
    std::fs::write(&list, names).unwrap();
    let out = d.join("m.bam");
    sortase(&[
        "merge",
        "--write-index",
        "-@",
        "2",
        "-o",
        p(&out),
        "-b",
        p(&list),
        p(&inputs[3]),
        p(&inputs[4]),
    ])
    .expect_ok();
    let theirs = d.join("theirs.csi");
    st.run(&["index", "-c", "-o", p(&theirs), p(&out)])
        .expect_ok();
    assert!(
        std::fs::read(d.join("m.bam.csi")).unwrap() == std::fs::read(&theirs).unwrap(),
        "merge --write-index differs from samtools index"
    );
    let ref_out = d.join("ref.bam");
    st.run(&[
        "merge",
        "--no-PG",
        "-o",
        p(&ref_out),
        "-b",
        p(&list),
        p(&inputs[3]),
        p(&inputs[4]),
    ])
    .expect_ok();
    let mut failures = Vec::new();
    check_same(
        &mut failures,
        "merge -b",
        &crate::common::strip_pg(&oracle_text(st, &out, &[]).unwrap()),
        &oracle_text(st, &ref_out, &[]).unwrap(),
    );
    assert_no_failures("merge -b", &failures);
    // An existing output is kept unless -f.
    let before = std::fs::read(&out).unwrap();
    let r = sortase(&["merge", "-o", p(&out), p(&inputs[0])]);
    assert!(!r.ok(), "merge overwrote without -f");
    assert!(r.stderr.contains("-f"), "{}", r.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), before);
    sortase(&["merge", "-f", "-o", p(&out), p(&inputs[0])]).expect_ok();
    // A truncated input: error naming it, no output.
    let bytes = std::fs::read(&inputs[1]).unwrap();
    let bad = d.join("bad.bam");
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let out2 = d.join("never.bam");
    let r = sortase(&["merge", "-o", p(&out2), p(&inputs[0]), p(&bad)]);
    assert!(!r.ok());
    assert!(r.stderr.contains("bad.bam"), "{}", r.stderr);
    assert!(!out2.exists());
}

/// Records with 150-base sequences (so a few thousand make megabytes): a stack of ties at chr1:1000
/// (same strand), a reverse stack at chr2:500, an unmapped tail, names that differ in digits
/// (a9/a10/a09) and read1/read2/secondary flags of one name.
fn big_sam(n: usize, seed: u64) -> String {
    let mut s = crate::edge_cases::rows(
        "@HD VN:1.6 SO:unsorted
         @SQ SN:chr1 LN:100000
         @SQ SN:chr2 LN:50000
         @RG ID:a
         @RG ID:b",
    );
    let mut rng = Rng::new(seed);
    let names = ["a9", "a10", "a09", "a1", "b", "r"];
    for i in 0..n {
        let name = format!("{}{}", names[rng.below(6) as usize], rng.below(2000));
        let flag_bits = [0u64, 0x40 | 0x1, 0x80 | 0x1, 0x100][rng.below(4) as usize];
        let (rname, pos, flag) = match rng.below(10) {
            0..=2 => ("*".to_string(), 0, 4 | (flag_bits & 0xc1)),
            3..=4 => ("chr1".to_string(), 1000, flag_bits),
            5 => ("chr2".to_string(), 500, flag_bits | 16),
            k => (
                ["chr1", "chr2"][k as usize % 2].to_string(),
                1 + rng.below(40_000),
                flag_bits | if k % 3 == 0 { 16 } else { 0 },
            ),
        };
        let cigar = if flag & 4 != 0 { "*" } else { "150M" };
        let (seq, qual) = (rng.bases(150), rng.quals(150));
        let rg = format!("RG:Z:{}", ["a", "b"][rng.below(2) as usize]);
        let xi = format!("XI:i:{i}");
        s += &line(&[
            &name,
            &flag.to_string(),
            &rname,
            &pos.to_string(),
            "60",
            cigar,
            "*",
            "0",
            "0",
            &seq,
            &qual,
            &rg,
            &xi,
        ]);
    }
    s
}

/// The number of key ranges `sortase merge -v` reports (0 if it merged on one thread).
fn ranges_reported(stderr: &str) -> usize {
    stderr
        .split("merging ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Issue 3: `sortase merge` by key range on all cores. Inputs of a few MB each are cut into many
/// ranges, whose boundaries fall inside tie stacks and the unmapped tail; every order against samtools
/// merge, `-r`, bytes identical for any `-@`, and an unsorted input falling back to the one-thread
/// merge (samtools' interleaving).
#[test]
fn issue_3_merge_by_key_range() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let mut failures = Vec::new();
    for flags in ORDERS {
        // The same flags sort the inputs (samtools sort) and merge them.
        let order = flags;
        let inputs: Vec<PathBuf> = (0..3)
            .map(|k| sorted(st, d, &format!("big{k}"), &big_sam(20_000, 40 + k), order))
            .collect();
        let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        // Identical @RG lines in several inputs are renamed with random suffixes: a fixed seed.
        let mut seeded = flags.to_vec();
        seeded.extend_from_slice(&["-s", "5"]);
        compare_merge(st, d, "key ranges", &seeded, &refs, &mut failures);
        if flags.is_empty() {
            compare_merge(st, d, "key ranges -r", &["-r", "-c"], &refs, &mut failures);
        }
        let mut bytes = Vec::new();
        for threads in ["1", "3"] {
            let out = d.join(format!("t{threads}.bam"));
            let mut args = vec![
                "merge",
                "-v",
                "-f",
                "--no-PG",
                "-s",
                "5",
                "-@",
                threads,
                "-o",
                p(&out),
            ];
            args.extend_from_slice(flags);
            if flags.is_empty() {
                args.push("--write-index");
            }
            args.extend(refs.iter().map(|i| p(i)));
            let r = sortase(&args).expect_ok();
            if flags.is_empty() {
                // The index, replayed range by range, is samtools index's.
                let theirs = d.join("theirs.csi");
                st.run(&["index", "-c", "-o", p(&theirs), p(&out)])
                    .expect_ok();
                let ours = std::fs::read(d.join(format!("t{threads}.bam.csi"))).unwrap();
                if ours != std::fs::read(&theirs).unwrap() {
                    failures.push(format!(
                        "-@{threads}: --write-index differs from samtools index"
                    ));
                }
            }
            let n = ranges_reported(&r.stderr);
            if n < 8 {
                failures.push(format!("{flags:?}: only {n} key ranges: {}", r.stderr));
            }
            bytes.push(std::fs::read(&out).unwrap());
        }
        if bytes[0] != bytes[1] {
            failures.push(format!(
                "{flags:?}: output bytes differ between -@1 and -@3"
            ));
        }
    }
    // A header-only input among them takes no part in any range.
    let empty = sorted(st, d, "empty", &big_sam(0, 1), &[]);
    let big: Vec<PathBuf> = (0..2)
        .map(|k| {
            sorted(
                st,
                d,
                &format!("withempty{k}"),
                &big_sam(20_000, 60 + k),
                &[],
            )
        })
        .collect();
    compare_merge(
        st,
        d,
        "header-only input",
        &["-c"],
        &[&big[0], &empty, &big[1]],
        &mut failures,
    );
    // An input that is not sorted: the one-thread merge, as samtools interleaves it.
    let sorted_in = sorted(st, d, "sorted", &big_sam(20_000, 7), &[]);
    let sam = d.join("unsorted.sam");
    std::fs::write(&sam, big_sam(20_000, 8)).unwrap();
    let unsorted = d.join("unsorted.bam");
    st.run(&["view", "-b", "-o", p(&unsorted), p(&sam)])
        .expect_ok();
    compare_merge(
        st,
        d,
        "unsorted input",
        &["-c"],
        &[&sorted_in, &unsorted],
        &mut failures,
    );
    let out = d.join("u.bam");
    let r = sortase(&["merge", "-v", "-o", p(&out), p(&sorted_in), p(&unsorted)]).expect_ok();
    if !r.stderr.contains("one thread") {
        failures.push(format!(
            "unsorted input not merged on one thread: {}",
            r.stderr
        ));
    }
    assert_no_failures("merge by key range", &failures);
}
