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
//! same [`sortase_exec::range_output::RangeWriter`] as `SortJob::run`, with the BAI/CSI replayed from the
//! ranges' summaries.
//!
//! The stages:
//!
//! 1. [`CountTask`] (`count.rs`): one byte range of the input; counts its records and record bytes,
//!    so that every range knows the input sequence number of its first record. It also proves the
//!    range's end: a planned boundary that is not a record start (the boundary finder is a
//!    heuristic) is replaced by the next planned boundary that is, and the driver skips the ranges
//!    in between ([`SortPlan::map_tasks`]).
//! 2. [`MapTask`] (`map.rs`): reads its range, sorts it in memory exactly as the sorter sorts what
//!    it holds ([`sortase_sort::sort_batches`]: same order, ties in input order), keeps the records
//!    whose sequence number is a multiple of [`SAMPLE_EVERY`] as candidate split points, and
//!    writes one run (crates/sort's run format, with sequence numbers and a sparse index).
//! 3. [`ReduceTask`] (`reduce.rs`): a stretch of consecutive key ranges. Each run is opened once at
//!    the stretch's first record ([`sortase_sort::start_block`], [`sortase_sort::open_run_from`]);
//!    every key range is merged from all runs (ties by run number, which is input order) and
//!    encoded by the sort's own [`sortase_exec::range_output::RangeEncoder`], so its BGZF blocks and index
//!    summary are those `SortJob::run` writes.
//!
//! The driver's side is `plan.rs` ([`SortJob::plan`]) and `driver.rs` (the [`SortPlan`] methods).
//! An AGD dataset is sorted by the same stages with its chunks as the map tasks' inputs
//! (`agd_map.rs`, [`SortJob::plan_dataset`]: no count tasks, an [`AgdMapTask`] per run of chunks).
//! A whole sort on one machine (tasks may run anywhere that sees the input and the work directory,
//! in any order within a stage, retried at will):
//!
//! ```
//! # use sortase_exec::{OutputSpec, Runtime};
//! # use sortase_sortjobs::{SortJob, SortTask, SortTaskOutput};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! # let input = dir.path().join("in.bam");
//! # SortJob { order: sortase_exec::Order::Name, ..SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&input)) }.run(&Runtime::with_threads(1)?)?;
//! let rt = Runtime::with_threads(1)?;
//! let job = SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(dir.path().join("out.bam")));
//! let plan = job.plan(&rt)?;
//! let run = |tasks: Vec<SortTask>| -> sortase_exec::Result<Vec<SortTaskOutput>> {
//!     tasks.iter().map(|t| t.run(&rt)).collect()
//! };
//! let counts = run(plan.count_tasks())?.into_iter().filter_map(SortTaskOutput::into_count).collect::<Vec<_>>();
//! let maps = run(plan.map_tasks(&counts)?)?.into_iter().filter_map(SortTaskOutput::into_map).collect::<Vec<_>>();
//! let parts = run(plan.reduce_tasks(&maps, &rt)?)?.into_iter().filter_map(SortTaskOutput::into_reduce).collect::<Vec<_>>();
//! let report = plan.finish(&parts, &rt)?;
//! assert_eq!(report.records, 2);
//! # Ok::<(), sortase_exec::Error>(())
//! ```
//!
//! [`SAMPLE_EVERY`]: sortase_sort::ranges::SAMPLE_EVERY
//! [`choose_splits`]: sortase_sort::ranges::choose_splits
//! [`RangePlan`]: sortase_sort::ranges::RangePlan

mod agd_map;
mod count;
pub(crate) mod driver;
pub mod map;
pub(crate) mod plan;
pub(crate) mod reduce;

pub use agd_map::AgdMapTask;
pub use sortase_exec::parts::{EncodedRangeIndex, PartIndex};
// The range and the error a task carries live in crates/exec (`task.rs`), below the tasks.
pub use count::{CountOutput, CountTask};
pub use map::{MapOutput, MapTask};
pub use reduce::{ReduceOutput, ReduceTask, RunStart};
pub use sortase_exec::task::{ByteRange, TaskError};

use crate::sort::SortJob;
use serde::{Deserialize, Serialize};
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::runtime::{Runtime, DEFAULT_MEMORY_PER_THREAD};
use sortase_exec::task::DynTask;
use sortase_exec::wire::HeaderData;
use std::path::PathBuf;

/// A task of a sort.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortTask {
    /// Stage 1.
    Count(CountTask),
    /// Stage 2.
    Map(MapTask),
    /// Stage 2 of a dataset's sort ([`SortJob::plan_dataset`]).
    AgdMap(AgdMapTask),
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
    /// The stage's task as a task of any kind (what a driver sends; the facade's registry wraps
    /// it as its `AnyTask` with `AnyTask::from_dyn`).
    pub fn into_task(self) -> Box<dyn DynTask> {
        match self {
            SortTask::Count(t) => Box::new(t),
            SortTask::Map(t) => Box::new(t),
            SortTask::AgdMap(t) => Box::new(t),
            SortTask::Reduce(t) => Box::new(t),
        }
    }

    /// Runs the task on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<SortTaskOutput> {
        let out = self.clone().into_task().run(rt)?;
        SortTaskOutput::deserialize(&out["sort"])
            .map_err(|e| Error::new(ErrorKind::Internal, format!("sort task output: {e}")))
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
    /// Reduce tasks (default: as many as map tasks; at most the number of key ranges). A reduce
    /// task's memory does not grow with its share: it holds one block of each run (about 256 KiB
    /// per map task) and one encoded key range (about 8 MiB at the default level).
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
    /// The input is an AGD dataset (`input` its directory, no byte ranges): its chunks' runs.
    #[serde(default)]
    dataset: Option<agd_map::DatasetInput>,
}
