//! Region queries on indexed BAMs (BAI and CSI), `-c` counts, `-f/-F/-q`
//! filters and `-H`, each compared with samtools.

use std::path::{Path, PathBuf};

use crate::common::{
    assert_no_failures, check_same, line, p, sortase, strip_pg, tempdir, unmapped, Rng,
};
use crate::oracle::{oracle, Oracle};

const CONTIGS: [(&str, u64); 3] = [("chr1", 10_000), ("chr2", 20_000), ("chr3", 5_000)];

/// Hundreds of reads on three contigs, with various flags, MAPQs and CIGARs
/// (deletions and skips cross region boundaries), some unmapped.
pub fn region_sam() -> String {
    let mut rng = Rng::new(42);
    let mut s = line(&["@HD", "VN:1.6", "SO:unsorted"]);
    for (name, len) in CONTIGS {
        s += &line(&["@SQ", &format!("SN:{name}"), &format!("LN:{len}")]);
    }
    s += &line(&["@RG", "ID:grp1", "SM:x"]);
    let cigars = [
        ("50M", 50),
        ("20M5D30M", 50),
        ("10S40M", 50),
        ("25M300N25M", 50),
        ("30M2I18M", 50),
        ("5H45M", 45),
    ];
    let flags = [
        "0", "16", "1024", "512", "256", "99", "147", "2048", "83", "163",
    ];
    for i in 0..600 {
        let (ctg, len) = CONTIGS[rng.below(3) as usize];
        let (cigar, qlen) = cigars[rng.below(cigars.len() as u64) as usize];
        let pos = (1 + rng.below(len - 400)).to_string();
        let (flag, mapq) = (
            flags[rng.below(flags.len() as u64) as usize],
            rng.below(61).to_string(),
        );
        let (seq, qual) = (rng.bases(qlen), rng.quals(qlen));
        let nm = format!("NM:i:{}", rng.below(5));
        s += &line(&[
            &format!("r{i:03}"),
            flag,
            ctg,
            &pos,
            &mapq,
            cigar,
            "*",
            "0",
            "0",
            &seq,
            &qual,
            &nm,
            "RG:Z:grp1",
        ]);
    }
    for i in 0..20 {
        // Unmapped, placed at the mapped mate's position.
        let pos = (1 + rng.below(4000)).to_string();
        s += &line(&[
            &format!("m{i:02}"),
            "69",
            "chr3",
            &pos,
            "0",
            "*",
            "=",
            &pos,
            "0",
            &rng.bases(30),
            "*",
        ]);
    }
    for i in 0..10 {
        s += &unmapped(&format!("u{i:02}"), &rng.bases(30));
    }
    s
}

/// The unsorted SAM plus sorted BAMs indexed with BAI and with CSI.
struct Indexed {
    _tmp: tempfile::TempDir,
    sam: PathBuf,
    bai: PathBuf,
    csi: PathBuf,
}

fn indexed(st: &Oracle) -> Indexed {
    let tmp = tempdir();
    let sam = tmp.path().join("reads.sam");
    std::fs::write(&sam, region_sam()).unwrap();
    let (bai, csi) = (
        tmp.path().join("sorted.bam"),
        tmp.path().join("sorted_csi.bam"),
    );
    for (bam, index_flag) in [(&bai, None), (&csi, Some("-c"))] {
        st.run(&["sort", "-o", p(bam), p(&sam)]).expect_ok();
        let mut args = vec!["index"];
        args.extend(index_flag);
        args.push(p(bam));
        st.run(&args).expect_ok();
    }
    assert!(bai.with_extension("bam.bai").exists() && csi.with_extension("bam.csi").exists());
    Indexed {
        _tmp: tmp,
        sam,
        bai,
        csi,
    }
}

/// `view [opts] input [regions]` by both tools: same exit status and same
/// stdout (minus `@PG` lines).
pub fn compare(
    st: &Oracle,
    failures: &mut Vec<String>,
    opts: &[&str],
    input: &Path,
    regions: &[&str],
) {
    let mut args = vec!["view"];
    args.extend_from_slice(opts);
    args.push(p(input));
    args.extend_from_slice(regions);
    let (ours, theirs) = (sortase(&args), st.run(&args));
    let name = input.file_name().unwrap().to_string_lossy();
    let label = format!("view {} {name} {}", opts.join(" "), regions.join(" "));
    if ours.ok() != theirs.ok() {
        let why = if ours.ok() {
            theirs.stderr.trim().to_string()
        } else {
            ours.failure()
        };
        failures.push(format!(
            "{label}: exit status differs (samtools ok: {}): {why}",
            theirs.ok()
        ));
    } else {
        check_same(
            failures,
            &label,
            &strip_pg(&ours.text()),
            &strip_pg(&theirs.text()),
        );
    }
}

const REGION_SETS: &[&[&str]] = &[
    &["chr1"],
    &["chr1:100-200"],
    &["chr2:5000"],
    &["chr1:100-200", "chr3", "chr2:5000-6000"],
    &["chr2:1000-3000", "chr2:2000-4000"],
    &["chr3:4950-5000", "chr1:1-1"],
    &["chr2:19999-20000"],
];

fn region_checks(bam_of: fn(&Indexed) -> &PathBuf) {
    let Some(st) = oracle() else { return };
    let data = indexed(st);
    let bam = bam_of(&data);
    let mut failures = Vec::new();
    for regions in REGION_SETS {
        compare(st, &mut failures, &[], bam, regions);
        compare(st, &mut failures, &["-c"], bam, regions);
    }
    compare(st, &mut failures, &["-h"], bam, &["chr2:5000-6000"]);
    compare(
        st,
        &mut failures,
        &["-c", "-F", "16", "-q", "20"],
        bam,
        &["chr1", "chr2:100-9000"],
    );
    assert_no_failures("region queries", &failures);
}

#[test]
fn regions_with_bai() {
    region_checks(|d| &d.bai);
}

#[test]
fn regions_with_csi() {
    region_checks(|d| &d.csi);
}

/// `*` selects the unplaced unmapped reads; an unknown contig is only a
/// warning for samtools.
#[test]
fn regions_unmapped_and_unknown() {
    let Some(st) = oracle() else { return };
    let data = indexed(st);
    let mut failures = Vec::new();
    compare(st, &mut failures, &[], &data.bai, &["*"]);
    compare(st, &mut failures, &["-c"], &data.bai, &["*"]);
    compare(st, &mut failures, &[], &data.bai, &["chrX", "chr1:1-300"]);
    assert_no_failures("special regions", &failures);
}

/// Region output as BAM decodes to the same records as samtools' region SAM.
#[test]
fn region_to_bam() {
    let Some(st) = oracle() else { return };
    let data = indexed(st);
    let out = data.bai.with_file_name("region.bam");
    let ours = sortase(&[
        "view",
        "-b",
        "-o",
        p(&out),
        p(&data.bai),
        "chr1:2000-6000",
        "chr3",
    ])
    .expect_ok();
    assert!(
        ours.stdout.is_empty(),
        "-o given, yet sortase wrote to stdout"
    );
    let expected = st
        .run(&["view", p(&data.bai), "chr1:2000-6000", "chr3"])
        .expect_ok()
        .text();
    let got = st.run(&["view", p(&out)]).expect_ok().text();
    assert_no_failures(
        "region to BAM",
        &crate::common::first_diff(&got, &expected)
            .into_iter()
            .collect::<Vec<_>>(),
    );
}

const FILTERS: &[&[&str]] = &[
    &[],
    &["-f", "16"],
    &["-F", "0x904"],
    &["-q", "30"],
    &["-f", "1", "-F", "4", "-q", "10"],
    &["-F", "4", "-f", "64"],
    &["-f", "4"],
    &["-q", "0"],
    &["-q", "60"],
];

/// `-c` and filtered output on SAM and BAM input.
#[test]
fn counts_and_filters() {
    let Some(st) = oracle() else { return };
    let data = indexed(st);
    let mut failures = Vec::new();
    for input in [&data.sam, &data.bai] {
        for filter in FILTERS {
            let mut counted = vec!["-c"];
            counted.extend_from_slice(filter);
            compare(st, &mut failures, &counted, input, &[]);
            compare(st, &mut failures, filter, input, &[]);
        }
    }
    assert_no_failures("counts and filters", &failures);
}

/// `-H` prints only the header (samtools' minus `@PG`); plain `view` prints
/// no header at all, so it must match exactly.
#[test]
fn header_only_and_default_output() {
    let Some(st) = oracle() else { return };
    let data = indexed(st);
    let mut failures = Vec::new();
    for input in [&data.sam, &data.bai] {
        compare(st, &mut failures, &["-H"], input, &[]);
        let (ours, theirs) = (
            sortase(&["view", p(input)]),
            st.run(&["view", p(input)]).expect_ok(),
        );
        match ours.ok() {
            true => check_same(
                &mut failures,
                &format!("view {}", p(input)),
                &ours.text(),
                &theirs.text(),
            ),
            false => failures.push(ours.failure()),
        }
    }
    assert_no_failures("-H and default output", &failures);
}
