//! `sortase snp-pileup`: FACETS snp-pileup's flags → [`sortase::SnpPileupJob`] → `-v` summary.

use crate::common;
use anyhow::Result;
use sortase::SnpPileupJob;
use std::path::PathBuf;

/// Arguments of `sortase snp-pileup` (FACETS snp-pileup's, plus `-@`).
#[derive(clap::Args, Debug)]
pub struct SnpPileupArgs {
    /// Do not discard anomalous read pairs.
    #[arg(short = 'A', long = "count-orphans")]
    count_orphans: bool,
    /// Compress the output with BGZF (".gz" is appended to the name if missing).
    #[arg(short = 'g', long = "gzip")]
    gzip: bool,
    /// Disable read-pair overlap detection.
    #[arg(short = 'x', long = "ignore-overlaps")]
    ignore_overlaps: bool,
    /// Minimum base quality.
    #[arg(
        short = 'Q',
        long = "min-base-quality",
        value_name = "QUALITY",
        default_value_t = 0
    )]
    min_base_quality: i32,
    /// Minimum mapping quality (MAPQ 0 is always skipped).
    #[arg(
        short = 'q',
        long = "min-map-quality",
        value_name = "QUALITY",
        default_value_t = 0
    )]
    min_map_quality: i32,
    /// Comma-separated minimum read counts per file for a position to be written.
    #[arg(
        short = 'r',
        long = "min-read-counts",
        value_name = "READS",
        value_delimiter = ','
    )]
    min_read_counts: Vec<i32>,
    /// Maximum depth per file (htslib pileup maxcnt).
    #[arg(
        short = 'd',
        long = "max-depth",
        value_name = "DEPTH",
        default_value_t = 4000
    )]
    max_depth: i32,
    /// Every MULTIPLE positions, if there is no SNP, write a record with the total count there.
    #[arg(
        short = 'P',
        long = "pseudo-snps",
        value_name = "MULTIPLE",
        default_value_t = 0
    )]
    pseudo_snps: i64,
    /// Show a progress bar (shown anyway when stderr is a terminal).
    #[arg(short = 'p', long = "progress")]
    progress: bool,
    /// Print a summary on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Compressed bytes per batch (for tests; default from input size and threads).
    #[arg(long = "batch-bytes", hide = true)]
    batch_bytes: Option<u64>,
    /// Reference FASTA for CRAM inputs [REF_PATH/REF_CACHE, @SQ UR].
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// VCF (plain or bgzipped) with the SNP positions.
    vcf: PathBuf,
    /// Output CSV.
    output: PathBuf,
    /// Coordinate-sorted, indexed BAMs, or coordinate-sorted CRAMs.
    #[arg(required = true)]
    bams: Vec<PathBuf>,
}

/// Runs `sortase snp-pileup`.
pub fn run(args: SnpPileupArgs) -> Result<()> {
    let job = SnpPileupJob {
        vcf: args.vcf,
        output: args.output,
        bams: args.bams,
        count_orphans: args.count_orphans,
        gzip: args.gzip,
        ignore_overlaps: args.ignore_overlaps,
        min_base_quality: args.min_base_quality,
        min_map_quality: args.min_map_quality,
        min_read_counts: args.min_read_counts,
        max_depth: args.max_depth,
        pseudo_snps: args.pseudo_snps,
        batch_bytes: args.batch_bytes,
        reference: args.reference,
    };
    let r = job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&r.warnings);
    if args.verbose {
        eprintln!(
            "snp-pileup: {} VCF lines, {} SNVs, {} SNP lines and {} pseudo-SNP lines written, {} batches, {} threads",
            r.vcf_lines, r.snvs, r.snp_lines, r.pseudo_lines, r.batches, r.threads
        );
    }
    Ok(())
}
