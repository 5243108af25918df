//! `sortase markdup` of coordinate-sorted input (Picard MarkDuplicates' algorithm) as serialisable
//! tasks whose finished output and metrics file are byte-identical to [`MarkdupJob::run`] with
//! the same options (issue 29).
//!
//! The one-machine engine (crates/markdup/src/picard.rs) gives every record its index in the file
//! and keeps it in every read end; the ends' sort order ends in that index, so it is total, and
//! which end of a duplicate set is kept (the first best score in that order) and every optical
//! decision follow from the ends alone. The tasks give each end an index in the same order
//! without knowing how many records come before their range: `range << 40 | position`
//! ([`range_base`]; `range` is the planned range's number, which grows with the offset, and a
//! range holds fewer than 2^40 records), so the sets, their order and the kept ends are the one
//! machine's. Only the messages need the record's number in the file: the driver adds the
//! records of the ranges before. The stages:
//!
//! 1. [`PmMapTask`]: one planned byte range, which proves its end as samblaster's map task does (a
//!    planned start that is no record's start is read past, to the next planned start that is):
//!    its records through the engine's collector: every primary mapped record's fragment end, the
//!    pairs whose two ends the range holds (paired as the one machine pairs them), and the ends
//!    whose mates it does not hold; the library counts of the metrics; the range's first and last
//!    coordinates (the driver checks the order across ranges); the lengths of its records as its
//!    block [`Cutting`]. Fragments and pairs are written partitioned by a hash of their duplicate
//!    key, the waiting ends and the name hashes of the ends paired or replaced within the range by
//!    a hash of their read name, into one file. The driver keeps the ranges on the chain the map
//!    tasks proved, from the first to the end of the file.
//! 2. [`PmJoinTask`]: one read-name partition: the waiting ends of every range, in file order,
//!    paired as the one machine pairs them; the pairs written partitioned by duplicate key.
//! 3. [`PmReduceTask`]: one duplicate-key partition: its fragments and pairs (from the map and
//!    the join tasks) sorted and cut into duplicate sets by the engine's code (optical duplicates
//!    included): the duplicates' indices, split by range, and the partition's histograms.
//! 4. `markdup.encode` ([`MdEncodeTask`], shared): the records from one BGZF block start to the
//!    next, 0x400 set on the duplicates and cleared elsewhere (as Picard), encoded into the blocks
//!    the one-machine writer writes; the duplicates counted per library.
//!
//! The finish is the parallel one of a sort ([`sortase_exec::assemble`]); the driver writes the
//! metrics file from the map tasks' counts, the encode tasks' duplicate counts and the reduce
//! tasks' histograms.
//!
//! Memory: a map task holds its range's ends (a range has `task_memory` bytes of records, its
//! ends a fraction of that); a join or reduce task holds one partition, and there are enough
//! partitions for `task_memory` to hold one ([`BYTES_PER_RECORD`] per record of the input, whose
//! records the plan estimates from the mean length of the first few thousand, a quarter more). A
//! partition is a set of duplicate keys, so one duplicate set larger than `task_memory` is held
//! whole, as the one machine holds it.
//!
//! Pairing across ranges: an end whose mate is in another range is joined by read name as the
//! one machine joins it. A read name with more than two primary ends (not a valid pair) is paired
//! within each range first, so the one machine may pair such ends differently; the job refuses
//! them instead: every map task also writes, into the name's partition, the name hash of every
//! pair it formed and every end it replaced ([`picard::Stretch::settled`]), and a join task
//! reports a name with an end still waiting, ends in more than one range and more than two of
//! them (`ambiguous`); the driver fails ("... has more than two primary mapped records named
//! X; run `sortase markdup` on one machine") before any output is written. A hash collision
//! can only add a false alarm. Names whose ends the one machine pairs alike (all in one range,
//! or all paired within their ranges) pass.

use super::query::{
    checked_encodes, output_path, partition, plan_common, walk_proved, Cutting, EncodeRange,
    FileSlice, MapSpan, MdEncodeOutput, MdEncodeTask, RangePlan, RecordMarks, ReduceFile, Sizing,
};
use crate::job::{MarkdupJob, MarkdupReport, Mode};
use crate::picard::chunks::{self, Found, OpticalOptions};
use crate::picard::ends::{Fragment, Pair, RecordEnd};
use crate::picard::metrics::LibraryCounts;
use crate::picard::name::{Location, NameParser};
use crate::picard::spill::Spillable;
use crate::picard::{self, order_key, Collector, Libraries, Options, OrderError, Outcome, Pending};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bam::BamError;
use sortase_exec::assemble::{self, Layout};
use sortase_exec::error::{bail_argument, Error, ErrorKind, Result};
use sortase_exec::parts::{complete, remove_work_dir, write_sections};
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{ByteRange, DynTask, TaskError};
use sortase_exec::wire::HeaderData;
use sortase_index::range::{RangeStream, RecordRange};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Memory a join or reduce task needs per record of its partition (a fragment end, half a pair,
/// sorting slack).
pub const BYTES_PER_RECORD: u64 = 96;

/// The index of the first record of planned range `range` (of a BAM input): indices grow with
/// the offset, and a range's records follow its first's.
pub fn range_base(range: usize) -> u64 {
    (range as u64) << 40
}

/// A distributed duplicate marking of coordinate-sorted BAM input, planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PicardPlan {
    #[serde(flatten)]
    base: RangePlan,
    /// The input header's `@RG` lines.
    rg_lines: String,
}

/// A task of a distributed Picard-mode markdup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PicardTask {
    /// Stage 1.
    Map(PmMapTask),
    /// Stage 2.
    Join(PmJoinTask),
    /// Stage 3.
    Reduce(PmReduceTask),
    /// Stage 4.
    Encode(MdEncodeTask),
}

impl PicardTask {
    /// The stage's task as a task of any kind (what a driver sends).
    pub fn into_task(self) -> Box<dyn DynTask> {
        match self {
            PicardTask::Map(t) => Box::new(t),
            PicardTask::Join(t) => Box::new(t),
            PicardTask::Reduce(t) => Box::new(t),
            PicardTask::Encode(t) => Box::new(t),
        }
    }
}

/// [`super::query::MarkdupTasks::plan_coordinate_tasks`].
pub(crate) fn plan(
    job: &MarkdupJob,
    rt: &Runtime,
    task_memory: usize,
    reduce_tasks: Option<usize>,
) -> anyhow::Result<PicardPlan> {
    let sizing = Sizing {
        task_memory,
        reduce_tasks,
        bytes_per_record: BYTES_PER_RECORD,
        level: job
            .output
            .compression_level(sortase_exec::options::DEFAULT_LEVEL),
    };
    let (base, input_header) = plan_common(job, rt, sizing, |mode, _| {
        if mode != Mode::Coordinate {
            bail_argument!(
                "{}: not coordinate-sorted (Picard mode): plan it with MarkdupJob::plan_tasks",
                job.input
            );
        }
        let regex = job.picard.read_name_regex.as_deref();
        if let Err(e) = NameParser::new(regex) {
            bail_argument!("--read-name-regex {regex:?}: {e}");
        }
        Ok(())
    })?;
    Ok(PicardPlan {
        base,
        rg_lines: rg_lines(&input_header),
    })
}

/// The `@RG` lines of `header`'s text (the libraries).
fn rg_lines(header: &sortase_bam::Header) -> String {
    header
        .text()
        .lines()
        .filter(|l| l.starts_with("@RG\t"))
        .flat_map(|l| [l, "\n"])
        .collect()
}

// ------------------------------------------------------------------------------ wire formats

/// Library counts of the metrics as a task returns them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibCounts {
    /// A record of the library was read.
    pub seen: bool,
    /// Unpaired examined, pair ends examined, secondary or supplementary, unmapped.
    pub reads: [u64; 4],
}

/// A record out of coordinate order, as a map task found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderFault {
    /// 1-based record number in the range (the driver adds the records of the ranges before).
    pub record: u64,
    /// Its read name.
    pub name: String,
    /// Its (reference, 0-based position).
    pub at: (i32, i32),
    /// The previous record's.
    pub after: (i32, i32),
}

/// Bytes of a waiting end's fixed part (after its name's length and bytes).
const WAITING_FIXED: usize = 2 + 4 + 4 + 1 + 4 + 2 + 2 + 2 + 2 + 2 + 1 + 8;

fn encode_waiting(name: &[u8], e: &RecordEnd, index: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(&e.library.to_le_bytes());
    out.extend_from_slice(&e.reference.to_le_bytes());
    out.extend_from_slice(&e.coordinate.to_le_bytes());
    out.push(u8::from(e.reverse));
    out.extend_from_slice(&e.mate_reference.to_le_bytes());
    out.extend_from_slice(&e.score.to_le_bytes());
    for v in [e.location.tile, e.location.x, e.location.y, e.read_group] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(u8::from(e.first_of_pair));
    out.extend_from_slice(&index.to_le_bytes());
}

fn take<const N: usize>(b: &[u8], at: &mut usize) -> [u8; N] {
    let v = b[*at..*at + N].try_into().expect("N bytes");
    *at += N;
    v
}

/// The waiting ends of `b`: (name, end, file index).
fn decode_waiting(b: &[u8], what: &Path) -> anyhow::Result<Vec<(Vec<u8>, RecordEnd, u64)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let bad = || anyhow::anyhow!("{}: a truncated read end", what.display());
        if at + 2 > b.len() {
            return Err(bad());
        }
        let n = u16::from_le_bytes(take(b, &mut at)) as usize;
        if at + n + WAITING_FIXED > b.len() {
            return Err(bad());
        }
        let name = b[at..at + n].to_vec();
        at += n;
        let library = u16::from_le_bytes(take(b, &mut at));
        let reference = i32::from_le_bytes(take(b, &mut at));
        let coordinate = i32::from_le_bytes(take(b, &mut at));
        let reverse = take::<1>(b, &mut at)[0] != 0;
        let mate_reference = i32::from_le_bytes(take(b, &mut at));
        let score = i16::from_le_bytes(take(b, &mut at));
        let [tile, x, y, read_group] = [0; 4].map(|_| i16::from_le_bytes(take(b, &mut at)));
        let first_of_pair = take::<1>(b, &mut at)[0] != 0;
        let index = u64::from_le_bytes(take(b, &mut at));
        let e = RecordEnd {
            library,
            reference,
            coordinate,
            reverse,
            mate_reference,
            score,
            location: Location { tile, x, y },
            read_group,
            first_of_pair,
        };
        out.push((name, e, index));
    }
    Ok(out)
}

/// The partitioning key of a read name's [`picard::name_hash`].
fn name_key(h: u64) -> u128 {
    u128::from(h) | (u128::from(h.rotate_left(29)) << 64)
}

fn fragment_partition(f: &Fragment, n: usize) -> usize {
    let key = (u128::from(f.library) << 72)
        | (u128::from(f.orientation) << 64)
        | (u128::from(f.reference as u32) << 32)
        | u128::from(f.coordinate as u32);
    partition(key, n)
}

fn pair_partition(p: &Pair, n: usize) -> usize {
    let a = (u64::from(p.ref1 as u32) << 32) | u64::from(p.coord1 as u32);
    let b = (u64::from(p.ref2 as u32) << 32) | u64::from(p.coord2 as u32);
    let c = (u64::from(p.library) << 8) | u64::from(p.orientation);
    let key = (u128::from(a ^ c.rotate_left(40)) << 64) | u128::from(b);
    partition(key, n)
}

fn encode_all<T: Spillable>(items: &[T], parts: &mut [Vec<u8>], which: impl Fn(&T) -> usize) {
    for e in items {
        e.encode(&mut parts[which(e)]);
    }
}

fn decode_all<T: Spillable>(b: &[u8], what: &Path, out: &mut Vec<T>) -> anyhow::Result<()> {
    if !b.len().is_multiple_of(T::SIZE) {
        bail!("{}: a partition of {} bytes", what.display(), b.len());
    }
    out.extend(b.chunks_exact(T::SIZE).map(T::decode));
    Ok(())
}

fn slices(path: &Path, offsets: &[u64], range: std::ops::Range<usize>) -> Vec<FileSlice> {
    range.map(|i| FileSlice::nth(path, offsets, i)).collect()
}

// --------------------------------------------------------------------------------- stage 1: map

/// Stage 1: one planned range's read ends, partitioned; it proves the range's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmMapTask {
    /// The input BAM.
    pub input: PathBuf,
    /// References in its header.
    pub n_ref: usize,
    /// The header's `@RG` lines (the libraries).
    pub rg_lines: String,
    /// `--read-name-regex`.
    pub read_name_regex: Option<String>,
    /// Where it reads.
    #[serde(flatten)]
    pub span: MapSpan,
    /// Partitions (join and reduce tasks).
    pub partitions: usize,
    /// The file it writes.
    pub path: PathBuf,
}

/// What a [`PmMapTask`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmMapOutput {
    /// The range's number (a BAM's: among the planned ranges).
    pub part: usize,
    /// Ranges.
    pub parts: usize,
    /// The index of its first record ([`range_base`]; an AGD run's: its number in the file).
    pub base: u64,
    /// Virtual offset of the range's first record.
    pub start: u64,
    /// Where it proved to end.
    pub end: Option<u64>,
    /// How its records fall into blocks.
    pub cutting: Cutting,
    /// Per library id, the counts of the metrics.
    pub counts: Vec<LibCounts>,
    /// Its first record's coordinate ([`order_key`]) and read name (`None`: no records).
    pub first: Option<((i32, i32), String)>,
    /// Its last record's coordinate.
    pub last: Option<(i32, i32)>,
    /// The first record out of coordinate order within the range (the task stopped there).
    pub order: Option<OrderFault>,
    /// Pairs formed within the range.
    pub pairs_formed: u64,
    /// Its file: fragments, pairs, waiting ends and the name hashes of the ends paired or
    /// replaced within the range ([`picard::Stretch::settled`]), each in `partitions` sections.
    pub path: PathBuf,
    /// Byte offset of every section, and the end (`4 * partitions + 1` entries).
    pub offsets: Vec<u64>,
    /// Reading failed (a range starting at a false boundary may; it matters only if the range
    /// is on the proved chain).
    #[serde(default)]
    pub error: Option<TaskError>,
}

fn options(regex: Option<&str>, job: Option<&MarkdupJob>) -> anyhow::Result<Options> {
    let names = NameParser::new(regex)
        .map_err(|e| Error::argument(format!("--read-name-regex {regex:?}: {e}")))?;
    let c = job.map(|j| j.picard.clone()).unwrap_or_default();
    Ok(Options {
        names,
        optical_distance: c.optical_distance,
        max_optical_set: c.max_optical_set,
    })
}

/// Where a map task's records are and what it writes (for [`map_ends`]).
pub struct EndsMap<'a> {
    /// The input's name in messages.
    pub input_name: &'a str,
    /// The header's `@RG` lines (the libraries).
    pub rg_lines: &'a str,
    /// Picard's read-name regex (`None`: its default).
    pub read_name_regex: Option<&'a str>,
    /// The task's range, of `parts`.
    pub part: usize,
    /// The ranges of the job.
    pub parts: usize,
    /// The index of the range's first record (its ends carry `base` + their position).
    pub base: u64,
    /// The records of the range, where they are known (an AGD run's; checked).
    pub records: Option<u64>,
    /// The partitions the ends are written in.
    pub partitions: usize,
    /// The file the map task writes.
    pub path: &'a Path,
    /// Whether to give the records' block cutting (a BAM's), else their count only.
    pub cutting: bool,
}

/// The map stage of Picard's mode over any record source (`next`: the records in file order,
/// the first with file index `m.base`): the read ends collected and written partitioned.
pub fn map_ends(
    rt: &Runtime,
    m: &EndsMap<'_>,
    next: &mut super::query::Batches<'_>,
) -> anyhow::Result<PmMapOutput> {
    let libs = Libraries::from_header(m.rg_lines);
    let n_libs = libs.names.len();
    let opts = options(m.read_name_regex, None)?;
    let mut collector = Collector::starting_at(libs, opts, m.base);
    let mut lengths: Vec<u32> = Vec::new();
    let (mut first, mut last, mut order) = (None, None, None);
    while let Some(batch) = next()? {
        rt.check_cancelled()?;
        if batch.is_empty() {
            continue;
        }
        if first.is_none() {
            let r = batch.record(0);
            let name = String::from_utf8_lossy(r.read_name()).into_owned();
            first = Some((order_key(&r), name));
        }
        last = Some(order_key(&batch.record(batch.len() - 1)));
        if m.cutting {
            lengths.extend((0..batch.len()).map(|i| batch.raw(i).len() as u32));
        }
        if let Err(e) = rt.install(|| collector.push(&batch)) {
            let OrderError {
                record,
                name,
                at,
                after,
            } = e;
            order = Some(OrderFault {
                record: record - m.base,
                name,
                at,
                after,
            });
            break;
        }
    }
    rt.check_cancelled()?;
    let read = collector.records() - m.base;
    let p = m.partitions.max(1);
    let mut sections = vec![Vec::new(); 4 * p];
    let mut pairs_formed = 0;
    let mut counts = vec![LibCounts::default(); n_libs];
    if order.is_none() {
        if m.records.is_some_and(|n| n != read) {
            bail!(Error::new(
                ErrorKind::Internal,
                format!(
                    "{}: map task {} read {read} records of {:?}",
                    m.input_name, m.part, m.records
                )
            ));
        }
        let stretch = collector.into_stretch();
        let (frags, rest) = sections.split_at_mut(p);
        let (pairs, rest) = rest.split_at_mut(p);
        let (waiting, settled) = rest.split_at_mut(p);
        encode_all(&stretch.fragments, frags, |f| fragment_partition(f, p));
        drop(stretch.fragments);
        encode_all(&stretch.pairs, pairs, |q| pair_partition(q, p));
        drop(stretch.pairs);
        for (n, e, i) in &stretch.waiting {
            let key = name_key(picard::name_hash(n));
            encode_waiting(n, e, *i, &mut waiting[partition(key, p)]);
        }
        for h in &stretch.settled {
            settled[partition(name_key(*h), p)].extend_from_slice(&h.to_le_bytes());
        }
        pairs_formed = stretch.pairs_formed;
        for (c, (seen, l)) in counts.iter_mut().zip(&stretch.counts) {
            c.seen = *seen;
            c.reads = [
                l.unpaired_examined,
                l.pair_ends_examined,
                l.secondary_or_supplementary,
                l.unmapped,
            ];
        }
    }
    let offsets = write_sections(m.path, &sections)?;
    let cutting = if m.cutting {
        Cutting::of(&lengths)
    } else {
        Cutting {
            records: m.records.unwrap_or(read),
            ..Cutting::default()
        }
    };
    Ok(PmMapOutput {
        part: m.part,
        parts: m.parts,
        base: m.base,
        start: 0,
        end: None,
        cutting,
        counts,
        first,
        last,
        order,
        pairs_formed,
        path: m.path.to_path_buf(),
        offsets,
        error: None,
    })
}

impl PmMapTask {
    /// Collects the range's read ends and writes them partitioned. Where the planned end proves
    /// not to be a record's start, the range runs to the next planned start that is; a range
    /// that cannot be read (it may start at a false boundary) reports the error in its output
    /// and writes empty sections.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<PmMapOutput> {
        let read = |end| {
            let read_failed = std::cell::Cell::new(false);
            match self.map(rt, end, &read_failed) {
                Ok(out) => Ok(Ok(out)),
                Err(e) if read_failed.get() => Ok(Err(e)),
                Err(e) => {
                    rt.check_cancelled()?;
                    Err(e)
                }
            }
        };
        self.span.prove_end(rt, read, |end, e| {
            let sections = vec![Vec::new(); 4 * self.partitions.max(1)];
            let offsets = write_sections(&self.path, &sections)?;
            Ok(PmMapOutput {
                part: self.span.part,
                parts: self.span.parts,
                base: range_base(self.span.part),
                start: self.span.start,
                end,
                cutting: Cutting::default(),
                counts: Vec::new(),
                first: None,
                last: None,
                order: None,
                pairs_formed: 0,
                path: self.path.clone(),
                offsets,
                error: Some(TaskError::from(&Error::from(e))),
            })
        })
    }

    /// The range ending at `end` through [`map_ends`]; `read_failed` tells a failure to read it.
    fn map(
        &self,
        rt: &Runtime,
        end: Option<u64>,
        read_failed: &std::cell::Cell<bool>,
    ) -> anyhow::Result<PmMapOutput> {
        let name = || self.input.display().to_string();
        let range = RecordRange {
            start: self.span.start,
            end: end.unwrap_or(u64::MAX),
        };
        let failed = |e: BamError| {
            read_failed.set(true);
            anyhow::Error::from(e).context(name())
        };
        let mut stream = RangeStream::open(&self.input, &range, self.n_ref).map_err(failed)?;
        let input_name = name();
        let m = EndsMap {
            input_name: &input_name,
            rg_lines: &self.rg_lines,
            read_name_regex: self.read_name_regex.as_deref(),
            part: self.span.part,
            parts: self.span.parts,
            base: range_base(self.span.part),
            records: None,
            partitions: self.partitions,
            path: &self.path,
            cutting: true,
        };
        let out = map_ends(rt, &m, &mut || stream.next_batch().map_err(failed))?;
        Ok(PmMapOutput {
            start: self.span.start,
            end,
            ..out
        })
    }
}

// -------------------------------------------------------------------------------- stage 2: join

/// Stage 2: one read-name partition of the ends whose mates were in other ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmJoinTask {
    /// The partition.
    pub part: usize,
    /// Partitions.
    pub parts: usize,
    /// Every range's waiting ends of the partition, in range order.
    pub inputs: Vec<FileSlice>,
    /// Every range's name hashes of the partition's ends paired or replaced within the range,
    /// in range order.
    pub settled: Vec<FileSlice>,
    /// The pairs it writes, partitioned by duplicate key (`parts` sections).
    pub path: PathBuf,
}

/// What a [`PmJoinTask`] formed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmJoinOutput {
    /// The partition.
    pub part: usize,
    /// Partitions.
    pub parts: usize,
    /// Pairs formed.
    pub pairs_formed: u64,
    /// The first read name (in file order) whose ends the one machine may pair otherwise (more
    /// than two primary ends, in more than one range; see the module documentation): the job
    /// fails.
    pub ambiguous: Option<String>,
    /// Its file.
    pub path: PathBuf,
    /// Byte offset of every duplicate-key partition in it, and the end.
    pub offsets: Vec<u64>,
}

impl PmJoinTask {
    /// Pairs the partition's waiting ends in file order.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<PmJoinOutput> {
        let mut ends = Vec::new();
        let mut starts = vec![0];
        for s in &self.inputs {
            rt.check_cancelled()?;
            ends.extend(decode_waiting(&s.read()?, &s.path)?);
            starts.push(ends.len());
        }
        let mut settled = Vec::with_capacity(self.settled.len());
        for s in &self.settled {
            rt.check_cancelled()?;
            let b = s.read()?;
            if !b.len().is_multiple_of(8) {
                bail!(
                    "{}: a name-hash section of {} bytes",
                    s.path.display(),
                    b.len()
                );
            }
            settled.push(b);
        }
        let ambiguous = ambiguous(&ends, &starts, &settled)
            .map(|i| String::from_utf8_lossy(&ends[i].0).into_owned());
        drop(settled);
        ends.sort_unstable_by_key(|w| w.2);
        let p = self.parts.max(1);
        let mut sections = vec![Vec::new(); p];
        let mut pending = Pending::default();
        let mut formed = 0;
        for (name, e, index) in &ends {
            if let Some(pair) = pending.add(name, e, *index) {
                pair.encode(&mut sections[pair_partition(&pair, p)]);
                formed += 1;
            }
        }
        drop(ends);
        let offsets = write_sections(&self.path, &sections)?;
        Ok(PmJoinOutput {
            part: self.part,
            parts: self.parts,
            pairs_formed: formed,
            ambiguous,
            path: self.path.clone(),
            offsets,
        })
    }
}

/// A read name of waiting ends in [`ambiguous`].
struct Waiting {
    /// Its first end's position in `ends`.
    first: usize,
    /// Its ends.
    ends: usize,
    /// The first and last ranges that held an end of the name.
    ranges: (usize, usize),
    /// A range paired or replaced an end of the name.
    settled: bool,
    /// The next name of the same hash (`usize::MAX`: none).
    next: usize,
}

/// The position in `ends` (every range's waiting ends in file order, range `r`'s from
/// `starts[r]`) of the first end of the first read name whose ends the one machine may pair
/// otherwise than the ranges and the join do. Every end of a stretch that waited for a mate is
/// paired, replaced (`settled[r]`, by name hash) or still waiting, so such a name is one with
/// an end still waiting and ends in more than one range, and either more than two waiting ends
/// or a settled end (then it has at least three ends). A name whose ends all pair within their
/// ranges leaves no state across ranges, and neither does a name in one range, so the one
/// machine pairs them alike. A hash collision can only add ranges and settled ends to a name.
fn ambiguous(
    ends: &[(Vec<u8>, RecordEnd, u64)],
    starts: &[usize],
    settled: &[Vec<u8>],
) -> Option<usize> {
    let mut names: Vec<Waiting> = Vec::new();
    let mut by_hash: HashMap<u64, usize> = HashMap::new();
    let mut r = 0;
    for (i, (name, _, _)) in ends.iter().enumerate() {
        while starts[r + 1] <= i {
            r += 1;
        }
        let head = by_hash.entry(picard::name_hash(name)).or_insert(usize::MAX);
        let mut at = *head;
        while at != usize::MAX && ends[names[at].first].0 != *name {
            at = names[at].next;
        }
        if at == usize::MAX {
            names.push(Waiting {
                first: i,
                ends: 1,
                ranges: (r, r),
                settled: false,
                next: *head,
            });
            *head = names.len() - 1;
        } else {
            names[at].ends += 1;
            names[at].ranges.1 = r;
        }
    }
    for (r, b) in settled.iter().enumerate() {
        for h in b.chunks_exact(8) {
            let h = u64::from_le_bytes(h.try_into().expect("8 bytes"));
            let mut at = by_hash.get(&h).copied().unwrap_or(usize::MAX);
            while at != usize::MAX {
                let w = &mut names[at];
                w.ranges = (w.ranges.0.min(r), w.ranges.1.max(r));
                w.settled = true;
                at = w.next;
            }
        }
    }
    names
        .iter()
        .filter(|w| w.ranges.0 != w.ranges.1 && (w.settled || w.ends > 2))
        .map(|w| w.first)
        .min()
}

// ------------------------------------------------------------------------------ stage 3: reduce

/// Stage 3: one duplicate-key partition's duplicate sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmReduceTask {
    /// The partition.
    pub part: usize,
    /// Partitions.
    pub parts: usize,
    /// Every range's fragments of the partition.
    pub fragments: Vec<FileSlice>,
    /// Every range's and every join task's pairs of the partition.
    pub pairs: Vec<FileSlice>,
    /// `--read-name-regex` (`"null"`: no optical duplicates).
    pub read_name_regex: Option<String>,
    /// `--optical-distance`.
    pub optical_distance: i32,
    /// `--max-optical-set`.
    pub max_optical_set: i64,
    /// The file index of every range's first record, and the input's records.
    pub bases: Vec<u64>,
    /// The duplicates' file indices it writes.
    pub path: PathBuf,
}

/// What a [`PmReduceTask`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmReduceOutput {
    /// The partition.
    pub part: usize,
    /// Partitions.
    pub parts: usize,
    /// Duplicate records found.
    pub duplicates: u64,
    /// The file of their file indices (little-endian u64, ascending).
    pub path: PathBuf,
    /// Byte offset of each range's indices, and the end (`ranges + 1` entries).
    pub offsets: Vec<u64>,
    /// Optical duplicates (pairs) per library id.
    pub optical_by_library: BTreeMap<u16, u64>,
    /// Picard's `all_sets` histogram.
    pub all_sets: BTreeMap<u64, u64>,
    /// `optical_sets`.
    pub optical_sets: BTreeMap<u64, u64>,
    /// `non_optical_sets`.
    pub non_optical_sets: BTreeMap<u64, u64>,
}

impl ReduceFile for PmReduceOutput {
    fn number(&self) -> (usize, usize) {
        (self.part, self.parts)
    }
    fn file(&self) -> (&Path, &[u64]) {
        (&self.path, &self.offsets)
    }
}

impl PmReduceTask {
    /// Finds the partition's duplicate sets.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<PmReduceOutput> {
        let mut fragments: Vec<Fragment> = Vec::new();
        for s in &self.fragments {
            rt.check_cancelled()?;
            decode_all(&s.read()?, &s.path, &mut fragments)?;
        }
        let mut pairs: Vec<Pair> = Vec::new();
        for s in &self.pairs {
            rt.check_cancelled()?;
            decode_all(&s.read()?, &s.path, &mut pairs)?;
        }
        let names = options(self.read_name_regex.as_deref(), None)?.names;
        let opt = OpticalOptions {
            enabled: names.enabled(),
            distance: self.optical_distance,
            max_set: if self.max_optical_set < 1 {
                u64::MAX
            } else {
                self.max_optical_set as u64
            },
        };
        let threads = rt.threads();
        let found = rt.install(|| {
            use rayon::slice::ParallelSliceMut;
            fragments.par_sort_unstable();
            pairs.par_sort_unstable();
            chunks::find(&pairs, &fragments, opt, threads * 4)
        });
        drop((fragments, pairs));
        rt.check_cancelled()?;
        let mut bytes = Vec::with_capacity(found.duplicates.len() * 8);
        let mut offsets = vec![0u64];
        let dups = &found.duplicates;
        for w in self.bases.windows(2) {
            let lo = dups.partition_point(|&d| d < w[0]);
            let hi = dups.partition_point(|&d| d < w[1]);
            for d in &dups[lo..hi] {
                bytes.extend_from_slice(&d.to_le_bytes());
            }
            offsets.push(bytes.len() as u64);
        }
        if bytes.len() != dups.len() * 8 {
            bail!(Error::new(
                ErrorKind::Internal,
                format!("reduce task {}: a duplicate past the ranges", self.part)
            ));
        }
        write_sections(&self.path, &[bytes])?;
        Ok(PmReduceOutput {
            part: self.part,
            parts: self.parts,
            duplicates: dups.len() as u64,
            path: self.path.clone(),
            offsets,
            optical_by_library: found.optical_by_library,
            all_sets: found.all_sets,
            optical_sets: found.optical_sets,
            non_optical_sets: found.non_optical_sets,
        })
    }
}

// ---------------------------------------------------------------------------------- the driver

impl PicardPlan {
    /// The plan whose join and reduce stages serve the map tasks of a dataset (`agd markdup`,
    /// [`super::agd`]): `job.input` names the dataset in messages, `header` is its header.
    pub fn for_dataset(
        job: MarkdupJob,
        input: PathBuf,
        header: &sortase_bam::Header,
        work_dir: PathBuf,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Self {
        let base = RangePlan {
            job,
            input,
            header: HeaderData::of(header),
            n_ref: header.references().len(),
            ranges: Vec::new(),
            work_dir,
            level: 0,
            task_memory,
            reduce_tasks,
            // A dataset's map tasks are the facade's, which plan their own.
            partitions: 0,
        };
        Self {
            base,
            rg_lines: rg_lines(header),
        }
    }

    /// The header's `@RG` lines.
    pub fn rg_lines(&self) -> &str {
        &self.rg_lines
    }

    /// The map outputs in range order, checked ([`PicardPlan::join_tasks`]'s check).
    pub fn checked_maps<'a>(&self, maps: &'a [PmMapOutput]) -> Result<Vec<&'a PmMapOutput>> {
        self.maps(maps)
    }
}

impl PicardPlan {
    /// The planned byte ranges.
    pub fn ranges(&self) -> &[ByteRange] {
        &self.base.ranges
    }

    /// The work directory.
    pub fn work_dir(&self) -> &Path {
        &self.base.work_dir
    }

    /// Stage 1: one map task per planned range.
    pub fn map_tasks(&self) -> Vec<PicardTask> {
        self.base
            .spans()
            .map(|span| {
                let path = self.base.part_file("pmap", span.part, "ends");
                PicardTask::Map(PmMapTask {
                    input: self.base.input.clone(),
                    n_ref: self.base.n_ref,
                    rg_lines: self.rg_lines.clone(),
                    read_name_regex: self.base.job.picard.read_name_regex.clone(),
                    span,
                    partitions: self.base.partitions,
                    path,
                })
            })
            .collect()
    }

    /// The map outputs of the ranges on the chain they proved, in file order (a dataset's: of
    /// every run, in order); fails on the first error on the way: a range's, or a record out
    /// of coordinate order (the first in the file, with the one-machine job's message).
    fn maps<'a>(&self, maps: &'a [PmMapOutput]) -> Result<Vec<&'a PmMapOutput>> {
        let maps = if self.base.ranges.is_empty() {
            complete(maps, "map", |m| (m.part, m.parts))?
        } else {
            let mut chain = Vec::new();
            let proof = |m: &PmMapOutput| (m.part, m.parts, m.start, m.end);
            walk_proved(&self.base.ranges, maps, "map", proof, |m| {
                if let Some(e) = &m.error {
                    return Err(e.to_error());
                }
                chain.push(m);
                Ok(())
            })?;
            chain
        };
        let header = self.base.header.to_header();
        let mut prev: Option<(i32, i32)> = None;
        // Records of the ranges before: a record's number in the file is this plus its own.
        let mut before = 0;
        for m in &maps {
            if let (Some(after), Some((at, name))) = (prev, &m.first) {
                if *at < after {
                    let e = OrderError {
                        record: before + 1,
                        name: name.clone(),
                        at: *at,
                        after,
                    };
                    return Err(self.order_error(&header, &e));
                }
            }
            if let Some(f) = &m.order {
                let e = OrderError {
                    record: before + f.record,
                    name: f.name.clone(),
                    at: f.at,
                    after: f.after,
                };
                return Err(self.order_error(&header, &e));
            }
            prev = m.last.or(prev);
            before += m.cutting.records;
        }
        Ok(maps)
    }

    /// The join outputs in partition order, every one present; fails on a read name the one
    /// machine may pair otherwise (the first partition's).
    fn joins<'a>(&self, joins: &'a [PmJoinOutput]) -> Result<Vec<&'a PmJoinOutput>> {
        let joins = complete(joins, "join", |j| (j.part, j.parts))?;
        if let Some(name) = joins.iter().find_map(|j| j.ambiguous.as_ref()) {
            return Err(Error::new(
                ErrorKind::Format,
                format!(
                    "{}: has more than two primary mapped records named {name}; run `sortase \
                     markdup` on one machine",
                    self.base.job.input
                ),
            ));
        }
        Ok(joins)
    }

    fn order_error(&self, header: &sortase_bam::Header, e: &OrderError) -> Error {
        Error::from(crate::job::coordinate::order_error(
            header,
            &self.base.job.input,
            e,
        ))
    }

    /// Stage 2 from the map outputs: one join task per read-name partition.
    pub fn join_tasks(&self, maps: &[PmMapOutput]) -> Result<Vec<PicardTask>> {
        let maps = self.maps(maps)?;
        let p = (maps[0].offsets.len().saturating_sub(1)) / 4;
        if p == 0 || maps.iter().any(|m| m.offsets.len() != 4 * p + 1) {
            return Err(Error::argument("map outputs disagree on the partitions"));
        }
        Ok((0..p)
            .map(|j| {
                PicardTask::Join(PmJoinTask {
                    part: j,
                    parts: p,
                    inputs: maps
                        .iter()
                        .flat_map(|m| slices(&m.path, &m.offsets, 2 * p + j..2 * p + j + 1))
                        .collect(),
                    settled: maps
                        .iter()
                        .flat_map(|m| slices(&m.path, &m.offsets, 3 * p + j..3 * p + j + 1))
                        .collect(),
                    path: self.base.part_file("join", j, "pairs"),
                })
            })
            .collect())
    }

    /// Stage 3 from the map and the join outputs: one reduce task per duplicate-key partition.
    pub fn reduce_tasks(
        &self,
        maps: &[PmMapOutput],
        joins: &[PmJoinOutput],
    ) -> Result<Vec<PicardTask>> {
        let maps = self.maps(maps)?;
        let joins = self.joins(joins)?;
        let p = (maps[0].offsets.len().saturating_sub(1)) / 4;
        if joins.iter().any(|j| j.offsets.len() != p + 1) {
            return Err(Error::argument("join outputs disagree on the partitions"));
        }
        let mut bases: Vec<u64> = maps.iter().map(|m| m.base).collect();
        bases.push(maps.last().map_or(0, |m| m.base + m.cutting.records));
        let c = &self.base.job.picard;
        Ok((0..p)
            .map(|k| {
                let mut pairs: Vec<FileSlice> = maps
                    .iter()
                    .flat_map(|m| slices(&m.path, &m.offsets, p + k..p + k + 1))
                    .collect();
                pairs.extend(
                    joins
                        .iter()
                        .flat_map(|j| slices(&j.path, &j.offsets, k..k + 1)),
                );
                PicardTask::Reduce(PmReduceTask {
                    part: k,
                    parts: p,
                    fragments: maps
                        .iter()
                        .flat_map(|m| slices(&m.path, &m.offsets, k..k + 1))
                        .collect(),
                    pairs,
                    read_name_regex: c.read_name_regex.clone(),
                    optical_distance: c.optical_distance,
                    max_optical_set: c.max_optical_set,
                    bases: bases.clone(),
                    path: self.base.part_file("preduce", k, "dups"),
                })
            })
            .collect())
    }

    /// Stage 4 from the map and the reduce outputs: the encode tasks of samblaster's mode,
    /// flagging by record.
    pub fn encode_tasks(
        &self,
        maps: &[PmMapOutput],
        reduces: &[PmReduceOutput],
    ) -> Result<Vec<PicardTask>> {
        let ranges = self
            .maps(maps)?
            .iter()
            .map(|m| EncodeRange {
                cutting: &m.cutting,
                start: m.start,
                end: m.end,
                skipped: 0,
                groups: 0,
                base: m.base,
                duplicates: Vec::new(),
            })
            .collect();
        let marks = RecordMarks {
            rg_lines: self.rg_lines.clone(),
        };
        let tasks = self.base.encode_tasks(ranges, reduces, Some(marks))?;
        Ok(tasks.into_iter().map(PicardTask::Encode).collect())
    }

    /// The parallel finish's first step ([`sortase_exec::assemble`]): the output laid out from
    /// the encode tasks' sidecars, the metrics file (with `-f`/`--metrics`) written under a
    /// temporary name, the report from every stage's outputs.
    pub fn layout(
        &self,
        maps: &[PmMapOutput],
        joins: &[PmJoinOutput],
        reduces: &[PmReduceOutput],
        encodes: &[MdEncodeOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> Result<Layout> {
        self.layout_inner(maps, joins, reduces, encodes, preallocate, rt)
            .map_err(Error::from)
    }

    fn layout_inner(
        &self,
        maps: &[PmMapOutput],
        joins: &[PmJoinOutput],
        reduces: &[PmReduceOutput],
        encodes: &[MdEncodeOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> anyhow::Result<Layout> {
        let maps = self.maps(maps)?;
        let joins = self.joins(joins)?;
        let reduces = complete(reduces, "reduce", |r| (r.part, r.parts))?;
        let records: u64 = maps.iter().map(|m| m.cutting.records).sum();
        let dups: u64 = reduces.iter().map(|r| r.duplicates).sum();
        let encodes = checked_encodes(encodes, records, Some(dups))?;
        let data = output_path(&self.base.job)?;
        let libs = Libraries::from_header(&self.rg_lines);
        let mut counts = vec![(false, LibraryCounts::default()); libs.names.len()];
        for m in &maps {
            for (c, l) in counts.iter_mut().zip(&m.counts) {
                c.0 |= l.seen;
                let [a, b, s, u] = l.reads;
                c.1.merge(&LibraryCounts {
                    unpaired_examined: a,
                    pair_ends_examined: b,
                    secondary_or_supplementary: s,
                    unmapped: u,
                    ..LibraryCounts::default()
                });
            }
        }
        for e in &encodes {
            for (c, [u, p]) in counts.iter_mut().zip(&e.library_duplicates) {
                c.1.unpaired_duplicates += u;
                c.1.pair_end_duplicates += p;
            }
        }
        let found = reduces.iter().fold(Found::default(), |f, r| {
            f.merge(Found {
                duplicates: Vec::new(),
                optical_by_library: r.optical_by_library.clone(),
                all_sets: r.all_sets.clone(),
                optical_sets: r.optical_sets.clone(),
                non_optical_sets: r.non_optical_sets.clone(),
            })
        });
        let pairs = maps.iter().map(|m| m.pairs_formed).sum::<u64>()
            + joins.iter().map(|j| j.pairs_formed).sum::<u64>();
        let outcome = Outcome {
            libs,
            counts,
            found,
            records,
            pairs,
        };
        let c = &self.base.job.picard;
        let mut report = MarkdupReport {
            mode: Mode::Coordinate,
            records,
            duplicate_records: dups,
            pairs,
            outputs: vec![data.to_path_buf()],
            ..MarkdupReport::default()
        };
        report.outputs.extend(c.metrics.clone());
        let mut lay = self
            .base
            .layout_parts(data, &encodes, &report, preallocate, rt)?;
        if let Some(target) = &c.metrics {
            let title = crate::job::coordinate::metrics_title(
                &self.base.job,
                crate::job::coordinate::METRICS_TITLE,
            );
            let text = outcome.metrics_file(&[title]);
            let temp = assemble::temp_name(target, &self.base.work_dir);
            assemble::write_synced(&temp, text.as_bytes())
                .with_context(|| format!("{}: cannot write", target.display()))?;
            lay.extras.push(assemble::IndexFile {
                target: target.clone(),
                temp,
            });
        }
        Ok(lay)
    }

    /// Removes the work directory and the parallel finish's temporary files.
    pub fn abort(&self) -> Result<()> {
        assemble::remove_temps(
            self.base.job.output.path.as_deref(),
            self.base.job.picard.metrics.as_deref(),
            &self.base.work_dir,
        );
        remove_work_dir(&self.base.work_dir)
    }
}

#[cfg(test)]
mod tests;
