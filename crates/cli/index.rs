//! `sortase index`: samtools index's flags → [`sortase::IndexJob`] (BAI, or CSI with `-c`/`-m`).

use anyhow::Result;
use sortase::IndexJob;
use std::path::PathBuf;

/// Arguments of `sortase index` (samtools index's flags).
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// Write a BAI index (default).
    #[arg(short = 'b', long = "bai", conflicts_with = "csi")]
    bai: bool,
    /// Write a CSI index.
    #[arg(short = 'c', long = "csi")]
    csi: bool,
    /// min_shift for CSI (implies -c).
    #[arg(short = 'm', long = "min-shift", value_name = "INT")]
    min_shift: Option<u32>,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Index file name [in.bam.bai or in.bam.csi].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Input BAM (coordinate-sorted).
    input: PathBuf,
    /// Index file name (old positional form).
    out_positional: Option<PathBuf>,
}

/// Runs `sortase index`.
pub fn run(args: IndexArgs) -> Result<()> {
    let job = IndexJob {
        input: args.input,
        output: args.output.or(args.out_positional),
        csi: args.csi || args.min_shift.is_some(),
        min_shift: args.min_shift.unwrap_or(14),
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    crate::common::print_warnings(&report.warnings);
    Ok(())
}
