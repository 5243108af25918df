//! [`SortJob`]: samtools sort's job on all cores (crates/sort does the sorting; this module opens the
//! input, hands the sorter its share of the memory pool, and writes the key ranges it produces).
//!
//! ```
//! use sortase_exec::{OutputSpec, Runtime};
//! use sortase_sortjobs::SortJob;
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! let runtime = Runtime::with_threads(2)?;
//! let job = SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(dir.path().join("out.bam")));
//! let report = job.run(&runtime)?;
//! assert_eq!(report.records, 2);
//! # Ok::<(), sortase_exec::Error>(())
//! ```

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::{ChecksumOptions, Sums};
use sortase_bam::Header;
use sortase_exec::agd::sink::DatasetSink;
use sortase_exec::error::{Error, Result};
use sortase_exec::files::TempDir;
use sortase_exec::input::Input;
use sortase_exec::options::{add_program, Order, OutputSpec, Phase, PhaseClock, Program};
use sortase_exec::output::{resolve_output, temp_prefix, OutFormat, ResolvedOutput};
use sortase_exec::proof::{self, Checksums};
use sortase_exec::range_output;
use sortase_exec::runtime::Runtime;
use sortase_exec::sorting::{check_max_fan_in, Held, SortFrame};
use sortase_ops::filter::expr::Scratch;
use sortase_ops::filter::{FilterSpec, RecordFilter};
use sortase_sort::SortStats;
use std::path::PathBuf;

pub use sortase_exec::options::DEFAULT_LEVEL;

/// samtools sort as a job: one input (SAM, BAM, CRAM, an AGD dataset; `-` for standard input)
/// sorted into one output (SAM, BAM, CRAM, or with `-O agd` a new AGD dataset: `sortase agd sort`).
/// The memory budget is the runtime's memory pool.
///
/// With the `clap` feature it is also samtools sort's flags (`clap::Args`, flattened by `sortase
/// sort`): a field's `arg(...)` is its flag and `--help` text; `order` (from -n/-N/-t and
/// --template-coordinate), `program` (--no-PG) and `command_line` are the CLI's to fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SortJob {
    /// Input SAM/BAM/CRAM file [stdin], or an AGD dataset directory (sorted as the BAM it came
    /// from; -O agd writes a new dataset).
    #[cfg_attr(feature = "clap", arg(default_value = "-", hide_default_value = true))]
    pub input: String,
    /// The output.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub output: OutputSpec,
    /// The order.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub order: Order,
    /// Temporary files go to `PREFIX.sortase-PID-N.tmp/` (a directory: inside it); default: next to
    /// the output, else the runtime's temporary directory.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'T', value_name = "PREFIX", help = sortase_exec::options::TEMP_PREFIX_HELP)
    )]
    pub temp_prefix: Option<PathBuf>,
    /// Most runs the final merge may open (background compaction keeps it so); at least 2.
    #[cfg_attr(
        feature = "clap",
        arg(long = "max-fan-in", value_name = "INT", default_value_t = DEFAULT_MAX_FAN_IN)
    )]
    pub max_fan_in: usize,
    /// The `@PG` line to add (`None`: `--no-PG`).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub program: Option<Program>,
    /// Input option, samtools' `--input-fmt-option`: filter=EXPR reads only the records for which
    /// the htslib filter expression is true (repeatable; the last filter wins).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "input-fmt-option", value_name = "OPT=VAL"))]
    pub input_fmt_options: Vec<String>,
    /// Prove that no record was lost or changed: sum the records read and written (the sums of
    /// samtools checksum -F 0 -P -C -M) and fail, removing the output, if they differ; -v prints
    /// them. Costs ~15% more CPU.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "checksums"))]
    pub checksums: bool,
    /// AGD output (-O agd, or an existing empty directory as -o): most records per chunk of the new
    /// dataset (-l: the zstd level of its files, 1-22 [3]).
    #[serde(default = "default_chunk_size")]
    #[cfg_attr(
        feature = "clap",
        arg(long = "chunk-size", value_name = "INT", default_value_t = default_chunk_size())
    )]
    pub chunk_size: u64,
    /// AGD output: the command line recorded as the provenance of every group of the dataset.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(skip))]
    pub command_line: String,
}

/// The default of `--max-fan-in`.
pub const DEFAULT_MAX_FAN_IN: usize = 64;

fn default_chunk_size() -> u64 {
    sortase_exec::agd::DEFAULT_CHUNK_SIZE
}

/// What a sort did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SortReport {
    /// Records sorted.
    pub records: u64,
    /// Uncompressed bytes of the records.
    pub record_bytes: u64,
    /// The memory budget (the runtime's pool) and the part of it left for records.
    pub memory_budget: usize,
    /// The part of the budget left for records once the final phase's buffers are reserved.
    pub record_memory: usize,
    /// Runs spilled from memory.
    pub runs_spilled: u64,
    /// Compactions of runs.
    pub compactions: u64,
    /// Sources the final merge opened (0: all in memory).
    pub final_fan_in: usize,
    /// Key ranges of the final phase.
    pub ranges: usize,
    /// Bytes written to temporary files.
    pub temp_bytes: u64,
    /// Bytes spilled from memory (first writes only).
    pub spilled_bytes: u64,
    /// Seconds spent spilling during the read phase.
    pub spill_seconds: f64,
    /// Seconds waited for compactions.
    pub compaction_wait_seconds: f64,
    /// Threads the sort's parallel steps ran on.
    pub threads: usize,
    /// Phases with wall time and CPU use.
    pub phases: Vec<Phase>,
    /// Files written (data file, then index).
    pub outputs: Vec<PathBuf>,
    /// Warnings (samtools' text).
    pub warnings: Vec<String>,
    /// The sums of the records read and written (equal, or the sort fails and writes nothing).
    pub checksums: Option<Checksums>,
    /// Chunks written (AGD output).
    #[serde(default)]
    pub chunks: usize,
}

impl SortJob {
    /// Sorts `input` by coordinate into `output` with every other option at samtools' default.
    pub fn new(input: impl Into<String>, output: OutputSpec) -> Self {
        Self {
            input: input.into(),
            output,
            order: Order::Coordinate,
            temp_prefix: None,
            max_fan_in: DEFAULT_MAX_FAN_IN,
            program: None,
            input_fmt_options: Vec::new(),
            checksums: false,
            chunk_size: default_chunk_size(),
            command_line: String::new(),
        }
    }

    /// Runs the sort on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<SortReport> {
        run(self, rt).map_err(Error::from)
    }
}

use sortase_exec::sorting::final_phase_reserve;

/// samtools' `--input-fmt-option` list as a record filter: `filter=EXPR` (htslib's filter
/// expression; the last one given wins, as in htslib); any other option is an argument error.
pub(crate) fn input_filter(options: &[String], header: &Header) -> Result<Option<RecordFilter>> {
    let mut expression = None;
    for opt in options {
        match opt.split_once('=') {
            Some(("filter", e)) => expression = Some(e.to_string()),
            _ => {
                return Err(Error::argument(format!(
                    "--input-fmt-option {opt}: sort takes filter=EXPR only"
                )))
            }
        }
    }
    let Some(expression) = expression else {
        return Ok(None);
    };
    let spec = FilterSpec {
        expression: Some(expression),
        ..FilterSpec::default()
    };
    RecordFilter::new(&spec, header)
        .map(Some)
        .map_err(|e| Error::argument(format!("--input-fmt-option filter: {e}")))
}

/// What a sort reads: a SAM/BAM/CRAM file (or standard input), or an AGD dataset directory whose
/// chunks are decoded in order on the runtime's pool (the records and header of the BAM `sortase
/// agd export` writes, so the output is `sortase sort`'s of that BAM).
enum SortSource {
    File(Input),
    Dataset {
        dir: PathBuf,
        manifest: sortase_agd::Manifest,
        header: Header,
    },
}

impl SortSource {
    fn open(
        job: &SortJob,
        rt: &Runtime,
        progress: &sortase_exec::progress::Progress,
    ) -> anyhow::Result<Self> {
        let dir = std::path::Path::new(&job.input);
        if sortase_exec::agd::is_dataset(dir) {
            let manifest = sortase_exec::agd::open_manifest(dir)?;
            let header = sortase_exec::agd::dataset_header(&manifest);
            return Ok(SortSource::Dataset {
                dir: dir.to_path_buf(),
                manifest,
                header,
            });
        }
        let reference = job.output.reference.as_deref();
        let mut input = Input::open(&job.input, rt.threads(), reference, progress)?;
        input.set_cancel(rt.cancel_flag().clone());
        Ok(SortSource::File(input))
    }

    fn header(&self) -> &Header {
        match self {
            SortSource::File(input) => &input.header,
            SortSource::Dataset { header, .. } => header,
        }
    }

    /// Gives `f` the source's batches in order (a dataset's chunks decoded on `rt`'s pool, their
    /// progress `label: read records`).
    fn for_each_batch(
        &mut self,
        rt: &Runtime,
        label: &str,
        f: impl FnMut(sortase_bam::RecordBatch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match self {
            SortSource::File(input) => input.for_each_batch(f),
            SortSource::Dataset { dir, manifest, .. } => sortase_exec::agd::for_each_chunk_batch(
                dir,
                manifest,
                rt,
                &format!("{label}: read records"),
                f,
            ),
        }
    }
}

fn run(job: &SortJob, rt: &Runtime) -> anyhow::Result<SortReport> {
    check_max_fan_in(job.max_fan_in)?;
    let mut report = SortReport::default();
    let out = resolve_output(
        &job.output,
        DEFAULT_LEVEL,
        job.order == Order::Coordinate,
        &mut report.warnings,
    )?;
    let memory = rt.memory().limit();

    // The bars of AGD output are `agd sort`'s, as the command's name was.
    let label = match out.format {
        OutFormat::Agd => "agd sort",
        _ => "sort",
    };
    let size = sortase_exec::input::input_size(&job.input);
    let progress = rt.progress(label, size);
    let mut clock = PhaseClock::new("read");
    let mut input = SortSource::open(job, rt, &progress).with_context(|| job.input.clone())?;
    let mut dataset = open_dataset_sink(job, &out, &input, &mut report)?;
    let order = job.order.resolve_with(input.header())?;
    let filter = input_filter(&job.input_fmt_options, input.header())?;

    let temp = TempDir::create(&temp_prefix(
        job.temp_prefix.as_deref(),
        out.data.as_deref(),
        rt.temp_dir(),
    ))?;
    let reserve = final_phase_reserve(memory, rt.threads(), out.format);
    let mut frame = SortFrame::open(rt, "sort", order, reserve, temp, job.max_fan_in)?;
    report.threads = frame.threads();
    let mut read = read_phase(job, rt, &mut input, filter.as_ref(), &mut frame, label)?;
    progress.finish();

    let mut header = input.header().clone();
    // The reader's recycled chunk buffers (up to `threads + 4` of ~2 MiB) are not held into the
    // final phase, whose memory is the final-phase reserve.
    drop(input);
    let (so, ss) = order.header_values();
    header.set_sort_and_group_order(so, order.group_order(), ss.as_deref());
    add_program(&mut header, job.program.as_ref());
    let (stats, held) = match dataset.as_mut() {
        Some(sink) => {
            let written = rt.progress(&format!("{label}: merge and write records"), read.pushed);
            let done = sink.write(rt, frame, &mut clock, &written)?;
            written.finish();
            rt.check_cancelled()?;
            done
        }
        None => write_phase(job, rt, &out, &header, frame, &mut clock, &mut read)?,
    };
    report.checksums = read.checksums;
    drop(held);
    if let Some(sink) = dataset {
        report.chunks = sink.chunks();
        sink.finish(&header, &job.command_line)?;
    }
    report.phases = clock.finish();
    report.add_stats(&stats, memory, reserve);
    report.outputs = out.files();
    Ok(report)
}

/// The dataset sink of AGD output (`-O agd`, or an existing directory as `-o`), opened before the
/// input is read (`None`: a SAM/BAM/CRAM output); a dataset source's extra groups it does not carry
/// are warned about.
fn open_dataset_sink(
    job: &SortJob,
    out: &ResolvedOutput,
    input: &SortSource,
    report: &mut SortReport,
) -> anyhow::Result<Option<DatasetSink>> {
    if out.format != OutFormat::Agd {
        return Ok(None);
    }
    let Some(path) = out.data.as_deref() else {
        sortase_exec::error::bail_argument!("-O agd: the dataset directory to create is -o DIR");
    };
    if job.checksums {
        sortase_exec::error::bail_argument!("--checksums: not with AGD output (-O agd)");
    }
    if let SortSource::Dataset { manifest, .. } = input {
        report
            .warnings
            .extend(DatasetSink::extra_group_warnings(manifest));
    }
    DatasetSink::open(&job.output, path, job.chunk_size).map(Some)
}

/// What the read phase took: the records pushed and, with `--checksums`, their sums.
struct ReadPhase {
    pushed: u64,
    sums: ChecksumOptions,
    read: Sums,
    /// Filled by the write phase: the sums read and written, checked equal.
    checksums: Option<Checksums>,
}

/// Reads `input` into the sorter, keeping the records `filter` passes (and summing them with
/// `--checksums`).
fn read_phase(
    job: &SortJob,
    rt: &Runtime,
    input: &mut SortSource,
    filter: Option<&RecordFilter>,
    frame: &mut SortFrame,
    label: &str,
) -> anyhow::Result<ReadPhase> {
    let mut scratch = Scratch::default();
    let mut phase = ReadPhase {
        pushed: 0,
        sums: ChecksumOptions::every_record(),
        read: Sums::EMPTY,
        checksums: None,
    };
    input
        .for_each_batch(rt, label, |mut b| {
            if let Some(f) = filter {
                b.retain(|r| f.passes(&r, &mut scratch))
                    .map_err(|e| Error::argument(e.to_string()))?;
            }
            phase.pushed += b.len() as u64;
            if job.checksums {
                phase
                    .read
                    .merge(&rt.install(|| proof::batch_sums(&phase.sums, &b)));
            }
            Ok(frame.push(b)?)
        })
        .with_context(|| job.input.clone())?;
    Ok(phase)
}

/// The final phase: the sorted key ranges encoded into `out` with `header` (its own progress bar,
/// in records: the output's size is not known), the sums checked with `--checksums` (into
/// `read.checksums`) and the output renamed into place.
fn write_phase(
    job: &SortJob,
    rt: &Runtime,
    out: &ResolvedOutput,
    header: &Header,
    frame: SortFrame,
    clock: &mut PhaseClock,
    read: &mut ReadPhase,
) -> anyhow::Result<(SortStats, Held)> {
    let written = rt.progress("sort: merge and write records", read.pushed);
    let (mut encoder, mut writer) =
        range_output::open(out, header, rt.threads(), &job.output.cram())?;
    if job.checksums {
        encoder.sum_records(read.sums.clone());
    }
    let name = writer.name.clone();
    let (stats, held) = frame
        .finish_ranges(
            rt.threads(),
            clock,
            |records| encoder.encode(&mut range_output::Counted::new(records, &written)),
            |range| writer.write(range),
        )
        .with_context(|| name.clone())?;
    written.finish();
    rt.check_cancelled()?;
    if let Some(wrote) = encoder.written_sums() {
        read.checksums = Some(Checksums::check("sort", &read.sums, &read.read, &wrote)?);
    }
    writer.finish()?;
    Ok((stats, held))
}

impl SortReport {
    /// The sorter's counts, with the memory budget and the part of it left for records (`reserve`
    /// held for the final phase).
    fn add_stats(&mut self, stats: &SortStats, memory: usize, reserve: usize) {
        self.records = stats.records;
        self.record_bytes = stats.record_bytes;
        self.memory_budget = memory;
        self.record_memory = memory.saturating_sub(reserve);
        self.runs_spilled = stats.runs_spilled;
        self.compactions = stats.compactions;
        self.final_fan_in = stats.final_fan_in;
        self.ranges = stats.ranges;
        self.temp_bytes = stats.temp_bytes;
        self.spilled_bytes = stats.spilled_bytes;
        self.spill_seconds = stats.spill_time.as_secs_f64();
        self.compaction_wait_seconds = stats.compaction_wait.as_secs_f64();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sort_reports_equal_sums() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.sam");
        let mut sam = String::from("@SQ\tSN:chr1\tLN:100000\n");
        for i in 0..500 {
            sam += &format!(
                "r{i}\t0\tchr1\t{}\t60\t8M\t*\t0\t0\tACGTACGT\tIIIIIIII\n",
                (i * 7919) % 90000 + 1
            );
        }
        std::fs::write(&input, sam).unwrap();
        let out = dir.path().join("out.bam");
        let rt = Runtime::with_threads(2).unwrap();
        let job = SortJob {
            checksums: true,
            ..SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(&out))
        };
        let report = job.run(&rt).unwrap();
        let sums = report.checksums.expect("sort reports its sums");
        assert_eq!(sums.read, sums.written);
        assert_eq!(sums.read.count, 500);
        let opts = ChecksumOptions::every_record();
        assert_eq!(sums.combined, sums.read.combined(&opts));
        assert!(sums.to_text().contains("read 500 records, wrote 500;"));
    }
}
