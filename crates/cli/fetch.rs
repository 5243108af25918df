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

/// Arguments of `sortase fetch`.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// File of record names, one per line [stdin].
    #[arg(short = 'n', long = "names", value_name = "FILE", conflicts_with = "pairs")]
    names: Option<PathBuf>,
    /// File of `OFFSET SIZE` pairs (uncompressed bytes), one per line.
    #[arg(short = 'p', long = "pairs", value_name = "FILE")]
    pairs: Option<PathBuf>,
    /// Write records in file order instead of request order.
    #[arg(long = "sorted")]
    sorted: bool,
    /// Location index [FILE.loc; built if missing].
    #[arg(long = "loc", value_name = "FILE")]
    loc: Option<PathBuf>,
    /// Write to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Inflate every block read to its end and check its CRC32 (by default a block is inflated only up
    /// to the last byte wanted from it, about half the work; its CRC32 is then not checked).
    #[arg(long = "verify")]
    verify: bool,
    /// FASTA/FASTQ file, plain or bgzipped (with its .gzi; built if missing).
    input: PathBuf,
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
        input: args.input,
        request,
        sorted: args.sorted,
        loc: args.loc,
        output: args.output,
        verify: args.verify,
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    Ok(())
}
