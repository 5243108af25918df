//! [`AgdMarkdupJob`]: `agd markdup`, duplicate marking on a dataset that writes the `duplicate`
//! group (the final state of flag 0x400 of every record) instead of rewriting the records.
//!
//! The algorithms are `sortase markdup`'s (crates/markdup): samblaster's on query-grouped datasets,
//! Picard MarkDuplicates' on coordinate-sorted ones, chosen from the header's `@HD SO` unless the
//! mode says so, with the same requirements and errors. Chunks are decoded into records on the
//! runtime's pool and fed in order; samblaster's signatures are computed on the pool per batch of
//! read-name groups (a group straddling chunks is carried), Picard's read ends are collected within
//! the runtime's memory pool and spilled beyond it. The flags then go into one Boolean file per
//! chunk, written on the pool, and the manifest is replaced last ([`sortase_exec::agd::columns`]):
//! the records, and every other group, are untouched. samblaster keeps a 0x400 already set (it only
//! adds marks); Picard clears it on non-duplicates, as the BAM commands do. Options that rewrite
//! records or write other files (removing duplicates, mate tags, side outputs, metrics) are
//! refused.

use crate::job::marking::{is_duplicate, Carry};
use crate::job::{coordinate, detect_mode, MarkdupReport, Mode, PicardOptions, SamblasterOptions};
use crate::picard::{name::NameParser, Collector, Libraries, Options as PicardOpts};
use crate::samblaster::{self, Layout, Options, SigSet};
use anyhow::Context;
use arrow_array::{ArrayRef, BooleanArray, RecordBatch};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::extra::DUPLICATE_GROUP;
use sortase_agd::{Manifest, Provenance};
use sortase_bam::{flags, RecordBatch as Records};
use sortase_exec::agd::columns::PendingGroup;
use sortase_exec::agd::{dataset_header, for_each_chunk_batch, open_manifest};
use sortase_exec::error::{Error, Result};
use sortase_exec::files::TempDir;
use sortase_exec::output::temp_prefix;
use sortase_exec::runtime::Runtime;
use std::path::PathBuf;
use std::sync::Arc;

/// `sortase agd markdup`: duplicate flags of a dataset as its `duplicate` group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMarkdupJob {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// The algorithm.
    pub mode: Mode,
    /// Spilled read ends go to `PREFIX.sortase-PID-N.tmp/`; default: inside the dataset.
    pub temp_prefix: Option<PathBuf>,
    /// samblaster's options (only those that decide the marks).
    pub samblaster: SamblasterOptions,
    /// Picard's options (only those that decide the marks).
    pub picard: PicardOptions,
    /// zstd level of the group's files (default [`sortase_exec::agd::DEFAULT_ZSTD_LEVEL`]).
    #[serde(default = "default_level")]
    pub zstd_level: i32,
    /// The command line recorded as the group's provenance.
    #[serde(default)]
    pub command_line: String,
}

fn default_level() -> i32 {
    sortase_exec::agd::DEFAULT_ZSTD_LEVEL
}

impl AgdMarkdupJob {
    /// Marks duplicates of `dataset`, the algorithm from its `@HD` line.
    pub fn new(dataset: impl Into<PathBuf>) -> Self {
        Self {
            dataset: dataset.into(),
            mode: Mode::Auto,
            temp_prefix: None,
            samblaster: SamblasterOptions::default(),
            picard: PicardOptions::default(),
            zstd_level: sortase_exec::agd::DEFAULT_ZSTD_LEVEL,
            command_line: String::new(),
        }
    }

    /// Runs the job on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<MarkdupReport> {
        run(self, rt)
            .with_context(|| format!("agd markdup {}", self.dataset.display()))
            .map_err(Error::from)
    }
}

/// Refuses options whose effect is not a duplicate flag.
pub(crate) fn check_options(job: &AgdMarkdupJob) -> Result<()> {
    let q = &job.samblaster;
    let refused = [
        (q.add_mate_tags, "--addMateTags (rewrites records)"),
        (q.discordant_file.is_some(), "--discordantFile"),
        (q.splitter_file.is_some(), "--splitterFile"),
        (q.unmapped_file.is_some(), "--unmappedFile"),
        (job.picard.metrics.is_some(), "--metrics"),
    ];
    for (set, what) in refused {
        if set {
            sortase_exec::error::bail_argument!(
                "{what}: agd markdup writes the duplicate group only; export the dataset and run \
                 sortase markdup for it"
            );
        }
    }
    Ok(())
}

fn run(job: &AgdMarkdupJob, rt: &Runtime) -> anyhow::Result<MarkdupReport> {
    check_options(job)?;
    sortase_exec::agd::check_zstd_level(job.zstd_level, "--level")?;
    let manifest = open_manifest(&job.dataset)?;
    let header = dataset_header(&manifest);
    let mode = match job.mode {
        Mode::Auto => detect_mode(&header),
        m => m,
    };
    let name = job.dataset.display().to_string();
    let mut report = MarkdupReport {
        mode,
        ..MarkdupReport::default()
    };
    let d = Dataset {
        job,
        rt,
        manifest: &manifest,
        header: &header,
        name: &name,
    };
    let duplicate = match mode {
        Mode::Coordinate => d.picard(&mut report)?,
        _ => d.query(&mut report)?,
    };
    rt.check_cancelled()?;
    report.records = manifest.records;
    report.duplicate_records = duplicate.iter().filter(|&&d| d).count() as u64;
    write_group(job, rt, manifest, &duplicate)?;
    if mode != Mode::Coordinate {
        report.summary.push(format!(
            "sortase agd markdup: marked {} duplicate groups of {} read names",
            report.duplicate_groups, report.read_names
        ));
    }
    Ok(report)
}

/// Writes `duplicate` (one value per record) as the dataset's `duplicate` group.
fn write_group(
    job: &AgdMarkdupJob,
    rt: &Runtime,
    manifest: Manifest,
    duplicate: &[bool],
) -> anyhow::Result<()> {
    let mut pending = PendingGroup::create(&job.dataset, DUPLICATE_GROUP)?;
    rt.install(|| {
        manifest.chunks.par_iter().try_for_each(|c| {
            let values = &duplicate[c.first as usize..=c.last as usize];
            let column: ArrayRef = Arc::new(BooleanArray::from(values.to_vec()));
            let batch = RecordBatch::try_from_iter([(DUPLICATE_GROUP, column)])?;
            pending.write(c, &batch, job.zstd_level)
        })
    })?;
    rt.check_cancelled()?;
    pending.set_columns(vec![DUPLICATE_GROUP.to_string()]);
    let provenance = Provenance {
        command_line: job.command_line.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    pending.commit(&job.dataset, manifest, provenance)?;
    Ok(())
}

/// The dataset a job marks, with what either mode reads of it.
struct Dataset<'a> {
    job: &'a AgdMarkdupJob,
    rt: &'a Runtime,
    manifest: &'a Manifest,
    header: &'a sortase_bam::Header,
    /// Its name in messages.
    name: &'a str,
}

impl Dataset<'_> {
    /// samblaster's marks: the input's 0x400 or'ed with the duplicates found.
    fn query(&self, report: &mut MarkdupReport) -> anyhow::Result<Vec<bool>> {
        let q = &self.job.samblaster;
        let layout = q.layout(self.header, self.name)?;
        let opts = Options {
            ignore_unmated: q.ignore_unmated,
            accept_dups: q.accept_dups,
        };
        let mut marks = Marks {
            sigs: SigSet::default(),
            duplicate: Vec::with_capacity(self.manifest.records as usize),
            layout,
            opts,
            name: self.name,
            groups: 0,
            dups: 0,
        };
        let pool = self.rt.pool();
        let mut carry = Carry::default();
        for_each_chunk_batch(
            &self.job.dataset,
            self.manifest,
            self.rt,
            "agd markdup records",
            |batch| {
                let Some((start, group)) = carry.continue_from(&batch, 0) else {
                    return Ok(());
                };
                if let Some(group) = group {
                    marks.process(&group, std::slice::from_ref(&(0..group.len())), pool)?;
                }
                let (bounds, g) = name_groups(&batch, start);
                for i in g..batch.len() {
                    carry.push(batch.raw(i));
                }
                marks.process(&batch, &bounds, pool)
            },
        )?;
        if !carry.is_empty() {
            let group = carry.take();
            marks.process(&group, std::slice::from_ref(&(0..group.len())), pool)?;
        }
        report.read_names = marks.groups;
        report.duplicate_groups = marks.dups;
        Ok(marks.duplicate)
    }

    /// Picard's marks: exactly the duplicates found.
    fn picard(&self, report: &mut MarkdupReport) -> anyhow::Result<Vec<bool>> {
        let c = &self.job.picard;
        let names = NameParser::new(c.read_name_regex.as_deref()).map_err(|e| {
            Error::argument(format!("--read-name-regex {:?}: {e}", c.read_name_regex))
        })?;
        let opts = PicardOpts {
            names,
            optical_distance: c.optical_distance,
            max_optical_set: c.max_optical_set,
        };
        let temp = TempDir::create(&temp_prefix(
            self.job.temp_prefix.as_deref(),
            Some(&self.job.dataset.join(".markdup")),
            self.rt.temp_dir(),
        ))?;
        let mut collector = Collector::new(Libraries::from_header(self.header.text()), opts);
        let mut ends = self.rt.memory().reservation("agd markdup: read ends");
        for_each_chunk_batch(
            &self.job.dataset,
            self.manifest,
            self.rt,
            "agd markdup records",
            |b| {
                self.rt.install(|| -> anyhow::Result<()> {
                    collector
                        .push(&b)
                        .map_err(|e| coordinate::order_error(self.header, self.name, &e))?;
                    coordinate::hold_or_spill(&mut collector, &mut ends, temp.path())
                })
            },
        )?;
        self.rt.check_cancelled()?;
        (report.runs_spilled, report.spilled_bytes) = collector.spill_stats();
        let outcome = self
            .rt
            .install(|| collector.finish(self.rt.threads()))
            .with_context(|| format!("{}: reading read ends back", temp.path().display()))?;
        drop(ends);
        report.pairs = outcome.pairs;
        let mut duplicate = vec![false; self.manifest.records as usize];
        for &i in &outcome.found.duplicates {
            duplicate[i as usize] = true;
        }
        Ok(duplicate)
    }
}

/// The runs of one read name in `batch` from `start` on, but the last (which may continue in the
/// next batch); with the start of that last run.
fn name_groups(batch: &Records, start: usize) -> (Vec<std::ops::Range<usize>>, usize) {
    let mut bounds = Vec::with_capacity(batch.len() / 2);
    let mut g = start;
    let mut prev = batch.record(start).read_name();
    for i in start + 1..batch.len() {
        let n = batch.record(i).read_name();
        if n != prev {
            bounds.push(g..i);
            g = i;
            prev = n;
        }
    }
    (bounds, g)
}

/// samblaster's state over a dataset: signatures seen and the marks so far, in record order.
struct Marks<'a> {
    sigs: SigSet,
    duplicate: Vec<bool>,
    layout: Layout,
    opts: Options,
    name: &'a str,
    groups: u64,
    dups: u64,
}

impl Marks<'_> {
    /// Marks the groups `bounds` of `batch` (the next records of the dataset), in order.
    fn process(
        &mut self,
        batch: &Records,
        bounds: &[std::ops::Range<usize>],
        pool: &rayon::ThreadPool,
    ) -> anyhow::Result<()> {
        let verdicts = samblaster::analyze_all(batch, bounds, &self.layout, &self.opts, pool);
        for (range, group) in bounds.iter().zip(&verdicts) {
            let dup = is_duplicate(&mut self.sigs, group, self.name, batch, range.start)?;
            self.groups += 1;
            self.dups += u64::from(dup);
            for i in range.clone() {
                let set = batch.record(i).flag() & flags::DUPLICATE != 0;
                self.duplicate.push(dup || set);
            }
        }
        Ok(())
    }
}
