//! BED regions for `view -L`, read and matched as samtools' bedidx.c does.
//!
//! samtools' reader takes, per line, the reference name and one or two numbers: two are a BED
//! interval (0-based, end exclusive), one is a VCF-style 1-based position (`chr 100` = `[99, 100)`).
//! Blank lines and `#` comments are skipped, `track` and `browser` lines too when they do not parse.
//! A record overlaps when it has a reference and some interval `[b, e)` has `e > pos` and
//! `b < endpos` (htslib's `bam_endpos`). Intervals are kept sorted by start with a running maximum
//! of ends, so one binary search answers a record (bedidx.c walks a linear index to the same
//! answer).

use super::FilterError;
use sortase_bam::{Header, RecordRef};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// The regions of a BED file by reference name.
#[derive(Debug, Clone, Default)]
pub struct BedRegions {
    by_name: HashMap<Vec<u8>, Vec<(i64, i64)>>,
}

/// One reference's intervals, ready for queries.
#[derive(Debug, Clone, Default)]
struct Intervals {
    /// Starts, ascending.
    begs: Vec<i64>,
    /// `max_end[i]`: the largest end among intervals `0..=i`.
    max_end: Vec<i64>,
}

impl Intervals {
    fn new(mut list: Vec<(i64, i64)>) -> Self {
        list.sort_unstable();
        let mut max = i64::MIN;
        let max_end = list
            .iter()
            .map(|&(_, e)| {
                max = max.max(e);
                max
            })
            .collect();
        Self {
            begs: list.iter().map(|&(b, _)| b).collect(),
            max_end,
        }
    }

    /// Whether some interval overlaps `[beg, end)`.
    fn overlaps(&self, beg: i64, end: i64) -> bool {
        let k = self.begs.partition_point(|&b| b < end);
        k > 0 && self.max_end[k - 1] > beg
    }
}

/// [`BedRegions`] matched to a header's references.
#[derive(Debug, Clone, Default)]
pub struct BedFilter {
    by_tid: Vec<Option<Intervals>>,
}

impl BedFilter {
    /// Whether `r` overlaps a region (samtools view `-L`): records without a reference never do.
    #[inline]
    pub fn overlaps(&self, r: &RecordRef<'_>) -> bool {
        let Ok(tid) = usize::try_from(r.reference_sequence_id()) else {
            return false;
        };
        match self.by_tid.get(tid) {
            Some(Some(iv)) => iv.overlaps(i64::from(r.position()), r.end_position()),
            _ => false,
        }
    }
}

impl BedRegions {
    /// Reads a BED file (gzip-compressed or not; `-`: standard input).
    pub fn read(path: &Path) -> Result<Self, FilterError> {
        let io = |source| FilterError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut raw = Vec::new();
        if path == Path::new("-") {
            std::io::stdin().read_to_end(&mut raw).map_err(io)?;
        } else {
            raw = std::fs::read(path).map_err(io)?;
        }
        if raw.starts_with(&[0x1f, 0x8b]) {
            let mut text = Vec::new();
            flate2::read::MultiGzDecoder::new(&raw[..])
                .read_to_end(&mut text)
                .map_err(io)?;
            raw = text;
        }
        Self::parse(&raw).map_err(|(line, what)| FilterError::Bed {
            path: path.display().to_string(),
            line,
            what,
        })
    }

    /// Parses BED text; an error is (line number, problem).
    pub fn parse(text: &[u8]) -> Result<Self, (usize, String)> {
        let mut by_name: HashMap<Vec<u8>, Vec<(i64, i64)>> = HashMap::new();
        let mut number = 0;
        for line in text.split(|&c| c == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            number += 1;
            let line = trim_start(line);
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let name_len = line
                .iter()
                .position(|c| c.is_ascii_whitespace())
                .unwrap_or(line.len());
            let (name, rest) = line.split_at(name_len);
            let skippable = name == b"browser" || name == b"track";
            let (beg, end) = match scan_two(rest) {
                (Some(b), Some(e)) => (b, e),
                // VCF-style: one 1-based position.
                (Some(p), None) => (p.wrapping_sub(1), p),
                _ if skippable => continue,
                _ => {
                    let what = "expected a reference name and a start and end (or one position)";
                    return Err((number, what.to_string()));
                }
            };
            if end < beg {
                if skippable {
                    continue;
                }
                let what = format!("end ({end}) must not be less than start ({beg})");
                return Err((number, what));
            }
            by_name
                .entry(name.to_vec())
                .or_default()
                .push((beg as i64, end as i64));
        }
        Ok(Self { by_name })
    }

    /// The regions on `header`'s references (names that are not in the header match nothing).
    pub fn for_header(&self, header: &Header) -> BedFilter {
        BedFilter {
            by_tid: header
                .references()
                .iter()
                .map(|r| self.by_name.get(&r.name).cloned().map(Intervals::new))
                .collect(),
        }
    }
}

fn trim_start(mut s: &[u8]) -> &[u8] {
    while let [c, rest @ ..] = s {
        if !c.is_ascii_whitespace() && *c != 0x0b {
            break;
        }
        s = rest;
    }
    s
}

/// `sscanf(s, "%lu %lu")`: up to two unsigned numbers, each after optional white space, with an
/// optional sign (a negative one wraps, as `strtoul`'s does).
fn scan_two(s: &[u8]) -> (Option<u64>, Option<u64>) {
    let (first, rest) = scan_u64(s);
    match first {
        Some(a) => (Some(a), scan_u64(rest).0),
        None => (None, None),
    }
}

fn scan_u64(s: &[u8]) -> (Option<u64>, &[u8]) {
    let s = trim_start(s);
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return (None, s);
    }
    let v = digits[..n].iter().fold(0u64, |v, &c| {
        v.saturating_mul(10).saturating_add(u64::from(c - b'0'))
    });
    (Some(if neg { v.wrapping_neg() } else { v }), &digits[n..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bed_and_vcf_style_lines() {
        let text = b"# comment\ntrack name=x\n\nchr1\t10\t20\textra\n  chr1 30 40\r\nchr2\t100\n";
        let bed = BedRegions::parse(text).unwrap();
        assert_eq!(bed.by_name[&b"chr1".to_vec()], vec![(10, 20), (30, 40)]);
        assert_eq!(bed.by_name[&b"chr2".to_vec()], vec![(99, 100)]);
        assert_eq!(
            BedRegions::parse(b"chr1\t20\t10\n").unwrap_err(),
            (1, "end (10) must not be less than start (20)".to_string())
        );
        assert_eq!(BedRegions::parse(b"chr1\tx\n").unwrap_err().0, 1);
        assert_eq!(BedRegions::parse(b"\n\nchr1\n").unwrap_err().0, 1);
    }

    #[test]
    fn overlap_is_half_open() {
        let iv = Intervals::new(vec![(100, 200), (10, 20), (15, 18), (300, 300)]);
        assert!(iv.overlaps(19, 20));
        assert!(!iv.overlaps(20, 100));
        assert!(iv.overlaps(99, 101));
        assert!(!iv.overlaps(200, 250));
        // An empty interval [300, 300) still overlaps a record spanning 300.
        assert!(iv.overlaps(299, 301));
        assert!(!iv.overlaps(300, 301));
        assert!(!iv.overlaps(0, 10));
    }
}
