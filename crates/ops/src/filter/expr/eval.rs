//! Evaluating a parsed expression on one record, value for value as hts_expr.c does.
//!
//! [`Val`] is htslib's `hts_expr_val_t`: `is_str` says which of `s`/`d` is the value, `is_true` forces
//! truth (a present tag), `s == None` is htslib's NULL string (a missing tag) and a NaN number is
//! undefined. Operators set `is_str = 0` without clearing `s`, as htslib does, because `==` and `!=`
//! look at `s` again in some mixed cases.

use super::{BinOp, Expr, Field, Func, Node, Scratch, UnOp};
use sortase_bam::cigar::{self, CigarOps};
use sortase_bam::RecordRef;
use std::cmp::Ordering;

type Eval<'a> = Result<Val<'a>, &'static str>;

/// A string value, borrowed; the sequence and CIGAR are spelled out only when read as text.
#[derive(Clone, Copy)]
enum Text<'a> {
    Bytes(&'a [u8]),
    Seq(&'a [u8], usize),
    Cigar(CigarOps<'a>),
}

#[derive(Clone, Copy)]
struct Val<'a> {
    is_str: bool,
    is_true: bool,
    s: Option<Text<'a>>,
    d: f64,
}

impl<'a> Val<'a> {
    fn num(d: f64) -> Self {
        Val {
            is_str: false,
            is_true: false,
            s: None,
            d,
        }
    }
    fn text(t: Text<'a>) -> Self {
        Val {
            is_str: true,
            is_true: false,
            s: Some(t),
            d: 0.0,
        }
    }
    fn bytes(b: &'a [u8]) -> Self {
        Self::text(Text::Bytes(b))
    }
    /// `hts_expr_val_exists`.
    fn exists(&self) -> bool {
        (!self.is_str || self.s.is_some()) && (self.is_str || !self.d.is_nan())
    }
    /// `hts_expr_val_existsT`: defined, or undefined but forced true.
    fn exists_t(&self) -> bool {
        self.is_true || self.exists()
    }
    /// `hts_expr_val_undef`.
    fn undef(&mut self) {
        *self = Val::num(f64::NAN);
    }
    /// The truth `&&` and `||` read: `is_true || (is_str && s) || d`.
    fn truthy(&self) -> bool {
        self.is_true || (self.is_str && self.s.is_some()) || self.d != 0.0
    }
    fn set_bool(&mut self, b: bool) {
        self.is_true = b;
        self.d = f64::from(u8::from(b));
    }
}

/// C's `(int64_t)d` as x86-64 computes it: truncation, with NaN and out-of-range values giving
/// `INT64_MIN` (htslib casts undefined values in `%` this way).
fn c_i64(d: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if d.is_nan() || !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Up to the first NUL, as the C string functions read a value.
fn c_str(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// The text of a string value; the sequence and CIGAR are written into `buf`.
fn spell<'x>(t: Text<'x>, buf: &'x mut Vec<u8>) -> &'x [u8] {
    match t {
        Text::Bytes(b) => b,
        Text::Seq(packed, len) => {
            const BASES: &[u8; 16] = b"=ACMGRSVTWYHKDBN";
            buf.clear();
            buf.extend(
                (0..len).map(|i| BASES[usize::from((packed[i / 2] >> (4 * (1 - i % 2))) & 0xf)]),
            );
            buf
        }
        Text::Cigar(ops) => {
            buf.clear();
            if ops.is_empty() {
                buf.push(b'*');
            }
            let mut digits = itoa::Buffer::new();
            for op in ops.iter() {
                buf.extend_from_slice(digits.format(cigar::op_len(op)).as_bytes());
                let code = cigar::op_code(op) as usize;
                buf.push(cigar::OP_CHARS.get(code).copied().unwrap_or(b'?'));
            }
            buf
        }
    }
}

/// `strcmp` of two string values.
fn compare(a: Text<'_>, b: Text<'_>, scratch: &mut Scratch) -> Ordering {
    let a = c_str(spell(a, &mut scratch.a));
    let b = c_str(spell(b, &mut scratch.b));
    a.cmp(b)
}

/// Whether `record` passes `expr` (hts_expr.c `hts_filter_eval_` and sam.c `sam_passes_filter`).
pub(super) fn passes(
    expr: &Expr,
    record: &RecordRef<'_>,
    scratch: &mut Scratch,
) -> Result<bool, &'static str> {
    let cx = Context { expr, r: *record };
    let mut res = cx.eval(&expr.root, scratch)?;
    if res.is_str {
        res.is_true |= res.s.is_some();
    } else if res.exists() {
        res.is_true |= res.d != 0.0;
    }
    Ok(res.is_true)
}

struct Context<'a> {
    expr: &'a Expr,
    r: RecordRef<'a>,
}

impl<'a> Context<'a> {
    fn eval(&self, node: &'a Node, scratch: &mut Scratch) -> Eval<'a> {
        match node {
            Node::Num(d) => Ok(Val::num(*d)),
            Node::Str(s) => Ok(Val::bytes(s)),
            Node::Field(f) => Ok(self.field(*f)),
            Node::Tag(tag) => self.tag(*tag),
            Node::Unary(op, a) => {
                let v = self.eval(a, scratch)?;
                unary(*op, v)
            }
            Node::Binary(op, a, b) => {
                let l = self.eval(a, scratch)?;
                let r = self.eval(b, scratch)?;
                Ok(binary(*op, l, r, scratch))
            }
            Node::Chain(first, rest) => self.chain(first, rest, scratch),
            Node::Regex(a, negate, re) => {
                let mut res = self.eval(a, scratch)?;
                if !res.is_str {
                    return Err("=~ and !~ need a string on their left");
                }
                match res.s {
                    Some(t) => {
                        let text = c_str(spell(t, &mut scratch.a));
                        let matched = re.is_match(text);
                        res.set_bool(matched != *negate);
                    }
                    // A null string (a missing tag) matches nothing, either way round.
                    None => res.is_true = false,
                }
                res.is_str = false;
                if !res.exists() {
                    res.undef();
                }
                Ok(res)
            }
            Node::Func(f, a) => {
                let v = self.eval(a, scratch)?;
                func(*f, v, scratch)
            }
            Node::Default(a, b) => {
                let v = self.eval(a, scratch)?;
                let alt = self.eval(b, scratch)?;
                Ok(if v.exists_t() { v } else { alt })
            }
            Node::Pow(a, b) => {
                let mut v = self.eval(a, scratch)?;
                let e = self.eval(b, scratch)?;
                if !v.exists() || !e.exists() {
                    v.undef();
                } else if v.is_str || e.is_str {
                    return Err("pow() of a string");
                } else {
                    v.d = v.d.powf(e.d);
                    v.is_str = false;
                }
                if v.d.is_nan() {
                    v.undef();
                }
                Ok(v)
            }
        }
    }

    /// A left-to-right level: the arithmetic, bitwise and boolean loops of hts_expr.c.
    fn chain(&self, first: &'a Node, rest: &'a [(BinOp, Node)], scratch: &mut Scratch) -> Eval<'a> {
        let mut res = self.eval(first, scratch)?;
        let mut undef = false;
        for (op, node) in rest {
            let val = self.eval(node, scratch)?;
            match op {
                BinOp::And | BinOp::Or => and_or(*op, &mut res, &val),
                BinOp::Mul | BinOp::Div | BinOp::Mod => {
                    if !val.exists() || !res.exists() {
                        res.undef();
                    } else if val.is_str || res.is_str {
                        return Err("arithmetic on a string");
                    }
                    match op {
                        BinOp::Mul => res.d *= val.d,
                        BinOp::Div => res.d /= val.d,
                        _ => match c_i64(val.d) {
                            // htslib tests `val.d` (NaN is true in C) and divides the truncated
                            // values; a zero divisor after truncation would crash it.
                            _ if val.d == 0.0 => res.undef(),
                            0 => res.undef(),
                            divisor => res.d = c_i64(res.d).wrapping_rem(divisor) as f64,
                        },
                    }
                    res.is_true = res.exists() && res.d != 0.0;
                }
                BinOp::Add | BinOp::Sub => {
                    let undefined = !val.exists() || !res.exists();
                    if !undefined && (val.is_str || res.is_str) {
                        return Err("arithmetic on a string");
                    }
                    if *op == BinOp::Add {
                        res.d += val.d;
                    } else {
                        res.d -= val.d;
                    }
                    if undefined {
                        res.undef();
                    } else {
                        res.is_true = res.d != 0.0;
                    }
                }
                _ => {
                    if !val.exists() || !res.exists() {
                        undef = true;
                    } else if res.is_str || val.is_str {
                        return Err("bitwise operation on a string");
                    } else {
                        let (a, b) = (c_i64(res.d), c_i64(val.d));
                        res.d = match op {
                            BinOp::BitAnd => a & b,
                            BinOp::BitXor => a ^ b,
                            _ => a | b,
                        } as f64;
                        res.is_true = res.d != 0.0;
                    }
                }
            }
        }
        if undef {
            res.undef();
        }
        Ok(res)
    }

    fn field(&self, f: Field) -> Val<'a> {
        let r = &self.r;
        let name = |tid: i32| -> &'a [u8] {
            usize::try_from(tid)
                .ok()
                .and_then(|t| self.expr.references.get(t))
                .map_or(b"*", |n| n.as_slice())
        };
        let num = |d: f64| Val::num(d);
        match f {
            Field::Cigar => Val::text(Text::Cigar(r.cigar())),
            Field::EndPos => num(r.end_position() as f64),
            Field::Flag => num(f64::from(r.flag())),
            Field::FlagBit(bit) => num(f64::from(r.flag() & bit)),
            Field::HardClipLength => num(f64::from(hard_clips(r.cigar()))),
            Field::Library => Val::bytes(self.library()),
            Field::MapQ => num(f64::from(r.mapping_quality())),
            Field::MatePos => num(f64::from(r.mate_position()) + 1.0),
            Field::MateRefName => Val::bytes(name(r.mate_reference_sequence_id())),
            Field::MateRefId => num(f64::from(r.mate_reference_sequence_id())),
            Field::CigarOps => num(r.cigar().len() as f64),
            Field::Pos => num(f64::from(r.position()) + 1.0),
            Field::QueryLength => num(r.cigar().query_length() as f64),
            Field::Name => Val::bytes(r.read_name()),
            Field::Qual => Val::bytes(r.quality_scores()),
            Field::ReferenceLength => num(r.cigar().reference_length() as f64),
            Field::RefName => Val::bytes(name(r.reference_sequence_id())),
            Field::RefId => num(f64::from(r.reference_sequence_id())),
            Field::Seq => Val::text(Text::Seq(r.sequence_packed(), r.l_seq() as usize)),
            Field::SoftClipLength => num(f64::from(soft_clips(r.cigar()))),
            Field::TemplateLength => num(f64::from(r.template_length())),
        }
    }

    /// `library`: the `LB` of the `@RG` line the record's `RG` names, or an empty string.
    fn library(&self) -> &'a [u8] {
        self.r
            .aux()
            .find(|f| f.tag() == *b"RG" && f.value_type() == b'Z')
            .and_then(|f| self.expr.libraries.get(f.value()))
            .map_or(b"", |lb| lb.as_slice())
    }

    /// `[XX]`: the tag's value, true because present even when 0; a missing tag is a null string.
    fn tag(&self, tag: [u8; 2]) -> Eval<'a> {
        let Some(f) = self.r.aux().find(|f| f.tag() == tag) else {
            return Ok(Val {
                is_str: true,
                is_true: false,
                s: None,
                d: 0.0,
            });
        };
        let mut v = match f.value_type() {
            b'Z' | b'H' | b'A' => Val::bytes(c_str(f.value())),
            b'f' => {
                let b = f.value();
                Val::num(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            b'd' => {
                let b = f.value();
                Val::num(f64::from_le_bytes([
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                ]))
            }
            _ => match f.integer() {
                Some(i) => Val::num(i as f64),
                None => return Err("array (B) tags are not supported by filter expressions"),
            },
        };
        v.is_true = true;
        Ok(v)
    }
}

fn unary(op: UnOp, mut v: Val<'_>) -> Eval<'_> {
    match op {
        UnOp::Plus | UnOp::Minus => {
            if !v.exists() {
                v.undef();
            } else if v.is_str {
                return Err("a sign before a string");
            } else {
                if op == UnOp::Minus {
                    v.d = -v.d;
                }
                v.is_true = v.d != 0.0;
            }
        }
        UnOp::Not => {
            if v.is_true {
                v.set_bool(false);
            } else if !v.exists() {
                v.set_bool(true);
            } else if v.is_str {
                v.set_bool(false);
            } else {
                v.set_bool(c_i64(v.d) == 0);
            }
            v.is_str = false;
        }
        UnOp::BitNot => {
            if !v.exists() {
                v.undef();
            } else if v.is_str {
                return Err("~ before a string");
            } else {
                v.d = !c_i64(v.d) as f64;
                v.is_true = v.d != 0.0;
            }
        }
    }
    Ok(v)
}

/// Comparisons and (in)equality (hts_expr.c `cmp_expr`, `eq_expr`).
fn binary<'a>(op: BinOp, mut res: Val<'a>, val: Val<'a>, scratch: &mut Scratch) -> Val<'a> {
    if !res.exists() || !val.exists() {
        res.undef();
        return res;
    }
    let strings = match (res.is_str, res.s, val.is_str, val.s) {
        (true, Some(a), true, Some(b)) => Some(compare(a, b, scratch)),
        _ => None,
    };
    let numbers = !res.is_str && !val.is_str;
    let b = match op {
        BinOp::Eq if res.is_str => match (res.s, val.s) {
            (Some(a), Some(b)) => compare(a, b, scratch) == Ordering::Equal,
            _ => false,
        },
        BinOp::Eq => numbers && res.d == val.d,
        BinOp::Ne if res.is_str => match (res.s, val.s) {
            (Some(a), Some(b)) => compare(a, b, scratch) != Ordering::Equal,
            _ => true,
        },
        BinOp::Ne => res.is_str != val.is_str || res.d != val.d,
        _ => match strings {
            Some(o) => match op {
                BinOp::Gt => o == Ordering::Greater,
                BinOp::Ge => o != Ordering::Less,
                BinOp::Lt => o == Ordering::Less,
                _ => o != Ordering::Greater,
            },
            None => {
                numbers
                    && match op {
                        BinOp::Gt => res.d > val.d,
                        BinOp::Ge => res.d >= val.d,
                        BinOp::Lt => res.d < val.d,
                        _ => res.d <= val.d,
                    }
            }
        },
    };
    res.set_bool(b);
    res.is_str = false;
    res
}

/// `&&` and `||`: both sides are always evaluated; undefined sides give an undefined-but-zero
/// result (hts_expr.c `and_expr`).
fn and_or(op: BinOp, res: &mut Val<'_>, val: &Val<'_>) {
    let undefined = |res: &mut Val<'_>| {
        res.undef();
        res.d = 0.0;
    };
    if op == BinOp::And {
        if !res.exists_t() || !val.exists_t() {
            undefined(res);
        } else {
            let b = res.truthy() && val.truthy();
            res.set_bool(b);
            res.is_str = false;
        }
    } else if (!res.exists_t() && !val.exists_t())
        || (!res.exists_t() && !val.truthy())
        || (!val.exists_t() && !res.truthy())
    {
        undefined(res);
    } else {
        let b = res.truthy() || val.truthy();
        res.set_bool(b);
        res.is_str = false;
    }
}

fn func<'a>(f: Func, mut v: Val<'a>, scratch: &mut Scratch) -> Eval<'a> {
    match f {
        Func::Length | Func::Min | Func::Max | Func::Avg => {
            if !v.is_str {
                return Err("length(), min(), max() and avg() need a string");
            }
            let bytes: &[u8] = match v.s {
                Some(t) => spell(t, &mut scratch.a),
                None => &[],
            };
            v.d = match f {
                Func::Length => bytes.len() as f64,
                Func::Min => bytes.iter().min().map_or(f64::NAN, |&b| f64::from(b)),
                Func::Max => bytes.iter().max().map_or(f64::NAN, |&b| f64::from(b)),
                _ if bytes.is_empty() => 0.0,
                _ => bytes.iter().map(|&b| f64::from(b)).sum::<f64>() / bytes.len() as f64,
            };
            v.is_str = false;
        }
        Func::Exists => {
            let e = v.exists_t();
            v.set_bool(e);
            v.is_str = false;
        }
        Func::Exp | Func::Log | Func::Sqrt => {
            v.d = match f {
                Func::Exp => v.d.exp(),
                Func::Log => v.d.ln(),
                _ => v.d.sqrt(),
            };
            v.is_str = false;
            if v.d.is_nan() {
                v.undef();
            }
        }
    }
    Ok(v)
}

/// `hclen`: hard clips at either end (sam.c).
fn hard_clips(c: CigarOps<'_>) -> u32 {
    let n = c.len();
    let is_h = |i: usize| cigar::op_code(c.get(i)) == 5;
    let mut len = 0;
    if n > 0 && is_h(0) {
        len += cigar::op_len(c.get(0));
    }
    if n > 1 && is_h(n - 1) {
        len += cigar::op_len(c.get(n - 1));
    }
    len
}

/// `sclen`: soft clips at either end, inside any hard clip (sam.c).
fn soft_clips(c: CigarOps<'_>) -> u32 {
    let n = c.len() as i64;
    let code = |i: i64| cigar::op_code(c.get(i as usize));
    let len = |i: i64| cigar::op_len(c.get(i as usize));
    let (s, h) = (cigar::SOFT_CLIP, 5);
    let mut total = 0;
    let mut left = 0;
    if n > 0 && code(0) == s {
        total += len(0);
    } else if n > 1 && code(0) == h && code(1) == s {
        left = 1;
        total += len(1);
    }
    if n - 1 > left && code(n - 1) == s {
        total += len(n - 1);
    } else if n - 2 > left && code(n - 1) == h && code(n - 2) == s {
        total += len(n - 2);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::super::Expr;
    use super::*;
    use sortase_bam::Header;

    /// A record: `tid`, 0-based `pos`, `mapq`, `flag`, CIGAR ops (`len << 4 | op`), sequence
    /// codes, aux bytes.
    fn record(pos: i32, mapq: u8, flag: u16, cigar: &[u32], seq: &[u8], aux: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&0i32.to_le_bytes()); // refID 0
        r.extend_from_slice(&pos.to_le_bytes());
        r.extend_from_slice(&[3, mapq, 0, 0]); // l_read_name 3 ("rX\0"), mapq, bin
        r.extend_from_slice(&(cigar.len() as u16).to_le_bytes());
        r.extend_from_slice(&flag.to_le_bytes());
        r.extend_from_slice(&(seq.len() as u32).to_le_bytes());
        r.extend_from_slice(&(-1i32).to_le_bytes()); // next refID
        r.extend_from_slice(&(-1i32).to_le_bytes()); // next pos
        r.extend_from_slice(&(-150i32).to_le_bytes()); // tlen
        r.extend_from_slice(b"rX\0");
        for op in cigar {
            r.extend_from_slice(&op.to_le_bytes());
        }
        for pair in seq.chunks(2) {
            r.push(pair[0] << 4 | pair.get(1).copied().unwrap_or(0));
        }
        r.extend(std::iter::repeat_n(30u8, seq.len()));
        r.extend_from_slice(aux);
        r
    }

    fn check(expr: &str, rec: &[u8]) -> Result<bool, String> {
        let header =
            Header::from_sam_text("@SQ\tSN:chr1\tLN:1000\n@RG\tID:g1\tLB:libA\n".to_string())
                .unwrap();
        let e = Expr::new(expr, &header).map_err(|e| e.to_string())?;
        let r = RecordRef::new(rec).unwrap();
        e.passes(&r, &mut Scratch::default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn fields_and_operators() {
        // 2S5M1D3M1H, seq ACGTACGTAC (codes 1 2 4 8), NM:C:0, XS:Z:abc, RG:Z:g1
        let cigar = [2 << 4 | 4, 5 << 4, 1 << 4 | 2, 3 << 4, 1 << 4 | 5];
        let seq = [1, 2, 4, 8, 1, 2, 4, 8, 1, 2];
        let aux = b"NMC\x00XSZabc\x00RGZg1\x00XFf\x00\x00\xc0\x3f";
        let rec = record(99, 35, 0x63, &cigar, &seq, aux);
        let yes = |e: &str| assert_eq!(check(e, &rec), Ok(true), "{e}");
        let no = |e: &str| assert_eq!(check(e, &rec), Ok(false), "{e}");
        yes("mapq>=30 && flag.paired");
        yes("pos == 100 && endpos == 108");
        yes("qlen == 10 && rlen == 9 && sclen == 2 && hclen == 1 && ncigar == 5");
        yes("cigar == \"2S5M1D3M1H\" && seq == \"ACGTACGTAC\"");
        yes("seq =~ \"(AC){1}GT\" && seq !~ \"TT\"");
        yes("rname == \"chr1\" && rnext == \"*\" && mrefid == -1 && tlen == -150");
        yes("library == \"libA\" && qname == \"rX\"");
        yes("[NM]"); // present, though 0
        no("[NM] && [NM] > 0");
        yes("[XS] == \"abc\" && [XS] > \"abb\"");
        no("[ZZ]");
        yes("![ZZ]");
        no("[ZZ] == 1");
        yes("!([ZZ] == 1)");
        no("[ZZ] != 1");
        yes("exists([NM]) && !exists([ZZ])");
        yes("default([ZZ], 7) == 7");
        yes("[XF] == 1.5 && [XF] * 2 == 3");
        yes("flag & 0x40 && !(flag & 0x80)");
        yes("(flag & 3) == 3");
        yes("7 / 2 == 3.5 && 7 % 4 == 3 && -7 % 4 == -3");
        yes("1 || 0 && 0 == 0"); // one level: (1 || 0) && (0 == 0)
        no("0 || 1 && 0");
        yes("length(seq) == 10 && min(qual) == 30 && max(qual) == 30 && avg(qual) == 30");
        yes("sqrt(16) == 4 && pow(2,3) == 8 && log(1) == 0 && exp(0) == 1");
        yes("\"a\" < \"b\" && 2 > 1 && 2 >= 2 && 1 <= 1");
        no("\"1\" == 1");
        yes("\"1\" != 1");
        yes("~0 == -1 && (5 ^ 1) == 4 && (4 | 1) == 5");
        yes("[ZZ] || 1");
        no("[ZZ] || 0");
        yes("!([ZZ] && 1)");
        yes("!([ZZ] =~ \"a\")");
        yes("pos > 1 * 2 + 3");
    }

    #[test]
    fn errors_at_evaluation_are_htslibs() {
        let rec = record(0, 0, 0, &[], &[], b"XSZabc\x00XBBc\x01\x00\x00\x00\x05");
        assert!(check("[XS] + 1", &rec)
            .unwrap_err()
            .contains("arithmetic on a string"));
        assert!(check("length(mapq)", &rec)
            .unwrap_err()
            .contains("need a string"));
        assert!(check("mapq =~ \"1\"", &rec)
            .unwrap_err()
            .contains("string on their left"));
        assert!(check("[XB] == 1", &rec).unwrap_err().contains("array"));
        // The empty sequence and CIGAR of an unmapped read.
        assert_eq!(check("seq == \"\" && cigar == \"*\"", &rec), Ok(true));
        assert!(check("mapq >", &rec)
            .unwrap_err()
            .contains("expected a value"));
    }

    #[test]
    fn c_casts() {
        assert_eq!(c_i64(f64::NAN), i64::MIN);
        assert_eq!(c_i64(-2.7), -2);
        assert_eq!(c_i64(1e300), i64::MIN);
    }
}
