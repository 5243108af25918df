//! `sortase agd sort|markdup|add-column|drop-column`: flags → [`sortase::SortJob`] (`-O agd`),
//! [`sortase::AgdMarkdupJob`], [`sortase::AgdAddColumnJob`], [`sortase::AgdDropColumnJob`].

use crate::args::Threads;
use crate::common;
use crate::markdup::MarkingArgs;
use anyhow::Result;
use sortase::{AgdAddColumnJob, AgdDropColumnJob, AgdMarkdupJob};
use std::path::PathBuf;

/// Arguments of `sortase agd sort`: `sortase sort`'s, the output a new dataset (`-O agd`).
#[derive(clap::Args, Debug)]
pub struct AgdSortArgs {
    /// zstd level of the column files (1-22) [3]; `-l` too.
    #[arg(long = "level", value_name = "INT")]
    zstd_level: Option<i32>,
    #[command(flatten)]
    sort: crate::sort::SortArgs,
}

/// Arguments of `sortase agd markdup` (`sortase markdup`'s marking options).
#[derive(clap::Args, Debug)]
pub struct MarkdupArgs {
    #[command(flatten)]
    threads: Threads,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ [inside the dataset].
    #[arg(short = 'T', value_name = "PREFIX")]
    temp_prefix: Option<PathBuf>,
    /// zstd level of the duplicate group's files (1-22).
    #[arg(long = "level", value_name = "INT", default_value_t = sortase::agd::DEFAULT_ZSTD_LEVEL)]
    level: i32,
    #[command(flatten)]
    marking: MarkingArgs,
    /// The dataset directory.
    input: PathBuf,
}

/// Arguments of `sortase agd add-column`: the job's flags ([`AgdAddColumnJob`]) and `-@`.
#[derive(clap::Args, Debug)]
pub struct AddColumnArgs {
    #[command(flatten)]
    job: AgdAddColumnJob,
    #[command(flatten)]
    threads: Threads,
}

/// Runs `sortase agd sort`: `sortase sort -O agd`.
pub fn sort(mut args: AgdSortArgs) -> Result<()> {
    let output = &mut args.sort.job.output;
    output.format = Some("agd".into());
    output.level = args.zstd_level.or(output.level);
    crate::sort::run(args.sort)
}

/// Runs `sortase agd markdup`.
pub fn markdup(args: MarkdupArgs) -> Result<()> {
    let rt = args.marking.runtime(&args.threads)?;
    let job = AgdMarkdupJob {
        dataset: args.input,
        mode: args.marking.mode,
        temp_prefix: args.temp_prefix,
        samblaster: args.marking.query.options.clone(),
        picard: args.marking.coord.options(None, common::command_line()),
        zstd_level: args.level,
        command_line: common::command_line(),
    };
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    args.marking.print_summary(&report.summary);
    Ok(())
}

/// Runs `sortase agd add-column`.
pub fn add_column(args: AddColumnArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let job = AgdAddColumnJob {
        command_line: common::command_line(),
        ..args.job
    };
    job.run(&rt)?;
    Ok(())
}

/// Runs `sortase agd drop-column`.
pub fn drop_column(job: AgdDropColumnJob) -> Result<()> {
    job.run()?;
    Ok(())
}
