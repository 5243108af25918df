//! `sortase view` (and `sortase agd view`, the same arguments): samtools view's flags →
//! [`sortase::ViewJob`] → the count (`-c`) and warnings. The input is a SAM/BAM/CRAM file or an AGD
//! dataset directory. The filters themselves live in `sortase_ops::filter`; this file only names
//! them.

use crate::args::{NoPg, Threads};
use crate::common;
use anyhow::Result;
use sortase::{OutputSpec, ViewJob};
use std::path::PathBuf;

/// Arguments of `sortase view` (samtools view's flags and meanings): view's spelling of the output
/// flags, the job's own (declared on its fields and its filter's: input, regions, -h, -H, -c, -f,
/// -F, -q, -r, -R, -n, -l, -L, -d, -D, -N, -e, -M), then the command's.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ViewArgs {
    /// Output BAM.
    #[arg(short = 'b', long = "bam")]
    bam: bool,
    /// Output CRAM (requires -T).
    #[arg(short = 'C', long = "cram")]
    cram: bool,
    /// Uncompressed BAM output (level 0 BGZF).
    #[arg(short = 'u', long = "uncompressed")]
    uncompressed: bool,
    /// Fast BAM compression (level 1; BAM unless the output name says SAM or CRAM).
    #[arg(short = '1', long = "fast")]
    fast: bool,
    /// Output format: sam, bam or cram.
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    output_fmt: Option<String>,
    /// Write output to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    job: ViewJob,
    #[command(flatten)]
    threads: Threads,
    /// Index the output as it is written (BAM: CSI, `out.bam##idx##out.bam.bai` for BAI; CRAM:
    /// `.crai`).
    #[arg(long = "write-index")]
    write_index: bool,
    #[command(flatten)]
    pg: NoPg,
    /// Reference FASTA (for CRAM).
    #[arg(short = 'T', long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Output option, samtools' `--output-fmt-option`: level=N for BAM; version=3.0|3.1,
    /// seqs_per_slice=N, embed_ref, no_ref, ... for CRAM (repeatable; also `-O bam,level=N`).
    #[arg(long = "output-fmt-option", value_name = "OPT=VAL")]
    output_fmt_option: Vec<String>,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
}

/// Runs `sortase view`.
pub fn run(args: ViewArgs) -> Result<()> {
    // -O wins, then -C, then -b; -u and a level alone mean BAM (the job's rule).
    let named = match (args.cram, args.bam) {
        (true, _) => Some("cram".to_string()),
        (false, true) => Some("bam".to_string()),
        _ => None,
    };
    let mut job = args.job;
    job.output = OutputSpec {
        path: args.output,
        format: args.output_fmt.or(named),
        level: args.fast.then_some(1),
        uncompressed: args.uncompressed,
        reference: args.reference,
        format_options: args.output_fmt_option,
        write_index: args.write_index,
        ..OutputSpec::default()
    }
    .with_format_options()?;
    job.program = args.pg.program(common::command_line);
    let rt = args.threads.runtime(None)?;
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if let (Some(n), true) = (report.count, report.outputs.is_empty()) {
        common::print_stdout(format!("{n}\n"))?;
    }
    Ok(())
}
