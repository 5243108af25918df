//! The task protocol: one trait ([`Task`]) that every kind of task implements, and one registry
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
use std::fmt::Debug;
use std::path::{Path, PathBuf};

/// Bytes of one file a task reads: `ranges` (`[start, end)` file offsets, sorted, disjoint; an
/// end past the file means its end), or the whole file (`None`). Header bytes are included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The file.
    pub path: PathBuf,
    /// Its byte ranges (`None`: all of it).
    pub ranges: Option<Vec<(u64, u64)>>,
}

impl Span {
    /// All of `path`.
    pub fn whole(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            ranges: None,
        }
    }

    /// `ranges` of `path`, sorted and merged where they touch or overlap (empty ones dropped).
    pub fn ranges(path: impl Into<PathBuf>, mut ranges: Vec<(u64, u64)>) -> Self {
        ranges.retain(|&(a, b)| a < b);
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        Self {
            path: path.into(),
            ranges: Some(merged),
        }
    }

    /// Bytes of the span in a file of `size` bytes.
    pub fn bytes(&self, size: u64) -> u64 {
        match &self.ranges {
            None => size,
            Some(r) => r.iter().map(|&(a, b)| b.min(size) - a.min(size)).sum(),
        }
    }
}

/// A file and its byte ranges (`None`: the whole file), before they become a [`Span`].
type FileRanges = (PathBuf, Option<Vec<(u64, u64)>>);

/// Spans by file, in order of first appearance, the ranges of one file merged into one span.
pub(crate) fn by_file(
    pieces: impl IntoIterator<Item = (PathBuf, Option<(u64, u64)>)>,
) -> Vec<Span> {
    let mut out: Vec<FileRanges> = Vec::new();
    for (path, range) in pieces {
        let at = match out.iter().position(|(p, _)| *p == path) {
            Some(i) => i,
            None => {
                out.push((path, Some(Vec::new())));
                out.len() - 1
            }
        };
        match (range, &mut out[at].1) {
            (Some(r), Some(v)) => v.push(r),
            (_, slot) => *slot = None,
        }
    }
    out.into_iter()
        .map(|(path, ranges)| match ranges {
            Some(r) => Span::ranges(path, r),
            None => Span::whole(path),
        })
        .collect()
}

/// A kind of task: plain data (serde) a driver sends anywhere, run there on a [`Runtime`].
pub trait Task: Serialize + DeserializeOwned + Debug + Send + Sync + 'static {
    /// The kind, keying [`KINDS`]: a dotted path (`sort.count`) is the task's JSON nesting.
    const KIND: &'static str;
    /// The kind its output is wrapped in (a dataset's map task gives a map task's output).
    const OUTPUT_KIND: &'static str = Self::KIND;
    /// What it returns.
    type Output: Serialize + DeserializeOwned;

    /// Runs the task.
    fn run(&self, rt: &Runtime) -> Result<Self::Output>;

    /// The byte spans of the files it reads (header bytes included; a BAM range reaches
    /// [`super::READ_SLACK`] past its planned end, where its last record and the boundary check
    /// read). A task that reads outside them fails on a sparse copy, and the driver re-runs it on
    /// whole files.
    fn reads(&self) -> Result<Vec<Span>>;

    /// The files it writes (under its work directory; a driver on object storage uploads them).
    fn writes(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// Bytes it read and wrote, measured on the local files after it ran (for a driver's report).
    fn local_bytes(&self) -> (u64, u64) {
        measured(self.reads(), &self.writes())
    }
}

/// `reads`' bytes and `writes`' sizes on the local file system (missing files count 0).
pub(crate) fn measured(reads: Result<Vec<Span>>, writes: &[PathBuf]) -> (u64, u64) {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    let read = reads
        .unwrap_or_default()
        .iter()
        .filter_map(|s| size(&s.path).map(|n| s.bytes(n)))
        .sum();
    let written = writes.iter().filter_map(|p| size(p)).sum();
    (read, written)
}

/// A [`Task`] of any kind behind one object-safe face (what the registry gives).
pub trait DynTask: Debug + Send + Sync {
    /// [`Task::KIND`].
    fn kind(&self) -> &'static str;
    /// Runs the task; its output as JSON, wrapped in its output kind.
    fn run(&self, rt: &Runtime) -> Result<Value>;
    /// [`Task::reads`].
    fn reads(&self) -> Result<Vec<Span>>;
    /// [`Task::writes`].
    fn writes(&self) -> Vec<PathBuf>;
    /// [`Task::local_bytes`].
    fn local_bytes(&self) -> (u64, u64);
    /// The task as JSON, wrapped in its kind.
    fn to_json(&self) -> Value;
}

impl<T: Task> DynTask for T {
    fn kind(&self) -> &'static str {
        T::KIND
    }

    fn run(&self, rt: &Runtime) -> Result<Value> {
        let out = <T as Task>::run(self, rt)?;
        Ok(wrap(T::OUTPUT_KIND, to_value(&out)?))
    }

    fn reads(&self) -> Result<Vec<Span>> {
        <T as Task>::reads(self)
    }

    fn writes(&self) -> Vec<PathBuf> {
        <T as Task>::writes(self)
    }

    fn local_bytes(&self) -> (u64, u64) {
        <T as Task>::local_bytes(self)
    }

    fn to_json(&self) -> Value {
        // A task is plain data: serialising it cannot fail.
        wrap(T::KIND, serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("task output JSON: {e}")))
}

/// `body` inside the objects of `kind`'s path (`a.b` → `{"a": {"b": body}}`).
fn wrap(kind: &str, body: Value) -> Value {
    kind.rsplit('.').fold(body, |inner, key| {
        let mut map = serde_json::Map::with_capacity(1);
        map.insert(key.to_owned(), inner);
        Value::Object(map)
    })
}

/// The body inside `kind`'s path in `value`, if it is of that kind.
fn unwrap<'a>(value: &'a Value, kind: &str) -> Option<&'a Value> {
    kind.split('.').try_fold(value, |v, key| match v {
        Value::Object(m) if m.len() == 1 => m.get(key),
        _ => None,
    })
}

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
    super::markdup::MdCountTask,
    super::markdup::MdMapTask,
    super::markdup::MdReduceTask,
    super::markdup::MdEncodeTask,
    super::pmarkdup::PmMapTask,
    super::pmarkdup::PmJoinTask,
    super::pmarkdup::PmReduceTask,
    super::assemble::PlaceTask,
    super::fq2bam::FqSplitTask,
    super::fq2bam::FqAlignTask,
    super::fq2bam::FqSortMapTask,
    crate::stats::FlagstatTask,
    crate::stats::IdxstatsTask,
    crate::index::IndexTask,
    crate::snp_pileup::SnpPileupTask,
    crate::merge::MergeTask,
    crate::agd_tasks::AgdFlagstatTask,
    crate::agd_tasks::AgdCountTask,
    crate::agd_tasks::AgdIdxstatsTask,
    super::agd_markdup::AgdMdMapTask,
    super::agd_markdup::AgdPmMapTask,
    super::agd_markdup::AgdMdWriteTask,
);

/// The outputs of `kind` (an output kind: [`Task::OUTPUT_KIND`]) among `outputs` (any kinds, any
/// order), decoded; an output of that kind that does not decode is an argument error.
pub fn outputs_of<T: DeserializeOwned>(outputs: &[Value], kind: &str) -> Result<Vec<T>> {
    outputs
        .iter()
        .filter_map(|o| unwrap(o, kind))
        .map(|body| {
            T::deserialize(body).map_err(|e| Error::argument(format!("{kind} output JSON: {e}")))
        })
        .collect()
}

/// One output (JSON text) of `kind`, decoded (an argument error if it is of another kind).
pub fn output_of<T: DeserializeOwned>(output_json: &str, kind: &str) -> Result<T> {
    let value: Value = serde_json::from_str(output_json)
        .map_err(|e| Error::argument(format!("task output JSON: {e}")))?;
    outputs_of(std::slice::from_ref(&value), kind)?
        .pop()
        .ok_or_else(|| Error::argument(format!("task output JSON: not a {kind} output")))
}

/// What a task reads and writes ([`task_io_json`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskIo {
    /// [`Task::KIND`].
    pub kind: String,
    /// [`Task::reads`].
    pub reads: Vec<Span>,
    /// [`Task::writes`].
    pub writes: Vec<PathBuf>,
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
    let task = AnyTask::parse(task_json)?;
    to_json(&TaskIo {
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
    fn kinds_are_unique_and_wrap_round_trips() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(
                KINDS[..i].iter().all(|o| o.name != k.name),
                "{} twice",
                k.name
            );
        }
        let v = wrap("sort.count", serde_json::json!({"x": 1}));
        assert_eq!(v, serde_json::json!({"sort": {"count": {"x": 1}}}));
        assert_eq!(unwrap(&v, "sort.count"), Some(&serde_json::json!({"x": 1})));
        assert_eq!(unwrap(&v, "sort.map"), None);
        assert_eq!(unwrap(&v, "merge"), None);
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

    #[test]
    fn spans_merge_and_count() {
        let s = Span::ranges("f", vec![(10, 20), (0, 5), (15, 30), (40, 40), (5, 6)]);
        assert_eq!(s.ranges, Some(vec![(0, 6), (10, 30)]));
        assert_eq!(s.bytes(25), 6 + 15);
        assert_eq!(Span::whole("f").bytes(25), 25);
        let spans = by_file([
            ("a".into(), Some((0, 4))),
            ("b".into(), None),
            ("a".into(), Some((2, 9))),
            ("b".into(), Some((0, 1))),
        ]);
        assert_eq!(
            spans,
            vec![Span::ranges("a", vec![(0, 9)]), Span::whole("b")]
        );
    }
}
