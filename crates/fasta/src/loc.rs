//! The `.loc` location index: one line per record, `name<TAB>offset<TAB>size`, where `offset` is the
//! uncompressed byte offset of the header line and `size` the bytes of the whole record (header,
//! sequence, `+` line and qualities for FASTQ, every newline, and blank lines before the next record).
//!
//! Records therefore tile the file from the first header to the end: cutting `offset..offset+size`
//! out of the uncompressed file gives the record exactly as stored, and concatenating every record
//! in order gives the file back (minus anything before the first header).
//!
//! FASTA records start at every line beginning with `>`. FASTQ records start at a line beginning
//! with `@` once the previous record's qualities are complete (qualities may themselves start with `@`),
//! so multi-line FASTQ is split as htslib splits it.

use crate::fai::{header_name, Format};
use crate::lines::{Line, LineSink};
use crate::FastaError;
use std::io::Write;

/// One `.loc` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocRecord {
    /// The name faidx gives the record.
    pub name: Vec<u8>,
    /// Uncompressed offset of the header line.
    pub offset: u64,
    /// Bytes in the whole record.
    pub size: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fq {
    Seq,
    Qual,
    Done,
}

/// Builds `.loc` records from the lines of a file ([`LineSink`]).
#[derive(Debug, Default)]
pub struct LocBuilder {
    format: Option<Format>,
    records: Vec<LocRecord>,
    fq: Option<Fq>,
    seq_len: u64,
    qual_len: u64,
    line_num: u64,
}

impl LocBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    fn start(&mut self, line: &Line, text: &[u8]) {
        if let Some(prev) = self.records.last_mut() {
            prev.size = line.start - prev.offset;
        }
        self.records.push(LocRecord {
            name: header_name(text).to_vec(),
            offset: line.start,
            size: 0,
        });
        self.seq_len = 0;
        self.qual_len = 0;
        self.fq = Some(Fq::Seq);
    }

    /// The records, once every line (ending at uncompressed offset `total`) has been seen.
    pub fn finish(mut self, total: u64) -> Result<Vec<LocRecord>, FastaError> {
        if self.fq == Some(Fq::Qual)
            || (self.fq == Some(Fq::Seq) && self.format == Some(Format::Fastq))
        {
            return Err(FastaError::Incomplete(format!(
                "the last FASTQ record '{}' has fewer qualities than bases",
                String::from_utf8_lossy(
                    &self
                        .records
                        .last()
                        .map(|r| r.name.clone())
                        .unwrap_or_default()
                )
            )));
        }
        if let Some(prev) = self.records.last_mut() {
            prev.size = total - prev.offset;
        }
        Ok(self.records)
    }
}

impl LineSink for LocBuilder {
    fn line(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
        self.line_num += 1;
        let format = match self.format {
            Some(f) => f,
            None => match line.first {
                b'>' => *self.format.insert(Format::Fasta),
                b'@' => *self.format.insert(Format::Fastq),
                _ if line.len == 0 || line.cr_only => return Ok(()),
                _ => {
                    return Err(FastaError::format(
                        self.line_num,
                        "text before the first '>' or '@' header",
                    ))
                }
            },
        };
        match format {
            Format::Fasta => {
                if line.first == b'>' {
                    self.start(line, text);
                }
            }
            Format::Fastq => match self.fq {
                None | Some(Fq::Done) => {
                    if line.first == b'@' {
                        self.start(line, text);
                    } else if !(line.len == 0 || line.cr_only) {
                        return Err(FastaError::format(
                            self.line_num,
                            "expected a FASTQ '@' header after the qualities",
                        ));
                    }
                }
                Some(Fq::Seq) => {
                    if line.first == b'+' {
                        self.fq = Some(if self.seq_len == 0 {
                            Fq::Done
                        } else {
                            Fq::Qual
                        });
                    } else {
                        self.seq_len += line.graph;
                    }
                }
                Some(Fq::Qual) => {
                    self.qual_len += line.graph;
                    if self.qual_len >= self.seq_len {
                        self.fq = Some(Fq::Done);
                    }
                }
            },
        }
        Ok(())
    }
}

/// Writes `.loc` lines.
pub fn write<W: Write>(mut out: W, records: &[LocRecord]) -> std::io::Result<()> {
    for r in records {
        out.write_all(&r.name)?;
        writeln!(out, "\t{}\t{}", r.offset, r.size)?;
    }
    out.flush()
}

/// Parses one `.loc` line (without its newline) into (name, offset, size).
pub fn parse_line(line: &[u8]) -> Option<(&[u8], u64, u64)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut fields = line.rsplitn(3, |&b| b == b'\t');
    let size = parse_u64(fields.next()?)?;
    let offset = parse_u64(fields.next()?)?;
    Some((fields.next()?, offset, size))
}

/// Calls `f` for every entry of `.loc` bytes; `what` names the file in errors.
// One memchr walk over bytes read at once, no allocation per line: `fetch` reads the whole .loc
// (1 M lines for the bench FASTA) to resolve a few thousand names.
pub fn for_each(
    bytes: &[u8],
    what: &str,
    mut f: impl FnMut(&[u8], u64, u64),
) -> Result<(), FastaError> {
    let mut start = 0;
    for (i, end) in memchr::memchr_iter(b'\n', bytes)
        .chain(std::iter::once(bytes.len()))
        .enumerate()
    {
        let line = &bytes[start..end.max(start)];
        start = end + 1;
        if line.is_empty() {
            continue;
        }
        let (name, offset, size) = parse_line(line).ok_or_else(|| {
            FastaError::BadIndex(format!(
                "{what}: line {} (of this piece): expected NAME<TAB>OFFSET<TAB>SIZE",
                i + 1
            ))
        })?;
        f(name, offset, size);
    }
    Ok(())
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

/// Looks `names` up in a `.loc` file (first entry of a name wins, as in faidx): returns each name's
/// (offset, size), `None` where absent. The file is cut at newlines into `threads` pieces parsed at
/// once; `what` names it in errors.
pub fn lookup<R: std::io::Read>(
    mut input: R,
    what: &str,
    names: &[&[u8]],
    threads: usize,
) -> Result<Vec<Option<(u64, u64)>>, FastaError> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
    let slots: crate::hash::FastMap<&[u8], usize> = names
        .iter()
        .enumerate()
        .rev()
        .map(|(i, n)| (*n, i))
        .collect();
    // Piece boundaries just after a newline, so each piece holds whole lines.
    let mut cuts = vec![0];
    for t in 1..threads.max(1) {
        let at = (bytes.len() * t / threads).max(*cuts.last().expect("non-empty"));
        let at = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i + 1);
        cuts.push(at);
    }
    cuts.push(bytes.len());
    type Found = Vec<(usize, u64, u64)>;
    let pieces: Vec<Result<Found, FastaError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let (piece, slots) = (&bytes[w[0]..w[1]], &slots);
                scope.spawn(move || {
                    let mut found = Vec::new();
                    for_each(piece, what, |name, off, size| {
                        if let Some(&slot) = slots.get(name) {
                            found.push((slot, off, size));
                        }
                    })?;
                    Ok(found)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("loc lookup thread panicked"))
            .collect()
    });
    let mut out = vec![None; names.len()];
    for piece in pieces {
        for (slot, off, size) in piece? {
            out[slot].get_or_insert((off, size));
        }
    }
    // Repeated names share the first request's slot.
    for (i, n) in names.iter().enumerate() {
        out[i] = out[slots[n]];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::{scan_chunk, Stitcher};

    fn build(text: &[u8]) -> Result<Vec<LocRecord>, FastaError> {
        let mut b = LocBuilder::new();
        let mut st = Stitcher::new();
        st.push(&scan_chunk(text, 0), &mut b)?;
        st.finish(&mut b)?;
        b.finish(text.len() as u64)
    }

    #[test]
    fn records_tile_the_file() {
        let text = b"\n>a x\nAC\n\n>b\n>c\nGG";
        let r = build(text).unwrap();
        let got: Vec<(&[u8], u64, u64)> =
            r.iter().map(|r| (&r.name[..], r.offset, r.size)).collect();
        assert_eq!(got, vec![(&b"a"[..], 1, 9), (b"b", 10, 3), (b"c", 13, 5)]);
    }

    #[test]
    fn fastq_with_at_in_quality() {
        let text = b"@r1\nACGT\n+\n@III\n@r2 z\nA\n+\n@\n";
        let r = build(text).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[1].offset, r[1].size), (16, 12));
        assert!(build(b"@r1\nACGT\n+\nII\n").is_err());
    }

    #[test]
    fn parse_loc_lines() {
        assert_eq!(parse_line(b"a b\t1\t2"), Some((&b"a b"[..], 1, 2)));
        assert_eq!(parse_line(b"a\t1"), None);
        assert_eq!(parse_line(b"a\t1\t2\r"), Some((&b"a"[..], 1, 2)));
        assert_eq!(parse_line(b"a\t1\t-2"), None);
        assert_eq!(parse_line(b"a\t99999999999999999999\t2"), None);
    }

    #[test]
    fn lookup_first_wins_any_threads() {
        let loc = b"a\t0\t5\nb\t5\t3\na\t8\t2\nc\t10\t1\n";
        let names: Vec<&[u8]> = vec![b"c", b"a", b"zz", b"a"];
        for t in 1..6 {
            let got = lookup(&loc[..], "t", &names, t).unwrap();
            assert_eq!(got, vec![Some((10, 1)), Some((0, 5)), None, Some((0, 5))]);
        }
    }
}
