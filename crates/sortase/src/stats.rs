//! [`FlagstatJob`] and [`IdxstatsJob`]: samtools flagstat and idxstats, counted per byte range of the
//! BAM (per run of containers of a CRAM file: [`sortase_exec::file_ranges`]) on all cores and summed
//! (crates/ops holds the counters). Both also come as serialisable range tasks ([`FlagstatPlan`],
//! [`IdxstatsPlan`]) for a distributed driver.
//!
//! ```
//! use sortase::{FlagstatJob, OutputSpec, Runtime, SortJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! # let bam = dir.path().join("in.bam");
//! let rt = Runtime::with_threads(2)?;
//! # SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&bam)).run(&rt)?;
//! let report = FlagstatJob::new(&bam).run(&rt)?;
//! assert_eq!(report.counts.reads, [2, 0]);
//! assert!(report.to_text().starts_with("2 + 0 in total"));
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::ReferenceEntry;
use sortase_bam::BamError;
use sortase_exec::agd::counts::{flagstat_chunk, idxstats_chunks};
use sortase_exec::agd::{columns::duplicate_group, is_dataset, open_manifest};
use sortase_exec::bam_ranges::{self, RANGES_PER_THREAD};
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::file_ranges;
pub use sortase_exec::file_ranges::FileRange;
use sortase_exec::runtime::Runtime;
use sortase_ops::{flagstat::FlagStat, idxstats::IdxStats};
use std::path::{Path, PathBuf};

/// samtools flagstat as a job: one BAM, CRAM or SAM file, or an AGD dataset directory (counted on its
/// `results` columns alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FlagstatJob {
    /// Input BAM (CRAM, SAM) or AGD dataset directory.
    pub input: PathBuf,
}

/// samtools flagstat's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagstatReport {
    /// The counters, each `[QC-passed, QC-failed]`.
    pub counts: FlagStat,
    /// Warnings (samtools' text).
    pub warnings: Vec<String>,
}

impl FlagstatReport {
    /// samtools flagstat's default text.
    pub fn to_text(&self) -> String {
        self.counts.to_default()
    }

    /// samtools flagstat `-O json` (its keys and spacing).
    pub fn to_json(&self) -> String {
        self.counts.to_json()
    }

    /// samtools flagstat `-O tsv`.
    pub fn to_tsv(&self) -> String {
        self.counts.to_tsv()
    }

    /// The text for an `-O` name (`json`/`JSON`, `tsv`/`TSV`; anything else: the default text).
    pub fn format(&self, name: &str) -> String {
        match name {
            "json" | "JSON" => self.to_json(),
            "tsv" | "TSV" => self.to_tsv(),
            _ => self.to_text(),
        }
    }
}

/// Flagstat's range tasks: one per byte range of the BAM, or per run of containers of a CRAM file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagstatPlan {
    /// The tasks, in file order.
    pub tasks: Vec<FlagstatTask>,
}

/// Counting one part of the file for flagstat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FlagstatTask(pub FileRange);

/// The counters of one range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagstatPart {
    /// The task's range number.
    pub part: usize,
    /// Its counters.
    pub counts: FlagStat,
}

impl FlagstatJob {
    /// Flagstat of `input`.
    pub fn new(input: impl Into<PathBuf>) -> Self {
        Self {
            input: input.into(),
        }
    }

    /// Counts on all of `rt`'s threads.
    pub fn run(&self, rt: &Runtime) -> Result<FlagstatReport> {
        let name = self.input.display().to_string();
        if is_dataset(&self.input) {
            return dataset_flagstat(&self.input, rt)
                .with_context(|| format!("agd flagstat {name}"))
                .map_err(Error::from);
        }
        let (_, parts) = file_ranges::scan(
            &self.input,
            rt,
            sortase_cram::Fields::Flagstat,
            |_| FlagStat::default(),
            FlagStat::add,
            add_cram_flagstat,
        )
        .with_context(|| name.clone())?;
        let mut report = FlagstatReport::default();
        parts.iter().for_each(|p| report.counts.merge(p));
        Ok(report)
    }

    /// Range tasks: about `rt.threads() * 4` ranges, as [`FlagstatJob::run`] cuts them.
    pub fn plan(&self, rt: &Runtime) -> Result<FlagstatPlan> {
        self.plan_ranges(rt.threads() * RANGES_PER_THREAD)
    }

    /// Range tasks: about `n` ranges of equal compressed size (fewer for small files), or runs of
    /// whole containers of a CRAM file (none if it has no records).
    pub fn plan_ranges(&self, n: usize) -> Result<FlagstatPlan> {
        let ranges =
            FileRange::plan(&self.input, n).with_context(|| self.input.display().to_string())?;
        Ok(FlagstatPlan {
            tasks: ranges.into_iter().map(FlagstatTask).collect(),
        })
    }
}

impl FlagstatTask {
    /// Counts the range's records.
    pub fn run(&self, rt: &Runtime) -> Result<FlagstatPart> {
        let counts = self.0.count(
            rt,
            sortase_cram::Fields::Flagstat,
            |_| FlagStat::default(),
            FlagStat::add,
            add_cram_flagstat,
        )?;
        Ok(FlagstatPart {
            part: self.0.part(),
            counts,
        })
    }
}

impl FlagstatPlan {
    /// The report from the parts of every task (any order).
    pub fn finish(&self, parts: Vec<FlagstatPart>) -> Result<FlagstatReport> {
        let parts = bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let mut report = FlagstatReport::default();
        parts.iter().for_each(|p| report.counts.merge(&p.counts));
        Ok(report)
    }

    /// The plan to run instead when a task failed: the whole BAM as one task (see
    /// [`sortase_exec::bam_ranges`]); none for a CRAM file, whose runs start at container headers.
    pub fn fallback(&self) -> Option<FlagstatPlan> {
        let tasks = FileRange::fallback(self.tasks.iter().map(|t| &t.0))?;
        Some(FlagstatPlan {
            tasks: tasks.into_iter().map(FlagstatTask).collect(),
        })
    }
}

/// samtools idxstats as a job: from the BAM's index when it has one, else by counting its records
/// (an AGD dataset: its `ref_id` and `flag` columns, as samtools counts the BAM it came from
/// without an index).
/// A CRAM file is always counted: samtools 1.24 reads no `.crai` for idxstats (a `.crai` of another
/// file, or a corrupt one, leaves its output unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct IdxstatsJob {
    /// Input BAM (CRAM) or AGD dataset directory.
    pub input: PathBuf,
}

/// One line of samtools idxstats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdxstatsRow {
    /// Reference name (`*` for records without a reference).
    pub name: String,
    /// Reference length (0 for `*`).
    pub length: u64,
    /// Mapped records.
    pub mapped: u64,
    /// Unmapped records.
    pub unmapped: u64,
}

/// samtools idxstats' lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdxstatsReport {
    /// One row per reference in header order, then `*`.
    pub rows: Vec<IdxstatsRow>,
    /// Warnings (samtools' text).
    pub warnings: Vec<String>,
}

impl IdxstatsReport {
    /// samtools idxstats' text (tab-separated lines).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for r in &self.rows {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\n",
                r.name, r.length, r.mapped, r.unmapped
            ));
        }
        out
    }
}

impl IdxstatsJob {
    /// Idxstats of `input`.
    pub fn new(input: impl Into<PathBuf>) -> Self {
        Self {
            input: input.into(),
        }
    }

    /// Reads the index's metadata, or counts on all of `rt`'s threads when there is no index.
    pub fn run(&self, rt: &Runtime) -> Result<IdxstatsReport> {
        let name = self.input.display().to_string();
        if is_dataset(&self.input) {
            return dataset_idxstats(&self.input, rt);
        }
        // A CRAM file is always counted (see IdxstatsJob), whatever index sits next to it.
        if !sortase_exec::input::is_cram(&self.input) {
            if let Some(index) = sortase_bam::query::find_index(&self.input) {
                return from_index(&self.input, &index);
            }
        }
        let (header, parts) = file_ranges::scan(
            &self.input,
            rt,
            sortase_cram::Fields::Idxstats,
            IdxStats::new,
            IdxStats::add,
            count_cram_record,
        )
        .with_context(|| name.clone())?;
        from_counts(&name, &header, &parts)
    }

    /// Range tasks (about `n` ranges of equal compressed size, or runs of whole containers of a
    /// CRAM file) when the BAM has no index; none when it has one ([`IdxstatsPlan::finish`] then
    /// reads the index, as [`IdxstatsJob::run`]).
    pub fn plan_ranges(&self, n: usize) -> Result<IdxstatsPlan> {
        // A CRAM file is always counted (see IdxstatsJob), whatever index sits next to it.
        let index = match sortase_exec::input::is_cram(&self.input) {
            true => None,
            false => sortase_bam::query::find_index(&self.input),
        };
        if let Some(index) = index {
            return Ok(IdxstatsPlan {
                input: self.input.clone(),
                index: Some(index),
                tasks: Vec::new(),
            });
        }
        let ranges =
            FileRange::plan(&self.input, n).with_context(|| self.input.display().to_string())?;
        Ok(IdxstatsPlan {
            input: self.input.clone(),
            index: None,
            tasks: ranges.into_iter().map(IdxstatsTask).collect(),
        })
    }
}

/// Idxstats' range tasks: one per byte range of a BAM without an index, or per run of containers of
/// a CRAM file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdxstatsPlan {
    /// The BAM or CRAM file.
    pub input: PathBuf,
    /// Its index, read instead of the records when there is one (then there are no tasks).
    pub index: Option<PathBuf>,
    /// The tasks, in file order.
    pub tasks: Vec<IdxstatsTask>,
}

/// Counting one part of the file per reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdxstatsTask(pub FileRange);

/// The per-reference counters of one range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdxstatsPart {
    /// The task's range number.
    pub part: usize,
    /// Its counters.
    pub counts: IdxStats,
}

impl IdxstatsTask {
    /// The task's number in file order.
    pub fn part(&self) -> usize {
        self.0.part()
    }

    /// Counts the range's records per reference.
    pub fn run(&self, rt: &Runtime) -> Result<IdxstatsPart> {
        let counts = self.0.count(
            rt,
            sortase_cram::Fields::Idxstats,
            IdxStats::new,
            IdxStats::add,
            count_cram_record,
        )?;
        Ok(IdxstatsPart {
            part: self.part(),
            counts,
        })
    }
}

impl IdxstatsPlan {
    /// The report from the parts of every task (any order), or from the index.
    pub fn finish(&self, parts: Vec<IdxstatsPart>) -> Result<IdxstatsReport> {
        if let Some(index) = &self.index {
            return from_index(&self.input, index);
        }
        let name = self.input.display().to_string();
        let parts = bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let header = file_ranges::read_header(&self.input).with_context(|| name.clone())?;
        let counts: Vec<IdxStats> = parts.into_iter().map(|p| p.counts).collect();
        from_counts(&name, &header, &counts)
    }

    /// The plan to run instead when a task failed: the whole BAM as one task (see
    /// [`sortase_exec::bam_ranges`]); none for a CRAM file, whose runs start at container headers.
    pub fn fallback(&self) -> Option<IdxstatsPlan> {
        let tasks = FileRange::fallback(self.tasks.iter().map(|t| &t.0))?;
        Some(IdxstatsPlan {
            tasks: tasks.into_iter().map(IdxstatsTask).collect(),
            ..self.clone()
        })
    }
}

/// Counts one decoded CRAM record for flagstat (the fields samtools flagstat requires).
fn add_cram_flagstat(
    s: &mut FlagStat,
    c: &sortase_cram::Core,
) -> std::result::Result<(), BamError> {
    s.add_fields(c.flag, c.tid, c.mtid, c.mapq);
    Ok(())
}

/// Counts one decoded CRAM record for idxstats; a refID outside the header is an error (samtools'
/// `slow_idxstats` rejects it too).
fn count_cram_record(
    s: &mut IdxStats,
    c: &sortase_cram::Core,
) -> std::result::Result<(), BamError> {
    if s.add_fields(c.tid, c.flag) {
        return Ok(());
    }
    Err(BamError::Cram(format!(
        "record on reference id {}, but the header has {} references",
        c.tid,
        s.per_reference.len()
    )))
}

fn idxstats_row(r: &sortase_bam::Reference, [mapped, unmapped]: [u64; 2]) -> IdxstatsRow {
    IdxstatsRow {
        name: String::from_utf8_lossy(&r.name).into_owned(),
        length: u64::from(r.length),
        mapped,
        unmapped,
    }
}

fn unplaced_row([mapped, unmapped]: [u64; 2]) -> IdxstatsRow {
    IdxstatsRow {
        name: "*".into(),
        length: 0,
        mapped,
        unmapped,
    }
}

/// Idxstats from the index's metadata (samtools idxstats with an index).
fn from_index(input: &Path, index: &Path) -> Result<IdxstatsReport> {
    let header = file_ranges::read_header(input).with_context(|| input.display().to_string())?;
    let (per_ref, n_unplaced) =
        read_index_stats(index).with_context(|| index.display().to_string())?;
    let mut report = IdxstatsReport::default();
    for (i, r) in header.references().iter().enumerate() {
        let (m, u) = per_ref.get(i).copied().flatten().unwrap_or((0, 0));
        report.rows.push(idxstats_row(r, [m, u]));
    }
    report.rows.push(unplaced_row([0, n_unplaced]));
    Ok(report)
}

/// Idxstats from per-range counters in file order (samtools' `slow_idxstats`).
fn from_counts(
    name: &str,
    header: &sortase_bam::Header,
    parts: &[IdxStats],
) -> Result<IdxstatsReport> {
    let mut total = IdxStats::new(header.references().len());
    parts.iter().for_each(|p| total.merge(p));
    if !total.is_position_sorted() {
        return Err(Error::new(
            ErrorKind::Format,
            format!("{name}: file is not position sorted"),
        ));
    }
    let mut report = IdxstatsReport::default();
    for (r, c) in header.references().iter().zip(&total.per_reference) {
        report.rows.push(idxstats_row(r, *c));
    }
    report.rows.push(unplaced_row(total.unplaced));
    Ok(report)
}

/// [`FlagstatJob::run`] of dataset `dir`: samtools flagstat's counters from the `results` group
/// (flag, ref_id, next_ref_id, mapq), chunks counted in parallel.
fn dataset_flagstat(dir: &Path, rt: &Runtime) -> anyhow::Result<FlagstatReport> {
    let manifest = open_manifest(dir)?;
    // The first error in chunk order (not the first in time), as export.
    let parts: Vec<anyhow::Result<FlagStat>> = rt.install(|| {
        manifest
            .chunks
            .par_iter()
            .map(|c| flagstat_chunk(dir, duplicate_group(&manifest), c))
            .collect()
    });
    let parts = parts.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let mut report = FlagstatReport::default();
    parts.iter().for_each(|p| report.counts.merge(p));
    Ok(report)
}

/// `sortase idxstats DATASET` ([`IdxstatsJob::run`] of dataset `dir`): samtools idxstats of a
/// dataset from two columns of its `results` group (`ref_id`, `flag`), chunks counted in parallel
/// and merged in chunk order; identical to `sortase idxstats` (and samtools idxstats) of the BAM
/// `sortase agd export` writes.
///
/// ```
/// use sortase::{AgdImportJob, IdxstatsJob, Runtime};
/// # let dir = tempfile::tempdir().unwrap();
/// # let sam = dir.path().join("in.sam");
/// # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
/// let rt = Runtime::with_threads(2)?;
/// let ds = dir.path().join("ds");
/// AgdImportJob::new(sam.to_str().unwrap(), &ds).run(&rt)?;
/// let report = IdxstatsJob::new(&ds).run(&rt)?;
/// assert_eq!(report.to_text(), "chr1\t100\t1\t0\n*\t0\t0\t1\n");
/// # Ok::<(), sortase::Error>(())
/// ```
///
/// A dataset has no index, so the counts are those of samtools' `slow_idxstats` (what `sortase
/// idxstats` prints for the exported BAM without an index): per reference the records with and
/// without flag 0x4, then the `*` line for the records without a reference; a dataset whose
/// references come in more than one run fails with "file is not position sorted". The `duplicate`
/// group is not read (idxstats does not look at flag 0x400).
fn dataset_idxstats(dir: &Path, rt: &Runtime) -> Result<IdxstatsReport> {
    let manifest = open_manifest(dir).with_context(|| format!("agd idxstats {}", dir.display()))?;
    let parts = idxstats_chunks(dir, &manifest.chunks, manifest.references.len(), rt)
        .with_context(|| format!("agd idxstats {}", dir.display()))?;
    dataset_idxstats_report(dir, &manifest.references, &parts)
}

/// The idxstats report of dataset `dir` from the counters of consecutive chunks in chunk order
/// (samtools' text needs the references' names and lengths only).
pub(crate) fn dataset_idxstats_report(
    dir: &Path,
    references: &[ReferenceEntry],
    parts: &[IdxStats],
) -> Result<IdxstatsReport> {
    let header = sortase_bam::Header::new(
        String::new(),
        references
            .iter()
            .map(|r| sortase_bam::Reference {
                name: r.name.as_bytes().to_vec(),
                length: r.length,
            })
            .collect(),
    );
    from_counts(&dir.display().to_string(), &header, parts)
}

type IndexStats = (Vec<Option<(u64, u64)>>, u64);

/// Per-reference (mapped, unmapped) from the index's metadata pseudo-bins, and the unplaced count.
fn read_index_stats(path: &Path) -> anyhow::Result<IndexStats> {
    if path.extension().is_some_and(|e| e == "csi") {
        let source = sortase_io::Source::open_path(path)?;
        Ok(stats_of(
            &noodles::csi::io::Reader::new(source).read_index()?,
        ))
    } else {
        let source = std::io::BufReader::new(sortase_io::Source::open_path(path)?);
        Ok(stats_of(
            &noodles::bam::bai::io::Reader::new(source).read_index()?,
        ))
    }
}

fn stats_of<I>(index: &noodles::csi::binning_index::Index<I>) -> IndexStats
where
    I: noodles::csi::binning_index::index::reference_sequence::Index,
{
    use noodles::csi::binning_index::{BinningIndex, ReferenceSequence as _};
    let refs = index
        .reference_sequences()
        .iter()
        .map(|r| {
            r.metadata()
                .map(|m| (m.mapped_record_count(), m.unmapped_record_count()))
        })
        .collect();
    (refs, index.unplaced_unmapped_record_count().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_data;

    #[test]
    fn flagstat_tasks_in_any_order_give_run_s_counters() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 3000);
        let rt = Runtime::with_threads(2).unwrap();
        let job = FlagstatJob::new(&bam);
        let expected = job.run(&rt).unwrap();
        assert_eq!(expected.counts.reads[0] + expected.counts.reads[1], 3000);
        let plan = job.plan_ranges(8).unwrap();
        assert!(
            plan.tasks.len() > 1,
            "the test BAM should give several ranges"
        );
        let plan: FlagstatPlan = test_data::through_json(&plan);
        let parts: Vec<FlagstatPart> = test_data::run_last_first(&plan.tasks, |t| {
            test_data::through_json(&t.run(&rt).unwrap())
        });
        assert_eq!(plan.finish(parts.clone()).unwrap(), expected);
        assert!(plan.finish(parts[1..].to_vec()).is_err());
        let fallback = plan.fallback().unwrap();
        let whole = fallback.tasks[0].run(&rt).unwrap();
        assert_eq!(fallback.finish(vec![whole]).unwrap(), expected);
    }

    #[test]
    fn idxstats_rows_come_from_the_index_or_a_scan() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 500);
        let rt = Runtime::with_threads(2).unwrap();
        let scanned = IdxstatsJob::new(&bam).run(&rt).unwrap();
        // Range tasks, in reverse order through JSON, give the scan's rows.
        let plan = IdxstatsJob::new(&bam).plan_ranges(8).unwrap();
        assert!(plan.index.is_none() && plan.tasks.len() > 1, "{plan:?}");
        let plan: IdxstatsPlan = test_data::through_json(&plan);
        let parts: Vec<IdxstatsPart> =
            test_data::run_last_first(&plan.tasks, |t| t.run(&rt).unwrap());
        assert_eq!(plan.finish(parts.clone()).unwrap(), scanned);
        assert!(plan.finish(parts[1..].to_vec()).is_err());
        let fallback = plan.fallback().unwrap();
        let whole = fallback.tasks[0].run(&rt).unwrap();
        assert_eq!(fallback.finish(vec![whole]).unwrap(), scanned);
        crate::index::IndexJob::new(&bam).run(&rt).unwrap();
        let indexed = IdxstatsJob::new(&bam).run(&rt).unwrap();
        assert_eq!(scanned, indexed);
        let plan = IdxstatsJob::new(&bam).plan_ranges(8).unwrap();
        assert!(plan.index.is_some() && plan.tasks.is_empty(), "{plan:?}");
        assert_eq!(plan.finish(Vec::new()).unwrap(), indexed);
        let total: u64 = scanned.rows.iter().map(|r| r.mapped + r.unmapped).sum();
        assert_eq!(total, 500);
        assert_eq!(scanned.rows.last().unwrap().name, "*");
    }

    #[test]
    fn cram_idxstats_and_flagstat_count_runs_of_containers_and_plan_them_as_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 500);
        let rt = Runtime::with_threads(3).unwrap();
        let want = IdxstatsJob::new(&bam).run(&rt).unwrap();
        let fasta = dir.path().join("ref.fa");
        let mut text = String::new();
        for (name, len) in test_data::REFERENCES {
            text.push_str(&format!(">{name}\n{}\n", "ACGT".repeat(len as usize / 4)));
        }
        std::fs::write(&fasta, text).unwrap();
        let cram = dir.path().join("in.cram");
        let output = sortase_exec::options::OutputSpec {
            reference: Some(fasta),
            format_options: vec!["seqs_per_slice=30".into()],
            ..sortase_exec::options::OutputSpec::to_path(&cram)
        };
        crate::sort::SortJob::new(bam.to_str().unwrap(), output)
            .run(&rt)
            .unwrap();
        assert_eq!(IdxstatsJob::new(&cram).run(&rt).unwrap(), want);
        // A BAM index next to a CRAM file is not read (samtools reads none for CRAM).
        std::fs::write(dir.path().join("in.cram.csi"), b"not an index").unwrap();
        assert_eq!(IdxstatsJob::new(&cram).run(&rt).unwrap(), want);
        let plan = IdxstatsJob::new(&cram).plan_ranges(6).unwrap();
        assert!(plan.index.is_none() && plan.tasks.len() > 3, "{plan:?}");
        assert!(plan.fallback().is_none());
        let plan: IdxstatsPlan = test_data::through_json(&plan);
        let parts: Vec<IdxstatsPart> =
            test_data::run_last_first(&plan.tasks, |t| t.run(&rt).unwrap());
        assert_eq!(plan.finish(parts.clone()).unwrap(), want);
        assert!(plan.finish(parts[1..].to_vec()).is_err());
        // Flagstat's tasks are the same runs.
        let want = FlagstatJob::new(&bam).run(&rt).unwrap();
        let plan = FlagstatJob::new(&cram).plan_ranges(6).unwrap();
        assert!(
            plan.tasks.len() > 3 && plan.fallback().is_none(),
            "{plan:?}"
        );
        let plan: FlagstatPlan = test_data::through_json(&plan);
        let parts = plan.tasks.iter().rev().map(|t| t.run(&rt).unwrap());
        assert_eq!(plan.finish(parts.collect()).unwrap(), want);
    }

    #[test]
    fn cancelled_flagstat_stops() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 100);
        let rt = Runtime::with_threads(2).unwrap();
        rt.cancel();
        let e = FlagstatJob::new(&bam).run(&rt).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
    }
}
