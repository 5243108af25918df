//! `sortase sort` as serialisable tasks whose finished output is byte-identical to [`SortJob::run`]
//! with the same options (issue 16; the Dask driver of issue 18 runs them).
//!
//! Why the bytes can match: a sort's output bytes depend on the input alone. Every record has an
//! input sequence number; the output order is the strict order on (key, sequence number); the key
//! ranges are cut at split points chosen ([`choose_splits`], default [`RangePlan`]) from the records
//! whose sequence number is a multiple of 1024 and from the total record bytes; and every key range
//! is encoded into BGZF blocks of its own. So a driver that knows each byte range's first sequence
//! number (stage 1, [`CountTask`]) can sort the ranges independently ([`MapTask`]), choose the same
//! split points from their samples, and encode the same key ranges ([`ReduceTask`]) anywhere;
//! [`SortPlan::finish`] then writes the header blocks, the parts and the EOF block through the
//! same [`crate::range_output::RangeWriter`] as `SortJob::run`, with the BAI/CSI replayed from the
//! ranges' summaries.
//!
//! The driver's side, on one machine (tasks may run anywhere that sees the input and the work
//! directory, in any order within a stage, retried at will):
//!
//! ```
//! # use sortase::{OutputSpec, Runtime, SortJob};
//! # use sortase::tasks::{SortTask, SortTaskOutput};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! # let input = dir.path().join("in.bam");
//! # SortJob { order: sortase::Order::Name, ..SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&input)) }.run(&Runtime::with_threads(1)?)?;
//! let rt = Runtime::with_threads(1)?;
//! let job = SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(dir.path().join("out.bam")));
//! let plan = job.plan(&rt)?;
//! let run = |tasks: Vec<SortTask>| -> sortase::Result<Vec<SortTaskOutput>> {
//!     tasks.iter().map(|t| t.run(&rt)).collect()
//! };
//! let counts = run(plan.count_tasks())?.into_iter().filter_map(SortTaskOutput::into_count).collect::<Vec<_>>();
//! let maps = run(plan.map_tasks(&counts)?)?.into_iter().filter_map(SortTaskOutput::into_map).collect::<Vec<_>>();
//! let parts = run(plan.reduce_tasks(&maps, &rt)?)?.into_iter().filter_map(SortTaskOutput::into_reduce).collect::<Vec<_>>();
//! let report = plan.finish(&parts, &rt)?;
//! assert_eq!(report.records, 2);
//! # Ok::<(), sortase::Error>(())
//! ```

pub use super::sort_stages::{
    CountOutput, CountTask, EncodedRangeIndex, MapOutput, MapTask, PartIndex, ReduceOutput,
    ReduceTask, RunStart, TaskError,
};
use super::wire::{HeaderData, Sample};
use crate::bail_argument;
use crate::error::{Error, ErrorKind, Result};
use crate::options::{add_program, temp_prefix, PhaseClock};
use crate::range_output::{self, EncodedRange};
use crate::runtime::{Runtime, DEFAULT_MEMORY_PER_THREAD};
use crate::sort::{resolve_output, SortJob, SortReport, DEFAULT_LEVEL};
use crate::writer::{OnTheFlyIndex, OutFormat};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bgzf::{scanner, EncodedBlocks};
use sortase_index::range::plan_ranges;
use sortase_index::IndexBuilder;
use sortase_sort::ranges::{choose_splits, RangePlan, SplitPoint};
use sortase_sort::start_block;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A task of a sort.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortTask {
    /// Stage 1.
    Count(CountTask),
    /// Stage 2.
    Map(MapTask),
    /// Stage 3.
    Reduce(ReduceTask),
}

/// What a [`SortTask`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortTaskOutput {
    /// Of a [`CountTask`].
    Count(CountOutput),
    /// Of a [`MapTask`].
    Map(MapOutput),
    /// Of a [`ReduceTask`].
    Reduce(ReduceOutput),
}

impl SortTask {
    /// Runs the task on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<SortTaskOutput> {
        Ok(match self {
            SortTask::Count(t) => SortTaskOutput::Count(t.run(rt)?),
            SortTask::Map(t) => SortTaskOutput::Map(t.run(rt)?),
            SortTask::Reduce(t) => SortTaskOutput::Reduce(t.run(rt)?),
        })
    }
}

impl SortTaskOutput {
    /// The output of a count task, if it is one.
    pub fn into_count(self) -> Option<CountOutput> {
        match self {
            SortTaskOutput::Count(c) => Some(c),
            _ => None,
        }
    }

    /// The output of a map task, if it is one.
    pub fn into_map(self) -> Option<MapOutput> {
        match self {
            SortTaskOutput::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The output of a reduce task, if it is one.
    pub fn into_reduce(self) -> Option<ReduceOutput> {
        match self {
            SortTaskOutput::Reduce(r) => Some(r),
            _ => None,
        }
    }
}

/// How a sort is cut into tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// Memory one map task may hold (its range's records and sort entries): the input is cut into
    /// byte ranges of about this much record data (estimated from sampled BGZF blocks). Default:
    /// samtools sort's memory per thread.
    pub task_memory: usize,
    /// Reduce tasks (default: as many as map tasks; at most the number of key ranges).
    pub reduce_tasks: Option<usize>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            task_memory: DEFAULT_MEMORY_PER_THREAD,
            reduce_tasks: None,
        }
    }
}

/// A planned byte range of the input: the records whose first byte's virtual offset is in
/// `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteRange {
    /// Virtual offset of its first record.
    pub start: u64,
    /// Virtual offset of the next range's first record (`None`: the end of the file).
    pub end: Option<u64>,
}

/// A sort cut into tasks: the job, the output header, the input's byte ranges and the work
/// directory. Plain data (serde): a driver may keep it as JSON between stages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortPlan {
    job: SortJob,
    options: PlanOptions,
    /// The input, absolute.
    input: PathBuf,
    /// The output's header (sort order set, `@PG` added).
    header: HeaderData,
    n_ref: usize,
    ranges: Vec<ByteRange>,
    work_dir: PathBuf,
    /// The output's libdeflate level.
    level: u8,
    /// The index geometry with `--write-index`.
    index: Option<(u32, u32)>,
    warnings: Vec<String>,
}

impl SortJob {
    /// Plans the sort as tasks with [`PlanOptions::default`] (see [`SortJob::plan_with`]).
    pub fn plan(&self, rt: &Runtime) -> Result<SortPlan> {
        self.plan_with(rt, &PlanOptions::default())
    }

    /// Plans the sort as tasks: BAM input (a file) and BAM output (a file) only. Creates the work
    /// directory for the tasks' files (`PREFIX.sortase-tasks-PID-N.tmp/`, `PREFIX` as for
    /// [`SortJob::temp_prefix`]); [`SortPlan::finish`] or [`SortPlan::abort`] removes it.
    pub fn plan_with(&self, rt: &Runtime, options: &PlanOptions) -> Result<SortPlan> {
        plan(self, rt, options).map_err(Error::from)
    }
}

fn plan(job: &SortJob, rt: &Runtime, options: &PlanOptions) -> anyhow::Result<SortPlan> {
    let order = job.order.resolve()?;
    if job.input == "-" {
        bail_argument!("sort tasks read a BAM file, not standard input");
    }
    let format = input_format(Path::new(&job.input)).context(job.input.clone())?;
    if format != "BAM" {
        bail_argument!(
            "{}: sort tasks read BAM only, this is {format}; convert it with `sortase view -b`",
            job.input
        );
    }
    let mut warnings = Vec::new();
    let out = resolve_output(&job.output, DEFAULT_LEVEL, order, &mut warnings)?;
    let OutFormat::Bam(level) = out.format else {
        bail_argument!("sort tasks write BAM only (the output's format is SAM or CRAM)");
    };
    let Some(data) = out.data.as_deref() else {
        bail_argument!("sort tasks need an output file (-o), not standard output");
    };
    if options.task_memory == 0 {
        bail_argument!("task_memory 0: give the memory of one map task, e.g. 768M");
    }
    let input = std::fs::canonicalize(&job.input).context(job.input.clone())?;
    let file_len = std::fs::metadata(&input).context(job.input.clone())?.len();
    let estimate = estimate_record_bytes(&input, file_len).context(job.input.clone())?;
    // A map task holds its records and a 16-byte entry per record; a quarter more than the
    // records covers the entries of ~100-byte records and the batches' slack.
    let wanted = (estimate + estimate / 4).div_ceil(options.task_memory as u64);
    let n = wanted.clamp(1, (file_len >> 16).max(1)) as usize;
    let planned = plan_ranges(&input, n).context(job.input.clone())?;
    let mut header = planned.header.clone();
    let (so, ss) = order.header_values();
    header.set_sort_order(so, ss.as_deref());
    add_program(&mut header, job.program.as_ref());
    let index = out.index.as_ref().map(|&(_, bai)| {
        let ix = OnTheFlyIndex::new(&header, bai);
        IndexBuilder::new(ix.format(), ix.n_ref(), 0).geometry()
    });
    let prefix = temp_prefix(job.temp_prefix.as_deref(), Some(data), rt.temp_dir());
    let work_dir = create_work_dir(&prefix)?;
    let ranges = planned
        .ranges
        .iter()
        .map(|r| ByteRange {
            start: r.start,
            end: (r.end != u64::MAX).then_some(r.end),
        })
        .collect();
    Ok(SortPlan {
        job: job.clone(),
        options: options.clone(),
        input,
        n_ref: header.references().len(),
        header: HeaderData::of(&header),
        ranges,
        work_dir,
        level: level.libdeflate(),
        index,
        warnings,
    })
}

/// "BAM", "CRAM", "SAM" or "bgzipped SAM", from the first bytes.
fn input_format(path: &Path) -> anyhow::Result<&'static str> {
    let mut file = File::open(path).context("cannot open")?;
    let mut head = Vec::new();
    file.by_ref().take(18).read_to_end(&mut head)?;
    if head.starts_with(b"CRAM") {
        return Ok("CRAM");
    }
    if !sortase_bgzf::is_bgzf(&head) {
        return Ok("SAM");
    }
    file.seek(SeekFrom::Start(0))?;
    let mut magic = Vec::new();
    sortase_bgzf::SeekReader::new(BufReader::new(file))
        .take(4)
        .read_to_end(&mut magic)?;
    Ok(if magic == b"BAM\x01" {
        "BAM"
    } else {
        "bgzipped SAM"
    })
}

/// The file's uncompressed size, estimated from the compression ratio of up to 16 BGZF blocks at
/// evenly spaced offsets (a whole scan of block headers would read the whole file).
fn estimate_record_bytes(path: &Path, file_len: u64) -> anyhow::Result<u64> {
    const SAMPLES: u64 = 16;
    let mut file = File::open(path)?;
    let (mut compressed, mut uncompressed) = (0u64, 0u64);
    let mut seen = Vec::new();
    for k in 0..SAMPLES {
        let Some(block) = scanner::find_block_start_in(&mut file, file_len * k / SAMPLES)? else {
            break;
        };
        if seen.contains(&block) {
            continue;
        }
        seen.push(block);
        let mut head = [0u8; 18];
        file.seek(SeekFrom::Start(block))?;
        file.read_exact(&mut head)?;
        let size = sortase_bgzf::parse_header(&head)
            .map_err(|reason| sortase_bgzf::BgzfError::BadHeader {
                offset: block,
                reason,
            })?
            .block_size as u64;
        let mut isize = [0u8; 4];
        file.seek(SeekFrom::Start(block + size - 4))?;
        file.read_exact(&mut isize)?;
        compressed += size;
        uncompressed += u64::from(u32::from_le_bytes(isize));
    }
    Ok(match compressed {
        0 => file_len,
        c => (u128::from(file_len) * u128::from(uncompressed) / u128::from(c)) as u64,
    })
}

/// Creates `PREFIX.sortase-tasks-PID-N.tmp/` (inside `PREFIX` if it is a directory); absolute.
fn create_work_dir(prefix: &Path) -> anyhow::Result<PathBuf> {
    let base = if prefix.is_dir() {
        prefix.join("sortase")
    } else {
        prefix.to_path_buf()
    };
    for n in 0..1000 {
        let mut name = base.as_os_str().to_owned();
        name.push(format!(".sortase-tasks-{}-{n}.tmp", std::process::id()));
        let path = PathBuf::from(name);
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(std::fs::canonicalize(&path)?),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create work directory {}", path.display()))
            }
        }
    }
    bail!("cannot create a work directory next to {}", base.display())
}

/// The outputs of one stage by task number, each once (repeats of a task, e.g. a retry that also
/// finished, are ignored), checked complete.
fn complete<'a, T>(
    outputs: &'a [T],
    stage: &str,
    number: impl Fn(&T) -> (usize, usize),
) -> Result<Vec<&'a T>> {
    let Some(parts) = outputs.first().map(|o| number(o).1) else {
        return Err(Error::argument(format!("no {stage} outputs")));
    };
    let mut by_part: Vec<Option<&T>> = vec![None; parts];
    for o in outputs {
        let (part, of) = number(o);
        if of != parts || part >= parts {
            return Err(Error::argument(format!(
                "{stage} output {part} of {of} does not belong with the others ({parts} tasks)"
            )));
        }
        by_part[part].get_or_insert(o);
    }
    by_part
        .iter()
        .enumerate()
        .map(|(i, o)| o.ok_or_else(|| Error::argument(format!("no output of {stage} task {i}"))))
        .collect()
}

impl SortPlan {
    /// The planned byte ranges of the input.
    pub fn ranges(&self) -> &[ByteRange] {
        &self.ranges
    }

    /// The work directory (every task's files go there).
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The job.
    pub fn job(&self) -> &SortJob {
        &self.job
    }

    /// Stage 1: one count task per byte range.
    pub fn count_tasks(&self) -> Vec<SortTask> {
        (0..self.ranges.len())
            .map(|i| {
                SortTask::Count(CountTask {
                    input: self.input.clone(),
                    n_ref: self.n_ref,
                    range: i,
                    start: self.ranges[i].start,
                    later_starts: self.ranges[i + 1..].iter().map(|r| r.start).collect(),
                })
            })
            .collect()
    }

    /// Stage 2 from the outputs of stage 1 (in any order): one map task per proved range, walking
    /// from the first range to the end of the file (a range whose planned start proved not to be
    /// a record start was absorbed by the range before it, and is skipped with its count).
    pub fn map_tasks(&self, counts: &[CountOutput]) -> Result<Vec<SortTask>> {
        let mut by_range: Vec<Option<&CountOutput>> = vec![None; self.ranges.len()];
        for c in counts {
            if self.ranges.get(c.range).map(|r| r.start) != Some(c.start) {
                return Err(Error::argument(format!(
                    "count output for range {} does not belong to this plan",
                    c.range
                )));
            }
            by_range[c.range].get_or_insert(c);
        }
        let mut proved = Vec::new();
        let mut i = 0;
        loop {
            let c = by_range[i]
                .ok_or_else(|| Error::argument(format!("no output of count task {i}")))?;
            if let Some(e) = &c.error {
                return Err(e.to_error());
            }
            proved.push(c);
            let Some(end) = c.end else { break };
            match self.ranges[i + 1..].iter().position(|r| r.start == end) {
                Some(k) => i += 1 + k,
                None => {
                    return Err(Error::argument(format!(
                        "count output for range {i} ends at {end:#x}, no planned range start"
                    )))
                }
            }
        }
        let order = self.job.order.clone();
        let mut first_seq = 0;
        Ok(proved
            .iter()
            .enumerate()
            .map(|(part, c)| {
                let task = MapTask {
                    input: self.input.clone(),
                    n_ref: self.n_ref,
                    order: order.clone(),
                    part,
                    parts: proved.len(),
                    start: c.start,
                    end: c.end,
                    first_seq,
                    records: c.records,
                    record_bytes: c.record_bytes,
                    run_path: self.work_dir.join(format!("map-{part:06}.run")),
                };
                first_seq += c.records;
                SortTask::Map(task)
            })
            .collect())
    }

    /// Stage 3 from the outputs of stage 2 (in any order): chooses the split points from every
    /// range's samples as the sorter does (on `rt`'s threads), and cuts the key ranges into
    /// stretches of consecutive ranges, one per reduce task.
    pub fn reduce_tasks(&self, maps: &[MapOutput], rt: &Runtime) -> Result<Vec<SortTask>> {
        let maps = complete(maps, "map", |m| (m.part, m.parts))?;
        let order = self.job.order.resolve()?;
        let samples: Vec<SplitPoint> = maps
            .iter()
            .flat_map(|m| &m.samples)
            .map(|s| s.to_split(&order))
            .collect();
        let total = maps.iter().map(|m| m.record_bytes).sum();
        let splits = rt.install(|| choose_splits(&order, &RangePlan::default(), samples, total));
        let runs: Vec<_> = maps.iter().map(|m| m.run.to_run_file()).collect();
        let ranges = splits.len() + 1;
        let n = self
            .options
            .reduce_tasks
            .unwrap_or(maps.len())
            .clamp(1, ranges);
        let bound = |k: usize| k.checked_sub(1).and_then(|j| splits.get(j));
        Ok((0..n)
            .map(|part| {
                let (a, b) = (part * ranges / n, (part + 1) * ranges / n);
                let (lo, hi) = (bound(a), bound(b));
                let runs = runs
                    .iter()
                    .filter_map(|run| {
                        start_block(&order, run, lo, hi).map(|block| RunStart {
                            path: run.path.clone(),
                            offset: run.blocks[block].offset,
                        })
                    })
                    .collect();
                SortTask::Reduce(ReduceTask {
                    order: self.job.order.clone(),
                    level: self.level,
                    index: self.index,
                    part,
                    parts: n,
                    first_range: a,
                    total_ranges: ranges,
                    bounds: (a..=b).map(|k| bound(k).map(Sample::of)).collect(),
                    runs,
                    total_runs: maps.len(),
                    part_path: self.work_dir.join(format!("reduce-{part:06}.bgzf")),
                    sidecar_path: self.work_dir.join(format!("reduce-{part:06}.json")),
                })
            })
            .collect())
    }

    /// Writes the output from the outputs of stage 3 (in any order) exactly as `SortJob::run`
    /// does: header blocks, every key range's blocks, the EOF block, and with `--write-index` the
    /// index replayed from the ranges' summaries; both files under temporary names, renamed when
    /// complete. Then removes the work directory. On error the work directory stays (retry
    /// `finish`, or [`SortPlan::abort`]).
    pub fn finish(&self, reduces: &[ReduceOutput], rt: &Runtime) -> Result<SortReport> {
        self.finish_inner(reduces, rt).map_err(Error::from)
    }

    fn finish_inner(&self, reduces: &[ReduceOutput], rt: &Runtime) -> anyhow::Result<SortReport> {
        let parts = complete(reduces, "reduce", |r| (r.part, r.parts))?;
        let total_ranges = parts[0].total_ranges;
        let mut next = 0;
        for p in &parts {
            if p.first_range != next || p.total_ranges != total_ranges {
                bail_argument!(
                    "reduce output {} does not continue key range {next}",
                    p.part
                );
            }
            next += p.ranges;
        }
        if next != total_ranges {
            bail_argument!("reduce outputs cover {next} of {total_ranges} key ranges");
        }
        let order = self.job.order.resolve()?;
        let out = resolve_output(&self.job.output, DEFAULT_LEVEL, order, &mut Vec::new())?;
        let index = out.index.as_ref().map(|(p, bai)| (p.as_path(), *bai));
        let clock = PhaseClock::new("finish");
        let header = self.header.to_header();
        let (_, mut writer) =
            range_output::open(out.data.as_deref(), index, out.format, &header, None)?;
        let name = writer.name.clone();
        for p in &parts {
            let at = |path: &Path| path.display().to_string();
            let side: PartIndex = serde_json::from_slice(
                &std::fs::read(&p.sidecar_path).with_context(|| at(&p.sidecar_path))?,
            )
            .with_context(|| at(&p.sidecar_path))?;
            if side.ranges.len() != p.ranges {
                bail!(
                    "{}: {} key ranges, expected {}",
                    at(&p.sidecar_path),
                    side.ranges.len(),
                    p.ranges
                );
            }
            let mut part =
                BufReader::new(File::open(&p.part_path).with_context(|| at(&p.part_path))?);
            for r in side.ranges {
                rt.check_cancelled()?;
                let mut bytes = vec![0; r.bytes as usize];
                part.read_exact(&mut bytes)
                    .with_context(|| at(&p.part_path))?;
                let blocks = EncodedBlocks {
                    bytes,
                    blocks: r.blocks,
                };
                writer
                    .write(EncodedRange::Bam(blocks, r.summary))
                    .with_context(|| name.clone())?;
            }
        }
        rt.check_cancelled()?;
        writer.finish(true)?;
        self.abort()?;
        let mut report = SortReport {
            records: parts.iter().map(|p| p.records).sum(),
            record_bytes: parts.iter().map(|p| p.record_bytes).sum(),
            runs_spilled: parts[0].total_runs as u64,
            final_fan_in: parts[0].total_runs,
            ranges: total_ranges,
            threads: rt.threads(),
            phases: clock.finish(),
            warnings: self.warnings.clone(),
            ..SortReport::default()
        };
        report.outputs = out.data.into_iter().collect();
        report.outputs.extend(out.index.map(|(p, _)| p));
        Ok(report)
    }

    /// Removes the work directory and every task file in it (a job given up, or after
    /// [`SortPlan::finish`], which calls it).
    pub fn abort(&self) -> Result<()> {
        match std::fs::remove_dir_all(&self.work_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::from(
                anyhow::Error::new(e)
                    .context(format!("{}: cannot remove", self.work_dir.display())),
            )),
            _ => Ok(()),
        }
    }

    /// The plan as JSON.
    pub fn to_json(&self) -> String {
        // INVARIANT: every field serialises (plain data, string map keys only).
        serde_json::to_string(self).expect("a plan serialises")
    }

    /// A plan from [`SortPlan::to_json`]'s text.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| Error::new(ErrorKind::Argument, format!("plan JSON: {e}")))
    }
}
