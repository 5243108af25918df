//! `sortase agd import|export`: flags → [`sortase::AgdImportJob`], [`sortase::AgdExportJob`] →
//! report. `sortase agd flagstat|idxstats|view` are `sortase flagstat|idxstats|view` of a dataset:
//! the same arguments and job.

use crate::common;
use anyhow::Result;
use sortase::agd::FastqInput;
use sortase::{AgdExportJob, AgdImportJob, OutputSpec};
use std::path::PathBuf;

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
    DropColumn(crate::agd_ops::DropColumnArgs),
    /// samtools view on a dataset: -f/-F/-q filters, regions (coordinate-sorted datasets), counting
    /// (`sortase view DIR`).
    View(crate::view::ViewArgs),
}

/// Arguments of `sortase agd import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The dataset directory to create (must not exist, or be empty).
    #[arg(short = 'o', value_name = "DIR")]
    output: PathBuf,
    /// Most records per chunk.
    #[arg(
        long = "chunk-size",
        value_name = "INT",
        default_value_t = sortase::agd::DEFAULT_CHUNK_SIZE
    )]
    chunk_size: u64,
    /// zstd level of the column files (1-22).
    #[arg(long = "level", value_name = "INT", default_value_t = sortase::agd::DEFAULT_ZSTD_LEVEL)]
    level: i32,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Reference FASTA (CRAM input).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Print records, chunks and bytes per column group (and the checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Prove that no record was lost or changed: sum the records read and the records each chunk's
    /// encoded columns decode to (samtools checksum -F 0 -P -C -M) and fail, leaving no dataset, if
    /// they differ; -v prints them.
    #[arg(long = "checksums")]
    checksums: bool,
    /// FASTQ: single-ended reads (samtools import -0).
    #[arg(short = '0', value_name = "FILE")]
    unpaired: Option<String>,
    /// FASTQ: read 1 of pairs (samtools import -1).
    #[arg(short = '1', long = "r1", value_name = "FILE")]
    read1: Option<String>,
    /// FASTQ: read 2 of pairs (samtools import -2).
    #[arg(short = '2', long = "r2", value_name = "FILE")]
    read2: Option<String>,
    /// FASTQ: pairs and single reads in one file, told apart by /1 /2 name suffixes (samtools import -s).
    #[arg(short = 's', value_name = "FILE")]
    interleaved: Option<String>,
    /// FASTQ: add a read group line "@RG ID:STRING" and RG:Z:STRING to every record.
    #[arg(short = 'R', long = "rg", value_name = "STRING")]
    read_group: Option<String>,
    /// FASTQ: build up a complete @RG line (repeatable; fields joined by tabs).
    #[arg(short = 'r', long = "rg-line", value_name = "STRING")]
    read_group_line: Vec<String>,
    /// Input SAM/BAM/CRAM file [stdin], or one FASTQ file (as -s), or two FASTQ files (as -1 -2).
    #[arg(num_args = 0..=2)]
    inputs: Vec<String>,
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
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Prove that no record was lost or changed: sum the records decoded from the chunks and the
    /// records written (samtools checksum -F 0 -P -C -M) and fail, removing the output, if they
    /// differ; -v prints them (SAM, BAM and CRAM output).
    #[arg(long = "checksums")]
    checksums: bool,
    /// Print the checksums (with --checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// The dataset directory.
    input: PathBuf,
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
    let fastq = FastqInput {
        unpaired: args.unpaired,
        read1: args.read1,
        read2: args.read2,
        interleaved: args.interleaved,
        read_group: args.read_group,
        read_group_line: (!args.read_group_line.is_empty())
            .then(|| args.read_group_line.join("\t")),
    };
    let job = AgdImportJob {
        chunk_size: args.chunk_size,
        zstd_level: args.level,
        reference: args.reference,
        command_line: common::command_line(),
        checksums: args.checksums,
        ..AgdImportJob::from_inputs(&args.inputs, fastq, args.output)?
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
    let output = OutputSpec {
        path: args.output,
        format: args.output_fmt,
        level: args.level,
        uncompressed: args.uncompressed,
        reference: args.reference,
        ..OutputSpec::default()
    };
    let job = AgdExportJob {
        checksums: args.checksums,
        ..AgdExportJob::new(args.input, output)
    };
    let report = job.run(&rt)?;
    if args.verbose {
        common::print_checksums("agd export", report.checksums.as_ref());
    }
    Ok(())
}
