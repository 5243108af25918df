//! Which bytes of a BAM a read covers, cut into ranges that worker threads decode independently.
//!
//! The whole file, or a region's span from its index (BAI/CSI: the first chunk's start, a record start
//! the index vouches for, to the last chunk's end), is cut at equal compressed distances. Each cut
//! is moved to a proven record start by the range planner's boundary finder
//! (`sortase_index::range::find_first_record`), lazily, by the worker that first needs it and once
//! only (a [`OnceLock`] per cut): planning costs nothing up front whatever the file's size, and a
//! stream that stops early never looks at the cuts it did not reach.

use sortase_bam::query::Region;
use sortase_bam::BamError;
use sortase_index::range::{find_first_record, RecordRange};
use sortase_io::Source;
use std::path::Path;
use std::sync::OnceLock;

/// Largest compressed bytes of one range. A range's Arrow output waits whole in memory until its
/// turn, so this (times the window of ranges in flight) bounds a stream's memory.
pub const MAX_RANGE_BYTES: u64 = 4 << 20;
/// Smallest range: each cut costs one boundary check ([`CHECK_WINDOW`] inflated).
pub const MIN_RANGE_BYTES: u64 = 256 << 10;
/// Decompressed bytes of records the boundary finder checks per cut. Smaller than the range
/// planner's 256 KiB (`find_record_start`), as the merge's samples are, because the stream verifies
/// every cut it passes (a false one only costs the restart described in `pipeline`): with 256 KiB
/// the ~300 cuts of the 1.25 GB bench BAM each inflated four blocks and faulted in fresh buffers
/// (~45k of the projection's page faults, `perf record -e page-faults`).
pub const CHECK_WINDOW: usize = 32 << 10;

/// The ranges of one read.
#[derive(Debug)]
pub struct Plan {
    /// Virtual offset of the first record to read.
    first: u64,
    /// Compressed offsets of the cuts (each moved to a record start when first needed).
    cuts: Vec<u64>,
    boundaries: Vec<OnceLock<Result<Option<u64>, String>>>,
    n_ref: usize,
}

impl Plan {
    /// Ranges from the record at `first` to the compressed offset `span_end`, about
    /// `threads * 4` of them and each at most [`MAX_RANGE_BYTES`].
    pub fn new(first: u64, span_end: u64, threads: usize, n_ref: usize) -> Self {
        let start = first >> 16;
        let span = span_end.saturating_sub(start);
        let size = (span / (threads.max(1) as u64 * 4)).clamp(MIN_RANGE_BYTES, MAX_RANGE_BYTES);
        let cuts: Vec<u64> = (1..)
            .map(|k| start + k * size)
            .take_while(|&c| c < span_end)
            .collect();
        let boundaries = cuts.iter().map(|_| OnceLock::new()).collect();
        Self {
            first,
            cuts,
            boundaries,
            n_ref,
        }
    }

    /// One range from `first` to the end of the file.
    pub fn single(first: u64, n_ref: usize) -> Self {
        Self::new(first, 0, 1, n_ref)
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.cuts.len() + 1
    }

    /// Whether there is no range (never: a plan has at least one, maybe empty).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Range `k`: from its start boundary to the next one (`u64::MAX`: to the end of the file);
    /// `None` when the cut found no record start after it (the previous range runs to the end).
    pub fn range(&self, k: usize, file: &mut Source) -> Result<Option<RecordRange>, BamError> {
        let start = match k {
            0 => self.first,
            _ => match self.boundary(k - 1, file)? {
                Some(s) => s,
                None => return Ok(None),
            },
        };
        let end = match k < self.cuts.len() {
            true => self.boundary(k, file)?.unwrap_or(u64::MAX),
            false => u64::MAX,
        };
        Ok(Some(RecordRange { start, end }))
    }

    /// The record start at or after cut `i`.
    fn boundary(&self, i: usize, file: &mut Source) -> Result<Option<u64>, BamError> {
        self.boundaries[i]
            .get_or_init(|| {
                find_first_record(file, self.cuts[i], self.n_ref, CHECK_WINDOW)
                    .map(|found| found.map(|(start, _)| start))
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(BamError::Header)
    }
}

/// The index chunks of `region` in `bam`: the virtual offset of the first record to read and the
/// compressed offset past the last chunk (`None`: no record can overlap the region).
pub fn region_span(bam: &Path, region: &Region) -> Result<Option<(u64, u64)>, BamError> {
    use noodles::core::Position;
    use noodles::csi::BinningIndex;
    let path = sortase_bam::query::find_index(bam).ok_or_else(|| {
        BamError::Header(
            "a region needs an index (.bai or .csi) next to the file; create one with `sortase index`"
                .into(),
        )
    })?;
    let index = sortase_bam::query::read_index(&path)?;
    let start = Position::try_from((region.beg.max(0) + 1) as usize)
        .map_err(|e| BamError::Header(e.to_string()))?;
    let chunks = index.query(region.tid, (start..).into())?;
    let first = chunks.iter().map(|c| u64::from(c.start())).min();
    let last = chunks.iter().map(|c| (u64::from(c.end()) >> 16) + 1).max();
    Ok(first.zip(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_cover_the_span_in_steps_within_bounds() {
        let p = Plan::new(100 << 16, 64 << 20, 2, 1);
        assert_eq!(p.len(), 16);
        assert!(p.cuts.windows(2).all(|w| w[1] - w[0] == MAX_RANGE_BYTES));
        assert_eq!(Plan::new(0, 100_000, 8, 1).len(), 1);
        assert_eq!(Plan::single(5 << 16, 1).len(), 1);
    }
}
