//! Sort orders and record comparators, exactly as samtools 1.24 `bam_sort.c` defines them.
//!
//! samtools sorts stably (radix sort for coordinates, `ks_mergesort` otherwise, and its merge breaks
//! ties by temporary-file number then record number), so records that compare equal keep their input
//! order. Every comparator here is the "primary" comparison; callers break ties by input position.

use crate::template::TemplateOrder;
use sortase_bam::{aux::AuxIter, RecordRef};
use std::cmp::Ordering;

/// The order to sort records in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortOrder {
    /// By reference (unmapped last), 1-based position, then forward before reverse (samtools default).
    Coordinate,
    /// By read name: `natural` = samtools `-n` (digit runs compared as numbers), otherwise `-N`
    /// (`strcmp`); ties by READ1, READ2, primary, supplementary, secondary.
    Name {
        /// samtools `-n` (true) or `-N` (false).
        natural: bool,
    },
    /// By the value of an aux tag (records without it first), then by `then` (samtools `-t TAG`,
    /// with `-n`/`-N` for name order).
    Tag {
        /// The two-character tag.
        tag: [u8; 2],
        /// `None`: coordinate; `Some(natural)`: read name.
        by_name: Option<bool>,
    },
    /// samtools `--template-coordinate`: the records of a template together, by the template's
    /// unclipped 5' ends (see [`crate::template`]).
    TemplateCoordinate(TemplateOrder),
}

impl SortOrder {
    /// Whether the order is fully described by [`coordinate_key`] (plus input order).
    pub fn is_coordinate(&self) -> bool {
        matches!(self, SortOrder::Coordinate)
    }

    /// The `@HD` `SO` and `SS` values samtools writes for this order (`set_sort_order`).
    pub fn header_values(&self) -> (&'static str, Option<String>) {
        let name_ss = |natural: bool| {
            if natural {
                "queryname:natural"
            } else {
                "queryname:lexicographical"
            }
        };
        match *self {
            SortOrder::Coordinate => ("coordinate", None),
            SortOrder::Name { natural } => ("queryname", Some(name_ss(natural).to_string())),
            SortOrder::Tag { tag, by_name } => {
                let then = by_name.map_or("coordinate", name_ss);
                let tag = String::from_utf8_lossy(&tag).into_owned();
                ("unsorted", Some(format!("unsorted:{tag}:{then}")))
            }
            SortOrder::TemplateCoordinate(_) => {
                ("unsorted", Some("unsorted:template-coordinate".to_string()))
            }
        }
    }

    /// The `@HD` `GO` value samtools writes for this order (`set_sort_order`; other orders remove
    /// `GO`).
    pub fn group_order(&self) -> Option<&'static str> {
        matches!(self, SortOrder::TemplateCoordinate(_)).then_some("query")
    }

    /// Compares two records (without their `block_size` prefixes). `tag_a`/`tag_b` are the records'
    /// tag fields for [`SortOrder::Tag`] (see [`find_tag`]); ignored otherwise.
    #[inline]
    pub fn compare(
        &self,
        a: &[u8],
        b: &[u8],
        tag_a: Option<&[u8]>,
        tag_b: Option<&[u8]>,
    ) -> Ordering {
        match *self {
            SortOrder::Coordinate => coordinate_key(a).cmp(&coordinate_key(b)),
            SortOrder::Name { natural } => compare_names(a, b, natural),
            SortOrder::Tag { by_name, .. } => match compare_tags(tag_a, tag_b) {
                Ordering::Equal => match by_name {
                    None => coordinate_key(a).cmp(&coordinate_key(b)),
                    Some(natural) => compare_names(a, b, natural),
                },
                o => o,
            },
            SortOrder::TemplateCoordinate(t) => t.compare(a, b),
        }
    }
}

/// Coordinate sort key of a record (no `block_size` prefix): reference (unmapped `-1` last), then
/// `pos + 1`, then the reverse-strand bit, as samtools' `ks_radixsort`/`bam1_cmp_core`.
///
// HOT: once per record per comparison pass. refID < 2^31 and (pos+1) << 1 | rev < 2^33, so
// refID << 33 fits in 64 bits; -1 maps to 2^31 - 1, above every valid refID.
#[inline]
pub fn coordinate_key(rec: &[u8]) -> u64 {
    let tid = i32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
    let pos = i32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
    let flag = u16::from_le_bytes([rec[14], rec[15]]);
    let tid = if tid < 0 { 0x7fff_ffff } else { tid as u64 };
    let pos1 = (i64::from(pos) + 1) as u64 & 0xffff_ffff;
    (tid << 33) | (pos1 << 1) | u64::from(flag & 0x10 != 0)
}

/// The read name (without its NUL) of a record or of a record's [`key_prefix`]: only the fixed
/// fields and the name are read, so this works on key prefixes, which are not whole records.
#[inline]
pub(crate) fn read_name(rec: &[u8]) -> &[u8] {
    // l_read_name at byte 8 (SAM spec §4.2.1), the name right after the 32 fixed bytes.
    let name = &rec[32..32 + usize::from(rec[8])];
    let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    &name[..end]
}

/// The leading bytes of a record (no `block_size` prefix) that [`SortOrder::compare`] reads: the
/// fixed fields and the read name for coordinate and name orders, the whole record for tag and
/// template-coordinate orders (the tags may be anywhere in the aux fields). Sparse run indexes and
/// range split points keep only these bytes.
#[inline]
pub fn key_prefix<'a>(order: &SortOrder, rec: &'a [u8]) -> &'a [u8] {
    match order {
        SortOrder::Tag { .. } | SortOrder::TemplateCoordinate(_) => rec,
        _ => {
            let l_read_name = usize::from(rec[8]);
            &rec[..(32 + l_read_name).min(rec.len())]
        }
    }
}

/// Flag bits in samtools' tie order for equal names: READ1, READ2, primary, supplementary, secondary.
#[inline]
fn name_flag_rank(flag: u16) -> i32 {
    let f = i32::from(flag);
    ((f & 0xc0) << 8) | ((f & 0x100) << 3) | ((f & 0x800) >> 3)
}

/// samtools' name comparison (`strnum_cmp` or `strcmp`, then the flag rank).
#[inline]
pub fn compare_names(a: &[u8], b: &[u8], natural: bool) -> Ordering {
    let (na, nb) = (read_name(a), read_name(b));
    // Mates share a name, and their 8-byte sort keys tie: one memcmp settles most such pairs
    // (strnum_cmp walks them byte by byte; `perf`: compare_names 4% of `sort -n`'s CPU).
    let by_name = if na == nb {
        Ordering::Equal
    } else if natural {
        strnum_cmp(na, nb)
    } else {
        na.cmp(nb)
    };
    by_name.then_with(|| {
        let fa = u16::from_le_bytes([a[14], a[15]]);
        let fb = u16::from_le_bytes([b[14], b[15]]);
        name_flag_rank(fa).cmp(&name_flag_rank(fb))
    })
}

/// samtools' natural order (`strnum_cmp`): runs of digits compare as numbers (leading zeros
/// ignored), everything else byte by byte. `a`/`b` are names without their NUL.
pub fn strnum_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let at = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
    let (mut i, mut j) = (0usize, 0usize);
    while at(a, i) != 0 && at(b, j) != 0 {
        let (ca, cb) = (at(a, i), at(b, j));
        if !ca.is_ascii_digit() || !cb.is_ascii_digit() {
            if ca != cb {
                return ca.cmp(&cb);
            }
            i += 1;
            j += 1;
        } else {
            while at(a, i) == b'0' {
                i += 1;
            }
            while at(b, j) == b'0' {
                j += 1;
            }
            while at(a, i).is_ascii_digit() && at(a, i) == at(b, j) {
                i += 1;
                j += 1;
            }
            let diff = i32::from(at(a, i)) - i32::from(at(b, j));
            while at(a, i).is_ascii_digit() && at(b, j).is_ascii_digit() {
                i += 1;
                j += 1;
            }
            if at(a, i).is_ascii_digit() {
                return Ordering::Greater;
            } else if at(b, j).is_ascii_digit() {
                return Ordering::Less;
            } else if diff != 0 {
                return diff.cmp(&0);
            }
        }
    }
    if at(a, i) != 0 {
        Ordering::Greater
    } else if at(b, j) != 0 {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

/// The first aux field with `tag` (htslib `bam_aux_get`), as tag + type + value bytes.
pub fn find_tag(rec: &[u8], tag: [u8; 2]) -> Option<&[u8]> {
    let aux = RecordRef::new_unchecked(rec).aux_bytes();
    AuxIter::new(aux).find(|f| f.tag() == tag).map(|f| f.raw)
}

/// Byte offset of the first aux field with `tag` inside `rec`, plus one (0: absent). Lets a sort keep
/// the tag's place in an 8-byte key instead of searching the aux fields at every comparison.
pub fn tag_offset(rec: &[u8], tag: [u8; 2]) -> u64 {
    find_tag(rec, tag).map_or(0, |f| {
        (f.as_ptr() as usize - rec.as_ptr() as usize) as u64 + 1
    })
}

/// The tag field of `rec` located by [`tag_offset`].
#[inline]
pub fn tag_at(rec: &[u8], offset_plus_one: u64) -> Option<&[u8]> {
    if offset_plus_one == 0 {
        return None;
    }
    let f = &rec[offset_plus_one as usize - 1..];
    sortase_bam::aux::field_len(f).map(|n| &f[..n])
}

/// Type letter samtools compares by (`normalize_type`): all integers `c`, floats `f`, `Z`/`H` `H`.
fn normalize_type(t: u8) -> u8 {
    match t {
        b'c' | b'C' | b's' | b'S' | b'i' | b'I' => b'c',
        b'f' | b'd' => b'f',
        b'H' | b'Z' => b'H',
        t => t,
    }
}

fn as_int(f: &[u8]) -> i64 {
    sortase_bam::aux::AuxField { raw: f }.integer().unwrap_or(0)
}

/// htslib `bam_aux2f`: floats and doubles as stored, integers converted.
fn as_float(f: &[u8]) -> f64 {
    let v = &f[3..];
    match f[2] {
        b'f' => f64::from(f32::from_le_bytes([v[0], v[1], v[2], v[3]])),
        b'd' => f64::from_le_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]]),
        _ => as_int(f) as f64,
    }
}

/// samtools `bam1_cmp_by_tag` without its secondary comparison: absent first, then by normalised
/// type letter (integers and floats compare numerically), then by value.
pub fn compare_tags(a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    let (ta, tb) = (normalize_type(a[2]), normalize_type(b[2]));
    let common = match (ta, tb) {
        _ if ta == tb => ta,
        (b'c', b'f') | (b'f', b'c') => b'f',
        _ => return ta.cmp(&tb),
    };
    match common {
        b'c' => as_int(a).cmp(&as_int(b)),
        // C's `va != vb` then `<`: NaN compares unequal and not less, so it sorts as greater.
        b'f' => {
            let (va, vb) = (as_float(a), as_float(b));
            if va == vb {
                Ordering::Equal
            } else if va < vb {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        b'A' => a[3].cmp(&b[3]),
        b'H' => a[3..a.len() - 1].cmp(&b[3..b.len() - 1]),
        _ => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_matches_samtools_examples() {
        let lt = |a: &str, b: &str| strnum_cmp(a.as_bytes(), b.as_bytes()) == Ordering::Less;
        assert!(lt("a9", "a10"));
        assert!(lt("a7b", "a12b"));
        assert!(lt("r1", "r1a"));
        assert_eq!(strnum_cmp(b"a09", b"a9"), Ordering::Equal);
        assert!(lt("a09", "a10"));
        assert!(lt("a", "b"));
        assert!(lt("x:1:2", "x:1:10"));
        assert!(lt("12", "a"));
    }

    #[test]
    fn leading_zero_tie_breaks_on_later_characters() {
        // Equal numerically, so the comparison continues after the digits.
        assert_eq!(strnum_cmp(b"a01b", b"a1c"), Ordering::Less);
        assert_eq!(strnum_cmp(b"a001", b"a01"), Ordering::Equal);
    }

    #[test]
    fn flag_rank_orders_read1_read2_primary_supplementary_secondary() {
        let r1 = name_flag_rank(0x41);
        let r2 = name_flag_rank(0x81);
        let sup = name_flag_rank(0x841);
        let sec = name_flag_rank(0x141);
        assert!(name_flag_rank(0) < r1 && r1 < r2);
        assert!(r1 < sup && sup < sec);
    }

    #[test]
    fn tag_types_compare_as_samtools() {
        let int = |v: i8| vec![b'X', b'Y', b'c', v as u8];
        let flt = |v: f32| [&b"XYf"[..], &v.to_le_bytes()].concat();
        let z = |s: &str| [&b"XYZ"[..], s.as_bytes(), &[0]].concat();
        assert_eq!(compare_tags(None, Some(&int(1))), Ordering::Less);
        assert_eq!(compare_tags(Some(&int(2)), Some(&flt(2.5))), Ordering::Less);
        assert_eq!(
            compare_tags(Some(&int(3)), Some(&flt(2.5))),
            Ordering::Greater
        );
        assert_eq!(
            compare_tags(Some(&z("b")), Some(&z("ab"))),
            Ordering::Greater
        );
        // Z ('H' after normalising) sorts before integers ('c').
        assert_eq!(compare_tags(Some(&z("zz")), Some(&int(0))), Ordering::Less);
    }
}
