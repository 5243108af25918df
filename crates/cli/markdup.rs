//! `sortase markdup`: flags → [`sortase::MarkdupJob`] (samblaster's algorithm on query-grouped
//! input, Picard MarkDuplicates' on coordinate-sorted input; the input's `@HD` line decides which,
//! unless `--mode` says so) → samblaster's summary on stderr.

use crate::args::{self, NoPg, Threads};
use crate::common;
use anyhow::Result;
use sortase::markdup::Mode;
use sortase::options::parse_size;
use sortase::{MarkdupJob, Runtime};
use std::path::PathBuf;

/// The marking flags `markdup` and `agd markdup` share: the algorithm and each algorithm's options
/// (under their own headings, so it goes after a command's other options).
#[derive(clap::Args, Debug)]
pub struct MarkingArgs {
    /// Algorithm: auto (from @HD SO), query (samblaster) or coordinate (Picard).
    #[arg(long = "mode", value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// samblaster's options (query-grouped input).
    #[command(flatten)]
    pub query: crate::markdup_query::QueryArgs,
    /// Picard's options (coordinate-sorted input).
    #[command(flatten)]
    pub coord: crate::markdup_coord::CoordArgs,
}

impl MarkingArgs {
    /// The runtime on `threads` whose memory pool is `--max-memory`, from which Picard's read ends
    /// are reserved.
    pub fn runtime(&self, threads: &Threads) -> Result<Runtime> {
        threads.runtime(Some(parse_size(&self.coord.max_memory, "--max-memory")?))
    }

    /// Prints samblaster's summary on stderr, unless `-q`.
    pub fn print_summary(&self, summary: &[String]) {
        if !self.query.quiet {
            for line in summary {
                eprintln!("{line}");
            }
        }
    }
}

/// Arguments of `sortase markdup`: the job's own flags (declared on its fields: input, output, -r,
/// -T, --checksums), then the command's and the marking flags.
#[derive(clap::Args, Debug)]
#[command(mut_arg("write_index", |a| a.help(
    "Write an index with the output (coordinate-sorted BAM only; CSI, or BAI via `##idx##…bai`)"
)))]
pub struct MarkdupArgs {
    #[command(flatten)]
    job: MarkdupJob,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    pg: NoPg,
    /// Write Picard's DuplicationMetrics per library (LB of the records' read groups) to FILE
    /// (Picard M=). Query-grouped input: of samblaster's duplicates, with
    /// READ_PAIR_OPTICAL_DUPLICATES 0 (not computed) and no duplicate-set histograms.
    #[arg(long = "metrics", value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// Print the checksums (with --checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    #[command(flatten)]
    marking: MarkingArgs,
}

/// Runs `sortase markdup`.
pub fn run(args: MarkdupArgs) -> Result<()> {
    let rt = args.marking.runtime(&args.threads)?;
    let mut job = args.job;
    job.output = args::output_for_pipe(&job.output)?;
    job.mode = args.marking.mode;
    job.samblaster = args.marking.query.options.clone();
    job.picard = (args.marking.coord).options(args.metrics.clone(), common::command_line());
    job.program = args.pg.program(common::command_line);
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        common::print_checksums("markdup", report.checksums.as_ref());
    }
    args.marking.print_summary(&report.summary);
    Ok(())
}
