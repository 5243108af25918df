//! `sortase agd import|export`: flags → [`sortase::AgdImportJob`], [`sortase::AgdExportJob`] →
//! report. `sortase agd flagstat|idxstats|view` are `sortase flagstat|idxstats|view` of a dataset:
//! the same arguments and job.

use crate::common;
use anyhow::Result;
use sortase::{AgdExportJob, AgdImportJob};

/// `sortase agd` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AgdCommand {
    /// SAM/BAM/CRAM or FASTQ (as samtools import) into a new AGD dataset directory (manifest +
    /// Parquet column chunks).
    Import(ImportArgs),
    /// An AGD dataset back into BAM/SAM/CRAM, record for record as imported, or FASTQ (samtools fastq).
    Export(ExportArgs),
    /// Flag statistics of a dataset, identical to samtools flagstat of the BAM it came from
    /// (`sortase flagstat DIR`).
    Flagstat(crate::stats::FlagstatArgs),
    /// Per-reference mapped/unmapped counts, identical to samtools idxstats of the BAM it came from
    /// (`sortase idxstats DIR`).
    Idxstats(crate::stats::IdxstatsArgs),
    /// A new dataset sorted as samtools sort sorts the BAM (coordinate, -n, -N, -t TAG).
    Sort(crate::agd_ops::AgdSortArgs),
    /// Duplicate marking (samblaster or Picard, as sortase markdup) into a `duplicate` column group.
    Markdup(crate::agd_ops::MarkdupArgs),
    /// Adds (or replaces) an extra column group from a program's per-record output.
    AddColumn(crate::agd_ops::AddColumnArgs),
    /// Drops an extra column group.
    DropColumn(sortase::agd::AgdDropColumnJob),
    /// samtools view on a dataset: -f/-F/-q filters, regions (coordinate-sorted datasets), counting
    /// (`sortase view DIR`).
    View(crate::view::ViewArgs),
}

/// Arguments of `sortase agd import`: the job's flags ([`AgdImportJob`]), `-@` and `-v`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    job: AgdImportJob,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Print records, chunks and bytes per column group (and the checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
}

/// Arguments of `sortase agd export`: the job's flags ([`AgdExportJob`]), `-@` and `-v`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    job: AgdExportJob,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Print the checksums (with --checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
}

/// Runs a `sortase agd` subcommand.
pub fn run(command: AgdCommand) -> Result<()> {
    match command {
        AgdCommand::Import(args) => import(args),
        AgdCommand::Export(args) => export(args),
        AgdCommand::Flagstat(args) => crate::stats::flagstat(args),
        AgdCommand::Idxstats(args) => crate::stats::idxstats(args),
        AgdCommand::Sort(args) => crate::agd_ops::sort(args),
        AgdCommand::Markdup(args) => crate::agd_ops::markdup(args),
        AgdCommand::AddColumn(args) => crate::agd_ops::add_column(args),
        AgdCommand::DropColumn(args) => crate::agd_ops::drop_column(args),
        AgdCommand::View(args) => crate::view::run(args),
    }
}

fn import(args: ImportArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let job = AgdImportJob {
        command_line: common::command_line(),
        ..args.job
    };
    let report = job.run(&rt)?;
    if args.verbose {
        eprintln!(
            "[sortase agd import] {} records in {} chunks ({} kept whole), {} bytes",
            report.records, report.chunks, report.raw_records, report.bytes
        );
        for (group, bytes) in &report.group_bytes {
            eprintln!("[sortase agd import] {group:<8} {bytes:>12} bytes");
        }
        common::print_checksums("agd import", report.checksums.as_ref());
    }
    Ok(())
}

fn export(args: ExportArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let mut job = args.job;
    job.output = crate::args::output(&job.output)?;
    let report = job.run(&rt)?;
    if args.verbose {
        common::print_checksums("agd export", report.checksums.as_ref());
    }
    Ok(())
}
