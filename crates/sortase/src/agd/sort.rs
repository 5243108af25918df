//! [`AgdSortJob`]: `agd sort`, samtools sort's orders on a dataset, into a new dataset.
//!
//! The seam with the BAM sort is the sorter of crates/sort: chunks are decoded into records on the
//! runtime's pool (a window of `threads` chunks at a time, the next window decoded while the sorter
//! takes the previous one) and pushed to the same `Sorter` as `sortase sort` uses, so the order, the
//! ties, the memory budget and the spills to temporary runs (out of core) are the BAM sort's. Its
//! final phase hands out key ranges on all threads; each range's records are cut into chunks of at
//! most `chunk_size` records and encoded and written by the thread that merged them
//! (`Sorter::finish_ranges`), into a staging directory, then renamed to their index in order. A chunk
//! never spans two ranges, so chunks are `chunk_size` records except the last of each range. The new
//! dataset is written into a hidden directory next to the output and renamed at the end, as import
//! does.
//!
//! The `duplicate` group is applied to the records' flags before they are sorted (the sorted
//! dataset holds them in `flag`); other extra groups are not carried (their rows would need the
//! permutation): the report warns about each.

use super::{
    check_new_output, chunk_batch, dataset_header, hidden_sibling, open_manifest, write_chunk,
    CHUNK_BYTES, DEFAULT_CHUNK_SIZE, DEFAULT_ZSTD_LEVEL,
};
use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::{self as agd, ChunkBuilder, Group, Manifest, Provenance};
use sortase_bam::RecordBatch;
use sortase_exec::error::{Error, Result};
use sortase_exec::files::TempDir;
use sortase_exec::options::{add_program, Order, Phase, PhaseClock, Program};
use sortase_exec::output::temp_prefix;
use sortase_exec::runtime::Runtime;
use sortase_exec::sorting::{check_max_fan_in, Held, SortFrame};
use sortase_sort::{RangeSource, SortError, SortStats};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `sortase agd sort`: a new dataset holding the records of `input` in samtools sort's order, its
/// header with `SO` (and `SS`) set and a `@PG` line as `sortase sort` writes them. The memory budget
/// is the runtime's pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdSortJob {
    /// The dataset to sort.
    pub input: PathBuf,
    /// The dataset directory to create (must not exist, or be empty).
    pub output: PathBuf,
    /// The order.
    pub order: Order,
    /// Temporary runs go to `PREFIX.sortase-PID-N.tmp/`; default: next to the output.
    pub temp_prefix: Option<PathBuf>,
    /// Most runs the final merge may open; at least 2.
    pub max_fan_in: usize,
    /// Most records per chunk of the output.
    pub chunk_size: u64,
    /// zstd level of the output's chunk files.
    pub zstd_level: i32,
    /// The `@PG` line to add (`None`: `--no-PG`).
    pub program: Option<Program>,
    /// The command line recorded as the provenance of every group.
    pub command_line: String,
}

/// What an `agd sort` did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AgdSortReport {
    /// Records sorted.
    pub records: u64,
    /// Chunks written.
    pub chunks: usize,
    /// Uncompressed bytes of the records.
    pub record_bytes: u64,
    /// The memory budget.
    pub memory_budget: usize,
    /// Runs spilled from memory.
    pub runs_spilled: u64,
    /// Sources the final merge opened (0: all in memory).
    pub final_fan_in: usize,
    /// Bytes written to temporary runs.
    pub temp_bytes: u64,
    /// Phases with wall time and CPU use.
    pub phases: Vec<Phase>,
    /// Warnings.
    pub warnings: Vec<String>,
}

impl AgdSortJob {
    /// Sorts dataset `input` by coordinate into the new dataset `output`.
    pub fn new(input: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        Self {
            input: input.into(),
            output: output.into(),
            order: Order::Coordinate,
            temp_prefix: None,
            max_fan_in: 64,
            chunk_size: DEFAULT_CHUNK_SIZE,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            program: None,
            command_line: String::new(),
        }
    }

    /// Runs the sort on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<AgdSortReport> {
        run(self, rt)
            .with_context(|| format!("agd sort {}", self.input.display()))
            .map_err(Error::from)
    }
}

/// Decodes the chunks of dataset `dir` into record batches on `rt`'s pool, `threads` chunks at a
/// time (the next window while `f` takes the previous one), and gives them to `f` in order. The
/// records `f` has taken are the progress of `label` (ending in " records").
pub(crate) fn for_each_chunk_batch(
    dir: &Path,
    manifest: &Manifest,
    rt: &Runtime,
    label: &str,
    mut f: impl FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let progress = rt.progress(label, manifest.records);
    let (tx, rx) = crossbeam_channel::bounded::<Vec<RecordBatch>>(1);
    std::thread::scope(|s| {
        let decoder = s.spawn(move || {
            manifest
                .chunks
                .chunks(rt.threads().max(1))
                .try_for_each(|window| {
                    rt.check_cancelled()?;
                    let batches = rt.install(|| {
                        window
                            .par_iter()
                            .map(|c| chunk_batch(dir, manifest, c))
                            .collect::<anyhow::Result<Vec<_>>>()
                    })?;
                    if tx.send(batches).is_err() {
                        // The consumer stopped on an error of its own, which it reports.
                        return Ok(());
                    }
                    anyhow::Ok(())
                })
        });
        let consumed = rx.iter().flatten().try_for_each(|b| {
            let n = b.len() as u64;
            f(b)?;
            progress.add(n);
            Ok(())
        });
        drop(rx);
        let decoded = decoder
            .join()
            .map_err(|_| anyhow::anyhow!("chunk decoder panicked"))?;
        decoded.and(consumed)
    })
}

/// Memory of the final phase besides the records: up to `threads + 1` ranges being cut into chunks
/// (a range is `RANGE_BYTES` of records, its columns about as much again), at most a quarter of the
/// budget.
fn final_phase_reserve(memory: usize, threads: usize) -> usize {
    ((threads + 1) * 2 * sortase_sort::ranges::RANGE_BYTES as usize).min(memory / 4)
}

fn sort_error(e: impl std::fmt::Display) -> SortError {
    SortError::Output(std::io::Error::other(e.to_string()))
}

fn run(job: &AgdSortJob, rt: &Runtime) -> anyhow::Result<AgdSortReport> {
    let threads = rt.threads();
    let order = job.order.resolve()?;
    check_max_fan_in(job.max_fan_in)?;
    if job.chunk_size == 0 {
        sortase_exec::error::bail_argument!("--chunk-size 0: must be at least 1");
    }
    let manifest = open_manifest(&job.input)?;
    check_new_output(&job.output)?;
    let mut report = AgdSortReport::default();
    for g in &manifest.extra {
        if g.name != sortase_agd::extra::DUPLICATE_GROUP {
            report.warnings.push(format!(
                "[agd sort] extra group {} is not carried into the sorted dataset; add it again",
                g.name
            ));
        }
    }
    let out_temp = hidden_sibling(&job.output)?;
    let dir = out_temp.path().to_path_buf();
    let staging = dir.join(".staging");
    for d in [&dir, &staging] {
        for g in Group::ALL {
            std::fs::create_dir_all(d.join(g.name()))
                .with_context(|| format!("{}: cannot create", d.display()))?;
        }
    }
    let memory = rt.memory().limit();
    let temp = TempDir::create(&temp_prefix(
        job.temp_prefix.as_deref(),
        Some(&job.output),
        rt.temp_dir(),
    ))?;
    let reserve = final_phase_reserve(memory, threads);
    let mut frame = SortFrame::open(rt, "agd sort", order, reserve, temp, job.max_fan_in)?;
    let mut clock = PhaseClock::new("read");
    for_each_chunk_batch(&job.input, &manifest, rt, "agd sort records", |b| {
        Ok(frame.push(b)?)
    })?;
    rt.check_cancelled()?;

    let mut counts: Vec<u64> = Vec::new();
    let (stats, held) = write_chunks(job, rt, frame, &mut clock, &dir, &mut counts)?;
    rt.check_cancelled()?;
    drop(held);
    std::fs::remove_dir_all(&staging)
        .with_context(|| format!("{}: cannot remove", staging.display()))?;
    write_manifest(job, &manifest, order, &counts, &dir)?;
    std::fs::rename(&dir, &job.output).with_context(|| {
        format!(
            "{}: cannot rename from {}",
            job.output.display(),
            dir.display()
        )
    })?;
    drop(out_temp);
    report.phases = clock.finish();
    report.records = stats.records;
    report.chunks = counts.len();
    report.record_bytes = stats.record_bytes;
    report.memory_budget = memory;
    report.runs_spilled = stats.runs_spilled;
    report.final_fan_in = stats.final_fan_in;
    report.temp_bytes = stats.temp_bytes;
    Ok(report)
}

/// The final phase: each key range's records cut into chunks of at most `chunk_size` records,
/// written into `dir/.staging` by the thread that merged them, then renamed to their index in
/// order (their record counts pushed onto `counts`).
fn write_chunks(
    job: &AgdSortJob,
    rt: &Runtime,
    frame: SortFrame,
    clock: &mut PhaseClock,
    dir: &Path,
    counts: &mut Vec<u64>,
) -> anyhow::Result<(SortStats, Held)> {
    let staging = dir.join(".staging");
    let options = agd::WriteOptions {
        zstd_level: job.zstd_level,
        ..agd::WriteOptions::default()
    };
    let staged = AtomicUsize::new(0);
    let encode = |records: &mut sortase_sort::RangeRecords<'_>| {
        let mut out: Vec<(usize, u64)> = Vec::new();
        let mut chunk = ChunkBuilder::default();
        let mut flush = |chunk: &mut ChunkBuilder| -> std::result::Result<(), SortError> {
            let i = staged.fetch_add(1, Ordering::Relaxed);
            let w = write_chunk(&staging, i, std::mem::take(chunk), &options, None)
                .map_err(sort_error)?;
            out.push((i, w.records));
            Ok(())
        };
        records.for_each(|raw| {
            if chunk.len() as u64 == job.chunk_size || chunk.bytes() + raw.len() > CHUNK_BYTES {
                flush(&mut chunk)?;
            }
            chunk.push(&raw[4..]).map_err(sort_error)
        })?;
        if !chunk.is_empty() {
            flush(&mut chunk)?;
        }
        Ok(out)
    };
    let sink = |staged_chunks: Vec<(usize, u64)>| {
        for (i, records) in staged_chunks {
            for g in Group::ALL {
                let from = agd::chunk_path(&staging, g, i);
                let to = agd::chunk_path(dir, g, counts.len());
                std::fs::rename(&from, &to)?;
            }
            counts.push(records);
        }
        Ok(())
    };
    frame
        .finish_ranges(rt.threads(), clock, encode, sink)
        .with_context(|| dir.display().to_string())
}

/// Writes the sorted dataset's manifest into `dir`: the input's header with `SO` (and `SS`) set
/// and the `@PG` line, its references, and the chunks' record `counts`.
fn write_manifest(
    job: &AgdSortJob,
    manifest: &Manifest,
    order: sortase_sort::SortOrder,
    counts: &[u64],
    dir: &Path,
) -> anyhow::Result<()> {
    let mut header = dataset_header(manifest);
    let (so, ss) = order.header_values();
    header.set_sort_order(so, ss.as_deref());
    add_program(&mut header, job.program.as_ref());
    let provenance = Provenance {
        command_line: job.command_line.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let mut out = Manifest::new(
        &Group::ALL,
        header.text().to_string(),
        manifest.references.clone(),
        job.chunk_size,
        provenance,
    );
    out.set_chunks(counts);
    let manifest_path = dir.join(agd::MANIFEST_FILE);
    std::fs::write(&manifest_path, out.to_json())
        .with_context(|| format!("{}: cannot write", manifest_path.display()))?;
    Ok(())
}
