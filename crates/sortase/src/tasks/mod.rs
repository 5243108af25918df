//! Jobs cut into serialisable tasks, so that a driver (the Dask driver of issue 18, a test, another
//! process) can run the pieces anywhere and in any order, then put the results together.
//!
//! A task is plain data ([`Task`], serde); running it on a [`Runtime`] returns plain data
//! ([`TaskOutput`]); files a task writes go to the job's work directory under a temporary name and
//! are renamed when complete, so a retried task overwrites its earlier attempt harmlessly. Only the
//! driver writes the job's outputs, once every task is done ([`SortPlan::finish`]). Faces that speak
//! JSON call [`run_task_json`].
//!
//! ```no_run
//! use sortase::tasks::{run_task_json, SortTaskOutput, Task, TaskOutput};
//! use sortase::{OutputSpec, Runtime, SortJob};
//! let rt = Runtime::with_threads(1)?;
//! let plan = SortJob::new("in.bam", OutputSpec::to_path("out.bam")).plan(&rt)?;
//! let mut counts = Vec::new();
//! for task in plan.count_tasks() {
//!     let json = serde_json::to_string(&Task::from(task)).unwrap();
//!     let output = run_task_json(&json, &rt)?; // on any machine that sees the files
//!     let TaskOutput::Sort(SortTaskOutput::Count(count)) = serde_json::from_str(&output).unwrap()
//!     else {
//!         unreachable!("a count task returns a count")
//!     };
//!     counts.push(count);
//! }
//! let map_tasks = plan.map_tasks(&counts)?; // and so on: see `sortase::tasks::sort`
//! # Ok::<(), sortase::Error>(())
//! ```

pub mod assemble;
pub mod markdup;
pub mod plans;
pub mod sort;

pub use crate::wire::{RunIndex, Sample};
pub use assemble::{Layout, PlaceOutput, PlaceTask};
pub use plans::{
    abort_json, commit_json, fallback_json, finish_json, layout_json, place_tasks_json, plan_json,
    stage_tasks_json, CutOptions, Plan,
};
pub use sort::{
    AgdMapTask, ByteRange, CountOutput, CountTask, MapOutput, MapTask, PlanOptions, ReduceOutput,
    ReduceTask, SortPlan, SortTask, SortTaskOutput, TaskError,
};

use crate::agd_tasks::{AgdCountPart, AgdCountTask, AgdFlagstatTask, AgdIdxstatsTask};
use crate::error::{Error, ErrorKind, Result};
use crate::index::{IndexPart, IndexTask};
use crate::merge::{MergeTask, MergeTaskOutput};
use crate::runtime::Runtime;
use crate::snp_pileup::{SnpPileupPart, SnpPileupTask};
use crate::stats::{FlagstatPart, FlagstatTask, IdxstatsPart, IdxstatsTask};
use serde::{Deserialize, Serialize};

/// A task of any job (one variant per job that has tasks).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// A stage of `sortase sort`.
    Sort(SortTask),
    /// A byte range of `sortase flagstat`.
    Flagstat(FlagstatTask),
    /// A byte range of `sortase index`.
    Index(IndexTask),
    /// A run of regions of `sortase snp-pileup`.
    SnpPileup(SnpPileupTask),
    /// A stretch of key ranges of `sortase merge`.
    Merge(Box<MergeTask>),
    /// A byte range of `sortase idxstats` (a BAM without an index).
    Idxstats(IdxstatsTask),
    /// Consecutive chunks of `sortase agd flagstat`.
    AgdFlagstat(AgdFlagstatTask),
    /// Consecutive chunks of `sortase agd view -c`.
    AgdCount(AgdCountTask),
    /// Consecutive chunks of `sortase agd idxstats`.
    AgdIdxstats(AgdIdxstatsTask),
    /// A part of a sort's or merge's output written at its offset (the parallel finish).
    Place(PlaceTask),
    /// A stage of `sortase markdup` (query-grouped input).
    Markdup(markdup::MarkdupTask),
}

/// What a [`Task`] returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskOutput {
    /// The output of a [`SortTask`].
    Sort(SortTaskOutput),
    /// The output of a [`FlagstatTask`].
    Flagstat(FlagstatPart),
    /// The output of an [`IndexTask`].
    Index(IndexPart),
    /// The output of a [`SnpPileupTask`].
    SnpPileup(SnpPileupPart),
    /// The output of a [`MergeTask`].
    Merge(MergeTaskOutput),
    /// The output of an [`IdxstatsTask`].
    Idxstats(IdxstatsPart),
    /// The output of an [`AgdFlagstatTask`].
    AgdFlagstat(FlagstatPart),
    /// The output of an [`AgdCountTask`].
    AgdCount(AgdCountPart),
    /// The output of an [`AgdIdxstatsTask`].
    AgdIdxstats(IdxstatsPart),
    /// The output of a [`PlaceTask`].
    Place(PlaceOutput),
    /// The output of a [`markdup::MarkdupTask`].
    Markdup(markdup::MarkdupTaskOutput),
}

impl From<MergeTask> for Task {
    fn from(t: MergeTask) -> Self {
        Task::Merge(Box::new(t))
    }
}

impl From<SortTask> for Task {
    fn from(t: SortTask) -> Self {
        Task::Sort(t)
    }
}

impl Task {
    /// Runs the task on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<TaskOutput> {
        match self {
            Task::Sort(t) => t.run(rt).map(TaskOutput::Sort),
            Task::Flagstat(t) => t.run(rt).map(TaskOutput::Flagstat),
            Task::Index(t) => t.run(rt).map(TaskOutput::Index),
            Task::SnpPileup(t) => t.run(rt).map(TaskOutput::SnpPileup),
            Task::Merge(t) => t.run(rt).map(TaskOutput::Merge),
            Task::Idxstats(t) => t.run(rt).map(TaskOutput::Idxstats),
            Task::AgdFlagstat(t) => t.run(rt).map(TaskOutput::AgdFlagstat),
            Task::AgdCount(t) => t.run(rt).map(TaskOutput::AgdCount),
            Task::AgdIdxstats(t) => t.run(rt).map(TaskOutput::AgdIdxstats),
            Task::Place(t) => t.run(rt).map(TaskOutput::Place),
            Task::Markdup(t) => t.run(rt).map(TaskOutput::Markdup),
        }
    }
}

/// The input byte spans a merge or snp-pileup task given as JSON reads (a JSON array of
/// [`crate::bam_ranges::InputSpan`]), for drivers that fetch remote inputs by byte range; other tasks'
/// ranges are in their JSON already.
pub fn input_spans_json(task_json: &str) -> Result<String> {
    let task: Task =
        serde_json::from_str(task_json).map_err(|e| Error::argument(format!("task JSON: {e}")))?;
    let spans = match task {
        Task::Merge(t) => t.input_spans()?,
        Task::SnpPileup(t) => t.input_spans().to_vec(),
        _ => {
            return Err(Error::argument(
                "input spans: not a merge or snp-pileup task",
            ))
        }
    };
    serde_json::to_string(&spans)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("input spans JSON: {e}")))
}

/// Runs one task given as JSON (a serialised [`Task`]) and returns its output as JSON (a serialised
/// [`TaskOutput`]): the entry point for faces that pass tasks as text (Python, Dask).
pub fn run_task_json(task_json: &str, rt: &Runtime) -> Result<String> {
    let task: Task =
        serde_json::from_str(task_json).map_err(|e| Error::argument(format!("task JSON: {e}")))?;
    let output = task.run(rt)?;
    serde_json::to_string(&output)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("task output JSON: {e}")))
}
