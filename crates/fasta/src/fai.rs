//! The `.fai` index, built exactly as htslib's `fai_build_core` builds it (same records, same errors),
//! but fed whole lines from [`crate::lines`] instead of one `bgzf_getc` per byte.
//!
//! Every branch of htslib's byte state machine depends only on a line's first byte, its length, its
//! printable-character count and whether it is `\r` alone, so a line-level replay gives identical
//! records. Samtools quirks kept on purpose: an empty FASTA sequence is not indexed, a duplicate name
//! keeps the first record (with a warning), a file whose last record is empty fails.

use crate::hash::FastMap;
use crate::lines::{Line, LineSink};
use crate::FastaError;
use std::hash::BuildHasher;
use std::io::{BufRead, Write};

/// FASTA or FASTQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `>` records.
    Fasta,
    /// `@` records with qualities.
    Fastq,
}

/// One `.fai` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaiRecord {
    /// Sequence name, as the bytes of the header (htslib keeps names that are not UTF-8 as they are).
    pub name: Vec<u8>,
    /// Bases (printable characters) in the sequence.
    pub length: u64,
    /// Uncompressed offset of the first base.
    pub offset: u64,
    /// Bases per full line.
    pub line_bases: u64,
    /// Bytes per full line, newline (and any `\r`) included.
    pub line_width: u64,
    /// Uncompressed offset of the first quality (FASTQ only).
    pub qual_offset: Option<u64>,
}

/// A whole `.fai` index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fai {
    /// FASTA or FASTQ.
    pub format: Format,
    /// Records in file order.
    pub records: Vec<FaiRecord>,
}

/// The name faidx gives a header line: the first whitespace-delimited word after the marker.
///
/// ```
/// assert_eq!(sortase_fasta::fai::header_name(b">  chr1 the first\r"), b"chr1");
/// assert_eq!(sortase_fasta::fai::header_name(b">"), b"");
/// ```
pub fn header_name(header: &[u8]) -> &[u8] {
    let rest = header.get(1..).unwrap_or_default();
    let start = rest
        .iter()
        .position(|b| !is_space(*b))
        .unwrap_or(rest.len());
    let rest = &rest[start..];
    let end = rest.iter().position(|b| is_space(*b)).unwrap_or(rest.len());
    &rest[..end]
}

/// C `isspace` in the C locale.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    OutRead,
    InSeq,
    SeqEnd,
    InQual,
}

/// Builds a `.fai` from the lines of a file ([`LineSink`]).
#[derive(Debug)]
pub struct FaiBuilder {
    format: Option<Format>,
    state: State,
    read_done: bool,
    line_num: u64,
    name: Vec<u8>,
    seq_offset: u64,
    qual_offset: u64,
    seq_len: u64,
    qual_len: u64,
    char_len: u64,
    line_len: u64,
    records: Vec<FaiRecord>,
    /// Name hash -> index of the first record with that hash (names are compared on a hit), so
    /// the duplicate check stores 16 bytes per record and no second copy of the name.
    seen: FastMap<u64, usize>,
    /// Records whose name hash collided with a different name (practically never used).
    collided: Vec<usize>,
    /// Duplicate names skipped, as htslib warns about them.
    pub warnings: Vec<String>,
}

impl Default for FaiBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl FaiBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            format: None,
            state: State::OutRead,
            read_done: false,
            line_num: 0,
            name: Vec::new(),
            seq_offset: 0,
            qual_offset: 0,
            seq_len: 0,
            qual_len: 0,
            char_len: 0,
            line_len: 0,
            records: Vec::new(),
            seen: FastMap::default(),
            collided: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    fn insert(&mut self) {
        let hash = std::hash::BuildHasherDefault::<crate::hash::FastHasher>::default()
            .hash_one(&self.name[..]);
        let name = &self.name;
        let duplicate = match self.seen.get(&hash) {
            None => false,
            Some(&i) => {
                self.records[i].name == *name
                    || self.collided.iter().any(|&j| self.records[j].name == *name)
            }
        };
        if duplicate {
            self.warnings.push(format!(
                "Ignoring duplicate sequence \"{}\" at byte offset {}",
                self.name_str(),
                self.seq_offset
            ));
            return;
        }
        let index = self.records.len();
        match self.seen.entry(hash) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(index);
            }
            // Another name with the same hash: keep the first in the map, this one for exact checks.
            std::collections::hash_map::Entry::Occupied(_) => self.collided.push(index),
        }
        let fastq = self.format == Some(Format::Fastq);
        self.records.push(FaiRecord {
            name: self.name.clone(),
            length: self.seq_len,
            offset: self.seq_offset,
            line_bases: self.char_len,
            line_width: self.line_len,
            qual_offset: fastq.then_some(self.qual_offset),
        });
    }

    fn header(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
        if !line.terminated && line.len == 1 {
            // A lone marker at the very end: htslib's IN_NAME state is never entered (no byte
            // follows), so the previous record stands and the file is fine (fuzzer, checked
            // against samtools 1.24).
            return Ok(());
        }
        if self.read_done {
            self.insert();
            self.read_done = false;
        }
        self.name.clear();
        self.name.extend_from_slice(header_name(text));
        if !line.terminated {
            return Err(FastaError::format(
                self.line_num,
                format!("the last entry '{}' has no sequence", self.name_str()),
            ));
        }
        self.state = State::InSeq;
        self.seq_len = 0;
        self.qual_len = 0;
        self.char_len = 0;
        self.line_len = 0;
        self.seq_offset = line.end();
        Ok(())
    }

    fn err(&self, reason: String) -> FastaError {
        FastaError::format(self.line_num, reason)
    }

    /// The index, once every line has been seen.
    pub fn finish(mut self) -> Result<Fai, FastaError> {
        if !self.read_done {
            return Err(FastaError::Incomplete(match self.format {
                None => "no FASTA or FASTQ records".into(),
                Some(_) => format!(
                    "the last sequence '{}' is empty or incomplete (samtools faidx fails too)",
                    self.name_str()
                ),
            }));
        }
        self.insert();
        Ok(Fai {
            format: self.format.unwrap_or(Format::Fasta),
            records: self.records,
        })
    }
}

impl LineSink for FaiBuilder {
    fn line(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
        self.line_num += 1;
        match self.state {
            State::OutRead => self.out_read(line, text),
            State::InSeq => self.in_seq(line, text),
            State::SeqEnd => {
                if line.first == b'+' {
                    self.state = State::InQual;
                    self.qual_offset = line.end();
                    Ok(())
                } else {
                    Err(self.err(format!(
                        "expecting '+' after the sequence of '{}'",
                        self.name_str()
                    )))
                }
            }
            State::InQual => self.in_qual(line, text),
        }
    }
}

impl FaiBuilder {
    /// A line between records: blank, or a record's header (which sets the format).
    #[inline]
    fn out_read(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
        let blank = line.len == 0;
        let fasta = self.format == Some(Format::Fasta);
        match line.first {
            _ if blank => {}
            b'>' if self.format == Some(Format::Fastq) => {
                return Err(self.err("found '>' in a FASTQ file".into()))
            }
            b'@' if fasta => return Err(self.err("found '@' in a FASTA file".into())),
            b'>' | b'@' => {
                self.format = Some(if line.first == b'>' {
                    Format::Fasta
                } else {
                    Format::Fastq
                });
                self.header(line, text)?;
            }
            b'\r' if line.cr_only && line.terminated => {}
            b'\r' => return Err(self.err("carriage return not followed by new line".into())),
            c => {
                let shown = if c.is_ascii_graphic() {
                    format!("\"{}\"", c as char)
                } else {
                    "character".into()
                };
                return Err(self.err(format!("unexpected {shown} outside a record")));
            }
        }
        Ok(())
    }

    /// A line of a record's sequence (or the next FASTA header, or FASTQ's `+`).
    #[inline]
    fn in_seq(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
        let blank = line.len == 0;
        let fasta = self.format == Some(Format::Fasta);
        if fasta {
            if blank {
                self.state = State::OutRead;
                return Ok(());
            }
            if line.first == b'>' {
                return self.header(line, text);
            }
            self.read_done = true;
        } else {
            if line.first == b'+' {
                self.state = State::InQual;
                self.qual_offset = line.end();
                return Ok(());
            }
            if blank {
                return Err(self.err(format!(
                    "inlined empty line is not allowed in sequence '{}'",
                    self.name_str()
                )));
            }
        }
        let (ll, cl) = (line.len + 1, line.graph);
        self.seq_len += cl;
        if self.line_len == 0 {
            self.line_len = ll;
            self.char_len = cl;
        } else if self.line_len > ll {
            self.state = if fasta { State::OutRead } else { State::SeqEnd };
        } else if self.line_len < ll {
            return Err(self.err(format!(
                "different line length in sequence '{}'",
                self.name_str()
            )));
        }
        Ok(())
    }

    /// A line of a FASTQ record's qualities (or the next record's header).
    #[inline]
    fn in_qual(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
        if line.len == 0 {
            if !self.read_done {
                return Err(self.err(format!(
                    "inlined empty line is not allowed in quality of sequence '{}'",
                    self.name_str()
                )));
            }
            self.state = State::OutRead;
            return Ok(());
        }
        if line.first == b'@' && self.read_done {
            return self.header(line, text);
        }
        let (ll, cl) = (line.len + 1, line.graph);
        self.qual_len += cl;
        let name = self.name_str();
        if self.line_len < ll {
            return Err(self.err(format!("quality line too long in '{name}'")));
        } else if self.qual_len == self.seq_len {
            self.read_done = true;
        } else if self.qual_len > self.seq_len {
            return Err(self.err(format!("quality longer than sequence in '{name}'")));
        } else if self.line_len > ll {
            return Err(self.err(format!("quality line too short in '{name}'")));
        }
        Ok(())
    }
}

impl Fai {
    /// Writes the index as samtools does (tab-separated, FASTQ with a sixth column).
    pub fn write<W: Write>(&self, mut out: W) -> std::io::Result<()> {
        for r in &self.records {
            out.write_all(&r.name)?;
            write!(
                out,
                "\t{}\t{}\t{}\t{}",
                r.length, r.offset, r.line_bases, r.line_width
            )?;
            match (self.format, r.qual_offset) {
                (Format::Fastq, Some(q)) => writeln!(out, "\t{q}")?,
                _ => writeln!(out)?,
            }
        }
        out.flush()
    }

    /// Reads a `.fai` (`format` says how many columns to expect, as `fai_read` does).
    pub fn read<R: BufRead>(input: R, format: Format, what: &str) -> Result<Self, FastaError> {
        let mut records = Vec::new();
        for (i, line) in input.split(b'\n').enumerate() {
            let line = line?;
            if line.is_empty() {
                continue;
            }
            let cut = line
                .iter()
                .position(|c| c.is_ascii_whitespace())
                .unwrap_or(line.len());
            let (name, rest) = line.split_at(cut);
            let rest = String::from_utf8_lossy(rest);
            let nums: Vec<u64> = rest
                .split_ascii_whitespace()
                .map_while(|f| f.parse().ok())
                .collect();
            let want = if format == Format::Fasta { 4 } else { 5 };
            if nums.len() < want {
                let hint = if format == Format::Fastq && nums.len() == 4 {
                    " (a FASTA index? drop -f)"
                } else {
                    ""
                };
                return Err(FastaError::BadIndex(format!(
                    "{what} line {}: cannot understand {} index line{hint}",
                    i + 1,
                    if format == Format::Fasta {
                        "FASTA"
                    } else {
                        "FASTQ"
                    }
                )));
            }
            records.push(FaiRecord {
                name: name.to_vec(),
                length: nums[0],
                offset: nums[1],
                line_bases: nums[2],
                line_width: nums[3],
                qual_offset: (format == Format::Fastq).then(|| nums[4]),
            });
        }
        Ok(Self { format, records })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::{scan_chunk, Stitcher};

    fn build(text: &[u8]) -> Result<String, FastaError> {
        let mut b = FaiBuilder::new();
        let mut st = Stitcher::new();
        st.push(&scan_chunk(text, 0), &mut b)?;
        st.finish(&mut b)?;
        let mut out = Vec::new();
        b.finish()?.write(&mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn samtools_quirks() {
        // Expected values from samtools 1.24 faidx on the same bytes.
        let fai = build(b">a\n>b desc\nACGT\nAC\n\n>c\nAAAA\n>a\nTT\n").unwrap();
        assert_eq!(fai, "b\t6\t11\t4\t5\nc\t4\t23\t4\t5\na\t2\t31\t2\t3\n");
        let crlf = build(b">x y\r\nACGTACGT\r\nACG\r\n>z\r\nAC\r\n").unwrap();
        assert_eq!(crlf, "x\t11\t6\t8\t10\nz\t2\t25\t2\t4\n");
        let dups = build(b">a\nA\n>b\nC\n>a\nG\n>c\nT\n>b\nA\n").unwrap();
        assert_eq!(dups, "a\t1\t3\t1\t2\nb\t1\t8\t1\t2\nc\t1\t18\t1\t2\n");
    }

    #[test]
    fn names_that_are_not_utf8_are_kept_as_bytes() {
        // Both would read as "\u{FFFD}PP" if decoded; htslib keeps and writes the raw bytes.
        let mut b = FaiBuilder::new();
        let mut st = Stitcher::new();
        let text = b">\xc2PP\nAC\n>\xc0PP\nAC\n";
        st.push(&scan_chunk(text, 0), &mut b).unwrap();
        st.finish(&mut b).unwrap();
        let mut out = Vec::new();
        b.finish().unwrap().write(&mut out).unwrap();
        assert_eq!(out, b"\xc2PP\t2\t5\t2\t3\n\xc0PP\t2\t13\t2\t3\n");
    }

    #[test]
    fn fastq_multiline_and_at_in_quality() {
        let fai = build(b"@r1\nACGT\nAC\n+\n@III\nII\n@r2\nA\n+\n@\n").unwrap();
        assert_eq!(fai, "r1\t6\t4\t4\t5\t14\nr2\t1\t26\t1\t2\t30\n");
    }

    #[test]
    fn errors() {
        assert!(build(b"").is_err());
        assert!(build(b">a\nACGT\nACGTA\n").is_err());
        assert!(build(b">a\nACGT\n>b\n").is_err());
        // Like samtools: `@b` inside a FASTA sequence is just a sequence line.
        assert!(build(b">a\nAC\n@b\nAC\n").is_ok());
        assert!(build(b"x\n").is_err());
        assert_eq!(build(b">a\nAC\n\n>").unwrap(), "a\t2\t3\t2\t3\n");
        assert!(build(b">a\nAC\n>b").is_err());
        assert!(build(b"@a\nAC\n+\nA\n").is_err());
    }
}
