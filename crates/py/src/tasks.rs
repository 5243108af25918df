//! Jobs as tasks for the Dask driver (`python/sortase/distributed.py`, issue 18): thin wrappers
//! over the facade's JSON face (`sortase::tasks::{plan_json, stage_tasks_json, run_task_json,
//! finish_json, fallback_json, abort_json}`). Every function takes and returns JSON text and runs
//! without the GIL ([`run_job`]: Ctrl-C cancels).

use crate::error;
use crate::run::{run_job, runtime, LatestProgress};
use pyo3::prelude::*;
use sortase::tasks;
use std::sync::Arc;

/// Runs `f` on a runtime of `threads` and `max_memory` bytes, without the GIL.
fn with_runtime<T: Send + 'static>(
    py: Python<'_>,
    threads: Option<usize>,
    max_memory: Option<usize>,
    f: impl FnOnce(&sortase::Runtime) -> sortase::Result<T> + Send + 'static,
) -> PyResult<T> {
    let latest = Arc::new(LatestProgress::default());
    let rt = runtime(threads, max_memory, &latest).map_err(|e| error::to_py_err(py, e))?;
    let job_rt = rt.clone();
    run_job(py, &rt, None, move || f(&job_rt))
}

/// Plans a job of `kind` (`sort`, `flagstat`, `idxstats`, `index`, `snp_pileup`, `merge`) from its
/// spec as JSON; `cut`
/// is JSON of `{"tasks", "task_memory", "reduce_tasks"}`. Returns the plan as JSON.
#[pyfunction]
#[pyo3(signature = (kind, job, cut="{}", *, threads=None, max_memory=None))]
fn task_plan(
    py: Python<'_>,
    kind: String,
    job: String,
    cut: &str,
    threads: Option<usize>,
    max_memory: Option<usize>,
) -> PyResult<String> {
    let cut = cut.to_owned();
    with_runtime(py, threads, max_memory, move |rt| {
        tasks::plan_json(&kind, &job, &cut, rt)
    })
}

/// The tasks of `stage` (JSON array) from the outputs of the stage before (JSON array).
#[pyfunction]
#[pyo3(signature = (plan, stage, outputs="[]", *, threads=None))]
fn task_stage(
    py: Python<'_>,
    plan: String,
    stage: String,
    outputs: &str,
    threads: Option<usize>,
) -> PyResult<String> {
    let outputs = outputs.to_owned();
    with_runtime(py, threads, None, move |rt| {
        tasks::stage_tasks_json(&plan, &stage, &outputs, rt)
    })
}

/// Runs one task (JSON); returns its output (JSON).
#[pyfunction]
#[pyo3(signature = (task, *, threads=None, max_memory=None))]
fn task_run(
    py: Python<'_>,
    task: String,
    threads: Option<usize>,
    max_memory: Option<usize>,
) -> PyResult<String> {
    with_runtime(py, threads, max_memory, move |rt| {
        tasks::run_task_json(&task, rt)
    })
}

/// Runs one task (JSON) of a job on object storage, its streamed inputs read from their objects:
/// each `aliases` path (local path -> URL) stands for its object while the task runs, under the
/// process's S3 settings ([`configure_s3`] with `keep_aliases=True`). Returns its output (JSON)
/// and the bytes its readers fetched through the aliases.
#[pyfunction]
#[pyo3(signature = (task, aliases, *, threads=None, max_memory=None))]
fn task_run_remote(
    py: Python<'_>,
    task: String,
    aliases: std::collections::HashMap<String, String>,
    threads: Option<usize>,
    max_memory: Option<usize>,
) -> PyResult<(String, u64)> {
    // Each aliased file with the byte ranges the task reads of it (its reader fetches them in as
    // few requests as it can).
    let io = tasks::task_io(&task).map_err(|e| error::to_py_err(py, e))?;
    let planned = aliases.into_iter().map(|(path, url)| {
        let ranges = io
            .reads
            .iter()
            .find(|s| s.path.to_str() == Some(path.as_str()))
            .and_then(|s| s.ranges.clone());
        (path, url, ranges)
    });
    let aliases = sortase::remote::alias_paths(planned);
    let out = with_runtime(py, threads, max_memory, move |rt| {
        tasks::run_task_json(&task, rt)
    })?;
    Ok((out, aliases.fetched()))
}

/// What a task (JSON) reads and writes, as JSON: `{"kind", "reads": [{"path", "ranges", "streamed"}],
/// "writes": [path]}` (`ranges`: `[start, end)` byte ranges, `null` for the whole file).
#[pyfunction]
fn task_io(py: Python<'_>, task: String) -> PyResult<String> {
    with_runtime(py, Some(1), None, move |_| tasks::task_io_json(&task))
}

/// The bytes a task (JSON) read and wrote on the local file system after it ran: `(read, written)`.
#[pyfunction]
fn task_local_bytes(py: Python<'_>, task: String) -> PyResult<(u64, u64)> {
    with_runtime(py, Some(1), None, move |_| {
        tasks::task_local_bytes_json(&task)
    })
}

/// Where a BAM's header ends in `prefix` (the file's first bytes): the end of the BGZF block holding
/// its last byte, or `None` when the prefix ends first (fetch more). With `whole` the prefix is the
/// whole file and a header that does not end in it raises.
#[pyfunction]
#[pyo3(signature = (prefix, whole=false))]
fn bam_header_end(py: Python<'_>, prefix: &[u8], whole: bool) -> PyResult<Option<u64>> {
    tasks::bam_header_end(prefix, whole).map_err(|e| error::to_py_err(py, e))
}

/// The files the layout of a sort, merge or markdup reads besides the outputs (JSON array): the
/// parts' sidecars, as a JSON array of paths.
#[pyfunction]
fn task_layout_reads(py: Python<'_>, plan: String, outputs: String) -> PyResult<String> {
    with_runtime(py, Some(1), None, move |_| {
        tasks::layout_reads_json(&plan, &outputs)
    })
}

/// Finishes a job from its last stage's outputs (JSON array); returns the report (JSON).
#[pyfunction]
#[pyo3(signature = (plan, outputs, *, threads=None))]
fn task_finish(
    py: Python<'_>,
    plan: String,
    outputs: String,
    threads: Option<usize>,
) -> PyResult<String> {
    with_runtime(py, threads, None, move |rt| {
        tasks::finish_json(&plan, &outputs, rt)
    })
}

/// The parallel finish of a sort or merge, step 1: the output laid out from the last stage's
/// outputs (JSON array) and the parts' sidecars, its index written; with `preallocate` the output's
/// temporary file created at its size. Returns the layout (JSON).
#[pyfunction]
#[pyo3(signature = (plan, outputs, preallocate, *, threads=None))]
fn task_layout(
    py: Python<'_>,
    plan: String,
    outputs: String,
    preallocate: bool,
    threads: Option<usize>,
) -> PyResult<String> {
    with_runtime(py, threads, None, move |rt| {
        tasks::layout_json(&plan, &outputs, preallocate, rt)
    })
}

/// Step 2: the place tasks (JSON array) of a layout: each writes one part at its offset.
#[pyfunction]
fn task_place(py: Python<'_>, layout: String) -> PyResult<String> {
    with_runtime(py, Some(1), None, move |_| tasks::place_tasks_json(&layout))
}

/// Step 3: renames the placed output and its index into place; returns the job's report (JSON).
#[pyfunction]
fn task_commit(py: Python<'_>, layout: String) -> PyResult<String> {
    with_runtime(py, Some(1), None, move |_| tasks::commit_json(&layout))
}

/// The plan's stages, what each takes and what the finish takes (JSON: `{"stages": [{"name",
/// "takes"}], "finish": [...]}`): a driver runs every kind from it.
#[pyfunction]
fn task_stage_graph(py: Python<'_>, plan: String) -> PyResult<String> {
    with_runtime(py, Some(1), None, move |_| tasks::stage_graph_json(&plan))
}

/// The plan to run instead after a range task failed (`None`: the kind has none).
#[pyfunction]
fn task_fallback(py: Python<'_>, plan: String) -> PyResult<Option<String>> {
    with_runtime(py, Some(1), None, move |_| tasks::fallback_json(&plan))
}

/// Gives a job up: removes its work directory.
#[pyfunction]
fn task_abort(py: Python<'_>, plan: String) -> PyResult<()> {
    with_runtime(py, Some(1), None, move |_| tasks::abort_json(&plan))
}

/// samtools flagstat's text (`output_fmt`: `default`, `json` or `tsv`) of a flagstat report (JSON).
#[pyfunction]
#[pyo3(signature = (report, output_fmt="default"))]
fn flagstat_text(py: Python<'_>, report: &str, output_fmt: &str) -> PyResult<String> {
    let report: sortase::FlagstatReport = serde_json::from_str(report)
        .map_err(|e| error::raise(py, "ArgumentError", &format!("flagstat report JSON: {e}")))?;
    Ok(report.format(output_fmt))
}

/// The spec (JSON) of a snp-pileup job with FACETS' defaults, for the caller to adjust.
#[pyfunction]
fn snp_pileup_spec(
    py: Python<'_>,
    vcf: std::path::PathBuf,
    output: std::path::PathBuf,
    bams: Vec<std::path::PathBuf>,
) -> PyResult<String> {
    serde_json::to_string(&sortase::SnpPileupJob::new(vcf, output, bams))
        .map_err(|e| error::raise(py, "InternalError", &e.to_string()))
}

/// Sets the S3 settings with which this process opens `s3://` inputs (the driver plans on the
/// objects through ranged reads): the endpoint, the credentials and the region, as
/// `storage_options` give them, and `aliases` (local path -> URL: a job naming the path reads
/// the object); `clear=True` goes back to the AWS environment's and no aliases. With
/// `keep_aliases=True` (what a task calls on a worker) the aliases set stay, and the objects
/// opened before are forgotten only when the settings change.
#[pyfunction]
#[pyo3(signature = (*, endpoint_url=None, key=None, secret=None, token=None, region=None, anon=false, aliases=None, clear=false, keep_aliases=false))]
#[allow(clippy::too_many_arguments)]
fn configure_s3(
    endpoint_url: Option<String>,
    key: Option<String>,
    secret: Option<String>,
    token: Option<String>,
    region: Option<String>,
    anon: bool,
    aliases: Option<std::collections::HashMap<String, String>>,
    clear: bool,
    keep_aliases: bool,
) {
    let options = sortase::remote::S3Options {
        endpoint: endpoint_url,
        access_key_id: key,
        secret_access_key: secret,
        session_token: token,
        region,
        anonymous: anon,
        aliases: aliases.unwrap_or_default().into_iter().collect(),
    };
    if keep_aliases {
        sortase::remote::use_s3_settings(options);
    } else {
        sortase::remote::set_s3_options((!clear).then_some(options));
    }
}

/// Bytes fetched from remote objects and requests made by this process so far.
#[pyfunction]
fn remote_fetched() -> (u64, u64) {
    sortase::remote::fetched()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(configure_s3, m)?)?;
    m.add_function(wrap_pyfunction!(remote_fetched, m)?)?;
    m.add_function(wrap_pyfunction!(task_plan, m)?)?;
    m.add_function(wrap_pyfunction!(task_stage, m)?)?;
    m.add_function(wrap_pyfunction!(task_run, m)?)?;
    m.add_function(wrap_pyfunction!(task_run_remote, m)?)?;
    m.add_function(wrap_pyfunction!(task_io, m)?)?;
    m.add_function(wrap_pyfunction!(task_local_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(bam_header_end, m)?)?;
    m.add_function(wrap_pyfunction!(task_layout_reads, m)?)?;
    m.add("TASK_READ_SLACK", tasks::READ_SLACK)?;
    m.add_function(wrap_pyfunction!(task_finish, m)?)?;
    m.add_function(wrap_pyfunction!(task_layout, m)?)?;
    m.add_function(wrap_pyfunction!(task_place, m)?)?;
    m.add_function(wrap_pyfunction!(task_commit, m)?)?;
    m.add_function(wrap_pyfunction!(task_stage_graph, m)?)?;
    m.add_function(wrap_pyfunction!(task_fallback, m)?)?;
    m.add_function(wrap_pyfunction!(task_abort, m)?)?;
    m.add_function(wrap_pyfunction!(flagstat_text, m)?)?;
    m.add_function(wrap_pyfunction!(snp_pileup_spec, m)?)?;
    Ok(())
}
