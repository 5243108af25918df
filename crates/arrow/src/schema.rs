//! The columns of a BAM read into Arrow: the eleven SAM fields, one typed column per selected tag, and
//! the remaining tags as SAM text. The meaning of each column is pysam's (see the crate docs for the
//! mapping); the Arrow type is chosen once per read, before the first batch, so every batch of a
//! stream has the same schema.

use arrow_schema::{DataType, Field as ArrowField, Schema, SchemaRef};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A fixed column (a SAM field, or the remaining tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// QNAME, `utf8` (pysam `query_name`).
    Qname,
    /// FLAG, `uint16`.
    Flag,
    /// RNAME, `dictionary<int32, utf8>` over the header's references, null for refID -1
    /// (pysam `reference_name`).
    Rname,
    /// POS, 1-based as in SAM, 0 when unset: pysam `reference_start + 1`; `int64`.
    Pos,
    /// MAPQ, `uint8`.
    Mapq,
    /// CIGAR as SAM text, null for none (pysam `cigarstring`); a CIGAR of more than 65535 operations
    /// stored in the `CG` tag is shown whole, as htslib does.
    Cigar,
    /// RNEXT: the mate's reference name (never `=`), null for -1 (pysam `next_reference_name`).
    Rnext,
    /// PNEXT, 1-based, 0 when unset: pysam `next_reference_start + 1`; `int64`.
    Pnext,
    /// TLEN, `int32` (pysam `template_length`).
    Tlen,
    /// SEQ, null when absent (pysam `query_sequence`).
    Seq,
    /// QUAL as Phred+33 text, null when absent (pysam `qual`).
    Qual,
    /// Every tag not selected as a column, as SAM text `TG:T:VALUE` joined by tabs (`""` when none),
    /// formatted as htslib formats them.
    Tags,
}

impl Field {
    /// Every fixed column in SAM order, `tags` last.
    pub const ALL: [Field; 12] = [
        Field::Qname,
        Field::Flag,
        Field::Rname,
        Field::Pos,
        Field::Mapq,
        Field::Cigar,
        Field::Rnext,
        Field::Pnext,
        Field::Tlen,
        Field::Seq,
        Field::Qual,
        Field::Tags,
    ];

    /// The column's name.
    pub fn name(self) -> &'static str {
        match self {
            Field::Qname => "qname",
            Field::Flag => "flag",
            Field::Rname => "rname",
            Field::Pos => "pos",
            Field::Mapq => "mapq",
            Field::Cigar => "cigar",
            Field::Rnext => "rnext",
            Field::Pnext => "pnext",
            Field::Tlen => "tlen",
            Field::Seq => "seq",
            Field::Qual => "qual",
            Field::Tags => "tags",
        }
    }

    /// The column named `name`.
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }

    fn data_type(self) -> DataType {
        match self {
            Field::Flag => DataType::UInt16,
            Field::Mapq => DataType::UInt8,
            Field::Pos | Field::Pnext => DataType::Int64,
            Field::Tlen => DataType::Int32,
            Field::Rname | Field::Rnext => reference_type(),
            Field::Qname | Field::Cigar | Field::Seq | Field::Qual | Field::Tags => DataType::Utf8,
        }
    }

    fn nullable(self) -> bool {
        matches!(
            self,
            Field::Rname | Field::Cigar | Field::Rnext | Field::Seq | Field::Qual
        )
    }
}

/// The Arrow type of `rname` and `rnext`.
pub fn reference_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The Arrow type of a selected tag's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TagKind {
    /// `int64`: any integer type (`c C s S i I`).
    Integer,
    /// `float64`: `f` or `d` (integers are converted).
    Float,
    /// `utf8`: `A`, `Z` and `H` as they are; any other type as its SAM text value (`1,2,3` after
    /// `B:c,` for an array), so a string column takes every tag.
    String,
    /// `list<int64>`: a `B` array of an integer subtype.
    IntegerArray,
    /// `list<float64>`: a `B` array of any subtype.
    FloatArray,
}

impl TagKind {
    /// The kind a SAM type code names: `i c C s S I` → integer, `f d` → float, `Z A H` → string,
    /// `B` or `B:i` (any integer subtype) → integer array, `B:f` → float array.
    pub fn parse(code: &str) -> Option<TagKind> {
        Some(match code {
            "i" | "c" | "C" | "s" | "S" | "I" => TagKind::Integer,
            "f" | "d" => TagKind::Float,
            "Z" | "A" | "H" => TagKind::String,
            "B" | "B:i" | "B:c" | "B:C" | "B:s" | "B:S" | "B:I" => TagKind::IntegerArray,
            "B:f" => TagKind::FloatArray,
            _ => return None,
        })
    }

    /// The kind that holds a value stored with type `value_type` (and array subtype `sub`).
    pub fn of_value(value_type: u8, sub: u8) -> TagKind {
        match value_type {
            b'c' | b'C' | b's' | b'S' | b'i' | b'I' => TagKind::Integer,
            b'f' | b'd' => TagKind::Float,
            b'B' if sub == b'f' => TagKind::FloatArray,
            b'B' => TagKind::IntegerArray,
            _ => TagKind::String,
        }
    }

    /// The kind of the tags the SAM tags specification (SAMtags.pdf §1) defines, for tags absent from
    /// the sample of records a read looks at.
    pub fn standard(tag: [u8; 2]) -> Option<TagKind> {
        Some(match &tag {
            b"AM" | b"AS" | b"CP" | b"FI" | b"H0" | b"H1" | b"H2" | b"HI" | b"IH" | b"MQ"
            | b"NH" | b"NM" | b"OP" | b"PQ" | b"SM" | b"TC" | b"UQ" | b"MN" => TagKind::Integer,
            b"CG" | b"FZ" | b"ML" => TagKind::IntegerArray,
            _ => TagKind::String,
        })
    }

    fn data_type(self) -> DataType {
        match self {
            TagKind::Integer => DataType::Int64,
            TagKind::Float => DataType::Float64,
            TagKind::String => DataType::Utf8,
            TagKind::IntegerArray => list_of(DataType::Int64),
            TagKind::FloatArray => list_of(DataType::Float64),
        }
    }
}

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(ArrowField::new("item", item, true)))
}

/// A selected tag and, optionally, its column's kind (default: inferred).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagColumn {
    /// The two-character tag.
    pub tag: String,
    /// The column's kind; `None`: the type of the tag's first occurrence in the first records read,
    /// else the SAM tags specification's type, else string.
    pub kind: Option<TagKind>,
}

/// The columns of one read, resolved: which fixed fields, which tags with which kinds.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Fixed fields, in output order.
    pub fields: Vec<Field>,
    /// Selected tags with their kinds, after the fixed fields.
    pub tags: Vec<([u8; 2], TagKind)>,
    /// The schema.
    pub schema: SchemaRef,
}

impl Layout {
    /// The layout of `fields` then `tags`.
    pub fn new(fields: Vec<Field>, tags: Vec<([u8; 2], TagKind)>) -> Self {
        let mut columns: Vec<ArrowField> = fields
            .iter()
            .map(|f| ArrowField::new(f.name(), f.data_type(), f.nullable()))
            .collect();
        columns.extend(
            tags.iter()
                .map(|(t, k)| ArrowField::new(String::from_utf8_lossy(t), k.data_type(), true)),
        );
        Self {
            fields,
            tags,
            schema: Arc::new(Schema::new(columns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_kinds_parse() {
        for f in Field::ALL {
            assert_eq!(Field::from_name(f.name()), Some(f));
        }
        assert_eq!(TagKind::parse("B:f"), Some(TagKind::FloatArray));
        assert_eq!(TagKind::parse("x"), None);
        assert_eq!(TagKind::of_value(b'B', b'C'), TagKind::IntegerArray);
        let l = Layout::new(vec![Field::Qname], vec![(*b"NM", TagKind::Integer)]);
        assert_eq!(l.schema.field(1).name(), "NM");
    }
}
