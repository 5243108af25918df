//! samblaster's `--addMateTags`: when both primaries of a pair are present, every record of one
//! segment (secondary and supplementary ones included) gets `MC:Z` (the other primary's CIGAR) and
//! `MQ:i` (its MAPQ), unless it has them already, and only from a mapped primary.

use sortase_bam::{flags, RecordRef};
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

/// Appends record `raw` (with its `block_size`) to `out` with the mate tags from `sources` (the
/// first source of each tag wins; tags the record has already are kept).
pub fn append_with_tags(raw: &[u8], sources: &[Option<RecordRef<'_>>; 2], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(raw);
    let r = RecordRef::new_unchecked(&raw[4..]);
    let (mut has_mc, mut has_mq) = (false, false);
    for t in r.aux() {
        has_mc |= t.tag() == *b"MC";
        has_mq |= t.tag() == *b"MQ";
    }
    for src in sources.iter().flatten() {
        if !has_mc {
            out.extend_from_slice(b"MCZ");
            push_cigar(src, out);
            out.push(0);
            has_mc = true;
        }
        if !has_mq {
            out.extend_from_slice(&[b'M', b'Q', b'C', src.mapping_quality()]);
            has_mq = true;
        }
    }
    let size = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&size.to_le_bytes());
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
