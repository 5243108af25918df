//! `sortase agd sort|markdup|add-column|drop-column`: flags → [`sortase::AgdSortJob`],
//! [`sortase::AgdMarkdupJob`], [`sortase::AgdAddColumnJob`], [`sortase::AgdDropColumnJob`].

use crate::args::{Memory, NoPg, OrderFlags, Threads};
use crate::common;
use crate::markdup::MarkingArgs;
use anyhow::Result;
use sortase::agd::ColumnType;
use sortase::{AgdAddColumnJob, AgdDropColumnJob, AgdMarkdupJob, AgdSortJob};
use std::path::PathBuf;

/// Arguments of `sortase agd sort` (samtools sort's orders and memory flags).
#[derive(clap::Args, Debug)]
pub struct SortArgs {
    /// The dataset directory to create (must not exist, or be empty).
    #[arg(short = 'o', value_name = "DIR")]
    output: PathBuf,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    memory: Memory,
    /// Temporary runs go to PREFIX.sortase-PID-N.tmp/ (a directory: inside it) [next to -o].
    #[arg(short = 'T', value_name = "PREFIX")]
    temp_prefix: Option<PathBuf>,
    #[command(flatten)]
    order: OrderFlags,
    #[command(flatten)]
    pg: NoPg,
    /// Most runs the final merge may open.
    #[arg(long = "max-fan-in", value_name = "INT", default_value_t = 64)]
    max_fan_in: usize,
    /// Most records per chunk of the output.
    #[arg(long = "chunk-size", value_name = "INT", default_value_t = sortase::agd::DEFAULT_CHUNK_SIZE)]
    chunk_size: u64,
    /// zstd level of the column files (1-22).
    #[arg(long = "level", value_name = "INT", default_value_t = sortase::agd::DEFAULT_ZSTD_LEVEL)]
    level: i32,
    /// Report phases, runs and chunks on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// The dataset directory to sort.
    input: PathBuf,
}

/// Arguments of `sortase agd markdup` (`sortase markdup`'s marking options).
#[derive(clap::Args, Debug)]
pub struct MarkdupArgs {
    #[command(flatten)]
    threads: Threads,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ [inside the dataset].
    #[arg(short = 'T', value_name = "PREFIX")]
    temp_prefix: Option<PathBuf>,
    /// zstd level of the duplicate group's files (1-22).
    #[arg(long = "level", value_name = "INT", default_value_t = sortase::agd::DEFAULT_ZSTD_LEVEL)]
    level: i32,
    #[command(flatten)]
    marking: MarkingArgs,
    /// The dataset directory.
    input: PathBuf,
}

/// Arguments of `sortase agd add-column`.
#[derive(clap::Args, Debug)]
pub struct AddColumnArgs {
    /// The group's name (and its column's, for text and TSV values); `duplicate` sets flag 0x400.
    #[arg(long = "name", value_name = "NAME")]
    name: String,
    /// The values: a text file with one value per line in record order, a .tsv of
    /// ORDINAL<TAB>VALUE lines, or a .parquet table (placed by its `ordinal` column if it has one).
    #[arg(long = "from", value_name = "FILE")]
    from: PathBuf,
    /// Type of text and TSV values: auto, int, float, bool or string.
    #[arg(long = "type", value_name = "TYPE", default_value = "auto")]
    column_type: String,
    /// zstd level of the group's files (1-22).
    #[arg(long = "level", value_name = "INT", default_value_t = sortase::agd::DEFAULT_ZSTD_LEVEL)]
    level: i32,
    #[command(flatten)]
    threads: Threads,
    /// The dataset directory.
    input: PathBuf,
}

/// Arguments of `sortase agd drop-column`.
#[derive(clap::Args, Debug)]
pub struct DropColumnArgs {
    /// The extra group to drop.
    #[arg(long = "name", value_name = "NAME")]
    name: String,
    /// The dataset directory.
    input: PathBuf,
}

/// Runs `sortase agd sort`.
pub fn sort(args: SortArgs) -> Result<()> {
    let rt = args.memory.runtime(&args.threads)?;
    let job = AgdSortJob {
        input: args.input,
        output: args.output,
        order: args.order.order(),
        temp_prefix: args.temp_prefix,
        max_fan_in: args.max_fan_in,
        chunk_size: args.chunk_size,
        zstd_level: args.level,
        program: args.pg.program(),
        command_line: common::command_line(),
    };
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if args.verbose {
        common::print_phases("agd sort", &report.phases);
        eprintln!(
            "[sortase agd sort] {} records ({} MiB uncompressed) into {} chunks; budget {} MiB; {} runs spilled, final merge of {} sources; {} temporary bytes",
            report.records,
            report.record_bytes >> 20,
            report.chunks,
            report.memory_budget >> 20,
            report.runs_spilled,
            report.final_fan_in,
            report.temp_bytes
        );
    }
    Ok(())
}

/// Runs `sortase agd markdup`.
pub fn markdup(args: MarkdupArgs) -> Result<()> {
    let rt = args.marking.runtime(&args.threads)?;
    let job = AgdMarkdupJob {
        dataset: args.input,
        mode: args.marking.mode.into(),
        temp_prefix: args.temp_prefix,
        samblaster: args.marking.query.options(),
        picard: args.marking.coord.options(None, common::command_line()),
        zstd_level: args.level,
        command_line: common::command_line(),
    };
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    args.marking.print_summary(&report.summary);
    Ok(())
}

/// Runs `sortase agd add-column`.
pub fn add_column(args: AddColumnArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let job = AgdAddColumnJob {
        dataset: args.input,
        name: args.name,
        from: args.from,
        column_type: ColumnType::parse(&args.column_type)?,
        zstd_level: args.level,
        command_line: common::command_line(),
    };
    job.run(&rt)?;
    Ok(())
}

/// Runs `sortase agd drop-column`.
pub fn drop_column(args: DropColumnArgs) -> Result<()> {
    AgdDropColumnJob::new(args.input, args.name).run()?;
    Ok(())
}
