//! Generated edge-case SAM files through the standard SAM→BAM, BAM→SAM and
//! SAM→SAM comparisons, plus a strict byte-level comparison of the
//! uncompressed BAM stream with samtools' (`-u --no-PG`).

use std::path::Path;

use crate::checks;
use crate::common::{assert_no_failures, gunzip, p, sortase, tempdir};
use crate::edge_cases;
use crate::oracle::{oracle, Oracle};

/// Write `sam` into a fresh directory and run every standard check on it.
fn edge(name: &str, sam: String) {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let input = tmp.path().join(format!("{name}.sam"));
    std::fs::write(&input, sam).unwrap();
    assert_no_failures(name, &checks::round_trips(st, &input, tmp.path(), name));
}

#[test]
fn edge_unmapped() {
    edge("unmapped", edge_cases::unmapped());
}

#[test]
fn edge_secondary_supplementary() {
    edge(
        "secondary_supplementary",
        edge_cases::secondary_supplementary(),
    );
}

#[test]
fn edge_many_contigs() {
    edge("many_contigs", edge_cases::many_contigs());
}

#[test]
fn edge_huge_cigar() {
    edge("huge_cigar", edge_cases::huge_cigar());
}

#[test]
fn edge_header_only() {
    edge("header_only", edge_cases::header_only());
}

#[test]
fn edge_array_tags() {
    edge("array_tags", edge_cases::array_tags());
}

#[test]
fn edge_scalar_tags() {
    edge("scalar_tags", edge_cases::scalar_tags());
}

#[test]
fn edge_float_tags() {
    edge("float_tags", edge_cases::float_tags());
}

#[test]
fn edge_long_reads() {
    edge("long_reads", edge_cases::long_reads());
}

#[test]
fn edge_sequences() {
    edge("sequences", edge_cases::sequences());
}

#[test]
fn edge_misc_fields() {
    edge("misc_fields", edge_cases::misc_fields());
}

/// A 0-byte input is not SAM for samtools (it fails to read the header):
/// sortase must fail likewise and create no output.
#[test]
fn edge_empty_file_fails_like_samtools() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let (input, theirs, ours) = (
        tmp.path().join("empty.sam"),
        tmp.path().join("st.bam"),
        tmp.path().join("ours.bam"),
    );
    std::fs::write(&input, "").unwrap();
    let st_run = st.run(&["view", "-b", "-o", p(&theirs), p(&input)]);
    assert!(
        !st_run.ok(),
        "oracle accepted a 0-byte SAM; update this test to mirror it"
    );
    let run = sortase(&["view", "-b", "-o", p(&ours), p(&input)]);
    assert!(
        !run.ok(),
        "sortase accepted a 0-byte SAM (samtools fails: {})",
        st_run.stderr.trim()
    );
    assert!(!ours.exists(), "sortase left {} behind", ours.display());
    assert!(
        run.stderr.contains("empty.sam"),
        "error does not name the input: {}",
        run.stderr
    );
}

/// Uncompressed BAM bytes (BGZF removed) of `samtools|sortase view -u --no-PG`.
fn raw_bam(
    cmd: &dyn Fn(&[&str]) -> crate::common::Run,
    input: &Path,
    out: &Path,
) -> Result<Vec<u8>, String> {
    let run = cmd(&["view", "-u", "--no-PG", "-o", p(out), p(input)]);
    if run.ok() {
        Ok(gunzip(out))
    } else {
        Err(run.failure())
    }
}

fn le_u32(b: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
}

/// End offset of the BAM header (magic, text, references).
fn header_end(b: &[u8]) -> Option<usize> {
    let mut at = 8 + le_u32(b, 4)?;
    let n_ref = le_u32(b, at)?;
    at += 4;
    for _ in 0..n_ref {
        at += 4 + le_u32(b, at)? + 4;
    }
    Some(at)
}

/// Where two uncompressed BAM streams first differ: header or record index.
fn bam_diff(ours: &[u8], theirs: &[u8]) -> Option<String> {
    let at = ours.iter().zip(theirs).take_while(|(a, b)| a == b).count();
    if at == ours.len() && at == theirs.len() {
        return None;
    }
    let (a, b) = (ours.get(at), theirs.get(at));
    let hint = |x: Option<&u8>| x.map_or("EOF".into(), |v| format!("{v:#04x}"));
    let mut place = "header".to_string();
    if let Some(mut rec) = header_end(theirs).filter(|&e| at >= e) {
        let mut i = 0;
        while let Some(size) = le_u32(theirs, rec).filter(|s| rec + 4 + s <= at) {
            rec += 4 + size;
            i += 1;
        }
        place = format!("record #{i} (byte {} of it)", at - rec);
    }
    Some(format!(
        "offset {at} in {place}: ours {} vs samtools {} (lengths {} / {})",
        hint(a),
        hint(b),
        ours.len(),
        theirs.len()
    ))
}

fn bytes_case(st: &Oracle, name: &str, sam: String) -> Option<String> {
    let tmp = tempdir();
    let input = tmp.path().join(format!("{name}.sam"));
    std::fs::write(&input, sam).unwrap();
    let theirs = raw_bam(&|a| st.run(a), &input, &tmp.path().join("st.bam"));
    let ours = raw_bam(&|a| sortase(a), &input, &tmp.path().join("ours.bam"));
    match (ours, theirs) {
        (_, Err(e)) => Some(format!("{name}: oracle failed: {e}")),
        (Err(e), _) => Some(format!("{name}: {e}")),
        (Ok(o), Ok(t)) => bam_diff(&o, &t).map(|d| format!("{name}: {d}")),
    }
}

/// Strict: the decompressed BAM stream equals samtools' byte for byte
/// (integer tag types, bin, CG tag for long CIGARs, header text...).
#[test]
fn edge_bam_bytes_identical_to_samtools() {
    let Some(st) = oracle() else { return };
    let failures: Vec<String> = edge_cases::all()
        .into_iter()
        .filter_map(|(name, gen)| bytes_case(st, name, gen()))
        .collect();
    assert_no_failures("uncompressed BAM bytes vs samtools", &failures);
}
