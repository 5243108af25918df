//! The aux fields of records → one typed column per selected tag plus the `tags` column (every other
//! tag as SAM text), in one pass over each record's aux bytes.
//!
//! As htslib when it reads a record (`bam_tag2cigar`), the `CG` tag that holds a CIGAR of more than
//! 65535 operations is not a tag: it shows as the `cigar` column and is left out here. A tag present
//! twice gives its first value (htslib `bam_aux_get`).

use crate::buffers::StrBuf;
use crate::schema::TagKind;
use arrow_array::{ArrayRef, Float64Array, Int64Array, ListArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field as ArrowField};
use sortase_bam::aux::{type_size, AuxField};
use sortase_bam::sam_format::format_aux;
use sortase_bam::RecordRef;
use std::sync::Arc;

enum Values {
    Integer(Vec<i64>),
    Float(Vec<f64>),
    String(StrBuf),
    IntegerArray { items: Vec<i64>, offsets: Vec<i32> },
    FloatArray { items: Vec<f64>, offsets: Vec<i32> },
}

struct TagColumn {
    tag: [u8; 2],
    kind: TagKind,
    values: Values,
    /// Validity of the non-string kinds (strings keep their own).
    nulls: NullBufferBuilder,
}

/// Builds the selected tags' columns and the `tags` column.
pub(crate) struct TagsBuilder {
    columns: Vec<TagColumn>,
    rest: Option<StrBuf>,
    /// Per selected column: whether the current record gave it a value.
    filled: Vec<bool>,
    /// Scratch for one field's SAM text.
    text: Vec<u8>,
}

impl TagsBuilder {
    pub fn new(tags: &[([u8; 2], TagKind)], rest: bool) -> Self {
        let columns = tags
            .iter()
            .map(|&(tag, kind)| TagColumn {
                tag,
                kind,
                values: match kind {
                    TagKind::Integer => Values::Integer(Vec::new()),
                    TagKind::Float => Values::Float(Vec::new()),
                    TagKind::String => Values::String(StrBuf::new()),
                    TagKind::IntegerArray => Values::IntegerArray {
                        items: Vec::new(),
                        offsets: vec![0],
                    },
                    TagKind::FloatArray => Values::FloatArray {
                        items: Vec::new(),
                        offsets: vec![0],
                    },
                },
                nulls: NullBufferBuilder::new(0),
            })
            .collect();
        Self {
            columns,
            rest: rest.then(StrBuf::new),
            filled: vec![false; tags.len()],
            text: Vec::new(),
        }
    }

    /// Bytes of the largest variable-length column.
    pub fn bytes(&self) -> usize {
        let typed = self.columns.iter().map(|c| match &c.values {
            Values::String(s) => s.values.len(),
            Values::IntegerArray { items, .. } => items.len(),
            Values::FloatArray { items, .. } => items.len(),
            _ => 0,
        });
        typed
            .max()
            .unwrap_or(0)
            .max(self.rest.as_ref().map_or(0, |r| r.values.len()))
    }

    /// Appends one record's tags.
    pub fn append(&mut self, r: &RecordRef<'_>) -> Result<(), String> {
        // HOT: once per record; one walk over the aux bytes.
        let hide_cg = r.long_cigar().is_some();
        self.filled.iter_mut().for_each(|f| *f = false);
        let mut first_rest = true;
        for field in r.aux() {
            let tag = field.tag();
            if hide_cg && tag == *b"CG" {
                continue;
            }
            if let Some(i) = self.columns.iter().position(|c| c.tag == tag) {
                if !self.filled[i] {
                    self.filled[i] = true;
                    let column = &mut self.columns[i];
                    column
                        .push(field, &mut self.text)
                        .map_err(|found| mismatch(r, tag, found, column.kind))?;
                }
                continue;
            }
            if let Some(rest) = &mut self.rest {
                if !first_rest {
                    rest.values.push(b'\t');
                }
                first_rest = false;
                format_aux(field.raw, &mut rest.values);
            }
        }
        if let Some(rest) = &mut self.rest {
            rest.end_value();
        }
        for (column, filled) in self.columns.iter_mut().zip(&self.filled) {
            if !filled {
                column.push_null();
            }
        }
        Ok(())
    }

    /// The `tags` column (if asked for) and the selected tags' columns; the builders start empty.
    pub fn finish(&mut self) -> Result<(Option<ArrayRef>, Vec<ArrayRef>), String> {
        let rest = match &mut self.rest {
            Some(r) => Some(Arc::new(r.finish()?) as ArrayRef),
            None => None,
        };
        let columns = self
            .columns
            .iter_mut()
            .map(TagColumn::finish)
            .collect::<Result<_, _>>()?;
        Ok((rest, columns))
    }
}

fn mismatch(r: &RecordRef<'_>, tag: [u8; 2], found: u8, kind: TagKind) -> String {
    let tag = String::from_utf8_lossy(&tag);
    format!(
        "record {:?}: tag {tag} has type {:?} but its column holds {kind:?} values (name the type, e.g. tags={{\"{tag}\": \"Z\"}})",
        String::from_utf8_lossy(r.read_name()),
        char::from(found),
    )
}

/// Integer elements of a `B` array (subtype `sub`, `count` values in `data`).
fn integer_items(sub: u8, data: &[u8]) -> impl Iterator<Item = i64> + '_ {
    let size = type_size(sub).unwrap_or(1);
    data.chunks_exact(size).map(move |e| match sub {
        b'c' => i64::from(e[0] as i8),
        b'C' => i64::from(e[0]),
        b's' => i64::from(i16::from_le_bytes([e[0], e[1]])),
        b'S' => i64::from(u16::from_le_bytes([e[0], e[1]])),
        b'i' => i64::from(i32::from_le_bytes([e[0], e[1], e[2], e[3]])),
        _ => i64::from(u32::from_le_bytes([e[0], e[1], e[2], e[3]])),
    })
}

fn float_of(field: &AuxField<'_>) -> Option<f64> {
    let v = &field.raw[3..];
    match field.value_type() {
        b'f' => Some(f64::from(f32::from_le_bytes([v[0], v[1], v[2], v[3]]))),
        b'd' => Some(f64::from_le_bytes(v[..8].try_into().ok()?)),
        _ => field.integer().map(|i| i as f64),
    }
}

impl TagColumn {
    /// Appends `field`'s value; `Err(type)` when the column cannot hold it.
    fn push(&mut self, field: AuxField<'_>, text: &mut Vec<u8>) -> Result<(), u8> {
        let t = field.value_type();
        match &mut self.values {
            Values::Integer(v) => v.push(field.integer().ok_or(t)?),
            Values::Float(v) => v.push(float_of(&field).ok_or(t)?),
            Values::String(s) => {
                match t {
                    b'A' => s.values.push(field.raw[3]),
                    b'Z' | b'H' => s.values.extend_from_slice(field.value()),
                    _ => {
                        text.clear();
                        format_aux(field.raw, text);
                        // "TG:T:" precedes the value.
                        s.values
                            .extend_from_slice(text.get(5..).unwrap_or_default());
                    }
                }
                s.end_value();
                return Ok(());
            }
            Values::IntegerArray { items, offsets } => {
                let raw = field.raw;
                if t != b'B' || raw[3] == b'f' {
                    return Err(t);
                }
                items.extend(integer_items(raw[3], &raw[8..]));
                offsets.push(items.len() as i32);
            }
            Values::FloatArray { items, offsets } => {
                let raw = field.raw;
                if t != b'B' {
                    return Err(t);
                }
                if raw[3] == b'f' {
                    items.extend(
                        raw[8..]
                            .chunks_exact(4)
                            .map(|e| f64::from(f32::from_le_bytes([e[0], e[1], e[2], e[3]]))),
                    );
                } else {
                    items.extend(integer_items(raw[3], &raw[8..]).map(|i| i as f64));
                }
                offsets.push(items.len() as i32);
            }
        }
        self.nulls.append_non_null();
        Ok(())
    }

    fn push_null(&mut self) {
        match &mut self.values {
            Values::Integer(v) => v.push(0),
            Values::Float(v) => v.push(0.0),
            Values::String(s) => {
                s.push_null();
                return;
            }
            Values::IntegerArray { items, offsets } => offsets.push(items.len() as i32),
            Values::FloatArray { items, offsets } => offsets.push(items.len() as i32),
        }
        self.nulls.append_null();
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        let nulls = self.nulls.finish();
        let list = |values: ArrayRef, offsets: &mut Vec<i32>, item: DataType| {
            let offsets = std::mem::replace(offsets, vec![0]);
            let field = Arc::new(ArrowField::new("item", item, true));
            ListArray::try_new(
                field,
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                values,
                nulls.clone(),
            )
            .map(|l| Arc::new(l) as ArrayRef)
            .map_err(|e| e.to_string())
        };
        Ok(match &mut self.values {
            Values::Integer(v) => Arc::new(Int64Array::new(std::mem::take(v).into(), nulls)),
            Values::Float(v) => Arc::new(Float64Array::new(std::mem::take(v).into(), nulls)),
            Values::String(s) => Arc::new(s.finish()?),
            Values::IntegerArray { items, offsets } => {
                let values = Arc::new(Int64Array::from(std::mem::take(items)));
                list(values, offsets, DataType::Int64)?
            }
            Values::FloatArray { items, offsets } => {
                let values = Arc::new(Float64Array::from(std::mem::take(items)));
                list(values, offsets, DataType::Float64)?
            }
        })
    }
}
