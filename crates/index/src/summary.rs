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

/// The summary of one slice of records (see the module documentation). Serialisable: a range task
/// on another machine sends it back to the one that assembles the index.
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

    /// Appends the summary in a compact binary form (little-endian, fixed-width fields: 53 bytes
    /// a segment). A distributed sort's parts carry their summaries to the driver this way: as
    /// JSON a segment took ~154 bytes and its parse most of the driver's layout time.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.min_shift.to_le_bytes());
        out.extend_from_slice(&self.n_lvls.to_le_bytes());
        match self.last {
            None => out.push(0),
            Some((tid, bin, coor)) => {
                out.push(1);
                out.extend_from_slice(&tid.to_le_bytes());
                out.extend_from_slice(&bin.to_le_bytes());
                out.extend_from_slice(&coor.to_le_bytes());
            }
        }
        out.extend_from_slice(&(self.segments.len() as u64).to_le_bytes());
        for s in &self.segments {
            out.extend_from_slice(&s.tid.to_le_bytes());
            out.extend_from_slice(&s.first_beg.to_le_bytes());
            out.extend_from_slice(&s.first_end.to_le_bytes());
            out.push(u8::from(s.first_mapped));
            out.extend_from_slice(&s.last_beg.to_le_bytes());
            out.extend_from_slice(&s.end_off.to_le_bytes());
            out.extend_from_slice(&s.n_mapped.to_le_bytes());
            out.extend_from_slice(&s.n_unmapped.to_le_bytes());
        }
        out.extend_from_slice(&(self.linear.len() as u64).to_le_bytes());
        for (tid, l) in &self.linear {
            out.extend_from_slice(&(*tid as u64).to_le_bytes());
            out.extend_from_slice(&(l.len() as u64).to_le_bytes());
            for v in l {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// Reads a summary [`Self::encode`] wrote from the front of `bytes`, advancing it.
    pub fn decode(bytes: &mut &[u8]) -> Result<Self, &'static str> {
        let mut r = Cursor(bytes);
        let min_shift = r.u32()?;
        let n_lvls = r.u32()?;
        let last = match r.u8()? {
            0 => None,
            1 => Some((r.u32()? as i32, r.u32()?, r.u64()? as i64)),
            _ => return Err("bad summary"),
        };
        let n = r.len(53)?;
        let mut segments = Vec::with_capacity(n);
        for _ in 0..n {
            segments.push(Segment {
                tid: r.u32()? as i32,
                first_beg: r.u64()? as i64,
                first_end: r.u64()? as i64,
                first_mapped: r.u8()? != 0,
                last_beg: r.u64()? as i64,
                end_off: r.u64()?,
                n_mapped: r.u64()?,
                n_unmapped: r.u64()?,
            });
        }
        let n = r.len(16)?;
        let mut linear = Vec::with_capacity(n);
        for _ in 0..n {
            let tid = r.u64()? as usize;
            let k = r.len(8)?;
            let l = (0..k).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
            linear.push((tid, l));
        }
        Ok(Self {
            segments,
            linear,
            last,
            min_shift,
            n_lvls,
        })
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

/// Little-endian reads from the front of a byte slice, for [`RangeSummary::decode`].
struct Cursor<'a, 'b>(&'a mut &'b [u8]);

impl Cursor<'_, '_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or("truncated summary")?;
        *self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    /// A count of items of at least `item` bytes each, checked against the bytes left.
    fn len(&mut self, item: usize) -> Result<usize, &'static str> {
        let n = self.u64()?;
        if n > (self.0.len() / item) as u64 {
            return Err("truncated summary");
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_form_round_trips_and_refuses_truncation() {
        let mut s = RangeSummary::new((14, 5));
        let mut empty = Vec::new();
        s.encode(&mut empty);
        let mut off = 0u64;
        for (tid, beg, mapped) in [
            (0, 10, true),
            (0, 20, true),
            (0, 16_380, false),
            (1, 5, true),
        ] {
            s.push(tid, beg, beg + 150, mapped, off, off + 300).unwrap();
            off += 300;
        }
        s.push(-1, -1, 0, false, off, off + 200).unwrap();
        let mut bytes = b"junk".to_vec();
        s.encode(&mut bytes);
        empty.extend_from_slice(b"tail");
        let mut at = &bytes[4..];
        assert_eq!(RangeSummary::decode(&mut at).unwrap(), s);
        assert!(at.is_empty());
        let mut at = &empty[..];
        assert_eq!(
            RangeSummary::decode(&mut at).unwrap(),
            RangeSummary::new((14, 5))
        );
        assert_eq!(at, b"tail");
        for cut in 0..bytes.len() - 4 {
            let mut at = &bytes[4..4 + cut];
            assert!(RangeSummary::decode(&mut at).is_err(), "cut at {cut}");
        }
    }
}
