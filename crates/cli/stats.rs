//! `sortase flagstat` and `sortase idxstats`: flags → [`sortase::FlagstatJob`] /
//! [`sortase::IdxstatsJob`] → samtools' text on stdout.

use crate::common;
use anyhow::Result;
use sortase::{FlagstatJob, IdxstatsJob};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `sortase flagstat`.
#[derive(clap::Args, Debug)]
pub struct FlagstatArgs {
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Output format: default, json or tsv.
    #[arg(
        short = 'O',
        long = "output-fmt",
        value_name = "FORMAT",
        default_value = "default"
    )]
    format: String,
    /// Input BAM.
    input: PathBuf,
}

/// Arguments of `sortase idxstats`.
#[derive(clap::Args, Debug)]
pub struct IdxstatsArgs {
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Input BAM.
    input: PathBuf,
}

/// Runs `sortase flagstat`.
pub fn flagstat(args: FlagstatArgs) -> Result<()> {
    let report = FlagstatJob::new(args.input).run(&common::runtime(args.threads, None)?)?;
    common::print_warnings(&report.warnings);
    std::io::stdout()
        .lock()
        .write_all(report.format(&args.format).as_bytes())?;
    Ok(())
}

/// Runs `sortase idxstats`.
pub fn idxstats(args: IdxstatsArgs) -> Result<()> {
    let report = IdxstatsJob::new(args.input).run(&common::runtime(args.threads, None)?)?;
    common::print_warnings(&report.warnings);
    std::io::stdout()
        .lock()
        .write_all(report.to_text().as_bytes())?;
    Ok(())
}
