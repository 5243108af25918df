//! `sortase agd import|export|flagstat|idxstats|view`: flags → [`sortase::AgdImportJob`],
//! [`sortase::AgdExportJob`], [`sortase::AgdFlagstatJob`], [`sortase::AgdIdxstatsJob`],
//! [`sortase::AgdViewJob`] → report.

use crate::common;
use anyhow::Result;
use sortase::agd::FastqInput;
use sortase::view::parse_flags;
use sortase::{AgdExportJob, AgdFlagstatJob, AgdIdxstatsJob, AgdImportJob, AgdViewJob, OutputSpec};
use std::io::Write;
use std::path::PathBuf;

/// `sortase agd` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AgdCommand {
    /// SAM/BAM/CRAM or FASTQ (as samtools import) into a new AGD dataset directory (manifest +
    /// Parquet column chunks).
    Import(ImportArgs),
    /// An AGD dataset back into BAM/SAM/CRAM, record for record as imported, or FASTQ (samtools fastq).
    Export(ExportArgs),
    /// Flag statistics of a dataset, identical to samtools flagstat of the BAM it came from.
    Flagstat(FlagstatArgs),
    /// Per-reference mapped/unmapped counts, identical to samtools idxstats of the BAM it came from.
    Idxstats(IdxstatsArgs),
    /// A new dataset sorted as samtools sort sorts the BAM (coordinate, -n, -N, -t TAG).
    Sort(crate::agd_ops::SortArgs),
    /// Duplicate marking (samblaster or Picard, as sortase markdup) into a `duplicate` column group.
    Markdup(crate::agd_ops::MarkdupArgs),
    /// Adds (or replaces) an extra column group from a program's per-record output.
    AddColumn(crate::agd_ops::AddColumnArgs),
    /// Drops an extra column group.
    DropColumn(crate::agd_ops::DropColumnArgs),
    /// samtools view on a dataset: filters, regions (coordinate-sorted datasets), counting.
    View(ViewArgs),
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
    #[command(flatten)]
    threads: common::Threads,
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

impl ImportArgs {
    /// The FASTQ input the flags and inputs name, if any.
    fn fastq(&self) -> Result<Option<FastqInput>> {
        let mut fastq = FastqInput {
            unpaired: self.unpaired.clone(),
            read1: self.read1.clone(),
            read2: self.read2.clone(),
            interleaved: self.interleaved.clone(),
            read_group: self.read_group.clone(),
            read_group_line: (!self.read_group_line.is_empty())
                .then(|| self.read_group_line.join("\t")),
        };
        let flagged = !fastq.paths().is_empty();
        match (flagged, self.inputs.as_slice()) {
            (true, []) => Ok(Some(fastq)),
            (true, _) => {
                anyhow::bail!("give FASTQ files either with -0/-1/-2/-s or as arguments, not both")
            }
            (false, [r1, _]) if !sortase::agd::fastq::looks_like_fastq(r1) => anyhow::bail!(
                "{r1}: not FASTQ; two inputs are R1 and R2 FASTQ files (one SAM/BAM/CRAM at a time)"
            ),
            (false, [r1, r2]) => {
                fastq.read1 = Some(r1.clone());
                fastq.read2 = Some(r2.clone());
                Ok(Some(fastq))
            }
            (false, [one]) if sortase::agd::fastq::looks_like_fastq(one) => {
                fastq.interleaved = Some(one.clone());
                Ok(Some(fastq))
            }
            (false, _) if fastq.read_group.is_some() || fastq.read_group_line.is_some() => {
                anyhow::bail!("-R and -r apply to FASTQ input only")
            }
            (false, _) => Ok(None),
        }
    }
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
    threads: common::Threads,
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

/// Arguments of `sortase agd flagstat`.
#[derive(clap::Args, Debug)]
pub struct FlagstatArgs {
    #[command(flatten)]
    threads: common::Threads,
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

/// Arguments of `sortase agd idxstats`.
#[derive(clap::Args, Debug)]
pub struct IdxstatsArgs {
    #[command(flatten)]
    threads: common::Threads,
    /// The dataset directory.
    input: PathBuf,
}

/// Arguments of `sortase agd view` (samtools view's flags and meanings).
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
    /// Output format: sam, bam or cram [sam, or from the -o extension].
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    output_fmt: Option<String>,
    /// Write output to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Include the header in SAM output.
    #[arg(short = 'h', long = "with-header")]
    with_header: bool,
    /// Print the header only.
    #[arg(short = 'H', long = "header-only")]
    header_only: bool,
    /// Print only the count of matching records.
    #[arg(short = 'c', long = "count")]
    count: bool,
    /// The regions as one union: each record once, in file order.
    #[arg(short = 'M', long = "use-index")]
    multi_region: bool,
    #[command(flatten)]
    threads: common::Threads,
    /// Compression level 0-9 (samtools' meaning) [6].
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    level: Option<i32>,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    no_pg: bool,
    /// Reference FASTA (for CRAM).
    #[arg(short = 'T', long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Only records with all of these flag bits set (number or names).
    #[arg(short = 'f', long = "require-flags", value_name = "FLAG")]
    require: Option<String>,
    /// Only records with none of these flag bits set.
    #[arg(short = 'F', long = "excl-flags", value_name = "FLAG")]
    exclude: Option<String>,
    /// Only records with mapping quality ≥ INT.
    #[arg(short = 'q', long = "min-MQ", value_name = "INT", default_value_t = 0)]
    min_mapq: u8,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// The dataset directory.
    input: PathBuf,
    /// Regions (`chr`, `chr:beg-end`, `*`) of a coordinate-sorted dataset.
    regions: Vec<String>,
}

/// Runs a `sortase agd` subcommand.
pub fn run(command: AgdCommand) -> Result<()> {
    match command {
        AgdCommand::Import(args) => import(args),
        AgdCommand::Export(args) => export(args),
        AgdCommand::Flagstat(args) => flagstat(args),
        AgdCommand::Idxstats(args) => idxstats(args),
        AgdCommand::Sort(args) => crate::agd_ops::sort(args),
        AgdCommand::Markdup(args) => crate::agd_ops::markdup(args),
        AgdCommand::AddColumn(args) => crate::agd_ops::add_column(args),
        AgdCommand::DropColumn(args) => crate::agd_ops::drop_column(args),
        AgdCommand::View(args) => view(args),
    }
}

fn import(args: ImportArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let fastq = args.fastq()?;
    let job = AgdImportJob {
        input: match &fastq {
            Some(f) => f.paths().join(" "),
            None => args.inputs.first().cloned().unwrap_or_else(|| "-".into()),
        },
        fastq,
        output: args.output,
        chunk_size: args.chunk_size,
        zstd_level: args.level,
        reference: args.reference,
        command_line: common::command_line(),
        checksums: args.checksums,
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
        if let Some(c) = &report.checksums {
            eprint!("[sortase agd import] {}", c.to_text());
        }
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
    if let Some(c) = report.checksums.as_ref().filter(|_| args.verbose) {
        eprint!("[sortase agd export] {}", c.to_text());
    }
    Ok(())
}

fn flagstat(args: FlagstatArgs) -> Result<()> {
    let report = AgdFlagstatJob::new(args.input).run(&args.threads.runtime(None)?)?;
    let mut out = std::io::stdout().lock();
    out.write_all(report.format(&args.format).as_bytes())?;
    out.flush()?;
    Ok(())
}

fn idxstats(args: IdxstatsArgs) -> Result<()> {
    let report = AgdIdxstatsJob::new(args.input).run(&args.threads.runtime(None)?)?;
    let mut out = std::io::stdout().lock();
    out.write_all(report.to_text().as_bytes())?;
    out.flush()?;
    Ok(())
}

fn view(args: ViewArgs) -> Result<()> {
    let flags = |f: &Option<String>| f.as_deref().map(parse_flags).transpose();
    // -O wins, then -C, then -b; -u and -l alone mean BAM (as `sortase view`).
    let named = match (args.cram, args.bam) {
        (true, _) => Some("cram".to_string()),
        (false, true) => Some("bam".to_string()),
        _ => None,
    };
    let job = AgdViewJob {
        input: args.input,
        output: OutputSpec {
            path: args.output,
            format: args.output_fmt.or(named),
            level: args.level,
            uncompressed: args.uncompressed,
            reference: args.reference,
            ..OutputSpec::default()
        },
        with_header: args.with_header,
        header_only: args.header_only,
        count: args.count,
        require_flags: flags(&args.require)?.unwrap_or(0),
        exclude_flags: flags(&args.exclude)?.unwrap_or(0),
        min_mapq: args.min_mapq,
        regions: args.regions,
        multi_region: args.multi_region,
        program: common::program(args.no_pg),
    };
    let report = job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&report.warnings);
    if let (Some(n), true) = (report.count, report.outputs.is_empty()) {
        writeln!(std::io::stdout().lock(), "{n}")?;
    }
    Ok(())
}
