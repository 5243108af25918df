//! `sortase snp-pileup`: FACETS snp-pileup's flags → [`sortase::SnpPileupJob`] → `-v` summary.

use crate::common;
use anyhow::Result;
use sortase::SnpPileupJob;

/// Arguments of `sortase snp-pileup` (FACETS snp-pileup's, declared on the job's fields, plus `-@`).
#[derive(clap::Args, Debug)]
pub struct SnpPileupArgs {
    #[command(flatten)]
    job: SnpPileupJob,
    /// Show a progress bar (shown anyway when stderr is a terminal).
    #[arg(short = 'p', long = "progress")]
    progress: bool,
    /// Print a summary on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    #[command(flatten)]
    threads: crate::args::Threads,
}

/// Runs `sortase snp-pileup`.
pub fn run(args: SnpPileupArgs) -> Result<()> {
    let r = args.job.run(&args.threads.runtime(None)?)?;
    common::print_warnings(&r.warnings);
    if args.verbose {
        eprintln!(
            "snp-pileup: {} VCF lines, {} SNVs, {} SNP lines and {} pseudo-SNP lines written, {} batches, {} threads",
            r.vcf_lines, r.snvs, r.snp_lines, r.pseudo_lines, r.batches, r.threads
        );
    }
    Ok(())
}
