//! The driver's side of a [`SortPlan`] between stages: the tasks of each stage from the outputs of
//! the one before, and [`SortPlan::finish`], which writes the output.

use super::{
    ByteRange, CountOutput, CountTask, MapOutput, MapTask, ReduceOutput, ReduceTask, RunStart,
    SortPlan, SortTask,
};
use crate::sort::{SortJob, SortReport, DEFAULT_LEVEL};
use anyhow::{bail, Context};
use sortase_exec::assemble::{self, Layout};
use sortase_exec::error::bail_argument;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::options::PhaseClock;
use sortase_exec::output::OutFormat;
use sortase_exec::output::{resolve_output, ResolvedOutput};
use sortase_exec::parts::{complete, remove_work_dir, write_output, PartFiles};
use sortase_exec::runtime::Runtime;
use sortase_exec::wire::Sample;
use sortase_sort::ranges::{choose_splits, RangePlan, SplitPoint};
use sortase_sort::{end_offset, start_block};
use std::path::Path;

impl SortPlan {
    /// The planned byte ranges of the input.
    pub fn ranges(&self) -> &[ByteRange] {
        &self.ranges
    }

    /// The work directory (every task's files go there).
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The job.
    pub fn job(&self) -> &SortJob {
        &self.job
    }

    /// Stage 1: one count task per byte range (none for a dataset: its manifest counts).
    pub fn count_tasks(&self) -> Vec<SortTask> {
        if self.dataset.is_some() {
            return Vec::new();
        }
        (0..self.ranges.len())
            .map(|i| {
                SortTask::Count(CountTask {
                    input: self.input.clone(),
                    n_ref: self.n_ref,
                    range: i,
                    start: self.ranges[i].start,
                    later_starts: self.ranges[i + 1..].iter().map(|r| r.start).collect(),
                })
            })
            .collect()
    }

    /// Stage 2 from the outputs of stage 1 (in any order): one map task per proved range, walking
    /// from the first range to the end of the file (a range whose planned start proved not to be
    /// a record start was absorbed by the range before it, and is skipped with its count).
    ///
    /// A dataset's sort takes no counts: one [`super::AgdMapTask`] per run of its chunks.
    pub fn map_tasks(&self, counts: &[CountOutput]) -> Result<Vec<SortTask>> {
        if let Some(dataset) = &self.dataset {
            if !counts.is_empty() {
                return Err(Error::argument(
                    "a dataset's sort has no count tasks; give its map stage no outputs",
                ));
            }
            return Ok(self
                .dataset_map_tasks(dataset)
                .into_iter()
                .map(SortTask::AgdMap)
                .collect());
        }
        let mut by_range: Vec<Option<&CountOutput>> = vec![None; self.ranges.len()];
        for c in counts {
            if self.ranges.get(c.range).map(|r| r.start) != Some(c.start) {
                return Err(Error::argument(format!(
                    "count output for range {} does not belong to this plan",
                    c.range
                )));
            }
            by_range[c.range].get_or_insert(c);
        }
        let mut proved = Vec::new();
        let mut i = 0;
        loop {
            let c = by_range[i]
                .ok_or_else(|| Error::argument(format!("no output of count task {i}")))?;
            if let Some(e) = &c.error {
                return Err(e.to_error());
            }
            proved.push(c);
            let Some(end) = c.end else { break };
            match self.ranges[i + 1..].iter().position(|r| r.start == end) {
                Some(k) => i += 1 + k,
                None => {
                    return Err(Error::argument(format!(
                        "count output for range {i} ends at {end:#x}, no planned range start"
                    )))
                }
            }
        }
        let order = self.job.order.clone();
        let mut first_seq = 0;
        Ok(proved
            .iter()
            .enumerate()
            .map(|(part, c)| {
                let task = MapTask {
                    input: self.input.clone(),
                    n_ref: self.n_ref,
                    order: order.clone(),
                    part,
                    parts: proved.len(),
                    start: c.start,
                    end: c.end,
                    first_seq,
                    records: c.records,
                    record_bytes: c.record_bytes,
                    run_path: self.work_dir.join(format!("map-{part:06}.run")),
                };
                first_seq += c.records;
                SortTask::Map(task)
            })
            .collect())
    }

    /// Stage 3 from the outputs of stage 2 (in any order): chooses the split points from every
    /// range's samples as the sorter does (on `rt`'s threads), and cuts the key ranges into
    /// stretches of consecutive ranges, one per reduce task.
    pub fn reduce_tasks(&self, maps: &[MapOutput], rt: &Runtime) -> Result<Vec<SortTask>> {
        let maps = complete(maps, "map", |m| (m.part, m.parts))?;
        let order = self.job.order.resolve()?;
        let samples: Vec<SplitPoint> = maps
            .iter()
            .flat_map(|m| &m.samples)
            .map(|s| s.to_split(&order))
            .collect();
        let total = maps.iter().map(|m| m.record_bytes).sum();
        let splits = rt.install(|| choose_splits(&order, &RangePlan::default(), samples, total));
        let runs: Vec<_> = maps.iter().map(|m| m.run.to_run_file()).collect();
        let ranges = splits.len() + 1;
        let n = self
            .options
            .reduce_tasks
            .unwrap_or(maps.len())
            .clamp(1, ranges);
        let bound = |k: usize| k.checked_sub(1).and_then(|j| splits.get(j));
        Ok((0..n)
            .map(|part| {
                let (a, b) = (part * ranges / n, (part + 1) * ranges / n);
                let (lo, hi) = (bound(a), bound(b));
                let runs = runs
                    .iter()
                    .filter_map(|run| {
                        start_block(&order, run, lo, hi).map(|block| RunStart {
                            path: run.path.clone(),
                            offset: run.blocks[block].offset,
                            end: end_offset(&order, run, hi),
                        })
                    })
                    .collect();
                SortTask::Reduce(ReduceTask {
                    order: self.job.order.clone(),
                    level: self.level,
                    index: self.index,
                    part,
                    parts: n,
                    first_range: a,
                    total_ranges: ranges,
                    bounds: (a..=b).map(|k| bound(k).map(Sample::of)).collect(),
                    runs,
                    total_runs: maps.len(),
                    total_records: maps.iter().map(|m| m.run.records).sum(),
                    files: PartFiles::named(&self.work_dir, "reduce", part),
                })
            })
            .collect())
    }

    /// Writes the output from the outputs of stage 3 (in any order) exactly as `SortJob::run`
    /// does: header blocks, every key range's blocks, the EOF block, and with `--write-index` the
    /// index replayed from the ranges' summaries; both files under temporary names, renamed when
    /// complete. Then removes the work directory (a failure to is a warning of the report). On
    /// error the work directory stays: retry `finish`, or give up with [`SortPlan::abort`].
    pub fn finish(&self, reduces: &[ReduceOutput], rt: &Runtime) -> Result<SortReport> {
        self.finish_inner(reduces, rt).map_err(Error::from)
    }

    /// The outputs of stage 3 by part, checked: they continue each other's key ranges and hold
    /// every record of the runs.
    fn checked_parts<'a>(
        &self,
        reduces: &'a [ReduceOutput],
    ) -> anyhow::Result<Vec<&'a ReduceOutput>> {
        let parts = complete(reduces, "reduce", |r| (r.part, r.parts))?;
        let total_ranges = parts[0].total_ranges;
        let mut next = 0;
        for p in &parts {
            if p.first_range != next || p.total_ranges != total_ranges {
                bail_argument!(
                    "reduce output {} does not continue key range {next}",
                    p.part
                );
            }
            next += p.ranges;
        }
        if next != total_ranges {
            bail_argument!("reduce outputs cover {next} of {total_ranges} key ranges");
        }
        // Every record of the runs is in a part: a run read short (a remote copy fetched with
        // too few bytes, a run truncated) fails here instead of losing records.
        let written: u64 = parts.iter().map(|p| p.records).sum();
        if written != parts[0].total_records {
            bail!(Error::new(
                ErrorKind::Internal,
                format!(
                    "reduce tasks wrote {written} records of the runs' {}",
                    parts[0].total_records
                )
            ));
        }
        Ok(parts)
    }

    /// The sort's report from its checked parts.
    fn report(&self, parts: &[&ReduceOutput], rt: &Runtime, warnings: Vec<String>) -> SortReport {
        SortReport {
            records: parts.iter().map(|p| p.records).sum(),
            record_bytes: parts.iter().map(|p| p.record_bytes).sum(),
            runs_spilled: parts[0].total_runs as u64,
            final_fan_in: parts[0].total_runs,
            ranges: parts[0].total_ranges,
            threads: rt.threads(),
            warnings,
            ..SortReport::default()
        }
    }

    /// The parallel finish's first step ([`sortase_exec::assemble`]): checks the outputs of stage
    /// 3 (in any order), lays the output out from the parts' sidecars and writes the index (with
    /// `--write-index`) under a temporary name next to it; with `preallocate` creates the output's
    /// temporary file for the [`sortase_exec::assemble::PlaceTask`]s. Reads no part file.
    pub fn layout(
        &self,
        reduces: &[ReduceOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> Result<Layout> {
        self.layout_inner(reduces, preallocate, rt)
            .map_err(Error::from)
    }

    /// The job's output, resolved as the plan resolved it (its warnings were the plan's).
    fn output(&self) -> anyhow::Result<ResolvedOutput> {
        let order = self.job.order.resolve()?;
        resolve_output(
            &self.job.output,
            DEFAULT_LEVEL,
            order.is_coordinate(),
            &mut Vec::new(),
        )
    }

    fn layout_inner(
        &self,
        reduces: &[ReduceOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> anyhow::Result<Layout> {
        let parts = self.checked_parts(reduces)?;
        let out = self.output()?;
        let (OutFormat::Bam(level), Some(data)) = (out.format, out.data.as_deref()) else {
            bail_argument!("sort tasks write a BAM file");
        };
        let clock = PhaseClock::new("finish");
        let files: Vec<_> = parts.iter().map(|p| (&p.files, p.ranges)).collect();
        let mut report = self.report(&parts, rt, self.warnings.clone());
        report.outputs = out.files();
        let mut lay = assemble::layout(
            &self.header.to_header(),
            level,
            data,
            out.index_file(),
            &files,
            &self.work_dir,
            serde_json::Value::Null,
            preallocate,
            rt,
        )?;
        report.phases = clock.finish();
        lay.report = serde_json::to_value(&report).context("sort report JSON")?;
        Ok(lay)
    }

    fn finish_inner(&self, reduces: &[ReduceOutput], rt: &Runtime) -> anyhow::Result<SortReport> {
        let parts = self.checked_parts(reduces)?;
        let total_ranges = parts[0].total_ranges;
        let out = self.output()?;
        let clock = PhaseClock::new("finish");
        let header = self.header.to_header();
        let files: Vec<_> = parts.iter().map(|p| (&p.files, p.ranges)).collect();
        write_output(&out, &header, &files, rt)?;
        let mut warnings = self.warnings.clone();
        if let Err(e) = self.abort() {
            warnings.push(format!("sort tasks: {e}"));
        }
        let mut report = self.report(&parts, rt, warnings);
        debug_assert_eq!(report.ranges, total_ranges);
        report.phases = clock.finish();
        report.outputs = out.files();
        Ok(report)
    }

    /// Removes the work directory and every task file in it (a job given up, or after
    /// [`SortPlan::finish`], which calls it).
    /// Also removes the temporary files of the parallel finish ([`SortPlan::layout`]).
    pub fn abort(&self) -> Result<()> {
        if let Ok(out) = self.output() {
            let index = out.index.as_ref().map(|(p, _)| p.as_path());
            assemble::remove_temps(out.data.as_deref(), index, &self.work_dir);
        }
        remove_work_dir(&self.work_dir)
    }

    /// The plan as JSON.
    pub fn to_json(&self) -> String {
        // INVARIANT: every field serialises (plain data, string map keys only).
        serde_json::to_string(self).expect("a plan serialises")
    }

    /// A plan from [`SortPlan::to_json`]'s text.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| Error::new(ErrorKind::Argument, format!("plan JSON: {e}")))
    }
}
