//! `sortase markdup`: flags → [`sortase::MarkdupJob`] (samblaster's algorithm on query-grouped
//! input, Picard MarkDuplicates' on coordinate-sorted input; the input's `@HD` line decides which,
//! unless `--mode` says so) → samblaster's summary on stderr.

use crate::common;
use anyhow::Result;
use sortase::markdup::Mode as JobMode;
use sortase::options::parse_size;
use sortase::{MarkdupJob, OutputSpec};
use std::path::PathBuf;

/// Which algorithm runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// From the input's @HD line: SO:coordinate is coordinate, anything else query-grouped.
    Auto,
    /// Query-grouped input (aligner output): samblaster's algorithm.
    Query,
    /// Coordinate-sorted input: Picard MarkDuplicates' algorithm.
    Coordinate,
}

/// Arguments of `sortase markdup`.
#[derive(clap::Args, Debug)]
pub struct MarkdupArgs {
    /// Write the output to FILE [stdout].
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Output format: sam, bam or cram [bam, or from the -o extension].
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    pub output_fmt: Option<String>,
    #[command(flatten)]
    pub threads: common::Threads,
    /// Compression level 0-9 with samtools' meaning.
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Uncompressed BAM output.
    #[arg(short = 'u')]
    pub uncompressed: bool,
    /// Write an index with the output (coordinate-sorted BAM only; CSI, or BAI via `##idx##…bai`).
    #[arg(long = "write-index")]
    pub write_index: bool,
    /// Index format for --write-index: csi or bai [csi, or from the ##idx## name].
    #[arg(long = "index-format", value_name = "bai|csi")]
    pub index_format: Option<String>,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    pub no_pg: bool,
    /// Reference FASTA (CRAM input or output).
    #[arg(long = "reference", value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// CRAM output option, samtools' `--output-fmt-option`: version=3.0|3.1, seqs_per_slice=N,
    /// embed_ref, no_ref, ... (repeatable).
    #[arg(long = "output-fmt-option", value_name = "OPT=VAL")]
    pub output_fmt_option: Vec<String>,
    /// Algorithm: auto (from @HD SO), query (samblaster) or coordinate (Picard).
    #[arg(long = "mode", value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// Remove duplicates instead of flagging them (samblaster -r, Picard REMOVE_DUPLICATES).
    #[arg(short = 'r', long = "removeDups")]
    pub remove: bool,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ [OUT.tmp or TMPDIR].
    #[arg(short = 'T', value_name = "PREFIX")]
    pub temp_prefix: Option<PathBuf>,
    /// Prove that no record was lost or changed but for the duplicate flag: sum the records read
    /// and written (samtools checksum -F 0 -P -C -M; with -r the removed ones too) and fail,
    /// removing the output, if they differ; -v prints them.
    #[arg(long = "checksums")]
    pub checksums: bool,
    /// Write Picard's DuplicationMetrics per library (LB of the records' read groups) to FILE
    /// (Picard M=). Query-grouped input: of samblaster's duplicates, with
    /// READ_PAIR_OPTICAL_DUPLICATES 0 (not computed) and no duplicate-set histograms.
    #[arg(long = "metrics", value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Print the checksums (with --checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// samblaster's options (query-grouped input).
    #[command(flatten)]
    pub query: crate::markdup_query::QueryArgs,
    /// Picard's options (coordinate-sorted input).
    #[command(flatten)]
    pub coord: crate::markdup_coord::CoordArgs,
    /// Input SAM/BAM/CRAM file [stdin].
    pub input: Option<String>,
}

impl From<Mode> for JobMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Auto => JobMode::Auto,
            Mode::Query => JobMode::Query,
            Mode::Coordinate => JobMode::Coordinate,
        }
    }
}

/// Runs `sortase markdup`.
pub fn run(args: MarkdupArgs) -> Result<()> {
    let threads = args.threads.count();
    // --max-memory is the runtime's memory pool, from which Picard's read ends are reserved.
    let memory = parse_size(&args.coord.max_memory, "--max-memory")?;
    let rt = common::runtime(Some(threads), Some(memory))?;
    let mut output = OutputSpec {
        path: args.output.clone(),
        format: args.output_fmt.clone(),
        level: args.level,
        uncompressed: args.uncompressed,
        write_index: args.write_index,
        index_format: args.index_format.clone(),
        reference: args.reference.clone(),
        format_options: args.output_fmt_option.clone(),
    }
    .with_format_options()?;
    common::uncompressed_into_pipe(&mut output);
    let job = MarkdupJob {
        input: args.input.clone().unwrap_or_else(|| "-".into()),
        output,
        mode: args.mode.into(),
        remove_duplicates: args.remove,
        temp_prefix: args.temp_prefix.clone(),
        samblaster: args.query.options(),
        picard: args
            .coord
            .options(args.metrics.clone(), common::command_line()),
        program: common::program(args.no_pg),
        checksums: args.checksums,
    };
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if let Some(c) = report.checksums.as_ref().filter(|_| args.verbose) {
        eprint!("[sortase markdup] {}", c.to_text());
    }
    if !args.query.quiet {
        for line in &report.summary {
            eprintln!("{line}");
        }
    }
    Ok(())
}
