//! samtools' template-coordinate order (`sort --template-coordinate`, samtools 1.24 `bam_sort.c`
//! `template_coordinate_key` and `bam1_cmp_template_coordinate`): records of one template (a read
//! pair and its secondary and supplementary records) sort together, by
//! 1. the lower of the two ends' unclipped 5' positions (reference, position), then the higher one,
//! 2. the two ends' strands (reverse first),
//! 3. library (`LB` of the record's `@RG`), cell barcode (`CB`), molecular identifier (`MI`, a trailing
//!    `/X` ignored), read name (`strcmp`),
//! 4. whether the record is the upper end of its pair.
//!
//! Unclipped positions count soft clips only (samtools 1.24 ignores hard clips here). The mate's end
//! comes from the `MC` tag, so every paired record with a mapped mate needs one (`samtools fixmate
//! -m`); without it the sort fails as samtools' does. An unmapped end sorts as (`i32::MAX`,
//! `i64::MAX`), so an unmapped mate follows its mapped mate and unmapped pairs come last, by name.
//!
//! The comparison needs the header's read groups, so the order carries a [`TemplateOrder`] (a `Copy`
//! handle on an interned table: [`SortOrder`](crate::SortOrder) stays `Copy`). Sorting uses an 8-byte
//! prefix of the comparison ([`TemplateOrder::packed_key`]): most comparisons are one `u64` compare,
//! and only records tied on it are compared in full, on the record bytes, without allocation.

use sortase_bam::{cigar, flags, RecordRef};
use std::cmp::Ordering;
use std::sync::Mutex;

/// The read groups' libraries: `@RG ID` → rank of its `LB` among the header's distinct libraries
/// (rank 0 is the empty library of records without a read group or without `LB`).
#[derive(Debug, PartialEq, Eq)]
pub struct Libraries {
    /// `(ID, rank)`, sorted by ID.
    ids: Vec<(Box<[u8]>, u32)>,
}

impl Libraries {
    /// The libraries of a SAM header text: the first `@RG` line with a given ID that has an `LB`
    /// names its library (htslib's `lookup_libraries` keeps the first).
    fn from_header_text(text: &str) -> Self {
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("@RG\t")) {
            let field = |tag: &str| {
                line.split('\t')
                    .skip(1)
                    .find_map(|f| f.strip_prefix(tag))
                    .map(str::as_bytes)
            };
            if let (Some(id), Some(lb)) = (field("ID:"), field("LB:")) {
                if !pairs.iter().any(|(i, _)| *i == id) {
                    pairs.push((id, lb));
                }
            }
        }
        let mut names: Vec<&[u8]> = pairs.iter().map(|p| p.1).collect();
        names.push(b"");
        names.sort_unstable();
        names.dedup();
        let rank = |lb: &[u8]| names.binary_search(&lb).expect("listed") as u32;
        let mut ids: Vec<(Box<[u8]>, u32)> = pairs
            .iter()
            .map(|(id, lb)| (Box::from(*id), rank(lb)))
            .collect();
        ids.sort_unstable();
        Self { ids }
    }

    /// The library rank of a read group ID.
    #[inline]
    fn rank(&self, rg: Option<&[u8]>) -> u32 {
        match rg {
            Some(id) if !self.ids.is_empty() => self
                .ids
                .binary_search_by(|(k, _)| (**k).cmp(id))
                .map_or(0, |i| self.ids[i].1),
            _ => 0,
        }
    }
}

/// Every distinct library table handed out, kept for the life of the process so that the order
/// stays `Copy` (a sort's table is small and identical headers share one).
static INTERNED: Mutex<Vec<&'static Libraries>> = Mutex::new(Vec::new());

fn intern(libraries: Libraries) -> &'static Libraries {
    let mut all = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = all.iter().find(|l| ***l == libraries) {
        return found;
    }
    let leaked: &'static Libraries = Box::leak(Box::new(libraries));
    all.push(leaked);
    leaked
}

/// The tie word's bit for "compare these records in full" ([`TemplateOrder::pack_with_tie`]).
pub const TIE_FULL: u64 = 2;
/// The tie word's bit for "this record's read name equals the name of the record before it in the
/// input" (set by the caller, who sees the input order: [`TemplateOrder::compare_ties`]).
pub const TIE_SAME_NAME: u64 = 4;

/// What the template-coordinate order needs from the header: the read groups' libraries and the
/// number of references (for the width of the packed key's reference fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateOrder {
    libraries: &'static Libraries,
    /// Bits of each reference field in the packed key: enough for `0..=n_ref + 2`.
    tid_bits: u32,
    n_ref: u64,
}

impl TemplateOrder {
    /// The order for a header with `n_ref` references and SAM text `text`.
    pub fn new(text: &str, n_ref: usize) -> Self {
        let n_ref = (n_ref as u64).min(i32::MAX as u64);
        Self {
            libraries: intern(Libraries::from_header_text(text)),
            tid_bits: 64 - (n_ref + 2).leading_zeros(),
            n_ref,
        }
    }

    /// The record's full key (no `block_size` prefix), or why it has none (samtools' errors).
    pub fn key<'a>(&self, rec: &'a [u8]) -> Result<TemplateKey<'a>, String> {
        TemplateKey::new(rec, self.libraries)
    }

    /// An 8-byte prefix of the order: reference of the lower end, reference of the upper end, then
    /// the lower end's position, narrowed monotonically (a smaller packed key means an earlier
    /// record; equal packed keys need [`TemplateOrder::compare`]). Records without a key get 0.
    ///
    // The reference fields hold -1 as 0, a valid refID r as r + 1, the unmapped i32::MAX as
    // n_ref + 2; a refID outside the header shares a code with others, so the fields after it stay
    // 0 (records equal so far are compared in full). The position field, the bits left over, holds
    // the position biased by half its range and clamped. With 25 references that is 54 bits.
    #[inline]
    pub fn packed_key(&self, rec: &[u8]) -> u64 {
        match self.key(rec) {
            Ok(k) => self.pack(&k),
            Err(_) => 0,
        }
    }

    /// [`TemplateOrder::packed_key`] of a key already computed.
    #[inline]
    pub fn pack(&self, k: &TemplateKey<'_>) -> u64 {
        self.pack_exact(k).0
    }

    /// The packed key, and whether it holds the lower end's reference, the upper end's reference
    /// and the lower end's position exactly (so equal exact keys mean equal fields).
    #[inline]
    fn pack_exact(&self, k: &TemplateKey<'_>) -> (u64, bool) {
        let b = self.tid_bits;
        let (c1, exact) = self.tid_code(k.tid1);
        let mut key = c1 << (64 - b);
        if !exact {
            return (key, false);
        }
        let (c2, exact) = self.tid_code(k.tid2);
        key |= c2 << (64 - 2 * b);
        if !exact {
            return (key, false);
        }
        // An unmapped lower end always has position i64::MAX: its clamped code is exact.
        let unmapped = k.tid1 == i32::MAX;
        let bits = 64 - 2 * b;
        if bits == 0 {
            return (key, unmapped);
        }
        let half = 1i128 << (bits - 1);
        let biased = i128::from(k.pos1) + half;
        let pos = biased.clamp(0, (1i128 << bits) - 1);
        (key | pos as u64, unmapped || pos == biased)
    }

    /// The packed key and the tie word of a key: what [`TemplateOrder::compare_ties`] needs to
    /// order two records whose packed keys are equal without reading their aux fields again.
    ///
    /// The tie word holds, from the top bit: the upper end's position (36 bits, biased; the
    /// unmapped `i64::MAX` as all ones), the two strands (reverse first) and the library rank
    /// (23 bits), then [`TIE_SAME_NAME`] (left 0 here), [`TIE_FULL`] and the upper-end bit.
    /// [`TIE_FULL`] is set where a field is not held exactly (a packed key or position out of
    /// range, a library rank above 2^23) or where a cell barcode or molecular identifier takes
    /// part: such records are compared in full.
    #[inline]
    pub fn pack_with_tie(&self, k: &TemplateKey<'_>) -> (u64, u64) {
        const POS_BITS: u32 = 36;
        let (packed, exact) = self.pack_exact(k);
        let pos_max = (1i64 << POS_BITS) - 1;
        let (pos2, pos_exact) = match k.pos2 {
            i64::MAX => (pos_max, true),
            p => {
                let biased = p.saturating_add(1i64 << (POS_BITS - 1));
                (biased.clamp(0, pos_max - 1), (0..pos_max).contains(&biased))
            }
        };
        let full =
            !exact || !pos_exact || k.library >= 1 << 23 || !k.cid.is_empty() || !k.mid.is_empty();
        let word = (pos2 as u64) << 28
            | u64::from(!k.neg1) << 27
            | u64::from(!k.neg2) << 26
            | u64::from(k.library & 0x7f_ffff) << 3
            | u64::from(full) << 1
            | u64::from(k.upper);
        (packed, word)
    }

    /// samtools' comparison of two records whose packed keys are equal, given their tie words
    /// ([`TemplateOrder::pack_with_tie`]) and their places in the input (`seq_a`, `seq_b`;
    /// consecutive numbers for consecutive records): the words and read names where both records
    /// allow it, else [`TemplateOrder::compare`]. `record(i)` gives record `i` (no `block_size`).
    ///
    /// Mates tie on everything but the upper-end bit. In query-grouped input they are neighbours,
    /// and [`TIE_SAME_NAME`] then says their names are equal without reading them: the records are
    /// only read where the names decide (a random memory access each, ~40% of the time this
    /// comparison took before, by `perf annotate`).
    #[inline]
    pub fn compare_ties<'r>(
        &self,
        (seq_a, tie_a): (u64, u64),
        (seq_b, tie_b): (u64, u64),
        record: impl Fn(u64) -> &'r [u8],
    ) -> Ordering {
        if (tie_a | tie_b) & TIE_FULL != 0 {
            return self.compare(record(seq_a), record(seq_b));
        }
        (tie_a >> 3).cmp(&(tie_b >> 3)).then_with(|| {
            let same = (seq_b == seq_a.wrapping_add(1) && tie_b & TIE_SAME_NAME != 0)
                || (seq_a == seq_b.wrapping_add(1) && tie_a & TIE_SAME_NAME != 0);
            let names = if same {
                Ordering::Equal
            } else {
                let name = |s| RecordRef::new_unchecked(record(s)).read_name();
                name(seq_a).cmp(name(seq_b))
            };
            names.then((tie_a & 1).cmp(&(tie_b & 1)))
        })
    }

    /// A reference ID's code in the packed key and whether no other ID shares it.
    #[inline]
    fn tid_code(&self, t: i32) -> (u64, bool) {
        match t {
            -1 => (0, true),
            i32::MAX => (self.n_ref + 2, true),
            t if t < -1 => (0, false),
            t if (t as u64) < self.n_ref => (t as u64 + 1, true),
            _ => (self.n_ref + 1, false),
        }
    }

    /// samtools' comparison of two records (no `block_size` prefixes).
    #[inline]
    pub fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match (self.key(a), self.key(b)) {
            (Ok(ka), Ok(kb)) => ka.cmp_samtools(&kb),
            // Records without a key were refused when read (sort) or checked (merge); keep the
            // order total anyway.
            (Err(_), Ok(_)) => Ordering::Less,
            (Ok(_), Err(_)) => Ordering::Greater,
            (Err(_), Err(_)) => Ordering::Equal,
        }
    }
}

/// samtools' `template_coordinate_key_t` of one record, borrowing its strings from the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateKey<'a> {
    tid1: i32,
    tid2: i32,
    pos1: i64,
    pos2: i64,
    neg1: bool,
    neg2: bool,
    library: u32,
    cid: &'a [u8],
    mid: &'a [u8],
    name: &'a [u8],
    upper: bool,
}

/// The aux fields the key reads (the first of each tag, as htslib's `bam_aux_get`).
#[derive(Default)]
struct KeyTags<'a> {
    rg: Option<&'a [u8]>,
    mc: Option<&'a [u8]>,
    cb: Option<&'a [u8]>,
    mi: Option<&'a [u8]>,
}

/// htslib `bam_aux2Z`: the string of a `Z` or `H` field (raw: tag, type, value, NUL).
fn string_value(raw: &[u8]) -> Option<&[u8]> {
    matches!(raw[2], b'Z' | b'H').then(|| &raw[3..raw.len() - 1])
}

impl<'a> TemplateKey<'a> {
    fn new(rec: &'a [u8], libraries: &Libraries) -> Result<Self, String> {
        let r = RecordRef::new_unchecked(rec);
        let flag = r.flag();
        let name = r.read_name();
        let mut tags = KeyTags::default();
        for f in r.aux() {
            let slot = match &f.tag() {
                b"RG" => &mut tags.rg,
                b"MC" => &mut tags.mc,
                b"CB" => &mut tags.cb,
                b"MI" => &mut tags.mi,
                _ => continue,
            };
            slot.get_or_insert(f.raw);
        }
        let err = |what: &str| format!("record {}: {what}", String::from_utf8_lossy(name));
        let mut k = TemplateKey {
            tid1: i32::MAX,
            tid2: i32::MAX,
            pos1: i64::MAX,
            pos2: i64::MAX,
            neg1: false,
            neg2: false,
            library: libraries.rank(tags.rg.filter(|t| t[2] == b'Z').and_then(string_value)),
            cid: b"",
            mid: b"",
            name,
            upper: false,
        };
        if flag & flags::UNMAPPED == 0 {
            k.tid1 = r.reference_sequence_id();
            k.neg1 = flag & flags::REVERSE != 0;
            k.pos1 = if k.neg1 {
                unclipped_end(&r)
            } else {
                unclipped_start(&r)
            };
        }
        if flag & flags::PAIRED != 0 && flag & flags::MATE_UNMAPPED == 0 {
            let mc = tags.mc.ok_or_else(|| {
                err("no MC tag (template-coordinate order needs the mate's CIGAR: run samtools fixmate -m first)")
            })?;
            let mc = string_value(mc).ok_or_else(|| err("MC tag is not a string"))?;
            let mpos = i64::from(r.mate_position());
            k.tid2 = r.mate_reference_sequence_id();
            k.neg2 = flag & flags::MATE_REVERSE != 0;
            k.pos2 = if k.neg2 {
                mate_unclipped_end(mpos, mc)
            } else {
                mate_unclipped_start(mpos, mc)
            };
        }
        if let Some(cb) = tags.cb {
            k.cid = string_value(cb).ok_or_else(|| err("CB tag is not a string"))?;
        }
        if let Some(mi) = tags.mi {
            k.mid = string_value(mi).ok_or_else(|| err("MI tag is not a string"))?;
        }
        let lower = (k.tid1, k.pos1) < (k.tid2, k.pos2)
            || ((k.tid1, k.pos1) == (k.tid2, k.pos2) && !k.neg1);
        if !lower {
            k.upper = true;
            std::mem::swap(&mut k.tid1, &mut k.tid2);
            std::mem::swap(&mut k.pos1, &mut k.pos2);
            std::mem::swap(&mut k.neg1, &mut k.neg2);
        }
        Ok(k)
    }

    /// `bam1_cmp_template_coordinate`. samtools compares references by subtracting them, which
    /// overflows only for a record flagged mapped with refID -1 against an unmapped end; here -1
    /// sorts first.
    fn cmp_samtools(&self, o: &Self) -> Ordering {
        self.tid1
            .cmp(&o.tid1)
            .then(self.tid2.cmp(&o.tid2))
            .then(self.pos1.cmp(&o.pos1))
            .then(self.pos2.cmp(&o.pos2))
            .then(o.neg1.cmp(&self.neg1)) // reverse strand first
            .then(o.neg2.cmp(&self.neg2))
            .then(self.library.cmp(&o.library))
            .then_with(|| self.cid.cmp(o.cid))
            .then_with(|| compare_mid(self.mid, o.mid))
            .then_with(|| self.name.cmp(o.name))
            .then(self.upper.cmp(&o.upper))
    }
}

/// samtools `template_coordinate_key_compare_mid`: a trailing `/X` is ignored, then the strings
/// compare as C `char`s (signed on the platforms samtools is built for), a prefix first.
fn compare_mid(a: &[u8], b: &[u8]) -> Ordering {
    let snip = |s: &[u8]| {
        if s.len() >= 2 && s[s.len() - 2] == b'/' {
            s.len() - 2
        } else {
            s.len()
        }
    };
    let (a, b) = (&a[..snip(a)], &b[..snip(b)]);
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => (a[i] as i8).cmp(&(b[i] as i8)),
        None => a.len().cmp(&b.len()),
    }
}

/// 1-based unclipped start: `pos + 1` less the leading soft clips (hard clips skipped), as
/// samtools' `unclipped_start(b, 0)`.
fn unclipped_start(r: &RecordRef<'_>) -> i64 {
    let mut clipped = 0i64;
    for op in r.cigar().iter() {
        match cigar::op_code(op) {
            4 => clipped += i64::from(cigar::op_len(op)),
            5 => {}
            _ => break,
        }
    }
    i64::from(r.position()) - clipped + 1
}

/// 1-based unclipped end: htslib's `bam_endpos` plus the trailing soft clips (`unclipped_end(b, 0)`).
fn unclipped_end(r: &RecordRef<'_>) -> i64 {
    let ops = r.cigar();
    let mut clipped = 0i64;
    for i in (0..ops.len()).rev() {
        let op = ops.get(i);
        match cigar::op_code(op) {
            4 => clipped += i64::from(cigar::op_len(op)),
            5 => {}
            _ => break,
        }
    }
    r.end_position() + clipped
}

/// The CIGAR text of an `MC` tag as samtools reads it (`strtol` for a number, else a length of 1):
/// `(length, op char)` pairs up to the end or a `*`.
fn mc_ops(mc: &[u8]) -> impl Iterator<Item = (i64, u8)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= mc.len() || mc[i] == b'*' {
            return None;
        }
        let mut num = 1i64;
        if mc[i].is_ascii_digit() {
            num = 0;
            while i < mc.len() && mc[i].is_ascii_digit() {
                num = num
                    .saturating_mul(10)
                    .saturating_add(i64::from(mc[i] - b'0'));
                i += 1;
            }
        }
        let op = mc.get(i).copied().unwrap_or(0);
        i += 1;
        Some((num, op))
    })
}

/// samtools `unclipped_other_start(mpos, MC, 0)`.
fn mate_unclipped_start(mpos: i64, mc: &[u8]) -> i64 {
    let mut clipped = 0i64;
    for (n, op) in mc_ops(mc) {
        match op {
            b'S' => clipped += n,
            b'H' => {}
            _ => break,
        }
    }
    mpos - clipped + 1
}

/// samtools `unclipped_other_end(mpos, MC, 0)`: reference-consuming lengths plus soft clips after
/// the first of them.
fn mate_unclipped_end(mpos: i64, mc: &[u8]) -> i64 {
    let (mut refpos, mut skip) = (0i64, true);
    for (n, op) in mc_ops(mc) {
        match op {
            b'M' | b'D' | b'N' | b'=' | b'X' => {
                refpos += n;
                skip = false;
            }
            b'S' if !skip => refpos += n,
            0 => break,
            _ => {}
        }
    }
    mpos + refpos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mate_ends_follow_samtools_cigar_text() {
        assert_eq!(mate_unclipped_start(99, b"5S10M"), 95);
        assert_eq!(mate_unclipped_start(99, b"3H5S10M"), 95);
        assert_eq!(mate_unclipped_start(99, b"*"), 100);
        assert_eq!(mate_unclipped_end(199, b"10M5S"), 214);
        assert_eq!(mate_unclipped_end(199, b"4S10M2I3D5S2H"), 199 + 13 + 5);
        assert_eq!(mate_unclipped_end(199, b"*"), 199);
    }

    #[test]
    fn mid_ignores_a_trailing_slash_suffix() {
        assert_eq!(compare_mid(b"x1/A", b"x1"), Ordering::Equal);
        assert_eq!(compare_mid(b"x1/A", b"x1/B"), Ordering::Equal);
        assert_eq!(compare_mid(b"x0/B", b"x1"), Ordering::Less);
        assert_eq!(compare_mid(b"x", b"x1"), Ordering::Less);
        // Signed chars: bytes above 0x7f sort before ASCII.
        assert_eq!(compare_mid(&[0xc3], b"a"), Ordering::Less);
    }

    #[test]
    fn libraries_rank_by_name_first_id_wins() {
        let l = Libraries::from_header_text(
            "@RG\tID:g1\tLB:libB\n@RG\tID:g2\tLB:libA\n@RG\tID:g3\n@RG\tID:g1\tLB:libZ\n",
        );
        assert_eq!(l.rank(Some(b"g2")), 1);
        assert_eq!(l.rank(Some(b"g1")), 2);
        assert_eq!(l.rank(Some(b"g3")), 0);
        assert_eq!(l.rank(None), 0);
    }

    #[test]
    fn packed_key_is_monotone() {
        for n_ref in [0usize, 1, 25, 3366, 1 << 20, i32::MAX as usize] {
            let t = TemplateOrder::new("", n_ref);
            let key = |tid1: i32, tid2: i32, pos1: i64| TemplateKey {
                tid1,
                tid2,
                pos1,
                pos2: 0,
                neg1: false,
                neg2: false,
                library: 0,
                cid: b"",
                mid: b"",
                name: b"",
                upper: false,
            };
            let tids = [
                -7,
                -1,
                0,
                1,
                24,
                n_ref as i32 - 1,
                n_ref as i32,
                i32::MAX - 1,
                i32::MAX,
            ];
            let poss = [i64::MIN, -(1 << 40), -5, 0, 1, 1 << 31, 1 << 44, i64::MAX];
            let mut all = Vec::new();
            for &a in &tids {
                for &b in &tids {
                    for &p in &poss {
                        all.push(key(a, b, p));
                    }
                }
            }
            for x in &all {
                for y in &all {
                    if t.pack(x) < t.pack(y) {
                        assert_eq!(
                            x.cmp_samtools(y),
                            Ordering::Less,
                            "n_ref {n_ref}: {x:?} {y:?}"
                        );
                    }
                }
            }
        }
    }
}
