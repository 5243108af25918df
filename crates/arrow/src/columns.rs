//! Raw BAM records → Arrow columns. Each column is appended batch by batch straight from the record
//! bytes (column-major: one tight loop per column over a chunk of records), and only the columns
//! asked for are decoded: that is where the speed of a projection comes from.

use crate::buffers::{take_vec, StrBuf};
use crate::schema::{Field, Layout};
use crate::tags::TagsBuilder;
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, DictionaryArray, Int32Array, Int64Array, RecordBatch, RecordBatchOptions,
    StringArray, UInt16Array, UInt8Array,
};
use arrow_buffer::NullBufferBuilder;
use sortase_bam::cigar::{op_code, op_len, OP_CHARS};
use sortase_bam::sam_format::SEQ_CHARS;
use sortase_bam::RecordRef;
use std::sync::Arc;

/// Reference ids of one column, made a dictionary over the header's names when finished.
struct RefKeys {
    keys: Vec<i32>,
    nulls: NullBufferBuilder,
}

impl RefKeys {
    #[inline]
    fn push(&mut self, tid: i32) {
        self.keys.push(tid.max(0));
        self.nulls.append(tid >= 0);
    }

    fn finish(&mut self, names: &ArrayRef) -> Result<ArrayRef, String> {
        let keys = Int32Array::new(take_vec(&mut self.keys).into(), self.nulls.finish());
        DictionaryArray::<Int32Type>::try_new(keys, names.clone())
            .map(|d| Arc::new(d) as ArrayRef)
            .map_err(|e| e.to_string())
    }
}

enum Column {
    Qname(StrBuf),
    Flag(Vec<u16>),
    Rname(RefKeys),
    Pos(Vec<i64>),
    Mapq(Vec<u8>),
    Cigar(StrBuf),
    Rnext(RefKeys),
    Pnext(Vec<i64>),
    Tlen(Vec<i32>),
    Seq(StrBuf),
    Qual(StrBuf),
    /// The remaining tags: filled by [`TagsBuilder`] in the same pass as the selected tags.
    Tags,
}

/// Two SEQ characters for each packed byte (high nibble first, SAM spec §4.2.3).
const SEQ_PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [SEQ_CHARS[i >> 4], SEQ_CHARS[i & 0xf]];
        i += 1;
    }
    t
};

/// Appends records to the columns of a [`Layout`] and cuts them into record batches.
pub struct BatchBuilder {
    layout: Arc<Layout>,
    columns: Vec<Column>,
    tags: Option<TagsBuilder>,
    names: ArrayRef,
    rows: usize,
}

impl BatchBuilder {
    /// Builders for `layout`; `names` are the header's reference names (the dictionary of `rname`
    /// and `rnext`).
    pub fn new(layout: Arc<Layout>, names: ArrayRef) -> Self {
        let keys = || RefKeys {
            keys: Vec::new(),
            nulls: NullBufferBuilder::new(0),
        };
        let columns = layout
            .fields
            .iter()
            .map(|f| match f {
                Field::Qname => Column::Qname(StrBuf::new()),
                Field::Flag => Column::Flag(Vec::new()),
                Field::Rname => Column::Rname(keys()),
                Field::Pos => Column::Pos(Vec::new()),
                Field::Mapq => Column::Mapq(Vec::new()),
                Field::Cigar => Column::Cigar(StrBuf::new()),
                Field::Rnext => Column::Rnext(keys()),
                Field::Pnext => Column::Pnext(Vec::new()),
                Field::Tlen => Column::Tlen(Vec::new()),
                Field::Seq => Column::Seq(StrBuf::new()),
                Field::Qual => Column::Qual(StrBuf::new()),
                Field::Tags => Column::Tags,
            })
            .collect();
        let want_rest = layout.fields.contains(&Field::Tags);
        let tags = (want_rest || !layout.tags.is_empty())
            .then(|| TagsBuilder::new(&layout.tags, want_rest));
        Self {
            layout,
            columns,
            tags,
            names,
            rows: 0,
        }
    }

    /// Rows appended since the last [`BatchBuilder::finish`].
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes held by the variable-length columns (a batch is cut before Arrow's 32-bit offsets
    /// could overflow).
    pub fn string_bytes(&self) -> usize {
        let strings = self.columns.iter().map(|c| match c {
            Column::Qname(s) | Column::Cigar(s) | Column::Seq(s) | Column::Qual(s) => {
                s.values.len()
            }
            _ => 0,
        });
        strings
            .max()
            .unwrap_or(0)
            .max(self.tags.as_ref().map_or(0, TagsBuilder::bytes))
    }

    /// Appends `records` (validated views) to every column.
    pub fn append(&mut self, records: &[RecordRef<'_>]) -> Result<(), String> {
        // HOT: each arm runs once per record of the chunk; no allocation (the column vectors grow
        // amortised), no branch on options inside the loops.
        for column in &mut self.columns {
            match column {
                Column::Qname(s) => {
                    for r in records {
                        s.values.extend_from_slice(r.read_name());
                        s.end_value();
                    }
                }
                Column::Flag(v) => v.extend(records.iter().map(|r| r.flag())),
                Column::Rname(k) => records
                    .iter()
                    .for_each(|r| k.push(r.reference_sequence_id())),
                // POS and PNEXT are 1-based as in SAM text: pysam's 0-based value + 1 (0 when unset).
                Column::Pos(v) => v.extend(records.iter().map(|r| i64::from(r.position()) + 1)),
                Column::Mapq(v) => v.extend(records.iter().map(|r| r.mapping_quality())),
                Column::Cigar(s) => records.iter().for_each(|r| push_cigar(s, r)),
                Column::Rnext(k) => records
                    .iter()
                    .for_each(|r| k.push(r.mate_reference_sequence_id())),
                Column::Pnext(v) => {
                    v.extend(records.iter().map(|r| i64::from(r.mate_position()) + 1))
                }
                Column::Tlen(v) => v.extend(records.iter().map(|r| r.template_length())),
                Column::Seq(s) => records.iter().for_each(|r| push_seq(s, r)),
                Column::Qual(s) => records.iter().for_each(|r| push_qual(s, r)),
                Column::Tags => {}
            }
        }
        if let Some(t) = &mut self.tags {
            for r in records {
                t.append(r)?;
            }
        }
        self.rows += records.len();
        Ok(())
    }

    /// The rows appended so far as one record batch; the builders start empty again, with room
    /// for a batch like this one.
    pub fn finish(&mut self) -> Result<RecordBatch, String> {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.layout.schema.fields().len());
        let mut rest = None;
        let mut typed = Vec::new();
        if let Some(t) = &mut self.tags {
            let (r, columns) = t.finish()?;
            rest = r;
            typed = columns;
        }
        for column in &mut self.columns {
            let array: ArrayRef = match column {
                Column::Qname(s) => Arc::new(s.finish()?),
                Column::Flag(v) => Arc::new(UInt16Array::from(take_vec(v))),
                Column::Rname(k) | Column::Rnext(k) => k.finish(&self.names)?,
                Column::Pos(v) | Column::Pnext(v) => Arc::new(Int64Array::from(take_vec(v))),
                Column::Mapq(v) => Arc::new(UInt8Array::from(take_vec(v))),
                Column::Tlen(v) => Arc::new(Int32Array::from(take_vec(v))),
                Column::Cigar(s) | Column::Seq(s) => Arc::new(s.finish_ascii()),
                Column::Qual(s) => Arc::new(s.finish()?),
                Column::Tags => rest.take().ok_or("internal: no tags column")?,
            };
            arrays.push(array);
        }
        arrays.extend(typed);
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        RecordBatch::try_new_with_options(self.layout.schema.clone(), arrays, &options)
            .map_err(|e| e.to_string())
    }
}

#[inline]
fn push_cigar(s: &mut StrBuf, r: &RecordRef<'_>) {
    let ops = r.long_cigar().unwrap_or_else(|| r.raw_cigar());
    if ops.is_empty() {
        s.push_null();
        return;
    }
    let mut digits = itoa::Buffer::new();
    for op in ops.iter() {
        s.values
            .extend_from_slice(digits.format(op_len(op)).as_bytes());
        s.values
            .push(*OP_CHARS.get(op_code(op) as usize).unwrap_or(&b'?'));
    }
    s.end_value();
}

#[inline]
fn push_seq(s: &mut StrBuf, r: &RecordRef<'_>) {
    let l_seq = r.l_seq() as usize;
    if l_seq == 0 {
        s.push_null();
        return;
    }
    let start = s.values.len();
    for &b in r.sequence_packed() {
        s.values.extend_from_slice(&SEQ_PAIRS[usize::from(b)]);
    }
    s.values.truncate(start + l_seq);
    s.end_value();
}

#[inline]
fn push_qual(s: &mut StrBuf, r: &RecordRef<'_>) {
    let q = r.quality_scores();
    if q.first().is_none_or(|&b| b == 0xff) {
        s.push_null();
        return;
    }
    // Phred + 33 as one character each; scores above 94 (legal in BAM, not in SAM text) become
    // the code point q + 33 (two UTF-8 bytes), so the column never fails to be text.
    if q.iter().all(|&b| b < 95) {
        s.values.extend(q.iter().map(|&b| b + 33));
    } else {
        for &b in q {
            // At most 255 + 33: always a scalar value of two UTF-8 bytes.
            let c = char::from_u32(u32::from(b) + 33).unwrap_or(char::REPLACEMENT_CHARACTER);
            let mut utf8 = [0u8; 4];
            s.values
                .extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
    }
    s.end_value();
}

/// The header's reference names as the dictionary of `rname`/`rnext`.
pub fn reference_names(header: &sortase_bam::Header) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(
        header
            .references()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.name).into_owned()),
    ))
}
