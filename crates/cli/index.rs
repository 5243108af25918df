//! `sortase index`: samtools index's flags → [`sortase::IndexJob`] (BAI, or CSI with `-c`/`-m`).

use anyhow::Result;
use sortase::IndexJob;
use std::path::PathBuf;

/// Arguments of `sortase index` (samtools index's flags, declared on the job's fields, plus `-b`,
/// `-@` and the old positional output name).
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// Write a BAI index (default).
    #[arg(short = 'b', long = "bai", overrides_with_all = ["csi", "min_shift"])]
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
    // Of -b, -c and -m the last given wins, as in samtools: clap drops the others (`-b`'s
    // `overrides_with_all`), so a -b that stands leaves neither csi nor min_shift.
    let job = IndexJob {
        output: args.job.output.clone().or(args.out_positional),
        ..args.job
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    crate::common::print_warnings(&report.warnings);
    Ok(())
}
