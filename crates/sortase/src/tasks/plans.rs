//! Every job that has tasks behind one JSON face, for drivers that pass text between machines (the
//! Dask driver of issue 18, `python/sortase/distributed.py`): [`plan_json`] plans a job,
//! [`stage_graph_json`] names its stages and what each takes, [`stage_tasks_json`] gives a stage's
//! tasks from the outputs of the stages before, [`finish_json`]
//! writes the job's output from the last stage's outputs, [`fallback_json`] re-plans a range job
//! whose task failed on a false record boundary, and [`abort_json`] removes a sort's work directory.
//!
//! The stages: a sort has `count`, `map` and `reduce` (see [`crate::tasks::sort`]); flagstat,
//! idxstats, index, snp-pileup and merge have one stage, `tasks`. Task outputs are the JSON that
//! [`crate::tasks::run_task_json`] returns, given as a JSON array in any order (repeats allowed).

use super::agd_markdup::{AgdMarkdupPlan, AgdMarkdupTasksJob};
use super::fq2bam::{Fq2BamPlan, Fq2BamTask, Fq2BamTasksJob, FqAlignTask, FqScanTask, FqSplitTask};
use super::markdup::{
    MarkdupPlan, MarkdupTask, MdEncodeOutput, MdEncodeTask, MdMapTask, MdReduceTask,
};
use super::pmarkdup::{PicardPlan, PicardTask, PmJoinTask, PmMapTask, PmReduceTask};
use super::registry::{outputs_of, AnyTask, DynTask, Task};
use super::sort::{CountTask, MapTask, ReduceOutput, ReduceTask, SortTask};
use super::{Layout, MarkdupTasks, PlanOptions, SortPlan};
use crate::agd_tasks::{
    AgdCountPlan, AgdCountTask, AgdFlagstatPlan, AgdFlagstatTask, AgdIdxstatsPlan, AgdIdxstatsTask,
};
use crate::error::{Error, ErrorKind, Result};
use crate::index::{IndexJob, IndexPlan, IndexTask};
use crate::markdup::MarkdupJob;
use crate::merge::{MergeJob, MergeTask, MergeTaskOutput, MergeTaskPlan};
use crate::runtime::Runtime;
use crate::snp_pileup::{SnpPileupJob, SnpPileupPlan, SnpPileupTask};
use crate::sort::SortJob;
use crate::stats::{
    FlagstatJob, FlagstatPlan, FlagstatTask, IdxstatsJob, IdxstatsPlan, IdxstatsTask,
};
use crate::view::ViewJob;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// A planned job of any kind that has tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// `sortase sort` (three stages).
    Sort(Box<SortPlan>),
    /// `sortase flagstat` (one stage).
    Flagstat(FlagstatPlan),
    /// `sortase index` (one stage).
    Index(IndexPlan),
    /// `sortase snp-pileup` (one stage).
    SnpPileup(SnpPileupPlan),
    /// `sortase merge`'s key-range merge (one stage).
    Merge {
        /// The plan.
        plan: Box<MergeTaskPlan>,
        /// Tasks to cut its key ranges into.
        tasks: usize,
    },
    /// `sortase idxstats` (one stage; no tasks when the BAM has an index).
    Idxstats(IdxstatsPlan),
    /// `sortase flagstat` of a dataset (one stage; tasks of consecutive chunks).
    AgdFlagstat(AgdFlagstatPlan),
    /// `sortase view -c` of a dataset (one stage; tasks of consecutive chunks).
    AgdCount(AgdCountPlan),
    /// `sortase idxstats` of a dataset (one stage; tasks of consecutive chunks).
    AgdIdxstats(AgdIdxstatsPlan),
    /// `sortase markdup` of query-grouped input (four stages).
    Markdup(Box<MarkdupPlan>),
    /// `sortase markdup` of coordinate-sorted input, Picard's mode (five stages).
    MarkdupCoordinate(Box<PicardPlan>),
    /// `sortase fq2bam` (five stages).
    Fq2Bam(Box<Fq2BamPlan>),
    /// `sortase agd markdup` (three stages, four in Picard's mode).
    AgdMarkdup(Box<AgdMarkdupPlan>),
}

/// A stage as a table row: its name and the stages whose outputs it takes.
type Stage = (&'static str, &'static [&'static str]);

/// One stage of a plan ([`Plan::stage_graph`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSpec {
    /// The stage's name, as [`Plan::stage_tasks`] takes it.
    pub name: String,
    /// The earlier stages whose outputs its tasks are planned from, in the order to pass them.
    pub takes: Vec<String>,
}

/// A plan's stages and what its finish takes ([`Plan::stage_graph`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageGraph {
    /// The stages, in the order to run them.
    pub stages: Vec<StageSpec>,
    /// The stages whose outputs the finish (or the layout) takes.
    pub finish: Vec<String>,
    /// Whether the output is assembled from parts ([`Plan::layout`], then place tasks or a
    /// multipart upload, then commit) rather than written by [`Plan::finish`].
    pub assembled: bool,
}

/// How a job is cut: the fields every kind understands (missing ones take their defaults).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CutOptions {
    /// Range tasks of flagstat, idxstats, index, snp-pileup and merge (default: `rt.threads() * 4`).
    pub tasks: Option<usize>,
    /// A sort's memory per map task (default: [`PlanOptions::default`]'s).
    pub task_memory: Option<usize>,
    /// A sort's reduce tasks (default: as many as map tasks).
    pub reduce_tasks: Option<usize>,
}

fn json_error(what: &str, e: serde_json::Error) -> Error {
    Error::argument(format!("{what} JSON: {e}"))
}

fn to_json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot write JSON: {e}")))
}

fn parse<'a, T: Deserialize<'a>>(what: &str, text: &'a str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| json_error(what, e))
}

impl CutOptions {
    /// A sort's plan options: the task memory given, else [`PlanOptions::default`]'s.
    fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            task_memory: self.task_memory(),
            reduce_tasks: self.reduce_tasks,
        }
    }

    /// The memory per map task: given, else [`PlanOptions::default`]'s.
    fn task_memory(&self) -> usize {
        self.task_memory
            .unwrap_or(PlanOptions::default().task_memory)
    }
}

/// Plans the jobs of several stages (sort, markdup, fq2bam); `None`: `kind` is none of them.
fn plan_staged(kind: &str, job_json: &str, cut: &CutOptions, rt: &Runtime) -> Result<Option<Plan>> {
    Ok(Some(match kind {
        "sort" => {
            let job: SortJob = parse("sort job", job_json)?;
            Plan::Sort(Box::new(job.plan_with(rt, &cut.plan_options())?))
        }
        "agd_sort" => {
            let job: SortJob = parse("agd_sort job", job_json)?;
            Plan::Sort(Box::new(job.plan_dataset_with(rt, &cut.plan_options())?))
        }
        "markdup" => {
            let job: MarkdupJob = parse("markdup job", job_json)?;
            let memory = cut.task_memory();
            if markdup_is_coordinate(&job)? {
                Plan::MarkdupCoordinate(Box::new(job.plan_coordinate_tasks(
                    rt,
                    memory,
                    cut.reduce_tasks,
                )?))
            } else {
                Plan::Markdup(Box::new(job.plan_tasks(rt, memory, cut.reduce_tasks)?))
            }
        }
        "agd_markdup" => {
            let spec: AgdMarkdupTasksJob = parse("agd_markdup job", job_json)?;
            let memory = cut.task_memory();
            Plan::AgdMarkdup(Box::new(AgdMarkdupPlan::new(
                &spec,
                rt,
                memory,
                cut.reduce_tasks,
            )?))
        }
        "fq2bam" => {
            let job: Fq2BamTasksJob = parse("fq2bam job", job_json)?;
            Plan::Fq2Bam(Box::new(job.plan(rt, &cut.plan_options())?))
        }
        _ => return Ok(None),
    }))
}

/// The tasks of a sort's `stage`.
fn sort_stage(p: &SortPlan, stage: &str, outputs: &[Value], rt: &Runtime) -> Result<Vec<AnyTask>> {
    let tasks = match stage {
        "count" => p.count_tasks(),
        "map" => p.map_tasks(&outputs_of(outputs, CountTask::KIND)?)?,
        "reduce" => p.reduce_tasks(&outputs_of(outputs, MapTask::KIND)?, rt)?,
        _ => return Err(no_stage(stage)),
    };
    Ok(boxed(tasks, SortTask::into_task))
}

/// The tasks of a markdup's (query-grouped input) `stage`.
fn markdup_stage(p: &MarkdupPlan, stage: &str, outputs: &[Value]) -> Result<Vec<AnyTask>> {
    let tasks = match stage {
        "map" => p.map_tasks(),
        "reduce" => p.reduce_tasks(&outputs_of(outputs, MdMapTask::KIND)?)?,
        // The map outputs (the ranges' cuttings) and the reduce outputs.
        "encode" => p.encode_tasks(
            &outputs_of(outputs, MdMapTask::KIND)?,
            &outputs_of(outputs, MdReduceTask::KIND)?,
        )?,
        _ => return Err(no_stage(stage)),
    };
    Ok(boxed(tasks, MarkdupTask::into_task))
}

/// The tasks of a markdup's (coordinate-sorted input, Picard's mode) `stage`.
fn coordinate_stage(p: &PicardPlan, stage: &str, outputs: &[Value]) -> Result<Vec<AnyTask>> {
    let maps = || outputs_of(outputs, PmMapTask::KIND);
    let tasks = match stage {
        "map" => p.map_tasks(),
        "join" => p.join_tasks(&maps()?)?,
        // The map outputs and the join outputs.
        "reduce" => p.reduce_tasks(&maps()?, &outputs_of(outputs, PmJoinTask::KIND)?)?,
        // The map outputs (the ranges' cuttings) and the reduce outputs.
        "encode" => p.encode_tasks(&maps()?, &outputs_of(outputs, PmReduceTask::KIND)?)?,
        _ => return Err(no_stage(stage)),
    };
    Ok(boxed(tasks, PicardTask::into_task))
}

/// The tasks of an fq2bam's `stage`.
fn fq2bam_stage(
    p: &Fq2BamPlan,
    stage: &str,
    outputs: &[Value],
    rt: &Runtime,
) -> Result<Vec<AnyTask>> {
    let aligns = || outputs_of(outputs, FqAlignTask::KIND);
    Ok(match stage {
        "scan" => boxed(p.scan_tasks(), Fq2BamTask::into_task),
        "split" => boxed(
            p.split_tasks(&outputs_of(outputs, FqScanTask::KIND)?),
            Fq2BamTask::into_task,
        ),
        "align" => boxed(
            p.align_tasks(
                &outputs_of(outputs, FqScanTask::KIND)?,
                &outputs_of(outputs, FqSplitTask::KIND)?,
            )?,
            Fq2BamTask::into_task,
        ),
        "dedup" => p
            .dedup_tasks(&aligns()?)?
            .into_iter()
            .map(AnyTask::from)
            .collect(),
        // The align outputs and the dedup outputs.
        "map" => boxed(
            p.sort_map_tasks(&aligns()?, &outputs_of(outputs, MdReduceTask::KIND)?)?,
            Fq2BamTask::into_task,
        ),
        // The align outputs (the header) and the map outputs.
        "reduce" => p
            .reduce_tasks(&aligns()?, &outputs_of(outputs, MapTask::KIND)?, rt)?
            .into_iter()
            .map(AnyTask::from_dyn)
            .collect(),
        _ => return Err(no_stage(stage)),
    })
}

/// A stage's tasks as a domain crate hands them out (`into_task` boxes its enum of a job's
/// stages' tasks), as tasks of any kind; a `From` impl would conflict with the registry's
/// `impl<T: Task> From<T>`.
fn boxed<T>(tasks: Vec<T>, into_task: fn(T) -> Box<dyn DynTask>) -> Vec<AnyTask> {
    tasks
        .into_iter()
        .map(|t| AnyTask::from_dyn(into_task(t)))
        .collect()
}

fn no_stage(stage: &str) -> Error {
    Error::argument(format!("no stage {stage:?} in this plan"))
}

impl Plan {
    /// Plans `job_json` (the job spec of `kind`: `sort`, `flagstat`, `idxstats`, `index`,
    /// `snp_pileup`, `merge`, `view` (counting a dataset; `flagstat` and `idxstats` of a dataset
    /// plan one task per run of its chunks; `agd_flagstat`, `agd_count`, `agd_idxstats` are older
    /// names of these three) and `agd_sort` (a [`SortJob`] whose input is the dataset directory; its plan is a sort's,
    /// with no count tasks)).
    pub fn new(kind: &str, job_json: &str, cut: &CutOptions, rt: &Runtime) -> Result<Plan> {
        if let Some(plan) = plan_staged(kind, job_json, cut, rt)? {
            return Ok(plan);
        }
        let n = cut.tasks.unwrap_or(rt.threads() * 4).max(1);
        Ok(match kind {
            // A dataset's chunks are its tasks; `agd_*` are the kinds' older names.
            "flagstat" | "agd_flagstat" => {
                let job: FlagstatJob = parse("flagstat job", job_json)?;
                match sortase_exec::agd::is_dataset(&job.input) {
                    true => Plan::AgdFlagstat(job.plan_chunks(n)?),
                    false => Plan::Flagstat(job.plan_ranges(n)?),
                }
            }
            "idxstats" | "agd_idxstats" => {
                let job: IdxstatsJob = parse("idxstats job", job_json)?;
                match sortase_exec::agd::is_dataset(&job.input) {
                    true => Plan::AgdIdxstats(job.plan_chunks(n)?),
                    false => Plan::Idxstats(job.plan_ranges(n)?),
                }
            }
            "view" | "agd_count" => {
                let job: ViewJob = parse("view job", job_json)?;
                Plan::AgdCount(job.plan_count(rt, n)?)
            }
            "index" => {
                let job: IndexJob = parse("index job", job_json)?;
                Plan::Index(job.plan_ranges(n)?)
            }
            "snp_pileup" => {
                let job: SnpPileupJob = parse("snp_pileup job", job_json)?;
                Plan::SnpPileup(job.plan_tasks(rt, n)?)
            }
            "merge" => {
                let job: MergeJob = parse("merge job", job_json)?;
                Plan::Merge {
                    plan: Box::new(job.plan(rt)?),
                    tasks: n,
                }
            }
            other => {
                return Err(Error::argument(format!(
                    "no tasks for {other:?} (sort, flagstat, idxstats, index, snp_pileup, merge, \
                     view (a dataset's count), agd_sort, agd_markdup, markdup, fq2bam)"
                )))
            }
        })
    }

    /// The names of the plan's stages, in order.
    pub fn stages(&self) -> &'static [&'static str] {
        match self {
            Plan::Sort(_) => &["count", "map", "reduce"],
            Plan::Markdup(_) => &["map", "reduce", "encode"],
            Plan::MarkdupCoordinate(_) => &["map", "join", "reduce", "encode"],
            Plan::Fq2Bam(_) => &["scan", "split", "align", "dedup", "map", "reduce"],
            Plan::AgdMarkdup(p) => p.stages(),
            _ => &["tasks"],
        }
    }

    /// The tasks of `stage` from the outputs of the stage before (ignored for a first stage;
    /// outputs of other kinds are ignored).
    pub fn stage_tasks(
        &self,
        stage: &str,
        outputs: &[Value],
        rt: &Runtime,
    ) -> Result<Vec<AnyTask>> {
        Ok(match self {
            Plan::Sort(p) => sort_stage(p, stage, outputs, rt)?,
            Plan::Markdup(p) => markdup_stage(p, stage, outputs)?,
            Plan::MarkdupCoordinate(p) => coordinate_stage(p, stage, outputs)?,
            Plan::Fq2Bam(p) => fq2bam_stage(p, stage, outputs, rt)?,
            Plan::AgdMarkdup(p) => p
                .stage_tasks(stage, outputs)?
                .into_iter()
                .map(AnyTask::from_dyn)
                .collect(),
            _ if stage != "tasks" => return Err(no_stage(stage)),
            Plan::Flagstat(p) => any(&p.tasks),
            Plan::Index(p) => any(&p.tasks),
            Plan::SnpPileup(p) => any(&p.tasks),
            Plan::Merge { plan, tasks } => {
                plan.tasks(*tasks).into_iter().map(AnyTask::from).collect()
            }
            Plan::Idxstats(p) => any(&p.tasks),
            Plan::AgdFlagstat(p) => any(&p.tasks),
            Plan::AgdCount(p) => any(&p.tasks),
            Plan::AgdIdxstats(p) => any(&p.tasks),
        })
    }

    /// The plan's stages in the order a driver runs them, each with the earlier stages whose
    /// outputs its tasks are planned from, and the stages whose outputs the finish takes. A driver
    /// runs any plan from this alone ([`stage_graph_json`]): it never matches on the kind.
    pub fn stage_graph(&self) -> StageGraph {
        const SORT: &[Stage] = &[("count", &[]), ("map", &["count"]), ("reduce", &["map"])];
        const MARKDUP: &[Stage] = &[
            ("map", &[]),
            ("reduce", &["map"]),
            ("encode", &["map", "reduce"]),
        ];
        const PICARD: &[Stage] = &[
            ("map", &[]),
            ("join", &["map"]),
            ("reduce", &["map", "join"]),
            ("encode", &["map", "reduce"]),
        ];
        const FQ2BAM: &[Stage] = &[
            ("scan", &[]),
            ("split", &["scan"]),
            ("align", &["scan", "split"]),
            ("dedup", &["align"]),
            ("map", &["align", "dedup"]),
            ("reduce", &["align", "map"]),
        ];
        let (stages, finish): (&[Stage], &[&str]) = match self {
            Plan::Sort(_) => (SORT, &["reduce"]),
            Plan::Markdup(_) => (MARKDUP, &["map", "reduce", "encode"]),
            Plan::MarkdupCoordinate(_) => (PICARD, &["map", "join", "reduce", "encode"]),
            Plan::Fq2Bam(_) => (FQ2BAM, &["align", "dedup", "reduce"]),
            // Each stage takes every earlier stage's outputs, and so does the finish.
            Plan::AgdMarkdup(p) => {
                let names = p.stages();
                let stages = names
                    .iter()
                    .enumerate()
                    .map(|(k, name)| StageSpec {
                        name: name.to_string(),
                        takes: names[..k].iter().map(|n| n.to_string()).collect(),
                    })
                    .collect();
                let finish = names.iter().map(|n| n.to_string()).collect();
                return StageGraph {
                    stages,
                    finish,
                    assembled: false,
                };
            }
            _ => (&[("tasks", &[])], &["tasks"]),
        };
        let strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        StageGraph {
            stages: stages
                .iter()
                .map(|(name, takes)| StageSpec {
                    name: name.to_string(),
                    takes: strings(takes),
                })
                .collect(),
            finish: strings(finish),
            assembled: matches!(
                self,
                Plan::Sort(_)
                    | Plan::Merge { .. }
                    | Plan::Markdup(_)
                    | Plan::MarkdupCoordinate(_)
                    | Plan::Fq2Bam(_)
            ),
        }
    }

    /// Finishes the job from its last stage's outputs; the job's report as JSON.
    pub fn finish(&self, outputs: &[Value], rt: &Runtime) -> Result<String> {
        match self {
            Plan::Markdup(_) | Plan::MarkdupCoordinate(_) | Plan::Fq2Bam(_) => {
                Err(Error::argument(
                    "a markdup's or an fq2bam's output is assembled from parts: use layout, place and commit",
                ))
            }
            Plan::Sort(p) => to_json(&p.finish(&outputs_of(outputs, ReduceTask::KIND)?, rt)?),
            Plan::Flagstat(p) => to_json(&p.finish(outputs_of(outputs, FlagstatTask::KIND)?)?),
            Plan::Index(p) => to_json(&p.finish(outputs_of(outputs, IndexTask::KIND)?, rt)?),
            Plan::SnpPileup(p) => {
                to_json(&p.finish(outputs_of(outputs, SnpPileupTask::KIND)?, rt)?)
            }
            Plan::Merge { plan, .. } => {
                to_json(&plan.finish(&outputs_of(outputs, MergeTask::KIND)?, rt)?)
            }
            Plan::Idxstats(p) => to_json(&p.finish(outputs_of(outputs, IdxstatsTask::KIND)?)?),
            Plan::AgdFlagstat(p) => {
                to_json(&p.finish(outputs_of(outputs, AgdFlagstatTask::KIND)?)?)
            }
            Plan::AgdCount(p) => to_json(&p.finish(outputs_of(outputs, AgdCountTask::KIND)?)?),
            Plan::AgdIdxstats(p) => {
                to_json(&p.finish(outputs_of(outputs, AgdIdxstatsTask::KIND)?)?)
            }
            Plan::AgdMarkdup(p) => p.finish(outputs),
        }
    }

    /// The parallel finish of a sort or a merge, step 1 ([`crate::tasks::assemble`]): the output
    /// laid out from the last stage's outputs and the parts' sidecars, the index written under a
    /// temporary name, and with `preallocate` the output's temporary file created at its size.
    /// Step 2: [`Layout::place_tasks`] (or, on object storage, a multipart upload of the parts);
    /// step 3: [`Layout::commit`]. Other kinds have no parts (use [`Plan::finish`]).
    pub fn layout(&self, outputs: &[Value], preallocate: bool, rt: &Runtime) -> Result<Layout> {
        match self {
            Plan::Sort(p) => p.layout(&outputs_of(outputs, ReduceTask::KIND)?, preallocate, rt),
            Plan::Merge { plan, .. } => {
                plan.layout(&outputs_of(outputs, MergeTask::KIND)?, preallocate, rt)
            }
            Plan::Markdup(p) => p.layout(
                &outputs_of(outputs, MdMapTask::KIND)?,
                &outputs_of(outputs, MdReduceTask::KIND)?,
                &outputs_of(outputs, MdEncodeTask::KIND)?,
                preallocate,
                rt,
            ),
            Plan::MarkdupCoordinate(p) => p.layout(
                &outputs_of(outputs, PmMapTask::KIND)?,
                &outputs_of(outputs, PmJoinTask::KIND)?,
                &outputs_of(outputs, PmReduceTask::KIND)?,
                &outputs_of(outputs, MdEncodeTask::KIND)?,
                preallocate,
                rt,
            ),
            Plan::Fq2Bam(p) => p.layout(
                &outputs_of(outputs, FqAlignTask::KIND)?,
                &outputs_of(outputs, MdReduceTask::KIND)?,
                &outputs_of(outputs, ReduceTask::KIND)?,
                preallocate,
                rt,
            ),
            _ => Err(Error::argument(
                "layout: only a sort's, a merge's, a markdup's or an fq2bam's output is assembled from parts",
            )),
        }
    }

    /// The files [`Plan::layout`] reads besides the outputs: the parts' sidecars (a driver on
    /// object storage fetches them).
    pub fn layout_reads(&self, outputs: &[Value]) -> Result<Vec<PathBuf>> {
        Ok(match self {
            Plan::Sort(_) | Plan::Fq2Bam(_) => {
                outputs_of::<ReduceOutput>(outputs, ReduceTask::KIND)?
                    .into_iter()
                    .map(|r| r.files.sidecar_path)
                    .collect()
            }
            Plan::Merge { .. } => outputs_of::<MergeTaskOutput>(outputs, MergeTask::KIND)?
                .into_iter()
                .map(|r| r.files.sidecar_path)
                .collect(),
            Plan::Markdup(_) | Plan::MarkdupCoordinate(_) => {
                outputs_of::<MdEncodeOutput>(outputs, MdEncodeTask::KIND)?
                    .into_iter()
                    .map(|r| r.files.sidecar_path)
                    .collect()
            }
            _ => Vec::new(),
        })
    }

    /// The plan to run instead when a range task failed (one task over the whole input); a sort
    /// has none (its count stage proves the boundaries itself), nor has snp-pileup (its regions
    /// come from the BAMs' indexes, not from guessed record boundaries).
    pub fn fallback(&self) -> Option<Plan> {
        match self {
            Plan::Sort(_) | Plan::Markdup(_) | Plan::MarkdupCoordinate(_) | Plan::Fq2Bam(_) => None,
            Plan::Flagstat(p) => p.fallback().map(Plan::Flagstat),
            Plan::Index(p) => Some(Plan::Index(p.fallback())),
            Plan::Idxstats(p) => p.fallback().map(Plan::Idxstats),
            Plan::SnpPileup(_) | Plan::Merge { .. } => None,
            // Chunks are whole files: no guessed boundary to fall back from.
            Plan::AgdFlagstat(_)
            | Plan::AgdCount(_)
            | Plan::AgdIdxstats(_)
            | Plan::AgdMarkdup(_) => None,
        }
    }

    /// Gives the job up: removes a sort's or a merge's work directory (other kinds have none).
    pub fn abort(&self) -> Result<()> {
        match self {
            Plan::Sort(p) => p.abort(),
            Plan::Merge { plan, .. } => plan.abort(),
            Plan::Markdup(p) => p.abort(),
            Plan::MarkdupCoordinate(p) => p.abort(),
            Plan::Fq2Bam(p) => p.abort(),
            Plan::AgdMarkdup(p) => p.abort(),
            _ => Ok(()),
        }
    }
}

/// Whether a markdup job runs in Picard's mode: its mode, or under auto the input's `@HD SO`.
fn markdup_is_coordinate(job: &MarkdupJob) -> Result<bool> {
    use crate::markdup::Mode;
    Ok(match job.mode {
        Mode::Coordinate => true,
        Mode::Query => false,
        Mode::Auto => {
            if job.input == "-" {
                return Ok(false); // refused by the plan
            }
            // Not a BAM file: the query plan refuses it with its message.
            match sortase_exec::input::read_bam_header(&job.input) {
                Ok(header) => crate::markdup::detect_mode(&header) == Mode::Coordinate,
                Err(_) => false,
            }
        }
    })
}

/// [`Plan::new`] from and to JSON: `cut_json` is a [`CutOptions`] (`"{}"` for the defaults).
pub fn plan_json(kind: &str, job_json: &str, cut_json: &str, rt: &Runtime) -> Result<String> {
    let cut: CutOptions = parse("cut options", cut_json)?;
    to_json(&Plan::new(kind, job_json, &cut, rt)?)
}

/// [`Plan::stage_tasks`] from and to JSON: a JSON array of tasks.
pub fn stage_tasks_json(
    plan_json: &str,
    stage: &str,
    outputs_json: &str,
    rt: &Runtime,
) -> Result<String> {
    let plan: Plan = parse("plan", plan_json)?;
    let outputs: Vec<Value> = parse("task outputs", outputs_json)?;
    to_json(&plan.stage_tasks(stage, &outputs, rt)?)
}

/// [`Plan::stage_graph`] of a plan given as JSON, as JSON.
pub fn stage_graph_json(plan_json: &str) -> Result<String> {
    let plan: Plan = parse("plan", plan_json)?;
    to_json(&plan.stage_graph())
}

/// [`Plan::finish`] from JSON; the report as JSON.
pub fn finish_json(plan_json: &str, outputs_json: &str, rt: &Runtime) -> Result<String> {
    let plan: Plan = parse("plan", plan_json)?;
    let outputs: Vec<Value> = parse("task outputs", outputs_json)?;
    plan.finish(&outputs, rt)
}

/// [`Plan::fallback`] from and to JSON (`None`: the kind has no fallback).
pub fn fallback_json(plan_json: &str) -> Result<Option<String>> {
    let plan: Plan = parse("plan", plan_json)?;
    plan.fallback().map(|p| to_json(&p)).transpose()
}

/// [`Plan::abort`] from JSON.
pub fn abort_json(plan_json: &str) -> Result<()> {
    parse::<Plan>("plan", plan_json)?.abort()
}

/// [`Plan::layout`] from and to JSON: the [`Layout`].
pub fn layout_json(
    plan_json: &str,
    outputs_json: &str,
    preallocate: bool,
    rt: &Runtime,
) -> Result<String> {
    let plan: Plan = parse("plan", plan_json)?;
    let outputs: Vec<Value> = parse("task outputs", outputs_json)?;
    to_json(&plan.layout(&outputs, preallocate, rt)?)
}

/// [`Layout::place_tasks`] from and to JSON: a JSON array of tasks.
pub fn place_tasks_json(layout_json: &str) -> Result<String> {
    let layout: Layout = parse("layout", layout_json)?;
    let tasks: Vec<AnyTask> = layout
        .place_tasks()
        .into_iter()
        .map(AnyTask::from)
        .collect();
    to_json(&tasks)
}

/// [`Layout::commit`] from JSON; the job's report as JSON.
pub fn commit_json(layout_json: &str) -> Result<String> {
    let layout: Layout = parse("layout", layout_json)?;
    to_json(&layout.commit()?)
}

/// [`Plan::layout_reads`] from and to JSON: a JSON array of paths.
pub fn layout_reads_json(plan_json: &str, outputs_json: &str) -> Result<String> {
    let plan: Plan = parse("plan", plan_json)?;
    let outputs: Vec<Value> = parse("task outputs", outputs_json)?;
    to_json(&plan.layout_reads(&outputs)?)
}

/// Tasks of one kind as tasks of any kind.
fn any<T: Task + Clone>(tasks: &[T]) -> Vec<AnyTask> {
    tasks.iter().cloned().map(AnyTask::from).collect()
}
