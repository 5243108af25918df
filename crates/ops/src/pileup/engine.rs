//! The pileup of one BAM over one region, with the exact semantics of htslib 1.16's `bam_plp_auto`
//! (as FACETS' snp-pileup drives it) but computed only at the positions asked for.
//!
//! htslib walks every reference position and, at each one, every buffered read (O(depth) per base).
//! The observable results depend on much less: which reads enter the buffer (the read filter of
//! snp-pileup's `mplp_func`, then the max-depth rule of `bam_plp_push`), the base qualities after the
//! overlap tweak (`overlap_push`), and, at a position, each covering read's base or deletion. So this
//! module replays the buffer event by event:
//!
//! - `bam_plp_push` drops a read when it starts at the pileup's current position (`iter->pos`, which is
//!   the start of the previous pushed read once the walk has caught up) and the buffer already holds
//!   more than `maxcnt` nodes (`mp->cnt`: buffered reads + the empty tail node). The first read at a
//!   new position is never checked, except at tid 0, pos 0 where `iter` starts.
//! - Buffered reads leave when the walk passes their end: after the first read at `B` is pushed, every
//!   read ending at or before `B - 1` is removed, and its name is deleted from the overlap hash
//!   (`overlap_remove`, by name, whichever read the entry belongs to).
//! - Qualities of a read are final when it leaves: a later mate only changes positions at or after its
//!   own start, which are after the leaving read's end. So a read's bases are counted at the query
//!   positions it covers when it leaves (or at the end of the region).
//!
//! A region is processed from a fresh state starting at `warm_from` (reads overlapping it), which may
//! differ from htslib's state carried from the start of the contig. [`FilePileup::exact`] says whether
//! that difference provably cannot reach `[beg, end)`: no read starting at or before `warm_from`
//! reaches `beg`, and no read starting between `warm_from` and `beg` could have met the depth limit
//! (counting every filtered read as buffered), or else a coverage gap after them cuts the dependence.

use super::overlap::{tweak_overlap_quality, Mate};
use super::PileupError;
use sortase_bam::cigar::{consumes_query, consumes_reference, op_code, op_len};
use sortase_bam::flags;
use sortase_bam::{RecordBatch, RecordRef};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hasher for read names: the overlap map hashes every buffered read's name at least
/// twice, and SipHash was 4.5 % of a run's profile (names come from the input, not an adversary).
#[derive(Default, Clone, Copy)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(a)).wrapping_mul(K);
        }
        for &b in words.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type NameMap<'b> = HashMap<&'b [u8], usize, BuildHasherDefault<NameHasher>>;

/// Read and base filters and pileup limits (snp-pileup's options).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PileupOptions {
    /// `-q`: reads with a lower MAPQ are skipped (MAPQ 0 always is).
    pub min_map_quality: i32,
    /// `-Q`: bases with a lower quality are not counted (quality 0 never is).
    pub min_base_quality: i32,
    /// `-d`: htslib `maxcnt` per file.
    pub max_depth: i32,
    /// `-A`: keep paired reads that are not properly paired.
    pub count_orphans: bool,
    /// `-x`: no overlapping-mate detection.
    pub ignore_overlaps: bool,
}

impl Default for PileupOptions {
    fn default() -> Self {
        Self {
            min_map_quality: 0,
            min_base_quality: 0,
            max_depth: 4000,
            count_orphans: false,
            ignore_overlaps: false,
        }
    }
}

/// What one file shows at one position.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Reads in the pileup (htslib `n_plp`), deletions and reference skips included.
    pub depth: u32,
    /// Bases passing the quality filters, by 4-bit code (`=ACMGRSVTWYHKDBN`).
    pub bases: [u32; 16],
    /// Deletions and reference skips whose next base passes the quality filters.
    pub deletions: u32,
}

impl Counts {
    /// All reads passing the quality filters, deletions included (what a pseudo-SNP reports).
    pub fn passing(&self) -> u32 {
        self.bases.iter().sum::<u32>() + self.deletions
    }
}

/// The region one call processes.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Reference index.
    pub tid: usize,
    /// First position whose results are wanted.
    pub beg: i64,
    /// End (exclusive) of the positions whose results are wanted.
    pub end: i64,
    /// Reads overlapping `warm_from` or later were fetched; 0 means from the start of the contig.
    pub warm_from: i64,
}

/// Results of one file over one [`Window`].
#[derive(Debug, Default)]
pub struct FilePileup {
    /// Counts at each query position (same order as the queries).
    pub counts: Vec<Counts>,
    /// Covered positions (`n_plp > 0`) in `[beg, end)`, as sorted disjoint half-open intervals.
    pub covered: Vec<(i64, i64)>,
    /// False when the fresh start at `warm_from` may differ from htslib inside the window.
    pub exact: bool,
}

/// Whether snp-pileup's `mplp_func` keeps the read.
#[inline]
fn passes_filter(r: &RecordRef<'_>, o: &PileupOptions) -> bool {
    let flag = r.flag();
    if flag & (flags::QC_FAIL | flags::SECONDARY | flags::DUPLICATE | flags::UNMAPPED) != 0 {
        return false;
    }
    if r.reference_sequence_id() < 0 {
        return false;
    }
    let mapq = i32::from(r.mapping_quality());
    if mapq < o.min_map_quality || mapq == 0 {
        return false;
    }
    o.count_orphans || flag & flags::PAIRED == 0 || flag & flags::PROPER_PAIR != 0
}

/// A read in htslib's buffer.
struct Buffered {
    /// Index in the record batch.
    record: usize,
    beg: i64,
    end: i64,
    /// Qualities after an overlap tweak (`None`: as stored).
    qual: Option<Vec<u8>>,
    /// Set when a later mate's push tweaked this read (it was the first mate, `a`).
    tweaked_by: Option<Box<MateTweak>>,
}

/// What a later mate's tweak changed, for the one case where htslib reads a quality before it: at a
/// deletion (or reference skip) htslib uses the quality of the base after it (`qpos` of the next
/// base), which can lie in the overlap, past the mate's start. The deletion's position is walked as
/// soon as the first read starting after it is pushed, so the tweak is seen there only if the mate is
/// that read: the first filtered read at its position, with no filtered read starting in between.
struct MateTweak {
    /// Qualities before the tweak.
    qual: Vec<u8>,
    /// The mate's start.
    mate_start: i64,
    /// The mate was the first filtered read at its start.
    mate_first: bool,
}

/// Replays htslib's read buffer for one file and one window.
struct Replay<'b> {
    records: &'b RecordBatch,
    window: Window,
    opts: &'b PileupOptions,
    queries: &'b [i64],
    counts: Vec<Counts>,
    slots: Vec<Option<Buffered>>,
    free: Vec<usize>,
    /// (end, slot) of buffered reads, smallest end first.
    by_end: BinaryHeap<Reverse<(i64, usize)>>,
    buffered: usize,
    overlaps: NameMap<'b>,
    covered: Vec<(i64, i64)>,
    cigar: Vec<u32>,
    /// Starts of the filtered reads so far (sorted).
    starts: Vec<i64>,
    /// The read being pushed is the first filtered read at its position.
    pushing_first: bool,
}

impl<'b> Replay<'b> {
    /// Pushes a read starting at the walk's current position: dropped past `maxcnt` reads (htslib's
    /// depth cap), and not buffered when of zero length.
    fn push_at_current(
        &mut self,
        index: usize,
        r: &RecordRef<'b>,
        beg: i64,
        end: i64,
        maxcnt: i64,
    ) -> Result<(), PileupError> {
        if 1 + self.buffered as i64 > maxcnt {
            if !self.opts.ignore_overlaps {
                self.overlaps.remove(r.read_name());
            }
            return Ok(());
        }
        if end <= beg {
            return Ok(()); // zero-length read at the current position: not buffered
        }
        self.push(index, r, beg, end)
            .map_err(|()| PileupError::BadCigar(read_label(r)))
    }

    fn new(
        records: &'b RecordBatch,
        window: Window,
        queries: &'b [i64],
        opts: &'b PileupOptions,
    ) -> Self {
        Replay {
            records,
            window,
            opts,
            queries,
            counts: vec![Counts::default(); queries.len()],
            slots: Vec::new(),
            free: Vec::new(),
            by_end: BinaryHeap::new(),
            buffered: 0,
            overlaps: NameMap::default(),
            covered: Vec::new(),
            cigar: Vec::new(),
            starts: Vec::new(),
            pushing_first: false,
        }
    }

    fn name(&self, slot: usize) -> &'b [u8] {
        let b = self.slots[slot].as_ref().map(|b| b.record);
        // INVARIANT: callers pass slots of buffered reads.
        self.records.record(b.expect("buffered slot")).read_name()
    }

    fn push(&mut self, index: usize, r: &RecordRef<'b>, beg: i64, end: i64) -> Result<(), ()> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.slots[slot] = Some(Buffered {
            record: index,
            beg,
            end,
            qual: None,
            tweaked_by: None,
        });
        self.by_end.push(Reverse((end, slot)));
        self.buffered += 1;
        if end > beg {
            match self.covered.last_mut() {
                Some(last) if beg <= last.1 => last.1 = last.1.max(end),
                _ => self.covered.push((beg, end)),
            }
        }
        if self.opts.ignore_overlaps {
            return Ok(());
        }
        self.overlap_push(slot, r, end)
    }

    /// htslib `overlap_push`.
    fn overlap_push(&mut self, slot: usize, r: &RecordRef<'b>, end: i64) -> Result<(), ()> {
        let flag = r.flag();
        if flag & flags::MATE_UNMAPPED != 0 || flag & flags::PROPER_PAIR == 0 {
            return Ok(());
        }
        let (tid, mtid) = (r.reference_sequence_id(), r.mate_reference_sequence_id());
        let (pos, mpos) = (i64::from(r.position()), i64::from(r.mate_position()));
        let isize = i64::from(r.template_length()).abs();
        if (mtid >= 0 && tid != mtid) || (isize >= 2 * i64::from(r.l_seq()) && mpos >= end) {
            return Ok(());
        }
        let name = r.read_name();
        match self.overlaps.remove(name) {
            None => {
                if mpos >= pos || (flag & flags::PAIRED != 0 && mpos == -1) {
                    self.overlaps.insert(name, slot);
                }
                Ok(())
            }
            Some(first) => self.tweak(first, slot),
        }
    }

    fn tweak(&mut self, a: usize, b: usize) -> Result<(), ()> {
        let mut qa = self.take_qual(a);
        let before = qa.clone();
        let mut qb = self.take_qual(b);
        let (ra, rb) = (self.record_of(a), self.record_of(b));
        let (ca, cb): (Vec<u32>, Vec<u32>) =
            (ra.cigar().iter().collect(), rb.cigar().iter().collect());
        let result = tweak_overlap_quality(
            Mate {
                pos: i64::from(ra.position()),
                cigar: &ca,
                seq: ra.sequence_packed(),
                qual: &mut qa,
            },
            Mate {
                pos: i64::from(rb.position()),
                cigar: &cb,
                seq: rb.sequence_packed(),
                qual: &mut qb,
            },
            ra.read_name(),
        );
        self.put_qual(a, qa);
        self.put_qual(b, qb);
        let mate_start = i64::from(rb.position());
        let mate_first = self.pushing_first;
        self.slots[a].as_mut().expect("buffered slot").tweaked_by = Some(Box::new(MateTweak {
            qual: before,
            mate_start,
            mate_first,
        }));
        result
    }

    fn record_of(&self, slot: usize) -> RecordRef<'b> {
        // INVARIANT: callers pass slots of buffered reads.
        self.records
            .record(self.slots[slot].as_ref().expect("buffered slot").record)
    }

    fn take_qual(&mut self, slot: usize) -> Vec<u8> {
        let rec = self.record_of(slot);
        let b = self.slots[slot].as_mut().expect("buffered slot");
        b.qual
            .take()
            .unwrap_or_else(|| rec.quality_scores().to_vec())
    }

    fn put_qual(&mut self, slot: usize, q: Vec<u8>) {
        self.slots[slot].as_mut().expect("buffered slot").qual = Some(q);
    }

    /// The walk passes `pos`: every read ending at or before it leaves the buffer.
    fn remove_ending_by(&mut self, pos: i64) {
        while let Some(&Reverse((end, slot))) = self.by_end.peek() {
            if end > pos {
                break;
            }
            self.by_end.pop();
            self.leave(slot);
        }
    }

    fn leave(&mut self, slot: usize) {
        if !self.opts.ignore_overlaps {
            let name = self.name(slot);
            self.overlaps.remove(name);
        }
        // INVARIANT: a slot is in `by_end` exactly while it holds a read.
        let b = self.slots[slot].take().expect("buffered slot");
        self.free.push(slot);
        self.buffered -= 1;
        self.count(&b);
    }

    /// Adds a leaving read's bases at the query positions it covers (`resolve_cigar2` semantics).
    fn count(&mut self, b: &Buffered) {
        let lo = b.beg.max(self.window.beg);
        let hi = b.end.min(self.window.end);
        if lo >= hi {
            return;
        }
        let Replay {
            records,
            queries,
            counts,
            starts,
            cigar,
            opts,
            ..
        } = self;
        let mut qi = queries.partition_point(|&q| q < lo);
        if qi >= queries.len() || queries[qi] >= hi {
            return;
        }
        let r = records.record(b.record);
        let qual = b.qual.as_deref().unwrap_or(r.quality_scores());
        let seq = r.sequence_packed();
        let l_qseq = i64::from(r.l_seq());
        cigar.clear();
        cigar.extend(r.cigar().iter());
        let (mut x, mut y) = (b.beg, 0i64);
        let min_bq = opts.min_base_quality;
        for &op in cigar.iter() {
            let (code, len) = (op_code(op), i64::from(op_len(op)));
            if consumes_reference(code) {
                let is_del = !consumes_query(code);
                while qi < queries.len() && queries[qi] < (x + len).min(hi) {
                    let q = queries[qi];
                    let qpos = if is_del { y } else { y + (q - x) };
                    let c = &mut counts[qi];
                    c.depth += 1;
                    let quals = if is_del {
                        deletion_quals(qual, b, q, starts)
                    } else {
                        qual
                    };
                    let bq = if qpos < l_qseq {
                        i32::from(quals[qpos as usize])
                    } else {
                        0
                    };
                    if bq != 0 && bq >= min_bq {
                        c.add(is_del, seq, qpos);
                    }
                    qi += 1;
                }
                x += len;
            }
            if consumes_query(code) {
                y += len;
            }
            if qi >= queries.len() || queries[qi] >= hi {
                break;
            }
        }
    }
}

/// The qualities a deletion at `q` reads (the base after it): the tweaked read's qualities from
/// before its later mate's tweak where htslib read them before it.
#[inline]
fn deletion_quals<'q>(qual: &'q [u8], b: &'q Buffered, q: i64, starts: &[i64]) -> &'q [u8] {
    if let Some(t) = &b.tweaked_by {
        if q < t.mate_start {
            let next = starts.get(starts.partition_point(|&s| s <= q));
            if !(t.mate_first && next == Some(&t.mate_start)) {
                return &t.qual;
            }
        }
    }
    qual
}

impl Counts {
    /// Counts a base passing the filters: a deletion, or the base at `qpos` of `seq` (4-bit codes).
    #[inline]
    fn add(&mut self, is_del: bool, seq: &[u8], qpos: i64) {
        if is_del {
            self.deletions += 1;
        } else {
            let byte = seq[(qpos >> 1) as usize];
            let code = if qpos & 1 == 0 { byte >> 4 } else { byte & 0xf };
            self.bases[code as usize] += 1;
        }
    }
}

/// Whether the warm-up stretch (records before the window, read only for their effect on it)
/// gives the pileup htslib's from the start of the file would.
struct WarmUp {
    exact: bool,
    /// Ends of every filtered read (kept or not), for the exactness check in the warm-up stretch.
    all_ends: BinaryHeap<Reverse<i64>>,
    max_end: i64,
    settled: bool,
}

impl WarmUp {
    fn new() -> Self {
        Self {
            exact: true,
            all_ends: BinaryHeap::new(),
            max_end: i64::MIN,
            settled: false,
        }
    }

    /// A filtered read on `[beg, end)`; `checked`: at the walk's current position (its depth is
    /// checked against `maxcnt`).
    fn see(&mut self, window: &Window, beg: i64, end: i64, checked: bool, maxcnt: i64) {
        if self.settled {
            return;
        }
        // A gap (every earlier read ends before this one starts) cuts all dependence on what came
        // before: earlier reads neither cover later positions nor count at later depth checks.
        if self.max_end < beg {
            self.exact = true;
            self.all_ends.clear();
        }
        self.settled = beg >= window.beg;
        if beg <= window.warm_from {
            self.exact &= end < window.beg;
        } else if beg < window.beg {
            while self.all_ends.peek().is_some_and(|&Reverse(e)| e < beg) {
                self.all_ends.pop();
            }
            self.exact &= !(checked && 1 + self.all_ends.len() as i64 > maxcnt);
        }
        if beg < window.beg {
            self.all_ends.push(Reverse(end));
        }
        self.max_end = self.max_end.max(end);
    }
}

/// Piles up `records` (the file's records overlapping `[window.warm_from, window.end)`, in file order)
/// at the sorted `queries` positions inside the window.
pub fn pileup_window(
    records: &RecordBatch,
    window: Window,
    queries: &[i64],
    opts: &PileupOptions,
) -> Result<FilePileup, PileupError> {
    let mut replay = Replay::new(records, window, queries, opts);
    let warm = window.warm_from > 0;
    let mut warm_up = WarmUp::new();
    // htslib `iter->pos` once the walk has caught up: the start of the last pushed read. A fresh
    // iterator is at tid 0, pos 0.
    let mut current: Option<i64> = (window.warm_from == 0 && window.tid == 0).then_some(0);
    let mut last_start = i64::MIN;
    let maxcnt = i64::from(opts.max_depth);
    for index in 0..records.len() {
        let r = records.record(index);
        if !passes_filter(&r, opts) {
            continue;
        }
        let beg = i64::from(r.position());
        if beg < last_start {
            return Err(PileupError::Unsorted {
                name: String::from_utf8_lossy(r.read_name()).into_owned(),
                pos: beg + 1,
            });
        }
        replay.pushing_first = replay.starts.last() != Some(&beg);
        replay.starts.push(beg);
        last_start = beg;
        // Raw end as htslib 1.16's pileup uses it: pos + rlen, without bam_endpos's 0 -> 1.
        let end = beg + r.cigar().reference_length() as i64;
        let checked = current == Some(beg);
        if warm {
            warm_up.see(&window, beg, end, checked, maxcnt);
        }
        if checked {
            replay.push_at_current(index, &r, beg, end, maxcnt)?;
        } else {
            replay
                .push(index, &r, beg, end)
                .map_err(|()| PileupError::BadCigar(read_label(&r)))?;
            replay.remove_ending_by(beg - 1);
            current = Some(beg);
        }
    }
    while let Some(Reverse((_, slot))) = replay.by_end.pop() {
        replay.leave(slot);
    }
    let covered = replay
        .covered
        .iter()
        .map(|&(b, e)| (b.max(window.beg), e.min(window.end)))
        .filter(|&(b, e)| b < e)
        .collect();
    Ok(FilePileup {
        counts: replay.counts,
        covered,
        exact: warm_up.exact,
    })
}

fn read_label(r: &RecordRef<'_>) -> String {
    format!(
        "read {} at {}",
        String::from_utf8_lossy(r.read_name()),
        i64::from(r.position()) + 1
    )
}
