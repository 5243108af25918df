//! sort and merge as jobs and as serialisable tasks, over the input, outputs and runtime of
//! crates/exec (crates/sort does the sorting and merging).
//!
//! - [`sort`]: `sortase sort` ([`SortJob`]), re-exported by the facade as `sortase::sort`.
//! - [`sort_tasks`]: the sort cut into serialisable tasks ([`SortPlan`]: count, map, reduce; an
//!   AGD dataset's map tasks), re-exported as `sortase::tasks::sort`.
//! - [`merge`]: `sortase merge` ([`MergeJob`]) and its key-range tasks ([`MergeTaskPlan`]),
//!   re-exported as `sortase::merge`.
//!
//! Every task here implements exec's [`Task`](sortase_exec::task::Task) (`kinds.rs`); the
//! registry of kinds stays in the facade, which wraps the `Box<dyn DynTask>` a plan hands out
//! ([`SortTask::into_task`]) in its `AnyTask`.

mod kinds;
pub mod merge;
pub mod sort;
pub mod sort_tasks;

pub use merge::{
    MergeJob, MergeMethod, MergeRangeOptions, MergeReport, MergeTask, MergeTaskOutput,
    MergeTaskPlan,
};
pub use sort::{SortJob, SortReport};
pub use sort_tasks::{
    AgdMapTask, ByteRange, CountOutput, CountTask, MapOutput, MapTask, PlanOptions, ReduceOutput,
    ReduceTask, SortPlan, SortTask, SortTaskOutput, TaskError,
};
