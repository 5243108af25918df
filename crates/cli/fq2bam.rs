//! `sortase fq2bam`: flags → [`sortase::Fq2BamJob`] (FASTQ in, minimap2, samblaster's marking, sort,
//! index) → `-v` report. minimap2's `-x PRESET` is `--preset` here: `-x` names the index, as in the
//! issue's synopsis.

use crate::common::{self, OutputArgs};
use anyhow::Result;
use sortase::{DuplicateMarking, Fq2BamJob, Fq2BamReport};
use std::path::PathBuf;

/// Duplicate marking of `--markdup`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Markdup {
    /// samblaster's algorithm on the aligner's output, before the sort.
    Samblaster,
    /// Picard MarkDuplicates' algorithm, after the sort.
    Picard,
    /// No duplicate marking.
    None,
}

/// Arguments of `sortase fq2bam`.
#[derive(clap::Args, Debug)]
pub struct Fq2BamArgs {
    /// minimap2 index (.mmi) or reference FASTA.
    #[arg(short = 'x', long = "index", value_name = "REF.mmi|REF.fa")]
    index: PathBuf,
    #[command(flatten)]
    out: OutputArgs,
    /// minimap2 preset: sr, map-ont, map-hifi, map-pb, lr:hq, splice, asm5, ... (minimap2 -x).
    #[arg(long = "preset", value_name = "PRESET", default_value = "sr")]
    preset: String,
    /// Read group line, e.g. '@RG\tID:lane1\tSM:x' (minimap2 -R).
    #[arg(short = 'R', value_name = "STR")]
    read_group: Option<String>,
    /// Duplicate marking.
    #[arg(long = "markdup", value_enum, default_value_t = Markdup::Samblaster)]
    markdup: Markdup,
    /// Write MD tags (minimap2 --MD).
    #[arg(long = "MD")]
    md: bool,
    /// Write short cs tags (minimap2 --cs).
    #[arg(long = "cs")]
    cs: bool,
    #[command(flatten)]
    threads: common::Threads,
    /// Memory per thread for the index, the read batches and the sort, with K/M/G suffix [768M per
    /// thread for the batches and the sort, plus the index's own size].
    #[arg(short = 'm', value_name = "INT[KMG]")]
    mem_per_thread: Option<String>,
    /// Memory for all threads together (overrides -m).
    #[arg(long = "max-memory", value_name = "INT[KMG]")]
    max_memory: Option<String>,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ [OUT.tmp or TMPDIR].
    #[arg(short = 'T', value_name = "PREFIX")]
    temp_prefix: Option<PathBuf>,
    /// Do not add sortase's @PG line (minimap2's is always written).
    #[arg(long = "no-PG")]
    no_pg: bool,
    /// Prove that no read was lost or changed: sum the reads as samtools import makes them records
    /// and the primary records written (samtools checksum's defaults: the duplicate flag, mapping
    /// and mates outside the sums) and fail, removing the output, if they differ; -v prints them.
    #[arg(long = "checksums")]
    checksums: bool,
    /// Report phases and counts (and the checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Reads: FASTQ/FASTA, plain, gzip or BGZF (R1 of a pair).
    reads1: PathBuf,
    /// R2 of a pair.
    reads2: Option<PathBuf>,
}

/// Runs `sortase fq2bam`.
pub fn run(args: Fq2BamArgs) -> Result<()> {
    let threads = args.threads.count();
    let memory = crate::sort::memory_budget(
        threads,
        args.mem_per_thread.as_deref(),
        args.max_memory.as_deref(),
    )?
    .or_else(|| sortase::fq2bam::default_memory(threads, &args.index));
    let rt = common::runtime(Some(threads), memory)?;
    let mut job = Fq2BamJob::new(&args.index, &args.reads1, args.out.spec()?);
    job.reads2 = args.reads2.clone();
    job.preset = args.preset.clone();
    job.read_group = args.read_group.clone();
    job.markdup = match args.markdup {
        Markdup::Samblaster => DuplicateMarking::Samblaster,
        Markdup::Picard => DuplicateMarking::Picard,
        Markdup::None => DuplicateMarking::None,
    };
    job.md = args.md;
    job.cs = args.cs;
    job.temp_prefix = args.temp_prefix.clone();
    job.program = common::program(args.no_pg);
    job.checksums = args.checksums;
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        print_report(&report);
    }
    Ok(())
}

fn print_report(r: &Fq2BamReport) {
    for p in &r.phases {
        eprintln!(
            "[sortase fq2bam] phase {:<6} {:>8.2} s wall {:>5.0}% CPU",
            p.name, p.seconds, p.cpu_percent
        );
    }
    eprintln!(
        "[sortase fq2bam] {} reads ({} templates, {} bases) in {} chunks -> {} records; {} duplicate templates ({} records); index {} MiB, budget {} MiB ({} MiB for records), {} runs spilled",
        r.reads,
        r.fragments,
        r.bases,
        r.chunks,
        r.records,
        r.duplicate_templates,
        r.duplicate_records,
        r.index_memory >> 20,
        r.memory_budget >> 20,
        r.record_memory >> 20,
        r.runs_spilled
    );
    if let Some(c) = &r.checksums {
        eprint!("[sortase fq2bam] {}", c.to_text());
    }
}
