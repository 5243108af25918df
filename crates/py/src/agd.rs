//! `sortase agd import|export` as Python functions (issue 19; `flagstat`, `idxstats` and `view` of a
//! dataset are those of `crates/py/src/jobs.rs`, whose jobs read a dataset too): keyword arguments named as
//! the CLI's long options (`-0 -1 -2 -s` as `unpaired`, `read1`, `read2`, `interleaved`) → the
//! facade's AGD jobs → the report as JSON. Reading a dataset's columns needs no Rust: the chunk
//! files are Parquet, read by `python/sortase/agd.py` with pyarrow.

use crate::error;
use crate::jobs::run_to_json;
use pyo3::prelude::*;
use sortase::agd::FastqInput;
use sortase::{AgdExportJob, AgdImportJob, OutputSpec};
use std::path::PathBuf;

/// `sortase agd import`: SAM/BAM/CRAM `input`, or FASTQ (`input` and `input2`, or the samtools
/// import options); the report as JSON.
#[pyfunction]
#[pyo3(signature = (input=None, output=None, input2=None, *, unpaired=None, read1=None,
    read2=None, interleaved=None, rg=None, rg_line=None, chunk_size=None, level=None,
    reference=None, threads=None, checksums=false))]
#[allow(clippy::too_many_arguments)]
fn agd_import(
    py: Python<'_>,
    input: Option<String>,
    output: Option<PathBuf>,
    input2: Option<String>,
    unpaired: Option<String>,
    read1: Option<String>,
    read2: Option<String>,
    interleaved: Option<String>,
    rg: Option<String>,
    rg_line: Option<Vec<String>>,
    chunk_size: Option<u64>,
    level: Option<i32>,
    reference: Option<PathBuf>,
    threads: Option<usize>,
    checksums: bool,
) -> PyResult<String> {
    let Some(output) = output else {
        return Err(error::raise(
            py,
            "ArgumentError",
            "agd import: output is required",
        ));
    };
    let fastq = FastqInput {
        unpaired,
        read1,
        read2,
        interleaved,
        read_group: rg,
        read_group_line: rg_line.filter(|l| !l.is_empty()).map(|l| l.join("\t")),
    };
    if input.is_none() && (input2.is_some() || fastq.paths().is_empty()) {
        return Err(error::raise(
            py,
            "ArgumentError",
            "agd import: give one input (SAM/BAM/CRAM/FASTQ), two FASTQ inputs, or FASTQ files \
                 with unpaired/read1/read2/interleaved",
        ));
    }
    let inputs: Vec<String> = input.into_iter().chain(input2).collect();
    let mut job =
        AgdImportJob::from_inputs(&inputs, fastq, output).map_err(|e| error::to_py_err(py, e))?;
    if let Some(c) = chunk_size {
        job.chunk_size = c;
    }
    if let Some(l) = level {
        job.zstd_level = l;
    }
    job.reference = reference;
    job.checksums = checksums;
    job.command_line = "sortase.agd.import_".into();
    run_to_json(py, threads, move |rt| job.run(rt))
}

/// `sortase agd export`; the report as JSON.
#[pyfunction]
#[pyo3(signature = (input, output=None, *, output_fmt=None, level=None, reference=None,
    threads=None, checksums=false))]
#[allow(clippy::too_many_arguments)]
fn agd_export(
    py: Python<'_>,
    input: PathBuf,
    output: Option<PathBuf>,
    output_fmt: Option<String>,
    level: Option<i32>,
    reference: Option<PathBuf>,
    threads: Option<usize>,
    checksums: bool,
) -> PyResult<String> {
    let spec = OutputSpec {
        path: output,
        format: output_fmt,
        level,
        reference,
        ..OutputSpec::default()
    };
    let job = AgdExportJob {
        checksums,
        ..AgdExportJob::new(input, spec)
    };
    run_to_json(py, threads, move |rt| job.run(rt))
}

/// Adds this module's functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(agd_import, m)?)?;
    m.add_function(wrap_pyfunction!(agd_export, m)?)?;
    Ok(())
}
