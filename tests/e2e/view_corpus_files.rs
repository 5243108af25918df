//! The corpus' own binary files: BAMs written by real samtools (decoded and
//! queried through their shipped BAI/CSI indexes, including contig names
//! with colons), and CRAMs written by htsjdk (Java) and htslib.

use std::path::Path;

use crate::common::{assert_no_failures, check_same, p, records, sortase};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::corpus_dir;
use crate::view_query::compare;

const BAMS: &[&str] = &[
    "colons.bam",
    "mpileup/small.bam",
    "no_hdr_sq_1.bam",
    "range.bam",
];

/// BAM→SAM (with header, without, and counted) on every corpus BAM.
#[test]
fn corpus_bam_files() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut failures = Vec::new();
    for bam in BAMS {
        for opts in [&["-h"][..], &[], &["-c"], &["-H"]] {
            compare(st, &mut failures, opts, &dir.join(bam), &[]);
        }
    }
    assert_no_failures("corpus BAM files", &failures);
}

/// colons.bam has contigs named `chr1:100`, `chr1:100-200`, `chr1,chr3`...:
/// samtools' region rules (`{name}` quoting, ambiguity errors) apply.
#[test]
fn corpus_regions_with_colons() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let bam = dir.join("colons.bam");
    let mut failures = Vec::new();
    for region in [
        "chr1",
        "chr3",
        "chr2:100-200",
        "chr1,chr3",
        "{chr1,chr3}",
        "{chr1:100}",
        "{chr1:100-200}",
        "{chr1}:100-200",
        "chr1:100",
        "chr1:100-200",
    ] {
        compare(st, &mut failures, &[], &bam, &[region]);
    }
    assert_no_failures("regions on colons.bam", &failures);
}

/// range.bam ships with a samtools-made BAI.
#[test]
fn corpus_range_bam_regions() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let bam = dir.join("range.bam");
    let mut failures = Vec::new();
    for regions in [
        &["CHROMOSOME_I"][..],
        &["CHROMOSOME_II:1000-2000"],
        &["CHROMOSOME_III:100"],
        &["CHROMOSOME_IV", "CHROMOSOME_I:900-1000", "CHROMOSOME_V"],
    ] {
        compare(st, &mut failures, &[], &bam, regions);
        compare(st, &mut failures, &["-c"], &bam, regions);
    }
    assert_no_failures("regions on range.bam", &failures);
}

/// range.cram ships with a CRAI index: regions on CRAM input.
#[test]
fn corpus_range_cram_regions() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let (cram, fasta) = (dir.join("range.cram"), dir.join("ce.fa"));
    let mut failures = Vec::new();
    for region in [
        &["CHROMOSOME_I"][..],
        &["CHROMOSOME_II:1000-2000"],
        &["CHROMOSOME_III:100"],
        &["*"],
        &["CHROMOSOME_V:10-20000", "CHROMOSOME_I:5000-6000", "nosuch"],
    ] {
        compare(st, &mut failures, &["-T", p(&fasta)], &cram, region);
    }
    assert_no_failures("regions on range.cram", &failures);
}

/// CRAMs written by other implementations, decoded by sortase, must give
/// samtools' records exactly (MD/NM regenerated on decode as samtools does).
fn foreign_cram(st: &Oracle, dir: &Path, cram: &str, fasta: &str) -> Option<String> {
    let (path, fa) = (dir.join(cram), dir.join(fasta));
    let theirs = st
        .run(&["view", "--no-PG", "-T", p(&fa), p(&path)])
        .expect_ok();
    let ours = sortase(&["view", "-T", p(&fa), p(&path)]);
    if !ours.ok() {
        return Some(format!("{cram}: {}", ours.failure()));
    }
    let mut failures = Vec::new();
    check_same(&mut failures, cram, &ours.text(), &records(&theirs.text()));
    failures.pop()
}

#[test]
fn corpus_foreign_cram_decoding() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let cases = [
        ("auxf#values_java.cram", "auxf.fa"),
        ("ce#5b_java.cram", "ce.fa"),
        ("xx#large_aux_java.cram", "xx.fa"),
        ("range.cram", "ce.fa"),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(cram, fa)| foreign_cram(st, &dir, cram, fa))
        .collect();
    assert_no_failures("decoding corpus CRAMs", &failures);
}

/// Counting commands on CRAM (flagstat, idxstats, `view -c` with filters) decode only the counting
/// fields; their output must still be samtools'.
#[test]
fn corpus_cram_counts() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut failures = Vec::new();
    for (cram, fa) in [
        ("range.cram", "ce.fa"),
        ("auxf#values_java.cram", "auxf.fa"),
        ("ce#5b_java.cram", "ce.fa"),
        ("xx#large_aux_java.cram", "xx.fa"),
    ] {
        let (path, fa) = (dir.join(cram), dir.join(fa));
        for args in [
            &["flagstat"][..],
            &["idxstats"],
            &["view", "-c"],
            &["view", "-c", "-q", "10", "-F", "0x10"],
            &["view", "-c", "-f", "1", "-F", "0x900"],
        ] {
            let args = [args, &["-T", p(&fa), p(&path)][..]].concat();
            let args: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| !(args[0] != "view" && (*a == "-T" || *a == p(&fa))))
                .collect();
            let (ours, theirs) = (sortase(&args), st.run(&args));
            let label = args.join(" ");
            if ours.ok() != theirs.ok() {
                failures.push(format!(
                    "{label}: exit status differs (samtools ok: {})",
                    theirs.ok()
                ));
            } else {
                check_same(&mut failures, &label, &ours.text(), &theirs.text());
            }
        }
    }
    assert_no_failures("counting on CRAM", &failures);
}

/// Counting a CRAM of many containers (7 records a slice, one slice a container; CRAM 3.1 and 2.1
/// container headers): the runs of containers that flagstat and `view -c` decode each with their
/// own reader must add up to samtools' counts, with any number of threads.
#[test]
fn cram_counts_across_containers() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = crate::common::tempdir();
    let fa = dir.join("ce.fa");
    let mut failures = Vec::new();
    for version in ["version=3.1", "version=2.1"] {
        let cram = tmp.path().join(format!("{version}.cram"));
        st.run(&[
            "view",
            "-C",
            "-T",
            p(&fa),
            "--output-fmt-option",
            version,
            "--output-fmt-option",
            "seqs_per_slice=7",
            "-o",
            p(&cram),
            p(&dir.join("range.bam")),
        ])
        .expect_ok();
        for args in [
            &["flagstat"][..],
            &["flagstat", "-@", "2"],
            &["flagstat", "-@", "5"],
            &["view", "-c", "-@", "2"],
            &["view", "-c", "-@", "3", "-q", "10", "-F", "0x10"],
        ] {
            let args = [args, &[p(&cram)][..]].concat();
            let (ours, theirs) = (sortase(&args), st.run(&args));
            let label = format!("{version}: {}", args.join(" "));
            check_same(&mut failures, &label, &ours.text(), &theirs.text());
        }
    }
    assert_no_failures("counting a CRAM of many containers", &failures);
}

/// A CRAM whose reference is gone (deleted FASTA behind its `UR`, wrong `-T`): a one-line error that
/// names the `@SQ` and its `M5`.
#[test]
fn cram_missing_reference_names_the_sq() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = crate::common::tempdir();
    let fa = tmp.path().join("ce.fa");
    std::fs::copy(dir.join("ce.fa"), &fa).unwrap();
    let cram = tmp.path().join("x.cram");
    let sam = dir.join("ce#1000.sam");
    st.run(&["view", "-C", "-T", p(&fa), "-o", p(&cram), p(&sam)])
        .expect_ok();
    std::fs::remove_file(&fa).unwrap();
    let _ = std::fs::remove_file(tmp.path().join("ce.fa.fai"));
    let m5 = "M5:8ede36131e0dbf3417807e48f77f3ebd";
    for args in [
        vec!["view", p(&cram)],
        vec!["view", "-T", p(&dir.join("c1.fa")), p(&cram)],
    ] {
        let out = sortase(&args);
        assert!(!out.ok(), "{args:?} should fail");
        let err = out.failure();
        assert!(
            err.contains("@SQ SN:CHROMOSOME_I") && err.contains(m5) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
}

/// `sort -O cram --write-index`: samtools' records and a `.crai` equal to `samtools index` of the
/// same file (decompressed: the gzip bytes depend on the deflate implementation).
#[test]
fn sort_to_cram_with_index() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = crate::common::tempdir();
    let fa = dir.join("ce.fa");
    let (ours, theirs) = (tmp.path().join("o.cram"), tmp.path().join("s.cram"));
    let bam = tmp.path().join("in.bam");
    st.run(&["view", "-b", "-o", p(&bam), p(&dir.join("ce#5b.sam"))])
        .expect_ok();
    let args = |out: &Path| {
        vec![
            "sort".to_string(),
            "-O".into(),
            "cram".into(),
            "--reference".into(),
            p(&fa).into(),
            "--write-index".into(),
            "-o".into(),
            p(out).into(),
            p(&bam).into(),
        ]
    };
    let (a, b) = (args(&ours), args(&theirs));
    let out = sortase(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.ok(), "{}", out.failure());
    st.run(&b.iter().map(String::as_str).collect::<Vec<_>>())
        .expect_ok();
    let view = |f: &Path| {
        records(
            &st.run(&["view", "--no-PG", "-T", p(&fa), p(f)])
                .expect_ok()
                .text(),
        )
    };
    let mut failures = Vec::new();
    check_same(
        &mut failures,
        "sort -O cram records",
        &view(&ours),
        &view(&theirs),
    );
    let crai = |f: &Path| crate::common::gunzip(&f.with_extension("cram.crai"));
    let ours_crai = crai(&ours);
    let copy = tmp.path().join("copy.cram");
    std::fs::copy(&ours, &copy).unwrap();
    st.run(&["index", p(&copy)]).expect_ok();
    assert!(!ours_crai.is_empty(), "empty .crai");
    assert_eq!(ours_crai, crai(&copy), ".crai differs from samtools index");
    assert_no_failures("sort -O cram --write-index", &failures);
}
