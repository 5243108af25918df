//! `sortase flagstat`, `sortase idxstats` (also `sortase agd flagstat|idxstats`, the same
//! arguments; the input is a BAM/CRAM/SAM file or an AGD dataset directory) and `sortase stats`: flags → [`sortase::FlagstatJob`] /
//! [`sortase::IdxstatsJob`] / [`sortase::SummaryJob`] → samtools' text (or a table and a page).

use crate::common;
use anyhow::Result;
use sortase::{FlagstatJob, IdxstatsJob, SummaryJob};

/// Arguments of `sortase flagstat` (the job's input, `-@` and the text's format).
#[derive(clap::Args, Debug)]
pub struct FlagstatArgs {
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Output format: default, json or tsv.
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT", default_value = "default")]
    format: String,
    #[command(flatten)]
    job: FlagstatJob,
}

/// Arguments of `sortase idxstats` (the job's input and `-@`).
#[derive(clap::Args, Debug)]
pub struct IdxstatsArgs {
    #[command(flatten)]
    threads: crate::args::Threads,
    #[command(flatten)]
    job: IdxstatsJob,
}

/// Runs `sortase flagstat`.
pub fn flagstat(args: FlagstatArgs) -> Result<()> {
    let report = args.job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    common::print_stdout(report.format(&args.format))
}

/// Runs `sortase idxstats`.
pub fn idxstats(args: IdxstatsArgs) -> Result<()> {
    let report = args.job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    common::print_stdout(report.to_text())
}

/// Arguments of `sortase stats` (the flags declared on the job's fields, plus `-@`).
#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    job: SummaryJob,
    #[command(flatten)]
    threads: crate::args::Threads,
}

/// Runs `sortase stats`: per reference its length, mapped and unmapped records and mean depth on
/// stdout (idxstats' columns plus the depth), and the page with `--plot`.
pub fn stats(args: StatsArgs) -> Result<()> {
    let report = args.job.run(&args.threads.runtime(None)?)?;
    common::print_stdout(report.to_tsv())
}
