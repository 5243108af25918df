//! `sortase._sortase`: the extension module under the Python package `sortase` (python/sortase/).
//! Thin on purpose: arguments → a job spec of the `sortase` facade → [`run::run_job`] (GIL released,
//! Ctrl-C cancels) → the report as JSON, or record batches through the Arrow C stream interface.
//! The public API, its docstrings and its defaults are in `python/sortase/__init__.py`.

mod error;
mod jobs;
mod run;
mod spec;
mod tasks;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyString};
use run::{run_job, runtime, LatestProgress};
use sortase::options::parse_size;
use sortase_arrow::{ReadJob, TagColumn, TagKind};
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes from an int or a samtools size string (`"768M"`).
pub(crate) fn memory_bytes(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
) -> PyResult<Option<usize>> {
    let Some(v) = value else { return Ok(None) };
    let py = v.py();
    if let Ok(s) = v.cast::<PyString>() {
        let s: String = s.extract()?;
        return parse_size(&s, name)
            .map(Some)
            .map_err(|e| error::to_py_err(py, e));
    }
    Ok(Some(v.extract::<usize>()?))
}

pub(crate) fn path_text(p: PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

/// `tags=`: a list of names, or a dict of names to SAM type codes.
fn tag_columns(tags: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<TagColumn>> {
    let Some(tags) = tags else {
        return Ok(Vec::new());
    };
    let py = tags.py();
    if let Ok(d) = tags.cast::<PyDict>() {
        let mut out = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let tag: String = k.extract()?;
            let code: Option<String> = v.extract()?;
            let kind = match code {
                None => None,
                Some(c) => Some(TagKind::parse(&c).ok_or_else(|| {
                    error::raise(
                        py,
                        "ArgumentError",
                        &format!("tags: type {c:?} of {tag} is not one of i, f, Z, B, B:i, B:f"),
                    )
                })?),
            };
            out.push(TagColumn { tag, kind });
        }
        return Ok(out);
    }
    if tags.is_instance_of::<PyString>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "tags must be a list of tag names (e.g. [\"NM\", \"RG\"]) or a dict of names to types",
        ));
    }
    let names: Vec<String> = tags.extract()?;
    Ok(names
        .into_iter()
        .map(|tag| TagColumn { tag, kind: None })
        .collect())
}

/// `read_bam`'s record filters, as `view`'s keywords (`-f -F -q -e`).
struct Filters<'a, 'py> {
    require_flags: Option<&'a Bound<'py, PyAny>>,
    exclude_flags: Option<&'a Bound<'py, PyAny>>,
    min_mapq: u8,
    expr: Option<String>,
}

impl Filters<'_, '_> {
    fn spec(self, py: Python<'_>) -> PyResult<sortase::view::FilterSpec> {
        Ok(sortase::view::FilterSpec {
            require_flags: jobs::flags(py, self.require_flags)?,
            exclude_flags: jobs::flags(py, self.exclude_flags)?,
            min_mapq: self.min_mapq,
            expression: self.expr,
            ..Default::default()
        })
    }
}

/// Record batches handed to Python through the Arrow PyCapsule interface (`__arrow_c_stream__`),
/// once.
#[pyclass(module = "sortase._sortase")]
struct ArrowStream {
    reader: std::sync::Mutex<Option<Box<dyn RecordBatchReader + Send>>>,
}

impl ArrowStream {
    fn new(reader: Box<dyn RecordBatchReader + Send>) -> Self {
        Self {
            reader: std::sync::Mutex::new(Some(reader)),
        }
    }
}

#[pymethods]
impl ArrowStream {
    /// Exports the stream as an `arrow_array_stream` capsule (the stream can be taken once).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The requested schema is a hint the producer may ignore (Arrow PyCapsule interface).
        let _ = requested_schema;
        let taken = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
        let reader = taken.ok_or_else(|| {
            error::raise(py, "ArgumentError", "this stream has already been read")
        })?;
        let stream = FFI_ArrowArrayStream::new(reader);
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }
}

fn in_memory(schema: SchemaRef, batches: Vec<RecordBatch>) -> ArrowStream {
    let iter = batches.into_iter().map(Ok::<_, ArrowError>);
    ArrowStream::new(Box::new(RecordBatchIterator::new(iter, schema)))
}

/// Reads records. By default the whole input is decoded on all cores and returned as batches (a
/// stream over memory) with the report as JSON. With `stream=True` the batches are decoded ahead in
/// a bounded window as they are taken, and there is no report (nor progress).
#[pyfunction]
#[pyo3(signature = (path, *, region=None, columns=None, tags=None, threads=None,
    reference=None, batch_rows=None, progress=None, require_flags=None, exclude_flags=None,
    min_mapq=0, expr=None, stream=false))]
#[allow(clippy::too_many_arguments)]
fn read_bam(
    py: Python<'_>,
    path: PathBuf,
    region: Option<String>,
    columns: Option<Vec<String>>,
    tags: Option<&Bound<'_, PyAny>>,
    threads: Option<usize>,
    reference: Option<PathBuf>,
    batch_rows: Option<usize>,
    progress: Option<&Bound<'_, PyAny>>,
    require_flags: Option<&Bound<'_, PyAny>>,
    exclude_flags: Option<&Bound<'_, PyAny>>,
    min_mapq: u8,
    expr: Option<String>,
    stream: bool,
) -> PyResult<(ArrowStream, Option<String>)> {
    let filters = Filters {
        require_flags,
        exclude_flags,
        min_mapq,
        expr,
    };
    let mut job = ReadJob::new(path_text(path));
    job.region = region;
    job.columns = columns;
    job.tags = tag_columns(tags)?;
    job.reference = reference;
    job.filter = filters.spec(py)?;
    job.batch_rows = batch_rows.unwrap_or(job.batch_rows);
    let latest = Arc::new(LatestProgress::default());
    let rt = runtime(threads, None, &latest).map_err(|e| error::to_py_err(py, e))?;
    let job_rt = rt.clone();
    if stream {
        let batches = run_job(py, &rt, None, move || job.stream(&job_rt))?;
        return Ok((ArrowStream::new(Box::new(batches.into_reader())), None));
    }
    let (schema, batches, report) = run_job(py, &rt, progress.map(|p| (p, &*latest)), move || {
        job.run(&job_rt)
    })?;
    let report = serde_json::to_string(&report)
        .map_err(|e| error::raise(py, "InternalError", &e.to_string()))?;
    Ok((in_memory(schema, batches), Some(report)))
}

/// The extension module.
#[pymodule]
fn _sortase(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", sortase::options::VERSION)?;
    m.add_class::<ArrowStream>()?;
    m.add_function(wrap_pyfunction!(read_bam, m)?)?;
    tasks::register(m)?;
    jobs::register(m)?;
    Ok(())
}
