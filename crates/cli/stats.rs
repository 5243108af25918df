//! `sortase flagstat`, `sortase idxstats` (also `sortase agd flagstat|idxstats`, the same
//! arguments; the input is a BAM/CRAM/SAM file or an AGD dataset directory) and `sortase stats`: flags → [`sortase::FlagstatJob`] /
//! [`sortase::IdxstatsJob`] / [`sortase::SummaryJob`] → samtools' text (or a table and a page).

use crate::common;
use anyhow::Result;
use sortase::{FlagstatJob, IdxstatsJob, SummaryJob};
use std::path::PathBuf;

/// Arguments of `sortase flagstat`.
#[derive(clap::Args, Debug)]
pub struct FlagstatArgs {
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Output format: default, json or tsv.
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT", default_value = "default")]
    format: String,
    /// Input BAM (CRAM, SAM) or AGD dataset directory.
    input: PathBuf,
}

/// Arguments of `sortase idxstats`.
#[derive(clap::Args, Debug)]
pub struct IdxstatsArgs {
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Input BAM (CRAM) or AGD dataset directory.
    input: PathBuf,
}

/// Runs `sortase flagstat`.
pub fn flagstat(args: FlagstatArgs) -> Result<()> {
    let report = FlagstatJob::new(args.input).run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    common::print_stdout(report.format(&args.format))
}

/// Runs `sortase idxstats`.
pub fn idxstats(args: IdxstatsArgs) -> Result<()> {
    let report = IdxstatsJob::new(args.input).run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    common::print_stdout(report.to_text())
}

/// Arguments of `sortase stats`.
#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// Also draw the counts as an HTML page (inline SVG: reads and mean depth per reference, the
    /// MAPQ histogram; a table of every reference).
    #[arg(long = "plot", value_name = "FILE.html")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Reference FASTA (CRAM input).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Input SAM/BAM/CRAM.
    input: PathBuf,
}

/// Runs `sortase stats`: per reference its length, mapped and unmapped records and mean depth on
/// stdout (idxstats' columns plus the depth), and the page with `--plot`.
pub fn stats(args: StatsArgs) -> Result<()> {
    let job = SummaryJob {
        input: args.input,
        plot: args.plot,
        reference: args.reference,
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    common::print_stdout(report.to_tsv())
}
