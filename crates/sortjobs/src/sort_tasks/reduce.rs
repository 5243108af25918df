//! Stage 3 ([`ReduceTask`]): a stretch of key ranges merged from every run and encoded as
//! `SortJob::run` encodes them, into one part file and its sidecar ([`super::PartIndex`]).

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::Header;
use sortase_bgzf::CompressionLevel;
use sortase_exec::error::{Error, Result};
use sortase_exec::options::Order;
use sortase_exec::output::OutFormat;
use sortase_exec::parts::PartFiles;
use sortase_exec::range_output::RangeEncoder;
use sortase_exec::runtime::Runtime;
use sortase_exec::wire::Sample;
use sortase_sort::merge::{merge_until, Source};
use sortase_sort::ranges::SplitPoint;
use sortase_sort::{open_run_from, RangeSource, SortError, SortOrder};
use std::path::PathBuf;

/// Where a reduce task starts reading one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStart {
    /// The run file.
    pub path: PathBuf,
    /// File offset of the block holding the stretch's first record of this run.
    pub offset: u64,
    /// File offset where the stretch's reader of this run has stopped, at the latest (`None`:
    /// the end of the run): for drivers that fetch only these bytes of a remote run.
    #[serde(default)]
    pub end: Option<u64>,
}

/// Stage 3: merge and encode a stretch of consecutive key ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReduceTask {
    /// The order.
    pub order: Order,
    /// The output's libdeflate level.
    pub level: u8,
    /// The index geometry (`min_shift`, depth) with `--write-index`.
    pub index: Option<(u32, u32)>,
    /// This task's number.
    pub part: usize,
    /// Reduce tasks in the plan.
    pub parts: usize,
    /// The number of the stretch's first key range.
    pub first_range: usize,
    /// Key ranges of the whole output.
    pub total_ranges: usize,
    /// Bounds of the stretch's key ranges: range `first_range + k` is `[bounds[k], bounds[k + 1])`
    /// (`None`: the start or the end of the output).
    pub bounds: Vec<Option<Sample>>,
    /// The runs that hold records of the stretch, in input order.
    pub runs: Vec<RunStart>,
    /// Map tasks (runs) in the plan.
    pub total_runs: usize,
    /// Records in all runs (the finish checks that the reduce tasks wrote as many).
    pub total_records: u64,
    /// Its part file and sidecar.
    #[serde(flatten)]
    pub files: PartFiles,
}

/// What a [`ReduceTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReduceOutput {
    /// The task's number.
    pub part: usize,
    /// Reduce tasks in the plan.
    pub parts: usize,
    /// The number of its first key range.
    pub first_range: usize,
    /// Key ranges it encoded.
    pub ranges: usize,
    /// Key ranges of the whole output.
    pub total_ranges: usize,
    /// Map tasks (runs) in the plan.
    pub total_runs: usize,
    /// Records in all runs.
    pub total_records: u64,
    /// Records written.
    pub records: u64,
    /// Their bytes.
    pub record_bytes: u64,
    /// Its part file and sidecar.
    #[serde(flatten)]
    pub files: PartFiles,
}

/// The records of one key range: the merge of the runs' heads up to `limit`, counted.
struct KeyRange<'s> {
    order: SortOrder,
    sources: &'s mut [Source<'static>],
    limit: Option<&'s SplitPoint>,
    records: u64,
    bytes: u64,
}

impl RangeSource for KeyRange<'_> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        let (records, bytes) = (&mut self.records, &mut self.bytes);
        merge_until(self.order, self.sources, self.limit, |_, _, r| {
            *records += 1;
            *bytes += r.len() as u64;
            f(r)
        })
    }
}

impl ReduceTask {
    /// Merges and encodes the stretch.
    pub fn run(&self, rt: &Runtime) -> Result<ReduceOutput> {
        rt.install(|| self.run_inner(rt))
            .with_context(|| format!("sort reduce task {}", self.part))
            .map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<ReduceOutput> {
        let order = self.order.resolve()?;
        if self.bounds.len() < 2 {
            return Err(Error::argument("a reduce task needs at least one key range").into());
        }
        let bounds: Vec<Option<SplitPoint>> = self
            .bounds
            .iter()
            .map(|b| b.as_ref().map(|s| s.to_split(&order)))
            .collect();
        let mut sources = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            let (offset, end) = (run.offset, run.end);
            if let Some(r) = open_run_from(&order, &run.path, offset, end, bounds[0].as_ref())? {
                sources.push(Source::Run(r));
            }
        }
        let level = CompressionLevel::from_libdeflate(self.level);
        let encoder = RangeEncoder::new(OutFormat::Bam(level), Header::default(), self.index);
        let (mut records, mut record_bytes) = (0, 0);
        self.files.write(rt, bounds.len() - 1, |k| {
            let mut range = KeyRange {
                order,
                sources: &mut sources,
                limit: bounds[k + 1].as_ref(),
                records: 0,
                bytes: 0,
            };
            let encoded = encoder.encode(&mut range)?;
            records += range.records;
            record_bytes += range.bytes;
            Ok(encoded)
        })?;
        Ok(ReduceOutput {
            part: self.part,
            parts: self.parts,
            first_range: self.first_range,
            ranges: bounds.len() - 1,
            total_ranges: self.total_ranges,
            total_runs: self.total_runs,
            total_records: self.total_records,
            records,
            record_bytes,
            files: self.files.clone(),
        })
    }
}
