//! `sortase view DATASET` and `sortase agd view` (issue 19; one job since issue 28) against samtools 1.24 view of the BAM the dataset came from: the
//! same records (SAM text and BAM), counts, filters and region semantics (overlap by alignment end,
//! unmapped reads placed in a region, `*`, several regions with and without `-M`), with chunks small
//! enough that regions start and end inside chunks and long alignments reach over chunk boundaries;
//! an unsorted dataset refuses regions; a damaged dataset gives one line naming the chunk.

use std::path::{Path, PathBuf};

use crate::common::{assert_no_failures, check_same, p, sortase, tempdir};
use crate::oracle::{oracle, Oracle};

/// A deterministic pseudo-random sequence (64-bit LCG, Knuth's constants).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// A SAM of 3 references with `n` records: mapped reads with soft clips, insertions, deletions
/// and long `N` skips (ends far past the start), unmapped reads placed at their mate, a read with a
/// 70 000-operation CIGAR (a `CG` tag in BAM), random flags and MAPQs, and unplaced reads.
fn random_sam(n: usize) -> String {
    let mut rng = Lcg(19);
    let mut s = String::from(
        "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:200000\n@SQ\tSN:chr2\tLN:50000\n\
         @SQ\tSN:chr3\tLN:30000\n",
    );
    let refs = [("chr1", 190_000), ("chr2", 45_000), ("chr3", 25_000)];
    for i in 0..n {
        let (name, len) = refs[rng.below(3) as usize];
        let pos = 1 + rng.below(len);
        let mapq = rng.below(61);
        let mut flag =
            [0u64, 16, 1 | 2 | 64, 1 | 128 | 16, 256, 1024 | 16, 512][rng.below(7) as usize];
        let cigar = match rng.below(6) {
            0 => "20M".to_string(),
            1 => "5S15M".into(),
            2 => "8M2I10M".into(),
            3 => format!("10M{}D10M", 1 + rng.below(50)),
            4 => format!("10M{}N10M", 500 + rng.below(5000)),
            _ => {
                flag |= 4; // unmapped, placed at its mate
                "*".into()
            }
        };
        // Every CIGAR above holds 20 query bases.
        let read: String = "ACGTTGCAAC".repeat(2);
        let mq = if flag & 4 != 0 { 0 } else { mapq };
        s.push_str(&format!(
            "q{i}\t{flag}\t{name}\t{pos}\t{mq}\t{cigar}\t*\t0\t0\t{read}\t*\n"
        ));
    }
    let ops = 70_000;
    let cigar = "1M1I".repeat(ops / 2);
    let seq = "ACGT".repeat(ops / 4);
    s.push_str(&format!(
        "huge\t0\tchr2\t100\t60\t{cigar}\t*\t0\t0\t{seq}\t*\n"
    ));
    for i in 0..40 {
        s.push_str(&format!("u{i}\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n"));
    }
    s
}

/// The region sets queried: inside chunks, across chunk boundaries, whole references, `*`, an
/// unknown name, overlapping and out-of-order sets.
const REGIONS: &[&[&str]] = &[
    &["chr1:50000-60000"],
    &["chr1:100-200"],
    &["chr2:90-110"],
    &["chr2:30000-30100"],
    &["chr2"],
    &["chr3:1-"],
    &["*"],
    &["chr1:10000-20000", "chr1:15000-30000"],
    &["chr3:5000-6000", "chr1:1-3000", "*", "chr2:60"],
    &["chr9:1-100", "chr2:1-1000"],
];

/// Option sets: SAM text, counts, filters, the multi-region iterator.
const OPTIONS: &[&[&str]] = &[
    &[],
    &["-c"],
    &["-M"],
    &["-c", "-M"],
    &["-q", "30", "-F", "0x10"],
    &["-c", "-f", "PAIRED", "-q", "20"],
];

/// samtools' sorted, indexed BAM of [`random_sam`] and its dataset in chunks of `chunk` records.
fn sorted_dataset(st: &Oracle, dir: &Path, chunk: usize) -> (PathBuf, PathBuf) {
    let sam = dir.join("in.sam");
    std::fs::write(&sam, random_sam(3000)).unwrap();
    let bam = dir.join("sorted.bam");
    st.run(&["sort", "--no-PG", "-o", p(&bam), p(&sam)])
        .expect_ok();
    st.run(&["index", p(&bam)]).expect_ok();
    let ds = dir.join("ds");
    sortase(&[
        "agd",
        "import",
        "--chunk-size",
        &chunk.to_string(),
        p(&bam),
        "-o",
        p(&ds),
    ])
    .expect_ok();
    (bam, ds)
}

/// `sortase view DATASET` and `sortase agd view DATASET` (the same arguments and job) against
/// samtools view of the BAM the dataset came from.
#[test]
fn agd_view_equals_samtools_view() {
    let Some(st) = oracle() else { return };
    let mut failures = Vec::new();
    for (chunk, threads) in [(37, "2"), (1000, "1")] {
        let tmp = tempdir();
        let (bam, ds) = sorted_dataset(st, tmp.path(), chunk);
        let mut queries: Vec<Vec<&str>> = vec![vec![]];
        queries.extend(REGIONS.iter().map(|r| r.to_vec()));
        for regions in &queries {
            for options in OPTIONS {
                let mut theirs_args = vec!["view"];
                theirs_args.extend_from_slice(options);
                theirs_args.push(p(&bam));
                theirs_args.extend(regions.iter());
                let theirs = st.run(&theirs_args);
                for command in [&["agd", "view"][..], &["view"]] {
                    let mut ours_args = command.to_vec();
                    ours_args.extend(["-@", threads]);
                    ours_args.extend_from_slice(options);
                    ours_args.push(p(&ds));
                    ours_args.extend(regions.iter());
                    let label = format!(
                        "chunk {chunk}: {} {}",
                        command.join(" "),
                        ours_args[command.len() + 2..].join(" ")
                    );
                    let ours = sortase(&ours_args);
                    if regions.is_empty() && options.contains(&"-M") {
                        // "No regions or BED file have been provided."
                        if theirs.ok() || ours.ok() {
                            failures.push(format!("{label}: -M without regions did not fail"));
                        }
                        continue;
                    }
                    if !theirs.ok() || !ours.ok() {
                        failures.push(format!("{label}: {} / {}", theirs.stderr, ours.failure()));
                        continue;
                    }
                    check_same(&mut failures, &label, &ours.text(), &theirs.text());
                }
            }
        }
        // BAM output: the same records and header text (without @PG) as samtools writes.
        let theirs = st
            .run(&["view", "-h", "--no-PG", p(&bam), "chr1:40000-90000", "*"])
            .expect_ok();
        for command in [&["agd", "view"][..], &["view"]] {
            let out = tmp.path().join("region.bam");
            let mut args = command.to_vec();
            args.extend([
                "--no-PG",
                "-b",
                "-o",
                p(&out),
                p(&ds),
                "chr1:40000-90000",
                "*",
            ]);
            sortase(&args).expect_ok();
            let ours = st.run(&["view", "-h", "--no-PG", p(&out)]).expect_ok();
            let label = format!("{}: BAM output", command.join(" "));
            check_same(&mut failures, &label, &ours.text(), &theirs.text());
        }
    }
    assert_no_failures("agd view vs samtools view", &failures);
}

/// `sortase view DATASET` writes the index the BAM path writes (`--write-index`): samtools answers
/// region queries of the written BAM through it as it does on the BAM the dataset came from; the
/// filters a dataset's columns do not decide on, and `-M` on a BAM, are refused in one line.
#[test]
fn view_of_dataset_writes_index_and_refuses_other_filters() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let (bam, ds) = sorted_dataset(st, tmp.path(), 300);
    let out = tmp.path().join("out.bam");
    sortase(&["view", "--write-index", "-o", p(&out), p(&ds)]).expect_ok();
    assert!(tmp.path().join("out.bam.csi").exists());
    for region in ["chr1:50000-60000", "chr2", "chr3:1-"] {
        let ours = st.run(&["view", p(&out), region]).expect_ok();
        let theirs = st.run(&["view", p(&bam), region]).expect_ok();
        assert_eq!(ours.text(), theirs.text(), "{region}");
    }
    for (args, file) in [
        (&["view", "-l", "6", p(&ds)][..], &ds),
        (&["agd", "view", "-e", "mapq > 3", "-c", p(&ds)], &ds),
        (&["view", "-M", p(&bam), "chr1"], &bam),
    ] {
        let r = sortase(args);
        assert!(!r.ok(), "`{}` succeeded", r.cmd);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert!(r.stderr.contains(p(file)), "{}", r.stderr);
    }
}

/// A dataset with no recorded positions (written before they were recorded, or by another tool)
/// still answers region queries: they are computed from the results group.
#[test]
fn agd_view_without_recorded_positions() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let (bam, ds) = sorted_dataset(st, tmp.path(), 100);
    let manifest = ds.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    for c in m["chunks"].as_array_mut().unwrap() {
        assert!(c.as_object_mut().unwrap().remove("positions").is_some());
    }
    std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let regions = ["chr2:20000-40000", "chr1:5-6000", "*"];
    let mut args = vec!["agd", "view", p(&ds)];
    args.extend(regions);
    let ours = sortase(&args).expect_ok();
    let mut theirs_args = vec!["view", p(&bam)];
    theirs_args.extend(regions);
    let theirs = st.run(&theirs_args).expect_ok();
    assert_eq!(ours.text(), theirs.text());
}

/// Regions on a dataset of an unsorted BAM: refused in one line, as samtools refuses an unindexed
/// file; without regions the view works.
#[test]
fn agd_view_unsorted_refuses_regions() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    std::fs::write(&sam, random_sam(200)).unwrap();
    let bam = tmp.path().join("in.bam");
    st.run(&["view", "--no-PG", "-b", "-o", p(&bam), p(&sam)])
        .expect_ok();
    let ds = tmp.path().join("ds");
    sortase(&["agd", "import", p(&bam), "-o", p(&ds)]).expect_ok();
    let e = sortase(&["agd", "view", "-c", p(&ds), "chr1"]);
    assert!(!e.ok() && !st.run(&["view", "-c", p(&bam), "chr1"]).ok());
    assert_eq!(e.stderr.lines().count(), 1, "{}", e.stderr);
    assert!(e.stderr.contains("coordinate-sorted"), "{}", e.stderr);
    let ours = sortase(&["agd", "view", "-c", "-q", "30", p(&ds)]).expect_ok();
    let theirs = st.run(&["view", "-c", "-q", "30", p(&bam)]).expect_ok();
    assert_eq!(ours.text(), theirs.text());
}

/// A damaged dataset: a truncated or missing chunk file, or a manifest whose record counts disagree
/// with a chunk: `agd view` (records, counts, regions) fails in one line naming the chunk's file.
#[test]
fn agd_view_damaged_dataset_errors() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let (_, ds) = sorted_dataset(st, tmp.path(), 500);
    let one_line = |args: &[&str], expected: &[&str]| {
        let r = sortase(args);
        assert!(!r.ok(), "`{}` succeeded on a damaged dataset", r.cmd);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "not one line: {}", r.stderr);
        for e in expected {
            assert!(lines[0].contains(e), "{:?} lacks {e:?}", lines[0]);
        }
    };
    let d = p(&ds);
    let results = ds.join("results/000002.parquet");
    let whole = std::fs::read(&results).unwrap();
    std::fs::write(&results, &whole[..whole.len() / 2]).unwrap();
    for args in [
        &["agd", "view", d][..],
        &["agd", "view", "-c", "-q", "30", d],
        &["agd", "view", "-c", d, "chr1"],
    ] {
        one_line(args, &[p(&results), "truncated"]);
    }
    std::fs::write(&results, &whole).unwrap();

    let qual = ds.join("qual/000001.parquet");
    let saved = std::fs::read(&qual).unwrap();
    std::fs::remove_file(&qual).unwrap();
    one_line(&["agd", "view", d], &[p(&qual), "missing", "chunk 1"]);
    one_line(&["agd", "view", "-q", "1", d], &[p(&qual), "missing"]);
    std::fs::write(&qual, saved).unwrap();

    // Chunk 0 says 499 records and chunk 1 501: consistent in itself, not with the files.
    let manifest = ds.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (i, c) in m["chunks"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
        .take(2)
    {
        let delta: i64 = if i == 0 { -1 } else { 1 };
        let records = c["records"].as_i64().unwrap() + delta;
        c["records"] = records.into();
        if i == 0 {
            c["last"] = (c["last"].as_i64().unwrap() - 1).into();
        } else {
            c["first"] = (c["first"].as_i64().unwrap() - 1).into();
        }
        c.as_object_mut().unwrap().remove("positions");
    }
    std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    for args in [
        &["agd", "view", d][..],
        &["agd", "view", "-c", "-q", "30", d],
    ] {
        // Chunks are read in parallel: either damaged chunk may be the one reported.
        let r = sortase(args);
        assert!(!r.ok(), "`{}` succeeded on a damaged dataset", r.cmd);
        assert_eq!(r.stderr.lines().count(), 1, "not one line: {}", r.stderr);
        assert!(
            r.stderr
                .contains("000000.parquet: holds 500 records, the manifest says 499")
                || r.stderr
                    .contains("000001.parquet: holds 500 records, the manifest says 501"),
            "{}",
            r.stderr
        );
    }
    std::fs::write(&manifest, &text).unwrap();
    sortase(&["agd", "view", "-c", d]).expect_ok();
}
