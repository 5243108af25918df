//! Stage 1 ([`CountTask`]): the records and record bytes of one byte range, and where it really ends.

use super::TaskError;
use serde::{Deserialize, Serialize};
use sortase_bam::BamError;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::runtime::Runtime;
use sortase_index::range::{RangeStream, RecordRange};
use std::path::{Path, PathBuf};

/// Stage 1: count the records of one byte range of the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountTask {
    /// The input BAM.
    pub input: PathBuf,
    /// References in its header.
    pub n_ref: usize,
    /// The range's number in the plan.
    pub range: usize,
    /// Virtual offset of the range's first record.
    pub start: u64,
    /// Planned starts of the later ranges, ascending: the range ends at the first of them that is a
    /// record start (normally the first one), or at the end of the file.
    pub later_starts: Vec<u64>,
}

/// What a [`CountTask`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountOutput {
    /// The range's number in the plan.
    pub range: usize,
    /// Virtual offset of the range's first record.
    pub start: u64,
    /// Where the range proved to end (a later range's start; `None`: the end of the file).
    pub end: Option<u64>,
    /// Records in `[start, end)`.
    pub records: u64,
    /// Their bytes, `block_size` prefixes included (as the sorter counts them).
    pub record_bytes: u64,
    /// Reading failed. Reported, not raised: a range that starts at a false boundary may fail, and
    /// only matters if the driver's walk from the first range reaches it.
    pub error: Option<TaskError>,
}

impl CountTask {
    /// Counts the range.
    pub fn run(&self, rt: &Runtime) -> Result<CountOutput> {
        let mut next = 0;
        loop {
            let end = self.later_starts.get(next).copied();
            let range = RecordRange {
                start: self.start,
                end: end.unwrap_or(u64::MAX),
            };
            let mut out = CountOutput {
                range: self.range,
                start: self.start,
                end,
                records: 0,
                record_bytes: 0,
                error: None,
            };
            match count(&self.input, &range, self.n_ref, rt, &mut out) {
                Ok(()) => return Ok(out),
                Err(Counted::Boundary(found)) => {
                    // Read from a true record start, `found` is a true record start: end at the
                    // first planned start at or after it.
                    next = self
                        .later_starts
                        .partition_point(|&s| s < found)
                        .max(next + 1);
                }
                Err(Counted::Failed(e)) if e.kind() == ErrorKind::Cancelled => return Err(e),
                Err(Counted::Failed(e)) => {
                    out.error = Some(TaskError::from(&e));
                    return Ok(out);
                }
            }
        }
    }
}

enum Counted {
    /// The planned end is not a record start; the next record starts at this virtual offset.
    Boundary(u64),
    Failed(Error),
}

fn count(
    input: &Path,
    range: &RecordRange,
    n_ref: usize,
    rt: &Runtime,
    out: &mut CountOutput,
) -> std::result::Result<(), Counted> {
    let failed = |e: BamError| match e {
        BamError::RangeBoundary { found, .. } => Counted::Boundary(found),
        e => Counted::Failed(Error::from(e).context(input.display().to_string())),
    };
    let mut stream = RangeStream::open(input, range, n_ref).map_err(failed)?;
    while let Some(batch) = stream.next_batch().map_err(failed)? {
        rt.check_cancelled().map_err(Counted::Failed)?;
        out.records += batch.len() as u64;
        out.record_bytes += batch.bytes().len() as u64;
    }
    Ok(())
}
