//! The markdup tasks' [`Task`] implementations: their kinds, runs, the byte spans they read and
//! the files they write (the registry that decodes them by kind is the facade's,
//! `sortase::tasks::KINDS`).

use super::coordinate::{
    PmJoinOutput, PmJoinTask, PmMapOutput, PmMapTask, PmReduceOutput, PmReduceTask,
};
use super::query::{
    FileSlice, MdEncodeOutput, MdEncodeTask, MdMapOutput, MdMapTask, MdReduceOutput, MdReduceTask,
};
use sortase_exec::error::{Error, Result};
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{bam_range, by_file, Span, Task};
use std::path::PathBuf;

/// The spans of task-file slices, one per file (read through `sortase_io`: [`FileSlice::read`]).
pub(crate) fn slices<'a>(slices: impl IntoIterator<Item = &'a FileSlice>) -> Vec<Span> {
    by_file(
        slices
            .into_iter()
            .map(|s| (s.path.clone(), Some((s.start, s.end)))),
    )
    .into_iter()
    .map(Span::streamed)
    .collect()
}

/// `impl Task` for tasks whose inherent `run` fails with `anyhow`: each one's kind and output, and,
/// of the task `$t`, the spans it reads and the files it writes (the same for all of them).
macro_rules! task {
    (
        $($task:ident: $kind:literal -> $output:ident),+;
        |$t:ident| reads: $reads:expr, writes: $writes:expr
    ) => {$(
        impl Task for $task {
            const KIND: &'static str = $kind;
            type Output = $output;

            fn run(&self, rt: &Runtime) -> Result<$output> {
                $task::run(self, rt).map_err(Error::from)
            }

            fn reads(&self) -> Result<Vec<Span>> {
                let $t = self;
                Ok($reads)
            }

            fn writes(&self) -> Vec<PathBuf> {
                let $t = self;
                $writes
            }
        }
    )+};
}

// The map tasks read their range, and past its end the rest of its last read-name group (a group
// longer than `READ_SLACK` makes a remote task fall back to the whole file).
task!(
    MdMapTask: "markdup.map" -> MdMapOutput,
    PmMapTask: "markdup.coordinate_map" -> PmMapOutput;
    |t| reads: vec![bam_range(&t.input, t.span.start, t.span.end)], writes: vec![t.path.clone()]);

// Samblaster's reduce and Picard's join tasks read their partition's slice of every map task's
// file.
task!(
    MdReduceTask: "markdup.reduce" -> MdReduceOutput,
    PmJoinTask: "markdup.coordinate_join" -> PmJoinOutput;
    |t| reads: slices(&t.inputs), writes: vec![t.path.clone()]);

// Reads its ranges of the input, and each range's slice of every reduce task's file.
task!(MdEncodeTask: "markdup.encode" -> MdEncodeOutput; |t|
    reads: {
        let mut out = vec![bam_range(&t.input, t.start, t.read_end)];
        out.extend(slices(t.segments.iter().flat_map(|seg| &seg.duplicates)));
        out
    },
    writes: t.files.paths());

// Reads its partition's slices of every map and join task's file.
task!(PmReduceTask: "markdup.coordinate_reduce" -> PmReduceOutput;
    |t| reads: slices(t.fragments.iter().chain(&t.pairs)), writes: vec![t.path.clone()]);
