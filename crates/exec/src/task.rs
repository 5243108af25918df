//! The task protocol's trait: one [`Task`] that every kind of range task implements (its kind, its
//! run on a [`Runtime`], the byte spans it reads, the files it writes), the object-safe [`DynTask`]
//! a registry hands out, and what a driver asks of a task ([`TaskIo`], [`Span`]). The registry of
//! kinds (`KINDS`, `AnyTask`) is the facade's (`sortase::tasks`); domain crates implement the trait
//! for their tasks here, below it.
//!
//! The JSON of a task is its kind's path around its body: kind `flagstat` is
//! `{"flagstat": {...}}`, kind `sort.count` is `{"sort": {"count": {...}}}`; an output is wrapped
//! the same way by its output kind ([`Task::OUTPUT_KIND`]) ([`wrap`], [`unwrap`]).

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::Runtime;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

/// Bytes a BAM range task reads past its planned end: the rest of its last record and the block
/// its boundary check reads (a record longer than this makes a remote task fall back to whole
/// files).
pub const READ_SLACK: u64 = 256 << 10;

/// Bytes of a BAM's start a range task reads for its header: the first BGZF block (at most 64
/// KiB). A header in more blocks makes a remote task fall back to whole files (a driver that
/// fetches the header itself asks [`bam_header_end`]).
pub const HEADER_SPAN: u64 = 1 << 16;

/// The spans of a BAM range task: the header's block, and the blocks from the one holding virtual
/// offset `start` to [`READ_SLACK`] past the one holding `end` (`None`: the end of the file). The
/// task reads them through [`sortase_io::Source`] (its field `streamed`).
pub fn bam_range(input: &Path, start: u64, end: Option<u64>) -> Span {
    let end = end.map_or(u64::MAX, |e| (e >> 16).saturating_add(READ_SLACK));
    Span::ranges(input, vec![(0, HEADER_SPAN), (start >> 16, end)]).streamed()
}

/// Bytes of one file a task reads: `ranges` (`[start, end)` file offsets, sorted, disjoint; an
/// end past the file means its end), or the whole file (`None`). Header bytes are included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The file.
    pub path: PathBuf,
    /// Its byte ranges (`None`: all of it).
    pub ranges: Option<Vec<(u64, u64)>>,
    /// The task opens the file only through [`sortase_io::Source`], so a driver on object storage
    /// may make the path stand for the object ([`sortase_io::alias_paths`]) and let the task read
    /// it by ranges, instead of copying the ranges to a local file first. `false`: the task needs
    /// a local file there (htslib, minimap2's index).
    #[serde(default)]
    pub streamed: bool,
}

impl Span {
    /// All of `path`.
    pub fn whole(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            ranges: None,
            streamed: false,
        }
    }

    /// The span, read through [`sortase_io::Source`] only (see the field).
    pub fn streamed(self) -> Self {
        Self {
            streamed: true,
            ..self
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
            streamed: false,
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
pub fn by_file(pieces: impl IntoIterator<Item = (PathBuf, Option<(u64, u64)>)>) -> Vec<Span> {
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
    /// The kind, keying the facade's registry (`sortase::tasks::KINDS`): a dotted path (`sort.count`) is the task's JSON nesting.
    const KIND: &'static str;
    /// The kind its output is wrapped in (a dataset's map task gives a map task's output).
    const OUTPUT_KIND: &'static str = Self::KIND;
    /// What it returns.
    type Output: Serialize + DeserializeOwned;

    /// Runs the task.
    fn run(&self, rt: &Runtime) -> Result<Self::Output>;

    /// The byte spans of the files it reads (header bytes included; a BAM range reaches
    /// [`READ_SLACK`] past its planned end, where its last record and the boundary check
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
pub fn measured(reads: Result<Vec<Span>>, writes: &[PathBuf]) -> (u64, u64) {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    let read = reads
        .unwrap_or_default()
        .iter()
        .filter_map(|s| size(&s.path).map(|n| s.bytes(n)))
        .sum();
    let written = writes.iter().filter_map(|p| size(p)).sum();
    (read, written)
}

/// A [`Task`] of any kind behind one object-safe face (what the facade's registry gives).
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

/// A task of any kind serialises as its kind's JSON ([`DynTask::to_json`]), so a boxed task
/// (what a domain crate's `into_task` returns) is sent as the registry's `AnyTask` is.
impl Serialize for dyn DynTask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("task output JSON: {e}")))
}

/// `body` inside the objects of `kind`'s path (`a.b` → `{"a": {"b": body}}`).
pub fn wrap(kind: &str, body: Value) -> Value {
    kind.rsplit('.').fold(body, |inner, key| {
        let mut map = serde_json::Map::with_capacity(1);
        map.insert(key.to_owned(), inner);
        Value::Object(map)
    })
}

/// The body inside `kind`'s path in `value`, if it is of that kind.
pub fn unwrap<'a>(value: &'a Value, kind: &str) -> Option<&'a Value> {
    kind.split('.').try_fold(value, |v, key| match v {
        Value::Object(m) if m.len() == 1 => m.get(key),
        _ => None,
    })
}

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

/// What a task reads and writes (the facade's `task_io_json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskIo {
    /// [`Task::KIND`].
    pub kind: String,
    /// [`Task::reads`].
    pub reads: Vec<Span>,
    /// [`Task::writes`].
    pub writes: Vec<PathBuf>,
}

/// A planned byte range of the input: the records whose first byte's virtual offset is in
/// `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteRange {
    /// Virtual offset of its first record.
    pub start: u64,
    /// Virtual offset of the next range's first record (`None`: the end of the file).
    pub end: Option<u64>,
}

impl ByteRange {
    /// The planner's ranges (`sortase_index::range::plan_ranges`; an end of `u64::MAX` is the end of
    /// the file) as the tasks carry them.
    pub fn from_planned(ranges: &[sortase_index::range::RecordRange]) -> Vec<ByteRange> {
        ranges
            .iter()
            .map(|r| ByteRange {
                start: r.start,
                end: (r.end != u64::MAX).then_some(r.end),
            })
            .collect()
    }
}

/// An error a task reports as data instead of failing (a sort's count task, for one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    /// The error's kind.
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
}

impl From<&Error> for TaskError {
    fn from(e: &Error) -> Self {
        Self {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

impl TaskError {
    /// The error again.
    pub fn to_error(&self) -> Error {
        Error::new(self.kind, self.message.clone())
    }
}

/// Where a BAM's header ends in `prefix`, the file's first bytes: the compressed offset of the end
/// of the BGZF block holding the header's last byte (`Ok(None)`: the prefix ends first, give more
/// bytes). For a driver that fetches a remote BAM's header and nothing more. With `whole` the
/// prefix is the whole file, and a header that does not end in it is an error.
pub fn bam_header_end(prefix: &[u8], whole: bool) -> Result<Option<u64>> {
    let mut reader = sortase_bgzf::SeekReader::new(std::io::Cursor::new(prefix));
    match sortase_bam::Header::read_bam(&mut reader) {
        Ok(_) => {}
        Err(_) if !whole => return Ok(None),
        Err(e) => return Err(Error::from(e).context("BAM header")),
    }
    let at = reader.virtual_position();
    let (block, within) = (at >> 16, at & 0xffff);
    if within == 0 {
        return Ok(Some(block));
    }
    let start = usize::try_from(block).unwrap_or(usize::MAX);
    let header = prefix
        .get(start..)
        .and_then(|b| sortase_bgzf::parse_header(b).ok())
        .ok_or_else(|| Error::argument("BAM header: bad BGZF block"))?;
    Ok(Some(block + header.block_size as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_round_trips() {
        let v = wrap("sort.count", serde_json::json!({"x": 1}));
        assert_eq!(v, serde_json::json!({"sort": {"count": {"x": 1}}}));
        assert_eq!(unwrap(&v, "sort.count"), Some(&serde_json::json!({"x": 1})));
        assert_eq!(unwrap(&v, "sort.map"), None);
        assert_eq!(unwrap(&v, "merge"), None);
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
