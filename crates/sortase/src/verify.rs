//! [`VerifyJob`]: whether a file's records are in a sort order (`sortase sort --verify`, as mako's
//! `--verify`): one streaming pass, nothing written. Each record is compared with the one before it
//! by samtools' comparison for the order (the sort crate's, so "sorted" means exactly what `sortase
//! sort` and `samtools sort` produce, ties in any order); the pass stops at the first record that
//! sorts before its predecessor and reports both.
//!
//! ```
//! use sortase::{Order, Runtime, VerifyJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! let runtime = Runtime::with_threads(1)?;
//! let report = VerifyJob::new(input.to_str().unwrap(), Order::Coordinate).run(&runtime)?;
//! let bad = report.first_unsorted.unwrap();
//! assert_eq!((bad.record, bad.name.as_str(), bad.previous_name.as_str()), (2, "r1", "r2"));
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::{Header, RecordRef};
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::input::Input;
use sortase_exec::options::Order;
use sortase_exec::runtime::Runtime;
use sortase_sort::order::find_tag;
use sortase_sort::SortOrder;
use std::cmp::Ordering;

/// Checks that one input is sorted in `order`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyJob {
    /// The input path (`-`: standard input).
    pub input: String,
    /// The order to check.
    pub order: Order,
    /// Reference FASTA (CRAM input).
    pub reference: Option<std::path::PathBuf>,
}

/// The first record out of order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsorted {
    /// Its number in the file (1-based).
    pub record: u64,
    /// Its read name.
    pub name: String,
    /// Its position, `RNAME:POS` (1-based) or `*`.
    pub position: String,
    /// The read name of the record before it.
    pub previous_name: String,
    /// The position of the record before it.
    pub previous_position: String,
}

/// What a check found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Records read (up to and including the first out of order).
    pub records: u64,
    /// The order checked, as samtools' `@HD` values name it (`SO`, then `SS` if any).
    pub order: String,
    /// The first record that sorts before its predecessor; `None`: the file is sorted.
    pub first_unsorted: Option<Unsorted>,
}

impl VerifyJob {
    /// Checks `input` for `order`.
    pub fn new(input: impl Into<String>, order: Order) -> Self {
        Self {
            input: input.into(),
            order,
            reference: None,
        }
    }

    /// Reads the input once on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<VerifyReport> {
        verify(self, rt).map_err(Error::from)
    }
}

fn verify(job: &VerifyJob, rt: &Runtime) -> anyhow::Result<VerifyReport> {
    let progress = rt.progress("verify", 0);
    let mut input = Input::open(
        &job.input,
        rt.threads(),
        job.reference.as_deref(),
        &progress,
    )
    .with_context(|| job.input.clone())?;
    input.set_cancel(rt.cancel_flag().clone());
    let order = job.order.resolve_with(&input.header)?;
    let (so, ss) = order.header_values();
    let mut report = VerifyReport {
        order: ss.unwrap_or_else(|| so.to_string()),
        ..VerifyReport::default()
    };
    let header = input.header.clone();
    let mut previous: Vec<u8> = Vec::new();
    let r = input.for_each_batch(|batch| {
        for i in 0..batch.len() {
            let rec = &batch.raw(i)[4..];
            report.records += 1;
            if let SortOrder::TemplateCoordinate(t) = &order {
                t.key(rec).map_err(|e| Error::new(ErrorKind::Format, e))?;
            }
            if report.records > 1 && compare(&order, rec, &previous) == Ordering::Less {
                report.first_unsorted = Some(Unsorted {
                    record: report.records,
                    name: name(rec),
                    position: position(&header, rec),
                    previous_name: name(&previous),
                    previous_position: position(&header, &previous),
                });
                // Stops the pass: the answer is known.
                return Err(Error::cancelled().into());
            }
            previous.clear();
            previous.extend_from_slice(rec);
        }
        Ok(())
    });
    match r {
        Err(_) if report.first_unsorted.is_some() => Ok(report),
        Err(e) => Err(e.context(job.input.clone())),
        Ok(()) => Ok(report),
    }
}

/// samtools' comparison of two records in `order` (tag orders read the tags here).
fn compare(order: &SortOrder, a: &[u8], b: &[u8]) -> Ordering {
    let (ta, tb) = match order {
        SortOrder::Tag { tag, .. } => (find_tag(a, *tag), find_tag(b, *tag)),
        _ => (None, None),
    };
    order.compare(a, b, ta, tb)
}

fn name(rec: &[u8]) -> String {
    String::from_utf8_lossy(RecordRef::new_unchecked(rec).read_name()).into_owned()
}

fn position(header: &Header, rec: &[u8]) -> String {
    let r = RecordRef::new_unchecked(rec);
    let refs = header.references();
    match usize::try_from(r.reference_sequence_id())
        .ok()
        .and_then(|t| refs.get(t))
    {
        Some(reference) => format!(
            "{}:{}",
            String::from_utf8_lossy(&reference.name),
            i64::from(r.position()) + 1
        ),
        None => "*".to_string(),
    }
}
