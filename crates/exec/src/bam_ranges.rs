//! Byte ranges of a BAM as units of work: the planner of crates/index (`sortase_index::range`) cuts a
//! BAM into ranges of whole records; a job either maps them on its own threads ([`scan`], what `run()`
//! does) or hands them out as serialisable [`BamSlice`]s (range tasks another process or machine runs,
//! whose parts are put back in file order by [`in_order`]).
//!
//! The planner may be fooled by data that looks like a record boundary; a slice then fails (it checks
//! that it ends exactly where the next one starts). `scan` then processes the whole file as one range,
//! as `sortase_index::range::map_ranges` does; a driver of range tasks does the same with the plan's
//! `fallback()` when any task fails.

use crate::error::Error;
use crate::runtime::Runtime;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sortase_bam::{Header, RecordBatch, RecordRef};
use sortase_index::range::{map_ranges, plan_ranges, RangeStream, RecordRange};
use std::path::{Path, PathBuf};

/// The bytes of one input a range task (the facade's `MergeTask`, `SnpPileupTask`) reads
/// besides its header: compressed file offsets from the start of the block its reader starts in
/// to the start of the block where every reader has stopped (`None`: the end of the file). A
/// record that starts in that last block may end in a later one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSpan {
    /// The input.
    pub path: PathBuf,
    /// Compressed offset reading starts at.
    pub start: u64,
    /// Compressed offset of the block the last record read starts in, at the latest.
    pub end: Option<u64>,
}

/// Ranges per thread: more ranges than threads keep all threads busy to the end.
pub const RANGES_PER_THREAD: usize = 4;

/// One byte range of a BAM: the records whose first byte lies in `range`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BamSlice {
    /// The BAM.
    pub input: PathBuf,
    /// The slice's number in file order (0-based).
    pub part: usize,
    /// The range of record-start virtual offsets.
    pub range: RecordRange,
    /// References in the BAM's header (records are checked against it).
    pub n_ref: usize,
}

impl BamSlice {
    /// Calls `f` on every batch of the slice's records, checking `rt`'s cancellation between batches.
    pub fn for_each_batch(&self, rt: &Runtime, mut f: impl FnMut(&RecordBatch)) -> Result<()> {
        let mut stream = RangeStream::open(&self.input, &self.range, self.n_ref)?;
        loop {
            rt.check_cancelled()?;
            match stream.next_batch()? {
                Some(batch) => f(&batch),
                None => return Ok(()),
            }
        }
    }
}

/// The header of the BAM at `input` and about `n` slices covering its records.
pub fn plan_slices(input: &Path, n: usize) -> Result<(Header, Vec<BamSlice>)> {
    let plan = plan_ranges(input, n)?;
    let n_ref = plan.header.references().len();
    let slices = plan
        .ranges
        .iter()
        .enumerate()
        .map(|(part, range)| BamSlice {
            input: input.to_path_buf(),
            part,
            range: *range,
            n_ref,
        })
        .collect();
    Ok((plan.header, slices))
}

/// The whole file as one slice: what to run when a slice of `slices` failed.
pub fn whole(slices: &[BamSlice]) -> Vec<BamSlice> {
    slices
        .first()
        .map(|first| BamSlice {
            part: 0,
            range: RecordRange {
                start: first.range.start,
                end: u64::MAX,
            },
            ..first.clone()
        })
        .into_iter()
        .collect()
}

/// `parts` sorted by slice number, checked to hold each of the `n` slices exactly once.
pub fn in_order<T>(mut parts: Vec<T>, n: usize, part: impl Fn(&T) -> usize) -> Result<Vec<T>> {
    parts.sort_by_key(&part);
    let numbers: Vec<usize> = parts.iter().map(&part).collect();
    if numbers != (0..n).collect::<Vec<_>>() {
        bail!(Error::argument(format!(
            "range tasks: expected the parts of {n} tasks, each once; got parts {numbers:?}"
        )));
    }
    Ok(parts)
}

/// Runs `add` over every record of the BAM at `path` on `rt.threads()` threads, one accumulator per
/// range (made by `new` from the number of references), returned in file order with the header.
/// Stops between batches when `rt` is cancelled.
pub fn scan<T: Send>(
    path: &Path,
    rt: &Runtime,
    new: impl Fn(usize) -> T + Sync,
    add: impl Fn(&mut T, &RecordRef<'_>) + Sync,
) -> Result<(Header, Vec<T>)> {
    let threads = rt.threads();
    let plan = plan_ranges(path, threads * RANGES_PER_THREAD)?;
    let n_ref = plan.header.references().len();
    // A spinner of the records read so far (flagstat, idxstats, view -c, stats): one atomic add per
    // batch; nothing is drawn unless stderr is a terminal.
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let progress = rt.progress(&format!("{name}: records"), 0);
    let parts = map_ranges(path, &plan, threads, |mut stream| {
        let mut acc = new(n_ref);
        loop {
            rt.check_cancelled()?;
            let Some(batch) = stream.next_batch()? else {
                break;
            };
            for r in batch.iter() {
                add(&mut acc, &r);
            }
            progress.add(batch.len() as u64);
        }
        Ok::<_, anyhow::Error>(acc)
    });
    progress.finish();
    rt.check_cancelled()?;
    Ok((plan.header, parts?))
}

/// Opens a BAM that must exist, for the message samtools-like commands give first.
pub fn check_readable(path: &Path) -> Result<()> {
    sortase_io::Source::open_path(path)
        .with_context(|| format!("{}: cannot open", path.display()))?;
    Ok(())
}
