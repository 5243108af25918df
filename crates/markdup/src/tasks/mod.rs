//! The markdup job cut into serialisable tasks (issue 29), for a driver that runs the pieces
//! anywhere and in any order: [`query`] (samblaster's mode, query-grouped input: count, map,
//! reduce, encode) and [`coordinate`] (Picard's mode, coordinate-sorted input: count, map, join,
//! reduce, encode); [`agd`] is a dataset's markdup (`agd markdup`), whose map tasks read runs of
//! chunks and whose reduce and join tasks are those two modes'. Every task implements [`sortase_exec::task::Task`] (`kinds.rs`); the facade's
//! registry (`sortase::tasks::KINDS`) decodes them by kind, and its `Plan` wraps their plans.

pub mod agd;
pub mod coordinate;
mod kinds;
pub mod query;

use crate::job::MarkdupJob;
use sortase_exec::error::{Error, Result};
use sortase_exec::runtime::Runtime;

/// Planning a [`MarkdupJob`] as tasks: a trait, as the job lives in crates/markdup and its tasks
/// here (`use sortase::tasks::MarkdupTasks` for the methods).
pub trait MarkdupTasks {
    /// Plans the job as tasks (query-grouped BAM input to a BAM file; see the module
    /// documentation): `task_memory` bounds a map task's range and a reduce task's partition.
    /// Creates the work directory ([`query::MarkdupPlan::abort`] or the commit removes it).
    fn plan_tasks(
        &self,
        rt: &Runtime,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Result<query::MarkdupPlan>;

    /// Plans the job as tasks on coordinate-sorted BAM input (Picard's mode; see
    /// [`coordinate`]): `task_memory` bounds a map task's range and a join or reduce task's
    /// partition; `reduce_tasks` asks for at least that many partitions. Creates the work
    /// directory ([`coordinate::PicardPlan::abort`] or the commit removes it).
    fn plan_coordinate_tasks(
        &self,
        rt: &Runtime,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Result<coordinate::PicardPlan>;
}

impl MarkdupTasks for MarkdupJob {
    fn plan_tasks(
        &self,
        rt: &Runtime,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Result<query::MarkdupPlan> {
        query::plan(self, rt, task_memory, reduce_tasks).map_err(Error::from)
    }

    fn plan_coordinate_tasks(
        &self,
        rt: &Runtime,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Result<coordinate::PicardPlan> {
        coordinate::plan(self, rt, task_memory, reduce_tasks).map_err(Error::from)
    }
}
