//! samblaster's `--addMateTags`: when both primaries of a pair are present, every record of one
//! segment (secondary and supplementary ones included) gets `MC:Z` (the other primary's CIGAR) and
//! `MQ:i` (its MAPQ), unless it has them already, and only from a mapped primary.

use sortase_bam::{flags, RecordBuf, RecordRef};
use std::io::Write;

const SEGMENTS: u16 = flags::READ1 | flags::READ2;

/// The primary whose CIGAR and MAPQ record `r` gets, of the pair's `(first, second)` primaries.
/// samblaster adds from `first` to the records of `second`'s segment, then the other way round.
pub fn mate_of<'a>(
    r: &RecordRef<'_>,
    first: &RecordRef<'a>,
    second: &RecordRef<'a>,
) -> [Option<RecordRef<'a>>; 2] {
    let from = |src: &RecordRef<'a>, other: &RecordRef<'a>| {
        let mapped = src.flag() & flags::UNMAPPED == 0;
        (mapped && r.flag() & other.flag() & SEGMENTS != 0).then_some(*src)
    };
    [from(first, second), from(second, first)]
}

/// Adds the mate tags from `sources` to `rec` (the first source of each tag wins; tags the record
/// has already are kept).
pub fn add_tags(rec: &mut RecordBuf, sources: &[Option<RecordRef<'_>>; 2]) {
    let (mut has_mc, mut has_mq) = (false, false);
    for t in rec.record().aux() {
        has_mc |= t.tag() == *b"MC";
        has_mq |= t.tag() == *b"MQ";
    }
    for src in sources.iter().flatten() {
        if !has_mc {
            rec.push_aux_with(*b"MC", b'Z', |out| {
                push_cigar(src, out);
                out.push(0);
            });
            has_mc = true;
        }
        if !has_mq {
            rec.push_aux(*b"MQ", b'C', &[src.mapping_quality()]);
            has_mq = true;
        }
    }
}

fn push_cigar(r: &RecordRef<'_>, out: &mut Vec<u8>) {
    let ops = r.cigar();
    if ops.is_empty() {
        out.push(b'*');
        return;
    }
    for op in ops.iter() {
        let _ = write!(out, "{}", sortase_bam::cigar::op_len(op));
        out.push(b"MIDNSHP=X"[sortase_bam::cigar::op_code(op) as usize % 9]);
    }
}
