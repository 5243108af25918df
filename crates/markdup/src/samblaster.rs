//! samblaster 0.1.26's duplicate marking on query-grouped input (all records of a read name
//! together, as aligners write them).
//!
//! Per read-name group, the primary records (neither 0x100 nor 0x800) of the first and second
//! segment (or the unpaired record) give the signature: each end's place in samblaster's padded
//! genome layout ([`layout`]) from its reference and unclipped 5' position, and both strands; the
//! two ends are ordered by position, reference, then strand. A pair with one end unmapped (or a
//! mapped singleton) is an "orphan": its mapped end only, taken as on the forward strand. The first
//! group with a signature is kept; every record of a later group gets 0x400. Pairs with both ends
//! unmapped are never duplicates. samblaster does not use the read group or library.
//!
//! [`analyze`] works on one group independently of all others (so groups run in parallel); only
//! [`SigSet::insert`] must see the groups in input order.

mod carry;
pub mod layout;
pub mod mate_tags;
pub mod side;
pub mod sigset;

pub use carry::Carry;
pub use layout::Layout;
pub use sigset::{SigSet, Signature};

use sortase_bam::{flags, RecordBatch, RecordRef};

/// samblaster's options that change the marking.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `--ignoreUnmated`: groups without a usable primary pair are passed through instead of
    /// being an error.
    pub ignore_unmated: bool,
    /// `-a/--acceptDupMarks`: no marking (existing 0x400 flags stay as they are).
    pub accept_dups: bool,
}

/// What one read-name group needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not a duplicate candidate (both ends unmapped, ignored unmated group, or `-a`).
    Pass,
    /// Duplicate if this signature was seen before.
    Sig(Signature),
    /// samblaster's "can't find first and/or second of pair" (input not grouped by name).
    Broken,
    /// A mapped end names a reference the header lacks.
    UnknownReference,
}

/// The analysis of one group: its verdict and, when both primaries of a pair are present, their
/// indices in the group (for `--addMateTags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// Duplicate candidate or not.
    pub verdict: Verdict,
    /// (first, second) primary records' indices within the group, if both exist.
    pub pair: Option<(u32, u32)>,
    /// Both primaries mapped and not a proper pair (0x2 unset on the end ordered first): they go
    /// to the discordant file (`-d`).
    pub discordant: bool,
}

/// Analyses the groups `bounds` of `batch` in parallel on `pool`; their verdicts, in order.
pub fn analyze_all(
    batch: &RecordBatch,
    bounds: &[std::ops::Range<usize>],
    layout: &Layout,
    opts: &Options,
    pool: &rayon::ThreadPool,
) -> Vec<Group> {
    use rayon::prelude::*;
    pool.install(|| {
        bounds
            .par_iter()
            .with_min_len(256)
            .map(|r| analyze(batch, r.clone(), layout, opts))
            .collect()
    })
}

/// Analyses the group of records `range` of `batch`.
pub fn analyze(
    batch: &RecordBatch,
    range: std::ops::Range<usize>,
    layout: &Layout,
    opts: &Options,
) -> Group {
    let start = range.start;
    let (mut first, mut second) = (None, None);
    for i in range {
        let f = batch.record(i).flag();
        if f & (flags::SECONDARY | flags::SUPPLEMENTARY) != 0 {
            continue;
        }
        if f & flags::PAIRED == 0 || f & flags::READ1 == 0 && f & flags::READ2 != 0 {
            second = Some(i);
        } else if f & flags::READ1 != 0 {
            first = Some(i);
        }
    }
    let rel = |i: usize| (i - start) as u32;
    let pair = first.zip(second).map(|(a, b)| (rel(a), rel(b)));
    let (verdict, discordant) = verdict(batch, first, second, layout, opts);
    Group {
        verdict,
        pair,
        discordant,
    }
}

fn verdict(
    batch: &RecordBatch,
    first: Option<usize>,
    second: Option<usize>,
    layout: &Layout,
    opts: &Options,
) -> (Verdict, bool) {
    let unmated = if opts.ignore_unmated {
        Verdict::Pass
    } else {
        Verdict::Broken
    };
    let (a, b, orphan) = match ends(batch, first, second, unmated) {
        Ok(ends) => ends,
        Err(verdict) => return (verdict, false),
    };
    let improper = |r: &RecordRef<'_>| r.flag() & flags::PROPER_PAIR == 0;
    if opts.accept_dups {
        // No reordering of the ends without marking: the first segment decides.
        return (Verdict::Pass, a.is_some_and(|a| improper(&a)));
    }
    let Some(pb) = layout.place(&b, orphan) else {
        return (Verdict::UnknownReference, false);
    };
    let bin_count = layout.bin_count;
    let Some(a) = a else {
        let off = (pb.0.wrapping_mul(2)).wrapping_add(0);
        return (
            Verdict::Sig(((off as u128) << 64) | u128::from(pb.1)),
            false,
        );
    };
    let Some(pa) = layout.place(&a, false) else {
        return (Verdict::UnknownReference, false);
    };
    // Order the ends: by 5' position, then reference, then forward before reverse.
    let key = |r: &RecordRef<'_>| {
        (
            layout::five_prime(r, false),
            r.reference_sequence_id(),
            r.flag() & flags::REVERSE != 0,
        )
    };
    let ((pa, ra), (pb, rb)) = if key(&a) > key(&b) {
        ((pb, b), (pa, a))
    } else {
        ((pa, a), (pb, b))
    };
    let strand = |r: &RecordRef<'_>| u32::from(r.flag() & flags::REVERSE != 0);
    let s1 = pa.0.wrapping_mul(2).wrapping_add(strand(&ra));
    let s2 = pb.0.wrapping_mul(2).wrapping_add(strand(&rb));
    let off = s1.wrapping_mul(bin_count).wrapping_mul(2).wrapping_add(s2);
    let sig = (pa.1 << 32) | pb.1;
    (
        Verdict::Sig(((off as u128) << 64) | u128::from(sig)),
        improper(&ra),
    )
}

/// The ends the signature is made of: the first mapped end (`None` for an orphan), the second,
/// and whether the group is an orphan; `Err`: the group's verdict without a signature.
#[allow(clippy::type_complexity)]
fn ends<'b>(
    batch: &'b RecordBatch,
    first: Option<usize>,
    second: Option<usize>,
    unmated: Verdict,
) -> Result<(Option<RecordRef<'b>>, RecordRef<'b>, bool), Verdict> {
    let mapped = |r: &RecordRef<'_>| r.flag() & flags::UNMAPPED == 0;
    Ok(match (first, second) {
        (None, None) => return Err(unmated),
        (Some(x), None) | (None, Some(x)) => {
            let r = batch.record(x);
            let f = r.flag();
            let paired = f & flags::PAIRED != 0;
            if paired && (!mapped(&r) || f & flags::MATE_UNMAPPED == 0) || !mapped(&r) {
                return Err(unmated);
            }
            (None, r, true)
        }
        (Some(x), Some(y)) => {
            let (x, y) = (batch.record(x), batch.record(y));
            match (mapped(&x), mapped(&y)) {
                (false, false) => return Err(Verdict::Pass),
                (true, false) => (None, x, true),
                (false, true) => (None, y, true),
                (true, true) => (Some(x), y, false),
            }
        }
    })
}

#[cfg(test)]
mod tests;
