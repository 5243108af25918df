//! The standard differential checks shared by the corpus and edge-case tests:
//! SAM→BAM (decoded by the oracle), BAM→SAM and SAM→SAM, each compared with
//! what samtools produces, ignoring `@PG` header lines.

use std::path::{Path, PathBuf};

use crate::common::{check_same, p, sortase, strip_pg};
use crate::oracle::Oracle;

/// What samtools makes of an input SAM file.
pub struct Reference {
    /// `samtools view -b -o ref.bam in.sam`.
    pub bam: PathBuf,
    /// `samtools view -h --no-PG ref.bam` without `@PG` lines.
    pub text: String,
}

/// Let the oracle convert `sam` to BAM in `dir` and decode it again.
/// `Err` carries the oracle's first error line.
pub fn reference(st: &Oracle, sam: &Path, dir: &Path) -> Result<Reference, String> {
    let bam = dir.join("ref.bam");
    let enc = st.run(&["view", "-b", "-o", p(&bam), p(sam)]);
    if !enc.ok() {
        return Err(format!("oracle rejects it: {}", first_line(&enc.stderr)));
    }
    let text =
        oracle_text(st, &bam, &[]).map_err(|e| format!("oracle cannot read its own BAM: {e}"))?;
    Ok(Reference { bam, text })
}

/// `samtools view -h --no-PG [extra] file`, `@PG` lines removed.
pub fn oracle_text(st: &Oracle, file: &Path, extra: &[&str]) -> Result<String, String> {
    let mut args = vec!["view", "-h", "--no-PG"];
    args.extend_from_slice(extra);
    args.push(p(file));
    let run = st.run(&args);
    if run.ok() {
        Ok(strip_pg(&run.text()))
    } else {
        Err(run.failure())
    }
}

pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// `sortase view -b [extra] -o out in`, then decode `out` with the oracle and
/// compare it with `expected`. Returns the output file for further checks.
pub fn sam_to_bam(
    st: &Oracle,
    input: &Path,
    out: &Path,
    extra: &[&str],
    expected: &str,
    failures: &mut Vec<String>,
    label: &str,
) -> Option<PathBuf> {
    let mut args = vec!["view", "-b"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-o", p(out), p(input)]);
    let run = sortase(&args);
    if !run.ok() {
        failures.push(format!("{label}: {}", run.failure()));
        return None;
    }
    match oracle_text(st, out, &[]) {
        Ok(text) => check_same(failures, label, &text, expected),
        Err(e) => failures.push(format!("{label}: samtools cannot read our BAM: {e}")),
    }
    Some(out.to_path_buf())
}

/// `sortase view -h [extra] in` compared with `expected`.
pub fn to_sam(
    input: &Path,
    extra: &[&str],
    expected: &str,
    failures: &mut Vec<String>,
    label: &str,
) {
    let mut args = vec!["view", "-h"];
    args.extend_from_slice(extra);
    args.push(p(input));
    let run = sortase(&args);
    if run.ok() {
        check_same(failures, label, &strip_pg(&run.text()), expected);
    } else {
        failures.push(format!("{label}: {}", run.failure()));
    }
}

/// All standard checks for one SAM file; failures are labelled with `name`.
pub fn round_trips(st: &Oracle, sam: &Path, dir: &Path, name: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let reference = match reference(st, sam, dir) {
        Ok(r) => r,
        Err(e) => return vec![format!("{name}: test input invalid, {e}")],
    };
    let expected = &reference.text;
    let ours = dir.join("ours.bam");
    sam_to_bam(
        st,
        sam,
        &ours,
        &[],
        expected,
        &mut failures,
        &format!("{name}: SAM→BAM"),
    );
    to_sam(
        &reference.bam,
        &[],
        expected,
        &mut failures,
        &format!("{name}: BAM→SAM"),
    );
    to_sam(
        sam,
        &[],
        expected,
        &mut failures,
        &format!("{name}: SAM→SAM"),
    );
    failures
}

/// Drop, from each `derived` record, the `MD:Z`/`NM:i` tags that the
/// corresponding `original` record does not have. htslib's CRAM decoder
/// regenerates MD and NM for every mapped read by default (`decode_md=1`), so
/// they legitimately appear after a CRAM round trip. Nothing else is changed;
/// lines are paired by position (CRAM keeps record order).
pub fn drop_regenerated_md_nm(original: &str, derived: &str) -> String {
    let orig: Vec<&str> = original.lines().collect();
    let der: Vec<&str> = derived.lines().collect();
    if orig.len() != der.len() {
        return derived.to_string();
    }
    let mut out = String::with_capacity(derived.len());
    for (o, d) in orig.iter().zip(&der) {
        let has = |tag: &str| o.split('\t').skip(11).any(|f| f.starts_with(tag));
        let regenerated = |f: &str| {
            (f.starts_with("MD:Z:") && !has("MD:")) || (f.starts_with("NM:i:") && !has("NM:"))
        };
        let kept: Vec<&str> = d
            .split('\t')
            .enumerate()
            .filter(|(i, f)| *i < 11 || !regenerated(f))
            .map(|(_, f)| f)
            .collect();
        out.push_str(&kept.join("\t"));
        out.push('\n');
    }
    out
}
