//! Random valid BAM records for property tests: a field-by-field model ([`Rec`]), a proptest
//! strategy ([`rec`]), and this file's own writers of the model as BAM bytes ([`encode`]) and as
//! SAM text ([`sam_line`]), written from the SAM spec (§1.4, §4.2) rather than from the crate, so the
//! crate's paths are checked against an independent encoding.
//!
//! The model covers what a SAM line can say: names of 1-254 characters, any flag, refIDs -1..3,
//! positions up to `i32::MAX`, CIGARs of every op (empty, short, exactly 65535 ops, and more than
//! 65535 ops, which BAM keeps in a `CG:B:I` tag behind a `<l_seq>S<rlen>N` placeholder), sequences
//! of odd and even length over all 16 base codes, absent (`*`, 0xff) or present qualities, and aux
//! fields of types `A c C s S i I f Z H B`. Records are canonical, as htslib writes them: `bin`
//! computed, integer tags in their smallest type, the flag's unmapped bit set when SAM parsing
//! would set it, float values exact in `%g`'s six digits. Shared by the bam and agd tests.

#![allow(dead_code)]

use proptest::prelude::*;

/// Reference names of the test header.
pub const REFS: [&str; 3] = ["chr1", "chr2", "chrM"];

/// The test header's SAM text.
pub fn header_text() -> String {
    REFS.iter()
        .map(|n| format!("@SQ\tSN:{n}\tLN:{}\n", i32::MAX))
        .collect()
}

/// An aux field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `A`: one printable character.
    Char(u8),
    /// Any integer type; stored in the smallest that holds it (`c C s S i I`).
    Int(i64),
    /// `f`, exact in six significant digits.
    Float(f32),
    /// `Z`: printable text, maybe empty.
    Text(Vec<u8>),
    /// `H`: an even number of hex digits.
    Hex(Vec<u8>),
    /// `B:c`, `B:C`, `B:s`, `B:S`, `B:i`, `B:I` with values in range.
    IntArray(u8, Vec<i64>),
    /// `B:f`.
    FloatArray(Vec<f32>),
}

/// One record, field by field.
#[derive(Clone, Debug)]
pub struct Rec {
    /// QNAME, 1-254 characters of `[!-?A-~]`.
    pub name: Vec<u8>,
    /// FLAG.
    pub flag: u16,
    /// refID (-1 for none).
    pub ref_id: i32,
    /// 0-based POS (-1 for none).
    pub pos: i32,
    /// MAPQ.
    pub mapq: u8,
    /// The real CIGAR, packed `len << 4 | op`.
    pub cigar: Vec<u32>,
    /// 4-bit base codes.
    pub seq: Vec<u8>,
    /// Phred qualities, `None` for `*`.
    pub qual: Option<Vec<u8>>,
    /// next refID.
    pub next_ref_id: i32,
    /// 0-based next POS.
    pub next_pos: i32,
    /// TLEN.
    pub tlen: i32,
    /// Aux fields in order (never `CG`).
    pub aux: Vec<([u8; 2], Value)>,
}

const BASE_CHARS: &[u8; 16] = b"=ACMGRSVTWYHKDBN";
const OP_CHARS: &[u8; 9] = b"MIDNSHP=X";

fn consumes_query(code: u32) -> bool {
    matches!(code, 0 | 1 | 4 | 7 | 8)
}
fn consumes_reference(code: u32) -> bool {
    matches!(code, 0 | 2 | 3 | 7 | 8)
}

impl Rec {
    /// Query bases the CIGAR covers.
    pub fn query_length(&self) -> u64 {
        self.cigar
            .iter()
            .filter(|&&op| consumes_query(op & 15))
            .map(|&op| u64::from(op >> 4))
            .sum()
    }
    /// Reference bases the CIGAR covers.
    pub fn reference_length(&self) -> u64 {
        self.cigar
            .iter()
            .filter(|&&op| consumes_reference(op & 15))
            .map(|&op| u64::from(op >> 4))
            .sum()
    }
    /// Whether BAM keeps the CIGAR in a `CG` tag.
    pub fn long_cigar(&self) -> bool {
        self.cigar.len() > 0xffff
    }
    /// htslib's `bam_endpos`.
    pub fn end_position(&self) -> i64 {
        let rlen = if self.flag & 4 != 0 {
            0
        } else {
            self.reference_length() as i64
        };
        i64::from(self.pos) + rlen.max(1)
    }
    /// The bin htslib computes: `hts_reg2bin(pos, bam_endpos, 14, 5)`, written out from SAM spec §5.3.
    pub fn bin(&self) -> u16 {
        let beg = i64::from(self.pos);
        let end = self.end_position() - 1;
        for (shift, offset) in [(14, 4681), (17, 585), (20, 73), (23, 9), (26, 1)] {
            if beg >> shift == end >> shift {
                return (offset + (beg >> shift)) as u16;
            }
        }
        0
    }
}

/// The raw record as BAM stores it, without `block_size`.
pub fn encode(r: &Rec) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&r.ref_id.to_le_bytes());
    b.extend_from_slice(&r.pos.to_le_bytes());
    b.push(r.name.len() as u8 + 1);
    b.push(r.mapq);
    b.extend_from_slice(&r.bin().to_le_bytes());
    let stored: Vec<u32> = if r.long_cigar() {
        vec![
            (r.seq.len() as u32) << 4 | 4,
            (r.reference_length() as u32) << 4 | 3,
        ]
    } else {
        r.cigar.clone()
    };
    b.extend_from_slice(&(stored.len() as u16).to_le_bytes());
    b.extend_from_slice(&r.flag.to_le_bytes());
    b.extend_from_slice(&(r.seq.len() as u32).to_le_bytes());
    b.extend_from_slice(&r.next_ref_id.to_le_bytes());
    b.extend_from_slice(&r.next_pos.to_le_bytes());
    b.extend_from_slice(&r.tlen.to_le_bytes());
    b.extend_from_slice(&r.name);
    b.push(0);
    for op in &stored {
        b.extend_from_slice(&op.to_le_bytes());
    }
    for pair in r.seq.chunks(2) {
        b.push(pair[0] << 4 | pair.get(1).copied().unwrap_or(0));
    }
    match &r.qual {
        Some(q) => b.extend_from_slice(q),
        None => b.resize(b.len() + r.seq.len(), 0xff),
    }
    for (tag, value) in &r.aux {
        encode_aux(*tag, value, &mut b);
    }
    if r.long_cigar() {
        b.extend_from_slice(b"CGBI");
        b.extend_from_slice(&(r.cigar.len() as u32).to_le_bytes());
        for op in &r.cigar {
            b.extend_from_slice(&op.to_le_bytes());
        }
    }
    b
}

/// The smallest BAM integer type holding `v` (htslib's choice when it parses `i` tags).
pub fn int_type(v: i64) -> u8 {
    match v {
        -128..=-1 => b'c',
        -32768..=-129 => b's',
        i64::MIN..=-32769 => b'i',
        0..=255 => b'C',
        256..=65535 => b'S',
        _ => b'I',
    }
}

fn push_int(t: u8, v: i64, b: &mut Vec<u8>) {
    match t {
        b'c' | b'C' => b.push(v as u8),
        b's' | b'S' => b.extend_from_slice(&(v as u16).to_le_bytes()),
        _ => b.extend_from_slice(&(v as u32).to_le_bytes()),
    }
}

/// Appends one aux field as BAM stores it.
pub fn encode_aux(tag: [u8; 2], value: &Value, b: &mut Vec<u8>) {
    b.extend_from_slice(&tag);
    match value {
        Value::Char(c) => b.extend_from_slice(&[b'A', *c]),
        Value::Int(v) => {
            let t = int_type(*v);
            b.push(t);
            push_int(t, *v, b);
        }
        Value::Float(f) => {
            b.push(b'f');
            b.extend_from_slice(&f.to_le_bytes());
        }
        Value::Text(s) | Value::Hex(s) => {
            b.push(if matches!(value, Value::Text(_)) {
                b'Z'
            } else {
                b'H'
            });
            b.extend_from_slice(s);
            b.push(0);
        }
        Value::IntArray(t, vs) => {
            b.extend_from_slice(&[b'B', *t]);
            b.extend_from_slice(&(vs.len() as u32).to_le_bytes());
            for &v in vs {
                push_int(*t, v, b);
            }
        }
        Value::FloatArray(vs) => {
            b.extend_from_slice(b"Bf");
            b.extend_from_slice(&(vs.len() as u32).to_le_bytes());
            for v in vs {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// The record's SAM line (with its newline) as samtools prints it.
pub fn sam_line(r: &Rec) -> String {
    let rname = |id: i32| if id < 0 { "*" } else { REFS[id as usize] };
    let cigar: String = if r.cigar.is_empty() {
        "*".into()
    } else {
        r.cigar
            .iter()
            .map(|&op| format!("{}{}", op >> 4, OP_CHARS[(op & 15) as usize] as char))
            .collect()
    };
    let rnext = if r.next_ref_id >= 0 && r.next_ref_id == r.ref_id {
        "="
    } else {
        rname(r.next_ref_id)
    };
    let seq: String = if r.seq.is_empty() {
        "*".into()
    } else {
        r.seq
            .iter()
            .map(|&c| BASE_CHARS[c as usize] as char)
            .collect()
    };
    let qual: String = match &r.qual {
        Some(q) if !q.is_empty() => q.iter().map(|&q| (q + 33) as char).collect(),
        _ => "*".into(),
    };
    let mut line = format!(
        "{}\t{}\t{}\t{}\t{}\t{cigar}\t{rnext}\t{}\t{}\t{seq}\t{qual}",
        String::from_utf8_lossy(&r.name),
        r.flag,
        rname(r.ref_id),
        i64::from(r.pos) + 1,
        r.mapq,
        i64::from(r.next_pos) + 1,
        r.tlen,
    );
    for (tag, value) in &r.aux {
        let tag = String::from_utf8_lossy(tag);
        let join = |vs: Vec<String>| vs.iter().map(|v| format!(",{v}")).collect::<String>();
        let text = match value {
            Value::Char(c) => format!("A:{}", *c as char),
            Value::Int(v) => format!("i:{v}"),
            Value::Float(f) => format!("f:{f}"),
            Value::Text(s) => format!("Z:{}", String::from_utf8_lossy(s)),
            Value::Hex(s) => format!("H:{}", String::from_utf8_lossy(s)),
            Value::IntArray(t, vs) => format!(
                "B:{}{}",
                *t as char,
                join(vs.iter().map(|v| v.to_string()).collect())
            ),
            Value::FloatArray(vs) => {
                format!("B:f{}", join(vs.iter().map(|v| v.to_string()).collect()))
            }
        };
        line.push_str(&format!("\t{tag}:{text}"));
    }
    line.push('\n');
    line
}

/// Floats whose `%g` text (six significant digits) is also Rust's `Display` and reads back exactly:
/// quarters below 10000 in magnitude (up to six significant digits).
fn exact_float() -> impl Strategy<Value = f32> {
    (-39999i32..40000).prop_map(|k| k as f32 / 4.0)
}

fn int_value() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i8>().prop_map(i64::from),
        any::<u8>().prop_map(i64::from),
        any::<i16>().prop_map(i64::from),
        any::<u16>().prop_map(i64::from),
        any::<i32>().prop_map(i64::from),
        any::<u32>().prop_map(i64::from),
        prop::sample::select(vec![
            -129i64, -128, -32769, -32768, 255, 256, 65535, 65536, 0, -1
        ]),
    ]
}

fn int_array() -> impl Strategy<Value = Value> {
    let range = |t: u8| -> (i64, i64) {
        match t {
            b'c' => (-128, 127),
            b'C' => (0, 255),
            b's' => (-32768, 32767),
            b'S' => (0, 65535),
            b'i' => (i64::from(i32::MIN), i64::from(i32::MAX)),
            _ => (0, i64::from(u32::MAX)),
        }
    };
    prop::sample::select(b"cCsSiI".to_vec()).prop_flat_map(move |t| {
        let (lo, hi) = range(t);
        let value = prop_oneof![Just(lo), Just(hi), lo..=hi];
        prop::collection::vec(value, 0..6).prop_map(move |vs| Value::IntArray(t, vs))
    })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (b'!'..=b'~').prop_map(Value::Char),
        int_value().prop_map(Value::Int),
        exact_float().prop_map(Value::Float),
        "[ -~]{0,12}".prop_map(|s| Value::Text(s.into_bytes())),
        "([0-9A-F]{2}){0,6}".prop_map(|s| Value::Hex(s.into_bytes())),
        int_array(),
        prop::collection::vec(exact_float(), 0..5).prop_map(Value::FloatArray),
    ]
}

fn tag() -> impl Strategy<Value = [u8; 2]> {
    "[A-Za-z][A-Za-z0-9]"
        .prop_filter("CG is the long-CIGAR tag", |t| t != "CG")
        .prop_map(|t| [t.as_bytes()[0], t.as_bytes()[1]])
}

fn op(query_max: u32) -> impl Strategy<Value = u32> {
    (0u32..9).prop_flat_map(move |code| {
        let len = if consumes_query(code) {
            (0..=query_max).boxed()
        } else {
            prop_oneof![0u32..100, Just((1 << 28) - 1), 0u32..1 << 28].boxed()
        };
        len.prop_map(move |len| len << 4 | code)
    })
}

/// `n` ops (65535 or more), made from `seed` rather than drawn one by one so that cases stay fast:
/// lengths 0-2, so the sequence and the reference span stay short.
fn many_ops(n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (((x >> 8) % 3) as u32) << 4 | (x % 9) as u32
        })
        .collect()
}

fn cigar() -> impl Strategy<Value = Vec<u32>> {
    prop_oneof![
        4 => Just(Vec::new()),
        12 => prop::collection::vec(op(30), 1..8),
        1 => (prop::sample::select(vec![65535usize, 65536, 70000]), any::<u64>())
            .prop_map(|(n, seed)| many_ops(n, seed)),
    ]
}

fn position() -> impl Strategy<Value = i32> {
    prop_oneof![0i32..1000, Just(i32::MAX), 0..=i32::MAX]
}

/// Random valid, canonical records.
pub fn rec() -> impl Strategy<Value = Rec> {
    let name = prop_oneof![
        8 => "[!-?A-~]{1,16}",
        1 => "[!-?A-~]{250,254}",
    ];
    let place = (-1i32..3, position(), any::<bool>()).prop_map(|(id, pos, unplaced_pos)| {
        // A refID needs a position (SAM parsing drops the refID of POS 0).
        (id, if id < 0 && unplaced_pos { -1 } else { pos })
    });
    (
        (name, any::<u16>(), place, any::<u8>(), cigar()),
        (
            -1i32..3,
            position(),
            any::<i32>(),
            prop::collection::vec((tag(), value()), 0..6),
            any::<bool>(),
            0usize..40,
        ),
    )
        .prop_flat_map(|((name, flag, (ref_id, pos), mapq, cigar), rest)| {
            let (next_ref_id, next_pos, tlen, aux, has_seq, free_len) = rest;
            // A long CIGAR is only recognized on a placed record (htslib `bam_write1`).
            let ref_id = if cigar.len() > 0xffff {
                ref_id.max(0)
            } else {
                ref_id
            };
            let pos = if ref_id >= 0 { pos.max(0) } else { pos };
            let mut r = Rec {
                name: name.into_bytes(),
                flag,
                ref_id,
                pos,
                mapq,
                cigar,
                seq: Vec::new(),
                qual: None,
                next_ref_id,
                next_pos: if next_ref_id >= 0 { next_pos } else { -1 },
                tlen,
                aux,
            };
            if r.ref_id < 0 || r.cigar.is_empty() {
                r.flag |= 4; // what SAM parsing does (htslib `sam_parse1`)
            }
            let l_seq = match (has_seq, r.cigar.is_empty()) {
                (false, _) => 0,
                (true, true) => free_len,
                (true, false) => r.query_length() as usize,
            };
            let seq = prop::collection::vec(0u8..16, l_seq);
            let qual = prop::option::of(prop::collection::vec(0u8..=93, l_seq));
            (Just(r), seq, qual).prop_map(|(mut r, seq, qual)| {
                // One quality of 9 is the text `*`, which SAM reads as "absent" (as htslib).
                let qual = qual.filter(|q| !q.is_empty() && q[..] != [9]);
                r.qual = qual;
                r.seq = seq;
                r
            })
        })
}
