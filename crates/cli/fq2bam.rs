//! `sortase fq2bam`: flags → [`sortase::Fq2BamJob`] (FASTQ in, minimap2, samblaster's marking, sort,
//! index) → `-v` report. minimap2's `-x PRESET` is `--preset` here: `-x` names the index, as in the
//! issue's synopsis.

use crate::args::{self, Memory, NoPg, TempPrefix, Threads};
use crate::common;
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
#[command(mut_arg("mem_per_thread", |a| a.help(
    "Memory per thread for the index, the read batches and the sort, with K/M/G suffix [768M per \
     thread for the batches and the sort, plus the index's own size]"
)))]
#[command(mut_arg("no_pg", |a| a.help("Do not add sortase's @PG line (minimap2's is always written)")))]
pub struct Fq2BamArgs {
    /// minimap2 index (.mmi) or reference FASTA.
    #[arg(short = 'x', long = "index", value_name = "REF.mmi|REF.fa")]
    index: PathBuf,
    #[command(flatten)]
    out: sortase::OutputSpec,
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
    threads: Threads,
    #[command(flatten)]
    memory: Memory,
    #[command(flatten)]
    temp: TempPrefix,
    #[command(flatten)]
    pg: NoPg,
    /// Prove that no read was lost or changed: sum the reads as samtools import makes them records
    /// and the primary records written (samtools checksum's defaults: the duplicate flag, mapping
    /// and mates outside the sums) and fail, removing the output, if they differ; -v prints them.
    #[arg(long = "checksums")]
    checksums: bool,
    /// Report phases and counts (and the checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Reads: FASTQ/FASTA, plain, gzip or BGZF (R1 of a pair), or an AGD dataset of the reads
    /// (`sortase agd import -1 R1 -2 R2`), given alone.
    reads1: PathBuf,
    /// R2 of a pair.
    reads2: Option<PathBuf>,
}

/// Runs `sortase fq2bam`.
pub fn run(args: Fq2BamArgs) -> Result<()> {
    let threads = args.threads.count();
    let budget = args.memory.budget(threads)?;
    let memory = budget.or_else(|| sortase::fq2bam::default_memory(threads, &args.index));
    let rt = args.threads.runtime(memory)?;
    let mut job = Fq2BamJob::new(&args.index, &args.reads1, args::output(&args.out)?);
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
    job.temp_prefix = args.temp.temp_prefix.clone();
    job.program = args.pg.program();
    job.checksums = args.checksums;
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        print_report(&report);
    }
    Ok(())
}

fn print_report(r: &Fq2BamReport) {
    common::print_phases("fq2bam", &r.phases);
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
    common::print_checksums("fq2bam", r.checksums.as_ref());
}
