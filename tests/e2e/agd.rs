//! `sortase agd` (issue 19): BAM → AGD dataset → BAM must give back the same records, byte for byte
//! and as samtools prints them; `agd flagstat` and `agd export -O fastq` must equal samtools
//! flagstat and fastq; a damaged dataset must
//! give a one-line error naming the file; DuckDB must read every column file without sortase.

use std::path::{Path, PathBuf};

use crate::checks::{self, oracle_text};
use crate::common::{
    assert_no_failures, check_same, dir_listing, gunzip, p, run, skip, sortase, tempdir, unmapped,
    Run,
};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::{corpus_dir, find_sams, par_map};

/// Fewer round-tripped corpus files than this means the test lost its corpus.
const MIN_CORPUS: usize = 60;

/// `agd import` with `chunk` records per chunk, `agd export` to BAM, then checks that samtools prints
/// the export as it prints `bam`, that the decompressed streams (header and records) are identical,
/// that `agd flagstat` equals samtools flagstat and `agd export -O fastq` samtools fastq (when
/// samtools converts the file). Returns the dataset directory.
fn round_trip(
    st: &Oracle,
    bam: &Path,
    dir: &Path,
    chunk: usize,
    threads: &str,
    label: &str,
    failures: &mut Vec<String>,
) -> Option<PathBuf> {
    let ds = dir.join("ds");
    let out = dir.join("out.bam");
    let chunk = chunk.to_string();
    let import = sortase(&[
        "agd",
        "import",
        "-@",
        threads,
        "--chunk-size",
        &chunk,
        p(bam),
        "-o",
        p(&ds),
    ]);
    if !import.ok() {
        failures.push(format!("{label}: {}", import.failure()));
        return None;
    }
    let export = sortase(&["agd", "export", "-@", threads, p(&ds), "-o", p(&out)]);
    if !export.ok() {
        failures.push(format!("{label}: {}", export.failure()));
        return None;
    }
    match (oracle_text(st, bam, &[]), oracle_text(st, &out, &[])) {
        (Ok(theirs), Ok(ours)) => {
            check_same(failures, &format!("{label}: view -h"), &ours, &theirs)
        }
        (Err(e), _) | (_, Err(e)) => failures.push(format!("{label}: {e}")),
    }
    if gunzip(bam) != gunzip(&out) {
        failures.push(format!("{label}: decompressed BAM bytes differ"));
    }
    let ours = sortase(&["agd", "flagstat", p(&ds)]);
    let theirs = st.run(&["flagstat", p(bam)]);
    if ours.ok() && theirs.ok() {
        check_same(
            failures,
            &format!("{label}: flagstat"),
            &ours.text(),
            &theirs.text(),
        );
    } else {
        failures.push(format!("{label}: flagstat: {}", ours.failure()));
    }
    // `sortase flagstat DATASET`: the same job, every output format.
    for format in ["default", "json", "tsv"] {
        let ours = sortase(&["flagstat", "-@", threads, "-O", format, p(&ds)]);
        let theirs = st.run(&["flagstat", "-O", format, p(bam)]);
        if ours.ok() && theirs.ok() {
            let what = format!("{label}: flagstat -O {format} DATASET");
            check_same(failures, &what, &ours.text(), &theirs.text());
        } else {
            failures.push(format!("{label}: flagstat -O {format}: {}", ours.failure()));
        }
    }
    let theirs = st.run(&["fastq", p(bam)]);
    if theirs.ok() {
        let ours = sortase(&["agd", "export", "-@", threads, "-O", "fastq", p(&ds)]);
        if ours.ok() {
            check_same(
                failures,
                &format!("{label}: fastq"),
                &ours.text(),
                &theirs.text(),
            );
        } else {
            failures.push(format!("{label}: fastq: {}", ours.failure()));
        }
    }
    Some(ds)
}

/// Every corpus SAM samtools accepts, as samtools' BAM, through AGD and back (3 records per chunk, so
/// most files have several chunks; 1 and 4 threads alternately).
#[test]
fn agd_corpus_round_trip() {
    let (Some(st), Some(corpus)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&corpus, &mut sams);
    sams.sort();
    let results = par_map(&sams, |sam| {
        let tmp = tempdir();
        let name = sam
            .strip_prefix(&corpus)
            .unwrap_or(sam)
            .display()
            .to_string();
        let Ok(reference) = checks::reference(st, sam, tmp.path()) else {
            return None;
        };
        let mut failures = Vec::new();
        let threads = if name.len() % 2 == 0 { "1" } else { "4" };
        round_trip(
            st,
            &reference.bam,
            tmp.path(),
            3,
            threads,
            &name,
            &mut failures,
        );
        Some(failures)
    });
    let compared = results.iter().flatten().count();
    assert!(
        compared >= MIN_CORPUS,
        "only {compared} corpus files round-tripped"
    );
    let failures: Vec<String> = results.into_iter().flatten().flatten().collect();
    assert_no_failures("AGD round trip of the corpus", &failures);
}

/// A SAM with the edge cases: unmapped reads (placed and not), no SEQ, no QUAL, every B-array type,
/// a CIGAR of 70 000 operations (stored in BAM as a CG tag), a read name of 254 characters.
fn edge_sam() -> String {
    let mut s = String::from("@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:1000000\n@SQ\tSN:chr2\tLN:500\n@CO\tedge cases\n");
    s.push_str(&unmapped("u1", "ACGTN"));
    s.push_str("u2\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*\n");
    s.push_str("placed\t73\tchr1\t100\t0\t*\t=\t100\t0\tACGTA\t*\n");
    s.push_str("noqual\t0\tchr1\t5\t60\t3M\t*\t0\t0\tAC=\t*\n");
    s.push_str("noseq\t16\tchr2\t7\t3\t5M\t*\t0\t0\t*\t*\tNM:i:0\n");
    s.push_str(
        "arrays\t0\tchr2\t1\t60\t2M1I1M\t*\t0\t0\tMRSV\t!~+5\tBa:B:c,-128,127\tBb:B:C,0,255\t\
         Bs:B:s,-32768,32767\tBS:B:S,0,65535\tBi:B:i,-2147483648,2147483647\tBI:B:I,0,4294967295\t\
         Bf:B:f,1.5,-0.25\tBe:B:c\tZZ:Z:text\tHH:H:1AE3\tAa:A:x\tff:f:3.25\n",
    );
    let n = 70_000;
    let cigar = "1M1I".repeat(n / 2);
    let seq = "ACGT".repeat(n / 4);
    s.push_str(&format!(
        "huge\t0\tchr1\t10\t60\t{cigar}\t*\t0\t0\t{seq}\t*\n"
    ));
    let long_name = "n".repeat(254);
    s.push_str(&format!("{long_name}\t4\t*\t0\t0\t*\t*\t0\t0\tA\t#\n"));
    s
}

/// Edge cases, a header-only file and a file with an empty header and no records, each with 1, 2 and
/// 100 records per chunk.
#[test]
fn agd_edge_cases_round_trip() {
    let Some(st) = oracle() else { return };
    let mut failures = Vec::new();
    let cases = [
        ("edge", edge_sam()),
        (
            "header-only",
            "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:10\n".into(),
        ),
        ("empty", String::new()),
    ];
    for (name, text) in cases {
        for chunk in [1, 2, 100] {
            let tmp = tempdir();
            let sam = tmp.path().join("in.sam");
            std::fs::write(&sam, &text).unwrap();
            let bam = tmp.path().join("in.bam");
            if text.is_empty() {
                // samtools reads no empty SAM: the BAM of an empty header, no references, no records.
                bgzf_bam(&bam, b"BAM\x01\0\0\0\0\0\0\0\0");
                round_trip(st, &bam, tmp.path(), chunk, "2", name, &mut failures);
                continue;
            }
            let enc = st.run(&["view", "--no-PG", "-b", "-o", p(&bam), p(&sam)]);
            if !enc.ok() {
                failures.push(format!(
                    "{name}: samtools rejects the test input: {}",
                    enc.stderr
                ));
                continue;
            }
            let label = format!("{name}, {chunk} per chunk");
            round_trip(st, &bam, tmp.path(), chunk, "2", &label, &mut failures);
        }
    }
    assert_no_failures("AGD edge cases", &failures);
}

/// Writes `raw` (decompressed BAM) BGZF-compressed to `bam`, through `sortase bgzip`.
fn bgzf_bam(bam: &Path, raw: &[u8]) {
    let plain = bam.with_extension("raw");
    std::fs::write(&plain, raw).unwrap();
    let bgzf = sortase(&["bgzip", "-c", p(&plain)]).expect_ok();
    std::fs::write(bam, &bgzf.stdout).unwrap();
}

/// One BAM record from its fields; `name` includes its NUL(s).
#[allow(clippy::too_many_arguments)]
fn bam_record(
    ref_id: i32,
    pos: i32,
    bin: u16,
    flag: u16,
    name: &[u8],
    cigar: &[u32],
    l_seq: u32,
    seq: &[u8],
    qual: &[u8],
) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&ref_id.to_le_bytes());
    r.extend_from_slice(&pos.to_le_bytes());
    r.push(name.len() as u8);
    r.push(0); // mapq
    r.extend_from_slice(&bin.to_le_bytes());
    r.extend_from_slice(&(cigar.len() as u16).to_le_bytes());
    r.extend_from_slice(&flag.to_le_bytes());
    r.extend_from_slice(&l_seq.to_le_bytes());
    r.extend_from_slice(&(-1i32).to_le_bytes()); // next refID
    r.extend_from_slice(&(-1i32).to_le_bytes()); // next pos
    r.extend_from_slice(&0i32.to_le_bytes()); // tlen
    r.extend_from_slice(name);
    for op in cigar {
        r.extend_from_slice(&op.to_le_bytes());
    }
    r.extend_from_slice(seq);
    r.extend_from_slice(qual);
    let mut out = (r.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&r);
    out
}

/// Records the typed columns cannot rebuild (they are kept whole in `raw_record`) and a bin that is
/// not the computed one: the export's decompressed bytes equal the input's.
#[test]
fn agd_keeps_records_the_columns_cannot_rebuild() {
    let tmp = tempdir();
    let text = b"@SQ\tSN:chr1\tLN:1000\n";
    let mut raw = b"BAM\x01".to_vec();
    raw.extend_from_slice(&(text.len() as u32).to_le_bytes());
    raw.extend_from_slice(text);
    raw.extend_from_slice(&1u32.to_le_bytes());
    raw.extend_from_slice(&5u32.to_le_bytes());
    raw.extend_from_slice(b"chr1\0");
    raw.extend_from_slice(&1000u32.to_le_bytes());
    let m3 = 3 << 4; // 3M
                     // Odd SEQ whose padding nibble is not 0.
    raw.extend(bam_record(
        0,
        9,
        4681,
        0,
        b"pad\0",
        &[m3],
        3,
        &[0x12, 0x4f],
        &[30; 3],
    ));
    // Qualities 0xff only in part, and one above 93.
    raw.extend(bam_record(
        0,
        9,
        4681,
        0,
        b"q1\0",
        &[m3],
        3,
        &[0x12, 0x40],
        &[0xff, 30, 0xff],
    ));
    raw.extend(bam_record(
        0,
        9,
        4681,
        0,
        b"q2\0",
        &[m3],
        3,
        &[0x12, 0x40],
        &[30, 100, 30],
    ));
    // A name padded with two NULs; a name that is not UTF-8.
    raw.extend(bam_record(
        0,
        9,
        4681,
        0,
        b"nul\0\0",
        &[m3],
        3,
        &[0x12, 0x40],
        &[30; 3],
    ));
    raw.extend(bam_record(
        0,
        9,
        4681,
        0,
        b"\xc3(\0",
        &[m3],
        3,
        &[0x12, 0x40],
        &[30; 3],
    ));
    // bin 0 on an unmapped read (older writers), not the computed 4680.
    raw.extend(bam_record(-1, -1, 0, 4, b"bin\0", &[], 0, &[], &[]));
    let bam = tmp.path().join("in.bam");
    bgzf_bam(&bam, &raw);
    let ds = tmp.path().join("ds");
    let import = sortase(&["agd", "import", "-v", p(&bam), "-o", p(&ds)]).expect_ok();
    assert!(
        import.stderr.contains("(5 kept whole)"),
        "{}",
        import.stderr
    );
    let out = tmp.path().join("out.bam");
    sortase(&["agd", "export", p(&ds), "-o", p(&out)]).expect_ok();
    assert_eq!(gunzip(&out), raw, "decompressed export differs from input");
}

/// Imports a small dataset in chunks of 2 records; returns (temp dir, dataset).
fn small_dataset() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    let mut text = String::from("@SQ\tSN:chr1\tLN:1000\n");
    for i in 0..5 {
        text.push_str(&format!(
            "r{i}\t0\tchr1\t{}\t{}\t4M\t*\t0\t0\tACGT\tIIII\n",
            10 + i,
            20 * i
        ));
    }
    std::fs::write(&sam, text).unwrap();
    let ds = tmp.path().join("ds");
    sortase(&["agd", "import", "--chunk-size", "2", p(&sam), "-o", p(&ds)]).expect_ok();
    (tmp, ds)
}

/// A failed run whose stderr is one line holding every piece of `expected`.
fn assert_one_line_error(run: &Run, expected: &[&str]) {
    assert!(!run.ok(), "`{}` succeeded on a damaged dataset", run.cmd);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {}", run.stderr);
    for e in expected {
        assert!(lines[0].contains(e), "{:?} lacks {e:?}", lines[0]);
    }
}

/// A truncated chunk, a missing chunk and a manifest that disagrees with its chunks: export and
/// flagstat fail with one line naming the file.
#[test]
fn agd_damaged_dataset_errors() {
    let (tmp, ds) = small_dataset();
    let out = tmp.path().join("out.bam");
    let export = |ds: &Path| sortase(&["agd", "export", p(ds), "-o", p(&out)]);

    let results = ds.join("results/000001.parquet");
    let whole = std::fs::read(&results).unwrap();
    std::fs::write(&results, &whole[..whole.len() / 2]).unwrap();
    let e = export(&ds);
    assert_one_line_error(&e, &[p(&results), "truncated"]);
    assert_one_line_error(
        &sortase(&["agd", "flagstat", p(&ds)]),
        &[p(&results), "truncated"],
    );
    assert!(!out.exists(), "a failed export left {}", out.display());
    std::fs::write(&results, &whole).unwrap();

    let bases = ds.join("bases/000002.parquet");
    let saved = std::fs::read(&bases).unwrap();
    std::fs::remove_file(&bases).unwrap();
    assert_one_line_error(&export(&ds), &[p(&bases), "missing"]);
    std::fs::write(&bases, saved).unwrap();

    // Chunks 0 and 1 say 1 and 3 records (the files hold 2 and 2): consistent in itself, not with
    // the files.
    let manifest = ds.join("manifest.json");
    // Without the chunks' positions (a manifest of a dataset written before they were recorded),
    // so that the edits below change only the counts.
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    for c in m["chunks"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("positions");
    }
    let text = serde_json::to_string_pretty(&m).unwrap() + "\n";
    let changed = text
        .replacen(
            "\"last\": 1,\n      \"records\": 2",
            "\"last\": 0,\n      \"records\": 1",
            1,
        )
        .replacen("\"first\": 2,", "\"first\": 1,", 1)
        .replacen("\"records\": 2\n", "\"records\": 3\n", 1);
    assert_ne!(changed, text, "manifest layout changed; update the test");
    std::fs::write(&manifest, changed).unwrap();
    assert_one_line_error(
        &export(&ds),
        &["000000.parquet", "holds 2 records, the manifest says 1"],
    );
    std::fs::write(&manifest, text.replace("\"records\": 5", "\"records\": 6")).unwrap();
    assert_one_line_error(&export(&ds), &[p(&manifest), "chunks hold 5 records"]);
    std::fs::write(&manifest, &text).unwrap();
    sortase(&["agd", "export", p(&ds), "-o", p(&out)]).expect_ok();
}

/// Import refuses a non-empty output, and a failed import (truncated input) leaves no directory.
#[test]
fn agd_import_leaves_nothing_on_failure() {
    let (tmp, ds) = small_dataset();
    let before = dir_listing(tmp.path());
    let again = sortase(&["agd", "import", p(&tmp.path().join("in.sam")), "-o", p(&ds)]);
    assert_one_line_error(&again, &["exists and is not empty"]);
    let bam = tmp.path().join("in.bam");
    sortase(&["view", "-b", "-o", p(&bam), p(&tmp.path().join("in.sam"))]).expect_ok();
    let whole = std::fs::read(&bam).unwrap();
    std::fs::write(&bam, &whole[..whole.len() - 40]).unwrap();
    let failed = sortase(&["agd", "import", p(&bam), "-o", p(&tmp.path().join("ds2"))]);
    assert!(!failed.ok(), "import of a truncated BAM succeeded");
    let mut after = dir_listing(tmp.path());
    after.retain(|n| n != "in.bam");
    assert_eq!(after, before, "a failed import left files");
}

/// DuckDB (PyPI) reads every column file of a dataset made from the bench-like corpus BAM, with no
/// sortase code: each file's row count is the manifest's, every value is read, and a query on the
/// results equals `samtools view -c -q 30`.
#[test]
fn agd_duckdb_reads_every_file() {
    let Some(st) = oracle() else { return };
    let python = crate::common::python();
    let probe = run(
        Path::new(&python),
        &["-c".into(), "import duckdb".into()],
        &[],
    );
    if !probe.ok() {
        skip("duckdb is not installed (pip install duckdb)");
        return;
    }
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    std::fs::write(&sam, edge_sam()).unwrap();
    let bam = tmp.path().join("in.bam");
    assert!(st.run(&["view", "-b", "-o", p(&bam), p(&sam)]).ok());
    let ds = tmp.path().join("ds");
    sortase(&["agd", "import", "--chunk-size", "3", p(&bam), "-o", p(&ds)]).expect_ok();
    let script = r#"
import duckdb, json, pathlib, sys
ds = pathlib.Path(sys.argv[1])
m = json.loads((ds / "manifest.json").read_text())
for g in m["groups"]:
    for c in m["chunks"]:
        f = ds / g["name"] / f"{c['index']:06}.parquet"
        rows = duckdb.sql(f"SELECT * FROM read_parquet('{f}')").fetchall()
        cols = [d[0] for d in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{f}')").fetchall()]
        assert len(rows) == c["records"], (f, len(rows), c["records"])
        assert cols == g["columns"], (f, cols, g["columns"])
q = duckdb.sql(f"SELECT count(*) FROM '{ds}/results/*.parquet' WHERE mapq >= 30").fetchall()[0][0]
print(q)
"#;
    let r = run(Path::new(&python), &["-c".into(), script.into()], &[p(&ds)]).expect_ok();
    let theirs = st.run(&["view", "-c", "-q", "30", p(&bam)]).expect_ok();
    assert_eq!(r.text().trim(), theirs.text().trim());
}
