//! samblaster's genome layout: all references laid end to end (each padded by `maxReadLength` on
//! both sides) as one "super contig" cut into 2^27-base bins, and each mapped end's place in it.

use sortase_bam::{cigar, flags, RecordRef};

/// Bin width of samblaster's super contig, in bits.
pub const BIN_SHIFT: u32 = 27;
const BIN_MASK: u64 = (1 << BIN_SHIFT) - 1;

/// Offsets of the references in samblaster's super contig.
#[derive(Debug, Clone)]
pub struct Layout {
    offsets: Vec<u64>,
    /// Number of bins (samblaster's `binCount`).
    pub bin_count: u32,
    max_read_length: i32,
}

/// Why a header cannot be laid out.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// samblaster's limit: fewer than 2^15 bins.
    #[error("the references are too long in total for samblaster's signature layout")]
    TooLong,
    /// samblaster refuses input without @SQ lines.
    #[error("no @SQ lines in the header (samblaster needs the reference lengths)")]
    NoReferences,
}

impl Layout {
    /// Lays out references of `lengths` (from @SQ LN) with `max_read_length` padding.
    pub fn new(lengths: &[u64], max_read_length: i32) -> Result<Self, LayoutError> {
        if lengths.is_empty() {
            return Err(LayoutError::NoReferences);
        }
        let mut total = 0u64;
        let offsets = lengths
            .iter()
            .map(|&len| {
                let off = total;
                // samblaster stores the padded length as UINT32 from an int.
                let padded = (len as i32).wrapping_add(2 * max_read_length) as u32;
                total += u64::from(padded) + 1;
                off
            })
            .collect();
        let bin_count = (total >> BIN_SHIFT) as i64;
        if bin_count >= 1 << 15 {
            return Err(LayoutError::TooLong);
        }
        Ok(Self {
            offsets,
            bin_count: bin_count as u32,
            max_read_length,
        })
    }

    /// The end's bin number and position within the bin, or `None` if its reference is unknown.
    /// `orphan`: the only mapped end of its template, taken as if on the forward strand.
    #[inline]
    pub fn place(&self, r: &RecordRef<'_>, orphan: bool) -> Option<(u32, u64)> {
        // samblaster maps RNAME `*` to offset 0 (a "mapped" record without a reference).
        let off = match usize::try_from(r.reference_sequence_id()) {
            Ok(tid) => *self.offsets.get(tid)?,
            Err(_) => 0,
        };
        let pos = five_prime(r, orphan);
        let padded = pos.wrapping_add(self.max_read_length);
        let g = off.wrapping_add(padded as i64 as u64);
        Some(((g >> BIN_SHIFT) as u32, g & BIN_MASK))
    }
}

/// samblaster's unclipped 5' position (1-based): forward strand (or `forward` forced) the start
/// minus the leading clips, reverse strand the end plus the trailing clips.
#[inline]
pub fn five_prime(r: &RecordRef<'_>, forward: bool) -> i32 {
    let (mut ra_len, mut sclip, mut eclip) = (0i32, 0i32, 0i32);
    let mut first = true;
    for op in r.cigar().iter() {
        let len = cigar::op_len(op) as i32;
        match cigar::op_code(op) {
            // M, =, X
            0 | 7 | 8 => {
                ra_len = ra_len.wrapping_add(len);
                first = false;
            }
            // S, H: clips before the first M/=/X are leading ones (even after an I or D).
            4 | 5 => {
                if first {
                    sclip = sclip.wrapping_add(len);
                } else {
                    eclip = eclip.wrapping_add(len);
                }
            }
            // D, N
            2 | 3 => ra_len = ra_len.wrapping_add(len),
            _ => {}
        }
    }
    let rapos = r.position().wrapping_add(1);
    if forward || r.flag() & flags::REVERSE == 0 {
        rapos.wrapping_sub(sclip)
    } else {
        rapos
            .wrapping_add(ra_len)
            .wrapping_add(eclip)
            .wrapping_sub(1)
    }
}
