//! samblaster's side outputs: which records of a group are split reads (`-s`) and which are
//! unmapped or clipped reads (`--unmappedFile`). Discordant pairs are found by [`super::analyze`].

use sortase_bam::{cigar, flags, RecordBatch, RecordRef};

/// Record is a split read (for `-s`).
pub const SPLITTER: u8 = 1;
/// Record is unmapped or has a long clip (for `--unmappedFile`).
pub const UNMAPPED_CLIPPED: u8 = 2;
/// Record is one end of a discordant pair (for `-d`).
pub const DISCORDANT: u8 = 4;

/// samblaster's split-read and clip thresholds.
#[derive(Debug, Clone, Copy)]
pub struct SideOptions {
    /// Look for split reads (`-s` given).
    pub splitters: bool,
    /// Look for unmapped/clipped reads (`--unmappedFile` given).
    pub unmapped_clipped: bool,
    /// `-M`: 0x100 records are split-read candidates too (none are secondary).
    pub compat: bool,
    /// `--maxSplitCount` [2].
    pub max_split_count: usize,
    /// `--minNonOverlap` [20].
    pub min_non_overlap: i32,
    /// `--minIndelSize` [50].
    pub min_indel_size: i32,
    /// `--maxUnmappedBases` [50].
    pub max_unmapped_bases: i32,
    /// `--minClipSize` [20].
    pub min_clip: i32,
}

/// One alignment's query and reference extents (samblaster's processCIGAR); [`mark`]'s scratch.
#[derive(Clone, Copy)]
pub struct Extent {
    idx: usize,
    rapos: i32,
    ra_len: i32,
    qa_len: i32,
    sclip: i32,
    eclip: i32,
    sqo: i32,
    eqo: i32,
    tid: i32,
    reverse: bool,
}

impl Extent {
    fn of(r: &RecordRef<'_>, idx: usize) -> Self {
        let (mut ra_len, mut qa_len, mut sclip, mut eclip, mut first) = (0, 0, 0, 0, true);
        for op in r.cigar().iter() {
            let len = cigar::op_len(op) as i32;
            match cigar::op_code(op) {
                0 | 7 | 8 => {
                    ra_len += len;
                    qa_len += len;
                    first = false;
                }
                4 | 5 if first => sclip += len,
                4 | 5 => eclip += len,
                2 | 3 => ra_len += len,
                1 => qa_len += len,
                _ => {}
            }
        }
        let reverse = r.flag() & flags::REVERSE != 0;
        let sqo = if reverse { eclip } else { sclip };
        Extent {
            idx,
            rapos: r.position() + 1,
            ra_len,
            qa_len,
            sclip,
            eclip,
            sqo,
            eqo: sqo + qa_len - 1,
            tid: r.reference_sequence_id(),
            reverse,
        }
    }
    fn start_diag(&self) -> i32 {
        self.rapos - self.sclip
    }
    fn end_diag(&self) -> i32 {
        (self.rapos + self.ra_len) - (self.sclip + self.qa_len)
    }
}

/// Sets [`SPLITTER`] and [`UNMAPPED_CLIPPED`] in `marks` (one per record of `range`) as samblaster
/// does for the first segment, the second segment, then unpaired records. `scratch` is reused.
pub fn mark(
    batch: &RecordBatch,
    range: std::ops::Range<usize>,
    o: &SideOptions,
    marks: &mut [u8],
    scratch: &mut Vec<Extent>,
) {
    let secondary = if o.compat { 0 } else { flags::SECONDARY };
    let selectors: [(u16, bool); 3] = [
        (flags::READ1, true),
        (flags::READ2, true),
        (flags::PAIRED, false),
    ];
    for (mask, value) in selectors {
        scratch.clear();
        for i in range.clone() {
            let f = batch.record(i).flag();
            if (f & mask != 0) == value && f & secondary == 0 {
                scratch.push(Extent::of(&batch.record(i), i - range.start));
            }
        }
        let primary = |i: usize| {
            batch.record(range.start + i).flag() & (flags::SECONDARY | flags::SUPPLEMENTARY) == 0
        };
        let unmapped = |i: usize| batch.record(range.start + i).flag() & flags::UNMAPPED != 0;
        match scratch.len() {
            0 => {}
            1 => {
                let e = scratch[0];
                if o.unmapped_clipped
                    && primary(e.idx)
                    && (unmapped(e.idx) || e.sclip >= o.min_clip || e.eclip >= o.min_clip)
                {
                    marks[e.idx] |= UNMAPPED_CLIPPED;
                }
            }
            n if o.splitters && n <= o.max_split_count => {
                if scratch.iter().any(|e| primary(e.idx) && unmapped(e.idx)) {
                    continue;
                }
                // samblaster sorts with glibc qsort, a merge sort (stable) for small arrays.
                scratch.sort_by_key(|e| e.sqo);
                for w in 1..n {
                    let (l, r) = (scratch[w - 1], scratch[w]);
                    if is_split_pair(&l, &r, o) {
                        marks[l.idx] |= SPLITTER;
                        marks[r.idx] |= SPLITTER;
                    }
                }
            }
            _ => {}
        }
    }
}

fn is_split_pair(l: &Extent, r: &Extent, o: &SideOptions) -> bool {
    let overlap = (1 + l.eqo.min(r.eqo) - l.sqo.max(r.sqo)).max(0);
    let alen1 = 1 + l.eqo - l.sqo;
    let alen2 = 1 + r.eqo - r.sqo;
    if (alen1 - overlap).min(alen2 - overlap) < o.min_non_overlap {
        return false;
    }
    if l.tid == r.tid && l.reverse == r.reverse {
        let ins = if l.reverse {
            r.end_diag() - l.start_diag()
        } else {
            l.end_diag() - r.start_diag()
        };
        let desert = r.sqo - l.eqo - 1;
        if ins.abs() < o.min_indel_size || desert > 0 && desert - ins.max(0) > o.max_unmapped_bases
        {
            return false;
        }
    }
    true
}
