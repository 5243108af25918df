//! `sortase snp-pileup`: FACETS' snp-pileup (same options, same CSV) on all cores.

use crate::output::OutputFile;
use anyhow::{bail, Context, Result};
use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
use sortase_ops::pileup::{self, engine::PileupOptions, SnpPileupOptions};
use std::io::{BufWriter, Write};
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
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Compressed bytes per batch (for tests; default from input size and threads).
    #[arg(long = "batch-bytes", hide = true)]
    batch_bytes: Option<u64>,
    /// VCF (plain or bgzipped) with the SNP positions.
    vcf: PathBuf,
    /// Output CSV.
    output: PathBuf,
    /// Coordinate-sorted, indexed BAMs.
    #[arg(required = true)]
    bams: Vec<PathBuf>,
}

/// Runs `sortase snp-pileup`.
pub fn run(args: SnpPileupArgs) -> Result<()> {
    let mut target = args.output.clone();
    if args.gzip && !target.as_os_str().to_string_lossy().ends_with(".gz") {
        let mut s = target.into_os_string();
        s.push(".gz");
        target = PathBuf::from(s);
    }
    if std::fs::symlink_metadata(&target).is_ok() {
        bail!(
            "{}: output file already exists; snp-pileup does not overwrite it",
            target.display()
        );
    }
    if let Err(e) = std::fs::metadata(&args.vcf) {
        bail!("{}: {e}", args.vcf.display());
    }
    if args.pseudo_snps < 0 {
        bail!(
            "-P {} is negative; use 0 (none) or a positive multiple",
            args.pseudo_snps
        );
    }
    let inputs = pileup::open_bams(&args.bams)?;
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let opts = SnpPileupOptions {
        pileup: PileupOptions {
            min_map_quality: args.min_map_quality,
            min_base_quality: args.min_base_quality,
            max_depth: args.max_depth,
            count_orphans: args.count_orphans,
            ignore_overlaps: args.ignore_overlaps,
        },
        min_read_counts: args.min_read_counts.clone(),
        pseudo_snps: args.pseudo_snps,
        threads,
        batch_bytes: args.batch_bytes,
    };
    let total: u64 = args
        .bams
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let (output, file) = OutputFile::create(&target)?;
    let progress = crate::common::progress("snp-pileup", total);
    let summary = if args.gzip {
        let mut w = ParallelWriter::new(file, WriterOptions::new(1, CompressionLevel::default()));
        let s = pileup::snp_pileup(&args.vcf, inputs, &opts, &mut w, &|n| progress.add(n));
        let s = s.with_context(|| format!("snp-pileup {}", args.vcf.display()))?;
        w.finish()
            .with_context(|| format!("{}: cannot write", target.display()))?;
        s
    } else {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let s = pileup::snp_pileup(&args.vcf, inputs, &opts, &mut w, &|n| progress.add(n));
        let s = s.with_context(|| format!("snp-pileup {}", args.vcf.display()))?;
        w.flush()
            .with_context(|| format!("{}: cannot write", target.display()))?;
        s
    };
    progress.finish();
    if std::fs::symlink_metadata(&target).is_ok() {
        bail!(
            "{}: output file appeared while running; not overwriting it",
            target.display()
        );
    }
    output.commit()?;
    if args.verbose {
        eprintln!(
            "snp-pileup: {} VCF lines, {} SNVs, {} SNP lines and {} pseudo-SNP lines written, {} batches, {} threads",
            summary.vcf_lines,
            summary.snvs,
            summary.lines.snp_lines,
            summary.lines.pseudo_lines,
            summary.batches,
            threads
        );
    }
    Ok(())
}
