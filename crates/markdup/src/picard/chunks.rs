//! Duplicate sets from the sorted ends (Picard `generateDuplicateIndexes`): pairs with equal
//! (library, both ends' references and coordinates, orientation) are one set whose best score (the
//! first in sort order on ties) is kept; fragments with equal (library, reference, coordinate,
//! orientation) are duplicates if any of them is a pair's end, else all but the best.
//!
//! Sets are independent, so the sorted lists are cut at set boundaries into parts processed on all
//! cores; each part returns its duplicate indices and counts, merged afterwards.

use super::ends::{Fragment, Pair};
use super::optical::{self, Spot};
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Optical-duplicate settings.
#[derive(Clone, Copy, Debug)]
pub struct OpticalOptions {
    /// Look for optical duplicates at all (`READ_NAME_REGEX` not null).
    pub enabled: bool,
    /// OPTICAL_DUPLICATE_PIXEL_DISTANCE.
    pub distance: i32,
    /// MAX_OPTICAL_DUPLICATE_SET_SIZE.
    pub max_set: u64,
}

/// What the duplicate sets found.
#[derive(Default, Debug)]
pub struct Found {
    /// File indices of duplicate records (unsorted until [`Found::finish`]).
    pub duplicates: Vec<u64>,
    /// Optical duplicates (pairs) per library id.
    pub optical_by_library: BTreeMap<u16, u64>,
    /// Picard's `all_sets` histogram: set size -> number of pair sets.
    pub all_sets: BTreeMap<u64, u64>,
    /// `optical_sets`: optical duplicates + 1 -> sets.
    pub optical_sets: BTreeMap<u64, u64>,
    /// `non_optical_sets`: set size - optical duplicates -> sets.
    pub non_optical_sets: BTreeMap<u64, u64>,
}

fn add(m: &mut BTreeMap<u64, u64>, k: u64, v: u64) {
    *m.entry(k).or_default() += v;
}

impl Found {
    /// Adds `o`'s duplicates and counts.
    pub fn merge(mut self, o: Found) -> Found {
        self.duplicates.extend(o.duplicates);
        for (k, v) in o.optical_by_library {
            *self.optical_by_library.entry(k).or_default() += v;
        }
        for (a, b) in [
            (&mut self.all_sets, o.all_sets),
            (&mut self.optical_sets, o.optical_sets),
            (&mut self.non_optical_sets, o.non_optical_sets),
        ] {
            for (k, v) in b {
                add(a, k, v);
            }
        }
        self
    }

    /// Sorts the duplicate indices.
    pub fn finish(mut self) -> Found {
        self.duplicates.par_sort_unstable();
        self
    }
}

/// Cuts `v` (sorted) into about `parts` slices at boundaries where `same` is false.
fn split<T>(v: &[T], parts: usize, same: impl Fn(&T, &T) -> bool) -> Vec<&[T]> {
    let mut out = Vec::new();
    let step = (v.len() / parts.max(1)).max(1 << 14);
    let mut start = 0;
    while start < v.len() {
        let mut end = (start + step).min(v.len());
        while end < v.len() && same(&v[end - 1], &v[end]) {
            end += 1;
        }
        out.push(&v[start..end]);
        start = end;
    }
    out
}

pub(crate) fn same_pair_set(a: &Pair, b: &Pair) -> bool {
    (a.library, a.ref1, a.coord1, a.orientation, a.ref2, a.coord2)
        == (b.library, b.ref1, b.coord1, b.orientation, b.ref2, b.coord2)
}

pub(crate) fn same_fragment_set(a: &Fragment, b: &Fragment) -> bool {
    (a.library, a.reference, a.coordinate, a.orientation)
        == (b.library, b.reference, b.coordinate, b.orientation)
}

/// Index of the first highest score (Picard: `score > maxScore || best == null`).
fn best<T>(set: &[T], score: impl Fn(&T) -> i16) -> usize {
    let mut b = 0;
    for (i, e) in set.iter().enumerate().skip(1) {
        if score(e) > score(&set[b]) {
            b = i;
        }
    }
    b
}

/// Duplicate sets of sorted `pairs` and `fragments`, on all cores of the current rayon pool.
pub fn find(pairs: &[Pair], fragments: &[Fragment], opt: OpticalOptions, parts: usize) -> Found {
    let p = split(pairs, parts, same_pair_set)
        .into_par_iter()
        .map(|part| pair_part(part, opt))
        .reduce(Found::default, Found::merge);
    let f = split(fragments, parts, same_fragment_set)
        .into_par_iter()
        .map(fragment_part)
        .reduce(Found::default, Found::merge);
    p.merge(f).finish()
}

fn pair_part(part: &[Pair], opt: OpticalOptions) -> Found {
    let mut found = Found::default();
    let (mut spots, mut flags) = (Vec::new(), Vec::new());
    let mut start = 0;
    while start < part.len() {
        let end = start
            + part[start..]
                .iter()
                .take_while(|p| same_pair_set(&part[start], p))
                .count();
        let set = &part[start..end];
        start = end;
        if set.len() == 1 {
            add(&mut found.all_sets, 1, 1);
            add(&mut found.non_optical_sets, 1, 1);
            continue;
        }
        let b = best(set, |p| p.score);
        if opt.enabled {
            track_optical(set, b, opt, &mut spots, &mut flags, &mut found);
        }
        for (i, p) in set.iter().enumerate() {
            if i != b {
                found.duplicates.push(p.index1);
                if p.index2 != p.index1 {
                    found.duplicates.push(p.index2);
                }
            }
        }
    }
    found
}

/// Picard `trackOpticalDuplicates`: FR and RF ends (by read 1 then read 2) are looked at separately
/// when both occur; counts go to the library of each sub-list's first element and the histograms.
fn track_optical(
    set: &[Pair],
    best: usize,
    opt: OpticalOptions,
    spots: &mut Vec<Spot>,
    flags: &mut Vec<bool>,
    found: &mut Found,
) {
    use super::ends::orientation::{FR, RF};
    let has = |o| set.iter().any(|p| p.optical_orientation == o);
    let groups: Vec<Vec<usize>> = if has(FR) && has(RF) {
        [FR, RF]
            .iter()
            .map(|&o| {
                (0..set.len())
                    .filter(|&i| set[i].optical_orientation == o)
                    .collect()
            })
            .collect()
    } else {
        vec![(0..set.len()).collect()]
    };
    let mut total = 0u64;
    for g in groups {
        spots.clear();
        spots.extend(g.iter().map(|&i| Spot {
            read_group: set[i].read_group,
            tile: set[i].tile,
            x: set[i].x,
            y: set[i].y,
        }));
        let keeper = g.iter().position(|&i| i == best);
        optical::find(spots, keeper, opt.distance, opt.max_set, flags);
        let n = flags.iter().filter(|&&f| f).count() as u64;
        if n > 0 {
            *found
                .optical_by_library
                .entry(set[g[0]].library)
                .or_default() += n;
        }
        total += n;
    }
    let size = set.len() as u64;
    add(&mut found.all_sets, size, 1);
    if size > total {
        add(&mut found.non_optical_sets, size - total, 1);
    }
    if total > 0 {
        add(&mut found.optical_sets, total + 1, 1);
    }
}

fn fragment_part(part: &[Fragment]) -> Found {
    let mut found = Found::default();
    let mut start = 0;
    while start < part.len() {
        let end = start
            + part[start..]
                .iter()
                .take_while(|f| same_fragment_set(&part[start], f))
                .count();
        let set = &part[start..end];
        start = end;
        if set.len() < 2 {
            continue;
        }
        if set.iter().any(|f| f.paired) {
            found
                .duplicates
                .extend(set.iter().filter(|f| !f.paired).map(|f| f.index));
        } else {
            let b = best(set, |f| f.score);
            found.duplicates.extend(
                set.iter()
                    .enumerate()
                    .filter(|&(i, _)| i != b)
                    .map(|(_, f)| f.index),
            );
        }
    }
    found
}
