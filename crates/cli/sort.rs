//! `sortase sort`: samtools sort's flags → [`sortase::SortJob`] → `-v` report.

use crate::args::{Memory, NoPg, OrderFlags, OutputArgs, TempPrefix, Threads};
use crate::common;
use anyhow::{bail, Result};
use sortase::{SortJob, SortReport, VerifyJob};

/// Arguments of `sortase sort` (samtools sort's flags and meanings).
#[derive(clap::Args, Debug)]
pub struct SortArgs {
    #[command(flatten)]
    pub(crate) out: OutputArgs,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    memory: Memory,
    #[command(flatten)]
    temp: TempPrefix,
    #[command(flatten)]
    order: OrderFlags,
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
    #[command(flatten)]
    pg: NoPg,
    /// Most runs the final merge may open (background compaction keeps it so).
    #[arg(long = "max-fan-in", value_name = "INT", default_value_t = 64)]
    max_fan_in: usize,
    /// AGD output (-O agd, or an existing empty directory as -o): most records per chunk of the
    /// new dataset (-l: the zstd level of its files, 1-22 [3]).
    #[arg(long = "chunk-size", value_name = "INT", default_value_t = sortase::agd::DEFAULT_CHUNK_SIZE)]
    chunk_size: u64,
    /// Report phases (wall time, CPU%), runs, compactions and temporary bytes on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Input SAM/BAM/CRAM file [stdin], or an AGD dataset directory (sorted as the BAM it came
    /// from; -O agd writes a new dataset).
    input: Option<String>,
}

impl SortArgs {
    /// The order `-n`, `-N`, `-t` and `--template-coordinate` give.
    fn order(&self) -> Result<sortase::Order> {
        Ok(self
            .order
            .order()
            .with_template_coordinate(self.template_coordinate)?)
    }
}

/// Runs `sortase sort`.
pub fn run(args: SortArgs) -> Result<()> {
    let rt = args.memory.runtime(&args.threads)?;
    if args.verify {
        return verify(&args, &rt);
    }
    let job = SortJob {
        input: args.input.clone().unwrap_or_else(|| "-".into()),
        output: args.out.spec_for_pipe()?,
        order: args.order()?,
        temp_prefix: args.temp.temp_prefix.clone(),
        max_fan_in: args.max_fan_in,
        program: args.pg.program(),
        input_fmt_options: args.input_fmt_option.clone(),
        checksums: args.checksums,
        chunk_size: args.chunk_size,
        command_line: common::command_line(),
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
        order: args.order()?,
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
