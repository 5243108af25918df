//! `sortase agd import|export|flagstat`: flags → [`sortase::AgdImportJob`],
//! [`sortase::AgdExportJob`], [`sortase::AgdFlagstatJob`] → report.

use crate::common;
use anyhow::Result;
use sortase::{AgdExportJob, AgdFlagstatJob, AgdImportJob, OutputSpec};
use std::io::Write;
use std::path::PathBuf;

/// `sortase agd` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AgdCommand {
    /// SAM/BAM/CRAM into a new AGD dataset directory (manifest + Parquet column chunks).
    Import(ImportArgs),
    /// An AGD dataset back into BAM/SAM/CRAM, record for record as imported, or FASTQ (samtools fastq).
    Export(ExportArgs),
    /// Flag statistics of a dataset, identical to samtools flagstat of the BAM it came from.
    Flagstat(FlagstatArgs),
    /// A new dataset sorted as samtools sort sorts the BAM (coordinate, -n, -N, -t TAG).
    Sort(crate::agd_ops::SortArgs),
    /// Duplicate marking (samblaster or Picard, as sortase markdup) into a `duplicate` column group.
    Markdup(crate::agd_ops::MarkdupArgs),
    /// Adds (or replaces) an extra column group from a program's per-record output.
    AddColumn(crate::agd_ops::AddColumnArgs),
    /// Drops an extra column group.
    DropColumn(crate::agd_ops::DropColumnArgs),
}

/// Arguments of `sortase agd import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The dataset directory to create (must not exist, or be empty).
    #[arg(short = 'o', value_name = "DIR")]
    output: PathBuf,
    /// Most records per chunk.
    #[arg(long = "chunk-size", value_name = "INT", default_value_t = sortase::agd::DEFAULT_CHUNK_SIZE)]
    chunk_size: u64,
    /// zstd level of the column files (1-22).
    #[arg(long = "level", value_name = "INT", default_value_t = sortase::agd::DEFAULT_ZSTD_LEVEL)]
    level: i32,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Reference FASTA (CRAM input).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Print records, chunks and bytes per column group on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Input SAM/BAM/CRAM file [stdin].
    input: Option<String>,
}

/// Arguments of `sortase agd export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Write to FILE [stdout].
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format: sam, bam, cram or fastq [bam, or from the -o extension].
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    output_fmt: Option<String>,
    /// Compression level 0-9 with samtools' meaning.
    #[arg(short = 'l', value_name = "INT")]
    level: Option<i32>,
    /// Uncompressed BAM output.
    #[arg(short = 'u')]
    uncompressed: bool,
    /// Reference FASTA (CRAM output).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// The dataset directory.
    input: PathBuf,
}

/// Arguments of `sortase agd flagstat`.
#[derive(clap::Args, Debug)]
pub struct FlagstatArgs {
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Output format: default, json or tsv.
    #[arg(
        short = 'O',
        long = "output-fmt",
        value_name = "FORMAT",
        default_value = "default"
    )]
    format: String,
    /// The dataset directory.
    input: PathBuf,
}

/// Runs a `sortase agd` subcommand.
pub fn run(command: AgdCommand) -> Result<()> {
    match command {
        AgdCommand::Import(args) => import(args),
        AgdCommand::Export(args) => export(args),
        AgdCommand::Flagstat(args) => flagstat(args),
        AgdCommand::Sort(args) => crate::agd_ops::sort(args),
        AgdCommand::Markdup(args) => crate::agd_ops::markdup(args),
        AgdCommand::AddColumn(args) => crate::agd_ops::add_column(args),
        AgdCommand::DropColumn(args) => crate::agd_ops::drop_column(args),
    }
}

fn import(args: ImportArgs) -> Result<()> {
    let rt = common::runtime(args.threads, None)?;
    let job = AgdImportJob {
        input: args.input.unwrap_or_else(|| "-".into()),
        output: args.output,
        chunk_size: args.chunk_size,
        zstd_level: args.level,
        reference: args.reference,
        command_line: common::command_line(),
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
    }
    Ok(())
}

fn export(args: ExportArgs) -> Result<()> {
    let rt = common::runtime(args.threads, None)?;
    let output = OutputSpec {
        path: args.output,
        format: args.output_fmt,
        level: args.level,
        uncompressed: args.uncompressed,
        reference: args.reference,
        ..OutputSpec::default()
    };
    AgdExportJob::new(args.input, output).run(&rt)?;
    Ok(())
}

fn flagstat(args: FlagstatArgs) -> Result<()> {
    let report = AgdFlagstatJob::new(args.input).run(&common::runtime(args.threads, None)?)?;
    let mut out = std::io::stdout().lock();
    out.write_all(report.format(&args.format).as_bytes())?;
    out.flush()?;
    Ok(())
}
