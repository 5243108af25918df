//! Columns back into records: [`read_group`] opens one chunk file and checks it against the manifest
//! (present, Parquet, the group's columns, the record count); [`append_records`] rebuilds the BAM
//! records of a chunk from its four groups, byte for byte as they were imported.

use crate::encode::{computed_bin, BASES};
use crate::{chunk_path, AgdError, ChunkEntry, Group};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt16Type, UInt8Type};
use arrow_array::{
    Array, BinaryArray, BooleanArray, Int32Array, RecordBatch, StringArray, UInt16Array, UInt8Array,
};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::reader::{ChunkReader, Length};
use sortase_bam::cigar;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One group of one chunk, read.
#[derive(Debug)]
pub struct ChunkFile {
    /// The file.
    pub path: PathBuf,
    /// Its columns (all of the group's, or the projection asked for).
    pub batch: RecordBatch,
}

impl ChunkFile {
    /// Column `name`, or an error naming the file.
    pub fn column(&self, name: &str) -> Result<&arrow_array::ArrayRef, AgdError> {
        self.batch
            .column_by_name(name)
            .ok_or_else(|| AgdError::chunk(&self.path, format!("no column {name}")))
    }
}

/// Reads group `group` of `chunk` from dataset `dir`: all columns, or only `columns`. Checks that the
/// file exists, is Parquet, has the group's columns and types, and holds the manifest's count.
pub fn read_group(
    dir: &Path,
    group: Group,
    chunk: &ChunkEntry,
    columns: Option<&[&str]>,
) -> Result<ChunkFile, AgdError> {
    read_group_rows(dir, group, chunk, columns, None)
}

/// A chunk file opened for Parquet's reader: a local file, or the bytes of a remote object (a
/// chunk file is read whole: a distributed task on object storage reads it through
/// [`sortase_io::Source`] in one pass instead of copying it to a local file first).
pub(crate) enum ChunkInput {
    File(std::fs::File),
    Object(Bytes),
}

impl Length for ChunkInput {
    fn len(&self) -> u64 {
        match self {
            Self::File(f) => f.len(),
            Self::Object(b) => Length::len(b),
        }
    }
}

impl ChunkReader for ChunkInput {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            Self::File(f) => Box::new(f.get_read(start)?),
            Self::Object(b) => Box::new(b.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            Self::File(f) => f.get_bytes(start, length),
            Self::Object(b) => b.get_bytes(start, length),
        }
    }
}

/// Opens chunk `index`'s file `path` (of any group; a path that stands for an object, or a URL,
/// is read from the object): a missing file is a missing chunk.
pub(crate) fn open_chunk(path: &Path, index: usize) -> Result<ChunkInput, AgdError> {
    let failed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => AgdError::MissingChunk {
            path: path.to_path_buf(),
            chunk: index,
        },
        _ => AgdError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    };
    if !path.to_str().is_some_and(sortase_io::is_remote) {
        return std::fs::File::open(path)
            .map(ChunkInput::File)
            .map_err(failed);
    }
    let mut source = sortase_io::Source::open_path(path).map_err(failed)?;
    let mut bytes = Vec::with_capacity(source.len().map_err(failed)? as usize);
    source.read_to_end(&mut bytes).map_err(failed)?;
    Ok(ChunkInput::Object(Bytes::from(bytes)))
}

/// [`read_group`] of only the rows where `selected` is true (`None`: all rows; one value per
/// record of the chunk). The file's page index lets the reader skip the pages that hold no selected
/// row instead of decompressing them.
pub fn read_group_rows(
    dir: &Path,
    group: Group,
    chunk: &ChunkEntry,
    columns: Option<&[&str]>,
    selected: Option<&BooleanArray>,
) -> Result<ChunkFile, AgdError> {
    let path = chunk_path(dir, group, chunk.index);
    let file = open_chunk(&path, chunk.index)?;
    let options =
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::from(selected.is_some()));
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
        .map_err(|e| AgdError::chunk(&path, format!("truncated or not Parquet ({e})")))?;
    check_file(&builder, group, chunk, &path)?;
    let builder = match columns {
        Some(c) => {
            let mask = ProjectionMask::columns(builder.parquet_schema(), c.iter().copied());
            builder.with_projection(mask)
        }
        None => builder,
    };
    let expected_rows = match selected {
        Some(r) if r.len() as u64 != chunk.records => {
            return Err(AgdError::chunk(
                &path,
                format!("{} rows selected of {} records", r.len(), chunk.records),
            ))
        }
        Some(r) => r.true_count() as u64,
        None => chunk.records,
    };
    let builder = match selected {
        Some(r) => builder.with_row_selection(RowSelection::from_filters(std::slice::from_ref(r))),
        None => builder,
    };
    let reader = builder
        .with_batch_size(chunk.records.max(1) as usize)
        .build()
        .map_err(|e| AgdError::chunk(&path, e))?;
    let batch = read_batch(reader, &path)?;
    if batch.num_rows() as u64 != expected_rows {
        return Err(AgdError::chunk(
            &path,
            format!(
                "read {} records, the manifest says {expected_rows}",
                batch.num_rows(),
            ),
        ));
    }
    Ok(ChunkFile { path, batch })
}

/// Checks that a chunk file has the columns of `group` (names and types) and the manifest's
/// record count.
fn check_file(
    builder: &ParquetRecordBatchReaderBuilder<ChunkInput>,
    group: Group,
    chunk: &ChunkEntry,
    path: &Path,
) -> Result<(), AgdError> {
    let expected = group.schema();
    let found = builder.schema();
    let same = found.fields().len() == expected.fields().len()
        && found
            .fields()
            .iter()
            .zip(expected.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if !same {
        return Err(AgdError::chunk(
            path,
            format!(
                "columns are not those of group {} (format version {})",
                group.name(),
                crate::FORMAT_VERSION
            ),
        ));
    }
    let rows = builder.metadata().file_metadata().num_rows();
    if u64::try_from(rows).ok() != Some(chunk.records) {
        return Err(AgdError::chunk(
            path,
            format!("holds {rows} records, the manifest says {}", chunk.records),
        ));
    }
    Ok(())
}

/// All the rows `reader` gives, as one batch.
fn read_batch(
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    path: &Path,
) -> Result<RecordBatch, AgdError> {
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let mut batches = Vec::with_capacity(1);
    for b in reader {
        batches.push(b.map_err(|e| AgdError::chunk(path, format!("corrupt ({e})")))?);
    }
    let batch = match batches.len() {
        1 => batches.pop().expect("one batch"),
        _ => arrow_select::concat::concat_batches(&schema, &batches)
            .map_err(|e| AgdError::chunk(path, e))?,
    };
    Ok(batch)
}

/// Reads every group of `chunk` in `dir`, in [`Group::ALL`] order.
pub fn read_columns(dir: &Path, chunk: &ChunkEntry) -> Result<Vec<ChunkFile>, AgdError> {
    Group::ALL
        .iter()
        .map(|&g| read_group(dir, g, chunk, None))
        .collect()
}

/// The base code of each SAM letter (0xff: not a base letter).
const fn base_codes() -> [u8; 256] {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 16 {
        t[BASES[i] as usize] = i as u8;
        i += 1;
    }
    t
}
static BASE_CODES: [u8; 256] = base_codes();

/// Rebuilds the records of one chunk from its groups (as [`read_columns`] returns them) and appends
/// each, with its `block_size`, to `out`; the offset of each record goes to `offsets`. Returns the
/// number of records.
pub fn append_records(
    files: &[ChunkFile],
    out: &mut Vec<u8>,
    offsets: &mut Vec<u32>,
) -> Result<usize, AgdError> {
    let [names, bases, qual, results] = files else {
        return Err(AgdError::chunk(
            files.first().map_or(Path::new(""), |f| &f.path),
            "a chunk needs its four groups",
        ));
    };
    let columns = Columns::of(names, bases, qual, results);
    let raw = columns.raw;
    let n = results.batch.num_rows();
    // HOT: once per record; appends into `out` only (grown by doubling, not per record).
    for i in 0..n {
        offsets.push(out.len() as u32);
        if raw.is_valid(i) {
            let record = raw.value(i);
            out.extend_from_slice(&(record.len() as u32).to_le_bytes());
            out.extend_from_slice(record);
            continue;
        }
        columns.append(i, out)?;
    }
    Ok(n)
}

/// The columns of a chunk's four groups, typed.
struct Columns<'a> {
    names: &'a ChunkFile,
    bases: &'a ChunkFile,
    qual: &'a ChunkFile,
    results: &'a ChunkFile,
    qname: &'a StringArray,
    seq: &'a StringArray,
    qualities: &'a StringArray,
    flag: &'a UInt16Array,
    ref_id: &'a Int32Array,
    pos: &'a Int32Array,
    mapq: &'a UInt8Array,
    bin: &'a UInt16Array,
    cigar_text: &'a StringArray,
    next_ref_id: &'a Int32Array,
    next_pos: &'a Int32Array,
    tlen: &'a Int32Array,
    tags: &'a BinaryArray,
    raw: &'a BinaryArray,
}

impl<'a> Columns<'a> {
    fn of(
        names: &'a ChunkFile,
        bases: &'a ChunkFile,
        qual: &'a ChunkFile,
        results: &'a ChunkFile,
    ) -> Self {
        let r = &results.batch;
        Columns {
            names,
            bases,
            qual,
            results,
            qname: names.batch.column(0).as_string::<i32>(),
            seq: bases.batch.column(0).as_string::<i32>(),
            qualities: qual.batch.column(0).as_string::<i32>(),
            flag: r.column(0).as_primitive::<UInt16Type>(),
            ref_id: r.column(1).as_primitive::<Int32Type>(),
            pos: r.column(2).as_primitive::<Int32Type>(),
            mapq: r.column(3).as_primitive::<UInt8Type>(),
            bin: r.column(4).as_primitive::<UInt16Type>(),
            cigar_text: r.column(5).as_string::<i32>(),
            next_ref_id: r.column(6).as_primitive::<Int32Type>(),
            next_pos: r.column(7).as_primitive::<Int32Type>(),
            tlen: r.column(8).as_primitive::<Int32Type>(),
            tags: r.column(9).as_binary::<i32>(),
            raw: r.column(10).as_binary::<i32>(),
        }
    }

    /// Appends record `i` (not stored raw), with its `block_size`, to `out`.
    #[inline]
    fn append(&self, i: usize, out: &mut Vec<u8>) -> Result<(), AgdError> {
        let bad = |f: &ChunkFile, what: &str| {
            AgdError::chunk(&f.path, format!("record {i} of the chunk: {what}"))
        };
        let start = out.len();
        out.resize(start + 4 + sortase_bam::FIXED_LEN, 0);
        let name = self.qname.value(i).as_bytes();
        if name.len() > 254 {
            return Err(bad(self.names, "read name longer than 254 bytes"));
        }
        out.extend_from_slice(name);
        out.push(0);
        let (n_cigar, rlen) = if self.cigar_text.is_valid(i) {
            append_cigar(self.cigar_text.value(i).as_bytes(), out)
                .map_err(|what| bad(self.results, what))?
        } else {
            (0, 0)
        };
        let l_seq = if self.seq.is_valid(i) {
            append_seq(self.seq.value(i).as_bytes(), out).map_err(|what| bad(self.bases, what))?
        } else {
            0
        };
        if self.qualities.is_valid(i) {
            let q = self.qualities.value(i).as_bytes();
            if q.len() != l_seq {
                return Err(bad(self.qual, "QUAL and SEQ differ in length"));
            }
            out.extend(q.iter().map(|&c| c.wrapping_sub(33)));
        } else {
            out.resize(out.len() + l_seq, 0xff);
        }
        out.extend_from_slice(self.tags.value(i));
        self.write_fixed(i, &mut out[start..], name.len(), n_cigar, l_seq, rlen);
        Ok(())
    }

    /// Fills the fixed part (and `block_size`) at the start of `record`, the whole record.
    #[inline]
    fn write_fixed(
        &self,
        i: usize,
        record: &mut [u8],
        name_len: usize,
        n_cigar: usize,
        l_seq: usize,
        rlen: u64,
    ) {
        let f = self.flag.value(i);
        let p = self.pos.value(i);
        let b = if self.bin.is_valid(i) {
            self.bin.value(i)
        } else {
            computed_bin(p, f, rlen)
        };
        let block_size = (record.len() - 4) as u32;
        let fixed = &mut record[..4 + sortase_bam::FIXED_LEN];
        fixed[0..4].copy_from_slice(&block_size.to_le_bytes());
        fixed[4..8].copy_from_slice(&self.ref_id.value(i).to_le_bytes());
        fixed[8..12].copy_from_slice(&p.to_le_bytes());
        fixed[12] = (name_len + 1) as u8;
        fixed[13] = self.mapq.value(i);
        fixed[14..16].copy_from_slice(&b.to_le_bytes());
        fixed[16..18].copy_from_slice(&(n_cigar as u16).to_le_bytes());
        fixed[18..20].copy_from_slice(&f.to_le_bytes());
        fixed[20..24].copy_from_slice(&(l_seq as u32).to_le_bytes());
        fixed[24..28].copy_from_slice(&self.next_ref_id.value(i).to_le_bytes());
        fixed[28..32].copy_from_slice(&self.next_pos.value(i).to_le_bytes());
        fixed[32..36].copy_from_slice(&self.tlen.value(i).to_le_bytes());
    }
}

/// Appends a CIGAR string's operations to `out`; their number and the reference bases they cover.
#[inline]
fn append_cigar(text: &[u8], out: &mut Vec<u8>) -> Result<(usize, u64), &'static str> {
    let mut n_cigar = 0usize;
    let mut rlen = 0u64;
    let mut len = 0u32;
    for &c in text {
        if c.is_ascii_digit() {
            len = len
                .checked_mul(10)
                .and_then(|l| l.checked_add(u32::from(c - b'0')))
                .filter(|&l| l < 1 << 28)
                .ok_or("CIGAR length out of range")?;
            continue;
        }
        let code = cigar::code_of(c).ok_or("bad CIGAR")?;
        out.extend_from_slice(&(len << 4 | code).to_le_bytes());
        if cigar::consumes_reference(code) {
            rlen += u64::from(len);
        }
        n_cigar += 1;
        len = 0;
    }
    if n_cigar > usize::from(u16::MAX) {
        return Err("more than 65535 CIGAR operations");
    }
    Ok((n_cigar, rlen))
}

/// Appends a sequence's 4-bit base codes to `out`; its length.
#[inline]
fn append_seq(s: &[u8], out: &mut Vec<u8>) -> Result<usize, &'static str> {
    let mut invalid = 0u8;
    for pair in s.chunks(2) {
        let hi = BASE_CODES[usize::from(pair[0])];
        let lo = pair.get(1).map_or(0, |&c| BASE_CODES[usize::from(c)]);
        invalid |= hi | lo;
        out.push(hi << 4 | (lo & 15));
    }
    if invalid & 0xf0 != 0 {
        return Err("SEQ holds a letter that is not a base code");
    }
    Ok(s.len())
}

/// Reads chunk `chunk` of `dir` and appends its records (with `block_size`) to `out`, their offsets to
/// `offsets`.
pub fn read_chunk_records(
    dir: &Path,
    chunk: &ChunkEntry,
    out: &mut Vec<u8>,
    offsets: &mut Vec<u32>,
) -> Result<usize, AgdError> {
    append_records(&read_columns(dir, chunk)?, out, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{write_group, ChunkBuilder, Manifest, Provenance, WriteOptions};

    /// A mapped record with `n_ops` CIGAR ops of `1M`, SEQ of `n_ops` bases and a tag, with `bin`.
    fn record(n_ops: usize, bin: u16) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&0i32.to_le_bytes()); // refID
        r.extend_from_slice(&99i32.to_le_bytes()); // pos
        r.extend_from_slice(&[2, 60]); // l_read_name, mapq
        r.extend_from_slice(&bin.to_le_bytes());
        r.extend_from_slice(&(n_ops as u16).to_le_bytes()); // n_cigar_op
        r.extend_from_slice(&16u16.to_le_bytes()); // flag: reverse
        r.extend_from_slice(&(n_ops as u32).to_le_bytes()); // l_seq
        for v in [0i32, 500, -50] {
            r.extend_from_slice(&v.to_le_bytes()); // next refID, next pos, tlen
        }
        r.extend_from_slice(b"r\0");
        for _ in 0..n_ops {
            r.extend_from_slice(&(1u32 << 4).to_le_bytes()); // 1M
        }
        r.extend((0..n_ops.div_ceil(2)).map(|i| if 2 * i + 1 < n_ops { 0x18 } else { 0x10 }));
        r.extend((0..n_ops).map(|i| (i % 42) as u8));
        r.extend_from_slice(b"XYZhello\0");
        r
    }

    fn round_trip(records: &[Vec<u8>]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let mut chunk = ChunkBuilder::default();
        for r in records {
            chunk.push(r).unwrap();
        }
        assert_eq!(chunk.raw_records(), 0);
        for (group, batch) in chunk.finish().unwrap() {
            let path = chunk_path(dir.path(), group, 0);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let file = std::fs::File::create(&path).unwrap();
            write_group(group, &batch, file, &WriteOptions::default()).unwrap();
        }
        let by = Provenance {
            command_line: String::new(),
            version: String::new(),
        };
        let mut m = Manifest::new(&Group::ALL, String::new(), vec![], 10, by);
        m.set_chunks(&[records.len() as u64]);
        let (mut out, mut offsets) = (Vec::new(), Vec::new());
        read_chunk_records(dir.path(), &m.chunks[0], &mut out, &mut offsets).unwrap();
        assert_eq!(offsets.len(), records.len());
        out
    }

    #[test]
    fn most_cigar_ops_and_odd_bins_round_trip() {
        // 65 535 ops: the most n_cigar_op holds; bin 4681 is not the computed one (reg2bin of
        // 99..65634), so it is stored; the computed one comes back from null.
        let computed = crate::encode::computed_bin(99, 16, 65_535);
        let records = [
            record(65_535, 4681),
            record(3, crate::encode::computed_bin(99, 16, 3)),
        ];
        assert_ne!(computed, 4681);
        let out = round_trip(&records);
        let mut expected = Vec::new();
        for r in &records {
            expected.extend_from_slice(&(r.len() as u32).to_le_bytes());
            expected.extend_from_slice(r);
        }
        assert_eq!(out, expected);
    }
}
