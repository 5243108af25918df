//! k-way merge of sorted sources (runs on disk and the last in-memory batch) with a binary heap of
//! source numbers. Ties go to the lower source number: sources are numbered in input order, so the
//! merge is stable exactly like samtools' heap merge (`heap_lt`: file number, then record number).
//! [`merge_until`] stops at a split point, for the merge of one key range ([`crate::ranges`]).

use crate::order::{coordinate_key, tag_offset, SortOrder};
use crate::ranges::{before, SplitPoint};
use crate::run::RunReader;
use crate::SortError;
use sortase_bam::RecordBatch;
use std::cmp::Ordering;

/// A sorted sequence of raw records.
pub enum Source<'a> {
    /// A run file.
    Run(RunReader),
    /// Sorted in-memory records: batches plus `(key, batch << 32 | record)` entries in order.
    Memory {
        /// The batches the entries point into.
        batches: &'a [RecordBatch],
        /// Input sequence number of each batch's first record.
        first_seqs: &'a [u64],
        /// Sorted entries.
        entries: &'a [(u64, u64)],
        /// Next entry.
        at: usize,
    },
    /// Batches pulled from a callback (`Ok(None)` at the end), e.g. a sorted input file.
    Feed {
        /// Produces the next batch.
        next: BatchFeed<'a>,
        /// The current batch.
        batch: RecordBatch,
        /// Current record in `batch`.
        at: usize,
    },
}

/// A callback producing batches in order.
pub type BatchFeed<'a> = Box<dyn FnMut() -> Result<Option<RecordBatch>, SortError> + 'a>;

impl<'a> Source<'a> {
    /// A source over the batches `next` produces, positioned on the first record.
    pub fn feed(mut next: BatchFeed<'a>) -> Result<Self, SortError> {
        let batch = next_non_empty(&mut next)?;
        Ok(Source::Feed { next, batch, at: 0 })
    }
}

fn next_non_empty(next: &mut BatchFeed<'_>) -> Result<RecordBatch, SortError> {
    loop {
        match next()? {
            Some(b) if b.is_empty() => continue,
            Some(b) => return Ok(b),
            None => return Ok(RecordBatch::default()),
        }
    }
}

impl Source<'_> {
    #[inline]
    fn current(&self) -> Option<&[u8]> {
        match self {
            Source::Run(r) => r.current(),
            Source::Memory {
                batches,
                entries,
                at,
                ..
            } => entries
                .get(*at)
                .map(|&(_, loc)| batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize)),
            Source::Feed { batch, at, .. } => (*at < batch.len()).then(|| batch.raw(*at)),
        }
    }

    /// Input sequence number of the current record (sorted inputs of `merge` have none: 0).
    #[inline]
    fn current_seq(&self) -> u64 {
        match self {
            Source::Run(r) => r.current_seq(),
            Source::Memory {
                first_seqs,
                entries,
                at,
                ..
            } => entries
                .get(*at)
                .map_or(u64::MAX, |&(_, loc)| memory_seq(first_seqs, loc)),
            Source::Feed { .. } => 0,
        }
    }

    #[inline]
    fn advance(&mut self) -> Result<(), SortError> {
        match self {
            Source::Run(r) => r.advance(),
            Source::Memory { at, .. } => {
                *at += 1;
                Ok(())
            }
            Source::Feed { next, batch, at } => {
                *at += 1;
                if *at >= batch.len() {
                    *batch = next_non_empty(next)?;
                    *at = 0;
                }
                Ok(())
            }
        }
    }
}

/// Sequence number of the in-memory record at `loc` (`batch << 32 | record`).
#[inline]
pub fn memory_seq(first_seqs: &[u64], loc: u64) -> u64 {
    first_seqs[(loc >> 32) as usize] + (loc & 0xffff_ffff)
}

/// Per-source cache of what comparisons need: the coordinate key, the tag's offset, or the
/// template-coordinate order's packed prefix.
fn cache_key(order: &SortOrder, raw: &[u8]) -> u64 {
    match order {
        SortOrder::Coordinate => coordinate_key(&raw[4..]),
        SortOrder::Tag { tag, .. } => tag_offset(&raw[4..], *tag),
        SortOrder::Name { .. } => 0,
        SortOrder::TemplateCoordinate(t) => t.packed_key(&raw[4..]),
    }
}

struct Heads<'a, 's> {
    order: SortOrder,
    sources: &'s mut [Source<'a>],
    keys: Vec<u64>,
}

impl Heads<'_, '_> {
    /// Whether source `a`'s head sorts before source `b`'s (both non-empty).
    #[inline]
    fn less(&self, a: usize, b: usize) -> bool {
        let o = match self.order {
            SortOrder::Coordinate => self.keys[a].cmp(&self.keys[b]),
            SortOrder::TemplateCoordinate(t) => self.keys[a].cmp(&self.keys[b]).then_with(|| {
                t.compare(
                    &self.sources[a].current().expect("live source")[4..],
                    &self.sources[b].current().expect("live source")[4..],
                )
            }),
            _ => {
                let (ra, rb) = (
                    &self.sources[a].current().expect("live source")[4..],
                    &self.sources[b].current().expect("live source")[4..],
                );
                let (ta, tb) = match self.order {
                    SortOrder::Tag { .. } => (
                        crate::order::tag_at(ra, self.keys[a]),
                        crate::order::tag_at(rb, self.keys[b]),
                    ),
                    _ => (None, None),
                };
                self.order.compare(ra, rb, ta, tb)
            }
        };
        o == Ordering::Less || (o == Ordering::Equal && a < b)
    }
}

/// Merges `sources` in `order`, calling `emit` with each record's source number, sequence number
/// and bytes (with its `block_size` prefix).
pub fn merge(
    order: SortOrder,
    sources: &mut [Source<'_>],
    emit: impl FnMut(usize, u64, &[u8]) -> Result<(), SortError>,
) -> Result<u64, SortError> {
    merge_until(order, sources, None, emit)
}

/// [`merge`], stopping before the first record that does not sort before `limit`.
pub fn merge_until(
    order: SortOrder,
    sources: &mut [Source<'_>],
    limit: Option<&SplitPoint>,
    mut emit: impl FnMut(usize, u64, &[u8]) -> Result<(), SortError>,
) -> Result<u64, SortError> {
    let n = sources.len();
    let mut heads = Heads {
        order,
        keys: vec![0; n],
        sources,
    };
    let mut heap: Vec<usize> = Vec::with_capacity(n);
    for i in 0..n {
        if let Some(r) = heads.sources[i].current() {
            heads.keys[i] = cache_key(&order, r);
            heap.push(i);
        }
    }
    // Heapify (min-heap by `less`).
    for i in (0..heap.len() / 2).rev() {
        sift_down(&heads, &mut heap, i);
    }
    let mut count = 0u64;
    // HOT: once per record. One sift-down per record (log2 of the number of sources comparisons).
    while let Some(&top) = heap.first() {
        let rec = heads.sources[top].current().expect("live source");
        let seq = heads.sources[top].current_seq();
        if let Some(limit) = limit {
            if !before(&order, &rec[4..], seq, limit) {
                break;
            }
        }
        emit(top, seq, rec)?;
        count += 1;
        heads.sources[top].advance()?;
        match heads.sources[top].current() {
            Some(r) => heads.keys[top] = cache_key(&order, r),
            None => {
                let last = heap.pop().expect("non-empty heap");
                if heap.is_empty() {
                    break;
                }
                heap[0] = last;
            }
        }
        sift_down(&heads, &mut heap, 0);
    }
    Ok(count)
}

#[inline]
fn sift_down(heads: &Heads<'_, '_>, heap: &mut [usize], mut i: usize) {
    let n = heap.len();
    loop {
        let l = 2 * i + 1;
        if l >= n {
            return;
        }
        let r = l + 1;
        let c = if r < n && heads.less(heap[r], heap[l]) {
            r
        } else {
            l
        };
        if heads.less(heap[c], heap[i]) {
            heap.swap(c, i);
            i = c;
        } else {
            return;
        }
    }
}
