//! Extra column groups: columns added to a dataset after import (a duplicate flag from
//! `agd markdup`, a program's per-record output from `agd add-column`) without rewriting the
//! others. Each group is one Parquet file per chunk, `DIR/<group dir>/<chunk:06>.parquet`, holding
//! as many rows as the chunk has records, in record order; the manifest lists the group
//! ([`crate::manifest::ExtraGroup`]).
//!
//! One extra group has a meaning to sortase: [`DUPLICATE_GROUP`], whose Boolean column
//! `duplicate` is the final state of flag 0x400 (set where true, cleared where false).

use crate::manifest::ExtraGroup;
use crate::{AgdError, ChunkEntry, ChunkFile};
use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The extra group (and its one Boolean column) holding flag 0x400: export and flagstat apply it.
pub const DUPLICATE_GROUP: &str = "duplicate";

/// The file of extra group `group` for chunk `index` of dataset `dir`.
pub fn extra_path(dir: &Path, group: &ExtraGroup, index: usize) -> PathBuf {
    extra_dir_path(dir, &group.dir, index)
}

/// The file of chunk `index` in directory `group_dir` of dataset `dir`.
pub fn extra_dir_path(dir: &Path, group_dir: &str, index: usize) -> PathBuf {
    dir.join(group_dir).join(format!("{index:06}.parquet"))
}

/// Reads extra group `group` of `chunk`, checking that the file has the manifest's columns and the
/// chunk's record count.
pub fn read_extra(
    dir: &Path,
    group: &ExtraGroup,
    chunk: &ChunkEntry,
) -> Result<ChunkFile, AgdError> {
    let path = extra_path(dir, group, chunk.index);
    let file = crate::decode::open_chunk(&path, chunk.index)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| AgdError::chunk(&path, format!("truncated or not Parquet ({e})")))?;
    let names: Vec<&String> = builder.schema().fields().iter().map(|f| f.name()).collect();
    if names.len() != group.columns.len() || names.iter().zip(&group.columns).any(|(a, b)| *a != b)
    {
        return Err(AgdError::chunk(
            &path,
            format!(
                "columns {names:?} are not the manifest's {:?} of extra group {}",
                group.columns, group.name
            ),
        ));
    }
    let reader = builder
        .with_batch_size(chunk.records.max(1) as usize)
        .build()
        .map_err(|e| AgdError::chunk(&path, e))?;
    let mut batches = Vec::with_capacity(1);
    for b in reader {
        batches.push(b.map_err(|e| AgdError::chunk(&path, format!("corrupt ({e})")))?);
    }
    let schema = reader_schema(&batches, &path)?;
    let batch = arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| AgdError::chunk(&path, e))?;
    if batch.num_rows() as u64 != chunk.records {
        return Err(AgdError::chunk(
            &path,
            format!(
                "holds {} records, the manifest says {}",
                batch.num_rows(),
                chunk.records
            ),
        ));
    }
    Ok(ChunkFile { path, batch })
}

fn reader_schema(
    batches: &[RecordBatch],
    path: &Path,
) -> Result<arrow_schema::SchemaRef, AgdError> {
    batches
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| AgdError::chunk(path, "no record batch"))
}

/// Writes `batch` (one chunk of an extra group) as one Parquet file with one row group, zstd at
/// `zstd_level`.
pub fn write_extra<W: Write + Send>(
    batch: &RecordBatch,
    out: W,
    zstd_level: i32,
) -> Result<W, AgdError> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(zstd_level)?))
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(None)
        .build();
    let mut w = ArrowWriter::try_new(out, batch.schema(), Some(props))?;
    w.write(batch)?;
    Ok(w.into_inner()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Provenance;
    use arrow_array::{ArrayRef, BooleanArray};
    use std::sync::Arc;

    #[test]
    fn writes_and_checks_an_extra_group() {
        let dir = tempfile::tempdir().unwrap();
        let group = ExtraGroup {
            name: DUPLICATE_GROUP.into(),
            dir: "duplicate".into(),
            columns: vec!["duplicate".into()],
            provenance: Provenance {
                command_line: String::new(),
                version: String::new(),
            },
        };
        let column: ArrayRef = Arc::new(BooleanArray::from(vec![true, false]));
        let batch = RecordBatch::try_from_iter([("duplicate", column)]).unwrap();
        std::fs::create_dir(dir.path().join("duplicate")).unwrap();
        let path = extra_path(dir.path(), &group, 0);
        write_extra(&batch, std::fs::File::create(&path).unwrap(), 3).unwrap();
        let mut chunk = ChunkEntry {
            index: 0,
            first: 0,
            last: 1,
            records: 2,
            positions: None,
        };
        assert_eq!(read_extra(dir.path(), &group, &chunk).unwrap().batch, batch);
        chunk.records = 3;
        let e = read_extra(dir.path(), &group, &chunk)
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds 2 records, the manifest says 3"), "{e}");
        let other = ExtraGroup {
            columns: vec!["x".into()],
            ..group
        };
        let e = read_extra(dir.path(), &other, &chunk)
            .unwrap_err()
            .to_string();
        assert!(e.contains("are not the manifest's"), "{e}");
    }
}
