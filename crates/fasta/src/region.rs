//! Region strings (`name`, `name:beg-end`, `{name}:beg-end`) parsed exactly as htslib's
//! `hts_parse_region` parses them for `fai_fetch` (flags 0: thousands separators allowed, samtools'
//! one-sided convention `name:100` = from 100 to the end).

/// `HTS_POS_MAX`: "to the end of the sequence".
pub const POS_MAX: i64 = (1i64 << 62) - 1 + (1i64 << 62);

/// A parsed region: the sequence's id (from the lookup) and a 0-based half-open range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// What the lookup returned for the name.
    pub id: usize,
    /// 0-based start.
    pub beg: i64,
    /// 0-based end, exclusive ([`POS_MAX`]: to the end).
    pub end: i64,
}

/// htslib `hts_parse_decimal` with `HTS_PARSE_THOUSANDS_SEP`: digits with commas, an optional
/// fraction, and an exponent or k/M/G suffix. Returns the value and the bytes consumed (0 if no digits).
pub fn parse_decimal(s: &[u8]) -> (i64, usize) {
    let mut i = 0;
    while i < s.len() && crate::fai::is_space(s[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let (mut n, mut digits, mut decimals) = (0i64, 0, 0i64);
    while i < s.len() {
        match s[i] {
            d @ b'0'..=b'9' => {
                digits += 1;
                n = n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
            }
            b',' => {}
            _ => break,
        }
        i += 1;
    }
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && s[i].is_ascii_digit() {
            decimals += 1;
            digits += 1;
            n = n.wrapping_mul(10).wrapping_add(i64::from(s[i] - b'0'));
            i += 1;
        }
    }
    let (mut e, used) = exponent(&s[i..]);
    i += used;
    e -= decimals;
    while e > 0 {
        n = n.wrapping_mul(10);
        e -= 1;
    }
    while e < 0 {
        n /= 10;
        e += 1;
    }
    let n = if negative { n.wrapping_neg() } else { n };
    (n, if digits > 0 { i } else { 0 })
}

/// The power of ten after a decimal's digits: an exponent (`e`/`E`, signed) or a k/M/G suffix;
/// with the bytes consumed.
fn exponent(s: &[u8]) -> (i64, usize) {
    let mut e = 0i64;
    let mut i = 0;
    match s.first() {
        Some(b'e' | b'E') => {
            i += 1;
            let mut eneg = false;
            if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
                eneg = s[i] == b'-';
                i += 1;
            }
            while i < s.len() && s[i].is_ascii_digit() {
                e = e.wrapping_mul(10).wrapping_add(i64::from(s[i] - b'0'));
                i += 1;
            }
            if eneg {
                e = -e;
            }
        }
        Some(b'k' | b'K') => (e, i) = (3, 1),
        Some(b'm' | b'M') => (e, i) = (6, 1),
        Some(b'g' | b'G') => (e, i) = (9, 1),
        _ => {}
    }
    (e, i)
}

/// Parses `s` as `hts_parse_region(s, ..., flags = 0)` does; `lookup` maps a name to an id.
/// `None` when the name is unknown, the range malformed, or the name ambiguous.
///
/// ```
/// use sortase_fasta::region::{parse_region, POS_MAX};
/// let look = |n: &str| (n == "chr1").then_some(0);
/// let r = parse_region("chr1:1,001-2k", look).unwrap();
/// assert_eq!((r.beg, r.end), (1000, 2000));
/// assert_eq!(parse_region("chr1", look).unwrap().end, POS_MAX);
/// assert!(parse_region("chr2:1-5", look).is_none());
/// ```
pub fn parse_region(s: &str, lookup: impl Fn(&str) -> Option<usize>) -> Option<Region> {
    let whole = |id| Region {
        id,
        beg: 0,
        end: POS_MAX,
    };
    let (name, colon_rest): (&str, Option<&str>) = if let Some(inner) = s.strip_prefix('{') {
        let close = inner.find('}')?;
        let after = &inner[close + 1..];
        (&inner[..close], after.strip_prefix(':'))
    } else {
        match s.rfind(':') {
            None => return lookup(s).map(whole),
            Some(colon) => {
                if let Some(id) = lookup(s) {
                    // The whole string is a name: ambiguous if the part before the colon is one too.
                    return match lookup(&s[..colon]) {
                        Some(_) => None,
                        None => Some(whole(id)),
                    };
                }
                (&s[..colon], Some(&s[colon + 1..]))
            }
        }
    };
    let id = lookup(name)?;
    let Some(range) = colon_rest else {
        return Some(whole(id));
    };
    parse_range(range.as_bytes()).map(|(beg, end)| Region { id, beg, end })
}

fn parse_range(r: &[u8]) -> Option<(i64, i64)> {
    let (b, used) = parse_decimal(r);
    let beg = b.wrapping_sub(1);
    let rest = &r[used..];
    let mut end;
    if beg < 0 {
        let next = rest.first().copied();
        if beg != -1 && next == Some(b'-') && !r.is_empty() {
            return None; // "Coordinates must be > 0"
        }
        if next.is_none_or(|c| c.is_ascii_digit() || c == b',') {
            end = if beg == -1 { POS_MAX } else { -(beg + 1) };
            return Some((0, end));
        } else if beg < -1 {
            return None;
        }
    }
    match rest.first() {
        None => end = POS_MAX,
        Some(b'-') => {
            let (e, used) = parse_decimal(&rest[1..]);
            let tail = &rest[1 + used..];
            if !(tail.is_empty() || tail[0] == b',') {
                return None;
            }
            end = e;
        }
        Some(_) => return None,
    }
    if end == 0 {
        end = POS_MAX;
    }
    if beg >= end {
        return None;
    }
    Some((beg, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(n: &str) -> Option<usize> {
        ["chr1", "a:1-2", "a", "HLA:1"].iter().position(|x| *x == n)
    }

    fn r(s: &str) -> Option<(usize, i64, i64)> {
        parse_region(s, look).map(|r| (r.id, r.beg, r.end))
    }

    #[test]
    fn htslib_cases() {
        assert_eq!(r("chr1:10-20"), Some((0, 9, 20)));
        assert_eq!(r("chr1:10"), Some((0, 9, POS_MAX)));
        assert_eq!(r("chr1:10-"), Some((0, 9, POS_MAX)));
        assert_eq!(r("chr1:-20"), Some((0, 0, 20)));
        assert_eq!(r("chr1:0-5"), Some((0, -1, 5))); // as htslib: one byte before the start
        assert_eq!(r("chr1:-5-10"), None);
        assert_eq!(r("chr1:20-10"), None);
        assert_eq!(r("chr1:1.5k-2e3"), Some((0, 1499, 2000)));
        assert_eq!(r("chr1:5x"), None);
        assert_eq!(r("a:1-2"), None); // ambiguous
        assert_eq!(r("{a:1-2}"), Some((1, 0, POS_MAX)));
        assert_eq!(r("{a}:1-2"), Some((2, 0, 2)));
        assert_eq!(r("HLA:1"), Some((3, 0, POS_MAX)));
        assert_eq!(r("HLA:1:3-4"), Some((3, 2, 4)));
        assert_eq!(r("nope"), None);
    }
}
