//! FASTQ (and FASTA) records read as minimap2 reads them (its `kseq` parser through `mm_bseq_read3`):
//! the name is the header up to the first white space, sequence lines run up to a line starting
//! with `+`, `>` or `@`, quality lines until they are as long as the sequence, and `U` becomes `T`.
//! Plain, gzip and BGZF (multi-member gzip) input are told apart by their first bytes.
//!
//! Unlike minimap2, a malformed or truncated record is an error, not the silent end of the input.
//!
//! The one FASTQ parser of the workspace: `fq2bam` (crates/align) and `agd import` (samtools
//! import's record rules, in the facade) both read through [`FastqReader`].

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// An error reading FASTQ/FASTA records.
#[derive(Debug, thiserror::Error)]
pub enum FastqError {
    /// Reading a file failed (including a truncated or corrupt gzip stream); the I/O error is the
    /// source.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A FASTQ/FASTA record is malformed.
    #[error("{path}: record {record}: {what}")]
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based number of the record.
        record: u64,
        /// What is wrong.
        what: String,
    },
}

impl FastqError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        FastqError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Buffer of the decompressor and of the line reader.
const READ_BUFFER: usize = 1 << 20;

/// The longest FASTQ/FASTA line, and the most bytes one record (name, sequence and quality) may
/// hold: 256 MiB, a sequence of 128 Mb with its qualities, some thirty times the longest sequencing
/// read reported. A longer record (a gzip bomb of one endless line, a file without line ends) is an
/// error before its buffers grow past this.
pub const MAX_RECORD_BYTES: usize = 256 << 20;

/// One record: `name \0 sequence \0 quality` in one reused buffer.
#[derive(Debug, Default, Clone)]
pub struct Record {
    data: Vec<u8>,
    name_len: usize,
    seq_len: usize,
    has_qual: bool,
}

impl Record {
    /// The name (up to the first white space of the header).
    pub fn name(&self) -> &[u8] {
        &self.data[..self.name_len]
    }

    /// The bases as read (`U` turned into `T`).
    pub fn sequence(&self) -> &[u8] {
        &self.data[self.name_len + 1..self.name_len + 1 + self.seq_len]
    }

    /// The quality string (`None`: FASTA).
    pub fn quality(&self) -> Option<&[u8]> {
        let start = self.name_len + self.seq_len + 2;
        self.has_qual
            .then(|| &self.data[start..start + self.seq_len])
    }
}

/// A FASTQ/FASTA reader over a file (`-`: standard input), decompressing gzip and BGZF.
pub struct FastqReader {
    inner: Box<dyn BufRead + Send>,
    path: PathBuf,
    records: u64,
    line: Vec<u8>,
    /// The header line of the next record was read while ending the previous one (FASTA).
    pending_header: bool,
}

/// Whether `c` ends a name (C `isspace`).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl FastqReader {
    /// Opens `path`; gzip (and BGZF) is recognised by its magic bytes.
    pub fn open(path: &Path) -> Result<Self, FastqError> {
        let raw: Box<dyn Read + Send> = if path == Path::new("-") {
            Box::new(std::io::stdin())
        } else {
            Box::new(std::fs::File::open(path).map_err(|e| FastqError::io(path, e))?)
        };
        Self::from_reader(raw, path)
    }

    /// Reads the already opened `raw` (named `path` in messages); gzip (and BGZF) is recognised
    /// by its magic bytes.
    pub fn from_reader(raw: Box<dyn Read + Send>, path: &Path) -> Result<Self, FastqError> {
        let mut buffered = BufReader::with_capacity(READ_BUFFER, raw);
        let head = buffered.fill_buf().map_err(|e| FastqError::io(path, e))?;
        let inner: Box<dyn BufRead + Send> = if head.starts_with(&[0x1f, 0x8b]) {
            Box::new(BufReader::with_capacity(
                READ_BUFFER,
                flate2::bufread::MultiGzDecoder::new(buffered),
            ))
        } else {
            Box::new(buffered)
        };
        Ok(Self::new(inner, path))
    }

    /// A reader over already opened text (for tests and in-memory input).
    pub fn new(inner: Box<dyn BufRead + Send>, path: &Path) -> Self {
        Self {
            inner,
            path: path.to_path_buf(),
            records: 0,
            line: Vec::new(),
            pending_header: false,
        }
    }

    /// The file's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same reader for input that starts at record `before + 1` of its file (a part of the
    /// file, read from a record's position): messages number records from the file's start.
    pub fn numbered_after(mut self, before: u64) -> Self {
        self.records = before;
        self
    }

    /// Records read so far (with those before, see [`Self::numbered_after`]).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Reads the next line into `self.line` without its line end; false at the end of the input.
    fn next_line(&mut self) -> Result<bool, FastqError> {
        self.line.clear();
        let n = (&mut self.inner)
            .take(MAX_RECORD_BYTES as u64)
            .read_until(b'\n', &mut self.line)
            .map_err(|e| FastqError::io(&self.path, e))?;
        if n == 0 {
            return Ok(false);
        }
        if n == MAX_RECORD_BYTES && self.line.last() != Some(&b'\n') {
            return Err(self.error("a line longer than 256 MiB (not FASTQ or FASTA)"));
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(true)
    }

    fn error(&self, what: impl Into<String>) -> FastqError {
        FastqError::Format {
            path: self.path.clone(),
            record: self.records,
            what: what.into(),
        }
    }

    /// Reads the next record into `rec`; false at the end of the input.
    pub fn read(&mut self, rec: &mut Record) -> Result<bool, FastqError> {
        if !std::mem::take(&mut self.pending_header) {
            loop {
                if !self.next_line()? {
                    return Ok(false);
                }
                if !self.line.is_empty() {
                    break;
                }
            }
        }
        self.records += 1;
        if !matches!(self.line.first(), Some(b'@' | b'>')) {
            return Err(self.error("a record starts with '@' (FASTQ) or '>' (FASTA)"));
        }
        let name_len = self.line[1..]
            .iter()
            .position(|&c| is_space(c))
            .unwrap_or(self.line.len() - 1);
        rec.data.clear();
        rec.data.extend_from_slice(&self.line[1..1 + name_len]);
        rec.data.push(0);
        rec.name_len = name_len;
        let fastq = self.line[0] == b'@';
        let mut plus = false;
        while self.next_line()? {
            match self.line.first() {
                Some(b'+') => {
                    plus = true;
                    break;
                }
                Some(b'>' | b'@') => {
                    self.pending_header = true;
                    break;
                }
                _ if rec.data.len() + self.line.len() > MAX_RECORD_BYTES => {
                    return Err(self.error("a sequence longer than 256 MiB"));
                }
                _ => rec.data.extend(self.line.iter().map(|&c| match c {
                    b'U' => b'T',
                    b'u' => b't',
                    c => c,
                })),
            }
        }
        rec.seq_len = rec.data.len() - name_len - 1;
        rec.data.push(0);
        rec.has_qual = plus;
        if !plus {
            if fastq {
                return Err(self.error("truncated: no '+' line after the sequence"));
            }
            return Ok(true);
        }
        self.read_quality(rec)?;
        Ok(true)
    }

    /// Reads the quality lines of `rec` (after its `+` line): as many bytes as its sequence.
    fn read_quality(&mut self, rec: &mut Record) -> Result<(), FastqError> {
        let start = rec.data.len();
        while rec.data.len() - start < rec.seq_len {
            if !self.next_line()? {
                return Err(
                    self.error("truncated: the quality string is shorter than the sequence")
                );
            }
            if rec.data.len() - start + self.line.len() > rec.seq_len {
                break; // longer than the sequence: reported below, before it is stored
            }
            rec.data.extend_from_slice(&self.line);
        }
        if rec.data.len() - start != rec.seq_len {
            return Err(self.error("the quality string is longer than the sequence"));
        }
        Ok(())
    }
}

/// minimap2's `mm_qname_len`: the name without a `/1`-style suffix (a `/` and one digit).
pub fn base_name(name: &[u8]) -> &[u8] {
    let l = name.len();
    if l >= 3 && name[l - 1].is_ascii_digit() && name[l - 2] == b'/' {
        &name[..l - 2]
    } else {
        name
    }
}

/// Whether `path` holds FASTQ: a `.fq`/`.fastq` name (optionally `.gz`), or a first line that starts
/// with `@` and is not a SAM header line (`@XX<TAB>`). Standard input is never taken as FASTQ.
pub fn looks_like_fastq(path: &str) -> bool {
    if path == "-" {
        return false;
    }
    let lower = path.to_ascii_lowercase();
    let stem = lower
        .strip_suffix(".gz")
        .or_else(|| lower.strip_suffix(".bgz"))
        .unwrap_or(&lower);
    if stem.ends_with(".fq") || stem.ends_with(".fastq") {
        return true;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = [0u8; 4];
    let mut reader: Box<dyn Read> = Box::new(std::io::BufReader::new(file));
    let mut magic = [0u8; 2];
    if reader.read_exact(&mut magic).is_err() {
        return false;
    }
    let chained: Box<dyn Read> = Box::new(std::io::Cursor::new(magic).chain(reader));
    let mut text: Box<dyn Read> = if magic == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(chained))
    } else {
        chained
    };
    if text.read_exact(&mut head).is_err() {
        return false;
    }
    head[0] == b'@'
        && !(head[1].is_ascii_alphabetic() && head[2].is_ascii_alphabetic() && head[3] == b'\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(text: &'static str) -> FastqReader {
        FastqReader::new(Box::new(text.as_bytes()), Path::new("t.fq"))
    }

    fn all(text: &'static str) -> Result<Vec<(String, String, Option<String>)>, FastqError> {
        let mut r = reader(text);
        let mut rec = Record::default();
        let mut out = Vec::new();
        while r.read(&mut rec)? {
            let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            out.push((s(rec.name()), s(rec.sequence()), rec.quality().map(s)));
        }
        Ok(out)
    }

    #[test]
    fn fastq_fasta_and_multiline_records() {
        let got =
            all("@r1 comment\nACGU\n+\nIIII\n>r2\nAC\nGT\n@r3/1\nAC\r\n+r3\r\nI\nI\n").unwrap();
        assert_eq!(
            got,
            [
                ("r1".into(), "ACGT".into(), Some("IIII".into())),
                ("r2".into(), "ACGT".into(), None),
                ("r3/1".into(), "AC".into(), Some("II".into())),
            ]
        );
    }

    #[test]
    fn malformed_records_are_errors() {
        for text in [
            "@r\nACGT\n",
            "@r\nACGT\n+\nII\n",
            "@r\nAC\n+\nIIII\n",
            "xyz\n",
        ] {
            assert!(all(text).is_err(), "{text:?}");
        }
        assert!(all("").unwrap().is_empty());
    }

    #[test]
    fn base_names_drop_the_mate_suffix() {
        assert_eq!(base_name(b"read/1"), b"read");
        assert_eq!(base_name(b"/1"), b"/1");
        assert_eq!(base_name(b"read/x"), b"read/x");
    }
}
