//! Extra column groups as jobs ([`AgdAddColumnJob`], [`AgdDropColumnJob`]), written into the
//! dataset in place by [`sortase_exec::agd::columns`] (a private directory renamed into the
//! dataset, `manifest.json` replaced last).
//!
//! `agd add-column` reads a program's per-record output in one of three forms:
//! - a text file, one value per line, line `i` for record `i` (ordinals from 0, in dataset order):
//!   what `cut`, `awk` or a script printing one line per record produce;
//! - `.tsv`: `ORDINAL<TAB>VALUE` lines in any order, every ordinal exactly once (output of a
//!   program that ran on the records out of order, e.g. per chunk in parallel);
//! - `.parquet`: a table whose columns become the group's columns; with an integer `ordinal` column
//!   the rows are placed by it (every ordinal exactly once), else they are in record order.
//!
//! In text and TSV an empty value is null. The type of a text or TSV column is `--type`, or when
//! `auto` the narrowest of integer (Int64), float (Float64), boolean (`true`/`false`) and string
//! that holds every value; the `duplicate` group is Boolean and also takes `0`/`1`. A count that is
//! not the dataset's record count is an error naming the file.

use anyhow::{bail, Context};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::extra::DUPLICATE_GROUP;
use sortase_agd::Provenance;
use sortase_exec::agd::columns::{write_manifest, PendingGroup};
use sortase_exec::agd::open_manifest;
use sortase_exec::error::{Error, Result};
use sortase_exec::runtime::Runtime;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The type of a text or TSV column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// The narrowest type that holds every value (Boolean for the `duplicate` group).
    #[default]
    Auto,
    /// 64-bit signed integers.
    Int,
    /// 64-bit floats.
    Float,
    /// `true`/`false` (and `0`/`1`).
    Bool,
    /// UTF-8 strings.
    String,
}

impl ColumnType {
    /// The type named `s` (`auto`, `int`, `float`, `bool`, `string`).
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "auto" => Self::Auto,
            "int" => Self::Int,
            "float" => Self::Float,
            "bool" => Self::Bool,
            "string" => Self::String,
            _ => {
                return Err(Error::argument(format!(
                    "--type {s}: one of auto, int, float, bool, string"
                )))
            }
        })
    }
}

/// `sortase agd add-column`: a program's per-record output as an extra column group (added, or
/// replacing the group of that name), without rewriting any other group.
///
/// With the `clap` feature it is also the command's flags (`clap::Args`, flattened by `sortase agd
/// add-column`, which adds `-@`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AgdAddColumnJob {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// The group's name (and its column's, for text and TSV values); `duplicate` sets flag 0x400.
    #[cfg_attr(feature = "clap", arg(long = "name", value_name = "NAME"))]
    pub name: String,
    /// The values: a text file with one value per line in record order, a .tsv of
    /// ORDINAL<TAB>VALUE lines, or a .parquet table (placed by its `ordinal` column if it has one).
    #[cfg_attr(feature = "clap", arg(long = "from", value_name = "FILE"))]
    pub from: PathBuf,
    /// Type of text and TSV values.
    #[cfg_attr(
        feature = "clap",
        arg(long = "type", value_name = "TYPE", value_enum, default_value_t = ColumnType::Auto)
    )]
    pub column_type: ColumnType,
    /// zstd level of the group's files (1-22).
    #[cfg_attr(
        feature = "clap",
        arg(long = "level", value_name = "INT", default_value_t = sortase_exec::agd::DEFAULT_ZSTD_LEVEL)
    )]
    pub zstd_level: i32,
    /// The command line recorded as the group's provenance.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub command_line: String,
}

/// What an update of a dataset did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AgdColumnsReport {
    /// The group written or dropped.
    pub group: String,
    /// Its columns.
    pub columns: Vec<String>,
    /// Whether it replaced (or, dropping, removed) a group of that name.
    pub replaced: bool,
    /// Records it holds.
    pub records: u64,
}

impl AgdAddColumnJob {
    /// Adds the values of `from` to `dataset` as group `name`, type inferred.
    pub fn new(
        dataset: impl Into<PathBuf>,
        name: impl Into<String>,
        from: impl Into<PathBuf>,
    ) -> Self {
        Self {
            dataset: dataset.into(),
            name: name.into(),
            from: from.into(),
            column_type: ColumnType::Auto,
            zstd_level: sortase_exec::agd::DEFAULT_ZSTD_LEVEL,
            command_line: String::new(),
        }
    }

    /// Runs the job on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<AgdColumnsReport> {
        add_column(self, rt)
            .with_context(|| format!("agd add-column {}", self.dataset.display()))
            .map_err(Error::from)
    }
}

/// `sortase agd drop-column`: removes an extra column group from the manifest, then its files.
///
/// With the `clap` feature it is also the command's flags (`clap::Args`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AgdDropColumnJob {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// The extra group to drop.
    #[cfg_attr(feature = "clap", arg(long = "name", value_name = "NAME"))]
    pub name: String,
}

impl AgdDropColumnJob {
    /// Drops group `name` of `dataset`.
    pub fn new(dataset: impl Into<PathBuf>, name: impl Into<String>) -> Self {
        Self {
            dataset: dataset.into(),
            name: name.into(),
        }
    }

    /// Runs the job.
    pub fn run(&self) -> Result<AgdColumnsReport> {
        drop_column(self)
            .with_context(|| format!("agd drop-column {}", self.dataset.display()))
            .map_err(Error::from)
    }
}

/// The values of `job.from` as columns of `records` rows in record order.
fn read_values(job: &AgdAddColumnJob, records: u64) -> anyhow::Result<Vec<(String, ArrayRef)>> {
    let path = &job.from;
    let name = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let ty = match (job.column_type, job.name == DUPLICATE_GROUP) {
        (ColumnType::Auto, true) => ColumnType::Bool,
        (t, _) => t,
    };
    let columns = match ext {
        "parquet" => read_parquet(path, records)?,
        "tsv" => {
            let (ordinals, values) = read_lines(path, true)?;
            let values = place(&name, &ordinals, values, records)?;
            vec![(job.name.clone(), typed(&name, &values, ty)?)]
        }
        _ => {
            let (_, values) = read_lines(path, false)?;
            if values.len() as u64 != records {
                bail!(
                    "{name}: {} values, the dataset has {records} records (one line per record)",
                    values.len()
                );
            }
            vec![(job.name.clone(), typed(&name, &values, ty)?)]
        }
    };
    if job.name == DUPLICATE_GROUP
        && (columns.len() != 1
            || columns[0].0 != DUPLICATE_GROUP
            || columns[0].1.data_type() != &arrow_schema::DataType::Boolean)
    {
        bail!("{name}: the duplicate group is one Boolean column named duplicate");
    }
    Ok(columns)
}

/// The lines of a text file (or `ORDINAL<TAB>VALUE` lines), with their ordinals for TSV.
fn read_lines(path: &Path, tsv: bool) -> anyhow::Result<(Vec<u64>, Vec<String>)> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot open"))?;
    let (mut ordinals, mut values) = (Vec::new(), Vec::new());
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("{name}: line {}", i + 1))?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if tsv {
            let (o, v) = line
                .split_once('\t')
                .with_context(|| format!("{name}: line {}: not ORDINAL<TAB>VALUE", i + 1))?;
            let o: u64 = o.parse().with_context(|| {
                format!("{name}: line {}: ordinal {o:?} is not a number", i + 1)
            })?;
            ordinals.push(o);
            values.push(v.to_string());
        } else {
            values.push(line.to_string());
        }
    }
    Ok((ordinals, values))
}

/// `values` placed at their `ordinals` (each of `0..records` exactly once).
fn place(
    name: &str,
    ordinals: &[u64],
    values: Vec<String>,
    records: u64,
) -> anyhow::Result<Vec<String>> {
    if ordinals.len() as u64 != records {
        bail!(
            "{name}: {} values, the dataset has {records} records (one ordinal per record)",
            ordinals.len()
        );
    }
    let mut placed: Vec<Option<String>> = vec![None; values.len()];
    for (&o, v) in ordinals.iter().zip(values) {
        let slot = placed.get_mut(o as usize).with_context(|| {
            format!(
                "{name}: ordinal {o} is past the last record ({})",
                records - 1
            )
        })?;
        if slot.replace(v).is_some() {
            bail!("{name}: ordinal {o} appears twice");
        }
    }
    // INVARIANT: as many distinct ordinals below `records` as records: every slot is filled.
    Ok(placed.into_iter().map(|v| v.unwrap_or_default()).collect())
}

/// Parses `values` (empty: null) as `ty`.
fn typed(name: &str, values: &[String], ty: ColumnType) -> anyhow::Result<ArrayRef> {
    let nonempty = || values.iter().filter(|v| !v.is_empty());
    let ty = match ty {
        ColumnType::Auto if nonempty().all(|v| v.parse::<i64>().is_ok()) => ColumnType::Int,
        ColumnType::Auto if nonempty().all(|v| v.parse::<f64>().is_ok()) => ColumnType::Float,
        ColumnType::Auto if nonempty().all(|v| v == "true" || v == "false") => ColumnType::Bool,
        ColumnType::Auto => ColumnType::String,
        t => t,
    };
    let bad = |i: usize, what: &str| {
        anyhow::anyhow!("{name}: value {} ({:?}) is not {what}", i + 1, values[i])
    };
    fn opt(v: &str) -> Option<&str> {
        (!v.is_empty()).then_some(v)
    }
    Ok(match ty {
        ColumnType::Int => Arc::new(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    opt(v)
                        .map(|s| s.parse::<i64>().map_err(|_| bad(i, "an integer")))
                        .transpose()
                })
                .collect::<anyhow::Result<Int64Array>>()?,
        ),
        ColumnType::Float => Arc::new(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    opt(v)
                        .map(|s| s.parse::<f64>().map_err(|_| bad(i, "a number")))
                        .transpose()
                })
                .collect::<anyhow::Result<Float64Array>>()?,
        ),
        ColumnType::Bool => Arc::new(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    opt(v)
                        .map(|s| match s {
                            "true" | "1" => Ok(true),
                            "false" | "0" => Ok(false),
                            _ => Err(bad(i, "true, false, 1 or 0")),
                        })
                        .transpose()
                })
                .collect::<anyhow::Result<BooleanArray>>()?,
        ),
        _ => Arc::new(values.iter().map(|v| opt(v)).collect::<StringArray>()),
    })
}

/// The values of an integer column without nulls, as `u64` (`None`: not such a column).
fn ordinals(column: &ArrayRef) -> Option<Vec<u64>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type, UInt32Type, UInt64Type};
    use arrow_schema::DataType;
    if column.null_count() > 0 {
        return None;
    }
    let signed = |v: &mut dyn Iterator<Item = i64>| v.map(|x| u64::try_from(x).ok()).collect();
    match column.data_type() {
        DataType::UInt64 => Some(column.as_primitive::<UInt64Type>().values().to_vec()),
        DataType::UInt32 => Some(
            column
                .as_primitive::<UInt32Type>()
                .values()
                .iter()
                .map(|&x| u64::from(x))
                .collect(),
        ),
        DataType::Int64 => signed(&mut column.as_primitive::<Int64Type>().values().iter().copied()),
        DataType::Int32 => signed(
            &mut column
                .as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|&x| i64::from(x)),
        ),
        _ => None,
    }
}

/// A Parquet table's columns in record order (placed by an `ordinal` column when there is one).
fn read_parquet(path: &Path, records: u64) -> anyhow::Result<Vec<(String, ArrayRef)>> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot open"))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("{name}: not Parquet"))?
        .build()
        .with_context(|| format!("{name}: not Parquet"))?;
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .with_context(|| format!("{name}: corrupt"))?;
    let batch = arrow_select::concat::concat_batches(&schema, &batches)?;
    if batch.num_rows() as u64 != records {
        bail!(
            "{name}: {} rows, the dataset has {records} records",
            batch.num_rows()
        );
    }
    let ordinal = batch.schema().index_of("ordinal").ok();
    let take = match ordinal {
        None => None,
        Some(i) => {
            let o = ordinals(batch.column(i))
                .with_context(|| format!("{name}: column ordinal is not a non-null integer"))?;
            let mut by = vec![u64::MAX; o.len()];
            for (row, &ord) in o.iter().enumerate() {
                let slot = by
                    .get_mut(ord as usize)
                    .with_context(|| format!("{name}: ordinal {ord} is past the last record"))?;
                if *slot != u64::MAX {
                    bail!("{name}: ordinal {ord} appears twice");
                }
                *slot = row as u64;
            }
            Some(arrow_array::UInt64Array::from(by))
        }
    };
    let mut out = Vec::new();
    for (i, f) in batch.schema().fields().iter().enumerate() {
        if Some(i) == ordinal {
            continue;
        }
        let column = match &take {
            Some(t) => arrow_select::take::take(batch.column(i), t, None)?,
            None => batch.column(i).clone(),
        };
        out.push((f.name().clone(), column));
    }
    if out.is_empty() {
        bail!("{name}: no value columns");
    }
    Ok(out)
}

fn add_column(job: &AgdAddColumnJob, rt: &Runtime) -> anyhow::Result<AgdColumnsReport> {
    sortase_agd::manifest::check_extra_name(&job.name).map_err(Error::argument)?;
    sortase_exec::agd::check_zstd_level(job.zstd_level, "--level")?;
    let manifest = open_manifest(&job.dataset)?;
    let columns = read_values(job, manifest.records)?;
    rt.check_cancelled()?;
    let mut pending = PendingGroup::create(&job.dataset, &job.name)?;
    let names: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
    let whole = RecordBatch::try_from_iter(columns)?;
    rt.install(|| {
        manifest.chunks.par_iter().try_for_each(|c| {
            if rt.cancel_flag().is_cancelled() {
                bail!("interrupted");
            }
            let slice = whole.slice(c.first as usize, c.records as usize);
            pending.write(c, &slice, job.zstd_level)
        })
    })?;
    rt.check_cancelled()?;
    pending.set_columns(names.clone());
    let provenance = Provenance {
        command_line: job.command_line.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let records = manifest.records;
    let replaced = pending.commit(&job.dataset, manifest, provenance)?;
    Ok(AgdColumnsReport {
        group: job.name.clone(),
        columns: names,
        replaced,
        records,
    })
}

fn drop_column(job: &AgdDropColumnJob) -> anyhow::Result<AgdColumnsReport> {
    let mut manifest = open_manifest(&job.dataset)?;
    let i = manifest
        .extra
        .iter()
        .position(|g| g.name == job.name)
        .ok_or_else(|| {
            let names: Vec<&str> = manifest.extra.iter().map(|g| g.name.as_str()).collect();
            Error::argument(format!(
                "{}: no extra group {:?} (extra groups: {names:?})",
                job.dataset.display(),
                job.name
            ))
        })?;
    let group = manifest.extra.remove(i);
    write_manifest(&job.dataset, &manifest)?;
    let _ = std::fs::remove_dir_all(job.dataset.join(&group.dir));
    Ok(AgdColumnsReport {
        group: group.name,
        columns: group.columns,
        replaced: true,
        records: manifest.records,
    })
}
