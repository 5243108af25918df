//! What one slice of a BAM contributes to its index: runs of records of one reference and bin
//! ([`Segment`]s) plus a partial linear index. Slices are summarised on many threads and replayed in
//! file order through [`IndexBuilder`], which gives the same bytes as pushing every record in order.
//!
//! Used by `index` (slices = byte ranges of an existing file) and by `sort --write-index` (slices =
//! key ranges of the output, whose offsets are "block number << 16 | offset in block" pseudo-offsets
//! local to the slice until [`RangeSummary::shift`] places them).

use crate::builder::{set_linear, Segment};
use crate::{IndexBuilder, PushError};
use sortase_bam::bin::reg2bin_generic;

/// The summary of one slice of records (see the module documentation). Serialisable, so that a
/// slice summarised by one process (a sort task) is replayed by another.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RangeSummary {
    /// Runs of one reference and bin, in order.
    pub segments: Vec<Segment>,
    /// Partial linear index per reference touched, in order.
    pub linear: Vec<(usize, Vec<u64>)>,
    /// (reference, bin, clamped start) of the last record.
    last: Option<(i32, u32, i64)>,
    min_shift: u32,
    n_lvls: u32,
}

impl RangeSummary {
    /// An empty summary for an index of geometry `(min_shift, depth)` ([`IndexBuilder::geometry`]).
    pub fn new((min_shift, n_lvls): (u32, u32)) -> Self {
        Self {
            segments: Vec::new(),
            linear: Vec::new(),
            last: None,
            min_shift,
            n_lvls,
        }
    }

    /// Adds one record: reference (`-1`: none), 0-based start, exclusive end (htslib `bam_endpos`),
    /// whether it is mapped, and the offsets of its first byte and of the byte after it.
    ///
    // HOT: once per record of an indexed output; a comparison or two and an append in most cases.
    pub fn push(
        &mut self,
        tid: i32,
        beg: i64,
        end: i64,
        mapped: bool,
        start_off: u64,
        end_off: u64,
    ) -> Result<(), PushError> {
        let (cbeg, cend) = if tid < 0 {
            (0, 1)
        } else {
            (beg.max(0), if end <= 0 { 1 } else { end })
        };
        let bin = if tid < 0 {
            reg2bin_generic(-1, 0, self.min_shift, self.n_lvls)
        } else {
            reg2bin_generic(cbeg, cend, self.min_shift, self.n_lvls)
        };
        if let Some((t, _, coor)) = self.last {
            if t == tid && tid >= 0 && coor > cbeg {
                return Err(PushError::Unsorted {
                    tid: tid + 1,
                    prev: coor + 1,
                    pos: cbeg + 1,
                });
            }
        }
        if tid >= 0 {
            let t = tid as usize;
            if self.linear.last().map(|l| l.0) != Some(t) {
                self.linear.push((t, Vec::new()));
            }
            let l = &mut self.linear.last_mut().expect("just pushed").1;
            set_linear(l, cbeg, cend, start_off, self.min_shift);
        }
        let same = matches!(self.last, Some((t, b, _)) if t == tid && b == bin);
        match self.segments.last_mut() {
            Some(seg) if same => {
                seg.last_beg = cbeg;
                seg.end_off = end_off;
                if mapped {
                    seg.n_mapped += 1;
                } else {
                    seg.n_unmapped += 1;
                }
            }
            _ => self.segments.push(Segment {
                tid,
                first_beg: beg,
                first_end: end,
                first_mapped: mapped,
                last_beg: cbeg,
                end_off,
                n_mapped: u64::from(mapped),
                n_unmapped: u64::from(!mapped),
            }),
        }
        self.last = Some((tid, bin, cbeg));
        Ok(())
    }

    /// Adds `delta` to every offset (places a slice whose offsets were local).
    pub fn shift(&mut self, delta: u64) {
        for s in &mut self.segments {
            s.end_off += delta;
        }
        for (_, l) in &mut self.linear {
            for v in l.iter_mut().filter(|v| **v != u64::MAX) {
                *v += delta;
            }
        }
    }

    /// Virtual offset after the slice's last record, if it has any.
    pub fn end_offset(&self) -> Option<u64> {
        self.segments.last().map(|s| s.end_off)
    }

    /// Replays the slice into `builder` (slices must be replayed in file order).
    pub fn replay(&self, builder: &mut IndexBuilder) -> Result<(), PushError> {
        for seg in &self.segments {
            builder.push_segment(seg)?;
        }
        for (tid, l) in &self.linear {
            builder.merge_linear(*tid, l);
        }
        Ok(())
    }
}
