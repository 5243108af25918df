//! The task protocol: one trait ([`Task`], crates/exec `task.rs`) that every kind of task implements, and one registry
//! keyed by kind ([`KINDS`]) that turns a task's JSON into a runnable [`AnyTask`]. A driver needs
//! nothing else: it runs a task ([`run_task_json`]), asks which byte spans it reads and which files
//! it writes ([`task_io_json`]: what to fetch from and upload to object storage), and hands the
//! outputs back to the plan, which picks those of the kind it expects ([`outputs_of`]).
//!
//! The JSON of a task is its kind's path around its body: kind `flagstat` is
//! `{"flagstat": {...}}`, kind `sort.count` is `{"sort": {"count": {...}}}`; an output is wrapped
//! the same way by its output kind ([`Task::OUTPUT_KIND`]).

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::Runtime;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
// The trait and what a driver asks of a task live in crates/exec (`task.rs`), below the crates
// that implement it.
pub(crate) use sortase_exec::task::by_file;
pub use sortase_exec::task::{outputs_of, DynTask, Span, Task, TaskIo};

/// A task of any kind (what [`KINDS`] decodes; serialises as its kind's JSON).
#[derive(Debug)]
pub struct AnyTask(Box<dyn DynTask>);

impl<T: Task> From<T> for AnyTask {
    fn from(task: T) -> Self {
        AnyTask(Box::new(task))
    }
}

impl std::ops::Deref for AnyTask {
    type Target = dyn DynTask;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl AnyTask {
    /// A task a domain crate boxed (`MarkdupTask::into_task`, `PicardTask::into_task`: crates
    /// below the registry hand out [`DynTask`]s).
    pub fn from_dyn(task: Box<dyn DynTask>) -> Self {
        AnyTask(task)
    }

    /// The task of a task's JSON, through the registry.
    pub fn from_json(value: Value) -> Result<Self> {
        let mut kind = String::new();
        let mut value = value;
        loop {
            let (key, body) = match value {
                Value::Object(m) if m.len() == 1 => m.into_iter().next().expect("one entry"),
                _ => {
                    return Err(Error::argument(format!(
                        "task JSON: not an object of one kind{}",
                        if kind.is_empty() {
                            String::new()
                        } else {
                            format!(" inside {kind:?}")
                        }
                    )))
                }
            };
            if !kind.is_empty() {
                kind.push('.');
            }
            kind.push_str(&key);
            if let Some(k) = KINDS.iter().find(|k| k.name == kind) {
                return (k.decode)(body)
                    .map_err(|e| Error::argument(format!("{kind} task JSON: {e}")));
            }
            let prefix = format!("{kind}.");
            if !KINDS.iter().any(|k| k.name.starts_with(&prefix)) {
                let names: Vec<_> = KINDS.iter().map(|k| k.name).collect();
                return Err(Error::argument(format!(
                    "task JSON: no task of kind {kind:?} (kinds: {})",
                    names.join(", ")
                )));
            }
            value = body;
        }
    }

    /// [`AnyTask::from_json`] of JSON text.
    pub fn parse(text: &str) -> Result<Self> {
        let value =
            serde_json::from_str(text).map_err(|e| Error::argument(format!("task JSON: {e}")))?;
        Self::from_json(value)
    }
}

impl Serialize for AnyTask {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for AnyTask {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        AnyTask::from_json(value).map_err(serde::de::Error::custom)
    }
}

/// A registered kind of task: its name and its decoder.
pub struct Kind {
    /// [`Task::KIND`].
    pub name: &'static str,
    decode: fn(Value) -> serde_json::Result<AnyTask>,
}

fn decode<T: Task>(body: Value) -> serde_json::Result<AnyTask> {
    Ok(AnyTask::from(serde_json::from_value::<T>(body)?))
}

macro_rules! registry {
    ($($t:ty),* $(,)?) => {
        /// Every kind of task: the one place a task's JSON is dispatched on its kind.
        pub static KINDS: &[Kind] = &[$(Kind { name: <$t as Task>::KIND, decode: decode::<$t> }),*];
    };
}

registry!(
    super::sort::CountTask,
    super::sort::MapTask,
    super::sort::AgdMapTask,
    super::sort::ReduceTask,
    super::markdup::MdMapTask,
    super::markdup::MdReduceTask,
    super::markdup::MdEncodeTask,
    super::pmarkdup::PmMapTask,
    super::pmarkdup::PmJoinTask,
    super::pmarkdup::PmReduceTask,
    super::assemble::PlaceTask,
    sortase_align::tasks::FqScanTask,
    sortase_align::tasks::FqSplitTask,
    sortase_align::tasks::FqAlignTask,
    super::fq2bam::FqSortMapTask,
    crate::stats::FlagstatTask,
    crate::stats::IdxstatsTask,
    crate::index::IndexTask,
    crate::snp_pileup::SnpPileupTask,
    crate::merge::MergeTask,
    crate::agd_tasks::AgdFlagstatTask,
    crate::agd_tasks::AgdCountTask,
    crate::agd_tasks::AgdIdxstatsTask,
    sortase_markdup::tasks::agd::AgdMdMapTask,
    sortase_markdup::tasks::agd::AgdPmMapTask,
    sortase_markdup::tasks::agd::AgdMdWriteTask,
);

/// One output (JSON text) of `kind`, decoded (an argument error if it is of another kind).
pub fn output_of<T: DeserializeOwned>(output_json: &str, kind: &str) -> Result<T> {
    let value: Value = serde_json::from_str(output_json)
        .map_err(|e| Error::argument(format!("task output JSON: {e}")))?;
    outputs_of(std::slice::from_ref(&value), kind)?
        .pop()
        .ok_or_else(|| Error::argument(format!("task output JSON: not a {kind} output")))
}

fn to_json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot write JSON: {e}")))
}

/// Runs one task given as JSON and returns its output as JSON (wrapped in its output kind): the
/// entry point for faces that pass tasks as text (Python, Dask).
pub fn run_task_json(task_json: &str, rt: &Runtime) -> Result<String> {
    to_json(&AnyTask::parse(task_json)?.run(rt)?)
}

/// The byte spans a task (JSON) reads and the files it writes, as a [`TaskIo`] (JSON), for drivers
/// that fetch a task's inputs from object storage and upload what it wrote.
pub fn task_io_json(task_json: &str) -> Result<String> {
    to_json(&task_io(task_json)?)
}

/// The byte spans a task (JSON) reads and the files it writes.
pub fn task_io(task_json: &str) -> Result<TaskIo> {
    let task = AnyTask::parse(task_json)?;
    Ok(TaskIo {
        kind: task.kind().to_owned(),
        reads: task.reads()?,
        writes: task.writes(),
    })
}

/// The bytes a task (JSON) read and wrote on the local file system, after it ran: `[read,
/// written]` ([`Task::local_bytes`]).
pub fn task_local_bytes_json(task_json: &str) -> Result<(u64, u64)> {
    Ok(AnyTask::parse(task_json)?.local_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_unique() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(
                KINDS[..i].iter().all(|o| o.name != k.name),
                "{} twice",
                k.name
            );
        }
    }

    #[test]
    fn unknown_kinds_and_bad_bodies_are_argument_errors() {
        for text in [
            r#"{"nope": {}}"#,
            r#"{"sort": {"nope": {}}}"#,
            r#"{"sort": 3}"#,
            r#"[1]"#,
            r#"{"flagstat": {"slice": 7}}"#,
            "{",
        ] {
            let e = AnyTask::parse(text).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Argument, "{text}: {e}");
        }
    }
}
