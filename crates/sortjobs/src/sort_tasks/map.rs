//! Stage 2 ([`MapTask`]): one byte range sorted in memory into one run, with its split-point samples.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::RecordBatch;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::options::Order;
use sortase_exec::runtime::Runtime;
use sortase_exec::wire::{RunIndex, Sample, WorkFile};
use sortase_index::range::{RangeStream, RecordRange};
use sortase_sort::merge::memory_seq;
use sortase_sort::ranges::{RangePlan, SplitPoint};
use sortase_sort::run::write_run;
use sortase_sort::{sort_batches, SortOrder};
use std::path::{Path, PathBuf};

/// Memory a map task charges per record besides its bytes: its sort entry (as the sorter).
const ENTRY_COST: usize = 16;

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
        let mut stream =
            RangeStream::open(&self.input, &range, self.n_ref).context(name.clone())?;
        let mut held = MapBatches::new(rt, "sort task: records");
        while let Some(batch) = stream.next_batch().context(name.clone())? {
            rt.check_cancelled()?;
            if batch.is_empty() {
                continue;
            }
            held.push(rt, batch, self.first_seq + held.records(), || {
                format!(
                    "the range of {} records ({} bytes)",
                    self.records, self.record_bytes
                )
            })?;
        }
        if (held.records(), held.bytes()) != (self.records, self.record_bytes) {
            return Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{name}: the range holds {} records ({} bytes), counted {} ({} bytes): \
                     the input changed",
                    held.records(),
                    held.bytes(),
                    self.records,
                    self.record_bytes
                ),
            )
            .into());
        }
        held.into_output(rt, order, &self.run_path, self.part, self.parts)
    }
}

/// The records a map task holds until it sorts them into its run: batches charged to the
/// runtime's memory pool ([`hold`]), each with its first record's input sequence number. Shared
/// by [`MapTask`], the dataset's map task (`agd_map.rs`) and fq2bam's sort task (crates/align).
pub struct MapBatches {
    memory: sortase_exec::memory::Reservation,
    batches: Vec<RecordBatch>,
    first_seqs: Vec<u64>,
    records: u64,
    bytes: u64,
}

impl MapBatches {
    /// No records yet; `label` names the memory reservation.
    pub fn new(rt: &Runtime, label: &str) -> Self {
        Self {
            memory: rt.memory().reservation(label),
            batches: Vec::new(),
            first_seqs: Vec::new(),
            records: 0,
            bytes: 0,
        }
    }

    /// Records held.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Their bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `batch`, whose first record has input sequence number `first_seq`, once the pool
    /// has its memory ([`hold`]; `what`: the task's records, for the message).
    pub fn push(
        &mut self,
        rt: &Runtime,
        batch: RecordBatch,
        first_seq: u64,
        what: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        hold(rt, &mut self.memory, &batch, what)?;
        self.first_seqs.push(first_seq);
        self.records += batch.len() as u64;
        self.bytes += batch.bytes().len() as u64;
        self.batches.push(batch);
        Ok(())
    }

    /// Sorts the records in `order` into one run at `run_path` ([`sort_into_run`]): the output of
    /// map task `part` of `parts`.
    pub fn into_output(
        self,
        rt: &Runtime,
        order: SortOrder,
        run_path: &Path,
        part: usize,
        parts: usize,
    ) -> anyhow::Result<MapOutput> {
        let (run, samples) = sort_into_run(rt, order, &self.batches, &self.first_seqs, run_path)?;
        Ok(MapOutput {
            part,
            parts,
            run,
            samples,
            records: self.records,
            record_bytes: self.bytes,
        })
    }
}

/// Sorts `batches` (their first records' sequence numbers `first_seqs`) in memory as the sorter
/// does and writes them as one run at `run_path` (under a temporary name, renamed when complete);
/// returns the run's index and the candidate split points among them.
fn sort_into_run(
    rt: &Runtime,
    order: SortOrder,
    batches: &[RecordBatch],
    first_seqs: &[u64],
    run_path: &Path,
) -> anyhow::Result<(RunIndex, Vec<Sample>)> {
    let entries = rt.install(|| sort_batches(order, batches))?;
    let samples = samples(&order, batches, first_seqs);
    rt.check_cancelled()?;
    let temp = WorkFile::new(run_path)?;
    let mut run = rt.install(|| {
        write_run(
            temp.path(),
            order,
            entries.iter().map(|&(_, loc)| {
                let record = batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize);
                (memory_seq(first_seqs, loc), record)
            }),
        )
    })?;
    temp.commit()?;
    run.path = run_path.to_path_buf();
    Ok((RunIndex::from(&run), samples))
}

/// Charges one batch of a map task to `memory` (its bytes and a sort entry per record), waiting for
/// other jobs on the runtime's pool to give memory back; an error when the task's records cannot
/// fit in the pool at all (`what`: the records, for the message).
fn hold(
    rt: &Runtime,
    memory: &mut sortase_exec::memory::Reservation,
    batch: &RecordBatch,
    what: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let cost = batch.allocated() + batch.len() * ENTRY_COST;
    if memory.size() + cost > rt.memory().limit() {
        return Err(Error::argument(format!(
            "{} needs more than the runtime's memory pool ({} bytes); plan with a smaller \
             task_memory",
            what(),
            rt.memory().limit()
        ))
        .into());
    }
    // Within the pool's limit: wait for other jobs on the pool to give memory back.
    let cancel = rt.cancel_flag().clone();
    if memory.grow_waiting(cost, || cancel.is_cancelled()).is_err() {
        rt.check_cancelled()?;
    }
    Ok(())
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
