//! `sortase checksum`: samtools checksum's flags → [`sortase::ChecksumJob`] → samtools' text.

use anyhow::Result;
use sortase::view::parse_flags;
use sortase::ChecksumJob;
use std::path::PathBuf;

/// Arguments of `sortase checksum`.
#[derive(clap::Args, Debug)]
pub struct ChecksumArgs {
    /// Leave out records with any of these flags.
    #[arg(
        short = 'F',
        long = "exclude-flags",
        value_name = "FLAG",
        default_value = "0x900"
    )]
    exclude_flags: String,
    /// Leave out records without all of these flags.
    #[arg(
        short = 'f',
        long = "require-flags",
        value_name = "FLAG",
        default_value = "0"
    )]
    require_flags: String,
    /// BAM flags to use in checksums.
    #[arg(
        short = 'b',
        long = "flag-mask",
        value_name = "FLAG",
        default_value = "0x0c1"
    )]
    flag_mask: String,
    /// Do not reverse-complement sequences.
    #[arg(short = 'c', long = "no-rev-comp")]
    no_rev_comp: bool,
    /// Select tags to checksum.
    #[arg(
        short = 't',
        long = "tags",
        value_name = "STR[,STR]",
        default_value = "BC,FI,QT,RT,TC"
    )]
    tags: String,
    /// Also checksum CHR / POS.
    #[arg(short = 'P', long = "check-pos")]
    check_pos: bool,
    /// Also checksum MAPQ / CIGAR.
    #[arg(short = 'C', long = "check-cigar")]
    check_cigar: bool,
    /// Also checksum PNEXT / RNEXT / TLEN.
    #[arg(short = 'M', long = "check-mate")]
    check_mate: bool,
    /// Also show QC pass/fail lines.
    #[arg(short = 'q', long = "show-qc")]
    show_qc: bool,
    /// Show lines with 0 counts.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Format output as tab delimited text.
    #[arg(short = 'T', long = "tabs")]
    tabs: bool,
    /// Write the report to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Reference FASTA (CRAM input).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Input SAM/BAM/CRAM files [stdin].
    inputs: Vec<String>,
}

/// Runs `sortase checksum`: one report per input, as samtools prints them.
pub fn run(args: ChecksumArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let inputs = if args.inputs.is_empty() {
        vec!["-".to_string()]
    } else {
        args.inputs.clone()
    };
    let mut text = String::new();
    for input in inputs {
        let job = ChecksumJob {
            input,
            exclude_flags: parse_flags(&args.exclude_flags)?,
            require_flags: parse_flags(&args.require_flags)?,
            flag_mask: parse_flags(&args.flag_mask)?,
            no_rev_comp: args.no_rev_comp,
            tags: args.tags.clone(),
            check_pos: args.check_pos,
            check_cigar: args.check_cigar,
            check_mate: args.check_mate,
            show_qc: args.show_qc,
            verbose: args.verbose,
            tabs: args.tabs,
            reference: args.reference.clone(),
        };
        text += &job.run(&rt)?.to_text();
    }
    match &args.output {
        Some(path) => Ok(std::fs::write(path, text)?),
        None => crate::common::print_stdout(text),
    }
}
