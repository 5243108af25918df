//! [`SortJob`]: samtools sort's job on all cores (crates/sort does the sorting; this module opens the
//! input, hands the sorter its share of the memory pool, and writes the key ranges it produces).
//!
//! ```
//! use sortase::{Runtime, SortJob, OutputSpec};
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! let runtime = Runtime::with_threads(2)?;
//! let job = SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(dir.path().join("out.bam")));
//! let report = job.run(&runtime)?;
//! assert_eq!(report.records, 2);
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::{ChecksumOptions, Sums};
use sortase_bam::Header;
use sortase_bgzf::CompressionLevel;
use sortase_exec::error::{Error, Result};
use sortase_exec::files::TempDir;
use sortase_exec::input::Input;
use sortase_exec::memory::Reservation;
use sortase_exec::options::{add_program, Order, OutputSpec, Phase, PhaseClock, Program};
use sortase_exec::output::{resolve_output, temp_prefix, OutFormat};
use sortase_exec::proof::{self, Checksums};
use sortase_exec::range_output;
use sortase_exec::runtime::{CancelFlag, Runtime};
use sortase_ops::filter::expr::Scratch;
use sortase_ops::filter::{FilterSpec, RecordFilter};
use sortase_sort::{Budget, SortOptions, SortOrder, Sorter};
use std::path::PathBuf;

pub use sortase_exec::options::DEFAULT_LEVEL;

/// samtools sort as a job: one input (SAM, BAM, CRAM; `-` for standard input) sorted into one output.
/// The memory budget is the runtime's memory pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortJob {
    /// The input path (`-`: standard input), or an AGD dataset directory (its records and header
    /// are those of the BAM `sortase agd export` writes).
    pub input: String,
    /// The output.
    pub output: OutputSpec,
    /// The order.
    pub order: Order,
    /// Temporary files go to `PREFIX.sortase-PID-N.tmp/` (a directory: inside it); default: next to
    /// the output, else the runtime's temporary directory.
    pub temp_prefix: Option<PathBuf>,
    /// Most runs the final merge may open (background compaction keeps it so); at least 2.
    pub max_fan_in: usize,
    /// The `@PG` line to add (`None`: `--no-PG`).
    pub program: Option<Program>,
    /// samtools' `--input-fmt-option`: `filter=EXPR` reads only the records for which the htslib
    /// filter expression is true (as `samtools sort --input-fmt-option filter=EXPR`); other input
    /// options are refused.
    #[serde(default)]
    pub input_fmt_options: Vec<String>,
    /// Sum the records read and written (`samtools checksum -F 0 -P -C -M`, [`sortase_exec::proof`]) and
    /// fail, leaving no output, if the sums differ (`--checksums`). Off by default: it costs ~15%
    /// more CPU (every record is summed once as read and once as written).
    #[serde(default)]
    pub checksums: bool,
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
}

impl SortJob {
    /// Sorts `input` by coordinate into `output` with every other option at samtools' default.
    pub fn new(input: impl Into<String>, output: OutputSpec) -> Self {
        Self {
            input: input.into(),
            output,
            order: Order::Coordinate,
            temp_prefix: None,
            max_fan_in: 64,
            program: None,
            input_fmt_options: Vec::new(),
            checksums: false,
        }
    }

    /// Runs the sort on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<SortReport> {
        run(self, rt).map_err(Error::from)
    }
}

/// Memory the final phase holds besides the records: up to `threads + 1` encoded ranges (being
/// encoded, done and waiting, being written; see `Sorter::finish_ranges`) and the output writer's
/// buffers. It is reserved from the pool before records so that the whole sort stays within the
/// budget (out of core with `-u`, 16 MiB ranges took peak RSS ~45 MiB past the bound of issue 3 at a
/// 228 MiB budget); at most a quarter of the budget.
pub(crate) fn final_phase_reserve(memory: usize, threads: usize, format: OutFormat) -> usize {
    let range = sortase_sort::ranges::RANGE_BYTES as usize;
    let encoded = match format {
        OutFormat::Bam(level) if level == CompressionLevel::STORED => range,
        OutFormat::Bam(_) => range / 2,
        OutFormat::Sam => range * 2,
        OutFormat::Cram => range,
    };
    ((threads + 1) * encoded + sortase_bgzf::direct_io::BUFFER_BYTES).min(memory / 4)
}

/// Returns the heap's free pages to the kernel (glibc `malloc_trim`). Called when an out-of-core
/// sort starts its final merge: the read phase's batches were freed into the arenas of the threads
/// that allocated them, where the final phase's new threads cannot reuse them. On the large bench BAM
/// with `-u --max-memory 228M` peak RSS was 308-350 MiB without it and 262-280 MiB with it.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it takes the allocator's locks itself.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `sortase sort`'s and `agd sort`'s sorter: `reserve` bytes of `rt`'s pool are taken first for the
/// final phase (waited for; returned, to be held until the sort ends) and the records get the rest
/// through a [`PoolBudget`]. `name` labels the reservations.
pub(crate) fn budgeted_sorter(
    rt: &Runtime,
    name: &str,
    order: SortOrder,
    reserve: usize,
    temp_dir: &std::path::Path,
    max_fan_in: usize,
) -> Result<(Reservation, Sorter)> {
    let mut final_reserve = rt.memory().reservation(&format!("{name}: final phase"));
    let cancel = rt.cancel_flag().clone();
    if final_reserve
        .grow_waiting(reserve, || cancel.is_cancelled())
        .is_err()
    {
        rt.check_cancelled()?;
    }
    let record_memory = rt.memory().limit().saturating_sub(reserve);
    let budget = PoolBudget::new(rt, &format!("{name}: records"), record_memory);
    let sorter = Sorter::new(SortOptions {
        order,
        memory: record_memory,
        temp_dir: temp_dir.to_path_buf(),
        max_fan_in,
        ranges: Default::default(),
    })
    .with_budget(Box::new(budget))
    .with_pool(rt.shared_pool())
    .with_cancel(rt.cancel_flag().shared());
    Ok((final_reserve, sorter))
}

/// The sorter's records budget: a reservation from the runtime's pool (`sortase sort`'s and
/// `agd sort`'s).
struct PoolBudget {
    reservation: Reservation,
    cancel: CancelFlag,
    /// The records' share of the pool: the whole pool less the final phase's reserve, which the sort
    /// holds until it ends.
    cap: usize,
}

impl PoolBudget {
    /// A budget of at most `cap` bytes from `rt`'s pool.
    pub(crate) fn new(rt: &Runtime, consumer: &str, cap: usize) -> Self {
        Self {
            reservation: rt.memory().reservation(consumer),
            cancel: rt.cancel_flag().clone(),
            cap,
        }
    }
}

impl Budget for PoolBudget {
    fn try_grow(&mut self, n: usize) -> bool {
        self.reservation.try_grow(n).is_ok()
    }

    fn grow_waiting(&mut self, n: usize) -> bool {
        // More than the records' share can never be freed for us (the final phase's reserve is our
        // own): refuse, and the sorter makes the batch a run of its own. Waiting here hung
        // `sort -@ 2 -m 1M` once a recycled chunk buffer made one batch 1.7 MB.
        if self.reservation.size() + n > self.cap {
            return false;
        }
        let cancel = self.cancel.clone();
        self.reservation
            .grow_waiting(n, || cancel.is_cancelled())
            .is_ok()
    }

    fn free(&mut self) {
        self.reservation.free();
    }
}

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
        if crate::agd::is_dataset(dir) {
            let manifest = crate::agd::open_manifest(dir)?;
            let header = crate::agd::dataset_header(&manifest);
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

    fn for_each_batch(
        &mut self,
        rt: &Runtime,
        f: impl FnMut(sortase_bam::RecordBatch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match self {
            SortSource::File(input) => input.for_each_batch(f),
            SortSource::Dataset { dir, manifest, .. } => {
                crate::agd::for_each_chunk_batch(dir, manifest, rt, "sort: read records", f)
            }
        }
    }
}

fn run(job: &SortJob, rt: &Runtime) -> anyhow::Result<SortReport> {
    let threads = rt.threads();
    if job.max_fan_in < 2 {
        return Err(Error::argument(format!(
            "--max-fan-in {}: must be at least 2",
            job.max_fan_in
        ))
        .into());
    }
    let mut report = SortReport::default();
    let out = resolve_output(
        &job.output,
        DEFAULT_LEVEL,
        job.order == Order::Coordinate,
        &mut report.warnings,
    )?;
    let memory = rt.memory().limit();

    let input_name = job.input.clone();
    let size = sortase_exec::input::input_size(&input_name);
    let progress = rt.progress("sort", size);
    let mut clock = PhaseClock::new("read");
    let mut input = SortSource::open(job, rt, &progress).with_context(|| input_name.clone())?;
    let order = job.order.resolve_with(input.header())?;
    let filter = input_filter(&job.input_fmt_options, input.header())?;
    let mut scratch = Scratch::default();

    let temp = TempDir::create(&temp_prefix(
        job.temp_prefix.as_deref(),
        out.data.as_deref(),
        rt.temp_dir(),
    ))?;
    let reserve = final_phase_reserve(memory, threads, out.format);
    let (final_reserve, mut sorter) =
        budgeted_sorter(rt, "sort", order, reserve, temp.path(), job.max_fan_in)?;
    report.threads = sorter.threads();
    let mut pushed = 0u64;
    let sums = ChecksumOptions::every_record();
    let mut read = Sums::EMPTY;
    input
        .for_each_batch(rt, |mut b| {
            if let Some(f) = &filter {
                b.retain(|r| f.passes(&r, &mut scratch))
                    .map_err(|e| Error::argument(e.to_string()))?;
            }
            pushed += b.len() as u64;
            if job.checksums {
                read.merge(&rt.install(|| proof::batch_sums(&sums, &b)));
            }
            Ok(sorter.push(b)?)
        })
        .with_context(|| input_name.clone())?;
    progress.finish();
    // The merge and write phase gets its own bar, in records (its output size is not known).
    let written = rt.progress("sort: merge and write records", pushed);

    let mut header = input.header().clone();
    let (so, ss) = order.header_values();
    header.set_sort_and_group_order(so, order.group_order(), ss.as_deref());
    add_program(&mut header, job.program.as_ref());
    let index = out.index.as_ref().map(|(p, bai)| (p.as_path(), *bai));
    let (mut encoder, mut writer) = range_output::open(
        out.data.as_deref(),
        index,
        out.format,
        &header,
        &job.output.cram(),
        rt.threads(),
    )?;
    if job.checksums {
        encoder.sum_records(sums.clone());
    }
    let name = writer.name.clone();
    let stats = sorter
        .finish_ranges(
            threads,
            |p| {
                if p == "merge" {
                    release_free_memory();
                }
                clock.next(p)
            },
            |records| encoder.encode(&mut range_output::Counted::new(records, &written)),
            |range| writer.write(range),
        )
        .with_context(|| name.clone())?;
    written.finish();
    rt.check_cancelled()?;
    if let Some(wrote) = encoder.written_sums() {
        report.checksums = Some(Checksums::check("sort", &sums, &read, &wrote)?);
    }
    writer.finish(matches!(out.format, OutFormat::Bam(_)))?;
    drop(temp);
    drop(final_reserve);
    report.phases = clock.finish();
    report.records = stats.records;
    report.record_bytes = stats.record_bytes;
    report.memory_budget = memory;
    report.record_memory = memory.saturating_sub(reserve);
    report.runs_spilled = stats.runs_spilled;
    report.compactions = stats.compactions;
    report.final_fan_in = stats.final_fan_in;
    report.ranges = stats.ranges;
    report.temp_bytes = stats.temp_bytes;
    report.spilled_bytes = stats.spilled_bytes;
    report.spill_seconds = stats.spill_time.as_secs_f64();
    report.compaction_wait_seconds = stats.compaction_wait.as_secs_f64();
    report.outputs = out.data.into_iter().collect();
    report.outputs.extend(out.index.map(|(p, _)| p));
    Ok(report)
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
