//! The final phase on all cores: the output is cut into key ranges ([`crate::ranges`]); worker threads
//! take ranges in order, merge each from every source ([`RangeRecords`]) and encode it with the
//! caller's function (fill and deflate BGZF blocks, format SAM, ...); the calling thread receives
//! the encoded ranges in order and writes them. At most `lookahead` ranges are encoded but not yet
//! written, so memory stays bounded however far the workers run ahead.
//!
//! This replaces the one-thread heap merge that limits samtools at high thread counts: every record
//! is merged, copied and compressed by a worker; the calling thread only writes finished bytes.

use crate::merge::{memory_seq, merge_until, Source};
use crate::order::SortOrder;
use crate::ranges::{before, SplitPoint};
use crate::run::{RunFile, RunReader};
use crate::SortError;
use sortase_bam::RecordBatch;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Condvar, Mutex};

/// Everything the final phase reads: runs on disk (in input order) and the sorted in-memory records.
pub(crate) struct FinalSources<'a> {
    pub order: SortOrder,
    pub runs: &'a [&'a RunFile],
    pub batches: &'a [RecordBatch],
    pub first_seqs: &'a [u64],
    pub entries: &'a [(u64, u64)],
    pub splits: &'a [SplitPoint],
}

/// Sorted in-memory entries (`(key, batch << 32 | record)`) and the batches they point into.
type MemorySlice<'a> = (&'a [RecordBatch], &'a [(u64, u64)]);

/// The records of one key range, in output order.
pub struct RangeRecords<'a> {
    order: SortOrder,
    /// With no runs, the range is a slice of the sorted in-memory entries: no merge needed.
    memory: Option<MemorySlice<'a>>,
    sources: Vec<Source<'a>>,
    limit: Option<&'a SplitPoint>,
}

/// The records of one output range, in output order: what a range encoder consumes (the sort's
/// [`RangeRecords`], or the key ranges of `sortase merge`'s sorted inputs).
pub trait RangeSource {
    /// Calls `f` with every record of the range (with its `block_size` prefix), in order; returns the
    /// number of records.
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        f: F,
    ) -> Result<u64, SortError>;
}

impl RangeSource for RangeRecords<'_> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        if let Some((batches, entries)) = self.memory {
            // HOT: once per record of an in-memory sort: a random read of the record, then `f`.
            // (Software prefetch of the next records was tried: no measurable gain on the large
            // bench sort, 32.4-32.9 s against 32.1-32.6 s.)
            // INVARIANT: entries point into `batches` (built together by the sorter).
            for &(_, loc) in entries {
                f(batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize))?;
            }
            return Ok(entries.len() as u64);
        }
        merge_until(self.order, &mut self.sources, self.limit, |_, _, r| f(r))
    }
}

impl<'a> FinalSources<'a> {
    /// Number of ranges.
    pub fn ranges(&self) -> usize {
        self.splits.len() + 1
    }

    fn entry_before(&self, e: &(u64, u64), split: &SplitPoint) -> bool {
        let loc = e.1;
        let rec = self.batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize);
        before(
            &self.order,
            &rec[4..],
            memory_seq(self.first_seqs, loc),
            split,
        )
    }

    /// Index of the first in-memory entry at or after `split` (`None`: the start).
    fn entry_bound(&self, split: Option<&SplitPoint>) -> usize {
        match split {
            None => 0,
            Some(s) => self.entries.partition_point(|e| self.entry_before(e, s)),
        }
    }

    /// Opens range `i`: every run positioned at the range's first record, the in-memory slice.
    pub fn open(&self, i: usize) -> Result<RangeRecords<'a>, SortError> {
        let lo = i.checked_sub(1).map(|j| &self.splits[j]);
        let hi = self.splits.get(i);
        let start = self.entry_bound(lo);
        let end = match hi {
            Some(_) => self.entry_bound(hi),
            None => self.entries.len(),
        };
        let entries = &self.entries[start..end];
        if self.runs.is_empty() {
            return Ok(RangeRecords {
                order: self.order,
                memory: Some((self.batches, entries)),
                sources: Vec::new(),
                limit: None,
            });
        }
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        for &run in self.runs {
            if let Some(reader) = open_run_at(&self.order, run, lo, hi)? {
                sources.push(Source::Run(reader));
            }
        }
        if !entries.is_empty() {
            sources.push(Source::Memory {
                batches: self.batches,
                first_seqs: self.first_seqs,
                entries,
                at: 0,
            });
        }
        Ok(RangeRecords {
            order: self.order,
            memory: None,
            sources,
            limit: hi,
        })
    }
}

/// A reader of `run` on its first record at or after `lo`; `None` if the run has no record in
/// `[lo, hi)`.
fn open_run_at(
    order: &SortOrder,
    run: &RunFile,
    lo: Option<&SplitPoint>,
    hi: Option<&SplitPoint>,
) -> Result<Option<RunReader>, SortError> {
    match start_block(order, run, lo, hi) {
        Some(block) => open_run_from(order, &run.path, run.blocks[block].offset, None, lo),
        None => Ok(None),
    }
}

/// The block of `run` where reading the key range `[lo, hi)` starts, from the run's sparse index
/// alone; `None` if the run has no record in the range.
pub fn start_block(
    order: &SortOrder,
    run: &RunFile,
    lo: Option<&SplitPoint>,
    hi: Option<&SplitPoint>,
) -> Option<usize> {
    let starts_before =
        |i: usize, s: &SplitPoint| before(order, run.key(i), run.blocks[i].first_seq, s);
    let n = run.blocks.len();
    if n == 0 {
        return None;
    }
    // The last block starting before `lo` holds the first record at or after it (or it is the
    // next block's first record).
    let block = match lo {
        None => 0,
        Some(s) => partition(n, |i| starts_before(i, s)).saturating_sub(1),
    };
    match hi {
        Some(h) if !starts_before(block, h) => None,
        _ => Some(block),
    }
}

/// The file offset where every reader of `run` that stops at `hi` has stopped: the end of the
/// first block whose first record is at or after `hi` (a reader decodes it to see that record);
/// `None`: the end of the run (no `hi`, or no such block before the last).
pub fn end_offset(order: &SortOrder, run: &RunFile, hi: Option<&SplitPoint>) -> Option<u64> {
    let h = hi?;
    let n = run.blocks.len();
    let first_at_or_after = partition(n, |i| before(order, run.key(i), run.blocks[i].first_seq, h));
    run.blocks.get(first_at_or_after + 1).map(|b| b.offset)
}

/// Opens the run at `path` on the block at file offset `offset` ([`start_block`]) and moves to its
/// first record at or after `lo`; `None` if the run has none. Reading is expected to stop at file
/// offset `end` ([`end_offset`]; `None`: the run's end).
pub fn open_run_from(
    order: &SortOrder,
    path: &Path,
    offset: u64,
    end: Option<u64>,
    lo: Option<&SplitPoint>,
) -> Result<Option<RunReader>, SortError> {
    let mut reader = RunReader::open_range(path, offset, end)?;
    if let Some(s) = lo {
        while let Some(rec) = reader.current() {
            if !before(order, &rec[4..], reader.current_seq(), s) {
                break;
            }
            reader.advance()?;
        }
    }
    Ok(reader.current().is_some().then_some(reader))
}

/// The number of leading indices in `0..n` for which `pred` holds (`pred` true then false).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

struct Slots<T> {
    next: usize,
    written: usize,
    done: BTreeMap<usize, Result<T, SortError>>,
    stop: bool,
}

/// Runs `task(0..n)` on `threads` threads and hands the results to `sink` in order on the calling
/// thread, with at most `lookahead` tasks taken but not yet sunk (those being computed count): with
/// `lookahead == threads` a worker that finishes ahead of the oldest task waits for it; `2 * threads`
/// lets each run one task ahead (merge always, the sorter when its budget has room for the results
/// waiting). Stops at the first error.
pub fn ordered_tasks<T: Send>(
    threads: usize,
    n: usize,
    lookahead: usize,
    task: impl Fn(usize) -> Result<T, SortError> + Sync,
    mut sink: impl FnMut(T) -> Result<(), SortError>,
) -> Result<(), SortError> {
    let state = Mutex::new(Slots {
        next: 0,
        written: 0,
        done: BTreeMap::new(),
        stop: false,
    });
    let cv = Condvar::new();
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1).min(n) {
            scope.spawn(|| loop {
                let i = {
                    let mut st = lock();
                    while !st.stop && st.next < n && st.next >= st.written + lookahead.max(1) {
                        st = cv.wait(st).unwrap_or_else(|p| p.into_inner());
                    }
                    if st.stop || st.next >= n {
                        return;
                    }
                    st.next += 1;
                    st.next - 1
                };
                let r = catch_unwind(AssertUnwindSafe(|| task(i))).unwrap_or_else(|_| {
                    Err(SortError::Internal(format!("range {i}: worker panicked")))
                });
                lock().done.insert(i, r);
                cv.notify_all();
            });
        }
        let mut result = Ok(());
        for i in 0..n {
            let r = {
                let mut st = lock();
                loop {
                    if let Some(r) = st.done.remove(&i) {
                        st.written = i + 1;
                        break r;
                    }
                    st = cv.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            cv.notify_all();
            if let Err(e) = r.and_then(&mut sink) {
                result = Err(e);
                break;
            }
        }
        lock().stop = true;
        cv.notify_all();
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_order_and_errors_stop() {
        let mut got = Vec::new();
        ordered_tasks(
            4,
            100,
            3,
            |i| Ok(i * 2),
            |v| {
                got.push(v);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(got, (0..100).map(|i| i * 2).collect::<Vec<_>>());
        let r = ordered_tasks(
            3,
            50,
            4,
            |i| {
                if i == 7 {
                    Err(SortError::Internal("seven".into()))
                } else {
                    Ok(i)
                }
            },
            |_| Ok(()),
        );
        assert!(r.is_err());
        let r = ordered_tasks(
            2,
            10,
            2,
            |i| if i == 3 { panic!("boom") } else { Ok(i) },
            |_| Ok(()),
        );
        assert!(matches!(r, Err(SortError::Internal(_))));
    }
}
