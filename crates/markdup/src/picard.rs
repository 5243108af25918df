//! Picard MarkDuplicates (2.27.5, SUM_OF_BASE_QUALITIES) on coordinate-sorted raw BAM records.
//!
//! Pass 1 ([`Collector`]): every primary mapped record becomes a fragment end (library, reference,
//! unclipped 5' position, strand, score, flow-cell location); ends of the same read name whose mate
//! is mapped are joined into a pair when the second one arrives (Picard keys the pending ends by
//! name and the reference the mate is on; no MC tag is needed). Per-record work (CIGAR, qualities,
//! RG lookup, name parsing) runs in parallel over each batch; only the pairing map is sequential.
//! [`Collector::finish`] sorts the ends in Picard's order and finds the duplicate sets
//! ([`chunks`]) on all cores, giving the sorted file indices of the duplicates. Pass 2 (the caller)
//! streams the input again, setting 0x400 on exactly those records (clearing it elsewhere, as
//! Picard), and counts the duplicates into [`metrics`] with [`Libraries::of`].

pub mod chunks;
pub mod ends;
pub mod metrics;
pub mod name;
pub mod optical;
pub mod spill;

use ends::{Fragment, Pair, RecordEnd};
use metrics::LibraryCounts;
use name::{Location, NameParser};
use rayon::prelude::*;
use sortase_bam::{RecordBatch, RecordRef};
use spill::Runs;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Picard's library name for records without one.
pub const UNKNOWN_LIBRARY: &str = "Unknown Library";

/// Read groups and libraries from the header (`@RG ID` -> `LB`).
#[derive(Debug, Clone)]
pub struct Libraries {
    /// Library names in name order; a library's id is its position.
    pub names: Vec<String>,
    /// Libraries named by the header's @RG lines (Picard reports them even without reads).
    pub in_header: Vec<bool>,
    by_rg: HashMap<Vec<u8>, (u16, i16)>,
    n_rg: i16,
    unknown: u16,
}

impl Libraries {
    /// From the header text's `@RG` lines.
    pub fn from_header(text: &str) -> Self {
        let mut rgs = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("@RG\t")) {
            let field = |k: &str| {
                line.split('\t')
                    .skip(1)
                    .find_map(|f| f.strip_prefix(k)?.strip_prefix(':'))
            };
            let lib = field("LB").unwrap_or(UNKNOWN_LIBRARY).to_string();
            rgs.push((field("ID").unwrap_or("").to_string(), lib));
        }
        let mut names: Vec<String> = rgs.iter().map(|(_, l)| l.clone()).collect();
        names.push(UNKNOWN_LIBRARY.into());
        names.sort();
        names.dedup();
        let id = |l: &str| names.binary_search_by(|n| n.as_str().cmp(l)).unwrap() as u16;
        let mut in_header = vec![false; names.len()];
        let mut by_rg = HashMap::new();
        for (i, (rg, lib)) in rgs.iter().enumerate() {
            in_header[id(lib) as usize] = true;
            by_rg
                .entry(rg.as_bytes().to_vec())
                .or_insert((id(lib), i as i16));
        }
        let unknown = id(UNKNOWN_LIBRARY);
        Self {
            n_rg: rgs.len() as i16,
            names,
            in_header,
            by_rg,
            unknown,
        }
    }

    /// The record's library id and read-group index (Picard: 0 without an RG tag, the number of read
    /// groups for an unknown one).
    pub fn of(&self, r: &RecordRef) -> (u16, i16) {
        match r
            .aux()
            .find(|f| f.tag() == *b"RG" && f.value_type() == b'Z')
        {
            None => (self.unknown, 0),
            Some(f) => self
                .by_rg
                .get(f.value())
                .copied()
                .unwrap_or((self.unknown, self.n_rg)),
        }
    }
}

/// Options of the algorithm.
#[derive(Debug, Clone)]
pub struct Options {
    /// Read-name parser for optical duplicates.
    pub names: NameParser,
    /// OPTICAL_DUPLICATE_PIXEL_DISTANCE.
    pub optical_distance: i32,
    /// MAX_OPTICAL_DUPLICATE_SET_SIZE (-1: no limit).
    pub max_optical_set: i64,
}

/// A record out of coordinate order.
#[derive(Debug, Clone)]
pub struct OrderError {
    /// 1-based record number.
    pub record: u64,
    /// Its read name.
    pub name: String,
    /// Its (reference, 0-based position).
    pub at: (i32, i32),
    /// The previous record's.
    pub after: (i32, i32),
}

/// Pass 1: collects read ends from batches in file order.
pub struct Collector {
    libs: Libraries,
    opts: Options,
    /// Per library id: counts of pass 1 (reads examined etc.) and whether any record had it.
    counts: Vec<(bool, LibraryCounts)>,
    fragments: Vec<Fragment>,
    pairs: Vec<Pair>,
    /// Pending first ends.
    pending: Pending,
    per_record: Vec<(u16, Option<RecordEnd>)>,
    index: u64,
    last: (i32, i32),
    spilled: Option<(Runs<Pair>, Runs<Fragment>)>,
    /// Ends per window when merging spilled runs back.
    window: usize,
    pair_count: u64,
}

/// A record's place in coordinate order: (reference, position), unmapped (`*`) last.
pub fn order_key(r: &RecordRef) -> (i32, i32) {
    match r.reference_sequence_id() {
        -1 => (i32::MAX, i32::MAX),
        id => (id, r.position()),
    }
}

impl Collector {
    /// A collector for input with `libs`.
    pub fn new(libs: Libraries, opts: Options) -> Self {
        let n = libs.names.len();
        Self {
            libs,
            opts,
            counts: vec![(false, LibraryCounts::default()); n],
            fragments: Vec::new(),
            pairs: Vec::new(),
            pending: Pending::default(),
            per_record: Vec::new(),
            index: 0,
            last: (0, i32::MIN),
            spilled: None,
            window: 0,
            pair_count: 0,
        }
    }

    /// Bytes the ends held in memory take.
    pub fn memory(&self) -> usize {
        self.fragments.capacity() * std::mem::size_of::<Fragment>()
            + self.pairs.capacity() * std::mem::size_of::<Pair>()
    }

    /// Bytes the ends collected since the last spill take (what a memory budget must cover).
    pub fn held(&self) -> usize {
        self.fragments.len() * std::mem::size_of::<Fragment>()
            + self.pairs.len() * std::mem::size_of::<Pair>()
    }

    /// Writes the ends held in memory to sorted runs in `dir` (call between batches, when
    /// [`Collector::held`] is over the budget); `budget` bytes size the windows in which
    /// [`Collector::finish`] merges the runs back.
    pub fn spill(&mut self, budget: usize, dir: &Path) -> std::io::Result<()> {
        self.window = (budget / std::mem::size_of::<Pair>()).max(1024);
        let (pairs, fragments) = self
            .spilled
            .get_or_insert_with(|| (Runs::new(dir, "pairs"), Runs::new(dir, "fragments")));
        pairs.spill(&mut self.pairs)?;
        fragments.spill(&mut self.fragments)
    }

    /// Runs written and their bytes.
    pub fn spill_stats(&self) -> (usize, u64) {
        self.spilled.as_ref().map_or((0, 0), |(p, f)| {
            (p.count() + f.count(), p.bytes() + f.bytes())
        })
    }

    fn record_end(&self, r: &RecordRef) -> (u16, Option<RecordEnd>) {
        let flag = r.flag();
        let (library, rg) = self.libs.of(r);
        if !ends::is_examined(flag) || r.reference_sequence_id() < 0 {
            return (library, None);
        }
        let reverse = flag & sortase_bam::flags::REVERSE != 0;
        let location = self.opts.names.parse(r.read_name());
        let end = RecordEnd {
            library,
            reference: r.reference_sequence_id(),
            coordinate: ends::unclipped_five_prime(r, reverse),
            reverse,
            mate_reference: if ends::has_mapped_mate(flag) {
                r.mate_reference_sequence_id()
            } else {
                -1
            },
            score: ends::score(r),
            location: location.unwrap_or(Location::NONE),
            read_group: if location.is_some() { rg } else { -1 },
            first_of_pair: flag & sortase_bam::flags::READ1 != 0,
        };
        (library, Some(end))
    }

    /// Adds a batch (records in file order); fails on a record out of coordinate order.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), OrderError> {
        let mut per_record = std::mem::take(&mut self.per_record);
        (0..batch.len())
            .into_par_iter()
            .with_min_len(256)
            .map(|i| self.record_end(&batch.record(i)))
            .collect_into_vec(&mut per_record);
        for (i, (library, end)) in per_record.iter().enumerate() {
            let r = batch.record(i);
            let at = order_key(&r);
            if at < self.last {
                return Err(OrderError {
                    record: self.index + 1,
                    name: String::from_utf8_lossy(r.read_name()).into_owned(),
                    at: (r.reference_sequence_id(), r.position()),
                    after: self.last,
                });
            }
            self.last = at;
            let c = &mut self.counts[*library as usize];
            c.0 = true;
            c.1.add_read(r.flag());
            if let Some(e) = end {
                self.add_end(&r, e);
            }
            self.index += 1;
        }
        self.per_record = per_record;
        Ok(())
    }

    fn add_end(&mut self, r: &RecordRef, e: &RecordEnd) {
        let index = self.index;
        self.fragments.push(Fragment {
            library: e.library,
            reference: e.reference,
            coordinate: e.coordinate,
            orientation: if e.reverse {
                ends::orientation::R
            } else {
                ends::orientation::F
            },
            paired: e.mate_reference != -1,
            tile: e.location.tile,
            x: e.location.x,
            y: e.location.y,
            index,
            score: e.score,
        });
        if let Some(pair) = self.pending.add(r.read_name(), e, index) {
            self.pairs.push(pair);
            self.pair_count += 1;
        }
    }

    /// A collector of a stretch of the input whose first record is record `index` of the file
    /// (a byte range of a distributed job: the ends carry their file indices).
    pub fn starting_at(libs: Libraries, opts: Options, index: u64) -> Self {
        let mut c = Self::new(libs, opts);
        c.index = index;
        c.pending = Pending::tracking();
        c
    }

    /// The stretch's ends as they stand, unsorted: its fragments, the pairs whose two ends it
    /// holds, and the ends still waiting for their mates (in file order), with the counts.
    pub fn into_stretch(mut self) -> Stretch {
        let settled = self.pending.take_settled();
        Stretch {
            counts: self.counts,
            fragments: self.fragments,
            pairs: self.pairs,
            waiting: self.pending.into_waiting(),
            settled,
            pairs_formed: self.pair_count,
        }
    }

    /// Records seen so far.
    pub fn records(&self) -> u64 {
        self.index
    }

    /// Sorts the ends and finds the duplicates in `threads * 4` chunks on the current rayon pool (the
    /// caller runs it inside its own), merging the spilled runs if there are any.
    pub fn finish(mut self, threads: usize) -> std::io::Result<Outcome> {
        self.pending = Pending::default();
        let opt = chunks::OpticalOptions {
            enabled: self.opts.names.enabled(),
            distance: self.opts.optical_distance,
            max_set: if self.opts.max_optical_set < 1 {
                u64::MAX
            } else {
                self.opts.max_optical_set as u64
            },
        };
        let found = match self.spilled.take() {
            None => {
                self.fragments.par_sort_unstable();
                self.pairs.par_sort_unstable();
                chunks::find(&self.pairs, &self.fragments, opt, threads * 4)
            }
            Some((p, f)) => {
                let window = self.window;
                let pairs = std::mem::take(&mut self.pairs);
                let fragments = std::mem::take(&mut self.fragments);
                spill::find_spilled((p, pairs), (f, fragments), opt, threads * 4, window)?
            }
        };
        Ok(Outcome {
            libs: self.libs,
            counts: self.counts,
            found,
            records: self.index,
            pairs: self.pair_count,
        })
    }
}

/// The ends a [`Collector`] of a stretch of the input gathered ([`Collector::into_stretch`]).
pub struct Stretch {
    /// Per library id: seen, counts of pass 1.
    pub counts: Vec<(bool, LibraryCounts)>,
    /// Every end's fragment.
    pub fragments: Vec<Fragment>,
    /// Pairs whose ends are both in the stretch.
    pub pairs: Vec<Pair>,
    /// Ends whose mates the stretch did not hold: (read name, end, file index), in file order.
    pub waiting: Vec<(Vec<u8>, RecordEnd, u64)>,
    /// The [`name_hash`] of every pair formed and of every end replaced in the pending map by a
    /// later end of its name waiting under the same key: with `waiting`, every end of the
    /// stretch that waited for a mate is accounted for (a pair counts for its two ends).
    pub settled: Vec<u64>,
    /// Pairs formed (`pairs.len()` before any spill).
    pub pairs_formed: u64,
}

/// Picard's pairing of ends by read name: an end whose mate is mapped waits under its name and
/// its mate's reference until an end of that name arrives on that reference (file order).
#[derive(Default)]
pub struct Pending {
    map: HashMap<Box<[u8]>, (RecordEnd, u64)>,
    key: Vec<u8>,
    /// With [`Pending::tracking`]: [`Stretch::settled`].
    settled: Option<Vec<u64>>,
}

/// FNV-1a of a read name (the same in every process).
pub fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Pending {
    /// A pairing that also keeps the [`name_hash`] of every pair formed and every end replaced
    /// ([`Stretch::settled`]).
    pub fn tracking() -> Self {
        Self {
            settled: Some(Vec::new()),
            ..Self::default()
        }
    }

    /// Adds `e` (of the record named `name`, file index `index`; its mate mapped): the pair if a
    /// first end waited for it, else it waits.
    pub fn add(&mut self, name: &[u8], e: &RecordEnd, index: u64) -> Option<Pair> {
        if e.mate_reference == -1 {
            return None;
        }
        // Looked up under this record's reference; a first end waits under its mate's.
        self.key.clear();
        self.key.extend_from_slice(name);
        self.key.extend_from_slice(&e.reference.to_le_bytes());
        if let Some((first, first_index)) = self.map.remove(&self.key[..]) {
            if let Some(s) = &mut self.settled {
                s.push(name_hash(name));
            }
            return Some(Pair::new(&first, first_index, e, index));
        }
        let n = self.key.len();
        self.key[n - 4..].copy_from_slice(&e.mate_reference.to_le_bytes());
        let replaced = self.map.insert(self.key.as_slice().into(), (*e, index));
        if let (Some(s), Some(_)) = (&mut self.settled, replaced) {
            s.push(name_hash(name));
        }
        None
    }

    /// [`Stretch::settled`] so far (empty unless [`Pending::tracking`]), taken.
    pub fn take_settled(&mut self) -> Vec<u64> {
        self.settled
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The ends still waiting: (read name, end, file index), in file order.
    pub fn into_waiting(self) -> Vec<(Vec<u8>, RecordEnd, u64)> {
        let mut v: Vec<_> = self
            .map
            .into_iter()
            .map(|(k, (e, i))| (k[..k.len() - 4].to_vec(), e, i))
            .collect();
        v.sort_unstable_by_key(|w| w.2);
        v
    }
}

/// The result of pass 1: duplicate indices (sorted) and what the metrics need.
pub struct Outcome {
    /// Libraries of the input.
    pub libs: Libraries,
    /// Per library id: seen, counts (duplicates are added in pass 2).
    pub counts: Vec<(bool, LibraryCounts)>,
    /// Duplicate sets.
    pub found: chunks::Found,
    /// Records in the input.
    pub records: u64,
    /// Pairs formed.
    pub pairs: u64,
}

impl Outcome {
    /// The metrics file text after pass 2 added duplicate counts to `counts`.
    pub fn metrics_file(&self, header: &[String]) -> String {
        metrics::write_file(header, &self.libs.table(&self.counts), &self.found)
    }
}

impl Libraries {
    /// The libraries Picard reports (seen in a record, or named by an @RG line) with their counts,
    /// by name, for [`metrics::write_file`]. `counts`: per library id, seen and counts.
    pub fn table(
        &self,
        counts: &[(bool, LibraryCounts)],
    ) -> BTreeMap<String, (u16, LibraryCounts)> {
        counts
            .iter()
            .enumerate()
            .filter(|(id, (seen, _))| *seen || self.in_header[*id])
            .map(|(id, (_, c))| (self.names[id].clone(), (id as u16, c.clone())))
            .collect()
    }
}

/// Picard's per-library counts of records whose duplicate flag another algorithm decided
/// (samblaster's on query-grouped input): each record once, with its final flag.
#[derive(Debug, Clone)]
pub struct LibraryTally {
    libs: Libraries,
    counts: Vec<(bool, LibraryCounts)>,
}

impl LibraryTally {
    /// Nothing counted yet; the libraries from the header text's `@RG` lines.
    pub fn from_header(text: &str) -> Self {
        let libs = Libraries::from_header(text);
        let counts = vec![(false, LibraryCounts::default()); libs.names.len()];
        Self { libs, counts }
    }

    /// Counts record `r` with its final flag `flag` (0x400 set on duplicates): Picard's
    /// `addReadToLibraryMetrics`, and `addDuplicateReadToMetrics` for a duplicate.
    pub fn add(&mut self, r: &RecordRef, flag: u16) {
        let (library, _) = self.libs.of(r);
        let (seen, c) = &mut self.counts[library as usize];
        *seen = true;
        c.add_read(flag);
        if flag & sortase_bam::flags::DUPLICATE != 0 {
            c.add_duplicate(flag);
        }
    }

    /// The metrics file (the header lines `header`): per library, no optical duplicates and no
    /// duplicate-set histograms (nothing here knows the sets).
    pub fn metrics_file(&self, header: &[String]) -> String {
        let table = self.libs.table(&self.counts);
        metrics::write_file(header, &table, &chunks::Found::default())
    }
}
