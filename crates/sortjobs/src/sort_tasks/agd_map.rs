//! A sort of an AGD dataset as tasks ([`SortJob::plan_dataset`]): the dataset's chunks are the map
//! tasks' inputs instead of byte ranges, and the finished BAM is byte-identical to `sortase sort`
//! of the BAM `sortase agd export` writes.
//!
//! Why: the bytes of a sort depend on the records, their input sequence numbers and the total
//! record bytes alone (see [`crate::sort_tasks`]). A chunk's records are the exported BAM's
//! records byte for byte (`sortase::agd::AgdExportJob` writes the same batches, with the
//! `duplicate` group's flag 0x400 applied), and the manifest gives each chunk's first ordinal,
//! which is the exported BAM's sequence number of that record. So no count stage is needed: the
//! plan's count stage has no tasks, each [`AgdMapTask`] decodes a run of consecutive chunks, sorts
//! it and reports its record bytes with its samples, and the reduce stage and the finish are the
//! BAM sort's. The header is the export's (the manifest's text and references) with `SO` and
//! `@PG` set as `sortase sort` sets them.
//!
//! The plan cuts the chunks into runs of about `task_memory` of record data. It estimates a
//! chunk's record bytes from the first chunk's Parquet footers (the uncompressed size of its
//! column data); where they cannot be read (a driver that holds only the manifest) every chunk is
//! a map task of its own. The cut changes which task sorts which records, never the output.

use super::map::MapBatches;
use super::plan::{check_output, new_plan};
use super::{MapOutput, PlanOptions, SortPlan};
use crate::sort::SortJob;
use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::{ChunkEntry, ExtraGroup, Group};
use sortase_bam::RecordBatch;
use sortase_exec::agd::{
    chunk_batch_with, columns::duplicate_group, dataset_header, estimate_record_bytes,
    open_manifest, runs,
};
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::options::Order;
use sortase_exec::runtime::Runtime;
use std::path::{Path, PathBuf};

/// The dataset a [`SortPlan`] reads: its chunks cut into the map tasks' runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DatasetInput {
    /// One run of consecutive chunks per map task, in chunk order.
    pub runs: Vec<Vec<ChunkEntry>>,
    /// The dataset's `duplicate` group (agd markdup), applied to the flags as export applies it.
    pub duplicate: Option<ExtraGroup>,
}

/// Stage 2 of a dataset's sort: decode a run of consecutive chunks, sort it into one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMapTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The order.
    pub order: Order,
    /// This task's number (runs are numbered in chunk order).
    pub part: usize,
    /// Map tasks in the plan.
    pub parts: usize,
    /// The chunks, consecutive (as the manifest lists them).
    pub chunks: Vec<ChunkEntry>,
    /// The dataset's `duplicate` group, whose files the task also reads.
    #[serde(default)]
    pub duplicate: Option<ExtraGroup>,
    /// Where the run goes.
    pub run_path: PathBuf,
}

impl AgdMapTask {
    /// The files the task reads: every core group's file of each chunk, and the `duplicate`
    /// group's (for drivers that fetch them from object storage).
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for c in &self.chunks {
            out.extend(Group::ALL.map(|g| sortase_agd::chunk_path(&self.input, g, c.index)));
            if let Some(d) = &self.duplicate {
                out.push(sortase_agd::extra::extra_path(&self.input, d, c.index));
            }
        }
        out
    }

    /// Decodes, sorts and writes the chunks.
    pub fn run(&self, rt: &Runtime) -> Result<MapOutput> {
        self.run_inner(rt)
            .with_context(|| {
                format!(
                    "agd sort map task {} of {}",
                    self.part,
                    self.input.display()
                )
            })
            .map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<MapOutput> {
        let order = self.order.resolve()?;
        let records: u64 = self.chunks.iter().map(|c| c.records).sum();
        let mut held = MapBatches::new(rt, "agd sort task: records");
        // A window of one chunk per thread decoded at a time; the first error in chunk order.
        for window in self.chunks.chunks(rt.threads().max(1)) {
            rt.check_cancelled()?;
            let decoded: Vec<anyhow::Result<RecordBatch>> = rt.install(|| {
                window
                    .par_iter()
                    .map(|c| chunk_batch_with(&self.input, self.duplicate.as_ref(), c))
                    .collect()
            });
            for (chunk, batch) in window.iter().zip(decoded) {
                let batch = batch?;
                if batch.len() as u64 != chunk.records {
                    return Err(Error::new(
                        ErrorKind::Input,
                        format!(
                            "chunk {} holds {} records, the plan says {}",
                            chunk.index,
                            batch.len(),
                            chunk.records
                        ),
                    )
                    .into());
                }
                held.push(rt, batch, chunk.first, || {
                    format!("the {} chunks of {records} records", self.chunks.len())
                })?;
            }
        }
        held.into_output(rt, order, &self.run_path, self.part, self.parts)
    }
}

impl SortJob {
    /// Plans the sort of the AGD dataset `input` (a directory) as tasks with
    /// [`PlanOptions::default`] (see [`SortJob::plan_dataset_with`]).
    pub fn plan_dataset(&self, rt: &Runtime) -> Result<SortPlan> {
        self.plan_dataset_with(rt, &PlanOptions::default())
    }

    /// Plans the sort of the AGD dataset `input` as tasks: the count stage has no tasks, the map
    /// stage one task per run of consecutive chunks (about `task_memory` of records each), BAM
    /// output to a file only. The finished output is byte-identical to [`SortJob::run`] on the
    /// BAM `sortase agd export` writes from the dataset. (The dataset comes from the facade's
    /// `AgdImportJob`, above this crate: the facade's tests/tasks/agd_sort_tasks.rs checks the
    /// same on a larger dataset.)
    ///
    /// ```ignore
    /// # use sortase::{AgdExportJob, AgdImportJob, OutputSpec, Runtime, SortJob};
    /// # use sortase::tasks::{SortTask, SortTaskOutput};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let sam = dir.path().join("in.sam");
    /// # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr3\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
    /// let rt = Runtime::with_threads(1)?;
    /// let ds = dir.path().join("ds");
    /// AgdImportJob { chunk_size: 1, ..AgdImportJob::new(sam.to_str().unwrap(), &ds) }.run(&rt)?;
    /// let out = dir.path().join("out.bam");
    /// let mut job = SortJob::new(ds.to_str().unwrap(), OutputSpec::to_path(&out));
    /// job.program = None;
    /// let plan = job.plan_dataset(&rt)?;
    /// assert!(plan.count_tasks().is_empty());
    /// let run = |tasks: Vec<SortTask>| -> sortase::Result<Vec<SortTaskOutput>> {
    ///     tasks.iter().map(|t| t.run(&rt)).collect()
    /// };
    /// let maps = run(plan.map_tasks(&[])?)?.into_iter().filter_map(SortTaskOutput::into_map).collect::<Vec<_>>();
    /// let parts = run(plan.reduce_tasks(&maps, &rt)?)?.into_iter().filter_map(SortTaskOutput::into_reduce).collect::<Vec<_>>();
    /// assert_eq!(plan.finish(&parts, &rt)?.records, 3);
    /// // The bytes of `sortase sort` of the export.
    /// let exported = dir.path().join("exported.bam");
    /// AgdExportJob::new(&ds, OutputSpec::to_path(&exported)).run(&rt)?;
    /// let one = dir.path().join("one.bam");
    /// let mut job = SortJob::new(exported.to_str().unwrap(), OutputSpec::to_path(&one));
    /// job.program = None;
    /// job.run(&rt)?;
    /// assert_eq!(std::fs::read(&out)?, std::fs::read(&one)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plan_dataset_with(&self, rt: &Runtime, options: &PlanOptions) -> Result<SortPlan> {
        plan_dataset(self, rt, options)
            .with_context(|| format!("agd sort tasks {}", self.input))
            .map_err(Error::from)
    }
}

fn plan_dataset(job: &SortJob, rt: &Runtime, options: &PlanOptions) -> anyhow::Result<SortPlan> {
    let order = job.order.resolve()?;
    let manifest = open_manifest(Path::new(&job.input))?;
    let mut warnings = Vec::new();
    let output = check_output(job, order, options, &mut warnings)?;
    let input = std::fs::canonicalize(&job.input).context(job.input.clone())?;
    let n = match estimate_record_bytes(&input, &manifest) {
        // As a BAM's map tasks: records plus a quarter for the sort entries and slack.
        Some(estimate) => (estimate + estimate / 4).div_ceil(options.task_memory as u64),
        None => manifest.chunks.len() as u64,
    };
    let n = n.clamp(1, manifest.chunks.len().max(1) as u64) as usize;
    let mut chunk_runs = runs(&manifest.chunks, n);
    if chunk_runs.is_empty() {
        // No records: one map task writes an empty run, as a BAM's one empty range does.
        chunk_runs.push(Vec::new());
    }
    let header = dataset_header(&manifest);
    let plan = new_plan(job, options, order, input, header, output, warnings, rt)?;
    Ok(SortPlan {
        dataset: Some(DatasetInput {
            runs: chunk_runs,
            duplicate: duplicate_group(&manifest).cloned(),
        }),
        ..plan
    })
}

impl SortPlan {
    /// Stage 2 of a dataset's sort: one [`AgdMapTask`] per run of chunks.
    pub(super) fn dataset_map_tasks(&self, dataset: &DatasetInput) -> Vec<AgdMapTask> {
        let parts = dataset.runs.len();
        dataset
            .runs
            .iter()
            .enumerate()
            .map(|(part, chunks)| AgdMapTask {
                input: self.input.clone(),
                order: self.job.order.clone(),
                part,
                parts,
                chunks: chunks.clone(),
                duplicate: dataset.duplicate.clone(),
                run_path: self.work_dir.join(format!("map-{part:06}.run")),
            })
            .collect()
    }
}
