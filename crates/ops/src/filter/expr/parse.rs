//! The parser of htslib's filter language (hts_expr.c), run once per expression.
//!
//! htslib parses the text again for every record; sortase parses it once into a [`Node`] tree and
//! evaluates the tree per record. The grammar and its quirks are htslib's, level by level (tightest
//! last):
//!
//! ```text
//! and_expr    eq_expr (('&&' | '||') eq_expr)*        one level, left to right: a || b && c = (a || b) && c
//! eq_expr     cmp_expr (('==' | '!=' | '=~' | '!~') eq_expr)?     right-recursive
//! cmp_expr    bitor ('>=' | '>' | '<=' | '<') cmp_expr)?           right-recursive
//! bitor       bitxor ('|' bitxor)*      bitxor  bitand ('^' bitand)*      bitand  add ('&' add)*
//! add         mul (('+' | '-') mul)*    mul     unary (('*' | '/' | '%') unary)*
//! unary       ('+' | '-') simple | ('!' | '~') unary | simple
//! simple      '(' and_expr ')' | number | "string" | field | [TAG] | func '(' ... ')'
//! ```
//! Bit operators bind tighter than comparisons (unlike C). Fields are matched by prefix as
//! htslib's `bam_sym_lookup` does (`posx` is `pos` followed by junk, an error).

use super::{BinOp, Field, Func, Node, UnOp};

/// A syntax error: what was expected and the byte offset where parsing stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Byte offset in the expression.
    pub at: usize,
    /// What went wrong.
    pub what: String,
}

type Parsed = Result<(Node, usize), SyntaxError>;

/// Parses a whole expression (trailing text other than spaces and tabs is an error, as in
/// `hts_filter_eval`).
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let p = Parser { s: text.as_bytes() };
    let (node, end) = p.and_expr(0)?;
    let rest = p.ws(end);
    if rest < p.s.len() {
        return Err(p.error(rest, "unexpected text"));
    }
    Ok(node)
}

struct Parser<'s> {
    s: &'s [u8],
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn starts(&self, i: usize, word: &str) -> bool {
        self.s
            .get(i..)
            .is_some_and(|r| r.starts_with(word.as_bytes()))
    }

    /// hts_expr.c `ws`: skips spaces and tabs only.
    fn ws(&self, mut i: usize) -> usize {
        while matches!(self.at(i), b' ' | b'\t') {
            i += 1;
        }
        i
    }

    fn error(&self, at: usize, what: &str) -> SyntaxError {
        let near: String = String::from_utf8_lossy(&self.s[at.min(self.s.len())..])
            .chars()
            .take(20)
            .collect();
        let what = if near.is_empty() {
            format!("{what} at the end")
        } else {
            format!("{what} at \"{near}\"")
        };
        SyntaxError { at, what }
    }

    fn and_expr(&self, i: usize) -> Parsed {
        let (first, mut end) = self.eq_expr(i)?;
        let mut rest = Vec::new();
        loop {
            let p = self.ws(end);
            let op = match (self.at(p), self.at(p + 1)) {
                (b'&', b'&') => BinOp::And,
                (b'|', b'|') => BinOp::Or,
                _ => break,
            };
            let (node, e) = self.eq_expr(p + 2)?;
            rest.push((op, node));
            end = e;
        }
        Ok((chain(first, rest), end))
    }

    fn eq_expr(&self, i: usize) -> Parsed {
        let (lhs, end) = self.cmp_expr(i)?;
        let p = self.ws(end);
        let op = match (self.at(p), self.at(p + 1)) {
            (b'=', b'=') => BinOp::Eq,
            (b'!', b'=') => BinOp::Ne,
            (b'=', b'~') => BinOp::Match,
            (b'!', b'~') => BinOp::NotMatch,
            _ => return Ok((lhs, end)),
        };
        let (rhs, end) = self.eq_expr(p + 2)?;
        if matches!(op, BinOp::Match | BinOp::NotMatch) {
            let Node::Str(pattern) = rhs else {
                return Err(self.error(
                    p,
                    "the right side of =~ and !~ must be a string literal (a regular expression)",
                ));
            };
            let regex = super::compile_regex(&pattern).map_err(|e| self.error(p + 2, &e))?;
            let negate = op == BinOp::NotMatch;
            return Ok((Node::Regex(Box::new(lhs), negate, Box::new(regex)), end));
        }
        Ok((Node::Binary(op, Box::new(lhs), Box::new(rhs)), end))
    }

    fn cmp_expr(&self, i: usize) -> Parsed {
        let (lhs, end) = self.bitor(i)?;
        let p = self.ws(end);
        let (op, len) = match (self.at(p), self.at(p + 1)) {
            (b'>', b'=') => (BinOp::Ge, 2),
            (b'>', _) => (BinOp::Gt, 1),
            (b'<', b'=') => (BinOp::Le, 2),
            (b'<', _) => (BinOp::Lt, 1),
            _ => return Ok((lhs, end)),
        };
        let (rhs, end) = self.cmp_expr(p + len)?;
        Ok((Node::Binary(op, Box::new(lhs), Box::new(rhs)), end))
    }

    /// One left-to-right level of single-character operators; `op` maps the character at the
    /// operator position (and the one after it) to an operator.
    fn level(
        &self,
        i: usize,
        operand: fn(&Self, usize) -> Parsed,
        op: fn(u8, u8) -> Option<BinOp>,
    ) -> Parsed {
        let (first, mut end) = operand(self, i)?;
        let mut rest = Vec::new();
        loop {
            let p = self.ws(end);
            let Some(o) = op(self.at(p), self.at(p + 1)) else {
                break;
            };
            let (node, e) = operand(self, p + 1)?;
            rest.push((o, node));
            end = e;
        }
        Ok((chain(first, rest), end))
    }

    fn bitor(&self, i: usize) -> Parsed {
        self.level(i, Self::bitxor, |c, n| {
            (c == b'|' && n != b'|').then_some(BinOp::BitOr)
        })
    }

    fn bitxor(&self, i: usize) -> Parsed {
        self.level(i, Self::bitand, |c, _| (c == b'^').then_some(BinOp::BitXor))
    }

    fn bitand(&self, i: usize) -> Parsed {
        self.level(i, Self::add, |c, n| {
            (c == b'&' && n != b'&').then_some(BinOp::BitAnd)
        })
    }

    fn add(&self, i: usize) -> Parsed {
        self.level(i, Self::mul, |c, _| match c {
            b'+' => Some(BinOp::Add),
            b'-' => Some(BinOp::Sub),
            _ => None,
        })
    }

    fn mul(&self, i: usize) -> Parsed {
        self.level(i, Self::unary, |c, _| match c {
            b'*' => Some(BinOp::Mul),
            b'/' => Some(BinOp::Div),
            b'%' => Some(BinOp::Mod),
            _ => None,
        })
    }

    fn unary(&self, i: usize) -> Parsed {
        let p = self.ws(i);
        let (op, operand): (UnOp, fn(&Self, usize) -> Parsed) = match self.at(p) {
            // As htslib: a sign applies to a simple term, `!` and `~` to a unary one.
            b'+' => (UnOp::Plus, Self::simple),
            b'-' => (UnOp::Minus, Self::simple),
            b'!' => (UnOp::Not, Self::unary),
            b'~' => (UnOp::BitNot, Self::unary),
            _ => return self.simple(p),
        };
        let (node, end) = operand(self, p + 1)?;
        Ok((Node::Unary(op, Box::new(node)), end))
    }

    fn simple(&self, i: usize) -> Parsed {
        let p = self.ws(i);
        if self.at(p) == b'(' {
            let (node, end) = self.and_expr(p + 1)?;
            return Ok((node, self.close(end)?));
        }
        if let Some((value, end)) = number(self.s, p) {
            return Ok((Node::Num(value), end));
        }
        if self.at(p) == b'"' {
            return self.string(p);
        }
        if let Some((node, end)) = field(self.s, p) {
            return Ok((node, end));
        }
        self.function(p)
    }

    /// A `)` after optional spaces: the offset after it.
    fn close(&self, end: usize) -> Result<usize, SyntaxError> {
        let q = self.ws(end);
        if self.at(q) != b')' {
            return Err(self.error(q, "missing ')'"));
        }
        Ok(q + 1)
    }

    /// A string literal; escapes as hts_expr.c: `\" \\ \t \n \r` become the character, any other
    /// `\x` stays as both characters (so `"\."` reaches the regex compiler as `\.`).
    fn string(&self, p: usize) -> Parsed {
        let mut out = Vec::new();
        let mut e = p + 1;
        while e < self.s.len() && self.s[e] != b'"' {
            if self.s[e] == b'\\' && e + 1 < self.s.len() {
                match self.s[e + 1] {
                    b'"' => out.push(b'"'),
                    b'\\' => out.push(b'\\'),
                    b't' => out.push(b'\t'),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    c => out.extend_from_slice(&[b'\\', c]),
                }
                e += 2;
            } else {
                out.push(self.s[e]);
                e += 1;
            }
        }
        if e >= self.s.len() {
            return Err(self.error(p, "unterminated string"));
        }
        Ok((Node::Str(out.into()), e + 1))
    }

    fn function(&self, p: usize) -> Parsed {
        const ONE: &[(&str, Func)] = &[
            ("avg(", Func::Avg),
            ("exists(", Func::Exists),
            ("exp(", Func::Exp),
            ("length(", Func::Length),
            ("log(", Func::Log),
            ("min(", Func::Min),
            ("max(", Func::Max),
            ("sqrt(", Func::Sqrt),
        ];
        if let Some(&(name, func)) = ONE.iter().find(|(name, _)| self.starts(p, name)) {
            let (arg, end) = self.and_expr(p + name.len())?;
            return Ok((Node::Func(func, Box::new(arg)), self.close(end)?));
        }
        for (name, two) in [("default(", true), ("pow(", false)] {
            if !self.starts(p, name) {
                continue;
            }
            let (a, end) = self.and_expr(p + name.len())?;
            // htslib wants the comma right after the first argument (no spaces before it).
            if self.at(end) != b',' {
                return Err(self.error(end, "expected ',' right after the first argument"));
            }
            let (b, end) = self.and_expr(self.ws(end + 1))?;
            let node = if two {
                Node::Default(Box::new(a), Box::new(b))
            } else {
                Node::Pow(Box::new(a), Box::new(b))
            };
            return Ok((node, self.close(end)?));
        }
        let word: String = self.s[p..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
            .map(|&c| c as char)
            .collect();
        if word.is_empty() {
            Err(self.error(p, "expected a value"))
        } else {
            Err(self.error(p, "unknown field or function"))
        }
    }
}

fn chain(first: Node, rest: Vec<(BinOp, Node)>) -> Node {
    if rest.is_empty() {
        first
    } else {
        Node::Chain(Box::new(first), rest)
    }
}

/// A field of `bam_sym_lookup` (sam.c) at `p`, matched by prefix in htslib's order.
fn field(s: &[u8], p: usize) -> Option<(Node, usize)> {
    let rest = &s[p..];
    if rest.len() >= 4 && rest[0] == b'[' && rest[1] != 0 && rest[2] != 0 && rest[3] == b']' {
        return Some((Node::Tag([rest[1], rest[2]]), p + 4));
    }
    if let Some(after) = rest.strip_prefix(b"flag.") {
        const BITS: &[(&str, u16)] = &[
            ("paired", 0x1),
            ("proper_pair", 0x2),
            ("unmap", 0x4),
            ("munmap", 0x8),
            ("reverse", 0x10),
            ("mreverse", 0x20),
            ("read1", 0x40),
            ("read2", 0x80),
            ("secondary", 0x100),
            ("qcfail", 0x200),
            ("dup", 0x400),
            ("supplementary", 0x800),
        ];
        let (name, bit) = BITS
            .iter()
            .find(|(name, _)| after.starts_with(name.as_bytes()))?;
        return Some((Node::Field(Field::FlagBit(*bit)), p + 5 + name.len()));
    }
    const FIELDS: &[(&str, Field)] = &[
        ("cigar", Field::Cigar),
        ("endpos", Field::EndPos),
        ("flag", Field::Flag),
        ("hclen", Field::HardClipLength),
        ("library", Field::Library),
        ("mapq", Field::MapQ),
        ("mpos", Field::MatePos),
        ("mrname", Field::MateRefName),
        ("mrefid", Field::MateRefId),
        ("ncigar", Field::CigarOps),
        ("pos", Field::Pos),
        ("pnext", Field::MatePos),
        ("qlen", Field::QueryLength),
        ("qname", Field::Name),
        ("qual", Field::Qual),
        ("rlen", Field::ReferenceLength),
        ("rname", Field::RefName),
        ("rnext", Field::MateRefName),
        ("refid", Field::RefId),
        ("seq", Field::Seq),
        ("sclen", Field::SoftClipLength),
        ("tlen", Field::TemplateLength),
    ];
    FIELDS
        .iter()
        .find(|(name, _)| rest.starts_with(name.as_bytes()))
        .map(|&(name, f)| (Node::Field(f), p + name.len()))
}

/// A number as `hts_str2dbl` (textutils_internal.h) reads it: a short decimal exactly as its fast
/// path computes it (`digits / 10^decimals`), anything else as C's `strtod` (exponents, hex,
/// `inf`, `nan`, a leading `.`). `None` when no number starts at `p`.
fn number(s: &[u8], p: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut v = p;
    let neg = at(v) == b'-';
    if matches!(at(v), b'-' | b'+') {
        v += 1;
    }
    let fast = matches!(at(v), b'1'..=b'9') || (at(v) == b'0' && !matches!(at(v + 1), b'x' | b'X'));
    if fast {
        while at(v) == b'0' {
            v += 1;
        }
        let mut budget = 15;
        let mut n: u64 = 0;
        let digits = |v: &mut usize, n: &mut u64, budget: &mut i32| loop {
            *budget -= 1;
            if *budget == 0 || !at(*v).is_ascii_digit() {
                break;
            }
            *n = *n * 10 + u64::from(at(*v) - b'0');
            *v += 1;
        };
        digits(&mut v, &mut n, &mut budget);
        let mut decimals = 0;
        if budget != 0 && at(v) == b'.' {
            v += 1;
            let before = v;
            digits(&mut v, &mut n, &mut budget);
            decimals = v - before;
        }
        if budget != 0 && !matches!(at(v), b'e' | b'E') {
            const POW10: [f64; 16] = [
                1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                1e15,
            ];
            let d = n as f64 / POW10[decimals];
            return Some((if neg { -d } else { d }, v));
        }
    }
    strtod(s, p)
}

/// C `strtod` on the text at `p`: the longest prefix that is a decimal or hexadecimal number,
/// `inf`/`infinity` or `nan`, with an optional sign.
fn strtod(s: &[u8], p: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut v = p;
    let neg = at(v) == b'-';
    if matches!(at(v), b'-' | b'+') {
        v += 1;
    }
    let sign = |d: f64| if neg { -d } else { d };
    if let Some((d, end)) = special(s, v) {
        return Some((if d.is_nan() { d } else { sign(d) }, end));
    }
    if at(v) == b'0' && matches!(at(v + 1), b'x' | b'X') && at(v + 2).is_ascii_hexdigit() {
        let mut e = v + 2;
        let mut d = 0f64;
        while at(e).is_ascii_hexdigit() {
            d = d * 16.0 + f64::from((at(e) as char).to_digit(16).unwrap_or(0));
            e += 1;
        }
        return Some((sign(d), e));
    }
    let start = v;
    let mut e = v;
    while at(e).is_ascii_digit() {
        e += 1;
    }
    let mut digits = e - start;
    if at(e) == b'.' {
        let f = e + 1;
        let mut g = f;
        while at(g).is_ascii_digit() {
            g += 1;
        }
        digits += g - f;
        if digits > 0 {
            e = g;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(at(e), b'e' | b'E') {
        let mut x = e + 1;
        if matches!(at(x), b'+' | b'-') {
            x += 1;
        }
        if at(x).is_ascii_digit() {
            while at(x).is_ascii_digit() {
                x += 1;
            }
            e = x;
        }
    }
    let text = std::str::from_utf8(&s[start..e]).ok()?;
    let text = text.strip_suffix('.').unwrap_or(text);
    let text = if text.starts_with('.') {
        format!("0{text}")
    } else {
        text.to_string()
    };
    text.parse::<f64>().ok().map(|d| (sign(d), e))
}

/// `inf`, `infinity` or `nan` (with an optional `(chars)`) at `v`, as `strtod` reads them; with
/// where they end. A NaN keeps no sign.
fn special(s: &[u8], v: usize) -> Option<(f64, usize)> {
    let lower = |i: usize, word: &str| {
        s.get(i..i + word.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(word.as_bytes()))
    };
    if lower(v, "infinity") {
        return Some((f64::INFINITY, v + 8));
    }
    if lower(v, "inf") {
        return Some((f64::INFINITY, v + 3));
    }
    if !lower(v, "nan") {
        return None;
    }
    let mut end = v + 3;
    if s.get(end) == Some(&b'(') {
        let close = s[end..].iter().position(|&c| c == b')');
        if let Some(c) = close.filter(|&c| {
            s[end + 1..end + c]
                .iter()
                .all(|ch| ch.is_ascii_alphanumeric() || *ch == b'_')
        }) {
            end += c + 1;
        }
    }
    Some((f64::NAN, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Option<(f64, usize)> {
        number(s.as_bytes(), 0)
    }

    #[test]
    fn numbers_read_as_hts_str2dbl() {
        assert_eq!(num("30"), Some((30.0, 2)));
        assert_eq!(num("0.5)"), Some((0.5, 3)));
        assert_eq!(num(".25"), Some((0.25, 3)));
        assert_eq!(num("1e3"), Some((1000.0, 3)));
        assert_eq!(num("0x1f"), Some((31.0, 4)));
        assert_eq!(num("-7"), Some((-7.0, 2)));
        assert_eq!(num("5."), Some((5.0, 2)));
        assert_eq!(num("inf"), Some((f64::INFINITY, 3)));
        assert!(num("nan").is_some_and(|(d, e)| d.is_nan() && e == 3));
        assert_eq!(num("mapq"), None);
        assert_eq!(num("."), None);
        assert_eq!(num("123456789012345678"), Some((123456789012345678.0, 18)));
    }

    #[test]
    fn precedence_is_htslibs() {
        // `&&` and `||` share one level, left to right.
        let n = parse("1 || 0 && 0").unwrap();
        let Node::Chain(_, rest) = n else {
            panic!("{n:?}")
        };
        assert_eq!(rest.len(), 2);
        // `&` binds tighter than `==`.
        let n = parse("flag & 4 == 4").unwrap();
        assert!(matches!(n, Node::Binary(BinOp::Eq, _, _)), "{n:?}");
    }

    #[test]
    fn errors_name_the_place() {
        let e = parse("mapq >= ").unwrap_err();
        assert!(e.what.contains("expected a value"), "{e:?}");
        let e = parse("mapq = 3").unwrap_err();
        assert_eq!(e.what, "unexpected text at \"= 3\"");
        let e = parse("(mapq > 3").unwrap_err();
        assert!(e.what.starts_with("missing ')'"), "{e:?}");
        let e = parse("mapp > 3").unwrap_err();
        assert!(e.what.starts_with("unknown field or function"), "{e:?}");
        let e = parse("flag.foo").unwrap_err();
        assert!(e.what.starts_with("unknown field"), "{e:?}");
        let e = parse("qname =~ \"[\"").unwrap_err();
        assert!(e.what.contains("regular expression"), "{e:?}");
        assert!(parse("qname =~ [XX]").is_err());
        assert!(parse("\"abc").is_err());
        assert!(parse("default([XX] ,1)").is_err());
        assert!(parse("default([XX], 1)").is_ok());
    }
}
