//! The column groups of a dataset and their Arrow schemas. Groups follow Persona's split (bases,
//! qualities, names/metadata, results) so that a step reads only what it needs: flagstat reads four
//! columns of `results`, a FASTQ export never opens the results' tags.

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::{Arc, OnceLock};

/// A column group: one Parquet file per chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// `qname`: read names (UTF-8, without the NUL).
    Names,
    /// `seq`: bases as SAM letters (`=ACMGRSVTWYHKDBN`), null for `*`.
    Bases,
    /// `qual`: qualities as Phred+33 text, null for `*` (absent in BAM: all 0xff).
    Qual,
    /// Alignment results and the rest of the record: flag, ref_id, pos (0-based, as BAM), mapq,
    /// bin (null: the one computed from pos and CIGAR), cigar (SAM text of the stored CIGAR, null for
    /// `*`), next_ref_id, next_pos, tlen, tags (raw BAM aux bytes) and raw_record (the whole record
    /// when the columns cannot rebuild it exactly; null otherwise).
    Results,
}

impl Group {
    /// Every group, in file order of the manifest.
    pub const ALL: [Group; 4] = [Group::Names, Group::Bases, Group::Qual, Group::Results];

    /// The group's directory name.
    pub fn name(self) -> &'static str {
        match self {
            Group::Names => "names",
            Group::Bases => "bases",
            Group::Qual => "qual",
            Group::Results => "results",
        }
    }

    /// The group of a directory name.
    pub fn from_name(name: &str) -> Option<Group> {
        Group::ALL.into_iter().find(|g| g.name() == name)
    }

    /// The group's Arrow schema.
    pub fn schema(self) -> SchemaRef {
        static SCHEMAS: OnceLock<[SchemaRef; 4]> = OnceLock::new();
        let all = SCHEMAS.get_or_init(|| Group::ALL.map(build_schema));
        all[self as usize].clone()
    }

    /// The group's column names.
    pub fn columns(self) -> Vec<String> {
        self.schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }
}

fn build_schema(group: Group) -> SchemaRef {
    let f = |name: &str, t: DataType, nullable: bool| Field::new(name, t, nullable);
    let fields = match group {
        Group::Names => vec![f("qname", DataType::Utf8, false)],
        Group::Bases => vec![f("seq", DataType::Utf8, true)],
        Group::Qual => vec![f("qual", DataType::Utf8, true)],
        Group::Results => vec![
            f("flag", DataType::UInt16, false),
            f("ref_id", DataType::Int32, false),
            f("pos", DataType::Int32, false),
            f("mapq", DataType::UInt8, false),
            f("bin", DataType::UInt16, true),
            f("cigar", DataType::Utf8, true),
            f("next_ref_id", DataType::Int32, false),
            f("next_pos", DataType::Int32, false),
            f("tlen", DataType::Int32, false),
            f("tags", DataType::Binary, false),
            f("raw_record", DataType::Binary, true),
        ],
    };
    Arc::new(Schema::new(fields))
}
