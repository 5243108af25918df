//! Read ends (Picard `ReadEndsForMarkDuplicates`): what MarkDuplicates keeps of each primary mapped
//! record (a fragment end) and of each pair (both ends, the lower one first).

use super::name::Location;
use sortase_bam::{cigar, flags, RecordRef};

/// Picard's orientation bytes.
pub mod orientation {
    /// Fragment, forward.
    pub const F: u8 = 0;
    /// Fragment, reverse.
    pub const R: u8 = 1;
    /// Pair: both forward.
    pub const FF: u8 = 2;
    /// Pair: lower end forward, upper reverse.
    pub const FR: u8 = 3;
    /// Pair: both reverse.
    pub const RR: u8 = 4;
    /// Pair: lower end reverse, upper forward.
    pub const RF: u8 = 5;

    /// Picard `ReadEnds.getOrientationByte(read1Negative, read2Negative)`.
    pub fn pair(r1_negative: bool, r2_negative: bool) -> u8 {
        match (r1_negative, r2_negative) {
            (true, true) => RR,
            (true, false) => RF,
            (false, true) => FR,
            (false, false) => FF,
        }
    }
}

/// One primary mapped record, as Picard's `buildReadEnds` sees it.
#[derive(Clone, Copy, Debug)]
pub struct RecordEnd {
    /// Library id (index into the sorted library names).
    pub library: u16,
    /// Reference index.
    pub reference: i32,
    /// Unclipped 5' position (1-based, as Picard).
    pub coordinate: i32,
    /// Reverse strand.
    pub reverse: bool,
    /// Mate's reference index when paired with the mate mapped, else -1 (Picard `read2ReferenceIndex`).
    pub mate_reference: i32,
    /// Picard's SUM_OF_BASE_QUALITIES score.
    pub score: i16,
    /// Flow-cell location from the name (tile -1: none).
    pub location: Location,
    /// Read group's position in the header's @RG list (Picard `readGroup`), when located.
    pub read_group: i16,
    /// First of pair (0x40).
    pub first_of_pair: bool,
}

/// A fragment end, 32 bytes: sorted by (library, reference, coordinate, orientation, paired, tile,
/// x, y, index) as Picard's `ReadEndsMDComparator` (which also compares `read2ReferenceIndex`; only
/// "paired or not" matters for the outcome, see [`super::chunks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fragment {
    /// Library id.
    pub library: u16,
    /// Reference index.
    pub reference: i32,
    /// Unclipped 5' coordinate.
    pub coordinate: i32,
    /// [`orientation::F`] or [`orientation::R`].
    pub orientation: u8,
    /// Whether the record is paired with its mate mapped.
    pub paired: bool,
    /// Tile (-1: none).
    pub tile: i16,
    /// X.
    pub x: i16,
    /// Y.
    pub y: i16,
    /// Index of the record in the file.
    pub index: u64,
    /// Score (not a sort key: after `index`, which is unique).
    pub score: i16,
}

/// A pair's ends, sorted by (library, ref1, coord1, orientation, ref2, coord2, tile, x, y, index1,
/// index2) as Picard's `ReadEndsMDComparator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pair {
    /// Library id (of the first end seen).
    pub library: u16,
    /// Lower end's reference.
    pub ref1: i32,
    /// Lower end's unclipped 5' coordinate.
    pub coord1: i32,
    /// FF/FR/RR/RF by the lower end then the upper.
    pub orientation: u8,
    /// Upper end's reference.
    pub ref2: i32,
    /// Upper end's coordinate.
    pub coord2: i32,
    /// Tile of the first end seen (-1: none).
    pub tile: i16,
    /// X.
    pub x: i16,
    /// Y.
    pub y: i16,
    /// File index of the lower end.
    pub index1: u64,
    /// File index of the upper end.
    pub index2: u64,
    /// Sum of both ends' scores (Java `short` addition).
    pub score: i16,
    /// Orientation by read 1 then read 2 of the pair (Picard `orientationForOpticalDuplicates`).
    pub optical_orientation: u8,
    /// Read group index of the first end seen (for optical duplicates).
    pub read_group: i16,
}

impl Pair {
    /// Picard's pair from its first end `a` (seen at `ia`) and the mate `b` (at `ib`), as in
    /// `buildSortedReadEndLists`.
    pub fn new(a: &RecordEnd, ia: u64, b: &RecordEnd, ib: u64) -> Self {
        let optical_orientation = if b.first_of_pair {
            orientation::pair(b.reverse, a.reverse)
        } else {
            orientation::pair(a.reverse, b.reverse)
        };
        let b_later = (b.reference, b.coordinate) >= (a.reference, a.coordinate);
        let (lo, ilo, hi, ihi) = if b_later {
            (a, ia, b, ib)
        } else {
            (b, ib, a, ia)
        };
        let mut orient = orientation::pair(lo.reverse, hi.reverse);
        if b_later
            && lo.reference == hi.reference
            && lo.coordinate == hi.coordinate
            && orient == orientation::RF
        {
            orient = orientation::FR;
        }
        Pair {
            library: a.library,
            ref1: lo.reference,
            coord1: lo.coordinate,
            orientation: orient,
            ref2: hi.reference,
            coord2: hi.coordinate,
            tile: a.location.tile,
            x: a.location.x,
            y: a.location.y,
            index1: ilo,
            index2: ihi,
            score: a.score.wrapping_add(b.score),
            optical_orientation,
            read_group: a.read_group,
        }
    }
}

/// Unclipped 5' coordinate (1-based): the unclipped start, or for reverse reads the unclipped end.
pub fn unclipped_five_prime(r: &RecordRef, reverse: bool) -> i32 {
    let ops = r.cigar();
    let pos = i64::from(r.position()) + 1;
    let is_clip = |op: u32| matches!(cigar::op_code(op), 4 | 5);
    let v = if reverse {
        let end = pos + ops.reference_length() as i64 - 1;
        let clips: i64 = (0..ops.len())
            .rev()
            .map(|i| ops.get(i))
            .take_while(|&op| is_clip(op))
            .map(|op| i64::from(cigar::op_len(op)))
            .sum();
        end + clips
    } else {
        let clips: i64 = ops
            .iter()
            .take_while(|&op| is_clip(op))
            .map(|op| i64::from(cigar::op_len(op)))
            .sum();
        pos - clips
    };
    v as i32
}

/// htsjdk `DuplicateScoringStrategy` SUM_OF_BASE_QUALITIES: the sum of qualities >= 15 (as signed
/// bytes, so a missing `0xff` quality counts nothing), capped at `Short.MAX_VALUE / 2`, minus 16384
/// for a QC failure.
pub fn score(r: &RecordRef) -> i16 {
    let sum: u32 = r
        .quality_scores()
        .iter()
        .map(|&q| if (q as i8) >= 15 { u32::from(q) } else { 0 })
        .sum();
    let s = sum.min(16383) as i16;
    if r.flag() & flags::QC_FAIL != 0 {
        s.wrapping_add(-16384)
    } else {
        s
    }
}

/// Whether Picard builds read ends for `flag`: mapped, primary.
pub fn is_examined(flag: u16) -> bool {
    flag & (flags::UNMAPPED | flags::SECONDARY | flags::SUPPLEMENTARY) == 0
}

/// Whether a record counts as a pair end (paired, mate mapped) rather than unpaired.
pub fn has_mapped_mate(flag: u16) -> bool {
    flag & flags::PAIRED != 0 && flag & flags::MATE_UNMAPPED == 0
}
