//! Records into columns: [`ChunkBuilder`] takes raw BAM records one by one and writes each column
//! group of the chunk as one Parquet file.
//!
//! Exactness: every field BAM stores is kept, either in a typed column or, for a record the typed
//! columns cannot rebuild byte for byte, in `raw_record` (see [`needs_raw`]). `bin` is stored only when
//! it differs from the computed one (null otherwise: a null costs a bit in the definition levels).

use crate::{AgdError, ChunkPositions, Group, PositionsBuilder};
use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, RecordBatch, StringArray, UInt16Array, UInt8Array,
};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use sortase_bam::{bin, cigar, flags, RecordRef, FIXED_LEN};
use std::io::Write;
use std::sync::Arc;

/// SAM's letters for BAM's 4-bit base codes (SAM spec §4.2.3).
pub(crate) const BASES: &[u8; 16] = b"=ACMGRSVTWYHKDBN";

/// The highest quality SAM text can hold (`~` = 93 + 33).
const MAX_QUAL: u8 = 93;

/// Most record bytes one chunk may hold: every text column is at most 2.5 times the record bytes (a
/// CIGAR op of 4 bytes prints as up to 10 characters), so its 32-bit Arrow offsets cannot overflow.
pub const CHUNK_BYTES_LIMIT: usize = 768 << 20;

/// How chunk files are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// zstd level of every column.
    pub zstd_level: i32,
    /// Dictionary encoding of `seq` (pays off only for short, repetitive reads).
    pub bases_dictionary: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            zstd_level: 3,
            bases_dictionary: false,
        }
    }
}

/// A variable-length column being built: values, offsets and validity.
#[derive(Debug)]
struct VarColumn {
    values: Vec<u8>,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

impl Default for VarColumn {
    fn default() -> Self {
        Self {
            values: Vec::new(),
            offsets: vec![0],
            nulls: NullBufferBuilder::new(0),
        }
    }
}

impl VarColumn {
    /// Ends the value written into `values` since the last call.
    fn close(&mut self) {
        self.offsets.push(self.values.len() as i32);
        self.nulls.append_non_null();
    }

    fn push(&mut self, bytes: &[u8]) {
        self.values.extend_from_slice(bytes);
        self.close();
    }

    fn push_null(&mut self) {
        self.offsets.push(self.values.len() as i32);
        self.nulls.append_null();
    }

    fn parts(&mut self) -> (OffsetBuffer<i32>, Buffer, Option<arrow_buffer::NullBuffer>) {
        let offsets = std::mem::replace(&mut self.offsets, vec![0]);
        // INVARIANT: offsets start at 0 and never decrease (each is the length of `values` then).
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        let values = Buffer::from_vec(std::mem::take(&mut self.values));
        (offsets, values, self.nulls.finish())
    }

    fn utf8(&mut self) -> Result<ArrayRef, AgdError> {
        let (o, v, n) = self.parts();
        Ok(Arc::new(StringArray::try_new(o, v, n).map_err(arrow_err)?))
    }

    fn binary(&mut self) -> Result<ArrayRef, AgdError> {
        let (o, v, n) = self.parts();
        Ok(Arc::new(BinaryArray::try_new(o, v, n).map_err(arrow_err)?))
    }
}

fn arrow_err(e: arrow_schema::ArrowError) -> AgdError {
    AgdError::Write(e.into())
}

/// The records of one chunk, column by column.
#[derive(Debug)]
pub struct ChunkBuilder {
    records: usize,
    bytes: usize,
    qname: VarColumn,
    seq: VarColumn,
    qual: VarColumn,
    flag: Vec<u16>,
    ref_id: Vec<i32>,
    pos: Vec<i32>,
    mapq: Vec<u8>,
    bin: Vec<u16>,
    bin_nulls: NullBufferBuilder,
    cigar: VarColumn,
    next_ref_id: Vec<i32>,
    next_pos: Vec<i32>,
    tlen: Vec<i32>,
    tags: VarColumn,
    raw: VarColumn,
    raw_records: usize,
    positions: PositionsBuilder,
}

impl Default for ChunkBuilder {
    fn default() -> Self {
        Self {
            records: 0,
            bytes: 0,
            qname: VarColumn::default(),
            seq: VarColumn::default(),
            qual: VarColumn::default(),
            flag: Vec::new(),
            ref_id: Vec::new(),
            pos: Vec::new(),
            mapq: Vec::new(),
            bin: Vec::new(),
            bin_nulls: NullBufferBuilder::new(0),
            cigar: VarColumn::default(),
            next_ref_id: Vec::new(),
            next_pos: Vec::new(),
            tlen: Vec::new(),
            tags: VarColumn::default(),
            raw: VarColumn::default(),
            raw_records: 0,
            positions: PositionsBuilder::default(),
        }
    }
}

/// The bin htslib computes for a record (`hts_reg2bin(pos, end, 14, 5)` with `end` as `bam_endpos`).
pub(crate) fn computed_bin(pos: i32, flag: u16, reference_length: u64) -> u16 {
    let pos = i64::from(pos);
    let rlen = if flag & flags::UNMAPPED != 0 {
        0
    } else {
        reference_length as i64
    };
    bin::reg2bin(pos, pos + if rlen == 0 { 1 } else { rlen })
}

/// Whether the typed columns cannot rebuild `r` byte for byte, so that the record is kept whole.
fn needs_raw(r: &RecordRef<'_>) -> bool {
    let bytes = r.as_bytes();
    let l_read_name = usize::from(bytes[8]);
    let name = &bytes[FIXED_LEN..FIXED_LEN + l_read_name];
    let name_ok = l_read_name >= 1
        && !name[..l_read_name - 1].contains(&0)
        && name[l_read_name - 1] == 0
        && std::str::from_utf8(&name[..l_read_name - 1]).is_ok();
    let cigar_ok = r.raw_cigar().iter().all(|op| cigar::op_code(op) <= 8);
    let l_seq = r.l_seq() as usize;
    let packed = r.sequence_packed();
    let padding_ok = l_seq.is_multiple_of(2) || packed[l_seq / 2] & 0x0f == 0;
    let qual = r.quality_scores();
    let qual_ok = qual.iter().all(|&q| q <= MAX_QUAL) || qual.iter().all(|&q| q == 0xff);
    !(name_ok && cigar_ok && padding_ok && qual_ok)
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

impl ChunkBuilder {
    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.records
    }

    /// Whether no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Record bytes pushed so far (BAM's, without `block_size`).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Records kept whole in `raw_record`.
    pub fn raw_records(&self) -> usize {
        self.raw_records
    }

    /// Adds one record: BAM's bytes from `refID` on (without `block_size`), already validated
    /// (`sortase_bam::check_record`).
    pub fn push(&mut self, record: &[u8]) -> Result<(), AgdError> {
        // HOT: once per record. Appends into per-column buffers; no allocation per record.
        let r = RecordRef::new_unchecked(record);
        if self.bytes + record.len() > CHUNK_BYTES_LIMIT {
            return Err(AgdError::BadRecord {
                ordinal: self.records,
                message: format!(
                    "chunk over {} MiB of records; use a smaller --chunk-size",
                    CHUNK_BYTES_LIMIT >> 20
                ),
            });
        }
        self.bytes += record.len();
        let raw = needs_raw(&r);
        let name = r.read_name();
        match std::str::from_utf8(name) {
            Ok(s) => self.qname.push(s.as_bytes()),
            Err(_) => self.qname.push(String::from_utf8_lossy(name).as_bytes()),
        }
        self.push_seq_qual(&r);
        let flag = r.flag();
        self.flag.push(flag);
        self.positions
            .push(r.reference_sequence_id(), r.position(), r.end_position());
        self.ref_id.push(r.reference_sequence_id());
        self.pos.push(r.position());
        self.mapq.push(r.mapping_quality());
        let ops = r.raw_cigar();
        if computed_bin(r.position(), flag, ops.reference_length()) == r.bin() {
            self.bin.push(0);
            self.bin_nulls.append_null();
        } else {
            self.bin.push(r.bin());
            self.bin_nulls.append_non_null();
        }
        self.push_cigar(ops);
        self.next_ref_id.push(r.mate_reference_sequence_id());
        self.next_pos.push(r.mate_position());
        self.tlen.push(r.template_length());
        self.tags.push(r.aux_bytes());
        if raw {
            self.raw.push(record);
            self.raw_records += 1;
        } else {
            self.raw.push_null();
        }
        self.records += 1;
        Ok(())
    }

    /// The record's sequence as letters and its qualities as SAM's (`None` when absent).
    #[inline]
    fn push_seq_qual(&mut self, r: &RecordRef<'_>) {
        let l_seq = r.l_seq() as usize;
        if l_seq == 0 {
            self.seq.push_null();
        } else {
            let packed = r.sequence_packed();
            let v = &mut self.seq.values;
            v.reserve(l_seq);
            for &b in &packed[..l_seq / 2] {
                v.push(BASES[usize::from(b >> 4)]);
                v.push(BASES[usize::from(b & 15)]);
            }
            if l_seq % 2 == 1 {
                v.push(BASES[usize::from(packed[l_seq / 2] >> 4)]);
            }
            self.seq.close();
        }
        let qual = r.quality_scores();
        if l_seq == 0 || qual[0] == 0xff {
            self.qual.push_null();
        } else {
            let v = &mut self.qual.values;
            v.extend(qual.iter().map(|&q| q.min(MAX_QUAL) + 33));
            self.qual.close();
        }
    }

    /// The record's CIGAR as SAM's text (`None` when it has none).
    #[inline]
    fn push_cigar(&mut self, ops: cigar::CigarOps<'_>) {
        if ops.is_empty() {
            self.cigar.push_null();
        } else {
            for op in ops.iter() {
                push_decimal(&mut self.cigar.values, cigar::op_len(op));
                let code = cigar::op_code(op) as usize;
                self.cigar
                    .values
                    .push(*cigar::OP_CHARS.get(code).unwrap_or(&b'?'));
            }
            self.cigar.close();
        }
    }

    /// Where the records pushed since the last call lie (for the manifest); call before
    /// [`ChunkBuilder::finish`], which starts the positions again too.
    pub fn take_positions(&mut self) -> ChunkPositions {
        self.positions.finish()
    }

    /// The Arrow batches of every group (the builder is left empty).
    pub fn finish(&mut self) -> Result<Vec<(Group, RecordBatch)>, AgdError> {
        let batch = |g: Group, columns: Vec<ArrayRef>| {
            RecordBatch::try_new(g.schema(), columns).map_err(arrow_err)
        };
        let bin = UInt16Array::new(
            ScalarBuffer::from(std::mem::take(&mut self.bin)),
            self.bin_nulls.finish(),
        );
        let out = vec![
            (Group::Names, batch(Group::Names, vec![self.qname.utf8()?])?),
            (Group::Bases, batch(Group::Bases, vec![self.seq.utf8()?])?),
            (Group::Qual, batch(Group::Qual, vec![self.qual.utf8()?])?),
            (
                Group::Results,
                batch(
                    Group::Results,
                    vec![
                        Arc::new(UInt16Array::from(std::mem::take(&mut self.flag))),
                        Arc::new(Int32Array::from(std::mem::take(&mut self.ref_id))),
                        Arc::new(Int32Array::from(std::mem::take(&mut self.pos))),
                        Arc::new(UInt8Array::from(std::mem::take(&mut self.mapq))),
                        Arc::new(bin),
                        self.cigar.utf8()?,
                        Arc::new(Int32Array::from(std::mem::take(&mut self.next_ref_id))),
                        Arc::new(Int32Array::from(std::mem::take(&mut self.next_pos))),
                        Arc::new(Int32Array::from(std::mem::take(&mut self.tlen))),
                        self.tags.binary()?,
                        self.raw.binary()?,
                    ],
                )?,
            ),
        ];
        self.records = 0;
        self.bytes = 0;
        self.raw_records = 0;
        self.positions = PositionsBuilder::default();
        Ok(out)
    }
}

/// Writer properties for `group`: one row group per file, zstd, statistics only where a query
/// filters (the results' numbers), dictionaries only where values repeat. Measured on the small bench
/// BAM (808 685 records, bench/RESULTS.md "AGD encodings"): zstd 1/3/6/9 gave bases 37.2/37.0/35.7/
/// 35.4 MB and qualities 35.7/35.6/34.5/33.8 MB at 0.45/0.50/1.67/2.92 s CPU for the bases, so level
/// 3 is the default (`--level` to change); a dictionary on bases gave 37.07 MB vs 36.97 MB plain.
fn properties(group: Group, options: &WriteOptions) -> Result<WriterProperties, AgdError> {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(options.zstd_level)?))
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(None);
    let no_stats = |b: parquet::file::properties::WriterPropertiesBuilder, c: &str| {
        b.set_column_statistics_enabled(ColumnPath::from(c), EnabledStatistics::None)
            .set_column_dictionary_enabled(ColumnPath::from(c), false)
    };
    match group {
        Group::Names => b = no_stats(b, "qname"),
        Group::Bases => {
            b = no_stats(b, "seq")
                .set_column_dictionary_enabled(ColumnPath::from("seq"), options.bases_dictionary)
        }
        Group::Qual => b = no_stats(b, "qual"),
        Group::Results => {
            b = no_stats(b, "tags");
            b = no_stats(b, "raw_record");
            // Positions as deltas: on the small bench BAM `pos` + `next_pos` took 8.56 MB with
            // dictionary + zstd 3 and 5.25 MB as DELTA_BINARY_PACKED + zstd 3 (unsorted input); 8.07
            // vs 3.11 MB on the coordinate-sorted one. DuckDB and pyarrow read the encoding.
            for c in ["pos", "next_pos"] {
                b = b
                    .set_column_dictionary_enabled(ColumnPath::from(c), false)
                    .set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
            }
        }
    }
    Ok(b.build())
}

/// Writes `batch` (group `group` of a chunk) as one Parquet file into `out`.
pub fn write_group<W: Write + Send>(
    group: Group,
    batch: &RecordBatch,
    out: W,
    options: &WriteOptions,
) -> Result<W, AgdError> {
    let mut w = ArrowWriter::try_new(out, group.schema(), Some(properties(group, options)?))?;
    w.write(batch)?;
    Ok(w.into_inner()?)
}
