//! The sort's and the merge's tasks as exec's [`Task`]: their kinds, their runs, the byte spans
//! they read and the files they write. (The registry of kinds is the facade's.)

use crate::merge::{MergeTask, MergeTaskOutput};
use crate::sort_tasks::{
    AgdMapTask, CountOutput, CountTask, MapOutput, MapTask, ReduceOutput, ReduceTask,
};
use sortase_exec::error::Result;
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{bam_range, by_file, Span, Task, HEADER_SPAN, READ_SLACK};
use std::path::PathBuf;

impl Task for CountTask {
    const KIND: &'static str = "sort.count";
    type Output = CountOutput;

    fn run(&self, rt: &Runtime) -> Result<CountOutput> {
        CountTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(vec![bam_range(
            &self.input,
            self.start,
            self.later_starts.first().copied(),
        )])
    }
}

impl Task for MapTask {
    const KIND: &'static str = "sort.map";
    type Output = MapOutput;

    fn run(&self, rt: &Runtime) -> Result<MapOutput> {
        MapTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(vec![bam_range(&self.input, self.start, self.end)])
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.run_path.clone()]
    }
}

impl Task for AgdMapTask {
    const KIND: &'static str = "sort.agd_map";
    const OUTPUT_KIND: &'static str = "sort.map";
    type Output = MapOutput;

    fn run(&self, rt: &Runtime) -> Result<MapOutput> {
        AgdMapTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        // Read whole through `sortase_agd`'s chunk reader (so through `sortase_io`).
        Ok(self
            .files()
            .into_iter()
            .map(|p| Span::whole(p).streamed())
            .collect())
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.run_path.clone()]
    }
}

impl Task for ReduceTask {
    const KIND: &'static str = "sort.reduce";
    type Output = ReduceOutput;

    fn run(&self, rt: &Runtime) -> Result<ReduceOutput> {
        ReduceTask::run(self, rt)
    }

    /// Whole blocks of each run from the stretch's first up to `end` and nothing past it (read
    /// through `sortase_io`: the sorter's run reader).
    fn reads(&self) -> Result<Vec<Span>> {
        let runs = self
            .runs
            .iter()
            .map(|r| (r.path.clone(), Some((r.offset, r.end.unwrap_or(u64::MAX)))));
        Ok(by_file(runs).into_iter().map(Span::streamed).collect())
    }

    fn writes(&self) -> Vec<PathBuf> {
        self.files.paths()
    }
}

impl Task for MergeTask {
    const KIND: &'static str = "merge";
    type Output = MergeTaskOutput;

    fn run(&self, rt: &Runtime) -> Result<MergeTaskOutput> {
        MergeTask::run(self, rt)
    }

    /// Every input's header, the spans its key ranges read (from the plan's samples): both
    /// through [`sortase_io::Source`]; and the header file of `-h`, whole.
    fn reads(&self) -> Result<Vec<Span>> {
        let headers = self
            .inputs()
            .map(|p| (PathBuf::from(p), Some((0, HEADER_SPAN))));
        let spans = self.input_spans()?.into_iter().map(|s| {
            let end = s.end.map_or(u64::MAX, |e| e.saturating_add(READ_SLACK));
            (s.path, Some((s.start, end)))
        });
        let mut out: Vec<Span> = by_file(headers.chain(spans))
            .into_iter()
            .map(Span::streamed)
            .collect();
        out.extend(self.header_file().map(Span::whole));
        Ok(out)
    }

    fn writes(&self) -> Vec<PathBuf> {
        self.files.paths()
    }
}
