//! `sortase loc` (the `.loc` record index) and `sortase fetch` (many whole records in one pass): flags →
//! [`sortase::LocJob`] / [`sortase::FetchJob`].

use crate::common;
use anyhow::Result;
use sortase::{FetchJob, FetchRequest, LocJob};
use std::path::PathBuf;

/// Arguments of `sortase loc` (the flags declared on the job's fields, plus `-@`).
#[derive(clap::Args, Debug)]
pub struct LocArgs {
    #[command(flatten)]
    job: LocJob,
    #[command(flatten)]
    threads: crate::args::Threads,
}

/// Arguments of `sortase fetch`: the request (`-n`/`-p`), the job's flags (declared on its
/// fields: input, --sorted, --loc, -o, --verify), then `-@`.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// File of record names, one per line [stdin].
    #[arg(short = 'n', long = "names", value_name = "FILE", conflicts_with = "pairs")]
    names: Option<PathBuf>,
    /// File of `OFFSET SIZE` pairs (uncompressed bytes), one per line.
    #[arg(short = 'p', long = "pairs", value_name = "FILE")]
    pairs: Option<PathBuf>,
    #[command(flatten)]
    job: FetchJob,
    #[command(flatten)]
    threads: crate::args::Threads,
}

/// Runs `sortase loc`.
pub fn loc(args: LocArgs) -> Result<()> {
    let report = args.job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    Ok(())
}

/// Runs `sortase fetch`.
pub fn fetch(args: FetchArgs) -> Result<()> {
    let request = match args.pairs {
        Some(p) => FetchRequest::PairsFile(p),
        None => FetchRequest::NamesFile(args.names),
    };
    let job = FetchJob {
        request,
        ..args.job
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    Ok(())
}
