//! The three stages of a sort cut into tasks ([`super::sort`] plans them and puts them together):
//!
//! 1. [`CountTask`]: one byte range of the input; counts its records and record bytes, so that every
//!    range knows the input sequence number of its first record. It also proves the range's end: a
//!    planned boundary that is not a record start (the boundary finder is a heuristic) is replaced by
//!    the next planned boundary that is, and the ranges in between are dropped by the driver.
//! 2. [`MapTask`]: reads its range, sorts it in memory exactly as the sorter sorts what it holds
//!    ([`sortase_sort::sort_batches`]: same order, ties in input order), keeps the records whose
//!    sequence number is a multiple of [`SAMPLE_EVERY`] as candidate split points, and writes one run
//!    (crates/sort's run format, with sequence numbers and a sparse index).
//! 3. [`ReduceTask`]: a stretch of consecutive key ranges. Each run is opened once at the stretch's
//!    first record ([`sortase_sort::start_block`], [`sortase_sort::open_run_from`]); every key range
//!    is merged from all runs (ties by run number, which is input order) and encoded by the sort's
//!    own [`RangeEncoder`], so its BGZF blocks and index summary are those `SortJob::run` writes.
//!
//! [`SAMPLE_EVERY`]: sortase_sort::ranges::SAMPLE_EVERY

use super::wire::{RunIndex, Sample, WorkFile};
use crate::error::{Error, ErrorKind, Result};
use crate::options::Order;
use crate::range_output::{EncodedRange, RangeEncoder};
use crate::runtime::Runtime;
use crate::writer::OutFormat;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::{BamError, Header, RecordBatch};
use sortase_bgzf::CompressionLevel;
use sortase_index::range::{RangeStream, RecordRange};
use sortase_index::RangeSummary;
use sortase_sort::merge::{memory_seq, merge_until, Source};
use sortase_sort::ranges::{RangePlan, SplitPoint};
use sortase_sort::run::write_run;
use sortase_sort::{open_run_from, sort_batches, RangeSource, SortError, SortOrder};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Memory a map task charges per record besides its bytes: its sort entry (as the sorter).
const ENTRY_COST: usize = 16;

/// An error a task reports as data instead of failing (see [`CountOutput::error`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    /// The error's kind.
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
}

impl From<&Error> for TaskError {
    fn from(e: &Error) -> Self {
        Self {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

impl TaskError {
    /// The error again.
    pub fn to_error(&self) -> Error {
        Error::new(self.kind, self.message.clone())
    }
}

/// Stage 1: count the records of one byte range of the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountTask {
    /// The input BAM.
    pub input: PathBuf,
    /// References in its header.
    pub n_ref: usize,
    /// The range's number in the plan.
    pub range: usize,
    /// Virtual offset of the range's first record.
    pub start: u64,
    /// Planned starts of the later ranges, ascending: the range ends at the first of them that is a
    /// record start (normally the first one), or at the end of the file.
    pub later_starts: Vec<u64>,
}

/// What a [`CountTask`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountOutput {
    /// The range's number in the plan.
    pub range: usize,
    /// Virtual offset of the range's first record.
    pub start: u64,
    /// Where the range proved to end (a later range's start; `None`: the end of the file).
    pub end: Option<u64>,
    /// Records in `[start, end)`.
    pub records: u64,
    /// Their bytes, `block_size` prefixes included (as the sorter counts them).
    pub record_bytes: u64,
    /// Reading failed. Reported, not raised: a range that starts at a false boundary may fail, and
    /// only matters if the driver's walk from the first range reaches it.
    pub error: Option<TaskError>,
}

impl CountTask {
    /// Counts the range.
    pub fn run(&self, rt: &Runtime) -> Result<CountOutput> {
        let mut next = 0;
        loop {
            let end = self.later_starts.get(next).copied();
            let range = RecordRange {
                start: self.start,
                end: end.unwrap_or(u64::MAX),
            };
            let mut out = CountOutput {
                range: self.range,
                start: self.start,
                end,
                records: 0,
                record_bytes: 0,
                error: None,
            };
            match count(&self.input, &range, self.n_ref, rt, &mut out) {
                Ok(()) => return Ok(out),
                Err(Counted::Boundary(found)) => {
                    // Read from a true record start, `found` is a true record start: end at the
                    // first planned start at or after it.
                    next = self
                        .later_starts
                        .partition_point(|&s| s < found)
                        .max(next + 1);
                }
                Err(Counted::Failed(e)) if e.kind() == ErrorKind::Cancelled => return Err(e),
                Err(Counted::Failed(e)) => {
                    out.error = Some(TaskError::from(&e));
                    return Ok(out);
                }
            }
        }
    }
}

enum Counted {
    /// The planned end is not a record start; the next record starts at this virtual offset.
    Boundary(u64),
    Failed(Error),
}

fn count(
    input: &Path,
    range: &RecordRange,
    n_ref: usize,
    rt: &Runtime,
    out: &mut CountOutput,
) -> std::result::Result<(), Counted> {
    let failed = |e: BamError| match e {
        BamError::RangeBoundary { found, .. } => Counted::Boundary(found),
        e => Counted::Failed(Error::from(e).context(input.display().to_string())),
    };
    let mut stream = RangeStream::open(input, range, n_ref).map_err(failed)?;
    while let Some(batch) = stream.next_batch().map_err(failed)? {
        rt.check_cancelled().map_err(Counted::Failed)?;
        out.records += batch.len() as u64;
        out.record_bytes += batch.bytes().len() as u64;
    }
    Ok(())
}

/// Stage 2: sort one byte range into one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapTask {
    /// The input BAM.
    pub input: PathBuf,
    /// References in its header.
    pub n_ref: usize,
    /// The order.
    pub order: Order,
    /// This task's number (runs are numbered in input order).
    pub part: usize,
    /// Map tasks in the plan.
    pub parts: usize,
    /// Virtual offset of the first record.
    pub start: u64,
    /// Virtual offset of the next range's first record (`None`: the end of the file).
    pub end: Option<u64>,
    /// Input sequence number of the first record.
    pub first_seq: u64,
    /// Records in the range (from stage 1; checked).
    pub records: u64,
    /// Their bytes (from stage 1; checked).
    pub record_bytes: u64,
    /// Where the run goes.
    pub run_path: PathBuf,
}

/// What a [`MapTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapOutput {
    /// The task's number.
    pub part: usize,
    /// Map tasks in the plan.
    pub parts: usize,
    /// The run and its sparse index.
    pub run: RunIndex,
    /// Candidate split points: the records whose input sequence number is a multiple of
    /// [`sortase_sort::ranges::SAMPLE_EVERY`].
    pub samples: Vec<Sample>,
    /// Records sorted.
    pub records: u64,
    /// Their bytes.
    pub record_bytes: u64,
}

impl MapTask {
    /// Reads, sorts and writes the range.
    pub fn run(&self, rt: &Runtime) -> Result<MapOutput> {
        self.run_inner(rt)
            .with_context(|| format!("sort map task {}", self.part))
            .map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<MapOutput> {
        let order = self.order.resolve()?;
        let name = self.input.display().to_string();
        let range = RecordRange {
            start: self.start,
            end: self.end.unwrap_or(u64::MAX),
        };
        let mut memory = rt.memory().reservation("sort task: records");
        let mut stream =
            RangeStream::open(&self.input, &range, self.n_ref).context(name.clone())?;
        let (mut batches, mut first_seqs) = (Vec::<RecordBatch>::new(), Vec::new());
        let (mut seq, mut bytes) = (self.first_seq, 0u64);
        while let Some(batch) = stream.next_batch().context(name.clone())? {
            rt.check_cancelled()?;
            if batch.is_empty() {
                continue;
            }
            let cost = batch.allocated() + batch.len() * ENTRY_COST;
            let cancel = rt.cancel_flag().clone();
            if let Err(e) = memory.grow_waiting(cost, || cancel.is_cancelled()) {
                rt.check_cancelled()?;
                return Err(Error::argument(format!(
                    "the range of {} records needs more memory than the runtime's pool has \
                     ({e}); plan with a smaller task_memory",
                    self.records
                ))
                .into());
            }
            first_seqs.push(seq);
            seq += batch.len() as u64;
            bytes += batch.bytes().len() as u64;
            batches.push(batch);
        }
        if (seq - self.first_seq, bytes) != (self.records, self.record_bytes) {
            return Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{name}: the range holds {} records ({bytes} bytes), counted {} ({} bytes): \
                     the input changed",
                    seq - self.first_seq,
                    self.records,
                    self.record_bytes
                ),
            )
            .into());
        }
        let entries = rt.install(|| sort_batches(order, &batches));
        let samples = samples(&order, &batches, &first_seqs);
        rt.check_cancelled()?;
        let temp = WorkFile::new(&self.run_path)?;
        let mut run = rt.install(|| {
            write_run(
                temp.path(),
                order,
                entries.iter().map(|&(_, loc)| {
                    let record = batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize);
                    (memory_seq(&first_seqs, loc), record)
                }),
            )
        })?;
        temp.commit()?;
        run.path = self.run_path.clone();
        Ok(MapOutput {
            part: self.part,
            parts: self.parts,
            run: RunIndex::from(&run),
            samples,
            records: self.records,
            record_bytes: bytes,
        })
    }
}

/// The candidate split points among `batches` (as `Sorter::push` takes them).
fn samples(order: &SortOrder, batches: &[RecordBatch], first_seqs: &[u64]) -> Vec<Sample> {
    let every = RangePlan::default().sample_every;
    let mut out = Vec::new();
    for (batch, &first) in batches.iter().zip(first_seqs) {
        let mut seq = first.next_multiple_of(every);
        while seq < first + batch.len() as u64 {
            let rec = &batch.raw((seq - first) as usize)[4..];
            out.push(Sample::of(&SplitPoint::new(order, rec, seq)));
            seq += every;
        }
    }
    out
}

/// Where a reduce task starts reading one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStart {
    /// The run file.
    pub path: PathBuf,
    /// File offset of the block holding the stretch's first record of this run.
    pub offset: u64,
}

/// Stage 3: merge and encode a stretch of consecutive key ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReduceTask {
    /// The order.
    pub order: Order,
    /// The output's libdeflate level.
    pub level: u8,
    /// The index geometry (`min_shift`, depth) with `--write-index`.
    pub index: Option<(u32, u32)>,
    /// This task's number.
    pub part: usize,
    /// Reduce tasks in the plan.
    pub parts: usize,
    /// The number of the stretch's first key range.
    pub first_range: usize,
    /// Key ranges of the whole output.
    pub total_ranges: usize,
    /// Bounds of the stretch's key ranges: range `first_range + k` is `[bounds[k], bounds[k + 1])`
    /// (`None`: the start or the end of the output).
    pub bounds: Vec<Option<Sample>>,
    /// The runs that hold records of the stretch, in input order.
    pub runs: Vec<RunStart>,
    /// Map tasks (runs) in the plan.
    pub total_runs: usize,
    /// Where the BGZF blocks go.
    pub part_path: PathBuf,
    /// Where the sidecar ([`PartIndex`]) goes.
    pub sidecar_path: PathBuf,
}

/// What a [`ReduceTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReduceOutput {
    /// The task's number.
    pub part: usize,
    /// Reduce tasks in the plan.
    pub parts: usize,
    /// The number of its first key range.
    pub first_range: usize,
    /// Key ranges it encoded.
    pub ranges: usize,
    /// Key ranges of the whole output.
    pub total_ranges: usize,
    /// Map tasks (runs) in the plan.
    pub total_runs: usize,
    /// Records written.
    pub records: u64,
    /// Their bytes.
    pub record_bytes: u64,
    /// The BGZF blocks of its key ranges, back to back.
    pub part_path: PathBuf,
    /// Their sizes and index summaries ([`PartIndex`] as JSON).
    pub sidecar_path: PathBuf,
}

/// The sidecar of a part file: per key range, its blocks and index summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PartIndex {
    /// The key ranges in order.
    pub ranges: Vec<EncodedRangeIndex>,
}

/// One key range of a part file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EncodedRangeIndex {
    /// Bytes of its blocks.
    pub bytes: u64,
    /// `(compressed size, uncompressed size)` of each block.
    pub blocks: Vec<(u32, u32)>,
    /// Its index summary (offsets local to the range), with `--write-index`.
    pub summary: Option<RangeSummary>,
}

/// The records of one key range: the merge of the runs' heads up to `limit`, counted.
struct KeyRange<'s> {
    order: SortOrder,
    sources: &'s mut [Source<'static>],
    limit: Option<&'s SplitPoint>,
    records: u64,
    bytes: u64,
}

impl RangeSource for KeyRange<'_> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        let (records, bytes) = (&mut self.records, &mut self.bytes);
        merge_until(self.order, self.sources, self.limit, |_, _, r| {
            *records += 1;
            *bytes += r.len() as u64;
            f(r)
        })
    }
}

impl ReduceTask {
    /// Merges and encodes the stretch.
    pub fn run(&self, rt: &Runtime) -> Result<ReduceOutput> {
        rt.install(|| self.run_inner(rt))
            .with_context(|| format!("sort reduce task {}", self.part))
            .map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<ReduceOutput> {
        let order = self.order.resolve()?;
        if self.bounds.len() < 2 {
            return Err(Error::argument("a reduce task needs at least one key range").into());
        }
        let bounds: Vec<Option<SplitPoint>> = self
            .bounds
            .iter()
            .map(|b| b.as_ref().map(|s| s.to_split(&order)))
            .collect();
        let mut sources = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            if let Some(r) = open_run_from(&order, &run.path, run.offset, bounds[0].as_ref())? {
                sources.push(Source::Run(r));
            }
        }
        let level = CompressionLevel::from_libdeflate(self.level);
        let encoder = RangeEncoder::new(OutFormat::Bam(level), Header::default(), self.index);
        let part = WorkFile::new(&self.part_path)?;
        let file = std::fs::File::create(part.path())
            .with_context(|| format!("{}: cannot create", part.path().display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut sidecar = PartIndex::default();
        let (mut records, mut record_bytes) = (0, 0);
        for limit in &bounds[1..] {
            rt.check_cancelled()?;
            let mut range = KeyRange {
                order,
                sources: &mut sources,
                limit: limit.as_ref(),
                records: 0,
                bytes: 0,
            };
            let EncodedRange::Bam(blocks, summary) = encoder.encode(&mut range)? else {
                return Err(
                    Error::new(ErrorKind::Internal, "a BAM encoder gave no BGZF blocks").into(),
                );
            };
            records += range.records;
            record_bytes += range.bytes;
            out.write_all(&blocks.bytes)
                .with_context(|| part.path().display().to_string())?;
            sidecar.ranges.push(EncodedRangeIndex {
                bytes: blocks.bytes.len() as u64,
                blocks: blocks.blocks,
                summary,
            });
        }
        out.flush()
            .with_context(|| part.path().display().to_string())?;
        drop(out);
        let side = WorkFile::new(&self.sidecar_path)?;
        let json = serde_json::to_vec(&sidecar).context("part index JSON")?;
        std::fs::write(side.path(), json)
            .with_context(|| format!("{}: cannot write", side.path().display()))?;
        part.commit()?;
        side.commit()?;
        Ok(ReduceOutput {
            part: self.part,
            parts: self.parts,
            first_range: self.first_range,
            ranges: bounds.len() - 1,
            total_ranges: self.total_ranges,
            total_runs: self.total_runs,
            records,
            record_bytes,
            part_path: self.part_path.clone(),
            sidecar_path: self.sidecar_path.clone(),
        })
    }
}
