//! The markdup tasks' [`Task`] implementations: their kinds, runs, the byte spans they read and
//! the files they write (the registry that decodes them by kind is the facade's,
//! `sortase::tasks::KINDS`).

use super::coordinate::{
    PmJoinOutput, PmJoinTask, PmMapOutput, PmMapTask, PmReduceOutput, PmReduceTask,
};
use super::query::{
    MdCountOutput, MdCountTask, MdEncodeOutput, MdEncodeTask, MdMapOutput, MdMapTask,
    MdReduceOutput, MdReduceTask,
};
use sortase_exec::error::{Error, Result};
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{bam_range, by_file, Span, Task};
use std::path::PathBuf;

impl Task for MdCountTask {
    const KIND: &'static str = "markdup.count";
    type Output = MdCountOutput;

    fn run(&self, rt: &Runtime) -> Result<MdCountOutput> {
        MdCountTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(vec![bam_range(
            &self.input,
            self.start,
            self.later_starts.first().copied(),
        )])
    }
}

impl Task for MdMapTask {
    const KIND: &'static str = "markdup.map";
    type Output = MdMapOutput;

    fn run(&self, rt: &Runtime) -> Result<MdMapOutput> {
        MdMapTask::run(self, rt).map_err(Error::from)
    }

    /// The range, and past its end the rest of its last read-name group (a group longer than
    /// [`READ_SLACK`](sortase_exec::task::READ_SLACK) makes a remote task fall back to the whole file).
    fn reads(&self) -> Result<Vec<Span>> {
        Ok(vec![bam_range(&self.input, self.start, self.end)])
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

impl Task for MdReduceTask {
    const KIND: &'static str = "markdup.reduce";
    type Output = MdReduceOutput;

    fn run(&self, rt: &Runtime) -> Result<MdReduceOutput> {
        MdReduceTask::run(self, rt).map_err(Error::from)
    }

    /// Its partition's slice of every map task's signature file.
    fn reads(&self) -> Result<Vec<Span>> {
        Ok(by_file(
            self.inputs
                .iter()
                .map(|s| (s.path.clone(), Some((s.start, s.end)))),
        ))
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

impl Task for MdEncodeTask {
    const KIND: &'static str = "markdup.encode";
    type Output = MdEncodeOutput;

    fn run(&self, rt: &Runtime) -> Result<MdEncodeOutput> {
        MdEncodeTask::run(self, rt).map_err(Error::from)
    }

    /// Its ranges of the input, and each range's slice of every reduce task's file.
    fn reads(&self) -> Result<Vec<Span>> {
        let mut out = vec![bam_range(&self.input, self.start, self.read_end)];
        out.extend(by_file(self.segments.iter().flat_map(|seg| {
            seg.duplicates
                .iter()
                .map(|d| (d.path.clone(), Some((d.start, d.end))))
        })));
        Ok(out)
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.part_path.clone(), self.sidecar_path.clone()]
    }
}

impl Task for PmMapTask {
    const KIND: &'static str = "markdup.coordinate_map";
    type Output = PmMapOutput;

    fn run(&self, rt: &Runtime) -> Result<PmMapOutput> {
        PmMapTask::run(self, rt).map_err(Error::from)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(vec![bam_range(&self.input, self.start, self.end)])
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

impl Task for PmJoinTask {
    const KIND: &'static str = "markdup.coordinate_join";
    type Output = PmJoinOutput;

    fn run(&self, rt: &Runtime) -> Result<PmJoinOutput> {
        PmJoinTask::run(self, rt).map_err(Error::from)
    }

    /// Its partition's slice of every map task's file.
    fn reads(&self) -> Result<Vec<Span>> {
        Ok(by_file(
            self.inputs
                .iter()
                .map(|s| (s.path.clone(), Some((s.start, s.end)))),
        ))
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

impl Task for PmReduceTask {
    const KIND: &'static str = "markdup.coordinate_reduce";
    type Output = PmReduceOutput;

    fn run(&self, rt: &Runtime) -> Result<PmReduceOutput> {
        PmReduceTask::run(self, rt).map_err(Error::from)
    }

    /// Its partition's slices of every map and join task's file.
    fn reads(&self) -> Result<Vec<Span>> {
        Ok(by_file(
            self.fragments
                .iter()
                .chain(&self.pairs)
                .map(|s| (s.path.clone(), Some((s.start, s.end)))),
        ))
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}
