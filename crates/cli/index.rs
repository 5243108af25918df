//! `sortase index`: samtools index's flags → [`sortase::IndexJob`] (BAI, or CSI with `-c`/`-m`).

use anyhow::Result;
use sortase::IndexJob;
use std::path::PathBuf;

/// Arguments of `sortase index` (samtools index's flags, declared on the job's fields, plus `-b`,
/// `-@` and the old positional output name).
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// Write a BAI index (default).
    #[arg(short = 'b', long = "bai", conflicts_with = "csi")]
    bai: bool,
    #[command(flatten)]
    job: IndexJob,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Index file name (old positional form).
    out_positional: Option<PathBuf>,
}

/// Runs `sortase index`.
pub fn run(args: IndexArgs) -> Result<()> {
    let job = IndexJob {
        output: args.job.output.clone().or(args.out_positional),
        ..args.job
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    crate::common::print_warnings(&report.warnings);
    Ok(())
}
