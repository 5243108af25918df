//! A BGZF-compressed FASTQ file cut by blocks, so that many tasks read its records in parallel
//! without a pass over the whole file first (the distributed fq2bam's first stage).
//!
//! The file is cut into byte ranges; a record belongs to the range holding the block where its
//! first byte is. [`scan_range`] finds the first record of its range and counts the records from
//! there until one starts in a block at or past the range's end, whose position it reports.
//!
//! Finding a record in the middle of FASTQ text is a guess: a quality line may start with `@`.
//! For four-line FASTQ (header `@`, sequence, `+`, quality of the sequence's length) the guess
//! "a line starting with `@` whose second next line starts with `+`, with equally long lines
//! between, and `@` or the end after them" has one answer: from a quality line starting with `@`,
//! the second next line is the next record's sequence, which never starts with `+`. Anything else
//! (multi-line records, FASTA, blank lines, malformed records) makes the scan [`RangeScan::regular`]
//! false, and a caller reads the file in one pass instead (with [`crate::fastq::FastqReader`],
//! which reports the problem where there is one).
//!
//! The guess is checked, not trusted: range 0 starts at the file's first byte, and each range's
//! walk record by record ends exactly where the next non-empty range's first record was found
//! ([`chain`]), so every first record is a real one by induction.

use crate::fastq::{FastqError, MAX_RECORD_BYTES};
use sortase_bgzf::{scanner::find_block_start_in, SeekReader};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, Read, Seek};
use std::path::Path;

/// What [`scan_range`] found in one byte range of a BGZF FASTQ file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RangeScan {
    /// Virtual position (block offset << 16 | offset in its data) of the range's first record;
    /// `None`: no record starts in the range's blocks.
    pub first: Option<u64>,
    /// Records that start in the range's blocks.
    pub records: u64,
    /// Virtual position of the first record after them; `None`: the end of the file.
    pub next: Option<u64>,
    /// Whether every record walked is four-line FASTQ; if not, the counts mean nothing.
    pub regular: bool,
}

/// One line's start and the facts the guess looks at.
#[derive(Debug, Clone, Copy)]
struct Line {
    at: u64,
    first: Option<u8>,
    len: usize,
}

struct Lines<R> {
    reader: SeekReader<R>,
    buf: Vec<u8>,
}

impl<R: Read + Seek> Lines<R> {
    /// The next line (without `\n` or `\r\n`); `None` at the end of the file.
    fn next(&mut self) -> std::io::Result<Option<Line>> {
        let Some(at) = self.reader.next_byte_position()? else {
            return Ok(None);
        };
        self.buf.clear();
        (&mut self.reader)
            .take(MAX_RECORD_BYTES as u64)
            .read_until(b'\n', &mut self.buf)?;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(Some(Line {
            at,
            first: self.buf.first().copied(),
            len: self.buf.len(),
        }))
    }
}

/// Scans the range `start..end` (compressed byte offsets) of the BGZF FASTQ file at `path`.
pub fn scan_range(path: &Path, start: u64, end: u64) -> Result<RangeScan, FastqError> {
    let file = File::open(path).map_err(|e| FastqError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    scan_range_in(file, path, start, end)
}

/// [`scan_range`] of the file opened as `file` (a local file or a remote object), named `path`
/// in errors.
pub fn scan_range_in<R: Read + Seek>(
    mut file: R,
    path: &Path,
    start: u64,
    end: u64,
) -> Result<RangeScan, FastqError> {
    let io = |e: std::io::Error| FastqError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let block = if start == 0 {
        Some(0)
    } else {
        find_block_start_in(&mut file, start).map_err(io)?
    };
    let Some(block) = block.filter(|&b| b < end) else {
        return Ok(RangeScan {
            regular: true,
            ..RangeScan::default()
        });
    };
    let mut reader = SeekReader::new(file);
    reader.seek_virtual(block << 16).map_err(|e| io(e.into()))?;
    let mut lines = Lines {
        reader,
        buf: Vec::new(),
    };
    let in_range = |at: u64| at >> 16 < end;
    let mut ahead = VecDeque::new();
    let first = if start == 0 {
        lines.next().map_err(io)?.map(|l| {
            ahead.push_back(l);
            l.at
        })
    } else {
        find_record(&mut lines, &mut ahead, in_range).map_err(io)?
    };
    let Some(first) = first.filter(|&at| in_range(at)) else {
        return Ok(RangeScan {
            regular: true,
            ..RangeScan::default()
        });
    };
    walk(&mut lines, ahead, in_range)
        .map(|(records, next, regular)| RangeScan {
            first: Some(first),
            records,
            next,
            regular,
        })
        .map_err(io)
}

/// Reads lines until the guess holds for the oldest one in `ahead` (left as its front) or the
/// lines leave the range; returns the record's position.
fn find_record<R: Read + Seek>(
    lines: &mut Lines<R>,
    ahead: &mut VecDeque<Line>,
    in_range: impl Fn(u64) -> bool,
) -> std::io::Result<Option<u64>> {
    loop {
        while ahead.len() < 5 {
            match lines.next()? {
                Some(l) => ahead.push_back(l),
                None => break,
            }
        }
        let Some(front) = ahead.front() else {
            return Ok(None);
        };
        if !in_range(front.at) {
            return Ok(None);
        }
        let l: Vec<&Line> = ahead.iter().collect();
        let record = l.len() >= 4
            && l[0].first == Some(b'@')
            && l[2].first == Some(b'+')
            && l[1].len == l[3].len
            && l.get(4).is_none_or(|n| n.first == Some(b'@'));
        if record {
            return Ok(Some(front.at));
        }
        ahead.pop_front();
    }
}

/// Walks four-line records from the front of `ahead` while they start in the range: (records,
/// the next record's position, whether all were four-line FASTQ).
fn walk<R: Read + Seek>(
    lines: &mut Lines<R>,
    mut ahead: VecDeque<Line>,
    in_range: impl Fn(u64) -> bool,
) -> std::io::Result<(u64, Option<u64>, bool)> {
    let mut records = 0;
    let mut next = |ahead: &mut VecDeque<Line>| match ahead.pop_front() {
        Some(l) => Ok(Some(l)),
        None => lines.next(),
    };
    loop {
        let Some(header) = next(&mut ahead)? else {
            return Ok((records, None, true));
        };
        if !in_range(header.at) {
            return Ok((records, Some(header.at), true));
        }
        let (Some(seq), Some(plus), Some(qual)) =
            (next(&mut ahead)?, next(&mut ahead)?, next(&mut ahead)?)
        else {
            return Ok((records, None, false));
        };
        let regular = header.first == Some(b'@')
            && !matches!(seq.first, Some(b'@' | b'>' | b'+'))
            && plus.first == Some(b'+')
            && qual.len == seq.len;
        if !regular {
            return Ok((records, None, false));
        }
        records += 1;
    }
}

/// Checks that the scans of a file's consecutive ranges (in order) join up: each non-empty
/// range's walk ends where the next non-empty range's first record is, and the last at the end of
/// the file. Returns each range's first record number in the file (the records before it), and
/// the file's records; `None` if the scans cannot be trusted (irregular records, or a guess that
/// the walk before it contradicts).
pub fn chain(scans: &[RangeScan]) -> Option<(Vec<u64>, u64)> {
    let mut before = Vec::with_capacity(scans.len());
    let mut records = 0u64;
    let mut expect: Option<Option<u64>> = None; // the previous walk's end
    for s in scans {
        if !s.regular {
            return None;
        }
        before.push(records);
        let Some(first) = s.first else { continue };
        match expect {
            None if first != 0 => return None, // the first records are the file's first
            Some(end) if end != Some(first) => return None,
            _ => {}
        }
        records += s.records;
        expect = Some(s.next);
    }
    match expect {
        None | Some(None) => Some((before, records)),
        Some(Some(_)) => None, // a record after the last range's walk: ranges must cover the file
    }
}

/// A range of a file that holds records (from its scan): its first record's virtual position, the
/// records of the file before it, and where the range's walk ended (`None`: the end of the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeStart {
    /// The first record's virtual position.
    pub first: u64,
    /// The file's records before it.
    pub before: u64,
    /// Where the walk ended (`None`: the end of the file).
    pub next: Option<u64>,
}

/// The ranges of a file that hold records, from the scans of its consecutive ranges (in order),
/// and the file's records; `None` if the scans do not join up ([`chain`]).
pub fn range_starts(scans: &[RangeScan]) -> Option<(Vec<RangeStart>, u64)> {
    let (before, records) = chain(scans)?;
    let starts = scans
        .iter()
        .zip(before)
        .filter_map(|(s, before)| {
            s.first.map(|first| RangeStart {
                first,
                before,
                next: s.next,
            })
        })
        .collect();
    Some((starts, records))
}

/// Where records `before + 1 ..` of a file start, for a reader that seeks there: the virtual
/// position of a record and how many records to drop from it, and past the last compressed byte
/// that the `count` records from there can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsAt {
    /// A record's virtual position.
    pub at: u64,
    /// Records to drop from there.
    pub skip: u64,
    /// Past the last compressed byte the records can reach (the block holding the position where
    /// the last of their ranges' walks ended, or the file's end).
    pub end: u64,
}

/// Where records `before + 1 ..= before + count` lie in a file of `len` compressed bytes whose
/// ranges that hold records are `ranges` ([`range_starts`]).
pub fn records_at(ranges: &[RangeStart], len: u64, before: u64, count: u64) -> RecordsAt {
    let block_max = sortase_bgzf::BLOCK_MAX as u64;
    // The last range starting at or before the record (none: an empty file).
    let holding = |record: u64| ranges.iter().rposition(|r| r.before <= record);
    let (at, skip) =
        holding(before).map_or((0, 0), |j| (ranges[j].first, before - ranges[j].before));
    let end = match count.checked_sub(1).and_then(|c| holding(before + c)) {
        None => at >> 16,
        Some(j) => ranges[j]
            .next
            .map_or(len, |next| ((next >> 16) + block_max).min(len)),
    };
    RecordsAt {
        at,
        skip,
        end: end.max(at >> 16),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
    use std::io::Write;

    fn fastq(n: usize) -> Vec<u8> {
        let mut t = Vec::new();
        for i in 0..n {
            let len = 20 + i % 50;
            let seq: Vec<u8> = (0..len).map(|k| b"ACGT"[(i * 7 + k) % 4]).collect();
            // Quality lines that start with '@' and '+' (the guess must not take them).
            let q0 = [b'@', b'+', b'I'][i % 3];
            let mut qual = vec![b'I'; len];
            qual[0] = q0;
            writeln!(t, "@read{i}/1 extra").unwrap();
            t.extend_from_slice(&seq);
            t.extend_from_slice(b"\n+\n");
            t.extend_from_slice(&qual);
            t.push(b'\n');
        }
        t
    }

    /// `text` as BGZF with small blocks (every 700 bytes), so records straddle blocks.
    fn bgzf(text: &[u8], dir: &Path) -> std::path::PathBuf {
        let path = dir.join("r.fq.gz");
        let mut w = ParallelWriter::new(
            File::create(&path).unwrap(),
            WriterOptions::new(1, CompressionLevel::samtools(1)),
        );
        for piece in text.chunks(700) {
            w.write_all(piece).unwrap();
            w.end_block().unwrap();
        }
        w.finish().unwrap();
        path
    }

    fn scans(path: &Path, cut: u64) -> Vec<RangeScan> {
        let len = std::fs::metadata(path).unwrap().len();
        (0..len.div_ceil(cut))
            .map(|k| scan_range(path, k * cut, ((k + 1) * cut).min(len)).unwrap())
            .collect()
    }

    #[test]
    fn ranges_count_every_record_once_at_any_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = bgzf(&fastq(2000), dir.path());
        for cut in [1, 97, 1000, 4096, 1 << 20] {
            let s = scans(&path, cut);
            let (before, records) = chain(&s).unwrap_or_else(|| panic!("cut {cut}: {s:?}"));
            assert_eq!(records, 2000, "cut {cut}");
            assert_eq!(before.len(), s.len());
            // Each range's first record, read from its position, is the record its number says.
            let mut r = SeekReader::new(File::open(&path).unwrap());
            for (k, scan) in s.iter().enumerate() {
                let Some(at) = scan.first else { continue };
                r.seek_virtual(at).unwrap();
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                assert_eq!(line, format!("@read{}/1 extra\n", before[k]), "cut {cut}");
            }
        }
    }

    #[test]
    fn anything_but_four_line_fastq_is_irregular() {
        let dir = tempfile::tempdir().unwrap();
        let mut multi = fastq(300);
        multi.extend_from_slice(b"@wrapped\nACGT\nACGT\n+\nIIII\nIIII\n");
        multi.extend_from_slice(&fastq(300));
        let path = bgzf(&multi, dir.path());
        for cut in [500, 1 << 20] {
            assert_eq!(chain(&scans(&path, cut)), None, "cut {cut}");
        }
        let fasta = bgzf(b">a\nACGT\n>b\nACGT\n", dir.path());
        assert_eq!(chain(&scans(&fasta, 1 << 20)), None);
    }

    #[test]
    fn empty_file_and_empty_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let path = bgzf(b"", dir.path());
        assert_eq!(
            chain(&scans(&path, 5)),
            Some((vec![0; scans(&path, 5).len()], 0))
        );
    }

    #[test]
    fn a_wrong_guess_breaks_the_chain() {
        let scan = |first, records, next| RangeScan {
            first,
            records,
            next,
            regular: true,
        };
        let good = [scan(Some(0), 3, Some(900)), scan(Some(900), 2, None)];
        assert_eq!(chain(&good), Some((vec![0, 3], 5)));
        let wrong = [scan(Some(0), 3, Some(900)), scan(Some(950), 2, None)];
        assert_eq!(chain(&wrong), None);
        let short = [scan(Some(0), 3, Some(900)), scan(None, 0, None)];
        assert_eq!(chain(&short), None);
    }

    #[test]
    fn records_at_finds_any_record_and_reaches_past_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = bgzf(&fastq(500), dir.path());
        let len = std::fs::metadata(&path).unwrap().len();
        let (ranges, records) = range_starts(&scans(&path, 1000)).unwrap();
        assert_eq!(records, 500);
        assert!(ranges.len() > 3 && ranges[0].first == 0 && ranges[0].before == 0);
        let mut r = SeekReader::new(File::open(&path).unwrap());
        for (before, count) in [(0, 500), (0, 1), (137, 100), (499, 1), (250, 250)] {
            let at = records_at(&ranges, len, before, count);
            r.seek_virtual(at.at).unwrap();
            let mut line = String::new();
            for _ in 0..4 * at.skip + 1 {
                line.clear();
                r.read_line(&mut line).unwrap();
            }
            assert_eq!(line, format!("@read{before}/1 extra\n"), "{before}");
            assert!(at.at >> 16 <= at.end && at.end <= len, "{at:?}");
            if before + count == 500 {
                assert_eq!(at.end, len);
            }
        }
        // An empty file: nothing to read.
        let at = records_at(&[], 28, 0, 0);
        assert_eq!((at.at, at.skip, at.end), (0, 0, 0));
    }
}
