//! BAI and CSI building, record by record, exactly as htslib's `hts_idx_push`/`hts_idx_finish` do, so
//! the saved index is byte-identical to `samtools index`.
//!
//! Offsets are BGZF virtual offsets normalised as htslib's `bgzf_tell` reports them after reading a
//! record: a record that ends at the end of a block "ends" at the start of the next block.

use crate::khash::KHash;
use sortase_bam::bin::reg2bin_generic;

/// htslib `HTS_MIN_MARKER_DIST`: bins spanning less compressed data than this merge into their parent.
const MIN_MARKER_DIST: u64 = 0x10000;

/// The index flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IndexFormat {
    /// BAI: 16 kbp windows, 5 levels, linear index.
    Bai,
    /// CSI with the given `min_shift` and depth.
    Csi {
        /// Bits of the smallest bin.
        min_shift: u32,
        /// Levels below the root.
        depth: u32,
    },
}

impl IndexFormat {
    /// CSI with samtools' parameters for `-m min_shift`, depth grown until the longest reference fits
    /// (htslib `hts_adjust_csi_settings`).
    pub fn csi_for(min_shift: u32, longest_reference: u64) -> Self {
        let max_len = longest_reference as i64 + 256;
        let maxpos = |shift: u32, lvls: u32| 1i64 << (shift + 3 * lvls);
        let (mut shift, mut lvls) = (min_shift, 0u32);
        if max_len <= maxpos(shift, 9) {
            while max_len > maxpos(shift, lvls) {
                lvls += 1;
            }
        } else {
            lvls = 9;
            while max_len > maxpos(shift, lvls) {
                shift += 1;
            }
        }
        IndexFormat::Csi {
            min_shift: shift,
            depth: lvls,
        }
    }

    /// `(min_shift, depth)`: BAI is 14 and 5 (what [`IndexBuilder::geometry`] reports).
    pub fn geometry(self) -> (u32, u32) {
        match self {
            IndexFormat::Bai => (14, 5),
            IndexFormat::Csi { min_shift, depth } => (min_shift, depth),
        }
    }
}

/// Why a record cannot be indexed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PushError {
    /// Positions decrease within a reference.
    #[error("unsorted positions on reference #{tid}: {prev} followed by {pos}")]
    Unsorted {
        /// 1-based reference number.
        tid: i32,
        /// 1-based previous position.
        prev: i64,
        /// 1-based position.
        pos: i64,
    },
    /// A reference's records are not contiguous.
    #[error("records of reference #{0} are not contiguous (input is not coordinate-sorted)")]
    NotContiguous(i32),
    /// Unplaced reads are followed by placed ones.
    #[error("unplaced reads are not all at the end of the file (input is not coordinate-sorted)")]
    NoCoorNotAtEnd,
    /// A position does not fit the index.
    #[error("position {0} does not fit in this index; use CSI (-c)")]
    OutOfRange(i64),
}

#[derive(Debug, Clone, Default)]
struct Bins {
    loff: u64,
    list: Vec<(u64, u64)>,
}

/// Accumulates an index as records are pushed in file order.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    format: IndexFormat,
    min_shift: u32,
    n_lvls: u32,
    n_bins: u32,
    bidx: Vec<Option<KHash<Bins>>>,
    lidx: Vec<Vec<u64>>,
    n_no_coor: u64,
    save_tid: i32,
    last_tid: i32,
    save_bin: u32,
    last_bin: u32,
    save_off: u64,
    last_off: u64,
    off_beg: u64,
    last_coor: i64,
    n_mapped: u64,
    n_unmapped: u64,
}

/// htslib `insert_to_l`: windows `[beg, end)` overlaps get `offset` unless already set.
pub(crate) fn set_linear(l: &mut Vec<u64>, beg: i64, end: i64, offset: u64, min_shift: u32) {
    let (wb, we) = (
        (beg >> min_shift) as usize,
        ((end - 1) >> min_shift) as usize,
    );
    if l.len() < we + 1 {
        l.resize(we + 1, u64::MAX);
    }
    for slot in &mut l[wb..=we] {
        if *slot == u64::MAX {
            *slot = offset;
        }
    }
}

/// A run of consecutive records with the same reference and bin, as a range task summarises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    /// Reference (-1: unplaced).
    pub tid: i32,
    /// 0-based start of the first record.
    pub first_beg: i64,
    /// End of the first record.
    pub first_end: i64,
    /// Whether the first record is mapped.
    pub first_mapped: bool,
    /// 0-based start of the last record.
    pub last_beg: i64,
    /// Virtual offset after the last record.
    pub end_off: u64,
    /// Mapped records in the run.
    pub n_mapped: u64,
    /// Unmapped records in the run.
    pub n_unmapped: u64,
}

fn bin_first(level: u32) -> u32 {
    ((1u32 << (3 * level)) - 1) / 7
}

fn bin_level(bin: u32) -> u32 {
    let (mut l, mut b) = (0, bin);
    while b != 0 {
        b = (b - 1) >> 3;
        l += 1;
    }
    l
}

impl IndexBuilder {
    /// A builder for `n_ref` references; `offset0` is the virtual offset just after the header.
    pub fn new(format: IndexFormat, n_ref: usize, offset0: u64) -> Self {
        let (min_shift, n_lvls) = format.geometry();
        Self {
            format,
            min_shift,
            n_lvls,
            n_bins: ((1u32 << (3 * n_lvls + 3)) - 1) / 7,
            bidx: (0..n_ref).map(|_| None).collect(),
            lidx: vec![Vec::new(); n_ref],
            n_no_coor: 0,
            save_tid: -1,
            last_tid: -1,
            save_bin: u32::MAX,
            last_bin: u32::MAX,
            save_off: offset0,
            last_off: offset0,
            off_beg: offset0,
            last_coor: 0xffff_ffff,
            n_mapped: 0,
            n_unmapped: 0,
        }
    }

    /// `(min_shift, depth)` of the index.
    pub fn geometry(&self) -> (u32, u32) {
        (self.min_shift, self.n_lvls)
    }

    fn meta_bin(&self) -> u32 {
        self.n_bins + 1
    }

    fn insert_bin(&mut self, tid: i32, bin: u32, beg: u64, end: u64) {
        let h = self.bidx[tid as usize].get_or_insert_with(KHash::default);
        h.entry(bin, Bins::default).list.push((beg, end));
    }

    /// Adds one record: reference (`-1` for none), 0-based start, exclusive end (htslib `bam_endpos`),
    /// the virtual offset just after the record, and whether it is mapped.
    pub fn push(
        &mut self,
        tid: i32,
        beg: i64,
        end: i64,
        offset_after: u64,
        mapped: bool,
    ) -> Result<(), PushError> {
        self.push_inner(tid, beg, end, offset_after, mapped, true)
    }

    /// Adds a run of records of one reference and bin summarised by a range task (see
    /// `crate::parallel`): equivalent to pushing them one by one, except the linear index, which the
    /// caller merges with [`IndexBuilder::merge_linear`].
    pub fn push_segment(&mut self, seg: &Segment) -> Result<(), PushError> {
        self.push_inner(
            seg.tid,
            seg.first_beg,
            seg.first_end,
            seg.end_off,
            seg.first_mapped,
            false,
        )?;
        let first = u64::from(seg.first_mapped);
        self.n_mapped += seg.n_mapped - first;
        self.n_unmapped += seg.n_unmapped - (1 - first);
        if seg.tid < 0 {
            self.n_no_coor += seg.n_mapped + seg.n_unmapped - 1;
        } else {
            self.last_coor = seg.last_beg;
        }
        Ok(())
    }

    /// Fills unset linear-index windows of `tid` from a later range's partial linear index.
    pub fn merge_linear(&mut self, tid: usize, partial: &[u64]) {
        let l = &mut self.lidx[tid];
        if l.len() < partial.len() {
            l.resize(partial.len(), u64::MAX);
        }
        for (slot, &v) in l.iter_mut().zip(partial) {
            if *slot == u64::MAX {
                *slot = v;
            }
        }
    }

    fn push_inner(
        &mut self,
        tid: i32,
        beg: i64,
        end: i64,
        offset_after: u64,
        mapped: bool,
        update_linear: bool,
    ) -> Result<(), PushError> {
        let (mut beg, mut end) = if tid < 0 { (-1, 0) } else { (beg, end) };
        let maxpos = 1i64 << (self.min_shift + 3 * self.n_lvls);
        if tid >= 0 && (beg > maxpos || end > maxpos) {
            return Err(PushError::OutOfRange(beg + 1));
        }
        if tid as usize >= self.bidx.len() && tid >= 0 {
            self.bidx.resize_with(tid as usize + 1, || None);
            self.lidx.resize(tid as usize + 1, Vec::new());
        }
        self.check_order(tid, beg)?;
        if tid >= 0 {
            self.bidx[tid as usize].get_or_insert_with(KHash::default);
            beg = beg.max(0);
            if end <= 0 {
                end = 1;
            }
            if update_linear {
                set_linear(
                    &mut self.lidx[tid as usize],
                    beg,
                    end,
                    self.last_off,
                    self.min_shift,
                );
            }
        } else {
            self.n_no_coor += 1;
        }
        let bin = reg2bin_generic(beg, end, self.min_shift, self.n_lvls);
        if self.last_bin != bin {
            self.new_bin(tid, bin);
        }
        if mapped {
            self.n_mapped += 1;
        } else {
            self.n_unmapped += 1;
        }
        self.last_off = offset_after;
        self.last_coor = beg;
        Ok(())
    }

    /// A record on reference `tid` at `beg`: a new reference starts its bins (unplaced records
    /// only at the end, each reference in one run), the same one must be sorted.
    #[inline]
    fn check_order(&mut self, tid: i32, beg: i64) -> Result<(), PushError> {
        if self.last_tid != tid || (self.last_tid >= 0 && tid < 0) {
            if tid >= 0 && self.n_no_coor > 0 {
                return Err(PushError::NoCoorNotAtEnd);
            }
            if tid >= 0 && self.bidx[tid as usize].is_some() {
                return Err(PushError::NotContiguous(tid + 1));
            }
            self.last_tid = tid;
            self.last_bin = u32::MAX;
        } else if tid >= 0 && self.last_coor > beg {
            return Err(PushError::Unsorted {
                tid: tid + 1,
                prev: self.last_coor + 1,
                pos: beg + 1,
            });
        }
        Ok(())
    }

    /// A record in a bin other than the last one's: the saved bin's chunk is inserted (and, at the
    /// end of a reference, its meta bin), and `bin` is saved.
    #[inline]
    fn new_bin(&mut self, tid: i32, bin: u32) {
        if self.save_bin != u32::MAX {
            self.insert_bin(self.save_tid, self.save_bin, self.save_off, self.last_off);
        }
        if self.last_bin == u32::MAX && self.save_bin != u32::MAX {
            let meta = self.meta_bin();
            let (beg_off, end_off) = (self.off_beg, self.last_off);
            self.insert_bin(self.save_tid, meta, beg_off, end_off);
            let (m, u) = (self.n_mapped, self.n_unmapped);
            self.insert_bin(self.save_tid, meta, m, u);
            self.n_mapped = 0;
            self.n_unmapped = 0;
            self.off_beg = end_off;
        }
        self.save_off = self.last_off;
        self.save_bin = bin;
        self.last_bin = bin;
        self.save_tid = tid;
    }

    /// Rewrites every virtual offset held so far through `f`. A writer that learns compressed block
    /// offsets only after the blocks are deflated (on other threads) pushes "block number << 16 |
    /// offset in block" and translates before [`IndexBuilder::finish`]; `f` must be monotonic, which
    /// keeps every decision the builder made (all of which compare offsets only by order) valid.
    pub fn translate_offsets(&mut self, f: impl Fn(u64) -> u64) {
        let meta = self.meta_bin();
        for h in self.bidx.iter_mut().flatten() {
            for key in h.keys_in_bucket_order() {
                let bins = h.get_mut(key).expect("live key");
                for (i, chunk) in bins.list.iter_mut().enumerate() {
                    // The meta bin's second pair holds mapped/unmapped counts, not offsets.
                    if key == meta && i == 1 {
                        continue;
                    }
                    *chunk = (f(chunk.0), f(chunk.1));
                }
            }
        }
        for l in &mut self.lidx {
            for v in l.iter_mut().filter(|v| **v != u64::MAX) {
                *v = f(*v);
            }
        }
        self.save_off = f(self.save_off);
        self.last_off = f(self.last_off);
        self.off_beg = f(self.off_beg);
    }

    /// Closes the index at `final_offset` (the virtual offset of the end of the data) and returns the
    /// serialised file: raw BAI, or CSI compressed with zlib as htslib does.
    pub fn finish(mut self, final_offset: u64) -> Vec<u8> {
        if self.save_tid >= 0 {
            let meta = self.meta_bin();
            self.insert_bin(self.save_tid, self.save_bin, self.save_off, final_offset);
            let off_beg = self.off_beg;
            self.insert_bin(self.save_tid, meta, off_beg, final_offset);
            let (m, u) = (self.n_mapped, self.n_unmapped);
            self.insert_bin(self.save_tid, meta, m, u);
        }
        for i in 0..self.bidx.len() {
            self.update_loff(i);
            self.compress_binning(i);
        }
        crate::save::serialise(&self.as_parts())
    }

    fn update_loff(&mut self, i: usize) {
        let l = &mut self.lidx[i];
        for j in (0..l.len().saturating_sub(1)).rev() {
            if l[j] == u64::MAX {
                l[j] = l[j + 1];
            }
        }
        let (n_bins, n_lvls) = (self.n_bins, self.n_lvls);
        if let Some(h) = self.bidx[i].as_mut() {
            for key in h.keys_in_bucket_order() {
                let loff = if key < n_bins {
                    let l_ = bin_level(key);
                    let bot = ((key - bin_first(l_)) << (3 * (n_lvls - l_))) as usize;
                    l.get(bot).copied().unwrap_or(0)
                } else {
                    0
                };
                h.get_mut(key).expect("key from the table").loff = loff;
            }
        }
    }

    fn compress_binning(&mut self, i: usize) {
        let (n_bins, n_lvls) = (self.n_bins, self.n_lvls);
        let Some(h) = self.bidx[i].as_mut() else {
            return;
        };
        for l in (1..=n_lvls).rev() {
            let start = bin_first(l);
            for key in h.keys_in_bucket_order() {
                if key >= n_bins || key < start {
                    continue;
                }
                let Some(p) = h.get_mut(key) else { continue };
                if l < n_lvls && p.list.len() > 1 {
                    p.list.sort_unstable_by_key(|c| c.0);
                }
                let span = (p.list[p.list.len() - 1].1 >> 16) - (p.list[0].0 >> 16);
                if span < MIN_MARKER_DIST {
                    let parent = (key - 1) >> 3;
                    if h.get_mut(parent).is_none() {
                        continue;
                    }
                    let moved = h.remove(key).expect("present").list;
                    h.get_mut(parent)
                        .expect("present")
                        .list
                        .extend_from_slice(&moved);
                }
            }
        }
        if let Some(root) = h.get_mut(0) {
            root.list.sort_unstable_by_key(|c| c.0);
        }
        for key in h.keys_in_bucket_order() {
            if key >= n_bins {
                continue;
            }
            let p = h.get_mut(key).expect("present");
            let mut m = 0;
            for l in 1..p.list.len() {
                if p.list[m].1 >> 16 >= p.list[l].0 >> 16 {
                    if p.list[m].1 < p.list[l].1 {
                        p.list[m].1 = p.list[l].1;
                    }
                } else {
                    m += 1;
                    p.list[m] = p.list[l];
                }
            }
            p.list.truncate(m + 1);
        }
    }

    fn as_parts(&self) -> crate::save::IndexParts<'_> {
        crate::save::IndexParts {
            format: self.format,
            min_shift: self.min_shift,
            n_lvls: self.n_lvls,
            references: self
                .bidx
                .iter()
                .zip(&self.lidx)
                .map(|(b, l)| crate::save::ReferenceParts {
                    bins: b
                        .as_ref()
                        .map(|h| h.iter().map(|(k, v)| (k, v.loff, &v.list[..])).collect())
                        .unwrap_or_default(),
                    linear: l,
                })
                .collect(),
            n_no_coor: self.n_no_coor,
        }
    }
}
