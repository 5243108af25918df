//! `sortase merge`: samtools merge's flags → [`sortase::MergeJob`] → `-v` report.

use crate::args::{NoPg, OrderFlags, OutputArgs, Threads};
use crate::common;
use anyhow::{Context, Result};
use sortase::{MergeJob, MergeMethod, MergeReport};
use std::path::PathBuf;

/// Arguments of `sortase merge` (samtools merge's flags and meanings).
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
    out: OutputArgs,
    #[command(flatten)]
    threads: Threads,
    /// Compression level 1.
    #[arg(short = '1')]
    fast: bool,
    #[command(flatten)]
    order: OrderFlags,
    /// Attach an RG tag to each record, named after its input file.
    #[arg(short = 'r')]
    attach_rg: bool,
    /// Combine @RG lines with colliding IDs instead of renaming them.
    #[arg(short = 'c')]
    combine_rg: bool,
    /// Combine @PG lines with colliding IDs instead of renaming them.
    #[arg(short = 'p')]
    combine_pg: bool,
    /// Seed for the suffixes of renamed IDs [time].
    #[arg(short = 's', value_name = "VALUE")]
    seed: Option<i64>,
    /// Overwrite the output file if it exists.
    #[arg(short = 'f')]
    force: bool,
    /// File listing input files, one per line.
    #[arg(short = 'b', value_name = "FILE")]
    list: Option<PathBuf>,
    /// Use the header of FILE as the base of the output header.
    #[arg(short = 'h', value_name = "FILE")]
    header_file: Option<PathBuf>,
    #[command(flatten)]
    pg: NoPg,
    /// Prove that no record was lost or changed: sum the records read (as translated into the
    /// output header) and written (samtools checksum -F 0 -P -C -M) and fail, removing the output,
    /// if they differ; -v prints them.
    #[arg(long = "checksums")]
    checksums: bool,
    /// Report how the merge ran (key ranges, or why on one thread) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Input files.
    inputs: Vec<String>,
}

/// Runs `sortase merge`.
pub fn run(args: MergeArgs) -> Result<()> {
    let mut inputs = Vec::new();
    if let Some(list) = &args.list {
        let text = std::fs::read_to_string(list)
            .with_context(|| format!("{}: cannot read the input list", list.display()))?;
        inputs.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    inputs.extend(args.inputs);
    let mut output = args.out.spec()?;
    if args.fast {
        output.level = Some(1);
    }
    let job = MergeJob {
        inputs,
        output,
        order: args.order.order(),
        attach_rg: args.attach_rg,
        combine_rg: args.combine_rg,
        combine_pg: args.combine_pg,
        seed: args.seed,
        header_file: args.header_file,
        force: args.force,
        program: args.pg.program(),
        checksums: args.checksums,
    };
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
