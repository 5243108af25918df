//! `sortase merge`: samtools merge's flags → [`sortase::MergeJob`] → `-v` report.

use crate::args::{self, NoPg, OrderFlags, Threads};
use crate::common;
use anyhow::{Context, Result};
use sortase::{MergeJob, MergeMethod, MergeReport};
use std::path::PathBuf;

/// Arguments of `sortase merge` (samtools merge's flags and meanings): the job's own flags (declared
/// on its fields: inputs, output, -r, -c, -p, -s, -h, -f, --checksums), then the command's.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
// The order flags' help for inputs already sorted (mut_args keeps them in their places).
#[command(mut_args(|a| match a.get_id().as_str() {
    "by_name" => a.help("Inputs are sorted by read name (natural order)"),
    "by_name_lex" => a.help("Inputs are sorted by read name (lexicographic order)"),
    "tag" => a.help("Inputs are sorted by TAG"),
    _ => a,
}))]
pub struct MergeArgs {
    #[command(flatten)]
    job: MergeJob,
    #[command(flatten)]
    threads: Threads,
    /// Compression level 1.
    #[arg(short = '1')]
    fast: bool,
    #[command(flatten)]
    order: OrderFlags,
    /// File listing input files, one per line.
    #[arg(short = 'b', value_name = "FILE")]
    list: Option<PathBuf>,
    #[command(flatten)]
    pg: NoPg,
    /// Report how the merge ran (key ranges, or why on one thread) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// Runs `sortase merge`.
pub fn run(args: MergeArgs) -> Result<()> {
    let mut job = args.job;
    if let Some(list) = &args.list {
        let text = std::fs::read_to_string(list)
            .with_context(|| format!("{}: cannot read the input list", list.display()))?;
        let listed = text.lines().filter(|l| !l.is_empty()).map(str::to_string);
        job.inputs.splice(0..0, listed);
    }
    job.output = args::output(&job.output)?;
    if args.fast {
        job.output.level = Some(1);
    }
    job.order = args.order.order();
    job.program = args.pg.program(common::command_line);
    let report = job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        print_report(&report);
    }
    Ok(())
}

fn print_report(r: &MergeReport) {
    if r.ranges > 0 {
        eprintln!(
            "[sortase merge] {} inputs sampled in {:.2} s; merging {} key ranges on {} threads",
            r.inputs, r.sampling_seconds, r.ranges, r.threads
        );
    }
    if let Some(why) = &r.key_ranges_abandoned {
        eprintln!("[sortase merge] {why}: merging on one thread instead");
    }
    if r.method == MergeMethod::OneThread {
        eprintln!(
            "[sortase merge] {} inputs merged on one thread ({})",
            r.inputs,
            if r.key_ranges_abandoned.is_some() {
                "an input is not sorted"
            } else {
                "stdin, SAM or CRAM input, or conflicting reference order"
            }
        );
    }
    common::print_checksums("merge", r.checksums.as_ref());
}
