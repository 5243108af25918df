//! [`MergeJob`]: samtools merge for sorted inputs. Headers are combined as samtools combines them
//! and records translated (reference ids, RG/PG tags). Sorted BAM files are merged by key range on
//! all threads (the engine is [`sortase_sort::merge_files`]); stdin, SAM and CRAM inputs, inputs
//! whose reference order conflicts, and inputs that turn out not to be sorted are merged on one
//! thread (`one_thread`, one reader thread per input), which reproduces samtools' heap merge
//! exactly, unsorted inputs included.

mod one_thread;
mod tasks;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::ChecksumOptions;
use sortase_bam::header_merge::{HeaderMerger, MergeOptions, Translation};
use sortase_bam::Header;
use sortase_bgzf::CompressionLevel;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::input::{Format, Input};
use sortase_exec::options::{add_program, Order, OutputSpec, Program};
use sortase_exec::output::{
    index_target, resolve_format, split_index_name, OutFormat, ResolvedOutput,
};
use sortase_exec::progress::Progress;
use sortase_exec::proof::{self, Checksums, SumsCell};
use sortase_exec::range_output;
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::SortedOutput;
pub use sortase_sort::merge_files::RangeOptions as MergeRangeOptions;
use sortase_sort::merge_files::{MergeInput, MergePlan};
use sortase_sort::{ordered_tasks, SortError, SortOrder};
use std::path::{Path, PathBuf};
use std::sync::Arc;
pub use tasks::{MergeTask, MergeTaskOutput, MergeTaskPlan};

/// samtools merge as a job: sorted inputs (SAM, BAM, CRAM; `-` for standard input) merged into one
/// output in their common order.
///
/// ```
/// use sortase_exec::{OutputSpec, Runtime};
/// use sortase_sortjobs::{MergeJob, MergeMethod, SortJob};
/// # let dir = tempfile::tempdir().unwrap();
/// # let sam = |name: &str, pos: u32| {
/// #     let p = dir.path().join(name);
/// #     std::fs::write(&p, format!("@SQ\tSN:chr1\tLN:100\nr{pos}\t0\tchr1\t{pos}\t60\t4M\t*\t0\t0\tACGT\tIIII\n")).unwrap();
/// #     p.to_str().unwrap().to_string()
/// # };
/// # let (a_sam, b_sam) = (sam("a.sam", 50), sam("b.sam", 10));
/// let runtime = Runtime::with_threads(2)?;
/// let (a, b) = (dir.path().join("a.bam"), dir.path().join("b.bam"));
/// SortJob::new(a_sam, OutputSpec::to_path(&a)).run(&runtime)?;
/// SortJob::new(b_sam, OutputSpec::to_path(&b)).run(&runtime)?;
/// let inputs = vec![a.display().to_string(), b.display().to_string()];
/// let out = dir.path().join("merged.bam");
/// let report = MergeJob::new(inputs, OutputSpec::to_path(&out)).run(&runtime)?;
/// assert_eq!(report.method, MergeMethod::KeyRanges);
/// assert_eq!(report.outputs, vec![out]);
/// # Ok::<(), sortase_exec::Error>(())
/// ```
///
/// With the `clap` feature it is also samtools merge's flags (`clap::Args`, flattened by `sortase
/// merge`): a field's `arg(...)` is its flag and `--help` text; `order` (-n/-N/-t) and `program`
/// (--no-PG) are the CLI's to fill, and it puts the `-b` list before `inputs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MergeJob {
    /// Input files.
    pub inputs: Vec<String>,
    /// The output (default level: samtools' `-l 6`; `--index-format` or a `##idx##` name for BAI).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub output: OutputSpec,
    /// The order the inputs are sorted in (`-n`, `-N`, `-t TAG`).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub order: Order,
    /// Attach an RG tag to each record, named after its input file.
    #[cfg_attr(feature = "clap", arg(short = 'r'))]
    pub attach_rg: bool,
    /// Combine @RG lines with colliding IDs instead of renaming them.
    #[cfg_attr(feature = "clap", arg(short = 'c'))]
    pub combine_rg: bool,
    /// Combine @PG lines with colliding IDs instead of renaming them.
    #[cfg_attr(feature = "clap", arg(short = 'p'))]
    pub combine_pg: bool,
    /// Seed for the suffixes of renamed IDs [time].
    #[cfg_attr(feature = "clap", arg(short = 's', value_name = "VALUE"))]
    pub seed: Option<i64>,
    /// Use the header of FILE as the base of the output header.
    #[cfg_attr(feature = "clap", arg(short = 'h', value_name = "FILE"))]
    pub header_file: Option<PathBuf>,
    /// Overwrite the output file if it exists.
    #[cfg_attr(feature = "clap", arg(short = 'f'))]
    pub force: bool,
    /// The `@PG` line to add (`None`: `--no-PG`).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub program: Option<Program>,
    /// Prove that no record was lost or changed: sum the records read (as translated into the
    /// output header) and written (samtools checksum -F 0 -P -C -M) and fail, removing the output,
    /// if they differ; -v prints them.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "checksums"))]
    pub checksums: bool,
}

/// Which merge produced the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMethod {
    /// Sorted BAM files merged by key range on all threads.
    #[default]
    KeyRanges,
    /// samtools' heap merge on one thread (one reader thread per input).
    OneThread,
}

/// What a merge did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MergeReport {
    /// Number of inputs.
    pub inputs: usize,
    /// Threads of the runtime (the key-range merge's workers).
    pub threads: usize,
    /// Which merge produced the output.
    pub method: MergeMethod,
    /// Key ranges planned (0: the inputs were not sampled).
    pub ranges: usize,
    /// Seconds spent sampling the inputs for the key ranges.
    pub sampling_seconds: f64,
    /// Why the key-range merge gave way to the one-thread merge (an input found unsorted).
    pub key_ranges_abandoned: Option<String>,
    /// Files written (data file, then index).
    pub outputs: Vec<PathBuf>,
    /// Warnings (samtools' text).
    pub warnings: Vec<String>,
    /// With [`MergeJob::checksums`]: the sums of the records read and written.
    pub checksums: Option<Checksums>,
}

impl MergeJob {
    /// Merges coordinate-sorted `inputs` into `output` with every other option at samtools' default.
    pub fn new(inputs: Vec<String>, output: OutputSpec) -> Self {
        Self {
            inputs,
            output,
            order: Order::Coordinate,
            attach_rg: false,
            combine_rg: false,
            combine_pg: false,
            seed: None,
            header_file: None,
            force: false,
            program: None,
            checksums: false,
        }
    }

    /// Runs the merge on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<MergeReport> {
        self.run_with(rt, &MergeRangeOptions::default())
    }

    /// Runs the merge on `rt`, cutting the key-range merge's output by `options`.
    pub fn run_with(&self, rt: &Runtime, options: &MergeRangeOptions) -> Result<MergeReport> {
        run(self, rt, options).map_err(Error::from)
    }
}

/// samtools' RG name for `-r`: the file name without directory and .bam/.sam/.cram.
fn rg_name(path: &str) -> String {
    let mut s = path;
    for ext in [".bam", ".sam"] {
        if s.len() > 4 && s.ends_with(ext) {
            s = &s[..s.len() - 4];
        }
    }
    if s.len() > 5 && s.ends_with(".cram") {
        s = &s[..s.len() - 5];
    }
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// Where the merge writes (data file, index, format): `-o -O -l -u -f` resolved as samtools merge
/// does; the index is checked once the order is known to hold ([`check_index`]).
pub(crate) fn resolve_target(job: &MergeJob) -> anyhow::Result<ResolvedOutput> {
    let target = target_paths(job)?;
    if let Some(d) = target.data.as_ref().filter(|d| !job.force && d.is_file()) {
        return Err(Error::new(
            ErrorKind::Output,
            format!("{}: file exists; use -f to overwrite", d.display()),
        )
        .into());
    }
    Ok(target)
}

/// [`resolve_target`] without refusing an existing output (the names only).
pub(crate) fn target_paths(job: &MergeJob) -> anyhow::Result<ResolvedOutput> {
    let out = &job.output;
    let path = out.path.clone().unwrap_or_else(|| PathBuf::from("-"));
    let (data, _, _) = split_index_name(&path, out.index_format.as_deref())?;
    let data = (data != Path::new("-")).then_some(data);
    let level = match (out.uncompressed, out.level) {
        (true, _) => CompressionLevel::STORED,
        (false, l) => CompressionLevel::samtools(l.unwrap_or(-1)),
    };
    let format = resolve_format(
        out.format.as_deref(),
        data.as_deref(),
        level,
        OutFormat::Bam(level),
    )?;
    let (_, index, bai) = index_target(&path, out.index_format.as_deref(), format)?;
    let index = (out.write_index && data.is_some()).then_some((index, bai));
    Ok(ResolvedOutput {
        data,
        index,
        format,
    })
}

/// `--write-index` needs coordinate-sorted BAM or CRAM output.
pub(crate) fn check_index(target: &ResolvedOutput, order: SortOrder) -> anyhow::Result<()> {
    if target.index.is_some() && (order != SortOrder::Coordinate || target.format == OutFormat::Sam)
    {
        return Err(Error::argument(
            "--write-index: sortase indexes coordinate-sorted BAM or CRAM output only",
        )
        .into());
    }
    Ok(())
}

/// The output header and how each input's records are translated into it.
struct Merged {
    header: Header,
    translations: Vec<Arc<Translation>>,
    /// An input's reference order broke the coordinate order: only the one-thread merge applies.
    lost_order: bool,
}

fn open_inputs(job: &MergeJob, threads: usize, progress: &Progress) -> anyhow::Result<Vec<Input>> {
    job.inputs
        .iter()
        .map(|name| {
            Input::open(name, threads, job.output.reference.as_deref(), progress)
                .with_context(|| name.clone())
        })
        .collect()
}

/// The headers of opened inputs.
fn headers(opened: &[Input]) -> Vec<&Header> {
    opened.iter().map(|i| &i.header).collect()
}

/// Combines the headers as samtools merge does (`bam_merge_core2`).
fn merge_headers(
    job: &MergeJob,
    order: SortOrder,
    headers: &[&Header],
    progress: &Progress,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Merged> {
    let seed = job.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    });
    let mut merger = HeaderMerger::new(
        MergeOptions {
            combine_rg: job.combine_rg,
            combine_pg: job.combine_pg,
            rg_override: job
                .inputs
                .iter()
                .map(|n| job.attach_rg.then(|| rg_name(n)))
                .collect(),
        },
        seed,
    );
    if let Some(h) = &job.header_file {
        let name = h.display().to_string();
        let base = Input::open(&name, 1, job.output.reference.as_deref(), progress)
            .with_context(|| name.clone())?;
        merger.add(&base.header, usize::MAX);
    }
    let mut translations = Vec::with_capacity(headers.len());
    let mut lost_order = false;
    for (i, header) in headers.iter().enumerate() {
        let t = merger.add(header, i);
        if t.lost_coordinate_order && order == SortOrder::Coordinate {
            lost_order = true;
            warnings.push(format!(
                "[bam_merge_core] Order of targets in file {} caused coordinate sort to be lost",
                job.inputs[i]
            ));
            merger.reset_order();
        }
        translations.push(Arc::new(t));
    }
    warnings.extend(merger.take_warnings());
    if !merger.has_hd() {
        warnings.push("[W::bam_merge_core2] No @HD tag found.".into());
    }
    let mut header = merger.finish();
    add_program(&mut header, job.program.as_ref());
    Ok(Merged {
        header,
        translations,
        lost_order,
    })
}

fn run(job: &MergeJob, rt: &Runtime, options: &MergeRangeOptions) -> anyhow::Result<MergeReport> {
    let threads = rt.threads();
    let order = job.order.resolve()?;
    if job.inputs.is_empty() {
        return Err(Error::argument(
            "merge: give at least one (and usually two or more) input files",
        )
        .into());
    }
    let mut report = MergeReport {
        inputs: job.inputs.len(),
        threads,
        ..MergeReport::default()
    };
    let target = resolve_target(job)?;
    let per_input = (threads / job.inputs.len()).max(1);
    let progress = rt.progress("merge", 0);
    let mut opened = open_inputs(job, per_input, &progress)?;
    let merged = merge_headers(
        job,
        order,
        &headers(&opened),
        &progress,
        &mut report.warnings,
    )?;
    let translations = merged.translations.clone();
    check_index(&target, order)?;
    rt.check_cancelled()?;

    // Sorted BAM files merge by key range on all cores; stdin, SAM, CRAM, inputs whose reference
    // order conflicts, and inputs found unsorted take the one-thread merge (samtools' interleaving).
    let ranged = !merged.lost_order
        && job.inputs.iter().all(|n| n != "-")
        && opened.iter().all(|i| i.format == Format::Bam);
    if ranged {
        let n_refs: Vec<usize> = opened.iter().map(|i| i.header.references().len()).collect();
        drop(opened);
        let inputs = tasks::merge_inputs(job, &n_refs, &merged.translations);
        let ranges = key_ranges(
            job,
            rt,
            order,
            inputs,
            options,
            &merged,
            &target,
            &progress,
            &mut report,
        );
        match ranges {
            Ok(()) => {
                report.method = MergeMethod::KeyRanges;
                return Ok(finish_report(report, &translations, &target, progress));
            }
            Err((e, restartable)) => {
                rt.check_cancelled()?;
                if !(restartable && is_unordered(&e)) {
                    return Err(e);
                }
                report.key_ranges_abandoned = Some(format!("{e:#}"));
            }
        }
        opened = open_inputs(job, per_input, &progress)?;
    }
    report.method = MergeMethod::OneThread;
    report.checksums = one_thread_merge(job, rt, order, opened, merged, &target)?;
    Ok(finish_report(report, &translations, &target, progress))
}

/// The end of a merge either way: the progress bar finished, the translations' warnings and the
/// files written added to `report`.
fn finish_report(
    mut report: MergeReport,
    translations: &[Arc<Translation>],
    target: &ResolvedOutput,
    progress: Progress,
) -> MergeReport {
    progress.finish();
    report
        .warnings
        .extend(translations.iter().flat_map(|t| t.take_warnings()));
    report.outputs = target.files();
    report
}

/// samtools' one-thread merge of the `opened` inputs into `target`; with `--checksums`, the sums
/// read and written (checked equal).
fn one_thread_merge(
    job: &MergeJob,
    rt: &Runtime,
    order: SortOrder,
    opened: Vec<Input>,
    merged: Merged,
    target: &ResolvedOutput,
) -> anyhow::Result<Option<Checksums>> {
    let mut out = SortedOutput::open(target, &merged.header, rt.threads(), &job.output.cram())?;
    let sums = ChecksumOptions::every_record();
    let result = one_thread::merge(
        order,
        opened,
        merged.translations,
        &job.inputs,
        rt,
        &mut out.sink,
        job.checksums.then_some(&sums),
    );
    rt.check_cancelled()?;
    let mut checksums = None;
    if let Some((read, written)) = result? {
        checksums = Some(Checksums::check("merge", &sums, &read, &written)?);
    }
    out.finish()?;
    Ok(checksums)
}

/// Whether `e` says an input is not in the order the key-range merge needs.
fn is_unordered(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<SortError>(), Some(SortError::Unordered(_)))
}

/// Samples the inputs and merges them by key range. On error, also says whether the one-thread
/// merge may start over: sampling finds most unsorted inputs before any output exists; a range task
/// that finds one later can start over only if the output is a file.
#[allow(clippy::too_many_arguments)]
fn key_ranges(
    job: &MergeJob,
    rt: &Runtime,
    order: SortOrder,
    inputs: Vec<MergeInput>,
    options: &MergeRangeOptions,
    merged: &Merged,
    target: &ResolvedOutput,
    progress: &Progress,
    report: &mut MergeReport,
) -> Result<(), (anyhow::Error, bool)> {
    let started = std::time::Instant::now();
    let mut plan = rt
        .install(|| MergePlan::new(order, inputs, options))
        .map_err(|e| (e.into(), true))?
        .with_cancel(rt.cancel_flag().shared());
    report.sampling_seconds = started.elapsed().as_secs_f64();
    report.ranges = plan.ranges();
    // With --checksums: the records read, summed on the range workers that read them.
    let read = Arc::new(SumsCell::default());
    let sums = ChecksumOptions::every_record();
    if job.checksums {
        let (cell, opts) = (read.clone(), sums.clone());
        plan = plan.with_batch_hook(Arc::new(move |b| {
            cell.merge(&proof::batch_sums_here(&opts, b));
        }));
    }
    let check = |written: &sortase_bam::checksum::Sums| {
        Checksums::check("merge", &sums, &read.get(), written)
    };
    report.checksums = write_ranges(job, rt, &plan, merged, target, progress, &check)
        .map_err(|e| (e, target.data.is_some()))?;
    Ok(())
}

/// Merges the plan's ranges on the runtime's threads ([`MergePlan`]) and writes them in order.
fn write_ranges(
    job: &MergeJob,
    rt: &Runtime,
    plan: &MergePlan,
    merged: &Merged,
    target: &ResolvedOutput,
    progress: &Progress,
    check: &dyn Fn(&sortase_bam::checksum::Sums) -> Result<Checksums>,
) -> anyhow::Result<Option<Checksums>> {
    let threads = rt.threads();
    let (mut encoder, mut writer) =
        range_output::open(target, &merged.header, threads, &job.output.cram())?;
    if job.checksums {
        encoder.sum_records(ChecksumOptions::every_record());
    }
    let name = writer.name.clone();
    let ranges = plan.ranges();
    let per_range = plan.compressed_bytes() / ranges as u64;
    // BAM records take about 3-4 times their compressed size.
    encoder.expect_range_bytes((per_range * 4) as usize);
    let cancel = rt.cancel_flag();
    // As the sort's final phase: `threads` ranges encoded and `threads` waiting for the writer.
    ordered_tasks(
        threads,
        ranges,
        2 * threads,
        |r| {
            if cancel.is_cancelled() {
                return Err(SortError::Cancelled);
            }
            encoder.encode(&mut plan.open(r, &merged.translations)?)
        },
        |range| {
            progress.add(per_range);
            writer.write(range)
        },
    )
    .with_context(|| name.clone())?;
    plan.check_samples()?;
    rt.check_cancelled()?;
    let checksums = encoder.written_sums().map(|w| check(&w)).transpose()?;
    writer.finish()?;
    Ok(checksums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_merge_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.sam");
        std::fs::write(
            &input,
            "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n",
        )
        .unwrap();
        let out = dir.path().join("out.bam");
        let job = MergeJob::new(vec![input.display().to_string()], OutputSpec::to_path(&out));
        let rt = Runtime::with_threads(2).unwrap();
        rt.cancel();
        let e = job.run(&rt).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "output left behind"
        );
        assert_eq!(rg_name("dir/x.sorted.bam"), "x.sorted");
    }
}
