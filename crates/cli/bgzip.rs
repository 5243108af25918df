//! `sortase bgzip`: htslib bgzip's flags → [`sortase::BgzipJob`] (the mode is picked as bgzip picks
//! it: `-r`, then `-b`, then `-t`, then `-d`, else compress).

use crate::common;
use anyhow::Result;
use sortase::{BgzipJob, BgzipMode};
use std::path::PathBuf;

/// Arguments of `sortase bgzip` (htslib bgzip's flags).
#[derive(clap::Args, Debug)]
pub struct BgzipArgs {
    /// Decompress at this uncompressed offset (needs FILE.gzi); output goes to stdout.
    #[arg(short = 'b', long = "offset", value_name = "INT")]
    offset: Option<u64>,
    /// Write on standard output, keep input files.
    #[arg(short = 'c', long = "stdout")]
    stdout: bool,
    /// Decompress.
    #[arg(short = 'd', long = "decompress")]
    decompress: bool,
    /// Overwrite existing output files.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// Compress and write a BGZF index (FILE.gz.gzi).
    #[arg(short = 'i', long = "index")]
    index: bool,
    /// Name of the BGZF index file [FILE.gz.gzi].
    #[arg(short = 'I', long = "index-name", value_name = "FILE")]
    index_name: Option<PathBuf>,
    /// Keep input files.
    #[arg(short = 'k', long = "keep")]
    keep: bool,
    /// Compression level, 0 to 9, -1 for the default (htslib's level map onto libdeflate).
    #[arg(short = 'l', long = "compress-level", value_name = "INT", allow_negative_numbers = true)]
    level: Option<i32>,
    /// Write to this file, keep input files.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// (Re)build the index of a compressed file.
    #[arg(short = 'r', long = "reindex")]
    reindex: bool,
    /// Decompress this many bytes (with -b).
    #[arg(short = 's', long = "size", value_name = "INT")]
    size: Option<u64>,
    /// Test the integrity of compressed files.
    #[arg(short = 't', long = "test")]
    test: bool,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Input files [stdin].
    files: Vec<PathBuf>,
}

/// Runs `sortase bgzip`.
pub fn run(args: BgzipArgs) -> Result<()> {
    let mode = if args.reindex {
        BgzipMode::Reindex
    } else if let Some(offset) = args.offset {
        BgzipMode::Range {
            offset,
            size: args.size,
        }
    } else if args.test {
        BgzipMode::Test
    } else if args.decompress {
        BgzipMode::Decompress
    } else {
        BgzipMode::Compress
    };
    let job = BgzipJob {
        mode,
        files: args.files,
        output: args.output,
        to_stdout: args.stdout,
        force: args.force,
        keep: args.keep,
        index: args.index,
        index_name: args.index_name,
        level: args.level,
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    Ok(())
}
