//! Physical location (tile, x, y) from a read name, as Picard's `ReadNameParser`.
//!
//! The default parser takes the last three `:`-separated fields of names with 5 or 7 fields
//! (Illumina `inst:run:fc:lane:tile:x:y`), each parsed as Picard's `rapidParseInt` does (an optional
//! `-`, then the leading digits, wrapping like Java `int`). A user regex must match the whole name and
//! capture tile, x and y in groups 1-3 (Java `Integer.parseInt`: no overflow allowed). Picard stores
//! the tile, x and y as Java `short`s, so values wrap at 16 bits; so do ours.

use regex::bytes::Regex;

/// A read's position on the flow cell (Picard `PhysicalLocationShort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Location {
    /// Tile; -1 when the name was not parsed.
    pub tile: i16,
    /// X coordinate (Java `short`).
    pub x: i16,
    /// Y coordinate (Java `short`).
    pub y: i16,
}

impl Location {
    /// No location (Picard's `NO_VALUE` tile).
    pub const NONE: Location = Location {
        tile: -1,
        x: -1,
        y: -1,
    };
}

/// How read names are parsed.
#[derive(Clone, Debug)]
pub enum NameParser {
    /// Picard's default: the last three `:`-separated fields.
    Default,
    /// A regex with three capture groups, matched against the whole name.
    Regex(Regex),
    /// `READ_NAME_REGEX=null`: no optical-duplicate detection.
    Disabled,
}

impl NameParser {
    /// The parser for a `--read-name-regex` value (`None`: Picard's default; `"null"`: disabled).
    pub fn new(regex: Option<&str>) -> Result<Self, regex::Error> {
        Ok(match regex {
            None => NameParser::Default,
            Some("null") => NameParser::Disabled,
            Some(r) => NameParser::Regex(Regex::new(&format!("^(?:{r})$"))?),
        })
    }

    /// Whether optical duplicates are looked for at all.
    pub fn enabled(&self) -> bool {
        !matches!(self, NameParser::Disabled)
    }

    /// The location in `name`, if it parses.
    pub fn parse(&self, name: &[u8]) -> Option<Location> {
        let [tile, x, y] = match self {
            NameParser::Default => match last_three_fields(name)? {
                (5 | 7, t) => t,
                _ => return None,
            },
            NameParser::Regex(re) => {
                let c = re.captures(name)?;
                let field = |i| c.get(i).and_then(|m| java_parse_int(m.as_bytes()));
                [field(1)?, field(2)?, field(3)?]
            }
            NameParser::Disabled => return None,
        };
        Some(Location {
            tile: tile as i16,
            x: x as i16,
            y: y as i16,
        })
    }
}

/// Picard `getLastThreeFields(name, ':')`: the number of fields and the last three parsed; `None`
/// when a parsed field has no leading digits (Picard's NumberFormatException) or there are fewer than
/// three fields.
fn last_three_fields(name: &[u8]) -> Option<(usize, [i32; 3])> {
    let mut tokens = [0i32; 3];
    let mut idx = 3usize;
    let mut fields = 0usize;
    let mut end = name.len();
    let mut i = name.len();
    while i > 0 && idx > 0 {
        i -= 1;
        if name[i] == b':' || i == 0 {
            fields += 1;
            let start = if i == 0 { 0 } else { i + 1 };
            idx -= 1;
            tokens[idx] = rapid_parse_int(&name[start..end])?;
            end = i;
        }
    }
    while i > 0 {
        i -= 1;
        if name[i] == b':' || i == 0 {
            fields += 1;
        }
    }
    (fields >= 3).then_some((fields, tokens))
}

/// Picard `rapidParseInt`: optional `-`, then leading ASCII digits (at least one), wrapping.
fn rapid_parse_int(s: &[u8]) -> Option<i32> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let v = digits[..n].iter().fold(0i32, |v, &c| {
        v.wrapping_mul(10).wrapping_add(i32::from(c - b'0'))
    });
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Java `Integer.parseInt`: optional sign, ASCII digits only, in range.
fn java_parse_int(s: &[u8]) -> Option<i32> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(t: i16, x: i16, y: i16) -> Option<Location> {
        Some(Location { tile: t, x, y })
    }

    #[test]
    fn default_parser() {
        let p = NameParser::Default;
        assert_eq!(
            p.parse(b"M1:7:FC:1:1101:15589:1331"),
            loc(1101, 15589, 1331)
        );
        assert_eq!(p.parse(b"lane:2:300:400:500"), loc(300, 400, 500));
        assert_eq!(p.parse(b"a:2:3:4"), None); // 4 fields
        assert_eq!(p.parse(b"a:b:c:d:x:5:6"), None); // tile has no digits
        assert_eq!(p.parse(b"r1"), None);
        assert_eq!(p.parse(b"a:b:c:d:12ab:5:6"), loc(12, 5, 6));
        // Java short wrap of x = 70000.
        assert_eq!(p.parse(b"a:b:c:d:1:70000:6"), loc(1, 70000i32 as i16, 6));
    }

    #[test]
    fn regex_parser() {
        let p = NameParser::new(Some(r"r_(\d+)_(\d+)_(\d+)")).unwrap();
        assert_eq!(p.parse(b"r_3_40_50"), loc(3, 40, 50));
        assert_eq!(p.parse(b"xr_3_40_50"), None);
        assert!(!NameParser::new(Some("null")).unwrap().enabled());
    }
}
