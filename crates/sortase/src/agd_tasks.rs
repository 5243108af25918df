//! AGD jobs as serialisable tasks for a distributed driver (`python/sortase/distributed.py`): a
//! dataset's chunks are the units of work, so flagstat ([`AgdFlagstatPlan`]), idxstats
//! ([`AgdIdxstatsPlan`]) and view counting ([`AgdCountPlan`], with `-f/-F/-q` and regions) cut the
//! chunk list into runs of consecutive chunks, one task each; a task reads only its chunks'
//! `results` files, and the driver sums the parts into the report the single-machine job gives.
//! (A sort of a dataset is [`crate::tasks::SortPlan`] with chunks as its map tasks' inputs:
//! [`crate::sort::SortJob::plan_dataset`].)
//!
//! ```
//! use sortase::agd_tasks::AgdFlagstatPlan;
//! use sortase::{AgdImportJob, FlagstatJob, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
//! let rt = Runtime::with_threads(1)?;
//! let ds = dir.path().join("ds");
//! AgdImportJob { chunk_size: 1, ..AgdImportJob::new(sam.to_str().unwrap(), &ds) }.run(&rt)?;
//! let plan: AgdFlagstatPlan = FlagstatJob::new(&ds).plan_chunks(8)?;
//! assert_eq!(plan.tasks.len(), 2); // one per chunk
//! let parts = plan.tasks.iter().map(|t| t.run(&rt)).collect::<Result<Vec<_>, _>>()?;
//! assert_eq!(plan.finish(parts)?, FlagstatJob::new(&ds).run(&rt)?);
//! # Ok::<(), sortase::Error>(())
//! ```

use crate::stats::dataset_idxstats_report;
use crate::stats::{
    FlagstatJob, FlagstatPart, FlagstatReport, IdxstatsJob, IdxstatsPart, IdxstatsReport,
};
use crate::view::dataset_filter;
use crate::view::{ViewJob, ViewReport};
use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::{ChunkEntry, ExtraGroup, ReferenceEntry};
use sortase_exec::agd::columns::duplicate_group;
use sortase_exec::agd::counts::{flagstat_chunk, idxstats_chunks};
use sortase_exec::agd::query::{count_pieces, pieces, Filter, Piece};
use sortase_exec::agd::{open_manifest, runs};
use sortase_exec::bam_ranges;
use sortase_exec::error::{Error, Result};
use sortase_exec::runtime::Runtime;
use sortase_ops::flagstat::FlagStat;
use sortase_ops::idxstats::IdxStats;
use std::path::{Path, PathBuf};

/// Flagstat of a dataset as tasks: one per run of consecutive chunks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdFlagstatPlan {
    /// The tasks, in chunk order.
    pub tasks: Vec<AgdFlagstatTask>,
}

/// Counting the flags of some chunks of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdFlagstatTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The task's number.
    pub part: usize,
    /// Its chunks (as the manifest lists them).
    pub chunks: Vec<ChunkEntry>,
    /// The dataset's `duplicate` group (agd markdup), whose files the task also reads.
    #[serde(default)]
    pub duplicate: Option<ExtraGroup>,
}

impl FlagstatJob {
    /// Tasks of a dataset (the job's input is a dataset directory) of about equal numbers of
    /// chunks: `n`, or one per chunk when there are fewer chunks.
    pub fn plan_chunks(&self, n: usize) -> Result<AgdFlagstatPlan> {
        let manifest = open_manifest(&self.input)
            .with_context(|| format!("agd flagstat {}", self.input.display()))?;
        let duplicate = duplicate_group(&manifest).cloned();
        let tasks = runs(&manifest.chunks, n)
            .into_iter()
            .enumerate()
            .map(|(part, chunks)| AgdFlagstatTask {
                input: self.input.clone(),
                part,
                chunks,
                duplicate: duplicate.clone(),
            })
            .collect();
        Ok(AgdFlagstatPlan { tasks })
    }
}

impl AgdFlagstatTask {
    /// Counts the task's chunks (in parallel on `rt`).
    pub fn run(&self, rt: &Runtime) -> Result<FlagstatPart> {
        let parts = rt
            .install(|| {
                self.chunks
                    .par_iter()
                    .map(|c| flagstat_chunk(&self.input, self.duplicate.as_ref(), c))
                    .collect::<anyhow::Result<Vec<_>>>()
            })
            .with_context(|| format!("agd flagstat {}", self.input.display()))?;
        let mut counts = FlagStat::default();
        parts.iter().for_each(|p| counts.merge(p));
        Ok(FlagstatPart {
            part: self.part,
            counts,
        })
    }
}

impl AgdFlagstatPlan {
    /// The report from every task's part (any order, repeats allowed).
    pub fn finish(&self, parts: Vec<FlagstatPart>) -> Result<FlagstatReport> {
        let parts = bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let mut report = FlagstatReport::default();
        parts.iter().for_each(|p| report.counts.merge(&p.counts));
        Ok(report)
    }
}

/// Idxstats of a dataset as tasks: one per run of consecutive chunks, each reading the `ref_id`
/// and `flag` columns of its chunks' `results` files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdIdxstatsPlan {
    /// The dataset directory.
    pub input: PathBuf,
    /// Its references (the report's rows), from the manifest.
    pub references: Vec<ReferenceEntry>,
    /// The tasks, in chunk order.
    pub tasks: Vec<AgdIdxstatsTask>,
}

/// Counting the records of some chunks of a dataset per reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdIdxstatsTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The task's number.
    pub part: usize,
    /// References of the dataset.
    pub n_ref: usize,
    /// Its chunks (as the manifest lists them).
    pub chunks: Vec<ChunkEntry>,
}

impl IdxstatsJob {
    /// Tasks of a dataset (the job's input is a dataset directory) of about equal numbers of
    /// chunks: `n`, or one per chunk when there are fewer chunks.
    ///
    /// ```
    /// use sortase::agd_tasks::AgdIdxstatsPlan;
    /// use sortase::{AgdImportJob, IdxstatsJob, Runtime};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let sam = dir.path().join("in.sam");
    /// # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
    /// let rt = Runtime::with_threads(1)?;
    /// let ds = dir.path().join("ds");
    /// AgdImportJob { chunk_size: 1, ..AgdImportJob::new(sam.to_str().unwrap(), &ds) }.run(&rt)?;
    /// let plan: AgdIdxstatsPlan = IdxstatsJob::new(&ds).plan_chunks(8)?;
    /// assert_eq!(plan.tasks.len(), 2);
    /// let parts = plan.tasks.iter().rev().map(|t| t.run(&rt)).collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(plan.finish(parts)?, IdxstatsJob::new(&ds).run(&rt)?);
    /// # Ok::<(), sortase::Error>(())
    /// ```
    pub fn plan_chunks(&self, n: usize) -> Result<AgdIdxstatsPlan> {
        let manifest = open_manifest(&self.input)
            .with_context(|| format!("agd idxstats {}", self.input.display()))?;
        let n_ref = manifest.references.len();
        let tasks = runs(&manifest.chunks, n)
            .into_iter()
            .enumerate()
            .map(|(part, chunks)| AgdIdxstatsTask {
                input: self.input.clone(),
                part,
                n_ref,
                chunks,
            })
            .collect();
        Ok(AgdIdxstatsPlan {
            input: self.input.clone(),
            references: manifest.references,
            tasks,
        })
    }
}

impl AgdIdxstatsTask {
    /// Counts the task's chunks (in parallel on `rt`), merged in chunk order.
    pub fn run(&self, rt: &Runtime) -> Result<IdxstatsPart> {
        let parts = idxstats_chunks(&self.input, &self.chunks, self.n_ref, rt)
            .with_context(|| format!("agd idxstats {}", self.input.display()))?;
        let mut counts = IdxStats::new(self.n_ref);
        parts.iter().for_each(|p| counts.merge(p));
        Ok(IdxstatsPart {
            part: self.part,
            counts,
        })
    }
}

impl AgdIdxstatsPlan {
    /// The report from every task's part (any order): the same rows, or the same
    /// "not position sorted" error, as [`IdxstatsJob::run`].
    pub fn finish(&self, parts: Vec<IdxstatsPart>) -> Result<IdxstatsReport> {
        let parts = bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let counts: Vec<IdxStats> = parts.into_iter().map(|p| p.counts).collect();
        dataset_idxstats_report(&self.input, &self.references, &counts)
    }
}

/// `sortase view -c DATASET` (filters, regions) as tasks: one per run of consecutive pieces (a chunk and the
/// regions its records must overlap).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdCountPlan {
    /// The tasks.
    pub tasks: Vec<AgdCountTask>,
    /// Warnings of regions that did not parse (samtools' text).
    pub warnings: Vec<String>,
}

/// Counting the matching records of some chunks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdCountTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The task's number.
    pub part: usize,
    /// `-f/-F/-q`.
    filter: Filter,
    /// The chunks and their regions.
    pieces: Vec<Piece>,
    /// The dataset's `duplicate` group (agd markdup), whose files the task also reads.
    #[serde(default)]
    duplicate: Option<ExtraGroup>,
}

/// The count of one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdCountPart {
    /// The task's number.
    pub part: usize,
    /// Matching records.
    pub count: u64,
}

impl AgdCountTask {
    /// The chunks the task reads (for a driver that fetches their `results` files).
    pub fn chunks(&self) -> impl Iterator<Item = &ChunkEntry> {
        self.pieces.iter().map(|p| &p.chunk)
    }

    /// The dataset's `duplicate` group, whose files the task also reads.
    pub fn duplicate(&self) -> Option<&ExtraGroup> {
        self.duplicate.as_ref()
    }

    /// Counts the task's pieces (in parallel on `rt`).
    pub fn run(&self, rt: &Runtime) -> Result<AgdCountPart> {
        let count = count_pieces(
            &self.input,
            self.duplicate.as_ref(),
            &self.pieces,
            self.filter,
            rt,
        )
        .with_context(|| format!("agd view {}", self.input.display()))?;
        Ok(AgdCountPart {
            part: self.part,
            count,
        })
    }
}

impl ViewJob {
    /// Count tasks of a dataset (the input is a dataset directory; `count` must be set): about `n`
    /// of equal numbers of pieces. Planning a region query reads only the manifest when it records
    /// the chunks' positions.
    pub fn plan_count(&self, rt: &Runtime, n: usize) -> Result<AgdCountPlan> {
        if !self.count {
            return Err(Error::argument(
                "view tasks of a dataset count records only: set count (-c)",
            ));
        }
        let context = || format!("agd view {}", self.input);
        let filter = dataset_filter(self).with_context(context)?;
        let (manifest, pieces, warnings) =
            pieces(Path::new(&self.input), &self.regions, self.multi_region, rt)
                .with_context(context)?;
        let duplicate = duplicate_group(&manifest).cloned();
        let tasks = runs(&pieces, n)
            .into_iter()
            .enumerate()
            .map(|(part, pieces)| AgdCountTask {
                input: PathBuf::from(&self.input),
                part,
                filter,
                pieces,
                duplicate: duplicate.clone(),
            })
            .collect();
        Ok(AgdCountPlan { tasks, warnings })
    }
}

impl AgdCountPlan {
    /// The report (`count` set) from every task's part (any order, repeats allowed).
    pub fn finish(&self, parts: Vec<AgdCountPart>) -> Result<ViewReport> {
        let parts = bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let n = parts.iter().map(|p| p.count).sum();
        Ok(ViewReport {
            records: n,
            count: Some(n),
            outputs: Vec::new(),
            warnings: self.warnings.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_consecutive_and_balanced() {
        let items: Vec<u32> = (0..10).collect();
        let r = runs(&items, 3);
        assert_eq!(r, vec![vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
        assert_eq!(runs(&items, 50).len(), 10);
        assert!(runs::<u32>(&[], 4).is_empty());
    }
}
