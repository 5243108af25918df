//! `sortase sort`: samtools sort's flags → [`sortase::SortJob`] → `-v` report.

use crate::common::{self, OutputArgs};
use anyhow::{bail, Result};
use sortase::options::parse_size;
use sortase::{SortJob, SortReport, VerifyJob};
use std::path::PathBuf;

/// samtools' minimum `-m` (`SORT_MIN_MEGS_PER_THREAD`).
const MIN_MEM_PER_THREAD: usize = 1 << 20;

/// Arguments of `sortase sort` (samtools sort's flags and meanings).
#[derive(clap::Args, Debug)]
pub struct SortArgs {
    #[command(flatten)]
    out: OutputArgs,
    #[command(flatten)]
    threads: common::Threads,
    #[command(flatten)]
    memory: common::Memory,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ (a directory: inside it) [OUT.tmp or TMPDIR].
    #[arg(short = 'T', value_name = "PREFIX")]
    temp_prefix: Option<PathBuf>,
    #[command(flatten)]
    order: common::OrderFlags,
    /// Sort by template-coordinate (samtools --template-coordinate): the records of a template
    /// together, by its unclipped 5' ends; paired records need MC tags (samtools fixmate -m).
    #[arg(long = "template-coordinate")]
    template_coordinate: bool,
    /// Check that the input is sorted in the order the other flags give (coordinate by default)
    /// instead of sorting it: one pass, nothing written; exit 1 naming the first record out of
    /// order (mako's --verify).
    #[arg(long = "verify", conflicts_with = "output")]
    verify: bool,
    /// Prove that no record was lost or changed: sum the records read and written (the sums of
    /// samtools checksum -F 0 -P -C -M) and fail, removing the output, if they differ; -v prints
    /// them. Costs ~15% more CPU.
    #[arg(long = "checksums")]
    checksums: bool,
    /// Input option, samtools' `--input-fmt-option`: filter=EXPR reads only the records for which
    /// the htslib filter expression is true (repeatable; the last filter wins).
    #[arg(long = "input-fmt-option", value_name = "OPT=VAL")]
    input_fmt_option: Vec<String>,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    no_pg: bool,
    /// Most runs the final merge may open (background compaction keeps it so).
    #[arg(long = "max-fan-in", value_name = "INT", default_value_t = 64)]
    max_fan_in: usize,
    /// Report phases (wall time, CPU%), runs, compactions and temporary bytes on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Input SAM/BAM/CRAM file [stdin], or an AGD dataset directory (sorted into -o as the BAM it
    /// came from; `sortase agd sort` writes a dataset).
    input: Option<String>,
}

/// The total memory budget from `-m` (per thread) or `--max-memory`, as samtools computes it.
pub fn memory_budget(
    threads: usize,
    per_thread: Option<&str>,
    total: Option<&str>,
) -> Result<Option<usize>> {
    if let Some(m) = per_thread {
        if parse_size(m, "-m")? < MIN_MEM_PER_THREAD {
            bail!("-m {m} per thread is below the 1M minimum; use e.g. -m 768M");
        }
    }
    Ok(match (total, per_thread) {
        (Some(t), _) => Some(parse_size(t, "--max-memory")?),
        (None, Some(m)) => Some(parse_size(m, "-m")?.saturating_mul(threads)),
        (None, None) => None,
    })
}

/// Runs `sortase sort`.
pub fn run(args: SortArgs) -> Result<()> {
    let threads = args.threads.count();
    let memory = args.memory.budget(threads)?;
    let rt = common::runtime(Some(threads), memory)?;
    if args.verify {
        return verify(&args, &rt);
    }
    let mut output = args.out.spec()?;
    common::uncompressed_into_pipe(&mut output);
    let job = SortJob {
        input: args.input.clone().unwrap_or_else(|| "-".into()),
        output,
        order: args
            .order
            .order()
            .with_template_coordinate(args.template_coordinate)?,
        temp_prefix: args.temp_prefix.clone(),
        max_fan_in: args.max_fan_in,
        program: common::program(args.no_pg),
        input_fmt_options: args.input_fmt_option.clone(),
        checksums: args.checksums,
    };
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        print_report(&report);
    }
    Ok(())
}

/// `sort --verify`: prints `IN: sorted by ORDER (N records)`, or fails naming the first record that
/// sorts before the one preceding it.
fn verify(args: &SortArgs, rt: &sortase::Runtime) -> Result<()> {
    let input = args.input.clone().unwrap_or_else(|| "-".into());
    let job = VerifyJob {
        input: input.clone(),
        order: args
            .order
            .order()
            .with_template_coordinate(args.template_coordinate)?,
        reference: args.out.spec()?.reference,
    };
    let report = job.run(rt)?;
    match report.first_unsorted {
        None => {
            println!(
                "{input}: sorted by {} ({} records)",
                report.order, report.records
            );
            Ok(())
        }
        Some(u) => bail!(
            "{input}: not sorted by {}: record {} ({} at {}) sorts before record {} ({} at {})",
            report.order,
            u.record,
            u.name,
            u.position,
            u.record - 1,
            u.previous_name,
            u.previous_position
        ),
    }
}

fn print_report(r: &SortReport) {
    for p in &r.phases {
        eprintln!(
            "[sortase sort] phase {:<6} {:>8.2} s wall {:>5.0}% CPU",
            p.name, p.seconds, p.cpu_percent
        );
    }
    let amp = if r.spilled_bytes > 0 {
        r.temp_bytes as f64 / r.spilled_bytes as f64
    } else {
        0.0
    };
    eprintln!(
        "[sortase sort] {} records ({} MiB uncompressed); budget {} MiB ({} MiB for records); {} runs spilled, {} compactions, final merge of {} sources in {} key ranges; {} temporary bytes written (write amplification {:.2})",
        r.records,
        r.record_bytes >> 20,
        r.memory_budget >> 20,
        r.record_memory >> 20,
        r.runs_spilled,
        r.compactions,
        r.final_fan_in,
        r.ranges,
        r.temp_bytes,
        amp
    );
    eprintln!(
        "[sortase sort] spilling (sort + write runs) {:.2} s of the read phase; waited {:.2} s for compactions",
        r.spill_seconds, r.compaction_wait_seconds
    );
    if let Some(c) = &r.checksums {
        eprint!("[sortase sort] {}", c.to_text());
    }
}
