//! Every `.sam` of htslib's test corpus through sortase and samtools:
//! SAM→BAM, BAM→SAM and SAM→SAM with default, 1 and 4 threads, plus a
//! BAM→CRAM→BAM round trip on files whose reference is in the corpus.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::checks::{self, drop_regenerated_md_nm, first_line, oracle_text};
use crate::common::{assert_no_failures, check_same, p, records, skip, sortase, tempdir};
use crate::oracle::{oracle, Oracle};

/// Fewer compared files than this means the test lost its corpus.
const MIN_COMPARED: usize = 60;

pub fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("SORTASE_HTSLIB_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/htslib-test/test"));
    if dir.is_dir() {
        Some(dir)
    } else {
        skip(&format!(
            "htslib test corpus not found at {} (apt-get install htslib-test)",
            dir.display()
        ));
        None
    }
}

pub fn find_sams(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read corpus dir") {
        let path = entry.unwrap().path();
        if path.is_dir() {
            find_sams(&path, out);
        } else if path.extension().is_some_and(|e| e == "sam") {
            out.push(path);
        }
    }
}

enum Outcome {
    /// Compared; the failures found.
    Compared(Vec<String>),
    /// The oracle rejects the file; sortase must reject it too.
    Rejected(String, Vec<String>),
    /// Not comparable, with the reason.
    Skipped(String),
}

/// Run `work` over `items` on two threads, keeping the input order.
pub fn par_map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let r = work(item);
                results.lock().unwrap().push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

fn check_file(st: &Oracle, sam: &Path, name: &str) -> Outcome {
    let tmp = tempdir();
    let dir = tmp.path();
    let reference = match checks::reference(st, sam, dir) {
        Ok(r) => r,
        Err(e) if e.starts_with("oracle rejects") => {
            return Outcome::Rejected(e, must_reject(sam, dir, name))
        }
        Err(e) => return Outcome::Skipped(e),
    };
    let expected = &reference.text;
    let mut failures = Vec::new();
    let mut decoded: Vec<Vec<u8>> = Vec::new(); // BAMs already verified
    for threads in [None, Some("1"), Some("4")] {
        let extra: Vec<&str> = threads.map(|t| vec!["-@", t]).unwrap_or_default();
        let tag = threads.map(|t| format!(" (-@ {t})")).unwrap_or_default();
        let out = dir.join(format!("ours{}.bam", threads.unwrap_or("")));
        let label = format!("{name}: SAM→BAM{tag}");
        let mut args = vec!["view", "-b"];
        args.extend_from_slice(&extra);
        args.extend_from_slice(&["-o", p(&out), p(sam)]);
        let run = sortase(&args);
        if !run.ok() {
            failures.push(format!("{label}: {}", run.failure()));
        } else {
            let bytes = std::fs::read(&out).unwrap_or_default();
            // Byte-identical to an output already decoded: same verdict.
            if !decoded.contains(&bytes) {
                match oracle_text(st, &out, &[]) {
                    Ok(text) => check_same(&mut failures, &label, &text, expected),
                    Err(e) => failures.push(format!("{label}: samtools cannot read our BAM: {e}")),
                }
                decoded.push(bytes);
            }
        }
        checks::to_sam(
            &reference.bam,
            &extra,
            expected,
            &mut failures,
            &format!("{name}: BAM→SAM{tag}"),
        );
    }
    checks::to_sam(
        sam,
        &[],
        expected,
        &mut failures,
        &format!("{name}: SAM→SAM"),
    );
    Outcome::Compared(failures)
}

/// A file samtools cannot convert to BAM: sortase must fail and leave no output.
fn must_reject(sam: &Path, dir: &Path, name: &str) -> Vec<String> {
    let out = dir.join("rejected.bam");
    let run = sortase(&["view", "-b", "-o", p(&out), p(sam)]);
    let mut failures = Vec::new();
    if run.ok() {
        failures.push(format!(
            "{name}: samtools rejects it (SAM→BAM) but sortase succeeded"
        ));
    } else if out.exists() {
        failures.push(format!(
            "{name}: failed SAM→BAM left {} behind",
            out.display()
        ));
    }
    failures
}

#[test]
fn corpus_sam_bam_round_trips() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&dir, &mut sams);
    sams.sort();
    let names: Vec<String> = sams
        .iter()
        .map(|s| s.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    let work: Vec<(&PathBuf, &String)> = sams.iter().zip(&names).collect();
    let outcomes = par_map(&work, |(sam, name)| check_file(st, sam, name));

    let (mut compared, mut failures) = (0, Vec::new());
    for ((_, name), outcome) in work.iter().zip(outcomes) {
        match outcome {
            Outcome::Compared(f) => {
                compared += 1;
                failures.extend(f);
            }
            Outcome::Rejected(why, f) => {
                eprintln!("corpus: not compared {name}: {why}");
                failures.extend(f);
            }
            Outcome::Skipped(why) => eprintln!("corpus: skipped {name}: {why}"),
        }
    }
    eprintln!("corpus: compared {compared} of {} files", work.len());
    assert!(
        compared > MIN_COMPARED,
        "only {compared} corpus files compared (want > {MIN_COMPARED})"
    );
    assert_no_failures("corpus SAM/BAM round trips", &failures);
}

/// Corpus files whose own reference is in the corpus and whose records
/// samtools itself round-trips through CRAM exactly (modulo regenerated MD/NM).
pub const CRAM_CASES: &[(&str, &str)] = &[
    ("ce#1000.sam", "ce.fa"),
    ("ce#5b.sam", "ce.fa"),
    ("ce#unmap2.sam", "ce.fa"),
    ("ce#supp.sam", "ce.fa"),
    ("ce#large_seq.sam", "ce.fa"),
    ("xx#pair.sam", "xx.fa"),
    ("xx#triplet.sam", "xx.fa"),
    ("xx#rg.sam", "xx.fa"),
    ("xx#large_aux.sam", "xx.fa"),
    ("c1#clip.sam", "c1.fa"),
    ("c2#pad.sam", "c2.fa"),
    ("realn01.sam", "realn01.fa"),
];

fn cram_case(st: &Oracle, dir: &Path, sam: &str, fasta: &str) -> Vec<String> {
    let tmp = tempdir();
    let work = tmp.path();
    let (sam_path, fa) = (dir.join(sam), dir.join(fasta));
    let reference = match checks::reference(st, &sam_path, work) {
        Ok(r) => r,
        Err(e) => return vec![format!("{sam}: {e}")],
    };
    let original = records(&reference.text);
    let (cram, back, theirs) = (
        work.join("x.cram"),
        work.join("back.bam"),
        work.join("st.cram"),
    );
    let mut failures = Vec::new();
    let mut fail = |what: &str, msg: String| failures.push(format!("{sam}: {what}: {msg}"));
    let enc = sortase(&[
        "view",
        "-C",
        "-T",
        p(&fa),
        "-o",
        p(&cram),
        p(&reference.bam),
    ]);
    if !enc.ok() {
        fail("BAM→CRAM", enc.failure());
    } else {
        let dec = sortase(&["view", "-b", "-T", p(&fa), "-o", p(&back), p(&cram)]);
        match (dec.ok(), oracle_text(st, &back, &[])) {
            (false, _) => fail("CRAM→BAM", dec.failure()),
            (true, Err(e)) => fail("CRAM→BAM", format!("samtools cannot read it: {e}")),
            (true, Ok(t)) => diff_into(
                &mut fail,
                "BAM→CRAM→BAM (sortase both ways)",
                &original,
                &records(&t),
            ),
        }
        match oracle_text(st, &cram, &["-T", p(&fa)]) {
            Err(e) => fail("samtools reading our CRAM", e),
            Ok(t) => {
                diff_into(
                    &mut fail,
                    "samtools reading our CRAM",
                    &original,
                    &records(&t),
                );
                exact_decode(&mut fail, "our CRAM", &cram, &fa, &records(&t));
            }
        }
    }
    let st_enc = st.run(&[
        "view",
        "-C",
        "-T",
        p(&fa),
        "-o",
        p(&theirs),
        p(&reference.bam),
    ]);
    if !st_enc.ok() {
        fail("oracle BAM→CRAM", first_line(&st_enc.stderr).to_string());
    } else {
        let ours = sortase(&["view", "-T", p(&fa), p(&theirs)]);
        match ours.ok() {
            false => fail("sortase reading samtools' CRAM", ours.failure()),
            true => diff_into(
                &mut fail,
                "sortase reading samtools' CRAM",
                &original,
                &ours.text(),
            ),
        }
        match oracle_text(st, &theirs, &["-T", p(&fa)]) {
            Err(e) => fail("samtools reading its CRAM", e),
            Ok(t) => exact_decode(&mut fail, "samtools' CRAM", &theirs, &fa, &records(&t)),
        }
    }
    failures
}

/// sortase's decoding of `cram` must be samtools' record for record, MD/NM regenerated as samtools
/// does included.
fn exact_decode(
    fail: &mut impl FnMut(&str, String),
    what: &str,
    cram: &Path,
    fa: &Path,
    samtools: &str,
) {
    let ours = sortase(&["view", "-T", p(fa), p(cram)]);
    if !ours.ok() {
        return fail(&format!("sortase decoding {what}"), ours.failure());
    }
    if let Some(d) = crate::common::first_diff(&ours.text(), samtools) {
        fail(
            &format!("sortase decoding {what} vs samtools decoding it"),
            d,
        );
    }
}

fn diff_into(fail: &mut impl FnMut(&str, String), what: &str, original: &str, derived: &str) {
    let derived = drop_regenerated_md_nm(original, derived);
    if let Some(d) = crate::common::first_diff(&derived, original) {
        fail(what, d);
    }
}

#[test]
fn corpus_cram_round_trips() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let failures: Vec<String> =
        par_map(CRAM_CASES, |(sam, fa)| cram_case(st, &dir, sam, fa)).concat();
    assert_no_failures("corpus CRAM round trips", &failures);
}
