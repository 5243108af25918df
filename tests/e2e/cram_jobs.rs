//! CRAM in every job that takes BAM (issue 21), against samtools 1.24: `--write-index` on CRAM
//! output for view, merge and markdup (the `.crai` equal to `samtools index` of the same file),
//! CRAM inputs to merge and markdup, `--output-fmt-option` (CRAM 3.0, slices, `embed_ref`,
//! `no_ref`), CRAM 3.1 written by Debian's samtools 1.16 and the reference found by `M5` through
//! `REF_PATH`/`REF_CACHE` (htslib's own lookup, as samtools), or named when missing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{
    assert_no_failures, check_same, gunzip, p, records, sortase, sortase_bin, tempdir, Rng,
};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::{corpus_dir, CRAM_CASES};

/// samtools' decoding of `file` (records only, MD/NM as samtools regenerates them).
fn decoded(st: &Oracle, file: &Path, fasta: &Path) -> String {
    records(
        &st.run(&["view", "--no-PG", "-T", p(fasta), p(file)])
            .expect_ok()
            .text(),
    )
}

/// The decompressed `.crai` next to `cram`, and that of `samtools index` on a copy of `cram`.
fn crai_pair(st: &Oracle, cram: &Path) -> (Vec<u8>, Vec<u8>) {
    let ours = PathBuf::from(format!("{}.crai", p(cram)));
    assert!(ours.is_file(), "{}: no .crai written", ours.display());
    let copy = cram.with_file_name(format!(
        "copy-{}",
        cram.file_name().unwrap().to_string_lossy()
    ));
    std::fs::copy(cram, &copy).unwrap();
    st.run(&["index", p(&copy)]).expect_ok();
    (
        gunzip(&ours),
        gunzip(&PathBuf::from(format!("{}.crai", p(&copy)))),
    )
}

fn check_crai(failures: &mut Vec<String>, st: &Oracle, label: &str, cram: &Path) {
    let (ours, theirs) = crai_pair(st, cram);
    if ours.is_empty() || ours != theirs {
        failures.push(format!(
            "{label}: .crai differs from samtools index ({} vs {} bytes decompressed)",
            ours.len(),
            theirs.len()
        ));
    }
}

/// Runs sortase; a failure is recorded and `false` returned.
fn ok(failures: &mut Vec<String>, args: &[&str]) -> bool {
    let run = sortase(args);
    if !run.ok() {
        failures.push(run.failure());
    }
    run.ok()
}

/// `view --write-index` (BAM: CSI, BAI by `##idx##`; CRAM: `.crai`), `merge` of CRAM inputs and of
/// BAM inputs into CRAM with `--write-index`, against samtools' records and `samtools index`.
#[test]
fn issue_21_view_and_merge_write_index_on_cram() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = tempdir();
    let d = tmp.path();
    let fa = dir.join("ce.fa");
    let bam = d.join("in.bam");
    st.run(&["sort", "-o", p(&bam), p(&dir.join("ce#1000.sam"))])
        .expect_ok();
    let theirs = decoded(st, &bam, &fa);
    let mut failures = Vec::new();

    // view: BAM → CRAM with the index, and the index of BAM output.
    let v = d.join("v.cram");
    if ok(
        &mut failures,
        &[
            "view",
            "-C",
            "-T",
            p(&fa),
            "--write-index",
            "-o",
            p(&v),
            p(&bam),
        ],
    ) {
        check_same(
            &mut failures,
            "view -C records",
            &decoded(st, &v, &fa),
            &theirs,
        );
        check_crai(&mut failures, st, "view -C --write-index", &v);
    }
    let vb = d.join("v.bam");
    if ok(
        &mut failures,
        &["view", "-b", "--write-index", "-o", p(&vb), p(&bam)],
    ) {
        let csi = d.join("st.csi");
        st.run(&["index", "-c", "-o", p(&csi), p(&vb)]).expect_ok();
        if std::fs::read(format!("{}.csi", p(&vb))).ok() != std::fs::read(&csi).ok() {
            failures.push("view -b --write-index: .csi differs from samtools index -c".into());
        }
    }
    let named = format!("{}##idx##{}.bai", p(&vb), p(&vb));
    if ok(
        &mut failures,
        &["view", "-b", "--write-index", "-o", &named, p(&bam)],
    ) {
        let bai = d.join("st.bai");
        st.run(&["index", "-b", "-o", p(&bai), p(&vb)]).expect_ok();
        if std::fs::read(format!("{}.bai", p(&vb))).ok() != std::fs::read(&bai).ok() {
            failures.push("view -b --write-index ##idx##: .bai differs from samtools index".into());
        }
    }
    let refused = sortase(&["view", "--write-index", "-o", p(&d.join("x.sam")), p(&bam)]);
    if refused.ok() {
        failures.push("view --write-index to SAM should be refused".into());
    }

    // merge: two CRAM halves (reverse and forward strand) into CRAM, and the BAM halves into CRAM
    // (the key-range merge), both indexed.
    let mut halves = Vec::new();
    for (name, flag) in [("a", "-f"), ("b", "-F")] {
        let cram = d.join(format!("{name}.cram"));
        let half_bam = d.join(format!("{name}.bam"));
        st.run(&[
            "view",
            "-C",
            flag,
            "16",
            "-T",
            p(&fa),
            "-o",
            p(&cram),
            p(&bam),
        ])
        .expect_ok();
        st.run(&["view", "-b", flag, "16", "-o", p(&half_bam), p(&bam)])
            .expect_ok();
        halves.push((cram, half_bam));
    }
    let merged_st = d.join("st-merged.cram");
    st.run(&[
        "merge",
        "--reference",
        p(&fa),
        "-o",
        p(&merged_st),
        p(&halves[0].0),
        p(&halves[1].0),
    ])
    .expect_ok();
    let want = decoded(st, &merged_st, &fa);
    for (label, inputs) in [
        ("merge CRAM inputs", [&halves[0].0, &halves[1].0]),
        ("merge BAM inputs", [&halves[0].1, &halves[1].1]),
    ] {
        let out = d.join(format!("{}.cram", label.replace(' ', "-")));
        let args = [
            "merge",
            "--reference",
            p(&fa),
            "--write-index",
            "-o",
            p(&out),
            p(inputs[0]),
            p(inputs[1]),
        ];
        if ok(&mut failures, &args) {
            check_same(&mut failures, label, &decoded(st, &out, &fa), &want);
            check_crai(&mut failures, st, label, &out);
        }
    }
    assert_no_failures("view/merge --write-index on CRAM", &failures);
}

/// A FASTA of random bases for the references of the markdup test data (`c1`..`c3`).
fn markdup_fasta(path: &Path) {
    let mut rng = Rng::new(5);
    let mut text = String::new();
    for (name, len) in [("c1", 3000), ("c2", 800), ("c3", 5000)] {
        let _ = writeln!(text, ">{name}");
        let seq = rng.bases(len);
        for chunk in seq.as_bytes().chunks(60) {
            text.push_str(std::str::from_utf8(chunk).unwrap());
            text.push('\n');
        }
    }
    std::fs::write(path, text).unwrap();
}

/// markdup (coordinate, Picard's algorithm) on a CRAM written by samtools, into CRAM with
/// `--write-index`: the records of markdup on the BAM (checked against Picard in
/// markdup_coord.rs), decoded by samtools, and a `.crai` equal to `samtools index`'s.
#[test]
fn issue_21_markdup_cram_in_and_out() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let bam = crate::markdup_coord::sorted_input(st, d, 1500, 21);
    let fa = d.join("ref.fa");
    markdup_fasta(&fa);
    let cram = d.join("in.cram");
    st.run(&["view", "-C", "-T", p(&fa), "-o", p(&cram), p(&bam)])
        .expect_ok();
    let mut failures = Vec::new();
    let from_bam = sortase(&["markdup", "--no-PG", "-O", "sam", p(&bam)]).expect_ok();
    let want = records(&from_bam.text());
    assert!(
        want.lines()
            .any(|l| l.split('\t').nth(1).unwrap().parse::<u32>().unwrap() & 0x400 != 0),
        "nothing marked"
    );
    // CRAM in, SAM out. Decoding adds MD/NM (htslib regenerates them, as samtools view of the CRAM
    // shows): dropped where the BAM's records have none.
    let same = |failures: &mut Vec<String>, label: &str, got: &str| {
        let got = crate::checks::drop_regenerated_md_nm(&want, got);
        check_same(failures, label, &got, &want);
    };
    let sam = sortase(&[
        "markdup",
        "--no-PG",
        "--reference",
        p(&fa),
        "-O",
        "sam",
        p(&cram),
    ]);
    match sam.ok() {
        true => same(&mut failures, "markdup CRAM → SAM", &records(&sam.text())),
        false => failures.push(sam.failure()),
    }
    let theirs = decoded(st, &cram, &fa);
    let ours = sortase(&["view", "--no-PG", "-T", p(&fa), p(&cram)]).expect_ok();
    check_same(
        &mut failures,
        "the CRAM input",
        &records(&ours.text()),
        &theirs,
    );
    // CRAM in, CRAM out, indexed.
    let out = d.join("out.cram");
    let args = [
        "markdup",
        "--no-PG",
        "--reference",
        p(&fa),
        "--write-index",
        "-o",
        p(&out),
        p(&cram),
    ];
    if ok(&mut failures, &args) {
        same(
            &mut failures,
            "markdup CRAM → CRAM",
            &decoded(st, &out, &fa),
        );
        check_crai(&mut failures, st, "markdup --write-index", &out);
    }
    assert_no_failures("markdup on CRAM", &failures);
}

/// The CRAM major and minor version of a file.
fn cram_version(path: &Path) -> (u8, u8) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"CRAM", "{}: not CRAM", path.display());
    (bytes[4], bytes[5])
}

/// `--output-fmt-option` as samtools: the default (3.1), `version=3.0`, small slices, `embed_ref`
/// and `no_ref` (both decodable without the FASTA), each decoded by samtools to samtools' records
/// of the same options, for sort, view and merge.
#[test]
fn issue_21_cram_output_options() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = tempdir();
    let d = tmp.path();
    let fa = dir.join("ce.fa");
    let bam = d.join("in.bam");
    st.run(&["sort", "-o", p(&bam), p(&dir.join("ce#1000.sam"))])
        .expect_ok();
    let mut failures = Vec::new();
    let cases: [(&[&str], (u8, u8), bool); 5] = [
        (&[], (3, 1), true),
        (&["version=3.0"], (3, 0), true),
        (&["version=3.1", "seqs_per_slice=100"], (3, 1), true),
        (&["embed_ref"], (3, 1), false),
        (&["no_ref"], (3, 1), false),
    ];
    for (k, (opts, version, needs_ref)) in cases.iter().enumerate() {
        let mut opt_args = Vec::new();
        for o in *opts {
            opt_args.extend(["--output-fmt-option", o]);
        }
        let theirs = d.join(format!("st{k}.cram"));
        let st_args = [
            &["view", "-C", "-T", p(&fa), "-o", p(&theirs)][..],
            &opt_args,
            &[p(&bam)],
        ]
        .concat();
        st.run(&st_args).expect_ok();
        let want = decoded(st, &theirs, &fa);
        for job in ["view", "sort", "merge"] {
            let out = d.join(format!("{job}{k}.cram"));
            let head: Vec<&str> = match job {
                "view" => vec!["view", "-C", "-T", p(&fa)],
                "sort" => vec!["sort", "-O", "cram", "--reference", p(&fa)],
                _ => vec!["merge", "-O", "cram", "--reference", p(&fa)],
            };
            let args = [&head[..], &opt_args, &["-o", p(&out), p(&bam)]].concat();
            let label = format!("{job} {opts:?}");
            if !ok(&mut failures, &args) {
                continue;
            }
            if cram_version(&out) != *version {
                failures.push(format!(
                    "{label}: CRAM {:?}, want {version:?}",
                    cram_version(&out)
                ));
            }
            check_same(&mut failures, &label, &decoded(st, &out, &fa), &want);
            if !needs_ref {
                // No reference at all: samtools decodes it from the file alone.
                let alone = st.run(&["view", "--no-PG", p(&out)]);
                match alone.ok() {
                    true => check_same(
                        &mut failures,
                        &format!("{label} without reference"),
                        &records(&alone.text()),
                        &want,
                    ),
                    false => failures.push(format!("{label}: {}", alone.failure())),
                }
            }
        }
    }
    assert_no_failures("CRAM output options", &failures);
}

/// CRAM 3.1 written by Debian's samtools 1.16 (/usr/bin/samtools) from the corpus decodes to
/// samtools 1.24's records of the same file.
#[test]
fn issue_21_debian_samtools_cram31_decodes() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let Some(old) = crate::common::tool("SORTASE_DEBIAN_SAMTOOLS", "/usr/bin/samtools") else {
        crate::common::skip("Debian's samtools not found at /usr/bin/samtools");
        return;
    };
    let tmp = tempdir();
    let mut failures = Vec::new();
    for (sam, fasta) in CRAM_CASES {
        let fa = dir.join(fasta);
        for version in ["3.1", "3.0"] {
            let cram = tmp.path().join(format!("{sam}-{version}.cram"));
            let made = crate::common::run(
                &old,
                &[],
                &[
                    "view",
                    "-C",
                    "--output-fmt-option",
                    &format!("version={version}"),
                    "-T",
                    p(&fa),
                    "-o",
                    p(&cram),
                    p(&dir.join(sam)),
                ],
            );
            if !made.ok() {
                failures.push(format!("samtools 1.16: {}", made.failure()));
                continue;
            }
            let want = if version == "3.1" { (3, 1) } else { (3, 0) };
            if cram_version(&cram) != want {
                failures.push(format!(
                    "{sam}: samtools 1.16 wrote {:?}",
                    cram_version(&cram)
                ));
            }
            let ours = sortase(&["view", "-T", p(&fa), p(&cram)]);
            match ours.ok() {
                true => check_same(
                    &mut failures,
                    &format!("{sam} CRAM {version} by samtools 1.16"),
                    &records(&ours.text()),
                    &decoded(st, &cram, &fa),
                ),
                false => failures.push(ours.failure()),
            }
        }
    }
    assert_no_failures("CRAM written by samtools 1.16", &failures);
}

/// sortase with extra environment variables (htslib's `REF_PATH`/`REF_CACHE`).
fn sortase_env(args: &[&str], env: &[(&str, &Path)]) -> (bool, String, String) {
    let mut cmd = Command::new(sortase_bin());
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn sortase");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Without `-T` the reference is found by `M5` in a local cache: `REF_PATH` (`%2s/%2s/%s`) or
/// `REF_CACHE`, laid out as samtools' `seq_cache_populate.pl` does (the sequence in upper case,
/// no line breaks). An empty cache: one line naming the `@SQ` and its `M5`.
#[test]
fn issue_21_reference_by_md5_from_ref_path_and_ref_cache() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = tempdir();
    let d = tmp.path();
    // Encoded against a copy that is then deleted: no @SQ UR leads back to a FASTA.
    let fa = d.join("ce.fa");
    std::fs::copy(dir.join("ce.fa"), &fa).unwrap();
    let cram = d.join("x.cram");
    st.run(&[
        "view",
        "-C",
        "-T",
        p(&fa),
        "-o",
        p(&cram),
        p(&dir.join("ce#1000.sam")),
    ])
    .expect_ok();
    let want = decoded(st, &cram, &dir.join("ce.fa"));
    std::fs::remove_file(&fa).unwrap();
    let _ = std::fs::remove_file(d.join("ce.fa.fai"));
    let cache = d.join("cache");
    let header = st.run(&["view", "-H", p(&cram)]).expect_ok().text();
    for line in header.lines().filter(|l| l.starts_with("@SQ\t")) {
        let field = |k: &str| line.split('\t').find_map(|f| f.strip_prefix(k)).unwrap();
        let (sn, m5) = (field("SN:"), field("M5:"));
        let seq = st
            .run(&["faidx", p(&dir.join("ce.fa")), sn])
            .expect_ok()
            .text();
        let seq: String = seq.lines().skip(1).collect::<String>().to_ascii_uppercase();
        let file = cache.join(&m5[..2]).join(&m5[2..4]).join(&m5[4..]);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, seq).unwrap();
    }
    let layout = PathBuf::from(format!("{}/%2s/%2s/%s", p(&cache)));
    let mut failures = Vec::new();
    for (label, var) in [("REF_PATH", "REF_PATH"), ("REF_CACHE", "REF_CACHE")] {
        // REF_CACHE alone leaves REF_PATH at htslib's default (the EBI server), which this build
        // cannot reach (no libcurl): the cache is what answers.
        let (good, out, err) = sortase_env(&["view", p(&cram)], &[(var, &layout)]);
        match good {
            true => check_same(&mut failures, label, &records(&out), &want),
            false => failures.push(format!("{label}: {err}")),
        }
    }
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty_layout = PathBuf::from(format!("{}/%s", p(&empty)));
    let (good, _, err) = sortase_env(&["view", p(&cram)], &[("REF_PATH", &empty_layout)]);
    let err = err.trim_end();
    if good
        || !(err.contains("@SQ SN:CHROMOSOME_I")
            && err.contains("M5:8ede36131e0dbf3417807e48f77f3ebd")
            && err.lines().count() == 1)
    {
        failures.push(format!(
            "empty REF_PATH: want one line naming the @SQ, got {err:?}"
        ));
    }
    assert_no_failures("references by M5", &failures);
}

/// CRAM output without `-T`, as samtools writes it: no error; with no `M5` to look a reference up,
/// htslib embeds it or stores the bases (its `embed_ref=2` fallback), so the file decodes with no
/// reference to the records of samtools' own such file; sortase warns as samtools does.
#[test]
fn issue_21_cram_output_without_reference() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = tempdir();
    let d = tmp.path();
    let bam = d.join("in.bam");
    st.run(&["sort", "-o", p(&bam), p(&dir.join("ce#1000.sam"))])
        .expect_ok();
    let theirs = d.join("st.cram");
    st.run(&["view", "-C", "-o", p(&theirs), p(&bam)])
        .expect_ok();
    let want = records(&st.run(&["view", "--no-PG", p(&theirs)]).expect_ok().text());
    let mut failures = Vec::new();
    for job in ["view", "sort"] {
        let out = d.join(format!("{job}.cram"));
        let args = match job {
            "view" => vec!["view", "-C", "-o", p(&out), p(&bam)],
            _ => vec!["sort", "-O", "cram", "-o", p(&out), p(&bam)],
        };
        let (good, _, err) = sortase_env(&args, &[]);
        if !good {
            failures.push(format!("{job}: {err}"));
            continue;
        }
        if !err.contains("without -T/--reference") {
            failures.push(format!("{job}: no warning on stderr ({err:?})"));
        }
        let alone = st.run(&["view", "--no-PG", p(&out)]);
        match alone.ok() {
            true => check_same(&mut failures, job, &records(&alone.text()), &want),
            false => failures.push(format!("{job}: {}", alone.failure())),
        }
    }
    assert_no_failures("CRAM output without a reference", &failures);
}

/// Region queries through a `.crai` written by sortase (sort --write-index) equal samtools' on
/// the same file, and sortase's regions on samtools' CRAM equal samtools'.
#[test]
fn issue_21_regions_through_sortase_crai() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = tempdir();
    let d = tmp.path();
    let fa = dir.join("ce.fa");
    let ours = d.join("o.cram");
    // range.bam: 112 records on four references; 5 records per slice put region edges inside and
    // between slices and containers.
    sortase(&[
        "sort",
        "--reference",
        p(&fa),
        "--write-index",
        "--output-fmt-option",
        "seqs_per_slice=5",
        "-o",
        p(&ours),
        p(&dir.join("range.bam")),
    ])
    .expect_ok();
    let mut failures = Vec::new();
    for regions in [
        &["CHROMOSOME_I"][..],
        &["CHROMOSOME_II:1000-2000"],
        &["CHROMOSOME_III:100"],
        &[
            "CHROMOSOME_IV",
            "CHROMOSOME_I:900-1000",
            "CHROMOSOME_II:2500",
        ],
        &["CHROMOSOME_IV:900-1000"],
        &["CHROMOSOME_V", "*"],
    ] {
        let args = [&["view", "--no-PG", "-T", p(&fa), p(&ours)][..], regions].concat();
        let (mine, theirs) = (sortase(&args), st.run(&args));
        let label = format!("regions {regions:?}");
        match (mine.ok(), theirs.ok()) {
            (true, true) => {
                let want = records(&theirs.text());
                if want.is_empty() && regions[0] != "CHROMOSOME_V" {
                    failures.push(format!("{label}: samtools found nothing"));
                }
                check_same(&mut failures, &label, &records(&mine.text()), &want)
            }
            (a, b) => failures.push(format!("{label}: sortase ok {a}, samtools ok {b}")),
        }
        let counted = [&["view", "-c", "-T", p(&fa), p(&ours)][..], regions].concat();
        check_same(
            &mut failures,
            &format!("{label} -c"),
            &sortase(&counted).text(),
            &st.run(&counted).text(),
        );
    }
    assert_no_failures("regions through sortase's .crai", &failures);
}

/// CRAM blocks compressed with xz (LZMA), as samtools writes them with `use_lzma=1`: htslib 1.19.1
/// from hts-sys was built without `HAVE_LIBLZMA` and could not decode them; htslib 1.24 from
/// crates/htslib is built with xz (the `lzma-sys` crate) and must decode them as samtools does.
#[test]
fn cram_with_xz_blocks_decodes() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let tmp = tempdir();
    let mut failures = Vec::new();
    for (sam, fasta) in [("ce#1000.sam", "ce.fa"), ("ce#large_seq.sam", "ce.fa")] {
        let fa = dir.join(fasta);
        let cram = tmp.path().join(format!("{sam}.cram"));
        let input = dir.join(sam);
        let mut args = vec!["view", "-C", "-T", p(&fa), "-o", p(&cram)];
        for option in ["version=3.0", "use_lzma=1", "use_rans=0", "level=9"] {
            args.extend(["--output-fmt-option", option]);
        }
        args.push(p(&input));
        st.run(&args).expect_ok();
        // An xz stream's magic: at least one block of the file really is xz-compressed.
        let bytes = std::fs::read(&cram).unwrap();
        if !bytes.windows(6).any(|w| w == b"\xfd7zXZ\0") {
            failures.push(format!(
                "{sam}: samtools wrote no xz block; the test checks nothing"
            ));
            continue;
        }
        let ours = sortase(&["view", "-T", p(&fa), p(&cram)]);
        match ours.ok() {
            true => check_same(
                &mut failures,
                &format!("{sam} CRAM with xz blocks"),
                &records(&ours.text()),
                &decoded(st, &cram, &fa),
            ),
            false => failures.push(ours.failure()),
        }
    }
    assert_no_failures("CRAM with xz blocks", &failures);
}
