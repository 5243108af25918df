//! `sortase fq2bam`: flags → [`sortase::Fq2BamJob`] (FASTQ in, minimap2, samblaster's marking, sort,
//! index) → `-v` report. minimap2's `-x PRESET` is `--preset` here: `-x` names the index, as in the
//! issue's synopsis.

use crate::args::{self, Memory, NoPg, Threads};
use crate::common;
use anyhow::Result;
use sortase::{Fq2BamJob, Fq2BamReport};

/// Arguments of `sortase fq2bam`: the job's own flags (declared on its fields: -x, the reads, the
/// output, --preset, -R, --markdup, --MD, --cs, -T, --checksums), then the command's.
#[derive(clap::Args, Debug)]
#[command(mut_arg("mem_per_thread", |a| a.help(
    "Memory per thread for the index, the read batches and the sort, with K/M/G suffix [768M per \
     thread for the batches and the sort, plus the index's own size]"
)))]
#[command(mut_arg("no_pg", |a| a.help("Do not add sortase's @PG line (minimap2's is always written)")))]
pub struct Fq2BamArgs {
    #[command(flatten)]
    job: Fq2BamJob,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    memory: Memory,
    #[command(flatten)]
    pg: NoPg,
    /// Report phases and counts (and the checksums) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
}

/// Runs `sortase fq2bam`.
pub fn run(args: Fq2BamArgs) -> Result<()> {
    let threads = args.threads.count();
    let budget = args.memory.budget(threads)?;
    let memory = budget.or_else(|| sortase::fq2bam::default_memory(threads, &args.job.index));
    let rt = args.threads.runtime(memory)?;
    let mut job = args.job;
    job.output = args::output(&job.output)?;
    job.program = args.pg.program(common::command_line);
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
