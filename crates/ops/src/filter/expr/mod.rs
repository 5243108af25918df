//! htslib's filter expressions (`samtools view -e`, hts_expr.c + sam.c `bam_sym_lookup`) on raw
//! records.
//!
//! ```
//! use sortase_ops::filter::expr::{Expr, Scratch};
//! let header = sortase_bam::Header::from_sam_text("@SQ\tSN:chr1\tLN:100\n".into()).unwrap();
//! let expr = Expr::new("mapq >= 30 && flag.paired && [NM] < 3", &header).unwrap();
//! # let mut rec = vec![0, 0, 0, 0, 9, 0, 0, 0];          // refID 0, pos 9
//! # rec.extend_from_slice(&[2, 40, 0, 0, 0, 0, 1, 0]);  // l_read_name 2, mapq 40, bin, 0 ops, flag 1
//! # rec.extend_from_slice(&[0; 4]);                      // l_seq 0
//! # rec.extend_from_slice(&[0xff; 8]);                   // no mate
//! # rec.extend_from_slice(&[0; 4]);                      // tlen
//! # rec.extend_from_slice(b"r\0NMC\x01");                // name, NM:C:1
//! let record = sortase_bam::RecordRef::new(&rec).unwrap();
//! let mut scratch = Scratch::default();
//! assert!(expr.passes(&record, &mut scratch).unwrap());
//! ```
//!
//! Values have htslib's three states (number, string, undefined) and its rules: a missing tag is a
//! null string, false, and makes comparisons and arithmetic undefined (`[XX] == 1` and
//! `!([XX] == 1)`... see hts_expr.h); a present tag is true even when it is 0. The expression is
//! parsed once (htslib re-parses it for every record); evaluation allocates nothing: strings are
//! borrowed from the record and header, and the sequence and CIGAR are spelled into the two
//! buffers of a [`Scratch`] only when a comparison needs their text.

mod eval;
mod parse;

pub use parse::SyntaxError;

use sortase_bam::{Header, RecordRef};
use std::collections::HashMap;

/// A parsed expression plus what it needs from the header (reference names, `@RG` libraries).
#[derive(Debug, Clone)]
pub struct Expr {
    text: String,
    root: Node,
    references: Vec<Vec<u8>>,
    libraries: HashMap<Vec<u8>, Vec<u8>>,
}

/// Reusable buffers for one evaluating thread.
#[derive(Debug, Default)]
pub struct Scratch {
    a: Vec<u8>,
    b: Vec<u8>,
}

/// Why an expression could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The text does not parse.
    #[error("filter expression {text:?}: {what}")]
    Syntax {
        /// The expression.
        text: String,
        /// What is wrong, and where.
        what: String,
    },
    /// A record's values do not fit the expression (htslib fails the same way): arithmetic on a
    /// string, `length()` of a number, a `B` array tag.
    #[error("filter expression {text:?} on record {record:?}: {what}")]
    Eval {
        /// The expression.
        text: String,
        /// The record's name.
        record: String,
        /// What is wrong.
        what: &'static str,
    },
}

impl Expr {
    /// Parses `text` for records of `header`.
    pub fn new(text: &str, header: &Header) -> Result<Self, ExprError> {
        let root = parse::parse(text).map_err(|e| ExprError::Syntax {
            text: text.to_string(),
            what: e.what,
        })?;
        let references = header.references().iter().map(|r| r.name.clone()).collect();
        Ok(Self {
            text: text.to_string(),
            root,
            references,
            libraries: libraries(header.text()),
        })
    }

    /// The expression's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `record` passes, as htslib's `sam_passes_filter`.
    pub fn passes(&self, record: &RecordRef<'_>, scratch: &mut Scratch) -> Result<bool, ExprError> {
        eval::passes(self, record, scratch).map_err(|what| ExprError::Eval {
            text: self.text.clone(),
            record: String::from_utf8_lossy(record.read_name()).into_owned(),
            what,
        })
    }
}

/// `@RG ID` → `LB` (htslib's `bam_get_library` looks the record's `RG` up this way).
fn libraries(text: &str) -> HashMap<Vec<u8>, Vec<u8>> {
    let mut map = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("@RG\t")) {
        let field = |k: &str| line.split('\t').find_map(|f| f.strip_prefix(k));
        if let (Some(id), Some(lb)) = (field("ID:"), field("LB:")) {
            map.entry(id.as_bytes().to_vec())
                .or_insert_with(|| lb.as_bytes().to_vec());
        }
    }
    map
}

/// Compiles the pattern of `=~`: POSIX extended syntax as far as the `regex` crate shares it,
/// bytewise (no Unicode classes), `.` matching any byte as `regexec` without `REG_NEWLINE`.
fn compile_regex(pattern: &[u8]) -> Result<regex::bytes::Regex, String> {
    let text = std::str::from_utf8(pattern)
        .map_err(|_| "regular expression is not UTF-8 text".to_string())?;
    regex::bytes::RegexBuilder::new(text)
        .unicode(false)
        .dot_matches_new_line(true)
        .build()
        .map_err(|e| {
            let first = e.to_string();
            let last = first.lines().last().unwrap_or("invalid").trim().to_string();
            format!("invalid regular expression {text:?} ({last})")
        })
}

/// One node of a parsed expression.
#[derive(Debug, Clone)]
enum Node {
    Num(f64),
    Str(Box<[u8]>),
    Field(Field),
    Tag([u8; 2]),
    Unary(UnOp, Box<Node>),
    /// `a op b` of the right-recursive levels (comparisons, equality).
    Binary(BinOp, Box<Node>, Box<Node>),
    /// `a op b op c ...` of a left-to-right level (all ops of one level).
    Chain(Box<Node>, Vec<(BinOp, Node)>),
    /// `a =~ "re"` (`true`: `!~`).
    Regex(Box<Node>, bool, Box<regex::bytes::Regex>),
    Func(Func, Box<Node>),
    Default(Box<Node>, Box<Node>),
    Pow(Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnOp {
    Plus,
    Minus,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    BitAnd,
    BitXor,
    BitOr,
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
    Match,
    NotMatch,
    And,
    Or,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    Avg,
    Exists,
    Exp,
    Length,
    Log,
    Min,
    Max,
    Sqrt,
}

/// The record fields of sam.c `bam_sym_lookup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Cigar,
    EndPos,
    Flag,
    FlagBit(u16),
    HardClipLength,
    Library,
    MapQ,
    /// `mpos` and `pnext`: 1-based.
    MatePos,
    /// `mrname` and `rnext`: the name, `*` for none.
    MateRefName,
    MateRefId,
    CigarOps,
    /// 1-based.
    Pos,
    QueryLength,
    Name,
    Qual,
    ReferenceLength,
    RefName,
    RefId,
    Seq,
    SoftClipLength,
    TemplateLength,
}
