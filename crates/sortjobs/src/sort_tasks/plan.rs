//! [`SortJob::plan`]: checks that the job can run as tasks (BAM in, BAM out), estimates the input's
//! record bytes, cuts the input into byte ranges (crates/index's range planner and record-boundary
//! finder), builds the output header and creates the work directory.

use super::{ByteRange, PlanOptions, SortPlan};
use crate::sort::{SortJob, DEFAULT_LEVEL};
use anyhow::Context;
use sortase_bam::Header;
use sortase_exec::error::bail_argument;
use sortase_exec::error::{Error, Result};
use sortase_exec::options::add_program;
use sortase_exec::output::{resolve_output, temp_prefix, OutFormat, ResolvedOutput};
use sortase_exec::parts::create_work_dir;
use sortase_exec::probe::{estimate_record_bytes, input_format, input_path_and_len};
use sortase_exec::runtime::Runtime;
use sortase_exec::wire::HeaderData;
use sortase_exec::writer::OnTheFlyIndex;
use sortase_index::range::plan_ranges;
use sortase_index::IndexBuilder;
use sortase_sort::SortOrder;
use std::path::{Path, PathBuf};

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
    if !job.input_fmt_options.is_empty() {
        bail_argument!("sort tasks take no --input-fmt-option; use `sortase sort` on the file");
    }
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
    let output = check_output(job, order, options, &mut warnings)?;
    let (input, file_len) = input_path_and_len(&job.input).context(job.input.clone())?;
    let estimate = estimate_record_bytes(&input, file_len).context(job.input.clone())?;
    // A map task holds its records and a 16-byte entry per record; a quarter more than the
    // records covers the entries of ~100-byte records and the batches' slack.
    let wanted = (estimate + estimate / 4).div_ceil(options.task_memory as u64);
    let n = wanted.clamp(1, (file_len >> 16).max(1)) as usize;
    let planned = plan_ranges(&input, n).context(job.input.clone())?;
    let header = planned.header.clone();
    let plan = new_plan(job, options, order, input, header, output, warnings, rt)?;
    Ok(SortPlan {
        ranges: ByteRange::from_planned(&planned.ranges),
        ..plan
    })
}

/// [`SortPlan::with_output`] of `job` on `input`: `header` made the output's (the order's
/// `@HD SO`/`SS` set, the job's `@PG` added), `output` as [`check_output`] gives it, and a new work
/// directory next to the output file.
#[allow(clippy::too_many_arguments)]
pub(super) fn new_plan(
    job: &SortJob,
    options: &PlanOptions,
    order: SortOrder,
    input: PathBuf,
    mut header: Header,
    (out, data, level): (ResolvedOutput, PathBuf, u8),
    warnings: Vec<String>,
    rt: &Runtime,
) -> anyhow::Result<SortPlan> {
    let (so, ss) = order.header_values();
    header.set_sort_order(so, ss.as_deref());
    add_program(&mut header, job.program.as_ref());
    let prefix = temp_prefix(job.temp_prefix.as_deref(), Some(&data), rt.temp_dir());
    let work_dir = create_work_dir(&prefix)?;
    Ok(SortPlan::with_output(
        job, options, input, &header, &out, level, work_dir, warnings,
    ))
}

impl SortPlan {
    /// The sort of records that other tasks sort into runs themselves (fq2bam's map tasks, which
    /// give [`super::MapOutput`]s): no input file, `header` the output's (sort order and `@PG`
    /// set), `work_dir` created by the caller. Only the reduce stage and the finish are used.
    pub fn of_records(
        job: &SortJob,
        options: &PlanOptions,
        header: &sortase_bam::Header,
        work_dir: PathBuf,
    ) -> anyhow::Result<SortPlan> {
        let order = job.order.resolve()?;
        let mut warnings = Vec::new();
        let (out, _, level) = check_output(job, order, options, &mut warnings)?;
        Ok(SortPlan::with_output(
            job,
            options,
            PathBuf::new(),
            header,
            &out,
            level,
            work_dir,
            warnings,
        ))
    }

    /// The plan of `job` on `input` without ranges or dataset: `header` the output's, `level` its
    /// libdeflate level, with the index geometry of `out`'s index (`--write-index`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn with_output(
        job: &SortJob,
        options: &PlanOptions,
        input: PathBuf,
        header: &Header,
        out: &ResolvedOutput,
        level: u8,
        work_dir: PathBuf,
        warnings: Vec<String>,
    ) -> SortPlan {
        let index = out.index.as_ref().map(|&(_, bai)| {
            let ix = OnTheFlyIndex::new(header, bai);
            IndexBuilder::new(ix.format(), ix.n_ref(), 0).geometry()
        });
        SortPlan {
            job: job.clone(),
            options: options.clone(),
            input,
            n_ref: header.references().len(),
            header: HeaderData::of(header),
            ranges: Vec::new(),
            work_dir,
            level,
            index,
            warnings,
            dataset: None,
        }
    }
}

/// The output of a sort run as tasks: BAM (its libdeflate level) to a file; a map task's memory
/// given.
pub(super) fn check_output(
    job: &SortJob,
    order: SortOrder,
    options: &PlanOptions,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(ResolvedOutput, PathBuf, u8)> {
    let out = resolve_output(&job.output, DEFAULT_LEVEL, order.is_coordinate(), warnings)?;
    let OutFormat::Bam(level) = out.format else {
        bail_argument!("sort tasks write BAM only (the output's format is SAM or CRAM)");
    };
    let Some(data) = out.data.clone() else {
        bail_argument!("sort tasks need an output file (-o), not standard output");
    };
    if options.task_memory == 0 {
        bail_argument!("task_memory 0: give the memory of one map task, e.g. 768M");
    }
    Ok((out, data, level.libdeflate()))
}
