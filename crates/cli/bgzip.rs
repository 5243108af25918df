//! `sortase bgzip`: htslib bgzip's flags → [`sortase::BgzipJob`] (the mode is picked as bgzip picks
//! it: [`sortase::BgzipJob::mode`]).

use crate::common;
use anyhow::Result;
use sortase::BgzipJob;

/// Arguments of `sortase bgzip` (htslib bgzip's flags, declared on the job's fields, plus `-@`).
#[derive(clap::Args, Debug)]
pub struct BgzipArgs {
    #[command(flatten)]
    job: BgzipJob,
    #[command(flatten)]
    threads: crate::args::Threads,
}

/// Runs `sortase bgzip`.
pub fn run(args: BgzipArgs) -> Result<()> {
    let report = args.job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    Ok(())
}
