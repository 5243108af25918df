//! `sortase merge`'s key-range merge as serialisable tasks whose finished output is byte-identical
//! to [`MergeJob::run`] with the same options (issue 16; the Dask driver of issue 18 runs them).
//!
//! Why the bytes can match: the key ranges depend only on the inputs ([`sortase_sort::merge_files`]:
//! samples at fixed compressed distances, split points chosen among them) and every range is
//! encoded into BGZF blocks of its own. [`MergeJob::plan`] samples the inputs and keeps the samples and split
//! points as data ([`MergeTaskPlan`]); a [`MergeTask`] re-derives the header translations from the
//! inputs' headers (the plan fixes `-s`'s seed), merges a stretch of consecutive key ranges and
//! writes their blocks into one part file and sidecar exactly as a sort's reduce task does
//! (`parts.rs`); [`MergeTaskPlan::finish`] writes them through the same
//! [`sortase_exec::range_output::RangeWriter`] as `MergeJob::run`, the index replayed from the ranges'
//! summaries.
//!
//! Unlike `MergeJob::run`, tasks do not fall back to the one-thread merge: a task that finds an
//! input unsorted, or a planned boundary that is not a record start, fails, and so does `finish`
//! when a sample a task started reading at was not confirmed by another reader (the check of
//! `MergePlan::check_samples`, over every task's marks). Run the job with `MergeJob::run` then.
//!
//! ```
//! use sortase_exec::{OutputSpec, Runtime};
//! use sortase_sortjobs::{MergeJob, SortJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = |name: &str, pos: u32| {
//! #     let p = dir.path().join(name);
//! #     std::fs::write(&p, format!("@SQ\tSN:chr1\tLN:100\nr{pos}\t0\tchr1\t{pos}\t60\t4M\t*\t0\t0\tACGT\tIIII\n")).unwrap();
//! #     p.to_str().unwrap().to_string()
//! # };
//! # let (a_sam, b_sam) = (sam("a.sam", 50), sam("b.sam", 10));
//! let rt = Runtime::with_threads(1)?;
//! let (a, b) = (dir.path().join("a.bam"), dir.path().join("b.bam"));
//! SortJob::new(a_sam, OutputSpec::to_path(&a)).run(&rt)?;
//! SortJob::new(b_sam, OutputSpec::to_path(&b)).run(&rt)?;
//! let inputs = vec![a.display().to_string(), b.display().to_string()];
//! let out = dir.path().join("merged.bam");
//! let plan = MergeJob::new(inputs, OutputSpec::to_path(&out)).plan(&rt)?;
//! let outputs = plan.tasks(4).iter().map(|t| t.run(&rt)).collect::<sortase_exec::Result<Vec<_>>>()?;
//! let report = plan.finish(&outputs, &rt)?;
//! assert_eq!(report.outputs, vec![out]);
//! # Ok::<(), sortase_exec::Error>(())
//! ```

use super::{
    check_index, headers, merge_headers, open_inputs, resolve_target, target_paths, MergeJob,
    MergeMethod, MergeReport,
};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::Header;
use sortase_bgzf::CompressionLevel;
use sortase_exec::assemble::{self, Layout};
use sortase_exec::bam_ranges::InputSpan;
use sortase_exec::error::bail_argument;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::input::read_bam_header;
use sortase_exec::input::Format;
use sortase_exec::output::{temp_prefix, OutFormat, ResolvedOutput};
use sortase_exec::parts::{complete, create_work_dir, remove_work_dir, write_output, PartFiles};
use sortase_exec::range_output::RangeEncoder;
use sortase_exec::runtime::Runtime;
use sortase_exec::wire::{hex, HeaderData};
use sortase_exec::writer::OnTheFlyIndex;
use sortase_index::IndexBuilder;
use sortase_sort::merge_files::{MergeInput, MergePlan, RangeOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A sample of an input: the virtual offset of a record and its translated key bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeSample {
    /// Virtual offset of the record.
    pub voffset: u64,
    /// Its key bytes ([`sortase_sort::order::key_prefix`] of the translated record).
    #[serde(with = "hex")]
    pub key: Vec<u8>,
}

/// What every task of one merge shares: the job, the output header, the samples and split points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shared {
    /// The job, with `-s`'s seed fixed and input paths made absolute.
    job: MergeJob,
    /// The output header.
    header: HeaderData,
    /// References of each input's header.
    n_refs: Vec<usize>,
    /// Each input's samples, in file order.
    samples: Vec<Vec<MergeSample>>,
    /// `(input, sample)` of each split point, in output order.
    splits: Vec<(usize, usize)>,
    /// Compressed bytes of all inputs.
    compressed: u64,
    /// The output's libdeflate level.
    level: u8,
    /// The index geometry with `--write-index`.
    index: Option<(u32, u32)>,
}

/// A merge cut into key-range tasks ([`MergeJob::plan`]). Plain data (serde).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeTaskPlan {
    shared: Shared,
    /// The job as given (its output paths are resolved by [`MergeTaskPlan::finish`]).
    job: MergeJob,
    work_dir: PathBuf,
    sampling_seconds: f64,
    /// Warnings of the header merge, then of each input's sampled records.
    warnings: Vec<String>,
    /// Translation warnings met while sampling, per input.
    input_warnings: Vec<Vec<String>>,
}

/// A stretch of consecutive key ranges of a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeTask {
    shared: Shared,
    /// This task's number.
    pub part: usize,
    /// Tasks in the plan.
    pub parts: usize,
    /// The number of the stretch's first key range.
    pub first_range: usize,
    /// Key ranges in the stretch.
    pub ranges: usize,
    /// Its part file and sidecar.
    #[serde(flatten)]
    pub files: PartFiles,
}

/// What a [`MergeTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeTaskOutput {
    /// The task's number.
    pub part: usize,
    /// Tasks in the plan.
    pub parts: usize,
    /// The number of its first key range.
    pub first_range: usize,
    /// Key ranges it encoded.
    pub ranges: usize,
    /// Samples (`(input, sample)`) its readers started at.
    pub used: Vec<(usize, usize)>,
    /// Samples its readers reached exactly (record starts).
    pub confirmed: Vec<(usize, usize)>,
    /// Warnings met translating each input's records.
    pub warnings: Vec<Vec<String>>,
    /// Its part file and sidecar.
    #[serde(flatten)]
    pub files: PartFiles,
}

impl MergeJob {
    /// Plans the key-range merge as tasks with [`super::MergeRangeOptions::default`].
    pub fn plan(&self, rt: &Runtime) -> Result<MergeTaskPlan> {
        self.plan_with(rt, &RangeOptions::default())
    }

    /// Plans the key-range merge as tasks: sorted BAM files in, a BAM file out (otherwise
    /// `MergeJob::run` merges on one thread, which has no tasks). Samples the inputs on `rt`,
    /// chooses the key ranges as `MergeJob::run_with(rt, options)` does, and creates the work
    /// directory (next to the output); [`MergeTaskPlan::finish`] or [`MergeTaskPlan::abort`]
    /// removes it.
    pub fn plan_with(&self, rt: &Runtime, options: &RangeOptions) -> Result<MergeTaskPlan> {
        plan(self, rt, options).map_err(Error::from)
    }
}

fn absolute(path: &str) -> anyhow::Result<String> {
    Ok(std::path::absolute(path)
        .with_context(|| path.to_string())?
        .display()
        .to_string())
}

const NO_TASKS: &str = "the one-thread merge has no tasks";

fn plan(job: &MergeJob, rt: &Runtime, options: &RangeOptions) -> anyhow::Result<MergeTaskPlan> {
    let order = job.order.resolve()?;
    if job.inputs.is_empty() {
        bail_argument!("merge: give at least one (and usually two or more) input files");
    }
    if job.inputs.iter().any(|n| n == "-") {
        bail_argument!("merge tasks read BAM files, not standard input ({NO_TASKS})");
    }
    let target = resolve_target(job)?;
    check_index(&target, order)?;
    let OutFormat::Bam(level) = target.format else {
        bail_argument!("merge tasks write BAM only ({NO_TASKS})");
    };
    let Some(data) = target.data.as_deref() else {
        bail_argument!("merge tasks need an output file (-o), not standard output");
    };
    let fixed = fixed_job(job)?;
    let mut warnings = Vec::new();
    let (merged, n_refs) = merge_bam_headers(job, &fixed, order, rt, &mut warnings)?;
    let inputs = merge_inputs(&fixed, &n_refs, &merged.translations);
    let started = std::time::Instant::now();
    let sampled = rt
        .install(|| MergePlan::new(order, inputs, options))
        .map_err(anyhow::Error::from)?;
    let sampling_seconds = started.elapsed().as_secs_f64();
    let (samples, splits) = sampled.to_parts();
    let index = target.index_file().map(|(_, bai)| {
        let ix = OnTheFlyIndex::new(&merged.header, bai);
        IndexBuilder::new(ix.format(), ix.n_ref(), 0).geometry()
    });
    let work_dir = create_work_dir(&temp_prefix(None, Some(data), rt.temp_dir()))?;
    Ok(MergeTaskPlan {
        shared: Shared {
            job: fixed,
            header: HeaderData::of(&merged.header),
            n_refs,
            samples: samples
                .into_iter()
                .map(|s| {
                    s.into_iter()
                        .map(|(voffset, key)| MergeSample { voffset, key })
                        .collect()
                })
                .collect(),
            splits,
            compressed: sampled.compressed_bytes(),
            level: level.libdeflate(),
            index,
        },
        job: job.clone(),
        work_dir,
        sampling_seconds,
        warnings,
        input_warnings: merged
            .translations
            .iter()
            .map(|t| t.take_warnings())
            .collect(),
    })
}

/// The job as its tasks run it on any machine: the seed fixed (now, unless given) and the paths
/// absolute.
fn fixed_job(job: &MergeJob) -> anyhow::Result<MergeJob> {
    let mut fixed = job.clone();
    fixed.seed = Some(job.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }));
    fixed.inputs = job
        .inputs
        .iter()
        .map(|n| absolute(n))
        .collect::<anyhow::Result<_>>()?;
    if let Some(h) = &job.header_file {
        fixed.header_file = Some(std::path::absolute(h).context(h.display().to_string())?);
    }
    Ok(fixed)
}

/// Opens the inputs of `fixed` (BAM only) and merges their headers; with each input's number of
/// references. Inputs whose reference orders conflict have no tasks.
fn merge_bam_headers(
    job: &MergeJob,
    fixed: &MergeJob,
    order: sortase_sort::SortOrder,
    rt: &Runtime,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(super::Merged, Vec<usize>)> {
    let progress = rt.progress("merge plan", 0);
    let opened = open_inputs(fixed, 1, &progress)?;
    if let Some((name, _)) = job
        .inputs
        .iter()
        .zip(&opened)
        .find(|(_, i)| i.format != Format::Bam)
    {
        bail_argument!("{name}: merge tasks read BAM only ({NO_TASKS})");
    }
    let merged = merge_headers(fixed, order, &headers(&opened), &progress, warnings)?;
    if merged.lost_order {
        bail_argument!(
            "the inputs' reference orders conflict: merge them with `MergeJob::run` ({NO_TASKS})"
        );
    }
    let n_refs: Vec<usize> = opened.iter().map(|i| i.header.references().len()).collect();
    Ok((merged, n_refs))
}

/// The inputs as the key-range merge reads them.
pub(super) fn merge_inputs(
    job: &MergeJob,
    n_refs: &[usize],
    translations: &[Arc<sortase_bam::header_merge::Translation>],
) -> Vec<MergeInput> {
    job.inputs
        .iter()
        .zip(n_refs)
        .zip(translations)
        .map(|((name, &n_ref), t)| MergeInput {
            path: PathBuf::from(name),
            n_ref,
            translation: t.clone(),
        })
        .collect()
}

impl Shared {
    fn ranges(&self) -> usize {
        self.splits.len() + 1
    }

    /// The sampled plan without header translations: enough to check samples and find spans,
    /// not to read records.
    fn untranslated_plan(&self) -> anyhow::Result<MergePlan> {
        let order = self.job.order.resolve()?;
        let inputs = self
            .job
            .inputs
            .iter()
            .zip(&self.n_refs)
            .map(|(name, &n_ref)| MergeInput {
                path: PathBuf::from(name),
                n_ref,
                translation: Arc::default(),
            })
            .collect();
        Ok(MergePlan::from_parts(
            order,
            inputs,
            &self.sample_parts(),
            self.splits.clone(),
            self.compressed,
        )?)
    }

    fn sample_parts(&self) -> Vec<Vec<(u64, Vec<u8>)>> {
        self.samples
            .iter()
            .map(|s| s.iter().map(|s| (s.voffset, s.key.clone())).collect())
            .collect()
    }
}

impl MergeTaskPlan {
    /// Key ranges of the output.
    pub fn ranges(&self) -> usize {
        self.shared.ranges()
    }

    /// The work directory (every task's files go there).
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The key ranges cut into `n` tasks of consecutive ranges (fewer if there are fewer ranges).
    pub fn tasks(&self, n: usize) -> Vec<MergeTask> {
        let ranges = self.ranges();
        let n = n.clamp(1, ranges);
        (0..n)
            .map(|part| {
                let (a, b) = (part * ranges / n, (part + 1) * ranges / n);
                MergeTask {
                    shared: self.shared.clone(),
                    part,
                    parts: n,
                    first_range: a,
                    ranges: b - a,
                    files: PartFiles::named(&self.work_dir, "merge", part),
                }
            })
            .collect()
    }

    /// Writes the output from every task's output (in any order, repeats ignored) exactly as
    /// `MergeJob::run` does: header blocks, every key range's blocks, the EOF block and with
    /// `--write-index` the index, both under temporary names renamed when complete. Then removes
    /// the work directory (a failure to is a warning of the report). On error the work directory
    /// stays: retry `finish`, or give up with [`MergeTaskPlan::abort`].
    pub fn finish(&self, outputs: &[MergeTaskOutput], rt: &Runtime) -> Result<MergeReport> {
        self.finish_inner(outputs, rt).map_err(Error::from)
    }

    /// The parallel finish's first step ([`sortase_exec::assemble`]): checks every task's output
    /// (in any order, repeats ignored) as [`MergeTaskPlan::finish`] does, lays the output out from
    /// the parts' sidecars and writes the index (with `--write-index`) under a temporary name next
    /// to it; with `preallocate` creates the output's temporary file for the
    /// [`sortase_exec::assemble::PlaceTask`]s. Reads no part file.
    pub fn layout(
        &self,
        outputs: &[MergeTaskOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> Result<Layout> {
        self.layout_inner(outputs, preallocate, rt)
            .map_err(Error::from)
    }

    fn layout_inner(
        &self,
        outputs: &[MergeTaskOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> anyhow::Result<Layout> {
        let parts = self.checked_parts(outputs)?;
        let target = resolve_target(&self.job)?;
        let (OutFormat::Bam(level), Some(data)) = (target.format, target.data.as_deref()) else {
            bail_argument!("merge tasks write a BAM file");
        };
        let files: Vec<_> = parts.iter().map(|p| (&p.files, p.ranges)).collect();
        let report = self.report(&parts, &target, rt, self.warnings.clone());
        let report = serde_json::to_value(&report).context("merge report JSON")?;
        assemble::layout(
            &self.shared.header.to_header(),
            level,
            data,
            target.index_file(),
            &files,
            &self.work_dir,
            report,
            preallocate,
            rt,
        )
    }

    /// The tasks' outputs by part, checked: they continue each other's key ranges and every
    /// sample a reader started at was reached exactly by another reader.
    fn checked_parts<'a>(
        &self,
        outputs: &'a [MergeTaskOutput],
    ) -> anyhow::Result<Vec<&'a MergeTaskOutput>> {
        let parts = complete(outputs, "merge", |o| (o.part, o.parts))?;
        let mut next = 0;
        for p in &parts {
            if p.first_range != next {
                bail_argument!("merge output {} does not continue key range {next}", p.part);
            }
            next += p.ranges;
        }
        if next != self.ranges() {
            bail_argument!("merge outputs cover {next} of {} key ranges", self.ranges());
        }
        // Every sample a reader started at must have been reached exactly by another reader.
        let shared = &self.shared;
        let check = shared.untranslated_plan()?;
        for p in &parts {
            check.add_marks(&p.used, &p.confirmed);
        }
        check.check_samples()?;
        Ok(parts)
    }

    /// The merge's report from its checked parts (`warnings`: the plan's, then the inputs').
    fn report(
        &self,
        parts: &[&MergeTaskOutput],
        target: &ResolvedOutput,
        rt: &Runtime,
        mut warnings: Vec<String>,
    ) -> MergeReport {
        for (i, sampled) in self.input_warnings.iter().enumerate() {
            let mut seen = std::collections::HashSet::new();
            let all = sampled.iter().chain(
                parts
                    .iter()
                    .flat_map(|p| p.warnings.get(i).into_iter().flatten()),
            );
            warnings.extend(all.filter(|w| seen.insert(*w)).cloned());
        }
        MergeReport {
            inputs: self.shared.job.inputs.len(),
            threads: rt.threads(),
            method: MergeMethod::KeyRanges,
            ranges: self.ranges(),
            sampling_seconds: self.sampling_seconds,
            key_ranges_abandoned: None,
            outputs: target.files(),
            warnings,
            // The merge split into tasks does not sum its records (`checksums` is for one process).
            checksums: None,
        }
    }

    fn finish_inner(
        &self,
        outputs: &[MergeTaskOutput],
        rt: &Runtime,
    ) -> anyhow::Result<MergeReport> {
        let parts = self.checked_parts(outputs)?;
        let shared = &self.shared;
        let target = resolve_target(&self.job)?;
        let header = shared.header.to_header();
        let files: Vec<_> = parts.iter().map(|p| (&p.files, p.ranges)).collect();
        write_output(&target, &header, &files, rt)?;
        let mut report = self.report(&parts, &target, rt, self.warnings.clone());
        if let Err(e) = self.abort() {
            report.warnings.push(format!("merge tasks: {e}"));
        }
        Ok(report)
    }

    /// Removes the work directory and every task file in it, and the temporary files of the
    /// parallel finish ([`MergeTaskPlan::layout`]).
    pub fn abort(&self) -> Result<()> {
        if let Ok(target) = target_paths(&self.job) {
            let index = target.index.as_ref().map(|(p, _)| p.as_path());
            assemble::remove_temps(target.data.as_deref(), index, &self.work_dir);
        }
        remove_work_dir(&self.work_dir)
    }
}

impl MergeTask {
    /// The inputs, as the job names them.
    pub fn inputs(&self) -> impl Iterator<Item = &str> {
        self.shared.job.inputs.iter().map(String::as_str)
    }

    /// The header file of `-h`.
    pub fn header_file(&self) -> Option<&std::path::Path> {
        self.shared.job.header_file.as_deref()
    }

    /// The inputs' byte spans this task reads (inputs it does not read are left out), for drivers
    /// that fetch remote inputs by byte range.
    pub fn input_spans(&self) -> Result<Vec<InputSpan>> {
        let shared = &self.shared;
        let plan = shared.untranslated_plan()?;
        let spans = plan.spans(self.first_range..self.first_range + self.ranges);
        Ok(shared
            .job
            .inputs
            .iter()
            .zip(spans)
            .filter_map(|(name, span)| {
                span.map(|(start, end)| InputSpan {
                    path: PathBuf::from(name),
                    start: start >> 16,
                    end: end.map(|e| e >> 16),
                })
            })
            .collect())
    }

    /// Merges and encodes the task's key ranges into its part file and sidecar.
    pub fn run(&self, rt: &Runtime) -> Result<MergeTaskOutput> {
        rt.install(|| self.run_inner(rt))
            .with_context(|| format!("merge task {}", self.part))
            .map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<MergeTaskOutput> {
        let shared = &self.shared;
        let job = &shared.job;
        let order = job.order.resolve()?;
        if self.ranges == 0 || self.first_range + self.ranges > shared.ranges() {
            bail_argument!("merge task {}: no such key ranges", self.part);
        }
        let progress = rt.progress("merge task", 0);
        // Headers only, read block by block: a task reads nothing of an input outside its header
        // and its spans (`input_spans`; a driver may fetch only those).
        let read: Vec<Header> = job
            .inputs
            .iter()
            .map(|name| read_bam_header(name).with_context(|| name.clone()))
            .collect::<anyhow::Result<_>>()?;
        let merged = merge_headers(
            job,
            order,
            &read.iter().collect::<Vec<_>>(),
            &progress,
            &mut Vec::new(),
        )?;
        let n_refs: Vec<usize> = read.iter().map(|h| h.references().len()).collect();
        if HeaderData::of(&merged.header) != shared.header || n_refs != shared.n_refs {
            return Err(Error::new(
                ErrorKind::Input,
                "the inputs' headers changed since the merge was planned",
            )
            .into());
        }
        let inputs = merge_inputs(job, &n_refs, &merged.translations);
        let plan = MergePlan::from_parts(
            order,
            inputs,
            &shared.sample_parts(),
            shared.splits.clone(),
            shared.compressed,
        )?
        .with_cancel(rt.cancel_flag().shared());
        let level = CompressionLevel::from_libdeflate(shared.level);
        let mut encoder = RangeEncoder::new(OutFormat::Bam(level), Header::default(), shared.index);
        // As `write_ranges`: BAM records take about 3-4 times their compressed size.
        encoder.expect_range_bytes((shared.compressed / shared.ranges() as u64 * 4) as usize);
        let translations = &merged.translations;
        self.files.write(rt, self.ranges, |k| {
            let mut range = plan.open(self.first_range + k, translations)?;
            Ok(encoder.encode(&mut range)?)
        })?;
        let (used, confirmed) = plan.sample_marks();
        Ok(MergeTaskOutput {
            part: self.part,
            parts: self.parts,
            first_range: self.first_range,
            ranges: self.ranges,
            used,
            confirmed,
            warnings: translations.iter().map(|t| t.take_warnings()).collect(),
            files: self.files.clone(),
        })
    }
}
