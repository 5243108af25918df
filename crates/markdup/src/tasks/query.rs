//! `sortase markdup` of query-grouped input (samblaster's algorithm) as serialisable tasks whose
//! finished output is byte-identical to [`MarkdupJob::run`] with the same options (issue 29).
//!
//! The stages:
//!
//! 1. [`MdMapTask`]: one planned byte range of the input. It proves the range's end at a record
//!    start (as a sort's count task: a planned start that is no record's start is read past) and
//!    names the range's first and last records. Its groups (the last one followed past the
//!    range's end while its name continues) give each signature with its ordinal (its number
//!    among the range's groups, i.e. its file order), written partitioned by the signature's
//!    hash into one file; and the lengths of the records it will write, summarised as the
//!    range's block-cutting transfer function ([`Cutting`]). Its first group is kept apart
//!    ([`HeadGroup`]): whether it is the range's own or the end of the last group of the range
//!    before (whose map task followed it) only the names at the ranges' edges tell, and the
//!    driver reads them from the map outputs; so no stage reads the input only to count it.
//! 2. [`MdReduceTask`]: one hash partition: every proved range's signatures of that partition in
//!    file order (a range's own head group first); the first occurrence of a signature is kept,
//!    every later one is a duplicate group. Writes the duplicate groups' ordinals, per range.
//! 3. [`MdEncodeTask`]: the records from one BGZF block start to the next block start that
//!    begins in a later range, flagged, encoded into the blocks the one-machine writer writes (a
//!    continued head group's records are the range before's).
//!
//! Why the bytes can match: the one-machine writer cuts BGZF blocks by htslib's rule (a record
//! starts a new block unless it fits in the open one) over the whole record stream, so where a
//! range's records fall in blocks depends on the bytes before it. The cut depends only on the
//! records' lengths, which marking does not change (flags only), and once a record starts a
//! block every later cut follows from the lengths alone; so each map task gives, for every record
//! near its range's start that could start a block, where its range then leaves the open block
//! ([`Cutting`]). The driver chains these from the header (whose block is ended) to find the
//! first record of each range that starts a block; an encode task writes from there to the next
//! such record, which may lie some ranges later. The finish is the sort's parallel finish
//! ([`sortase_exec::assemble`]): header blocks at the job's level, the parts, the EOF block.

use crate::job::marking::is_duplicate;
use crate::job::{detect_mode, MarkdupJob, MarkdupReport, Mode};
use crate::samblaster::{self, Carry, Layout as SigLayout, Options, SigSet, Verdict};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bam::{flags, BamError, RecordBatch, RecordBuf};
use sortase_bgzf::{BlockEncoder, CompressionLevel, BLOCK_DATA_MAX};
use sortase_exec::assemble::{self, Layout};
use sortase_exec::error::bail_argument;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::options::add_program;
use sortase_exec::output::{resolve_format, temp_prefix, OutFormat};
use sortase_exec::parts::{complete, create_work_dir, remove_work_dir, write_sections, PartFiles};
use sortase_exec::range_output::EncodedRange;
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{ByteRange, DynTask, TaskError};
use sortase_exec::wire::{hex, HeaderData, WorkFile};
use sortase_index::range::{plan_ranges, RangeStream, RecordRange};
use std::collections::HashMap;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes of one signature entry of a map file: the signature (16) and the group's ordinal (4).
const SIG_ENTRY: usize = 20;
/// Memory a reduce task needs per signature (the entry read and its set slot with slack).
pub const REDUCE_BYTES_PER_SIG: u64 = 48;
/// The open block's capacity (a block holds at most this many uncompressed bytes).
const MAX: u64 = BLOCK_DATA_MAX as u64;

/// A distributed duplicate marking of query-grouped BAM input, planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkdupPlan {
    #[serde(flatten)]
    base: RangePlan,
    /// The references' lengths (samblaster's signature layout).
    lengths: Vec<u64>,
}

/// A task of a distributed markdup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkdupTask {
    /// Stage 1.
    Map(MdMapTask),
    /// Stage 2.
    Reduce(MdReduceTask),
    /// Stage 3.
    Encode(MdEncodeTask),
}

/// What a [`MarkdupTask`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkdupTaskOutput {
    /// Of a [`MdMapTask`].
    Map(Box<MdMapOutput>),
    /// Of a [`MdReduceTask`].
    Reduce(MdReduceOutput),
    /// Of a [`MdEncodeTask`].
    Encode(MdEncodeOutput),
}

impl MarkdupTask {
    /// The stage's task as a task of any kind (what a driver sends).
    pub fn into_task(self) -> Box<dyn DynTask> {
        match self {
            MarkdupTask::Map(t) => Box::new(t),
            MarkdupTask::Reduce(t) => Box::new(t),
            MarkdupTask::Encode(t) => Box::new(t),
        }
    }

    /// Runs the task on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<MarkdupTaskOutput> {
        let out = self.clone().into_task().run(rt)?;
        MarkdupTaskOutput::deserialize(&out["markdup"])
            .map_err(|e| Error::new(ErrorKind::Internal, format!("markdup task output: {e}")))
    }
}

// ------------------------------------------------------------------------------------- planning

/// What both modes' plans share (each plan's serde form holds these fields, flattened): the job,
/// the input checked and cut into byte ranges, the output's header and level, the work directory,
/// the tasks' memory and the partitions of the map tasks' files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RangePlan {
    pub(crate) job: MarkdupJob,
    /// The input, absolute.
    pub(crate) input: PathBuf,
    /// The output's header (`@PG` added).
    pub(crate) header: HeaderData,
    pub(crate) n_ref: usize,
    pub(crate) ranges: Vec<ByteRange>,
    pub(crate) work_dir: PathBuf,
    /// The output's libdeflate level.
    pub(crate) level: u8,
    /// Memory of one task.
    pub(crate) task_memory: usize,
    /// Reduce tasks asked for.
    pub(crate) reduce_tasks: Option<usize>,
    /// The partitions of the map tasks' files (the join and reduce tasks), fixed when planning:
    /// as many as asked for, else one per range, more if the records estimated from the input's
    /// size and its first records' mean length would overfill a task's memory.
    pub(crate) partitions: usize,
}

/// The sizes of a mode's tasks: what `plan_common` needs to fix the partitions, and the output's
/// level as the mode's one-machine job takes it.
pub(crate) struct Sizing {
    pub(crate) task_memory: usize,
    pub(crate) reduce_tasks: Option<usize>,
    /// Memory a join or reduce task needs per record of its partition.
    pub(crate) bytes_per_record: u64,
    pub(crate) level: CompressionLevel,
}

/// Checks the job and plans the input's byte ranges (`task_memory` record bytes each) and the
/// partitions; the mode from the job or the input's `@HD` line, which `check` accepts or refuses
/// (given the input's header) before the work directory is created. Returns the plan and the
/// input's header.
pub(crate) fn plan_common(
    job: &MarkdupJob,
    rt: &Runtime,
    sizing: Sizing,
    check: impl FnOnce(Mode, &sortase_bam::Header) -> anyhow::Result<()>,
) -> anyhow::Result<(RangePlan, sortase_bam::Header)> {
    let task_memory = sizing.task_memory;
    if job.input == "-" {
        bail_argument!("markdup tasks read a BAM file, not standard input");
    }
    let format =
        sortase_exec::probe::input_format(Path::new(&job.input)).context(job.input.clone())?;
    if format != "BAM" {
        bail_argument!(
            "{}: markdup tasks read BAM only, this is {format}; convert it with `sortase view -b`",
            job.input
        );
    }
    if task_memory == 0 {
        bail_argument!("task_memory 0: give the memory of one task, e.g. 768M");
    }
    let unsupported = [
        (job.remove_duplicates, "--removeDups/-r"),
        (job.output.write_index, "--write-index"),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(on, _)| *on) {
        bail_argument!(
            "distributed markdup does not support {name} (it changes record lengths or writes \
             side files); run `sortase markdup` on one machine"
        );
    }
    let level = level_of(job);
    let Some(data) = job.output.path.clone() else {
        bail_argument!("markdup tasks need an output file (-o), not standard output");
    };
    if data.as_os_str() == "-" {
        bail_argument!("markdup tasks need an output file (-o), not standard output");
    }
    let out = resolve_format(
        job.output.format.as_deref(),
        Some(&data),
        level,
        OutFormat::Bam(level),
    )?;
    if !matches!(out, OutFormat::Bam(_)) {
        bail_argument!("markdup tasks write BAM only (the output's format is SAM or CRAM)");
    }
    let (input, file_len) =
        sortase_exec::probe::input_path_and_len(&job.input).context(job.input.clone())?;
    let estimate =
        sortase_exec::probe::estimate_record_bytes(&input, file_len).context(job.input.clone())?;
    // A map task streams its range; it holds a signature entry and a length per group and
    // record, a small share of the records: ranges of task_memory record bytes.
    let wanted = estimate.div_ceil(task_memory as u64);
    let n = wanted.clamp(1, (file_len >> 16).max(1)) as usize;
    let planned = plan_ranges(&input, n).context(job.input.clone())?;
    let mut header = planned.header.clone();
    let mode = match job.mode {
        Mode::Auto => detect_mode(&header),
        m => m,
    };
    check(mode, &header)?;
    let input_header = header.clone();
    add_program(&mut header, job.program.as_ref());
    let prefix = temp_prefix(job.temp_prefix.as_deref(), Some(&data), rt.temp_dir());
    let work_dir = create_work_dir(&prefix)?;
    let ranges = ByteRange::from_planned(&planned.ranges);
    let n_ref = header.references().len();
    let partitions = match partitions(&input, n_ref, &ranges, estimate, &sizing) {
        Ok(p) => p,
        Err(e) => {
            let _ = remove_work_dir(&work_dir);
            return Err(e.context(job.input.clone()));
        }
    };
    let plan = RangePlan {
        job: job.clone(),
        input,
        header: HeaderData::of(&header),
        n_ref,
        ranges,
        work_dir,
        level: sizing.level.libdeflate(),
        task_memory,
        reduce_tasks: sizing.reduce_tasks,
        partitions,
    };
    Ok((plan, input_header))
}

/// The partitions of the map tasks' files (reduce tasks): as many as `reduce_tasks` asks for,
/// else one per range, more if a partition of `bytes_per_record` per record would not fit in
/// `task_memory`; the records estimated from `record_bytes` (the input's, uncompressed) and the
/// first few thousand's mean length, a quarter more.
fn partitions(
    input: &Path,
    n_ref: usize,
    ranges: &[ByteRange],
    record_bytes: u64,
    sizing: &Sizing,
) -> anyhow::Result<usize> {
    let first = ranges.first().map_or(0, |r| r.start);
    let mean = mean_record_bytes(input, n_ref, first)?;
    // A quarter more records than the estimate: the first records stand for the rest.
    let records = record_bytes.div_ceil(mean) * 5 / 4;
    let by_memory =
        (records * sizing.bytes_per_record).div_ceil(sizing.task_memory as u64) as usize;
    Ok(sizing
        .reduce_tasks
        .unwrap_or(ranges.len())
        .max(by_memory)
        .max(1))
}

pub(crate) fn plan(
    job: &MarkdupJob,
    rt: &Runtime,
    task_memory: usize,
    reduce_tasks: Option<usize>,
) -> anyhow::Result<MarkdupPlan> {
    let q = &job.samblaster;
    let unsupported = [
        (q.add_mate_tags, "--addMateTags"),
        (q.discordant_file.is_some(), "-d/--discordantFile"),
        (q.splitter_file.is_some(), "-s/--splitterFile"),
        (q.unmapped_file.is_some(), "-u/--unmappedFile"),
    ];
    let mut lengths = Vec::new();
    let sizing = Sizing {
        task_memory,
        reduce_tasks,
        bytes_per_record: REDUCE_BYTES_PER_SIG,
        level: level_of(job),
    };
    let (base, _) = plan_common(job, rt, sizing, |mode, header| {
        if mode == Mode::Coordinate {
            bail_argument!(
                "{}: coordinate-sorted input (Picard mode): plan it with \
                 MarkdupJob::plan_coordinate_tasks",
                job.input
            );
        }
        if let Some((_, name)) = unsupported.iter().find(|(on, _)| *on) {
            bail_argument!(
                "distributed markdup does not support {name} (it changes record lengths or \
                 writes side files); run `sortase markdup` on one machine"
            );
        }
        lengths = header
            .references()
            .iter()
            .map(|r| u64::from(r.length))
            .collect();
        // As the one-machine job: a layout that fails is an error of the input.
        sig_layout(&lengths, job)
            .map_err(|e| Error::new(ErrorKind::Format, format!("{}: {e}", job.input)))?;
        Ok(())
    })?;
    Ok(MarkdupPlan { base, lengths })
}

impl RangePlan {
    /// The encode stage of either mode: every range's duplicates from the reduce outputs (every
    /// one present, each covering the ranges), then the block starts chained from the header's end
    /// through every range's cutting; one encode task per range that holds a block start, writing
    /// to the next one (`records`: Picard's mode).
    pub(crate) fn encode_tasks<R: ReduceFile>(
        &self,
        mut ranges: Vec<EncodeRange<'_>>,
        reduces: &[R],
        records: Option<RecordMarks>,
    ) -> Result<Vec<MdEncodeTask>> {
        let (input, n_ref, level, work_dir) = (&self.input, self.n_ref, self.level, &self.work_dir);
        let reduces = complete(reduces, "reduce", R::number)?;
        if reduces.iter().any(|r| r.file().1.len() != ranges.len() + 1) {
            return Err(Error::argument(
                "reduce outputs do not cover the map tasks' ranges",
            ));
        }
        for (r, range) in ranges.iter_mut().enumerate() {
            range.duplicates = reduces
                .iter()
                .map(|d| {
                    let (path, offsets) = d.file();
                    FileSlice::nth(path, offsets, r)
                })
                .collect();
        }
        let starts = block_starts(ranges.iter().map(|m| m.cutting));
        let n = starts.len();
        let mut tasks = Vec::with_capacity(n);
        for (t, &(r0, k0)) in starts.iter().enumerate() {
            let next = starts.get(t + 1).copied();
            let last = match next {
                Some((r1, 0)) => r1 - 1,
                Some((r1, _)) => r1,
                None => ranges.len() - 1,
            };
            let segments = (r0..=last)
                .map(|r| Segment {
                    range: r,
                    records: ranges[r].cutting.records,
                    groups: ranges[r].groups,
                    from: if r == r0 { k0 as u64 } else { 0 },
                    to: match next {
                        Some((r1, k1)) if r1 == r => k1 as u64,
                        _ => ranges[r].cutting.records,
                    },
                    duplicates: ranges[r].duplicates.clone(),
                    base: ranges[r].base,
                })
                .collect();
            tasks.push(MdEncodeTask {
                input: input.to_path_buf(),
                n_ref,
                part: t,
                parts: n,
                start: ranges[r0].start,
                read_end: ranges[last].end,
                skip: ranges[r0].skipped,
                segments,
                level,
                files: PartFiles::named(work_dir, "encode", t),
                records: records.clone(),
            });
        }
        Ok(tasks)
    }

    /// The parallel finish's layout of the encode tasks' parts as the output `data` (the plan's
    /// header and level), with the job's `report`.
    pub(crate) fn layout_parts(
        &self,
        data: &Path,
        encodes: &[&MdEncodeOutput],
        report: &MarkdupReport,
        preallocate: bool,
        rt: &Runtime,
    ) -> anyhow::Result<Layout> {
        let files: Vec<_> = encodes.iter().map(|e| (&e.files, 1)).collect();
        assemble::layout(
            &self.header.to_header(),
            CompressionLevel::from_libdeflate(self.level),
            data,
            None,
            &files,
            &self.work_dir,
            serde_json::to_value(report).context("markdup report JSON")?,
            preallocate,
            rt,
        )
    }
}

/// The mean length of the records among the first few thousand from `start` (at least 1).
fn mean_record_bytes(input: &Path, n_ref: usize, start: u64) -> anyhow::Result<u64> {
    let range = RecordRange {
        start,
        end: u64::MAX,
    };
    let mut stream = RangeStream::open(input, &range, n_ref)?;
    let (mut n, mut bytes) = (0u64, 0u64);
    while n < 4096 {
        let Some(batch) = stream.next_batch()? else {
            break;
        };
        bytes += (0..batch.len())
            .map(|i| batch.raw(i).len() as u64)
            .sum::<u64>();
        n += batch.len() as u64;
    }
    Ok(bytes.checked_div(n).unwrap_or(1).max(1))
}

/// The output's level as the one-machine job takes it.
fn level_of(job: &MarkdupJob) -> CompressionLevel {
    if job.output.uncompressed {
        CompressionLevel::STORED
    } else {
        CompressionLevel::samtools(job.output.level.unwrap_or(-1))
    }
}

/// samblaster's layout of the references (with `-a` and no references, one of length 0).
pub fn sig_layout(lengths: &[u64], job: &MarkdupJob) -> std::result::Result<SigLayout, String> {
    let q = &job.samblaster;
    let lengths = if q.accept_dups && lengths.is_empty() {
        vec![0]
    } else {
        lengths.to_vec()
    };
    SigLayout::new(&lengths, q.max_read_length).map_err(|e| e.to_string())
}

// --------------------------------------------------------------------------------- stage 1: map

/// Stage 1: one planned byte range's groups, their signatures partitioned by hash, and its
/// cutting; it proves the range's end (as a sort's count task) and names its first and last
/// records, and keeps its first group apart (the driver learns whether it continues the range
/// before only from the maps' outputs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdMapTask {
    /// The input BAM.
    pub input: PathBuf,
    /// The input as the job names it (messages).
    pub input_name: String,
    /// References in its header.
    pub n_ref: usize,
    /// Their lengths.
    pub lengths: Vec<u64>,
    /// The job (samblaster's options).
    pub job: Box<MarkdupJob>,
    /// Where it reads.
    #[serde(flatten)]
    pub span: MapSpan,
    /// Hash partitions (reduce tasks).
    pub partitions: usize,
    /// The signature file it writes.
    pub path: PathBuf,
}

/// A map task's first read-name group, kept apart: it is the range's first group, or the end of
/// the range before's last one (which that range's map task followed), as the names of the two
/// ranges' edges tell the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HeadGroup {
    /// Its records (those past the range's end included, if it is the range's last group too).
    pub records: u64,
    /// Its signature (16 bytes, little-endian; empty: no duplicate candidate).
    #[serde(with = "hex")]
    pub signature: Vec<u8>,
    /// The one-machine job's error for it, raised only if it is the range's own group.
    pub error: Option<TaskError>,
}

/// Where a range leaves the open BGZF block, for every way it can be entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Cutting {
    /// Records of the range (group-aligned).
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The lengths of its first records, up to the first one that starts past [`MAX`] bytes.
    pub head: Vec<u32>,
    /// `exits[k]`: the open block's length after the range's last record when record `k` of the
    /// head starts a block.
    pub exits: Vec<u32>,
}

/// What a [`MdMapTask`] wrote (an AGD map task's output too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MdMapOutput {
    /// The range's number.
    pub part: usize,
    /// Ranges.
    pub parts: usize,
    /// Leading records skipped (the group of the range before; an AGD run's).
    pub skipped: u64,
    /// Read-name groups of the range (the head group included).
    pub groups: u64,
    /// Of them, duplicate candidates written to the signature file.
    pub signatures: u64,
    /// How its records fall into blocks.
    pub cutting: Cutting,
    /// Virtual offset of the range's first record.
    pub start: u64,
    /// Where it proved to end.
    pub end: Option<u64>,
    /// The signature file.
    pub path: PathBuf,
    /// Byte offset of each partition in it, and its end (`partitions + 1` entries).
    pub offsets: Vec<u64>,
    /// A BAM range's first group, kept apart ([`HeadGroup`]).
    #[serde(default)]
    pub head: HeadGroup,
    /// How its records fall into blocks without the head group's.
    #[serde(default)]
    pub tail_cutting: Cutting,
    /// Records inside the range (none followed past its end).
    #[serde(default)]
    pub in_range: u64,
    /// The read name of its first record (empty: no records).
    #[serde(default, with = "hex")]
    pub first_name: Vec<u8>,
    /// The read name of its last record inside the range.
    #[serde(default, with = "hex")]
    pub last_name: Vec<u8>,
    /// Reading failed (a range starting at a false boundary may; it matters only if reached).
    #[serde(default)]
    pub error: Option<TaskError>,
}

/// The hash partition of `sig` among `n`.
pub fn partition(sig: u128, n: usize) -> usize {
    let mix = |v: u64| {
        let x = (v ^ (v >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^ (x >> 32)
    };
    let h = mix((sig as u64) ^ mix((sig >> 64) as u64).rotate_left(17));
    ((u128::from(h) * n as u128) >> 64) as usize
}

/// The open block's length after a record of `len` bytes is written into one of `open` bytes
/// (htslib's rule: a new block first unless it fits; full blocks end).
#[inline]
fn cut_step(open: u64, len: u64) -> (bool, u64) {
    let starts = open == 0 || open + len > MAX;
    let open = if starts { 0 } else { open };
    (starts, (open + len) % MAX)
}

impl Cutting {
    /// The cutting of records of `lengths`.
    pub fn of(lengths: &[u32]) -> Self {
        let mut head = Vec::new();
        let mut before = 0u64;
        for &l in lengths {
            if before > MAX {
                break;
            }
            head.push(l);
            before += u64::from(l);
        }
        // Every candidate's trajectory runs until it starts a block at a record that an earlier
        // trajectory started one at (from there they agree), or to the end.
        let mut known: HashMap<usize, u32> = HashMap::new();
        let mut exits = Vec::with_capacity(head.len());
        let mut seen = Vec::new();
        for k in 0..head.len() {
            seen.clear();
            let mut open = 0u64;
            let mut exit = None;
            for (j, &l) in lengths.iter().enumerate().skip(k) {
                let (starts, next) = cut_step(open, u64::from(l));
                if starts {
                    if let Some(&e) = known.get(&j) {
                        exit = Some(e);
                        break;
                    }
                    seen.push(j);
                }
                open = next;
            }
            let exit = exit.unwrap_or(open as u32);
            for &j in &seen {
                known.insert(j, exit);
            }
            exits.push(exit);
        }
        Self {
            records: lengths.len() as u64,
            bytes: lengths.iter().map(|&l| u64::from(l)).sum(),
            head,
            exits,
        }
    }

    /// Enters the range with an open block of `open` bytes: the first record that starts a
    /// block (`None`: none does) and the open block's length after the range.
    pub fn enter(&self, mut open: u64) -> (Option<usize>, u64) {
        for (j, &l) in self.head.iter().enumerate() {
            let (starts, next) = cut_step(open, u64::from(l));
            if starts {
                return (Some(j), u64::from(self.exits[j]));
            }
            open = next;
        }
        // The whole range fits in the open block (the head is then every record).
        debug_assert_eq!(self.head.len() as u64, self.records);
        (None, open)
    }
}

/// The state of a map task between groups.
struct MapState<'a> {
    input_name: &'a str,
    partitions: usize,
    layout: SigLayout,
    opts: Options,
    parts: Vec<Vec<u8>>,
    lengths: Vec<u32>,
    groups: u64,
    signatures: u64,
    /// The first group goes to `head`, not to `parts`.
    head_apart: bool,
    head: HeadGroup,
}

impl MapState<'_> {
    fn group(&mut self, batch: &RecordBatch, range: std::ops::Range<usize>) -> anyhow::Result<()> {
        let g = samblaster::analyze(batch, range.clone(), &self.layout, &self.opts);
        for i in range.clone() {
            self.lengths.push(batch.raw(i).len() as u32);
        }
        let apart = self.head_apart && self.groups == 0;
        if apart {
            self.head.records = range.len() as u64;
        }
        match g.verdict {
            Verdict::Pass => {}
            Verdict::Sig(sig) if apart => self.head.signature = sig.to_le_bytes().to_vec(),
            Verdict::Sig(sig) => {
                let p = &mut self.parts[partition(sig, self.partitions)];
                p.extend_from_slice(&sig.to_le_bytes());
                let ordinal = u32::try_from(self.groups)
                    .map_err(|_| anyhow::anyhow!("a range of more than 2^32 groups"))?;
                p.extend_from_slice(&ordinal.to_le_bytes());
                self.signatures += 1;
            }
            _ => {
                // The one-machine job's message for a group samblaster cannot mark.
                let checked = is_duplicate(
                    &mut SigSet::default(),
                    &g,
                    self.input_name,
                    batch,
                    range.start,
                );
                match checked {
                    Err(e) if apart => self.head.error = Some(TaskError::from(&Error::from(e))),
                    r => {
                        r?;
                    }
                }
            }
        }
        self.groups += 1;
        Ok(())
    }
}

/// A source of record batches in file order (`None`: no more).
pub type Batches<'a> = dyn FnMut() -> anyhow::Result<Option<RecordBatch>> + 'a;

/// What a map task over some records found: its signature file written.
pub struct GroupsMapped {
    /// Leading records skipped (the group of the range before).
    pub skipped: u64,
    /// Read-name groups mapped.
    pub groups: u64,
    /// Signatures written.
    pub signatures: u64,
    /// The records' lengths (their block cutting).
    pub lengths: Vec<u32>,
    /// Byte offset of each partition in the file, and its end.
    pub offsets: Vec<u64>,
}

/// The groups of a range before its signature file is written.
struct Grouped<'a> {
    st: MapState<'a>,
    skipped: u64,
    in_range: u64,
    first_name: Vec<u8>,
    last_name: Vec<u8>,
}

/// How a map task reads its records and keeps its groups.
struct MapInput<'a> {
    input_name: &'a str,
    ref_lengths: &'a [u64],
    /// Leading records of this name are skipped (they belong to the range before).
    skip_name: &'a [u8],
    /// The first group goes to [`HeadGroup`] (a BAM range's map task).
    head_apart: bool,
    partitions: usize,
}

/// The map stage of samblaster's mode over any record source: the records of `range` (in file
/// order) grouped by read name, leading records named `skip_name` skipped (they belong to the
/// range before), the last group followed into `rest` (the records after the range, opened only
/// when needed) while its name continues; every group's signature with its ordinal written to
/// `path` partitioned by hash. `lengths` keeps the records' lengths (a BAM's block cutting).
#[allow(clippy::too_many_arguments)]
pub fn map_groups(
    rt: &Runtime,
    job: &MarkdupJob,
    input_name: &str,
    ref_lengths: &[u64],
    skip_name: &[u8],
    partitions: usize,
    path: &Path,
    lengths: bool,
    range: &mut Batches<'_>,
    rest: &mut dyn FnMut() -> anyhow::Result<Box<Batches<'static>>>,
) -> anyhow::Result<GroupsMapped> {
    let how = MapInput {
        input_name,
        ref_lengths,
        skip_name,
        head_apart: false,
        partitions,
    };
    let mut g = group_range(rt, job, &how, range, rest)?;
    let offsets = write_sections(path, &g.st.parts)?;
    if !lengths {
        g.st.lengths = Vec::new();
    }
    Ok(GroupsMapped {
        skipped: g.skipped,
        groups: g.st.groups,
        signatures: g.st.signatures,
        lengths: g.st.lengths,
        offsets,
    })
}

/// Reads and groups the records of `range` (and of `rest` while its last group continues).
fn group_range<'a>(
    rt: &Runtime,
    job: &MarkdupJob,
    how: &MapInput<'a>,
    range: &mut Batches<'_>,
    rest: &mut dyn FnMut() -> anyhow::Result<Box<Batches<'static>>>,
) -> anyhow::Result<Grouped<'a>> {
    let q = &job.samblaster;
    let layout = sig_layout(how.ref_lengths, job)
        .map_err(|e| Error::new(ErrorKind::Format, format!("{}: {e}", how.input_name)))?;
    let mut g = Grouped {
        st: MapState {
            input_name: how.input_name,
            partitions: how.partitions,
            layout,
            opts: Options {
                ignore_unmated: q.ignore_unmated,
                accept_dups: q.accept_dups,
            },
            parts: vec![Vec::new(); how.partitions.max(1)],
            lengths: Vec::new(),
            groups: 0,
            signatures: 0,
            head_apart: how.head_apart,
            head: HeadGroup::default(),
        },
        skipped: 0,
        in_range: 0,
        first_name: Vec::new(),
        last_name: Vec::new(),
    };
    let mut skipping = !how.skip_name.is_empty();
    let mut carry = Carry::default();
    while let Some(batch) = range()? {
        rt.check_cancelled()?;
        if batch.is_empty() {
            continue;
        }
        if g.in_range == 0 {
            g.first_name = batch.record(0).read_name().to_vec();
        }
        g.in_range += batch.len() as u64;
        g.last_name.clear();
        g.last_name
            .extend_from_slice(batch.record(batch.len() - 1).read_name());
        let mut start = 0;
        if skipping {
            while start < batch.len() && batch.record(start).read_name() == how.skip_name {
                start += 1;
            }
            g.skipped += start as u64;
            if start == batch.len() {
                continue;
            }
            skipping = false;
        }
        let Some((start, group)) = carry.continue_from(&batch, start) else {
            continue;
        };
        if let Some(group) = group {
            g.st.group(&group, 0..group.len())?;
        }
        let mut first = start;
        for i in start + 1..batch.len() {
            if batch.record(i).read_name() != batch.record(i - 1).read_name() {
                g.st.group(&batch, first..i)?;
                first = i;
            }
        }
        for i in first..batch.len() {
            carry.push(batch.raw(i));
        }
    }
    // The last group continues past the range's end while its name does.
    if !carry.is_empty() {
        let mut more = rest()?;
        'read: while let Some(batch) = more()? {
            for i in 0..batch.len() {
                if !carry.continues(batch.record(i).read_name()) {
                    break 'read;
                }
                carry.push(batch.raw(i));
            }
        }
    }
    if !carry.is_empty() {
        let group = carry.take();
        g.st.group(&group, 0..group.len())?;
    }
    rt.check_cancelled()?;
    Ok(g)
}

impl MdMapTask {
    /// Reads the range's groups and writes its signature file. Where the planned end proves not
    /// to be a record's start, the range runs to the next planned start that is; a range that
    /// cannot be read (it may start at a false boundary) reports the error in its output and
    /// writes an empty signature file.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<MdMapOutput> {
        let read = |end| match self.group(rt, end) {
            Ok(g) => self.output(end, g).map(Ok),
            Err(e) => Ok(Err(e)),
        };
        self.span.prove_end(rt, read, |end, e| {
            let offsets = write_sections(&self.path, &vec![Vec::new(); self.partitions])?;
            Ok(MdMapOutput {
                part: self.span.part,
                parts: self.span.parts,
                start: self.span.start,
                end,
                path: self.path.clone(),
                offsets,
                error: Some(TaskError::from(&Error::from(e))),
                ..MdMapOutput::default()
            })
        })
    }

    /// The groups of the range ending at `end`.
    fn group(&self, rt: &Runtime, end: Option<u64>) -> anyhow::Result<Grouped<'_>> {
        let name = || self.input_name.clone();
        let range = RecordRange {
            start: self.span.start,
            end: end.unwrap_or(u64::MAX),
        };
        let mut stream = RangeStream::open(&self.input, &range, self.n_ref).with_context(name)?;
        let mut in_range = || stream.next_batch().with_context(name);
        let mut rest = || -> anyhow::Result<Box<Batches<'static>>> {
            let Some(end) = end else {
                return Ok(Box::new(|| Ok(None)));
            };
            let rest = RecordRange {
                start: end,
                end: u64::MAX,
            };
            let input_name = self.input_name.clone();
            let mut stream =
                RangeStream::open(&self.input, &rest, self.n_ref).with_context(name)?;
            Ok(Box::new(move || {
                stream.next_batch().with_context(|| input_name.clone())
            }))
        };
        let how = MapInput {
            input_name: &self.input_name,
            ref_lengths: &self.lengths,
            skip_name: &[],
            head_apart: true,
            partitions: self.partitions,
        };
        group_range(rt, &self.job, &how, &mut in_range, &mut rest)
    }

    fn output(&self, end: Option<u64>, g: Grouped<'_>) -> anyhow::Result<MdMapOutput> {
        let offsets = write_sections(&self.path, &g.st.parts)?;
        let head = g.st.head;
        let lengths = &g.st.lengths;
        Ok(MdMapOutput {
            part: self.span.part,
            parts: self.span.parts,
            skipped: 0,
            groups: g.st.groups,
            signatures: g.st.signatures,
            cutting: Cutting::of(lengths),
            start: self.span.start,
            end,
            path: self.path.clone(),
            offsets,
            tail_cutting: Cutting::of(&lengths[head.records as usize..]),
            head,
            in_range: g.in_range,
            first_name: g.first_name,
            last_name: g.last_name,
            error: None,
        })
    }
}

// ------------------------------------------------------------------------------ stage 2: reduce

/// A byte slice of a task file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSlice {
    /// The file.
    pub path: PathBuf,
    /// First byte.
    pub start: u64,
    /// Past the last byte.
    pub end: u64,
}

impl FileSlice {
    /// Slice `i` of a file cut at `offsets` (partition `i` of a partitioned task file: bytes
    /// `offsets[i]..offsets[i + 1]`).
    pub fn nth(path: &Path, offsets: &[u64], i: usize) -> Self {
        Self {
            path: path.to_path_buf(),
            start: offsets[i],
            end: offsets[i + 1],
        }
    }

    /// The slice's bytes.
    pub fn read(&self) -> anyhow::Result<Vec<u8>> {
        let at = || self.path.display().to_string();
        let mut f = sortase_io::Source::open_path(&self.path)
            .with_context(|| format!("{}: cannot open", at()))?;
        f.expect_end(self.end);
        f.seek(SeekFrom::Start(self.start)).with_context(at)?;
        let mut buf = vec![0u8; (self.end - self.start) as usize];
        f.read_exact(&mut buf).with_context(at)?;
        Ok(buf)
    }
}

/// Stage 2: one hash partition of the signatures: the first occurrence in file order is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdReduceTask {
    /// The partition.
    pub part: usize,
    /// Partitions.
    pub parts: usize,
    /// Each range's entries of the partition, in range order.
    pub inputs: Vec<FileSlice>,
    /// Head groups of the partition ([`HeadGroup`]), each before its range's entries.
    #[serde(default)]
    pub heads: Vec<HeadEntry>,
    /// The duplicate ordinals it writes.
    pub path: PathBuf,
}

/// A range's own head group in a reduce task: its signature, ordinal 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadEntry {
    /// The range's place among the task's inputs.
    pub input: usize,
    /// The signature (16 bytes, little-endian).
    #[serde(with = "hex")]
    pub signature: Vec<u8>,
}

/// What a [`MdReduceTask`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdReduceOutput {
    /// The partition.
    pub part: usize,
    /// Partitions.
    pub parts: usize,
    /// Duplicate groups found.
    pub duplicates: u64,
    /// The file of duplicate groups' ordinals (little-endian u32), range after range.
    pub path: PathBuf,
    /// Byte offset of each range's ordinals, and the end (`ranges + 1` entries).
    pub offsets: Vec<u64>,
}

impl MdReduceTask {
    /// Decides the partition's duplicates.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<MdReduceOutput> {
        let mut sigs = SigSet::default();
        let file = WorkFile::new(&self.path)?;
        let at = || self.path.display().to_string();
        let mut out = BufWriter::new(
            sortase_exec::files::create_private(file.path())
                .with_context(|| format!("{}: cannot create", at()))?,
        );
        let mut offsets = vec![0u64];
        let mut written = 0u64;
        for (k, input) in self.inputs.iter().enumerate() {
            rt.check_cancelled()?;
            for h in self.heads.iter().filter(|h| h.input == k) {
                let sig: [u8; 16] = h.signature.as_slice().try_into().map_err(|_| {
                    anyhow::anyhow!("a head signature of {} bytes", h.signature.len())
                })?;
                if !sigs.insert(u128::from_le_bytes(sig)) {
                    out.write_all(&0u32.to_le_bytes()).with_context(at)?;
                    written += 4;
                }
            }
            let bytes = input.read()?;
            if !bytes.len().is_multiple_of(SIG_ENTRY) {
                bail!(
                    "{}: a partition of {} bytes",
                    input.path.display(),
                    bytes.len()
                );
            }
            for e in bytes.chunks_exact(SIG_ENTRY) {
                let sig = u128::from_le_bytes(e[..16].try_into().expect("16 bytes"));
                if !sigs.insert(sig) {
                    out.write_all(&e[16..20]).with_context(at)?;
                    written += 4;
                }
            }
            offsets.push(written);
        }
        out.flush().with_context(at)?;
        drop(out);
        file.commit()?;
        Ok(MdReduceOutput {
            part: self.part,
            parts: self.parts,
            duplicates: written / 4,
            path: self.path.clone(),
            offsets,
        })
    }
}

// ------------------------------------------------------------------------------ stage 3: encode

/// One range's share of an encode task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// The range's number.
    pub range: usize,
    /// Its records (group-aligned).
    pub records: u64,
    /// Its groups.
    pub groups: u64,
    /// First record written (earlier ones are walked for the group ordinals only).
    pub from: u64,
    /// Past the last record written.
    pub to: u64,
    /// Its duplicate groups' ordinals (u32), one slice per reduce task; in Picard's mode its
    /// duplicate records' file indices (u64).
    pub duplicates: Vec<FileSlice>,
    /// Picard's mode: the file index of the range's first record.
    #[serde(default)]
    pub base: u64,
}

/// How an encode task in Picard's mode flags (coordinate-sorted input): by record, 0x400 set on
/// the duplicates and cleared on every other record, as Picard; the duplicates counted per
/// library for the metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordMarks {
    /// The input header's `@RG` lines (the libraries).
    pub rg_lines: String,
}

/// Stage 3: records from one block start to the next, flagged and encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdEncodeTask {
    /// The input BAM.
    pub input: PathBuf,
    /// References in its header.
    pub n_ref: usize,
    /// The task's number.
    pub part: usize,
    /// Encode tasks.
    pub parts: usize,
    /// Virtual offset of the first segment's range.
    pub start: u64,
    /// Where the last segment's range ends (`None`: the end of the file; the records read stop
    /// once the last segment is done).
    pub read_end: Option<u64>,
    /// Leading records of the first range that belong to the range before.
    pub skip: u64,
    /// The ranges it walks, in order.
    pub segments: Vec<Segment>,
    /// The output's libdeflate level.
    pub level: u8,
    /// Its part file and sidecar.
    #[serde(flatten)]
    pub files: PartFiles,
    /// Picard's mode (`None`: samblaster's, duplicates by read-name group).
    #[serde(default)]
    pub records: Option<RecordMarks>,
}

/// What a [`MdEncodeTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdEncodeOutput {
    /// The task's number.
    pub part: usize,
    /// Encode tasks.
    pub parts: usize,
    /// Records written.
    pub records: u64,
    /// Of them, duplicates.
    pub duplicate_records: u64,
    /// Its part file and sidecar.
    #[serde(flatten)]
    pub files: PartFiles,
    /// Picard's mode: per library id, the duplicates written (unpaired, pair ends).
    #[serde(default)]
    pub library_duplicates: Vec<[u64; 2]>,
}

/// The segment's duplicates as a bit set: of its groups' ordinals (u32 entries), or in Picard's
/// mode of its records (u64 file indices from `seg.base`).
fn duplicate_set(seg: &Segment, by_record: bool) -> anyhow::Result<Vec<u64>> {
    let (n, width) = if by_record {
        (seg.records, 8)
    } else {
        (seg.groups, 4)
    };
    let mut bits = vec![0u64; n.div_ceil(64) as usize];
    for s in &seg.duplicates {
        let bytes = s.read()?;
        for o in bytes.chunks_exact(width) {
            let o = if by_record {
                u64::from_le_bytes(o.try_into().expect("8 bytes"))
            } else {
                u64::from(u32::from_le_bytes(o.try_into().expect("4 bytes")))
            }
            .wrapping_sub(seg.base);
            if o >= n {
                bail!("{}: entry {o} of a range of {n}", s.path.display());
            }
            bits[(o / 64) as usize] |= 1 << (o % 64);
        }
    }
    Ok(bits)
}

impl MdEncodeTask {
    /// Flags and encodes the task's records into its part file.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<MdEncodeOutput> {
        let name = || self.input.display().to_string();
        let range = RecordRange {
            start: self.start,
            end: u64::MAX,
        };
        let mut stream = RangeStream::open(&self.input, &range, self.n_ref).with_context(name)?;
        let mut enc = BlockEncoder::new(CompressionLevel::from_libdeflate(self.level));
        let mut scratch = RecordBuf::default();
        let mut prev: Vec<u8> = Vec::new();
        let mut to_skip = self.skip;
        let mut seg_i = 0;
        let by_record = self.records.is_some();
        let libs = self
            .records
            .as_ref()
            .map(|m| crate::picard::Libraries::from_header(&m.rg_lines));
        let mut lib_dups = vec![[0u64; 2]; libs.as_ref().map_or(0, |l| l.names.len())];
        let mut dups = match self.segments.first() {
            Some(s) => duplicate_set(s, by_record)?,
            None => Vec::new(),
        };
        let (mut index, mut group) = (0u64, 0u64);
        let (mut records, mut dup_records) = (0u64, 0u64);
        'read: while let Some(batch) = stream.next_batch().with_context(name)? {
            rt.check_cancelled()?;
            for i in 0..batch.len() {
                if to_skip > 0 {
                    to_skip -= 1;
                    continue;
                }
                // The next range with records (ranges may be empty).
                while seg_i < self.segments.len() && index == self.segments[seg_i].records {
                    seg_i += 1;
                    (index, group) = (0, 0);
                    prev.clear();
                    if let Some(s) = self.segments.get(seg_i) {
                        dups = duplicate_set(s, by_record)?;
                    }
                }
                let Some(seg) = self.segments.get(seg_i) else {
                    break 'read;
                };
                if index >= seg.to {
                    break 'read;
                }
                let r = batch.record(i);
                if let Some(libs) = &libs {
                    if index >= seg.from {
                        let dup = dups[(index / 64) as usize] >> (index % 64) & 1 == 1;
                        let raw = batch.raw(i);
                        let flag = r.flag();
                        records += 1;
                        let want = if dup {
                            dup_records += 1;
                            let (lib, _) = libs.of(&r);
                            let paired = crate::picard::ends::has_mapped_mate(flag);
                            lib_dups[lib as usize][usize::from(paired)] += 1;
                            flag | flags::DUPLICATE
                        } else {
                            flag & !flags::DUPLICATE
                        };
                        if want == flag {
                            enc.write_record(raw)?;
                        } else {
                            scratch.copy_from(raw);
                            scratch.set_flag(want);
                            enc.write_record(scratch.as_raw())?;
                        }
                    }
                    index += 1;
                    continue;
                }
                if index > 0 && r.read_name() != prev.as_slice() {
                    group += 1;
                }
                prev.clear();
                prev.extend_from_slice(r.read_name());
                if index >= seg.from {
                    if group >= seg.groups {
                        bail!(
                            "{}: range {} has more groups than its map task found",
                            name(),
                            seg.range
                        );
                    }
                    let dup = dups[(group / 64) as usize] >> (group % 64) & 1 == 1;
                    let raw = batch.raw(i);
                    records += 1;
                    if dup {
                        dup_records += 1;
                        scratch.copy_from(raw);
                        scratch.set_flag(r.flag() | flags::DUPLICATE);
                        enc.write_record(scratch.as_raw())?;
                    } else {
                        enc.write_record(raw)?;
                    }
                }
                index += 1;
            }
        }
        let expected: u64 = self.segments.iter().map(|s| s.to - s.from).sum();
        if records != expected {
            bail!(Error::new(
                ErrorKind::Internal,
                format!(
                    "{}: encode task {} read {records} of its {expected} records",
                    name(),
                    self.part
                )
            ));
        }
        let blocks = enc.finish()?;
        let mut blocks = Some(blocks);
        self.files.write(rt, 1, |_| {
            Ok(EncodedRange::Bam(blocks.take().unwrap_or_default(), None))
        })?;
        Ok(MdEncodeOutput {
            part: self.part,
            parts: self.parts,
            records,
            duplicate_records: dup_records,
            files: self.files.clone(),
            library_duplicates: lib_dups,
        })
    }
}

// ---------------------------------------------------------------------------------- the driver

impl MarkdupPlan {
    /// The planned byte ranges.
    pub fn ranges(&self) -> &[ByteRange] {
        &self.base.ranges
    }

    /// The work directory.
    pub fn work_dir(&self) -> &Path {
        &self.base.work_dir
    }

    /// The ranges proved by the map outputs, walking from the first to the end of the file,
    /// each with whether its head group continues the last group of the range before (the
    /// first record's name is the last one's of the range before with records). The first
    /// error on the way is the job's: a range's, or its head group's if the group is its own.
    fn chain<'a>(&self, maps: &'a [MdMapOutput]) -> Result<Vec<Proved<'a>>> {
        let mut chain = Vec::new();
        let mut last_name: &[u8] = &[];
        let proof = |m: &MdMapOutput| (m.part, m.parts, m.start, m.end);
        walk_proved(&self.base.ranges, maps, "map", proof, |m| {
            let ghost = m.in_range > 0 && !last_name.is_empty() && m.first_name == last_name;
            if let (false, Some(e)) = (ghost, &m.head.error) {
                return Err(e.to_error());
            }
            if let Some(e) = &m.error {
                return Err(e.to_error());
            }
            if m.in_range > 0 {
                last_name = &m.last_name;
            }
            chain.push(Proved { m, ghost });
            Ok(())
        })?;
        Ok(chain)
    }
}

/// A range on the chain the map tasks proved.
struct Proved<'a> {
    m: &'a MdMapOutput,
    /// Its head group is the end of the range before's last group (its map task followed it).
    ghost: bool,
}

impl<'a> Proved<'a> {
    /// Its head group's signature, if the group is its own and in partition `p` of `n`.
    fn head_in(&self, p: usize, n: usize) -> Option<u128> {
        let sig = u128::from_le_bytes(self.m.head.signature.as_slice().try_into().ok()?);
        (!self.ghost && partition(sig, n) == p).then_some(sig)
    }

    /// What the encode stage needs of it: a continued head group is the range before's.
    fn encode_range(&self, duplicates: Vec<FileSlice>) -> EncodeRange<'a> {
        let ghost = u64::from(self.ghost);
        let m: &'a MdMapOutput = self.m;
        EncodeRange {
            cutting: if self.ghost {
                &m.tail_cutting
            } else {
                &m.cutting
            },
            start: self.m.start,
            end: self.m.end,
            skipped: if self.ghost { self.m.head.records } else { 0 },
            groups: self.m.groups - ghost,
            // Ordinals count the head group: a continued one's is skipped.
            base: ghost,
            duplicates,
        }
    }
}

/// Where a task output of one planned byte range says the range is: `(range, ranges, start,
/// end)`, its number in the plan, how many ranges the plan it was made for has, the virtual
/// offset of its first record and where it proved to end (`None`: the end of the file).
pub(crate) type RangeProof = (usize, usize, u64, Option<u64>);

/// Where a map task reads: its planned range, from its start to its planned end (the next
/// range's start), and the planned starts after that (where it ends instead if that proves not
/// to be a record's start). Both modes' map tasks hold one (serde-flattened).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapSpan {
    /// The range's number among the planned ranges.
    pub part: usize,
    /// Planned ranges.
    pub parts: usize,
    /// Virtual offset of its first record.
    pub start: u64,
    /// Where it is planned to end (the next range's start; `None`: the end of the file).
    pub end: Option<u64>,
    /// Planned starts of the ranges after the next, ascending: where it ends instead if `end`
    /// proves not to be a record's start.
    #[serde(default)]
    pub later_starts: Vec<u64>,
}

impl MapSpan {
    /// A map task's range read to where it proves to end: `read(end)` reads the range ending at
    /// `end` (`Ok(Err(e))`: reading failed), first to its planned `end`; where that proves not to
    /// be a record's start, to the next of `later_starts` that is. A range that cannot be read
    /// otherwise (it may start at a false boundary) is `unreadable(end, e)`.
    pub(crate) fn prove_end<T>(
        &self,
        rt: &Runtime,
        mut read: impl FnMut(Option<u64>) -> anyhow::Result<anyhow::Result<T>>,
        unreadable: impl FnOnce(Option<u64>, anyhow::Error) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let starts: Vec<u64> = self.end.iter().chain(&self.later_starts).copied().collect();
        let mut next = 0;
        loop {
            let end = starts.get(next).copied();
            let e = match read(end)? {
                Ok(out) => return Ok(out),
                Err(e) => e,
            };
            rt.check_cancelled()?;
            if let Some(BamError::RangeBoundary { found, .. }) = e.downcast_ref() {
                next = starts.partition_point(|&s| s < *found).max(next + 1);
                continue;
            }
            return unreadable(end, e);
        }
    }
}

impl RangePlan {
    /// The file of a task of the plan in the work directory: `STEM-PART.EXT`, the part in six
    /// digits.
    pub(crate) fn part_file(&self, stem: &str, part: usize, ext: &str) -> PathBuf {
        self.work_dir.join(format!("{stem}-{part:06}.{ext}"))
    }

    /// The map tasks' spans, one per planned range.
    pub(crate) fn spans(&self) -> impl Iterator<Item = MapSpan> + '_ {
        let ranges = &self.ranges;
        (0..ranges.len()).map(move |part| MapSpan {
            part,
            parts: ranges.len(),
            start: ranges[part].start,
            end: ranges.get(part + 1).map(|r| r.start),
            later_starts: ranges
                .get(part + 2..)
                .unwrap_or_default()
                .iter()
                .map(|r| r.start)
                .collect(),
        })
    }
}

/// Walks the outputs (`what`: of which tasks) from the first range to the end of the file, each
/// range to the one starting where it proved to end (`proof`: where an output says its range
/// is), calling `visit` on each in file order.
pub(crate) fn walk_proved<'a, T>(
    ranges: &[ByteRange],
    outputs: &'a [T],
    what: &str,
    proof: impl Fn(&T) -> RangeProof,
    mut visit: impl FnMut(&'a T) -> Result<()>,
) -> Result<()> {
    let mut by_range: Vec<Option<&T>> = vec![None; ranges.len()];
    for o in outputs {
        let (range, parts, start, _) = proof(o);
        if parts != ranges.len() || ranges.get(range).map(|r| r.start) != Some(start) {
            return Err(Error::argument(format!(
                "{what} output for range {range} does not belong to this plan"
            )));
        }
        by_range[range].get_or_insert(o);
    }
    let mut i = 0;
    loop {
        let o = by_range
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| Error::argument(format!("no output of {what} task {i}")))?;
        visit(o)?;
        let Some(end) = proof(o).3 else {
            return Ok(());
        };
        match ranges[i + 1..].iter().position(|r| r.start == end) {
            Some(k) => i += 1 + k,
            None => {
                return Err(Error::argument(format!(
                    "{what} output for range {i} ends at {end:#x}, no planned range start"
                )))
            }
        }
    }
}

impl MarkdupPlan {
    /// Stage 1: one map task per planned range.
    pub fn map_tasks(&self) -> Vec<MarkdupTask> {
        self.base
            .spans()
            .map(|span| {
                let path = self.base.part_file("map", span.part, "sigs");
                MarkdupTask::Map(MdMapTask {
                    input: self.base.input.clone(),
                    input_name: self.base.job.input.clone(),
                    n_ref: self.base.n_ref,
                    lengths: self.lengths.clone(),
                    job: Box::new(self.base.job.clone()),
                    span,
                    partitions: self.base.partitions,
                    path,
                })
            })
            .collect()
    }

    /// Stage 2 from the map outputs: one reduce task per hash partition, over the proved
    /// ranges (a range's own head group goes in before its slice).
    pub fn reduce_tasks(&self, maps: &[MdMapOutput]) -> Result<Vec<MarkdupTask>> {
        let chain = self.chain(maps)?;
        let partitions = chain[0].m.offsets.len().saturating_sub(1);
        if chain.iter().any(|r| r.m.offsets.len() != partitions + 1) {
            return Err(Error::argument("map outputs disagree on the partitions"));
        }
        Ok((0..partitions)
            .map(|p| {
                MarkdupTask::Reduce(MdReduceTask {
                    part: p,
                    parts: partitions,
                    inputs: chain
                        .iter()
                        .map(|r| FileSlice::nth(&r.m.path, &r.m.offsets, p))
                        .collect(),
                    heads: chain
                        .iter()
                        .enumerate()
                        .filter_map(|(input, r)| {
                            let sig = r.head_in(p, partitions)?;
                            Some(HeadEntry {
                                input,
                                signature: sig.to_le_bytes().to_vec(),
                            })
                        })
                        .collect(),
                    path: self.base.part_file("reduce", p, "dups"),
                })
            })
            .collect())
    }

    /// Stage 3 from the map and the reduce outputs: the block starts chained from the header's
    /// end through every range's cutting; one encode task per range that holds a block start,
    /// writing to the next one.
    pub fn encode_tasks(
        &self,
        maps: &[MdMapOutput],
        reduces: &[MdReduceOutput],
    ) -> Result<Vec<MarkdupTask>> {
        let ranges = self
            .chain(maps)?
            .iter()
            .map(|c| c.encode_range(Vec::new()))
            .collect();
        let tasks = self.base.encode_tasks(ranges, reduces, None)?;
        Ok(tasks.into_iter().map(MarkdupTask::Encode).collect())
    }

    /// The parallel finish's first step ([`sortase_exec::assemble`]): the output laid out from
    /// the encode tasks' sidecars, the report from every stage's outputs; with `preallocate` the
    /// output's temporary file created at its size.
    pub fn layout(
        &self,
        maps: &[MdMapOutput],
        reduces: &[MdReduceOutput],
        encodes: &[MdEncodeOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> Result<Layout> {
        self.layout_inner(maps, reduces, encodes, preallocate, rt)
            .map_err(Error::from)
    }

    fn layout_inner(
        &self,
        maps: &[MdMapOutput],
        reduces: &[MdReduceOutput],
        encodes: &[MdEncodeOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> anyhow::Result<Layout> {
        let chain: Vec<EncodeRange> = self
            .chain(maps)?
            .iter()
            .map(|c| c.encode_range(Vec::new()))
            .collect();
        let reduces = complete(reduces, "reduce", |r| (r.part, r.parts))?;
        let records: u64 = chain.iter().map(|c| c.cutting.records).sum();
        let encodes = checked_encodes(encodes, records, None)?;
        let data = output_path(&self.base.job)?;
        let groups: u64 = chain.iter().map(|c| c.groups).sum();
        let dups: u64 = reduces.iter().map(|r| r.duplicates).sum();
        let report = MarkdupReport {
            mode: Mode::Query,
            records,
            duplicate_records: encodes.iter().map(|e| e.duplicate_records).sum(),
            read_names: groups,
            duplicate_groups: dups,
            summary: vec![format!(
                "sortase markdup: marked {dups} duplicate groups of {groups} read names"
            )],
            outputs: vec![data.to_path_buf()],
            ..MarkdupReport::default()
        };
        self.base
            .layout_parts(data, &encodes, &report, preallocate, rt)
    }

    /// Removes the work directory and the parallel finish's temporary files.
    pub fn abort(&self) -> Result<()> {
        assemble::remove_temps(
            self.base.job.output.path.as_deref(),
            None,
            &self.base.work_dir,
        );
        remove_work_dir(&self.base.work_dir)
    }
}

/// What the encode stage needs of one proved range.
pub(crate) struct EncodeRange<'a> {
    pub(crate) cutting: &'a Cutting,
    pub(crate) start: u64,
    pub(crate) end: Option<u64>,
    pub(crate) skipped: u64,
    pub(crate) groups: u64,
    pub(crate) base: u64,
    /// Its duplicates, one slice per reduce task.
    pub(crate) duplicates: Vec<FileSlice>,
}

/// A reduce output of either mode: its partition and its file of duplicates, cut per range.
pub(crate) trait ReduceFile {
    /// `(partition, partitions)`.
    fn number(&self) -> (usize, usize);
    /// The file and the byte offset of each range's duplicates in it, and the end.
    fn file(&self) -> (&Path, &[u64]);
}

impl ReduceFile for MdReduceOutput {
    fn number(&self) -> (usize, usize) {
        (self.part, self.parts)
    }
    fn file(&self) -> (&Path, &[u64]) {
        (&self.path, &self.offsets)
    }
}

/// The encode outputs of ranges of `records` records (none if there are none), every one
/// present, checked to have written the records (and in Picard's mode the reduce tasks'
/// `duplicates`).
pub(crate) fn checked_encodes(
    encodes: &[MdEncodeOutput],
    records: u64,
    duplicates: Option<u64>,
) -> anyhow::Result<Vec<&MdEncodeOutput>> {
    let encodes = if records == 0 {
        Vec::new()
    } else {
        complete(encodes, "encode", |e| (e.part, e.parts))?
    };
    let written: u64 = encodes.iter().map(|e| e.records).sum();
    let dup_records: u64 = encodes.iter().map(|e| e.duplicate_records).sum();
    let message = match duplicates {
        Some(dups) if written != records || dup_records != dups => format!(
            "encode tasks wrote {written} records ({dup_records} duplicates) of the ranges' \
             {records} ({dups})"
        ),
        None if written != records => {
            format!("encode tasks wrote {written} records of the ranges' {records}")
        }
        _ => return Ok(encodes),
    };
    bail!(Error::new(ErrorKind::Internal, message))
}

/// The job's output file (markdup tasks write one).
pub(crate) fn output_path(job: &MarkdupJob) -> anyhow::Result<&Path> {
    let Some(data) = job.output.path.as_deref() else {
        bail_argument!("markdup tasks write a BAM file");
    };
    Ok(data)
}

/// The block starts `(range, record)` of the output's records, from the ranges' cuttings: the
/// header's block is ended, so the first record starts one.
pub fn block_starts<'a>(cuttings: impl Iterator<Item = &'a Cutting>) -> Vec<(usize, usize)> {
    let mut open = 0;
    let mut starts = Vec::new();
    for (r, c) in cuttings.enumerate() {
        let (k, exit) = c.enter(open);
        if let Some(k) = k {
            starts.push((r, k));
        }
        open = exit;
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where each record starts a block, written through htslib's rule from an ended block.
    fn direct_starts(lengths: &[u32]) -> Vec<usize> {
        let mut open = 0;
        let mut starts = Vec::new();
        for (j, &l) in lengths.iter().enumerate() {
            let (s, next) = cut_step(open, u64::from(l));
            if s {
                starts.push(j);
            }
            open = next;
        }
        starts
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn chained_cuttings_find_the_block_starts_of_the_whole_stream() {
        let mut seed = 7;
        for round in 0..200 {
            let n = 1 + (lcg(&mut seed) % 3000) as usize;
            // Short records, long ones, some past a block's capacity, some filling it exactly.
            let lengths: Vec<u32> = (0..n)
                .map(|_| match lcg(&mut seed) % 50 {
                    0 => 70_000 + (lcg(&mut seed) % 70_000) as u32,
                    1 => BLOCK_DATA_MAX as u32,
                    2..=9 => 2_000 + (lcg(&mut seed) % 20_000) as u32,
                    _ => 40 + (lcg(&mut seed) % 600) as u32,
                })
                .collect();
            let want = direct_starts(&lengths);
            // Cut into ranges of any size, empty ones included.
            let mut cuts = vec![0];
            while *cuts.last().unwrap() < n {
                let step = (lcg(&mut seed) % (1 + n as u64 / (1 + round % 7))) as usize;
                cuts.push((cuts.last().unwrap() + step).min(n));
            }
            let cuttings: Vec<Cutting> = cuts
                .windows(2)
                .map(|w| Cutting::of(&lengths[w[0]..w[1]]))
                .collect();
            let first_starts: Vec<usize> = block_starts(cuttings.iter())
                .into_iter()
                .map(|(r, k)| cuts[r] + k)
                .collect();
            // The first block start of every range that has one.
            let mut expected = Vec::new();
            for w in cuts.windows(2) {
                if let Some(&s) = want.iter().find(|&&s| s >= w[0] && s < w[1]) {
                    expected.push(s);
                }
            }
            assert_eq!(first_starts, expected, "round {round}");
        }
    }

    #[test]
    fn a_cutting_enters_as_the_direct_cut() {
        let lengths = [30_000u32, 30_000, 10_000, 65_280, 100, 200_000, 50];
        let c = Cutting::of(&lengths);
        assert_eq!(c.records, 7);
        // Entered on an ended block: the first record starts one.
        assert_eq!(c.enter(0).0, Some(0));
        // 40_000 open: the first record does not fit.
        assert_eq!(c.enter(40_000).0, Some(0));
        // 5_000 open: the first two fit, the third does not.
        assert_eq!(c.enter(5_000).0, Some(2));
        let mut open = 0;
        for &l in &lengths {
            open = cut_step(open, u64::from(l)).1;
        }
        assert_eq!(c.enter(0).1, open);
        assert_eq!(Cutting::of(&[]).enter(123), (None, 123));
        assert_eq!(Cutting::of(&[100, 100]).enter(123), (None, 323));
    }

    #[test]
    fn partitions_spread_and_stay_in_range() {
        for n in [1, 2, 7, 64] {
            let mut count = vec![0usize; n];
            for i in 0..20_000u128 {
                let p = partition((i << 64) | (i * 3), n);
                count[p] += 1;
            }
            let mean = 20_000 / n;
            assert!(count.iter().all(|&c| c > mean / 2), "{n}: {count:?}");
        }
    }
}
