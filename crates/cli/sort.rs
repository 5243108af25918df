//! `sortase sort`: samtools sort's flags → [`sortase::SortJob`] → `-v` report.

use crate::args::{self, Memory, NoPg, OrderFlags, TemplateCoordinateFlag, Threads};
use crate::common;
use anyhow::{bail, Result};
use sortase::{SortJob, SortReport, VerifyJob};

/// Arguments of `sortase sort` (samtools sort's flags and meanings): the job's own flags (declared on
/// its fields: input, output, -T, --max-fan-in, --input-fmt-option, --checksums, --chunk-size),
/// then the runtime's, the order's, `--no-PG` and the command's.
#[derive(clap::Args, Debug)]
pub struct SortArgs {
    #[command(flatten)]
    pub(crate) job: SortJob,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    memory: Memory,
    #[command(flatten)]
    order: OrderFlags,
    #[command(flatten)]
    template: TemplateCoordinateFlag,
    /// Check that the input is sorted in the order the other flags give (coordinate by default)
    /// instead of sorting it: one pass, nothing written; exit 1 naming the first record out of
    /// order (mako's --verify).
    #[arg(long = "verify", conflicts_with = "output")]
    verify: bool,
    #[command(flatten)]
    pg: NoPg,
    /// Report phases (wall time, CPU%), runs, compactions and temporary bytes on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
}

/// Runs `sortase sort`.
pub fn run(args: SortArgs) -> Result<()> {
    let rt = args.memory.runtime(&args.threads)?;
    let mut job = args.job;
    job.order = args
        .order
        .order()
        .with_template_coordinate(args.template.template_coordinate)?;
    if args.verify {
        return verify(&job, &rt);
    }
    job.output = args::output_for_pipe(&job.output)?;
    job.program = args.pg.program(common::command_line);
    job.command_line = common::command_line();
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        print_report(&report);
    }
    Ok(())
}

/// `sort --verify`: prints `IN: sorted by ORDER (N records)`, or fails naming the first record that
/// sorts before the one preceding it.
fn verify(sort: &SortJob, rt: &sortase::Runtime) -> Result<()> {
    let input = sort.input.clone();
    let job = VerifyJob {
        input: input.clone(),
        order: sort.order.clone(),
        reference: args::output(&sort.output)?.reference,
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
    common::print_phases("sort", &r.phases);
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
    if r.chunks > 0 {
        eprintln!("[sortase sort] {} chunks written", r.chunks);
    }
    eprintln!(
        "[sortase sort] spilling (sort + write runs) {:.2} s of the read phase; waited {:.2} s for compactions",
        r.spill_seconds, r.compaction_wait_seconds
    );
    common::print_checksums("sort", r.checksums.as_ref());
}
