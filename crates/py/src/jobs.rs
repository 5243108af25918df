//! The commands besides `sort` as Python functions (issue 17): keyword arguments named as the
//! CLI's long options → the facade's job spec → [`run_job`] (GIL released, Ctrl-C cancels) → the
//! report as JSON. `python/sortase/__init__.py` turns the JSON into `Report`s, tables and lists.

use crate::error;
use crate::memory_bytes;
use crate::run::{run_job as run_job_on, runtime, LatestProgress};
use crate::spec;
use pyo3::prelude::*;
use sortase::view::parse_flags;
use sortase::{
    AgdExportJob, AgdImportJob, BgzipJob, FaidxJob, FetchJob, FetchRequest, FlagstatJob, Fq2BamJob,
    IdxstatsJob, IndexJob, MarkdupJob, MergeJob, Runtime, SnpPileupJob, SortJob, ViewJob,
};
use std::path::PathBuf;
use std::sync::Arc;

/// Runs `job` on a runtime of `threads` threads; the report as JSON.
pub(crate) fn run_to_json<R: serde::Serialize + Send + 'static>(
    py: Python<'_>,
    threads: Option<usize>,
    job: impl FnOnce(&Runtime) -> sortase::Result<R> + Send + 'static,
) -> PyResult<String> {
    let latest = Arc::new(LatestProgress::default());
    let rt = runtime(threads, None, &latest).map_err(|e| error::to_py_err(py, e))?;
    let job_rt = rt.clone();
    let report = run_job_on(py, &rt, None, move || job(&job_rt))?;
    serde_json::to_string(&report).map_err(|e| error::raise(py, "InternalError", &e.to_string()))
}

/// `-f/-F`: an int, or samtools' text (`"0x4"`, `"UNMAP,SECONDARY"`).
pub(crate) fn flags(py: Python<'_>, value: Option<&Bound<'_, PyAny>>) -> PyResult<u16> {
    let Some(v) = value else { return Ok(0) };
    if let Ok(n) = v.extract::<u16>() {
        return Ok(n);
    }
    let s: String = v.extract()?;
    parse_flags(&s).map_err(|e| error::to_py_err(py, e))
}

/// `sortase flagstat`; the report as JSON (`counts`, `warnings`) and samtools' `-O json` text.
#[pyfunction]
#[pyo3(signature = (path, *, threads=None))]
fn flagstat(py: Python<'_>, path: PathBuf, threads: Option<usize>) -> PyResult<(String, String)> {
    let job = FlagstatJob::new(path);
    let latest = Arc::new(LatestProgress::default());
    let rt = runtime(threads, None, &latest).map_err(|e| error::to_py_err(py, e))?;
    let job_rt = rt.clone();
    let report = run_job_on(py, &rt, None, move || job.run(&job_rt))?;
    let json = serde_json::to_string(&report)
        .map_err(|e| error::raise(py, "InternalError", &e.to_string()))?;
    Ok((json, report.to_json()))
}

/// `sortase idxstats`; the report as JSON (`rows` of name, length, mapped, unmapped).
#[pyfunction]
#[pyo3(signature = (path, *, threads=None))]
fn idxstats(py: Python<'_>, path: PathBuf, threads: Option<usize>) -> PyResult<String> {
    let job = IdxstatsJob::new(path);
    run_to_json(py, threads, move |rt| job.run(rt))
}

/// Runs the job `kind` (`spec::KINDS`: `sort`, `merge`, `markdup`, `view`, `fq2bam`, `faidx`,
/// `snp_pileup`, `index`, `bgzip`) from the Python wrapper's keywords
/// (`spec`: a JSON object, placed into the job's spec by [`spec::place`]) on a runtime of
/// `threads` threads and `max_memory` bytes; the report as JSON.
#[pyfunction]
#[pyo3(signature = (kind, spec, *, threads=None, max_memory=None, progress=None))]
fn run_job(
    py: Python<'_>,
    kind: &str,
    spec: &str,
    threads: Option<usize>,
    max_memory: Option<&Bound<'_, PyAny>>,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let err = |e| error::to_py_err(py, e);
    let spec_err = |e: spec::SpecError| match e.wrong_type {
        true => pyo3::exceptions::PyTypeError::new_err(e.error.to_string()),
        false => error::to_py_err(py, e.error),
    };
    let mut memory = memory_bytes(max_memory, "max_memory")?;
    let placed = spec::place(kind, spec, |s| match kind {
        "sort" => format!(
            "sortase.sort({:?}, {:?})",
            text(&s["input"]),
            text(&s["output"]["path"])
        ),
        "agd_import" => "sortase.agd.import_".into(),
        _ => format!("sortase.{}", kind.replacen("agd_", "agd.", 1)),
    })
    .map_err(err)?;
    let latest = Arc::new(LatestProgress::default());
    let run: JsonJob = match kind {
        "sort" => typed_json(kind, placed, SortJob::run).map_err(spec_err)?,
        "merge" => typed_json(kind, placed, MergeJob::run).map_err(spec_err)?,
        "markdup" => {
            // The CLI's --max-memory default (crates/cli/markdup_coord.rs).
            memory = memory.or(Some(2 << 30));
            typed_json(kind, placed, MarkdupJob::run).map_err(spec_err)?
        }
        "fq2bam" => {
            let job = spec::typed::<Fq2BamJob>(kind, placed).map_err(spec_err)?;
            // The CLI's default budget (the index's memory on top of 768 MiB per thread).
            let all = threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            memory = memory.or_else(|| sortase::fq2bam::default_memory(all.max(1), &job.index));
            json_of(job, Fq2BamJob::run)
        }
        "faidx" => typed_json(kind, placed, FaidxJob::run).map_err(spec_err)?,
        "snp_pileup" => typed_json(kind, placed, SnpPileupJob::run).map_err(spec_err)?,
        "index" => typed_json(kind, placed, IndexJob::run).map_err(spec_err)?,
        "bgzip" => typed_json(kind, placed, BgzipJob::run).map_err(spec_err)?,
        "agd_import" => typed_json(kind, placed, AgdImportJob::run).map_err(spec_err)?,
        "agd_export" => {
            let mut job = spec::typed::<AgdExportJob>(kind, placed).map_err(spec_err)?;
            job.output = job.output.with_format_options().map_err(err)?;
            json_of(job, AgdExportJob::run)
        }
        _ => {
            let mut job = spec::typed::<ViewJob>(kind, placed).map_err(spec_err)?;
            job.output = job.output.with_format_options().map_err(err)?;
            json_of(job, ViewJob::run)
        }
    };
    let rt = runtime(threads, memory, &latest).map_err(err)?;
    let job_rt = rt.clone();
    run_job_on(py, &rt, progress.map(|p| (p, &*latest)), move || {
        run(&job_rt)
    })
}

/// A job to run on a runtime, its report as JSON.
type JsonJob = Box<dyn FnOnce(&Runtime) -> sortase::Result<String> + Send>;

/// A JSON string's text, or `-` for none.
fn text(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// The spec `placed` of job `kind` as a `J`, run by `run`, its report as JSON.
fn typed_json<J: serde::de::DeserializeOwned + Send + 'static, R: serde::Serialize + 'static>(
    kind: &str,
    placed: serde_json::Value,
    run: fn(&J, &Runtime) -> sortase::Result<R>,
) -> Result<JsonJob, spec::SpecError> {
    Ok(json_of(spec::typed::<J>(kind, placed)?, run))
}

/// `job` run by `run`, its report as JSON.
fn json_of<J: Send + 'static, R: serde::Serialize + 'static>(
    job: J,
    run: fn(&J, &Runtime) -> sortase::Result<R>,
) -> JsonJob {
    Box::new(move |rt| {
        let report = run(&job, rt)?;
        serde_json::to_string(&report)
            .map_err(|e| sortase::Error::new(sortase::ErrorKind::Internal, e.to_string()))
    })
}

/// The keywords the spec of `kind` takes, with their defaults, as a JSON object: one per spec
/// field, plus the face groups' keywords (`by_name`, `by_name_lex`, `tag`, `template_coordinate`,
/// `no_pg`). python/tests/test_spec.py checks each wrapper's keywords against it.
#[pyfunction]
fn spec_keywords(py: Python<'_>, kind: &str) -> PyResult<String> {
    let keywords = spec::keywords(kind).map_err(|e| error::to_py_err(py, e))?;
    Ok(serde_json::Value::Object(keywords).to_string())
}

/// The keywords of job `kind`'s Python wrapper as a JSON list, in its `--help` order: each with
/// its default, annotation, flag and help (`spec::schema`). `sortase._takes_spec` builds the
/// wrappers' signatures and docstrings from it.
#[pyfunction]
fn spec_schema(py: Python<'_>, kind: &str) -> PyResult<String> {
    let schema = spec::schema(kind).map_err(|e| error::to_py_err(py, e))?;
    serde_json::to_string(&schema).map_err(|e| error::raise(py, "InternalError", &e.to_string()))
}

/// `sortase fetch` of `names` into `output`; the report as JSON.
#[pyfunction]
#[pyo3(signature = (fasta, names, output, *, sorted=false, loc=None, verify=false,
    threads=None))]
#[allow(clippy::too_many_arguments)]
fn fetch(
    py: Python<'_>,
    fasta: PathBuf,
    names: Vec<String>,
    output: PathBuf,
    sorted: bool,
    loc: Option<PathBuf>,
    verify: bool,
    threads: Option<usize>,
) -> PyResult<String> {
    let job = FetchJob {
        sorted,
        loc,
        output: Some(output),
        verify,
        ..FetchJob::new(fasta, FetchRequest::Names(names))
    };
    run_to_json(py, threads, move |rt| job.run(rt))
}

/// Adds this module's functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(flagstat, m)?)?;
    m.add_function(wrap_pyfunction!(idxstats, m)?)?;
    m.add_function(wrap_pyfunction!(run_job, m)?)?;
    m.add_function(wrap_pyfunction!(spec_keywords, m)?)?;
    m.add_function(wrap_pyfunction!(spec_schema, m)?)?;
    m.add_function(wrap_pyfunction!(fetch, m)?)?;
    Ok(())
}
