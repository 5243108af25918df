//! Jobs cut into serialisable tasks, so that a driver (the Dask driver of issue 18, a test, another
//! process) can run the pieces anywhere and in any order, then put the results together.
//!
//! Every kind of task implements one trait, [`Task`]: its kind, its run, the byte spans it reads
//! and the files it writes; one registry keyed by kind ([`KINDS`]) turns a task's JSON into a
//! runnable [`AnyTask`] (`registry.rs`). A task is plain data (serde); running it returns plain
//! data (JSON wrapped in its kind); files a task writes go to the job's work directory under a
//! temporary name and are renamed when complete, so a retried task overwrites its earlier attempt
//! harmlessly. Only the driver writes the job's outputs, once every task is done
//! ([`SortPlan::finish`]). Faces that speak JSON call [`run_task_json`], and [`task_io_json`] for
//! what a task reads and writes (a driver on object storage fetches and uploads exactly that).
//!
//! ```no_run
//! use sortase::tasks::{output_of, run_task_json, AnyTask, CountOutput, CountTask, Task};
//! use sortase::{OutputSpec, Runtime, SortJob};
//! let rt = Runtime::with_threads(1)?;
//! let plan = SortJob::new("in.bam", OutputSpec::to_path("out.bam")).plan(&rt)?;
//! let mut counts = Vec::new();
//! for task in plan.count_tasks() {
//!     let json = serde_json::to_string(&task.into_task()).unwrap();
//!     let output = run_task_json(&json, &rt)?; // on any machine that sees the files
//!     counts.push(output_of::<CountOutput>(&output, CountTask::KIND)?);
//! }
//! let map_tasks = plan.map_tasks(&counts)?; // and so on: see `sortase::tasks::sort`
//! # Ok::<(), sortase::Error>(())
//! ```

/// fq2bam as tasks (its plan, the sort map task, the scan, split and align tasks): crates/align
/// `plan.rs`.
pub use sortase_align::plan as fq2bam;
pub use sortase_exec::assemble;
/// `agd markdup` as tasks: crates/markdup `tasks/agd.rs`.
pub use sortase_markdup::tasks::agd as agd_markdup;
/// The markdup tasks of query-grouped input (samblaster's mode): crates/markdup `tasks/query.rs`.
pub use sortase_markdup::tasks::query as markdup;
pub mod plans;
/// The markdup tasks of coordinate-sorted input (Picard's mode): crates/markdup
/// `tasks/coordinate.rs`.
pub use sortase_markdup::tasks::coordinate as pmarkdup;
/// The sort as tasks: crates/sortjobs `sort_tasks/`.
pub use sortase_sortjobs::sort_tasks as sort;

pub use crate::wire::{RunIndex, Sample};
pub use agd_markdup::{AgdMarkdupPlan, AgdMarkdupTasksJob};
pub use assemble::{Layout, PlaceOutput, PlaceTask};
pub use fq2bam::{Fq2BamPlan, Fq2BamTask, Fq2BamTasksJob};
pub use plans::{
    abort_json, commit_json, fallback_json, finish_json, layout_json, layout_reads_json,
    place_tasks_json, plan_json, stage_graph_json, stage_tasks_json, CutOptions, Plan, StageGraph,
    StageSpec,
};
pub use sort::{
    AgdMapTask, ByteRange, CountOutput, CountTask, MapOutput, MapTask, PlanOptions, ReduceOutput,
    ReduceTask, SortPlan, SortTask, SortTaskOutput, TaskError,
};
pub use sortase_markdup::tasks::MarkdupTasks;

mod kinds;
mod registry;

pub use kinds::{bam_header_end, HEADER_SPAN, READ_SLACK};
pub use registry::{
    output_of, outputs_of, run_task_json, task_io, task_io_json, task_local_bytes_json, AnyTask,
    DynTask, Span, Task, TaskIo, KINDS,
};
