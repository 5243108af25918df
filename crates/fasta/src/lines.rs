//! Cutting inflated text into lines, chunk by chunk, so chunks can be scanned on many threads and the
//! few lines that cross a chunk boundary stitched afterwards in order.
//!
//! [`scan_chunk`] looks at one chunk alone: its complete lines, plus the piece before its first newline
//! (`head`, the end of a line begun in an earlier chunk, or a line starting at the chunk start) and the
//! piece after its last newline (`tail`). [`Stitcher`] replays chunks in order, joins pieces into whole
//! lines and hands every line, in file order, to a [`LineSink`] (the `.fai` or `.loc` builder).
//!
//! Only lines that may be headers (first byte `>` or `@`) keep their text; every line keeps its length
//! and its count of printable characters (htslib counts `isgraph` bytes as bases).

use crate::FastaError;

/// Text kept per piece of a line that crosses a chunk boundary: header lines are far shorter.
pub const PIECE_TEXT_MAX: usize = 64 * 1024;

/// One line of the uncompressed text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Line {
    /// Uncompressed offset of the line's first byte.
    pub start: u64,
    /// Length without the newline.
    pub len: u64,
    /// Printable (`isgraph`) bytes in the line.
    pub graph: u64,
    /// First byte (0 for an empty line).
    pub first: u8,
    /// Ends with `\n` (false only for a last line at the end of the data).
    pub terminated: bool,
    /// The line is exactly `\r` (a blank CR-LF line).
    pub cr_only: bool,
}

impl Line {
    /// Offset just past the line and its newline.
    pub fn end(&self) -> u64 {
        self.start + self.len + u64::from(self.terminated)
    }

    /// Whether the line may be a header and so carries its text.
    pub fn is_marked(&self) -> bool {
        self.first == b'>' || self.first == b'@'
    }
}

/// Receives the lines of a file in order.
pub trait LineSink {
    /// One line; `text` is the line (without newline) when [`Line::is_marked`], else empty.
    fn line(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError>;
}

/// Part of a line cut by a chunk boundary.
#[derive(Debug, Clone, Default)]
pub struct Piece {
    /// Bytes in the piece (newline excluded).
    pub len: u64,
    /// Printable bytes in the piece.
    pub graph: u64,
    /// The piece ends with the line's newline.
    pub terminated: bool,
    /// Up to [`PIECE_TEXT_MAX`] leading bytes.
    pub text: Vec<u8>,
}

/// What one chunk holds, found without looking at any other chunk.
#[derive(Debug, Default)]
pub struct ChunkLines {
    /// Uncompressed offset of the chunk's first byte.
    pub offset: u64,
    /// Chunk length.
    pub len: u64,
    /// Bytes up to and including the first newline (the whole chunk if it has none).
    pub head: Piece,
    /// Lines that start after the first newline and end with a newline inside the chunk.
    pub lines: Vec<Line>,
    /// Text of the marked lines, in order.
    pub text: Vec<u8>,
    /// Bytes after the last newline (empty if the chunk ends with one or has none).
    pub tail: Piece,
}

/// Printable ASCII (C `isgraph`): 0x21..=0x7e.
// HOT: one pass over every byte of the file, once per line. Eight bytes at a time: a word with no byte
// below 0x21 and none above 0x7e (the bit tricks of "Bit Twiddling Hacks", hasless/hasmore, exact
// for these bounds) counts 8; other words are counted byte by byte. Measured with perf on
// `loc -@2` of the bench FASTA (884 MB, ~14 M lines): scan_chunk fell from 19.7 % to 8.2 % of samples
// (libdeflate inflate: 58 % -> 66 %). Re-measure: `perf record sortase loc -@2 proteins.fa.gz`.
#[inline]
pub fn count_graph(bytes: &[u8]) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = ONES * 0x80;
    let graph = |b: u8| u64::from(b.wrapping_sub(0x21) < 0x5e);
    let mut words = bytes.chunks_exact(8);
    let mut n = 0u64;
    for w in &mut words {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        let below = x.wrapping_sub(ONES * 0x21) & !x & HIGHS;
        // hasmore(x, 0x7e): adding 127 - 0x7e = 1 to each byte sets its high bit iff it was > 0x7e.
        let above = (x.wrapping_add(ONES) | x) & HIGHS;
        if below | above == 0 {
            n += 8;
        } else {
            n += w.iter().map(|&b| graph(b)).sum::<u64>();
        }
    }
    n + words.remainder().iter().map(|&b| graph(b)).sum::<u64>()
}

fn piece(bytes: &[u8], terminated: bool) -> Piece {
    Piece {
        len: bytes.len() as u64,
        graph: count_graph(bytes),
        terminated,
        text: bytes[..bytes.len().min(PIECE_TEXT_MAX)].to_vec(),
    }
}

/// Cuts one chunk (starting at uncompressed `offset`) into its head piece, whole lines and tail piece.
///
/// ```
/// let c = sortase_fasta::lines::scan_chunk(b"AC\n>x\nGT", 10);
/// assert_eq!((c.head.len, c.head.terminated), (2, true));
/// assert_eq!(c.lines.len(), 1);
/// assert_eq!((c.lines[0].start, c.lines[0].first), (13, b'>'));
/// assert_eq!(c.tail.len, 2);
/// ```
pub fn scan_chunk(data: &[u8], offset: u64) -> ChunkLines {
    let mut out = ChunkLines {
        offset,
        len: data.len() as u64,
        ..Default::default()
    };
    let Some(first_nl) = memchr::memchr(b'\n', data) else {
        out.head = piece(data, false);
        return out;
    };
    out.head = piece(&data[..first_nl], true);
    let base = first_nl + 1;
    let mut at = base;
    // HOT: once per line (~13 M lines for 1 M protein records). memchr finds the newline with SIMD.
    out.lines.reserve(data.len() / 48);
    for nl in memchr::memchr_iter(b'\n', &data[base..]) {
        let line = &data[at..base + nl];
        let first = line.first().copied().unwrap_or(0);
        out.lines.push(Line {
            start: offset + at as u64,
            len: line.len() as u64,
            graph: count_graph(line),
            first,
            terminated: true,
            cr_only: line == b"\r",
        });
        if first == b'>' || first == b'@' {
            out.text.extend_from_slice(line);
        }
        at = base + nl + 1;
    }
    if at < data.len() {
        out.tail = piece(&data[at..], false);
    }
    out
}

/// A line begun in an earlier chunk.
#[derive(Debug, Default)]
struct Partial {
    start: u64,
    len: u64,
    graph: u64,
    text: Vec<u8>,
    /// Text was cut at [`PIECE_TEXT_MAX`].
    clipped: bool,
}

impl Partial {
    fn add(&mut self, p: &Piece) {
        if self.text.len() as u64 == self.len && p.text.len() as u64 == p.len {
            self.text.extend_from_slice(&p.text);
        } else {
            self.clipped = true;
            if self.text.len() < PIECE_TEXT_MAX && self.text.len() as u64 == self.len {
                let room = PIECE_TEXT_MAX - self.text.len();
                self.text
                    .extend_from_slice(&p.text[..room.min(p.text.len())]);
            }
        }
        self.len += p.len;
        self.graph += p.graph;
    }
}

/// Joins chunks' pieces into whole lines and feeds every line to a sink, in file order.
#[derive(Debug, Default)]
pub struct Stitcher {
    partial: Option<Partial>,
    /// Uncompressed bytes seen so far.
    pub total: u64,
}

impl Stitcher {
    /// A stitcher at the start of the data.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one chunk's lines (chunks must come in order, without gaps).
    pub fn push(&mut self, chunk: &ChunkLines, sink: &mut impl LineSink) -> Result<(), FastaError> {
        if chunk.len == 0 {
            return Ok(());
        }
        debug_assert_eq!(chunk.offset, self.total);
        let partial = self.partial.get_or_insert_with(|| Partial {
            start: chunk.offset,
            ..Default::default()
        });
        partial.add(&chunk.head);
        if chunk.head.terminated {
            let p = self.partial.take().unwrap_or_default();
            emit(&p, true, sink)?;
            let mut text_at = 0;
            for line in &chunk.lines {
                if line.is_marked() {
                    let text = &chunk.text[text_at..text_at + line.len as usize];
                    text_at += line.len as usize;
                    sink.line(line, text)?;
                } else {
                    sink.line(line, &[])?;
                }
            }
            if chunk.tail.len > 0 {
                let mut p = Partial {
                    start: chunk.offset + chunk.len - chunk.tail.len,
                    ..Default::default()
                };
                p.add(&chunk.tail);
                self.partial = Some(p);
            }
        }
        self.total = chunk.offset + chunk.len;
        Ok(())
    }

    /// Emits the last line if the data does not end with a newline.
    pub fn finish(&mut self, sink: &mut impl LineSink) -> Result<(), FastaError> {
        match self.partial.take() {
            Some(p) if p.len > 0 => emit(&p, false, sink),
            _ => Ok(()),
        }
    }
}

fn emit(p: &Partial, terminated: bool, sink: &mut impl LineSink) -> Result<(), FastaError> {
    let first = p.text.first().copied().unwrap_or(0);
    let line = Line {
        start: p.start,
        len: p.len,
        graph: p.graph,
        first,
        terminated,
        cr_only: p.len == 1 && first == b'\r',
    };
    if line.is_marked() {
        if p.clipped {
            return Err(FastaError::BadIndex(format!(
                "header line at byte {} is longer than {PIECE_TEXT_MAX} bytes",
                p.start
            )));
        }
        sink.line(&line, &p.text)
    } else {
        sink.line(&line, &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<(Line, Vec<u8>)>);
    impl LineSink for Collect {
        fn line(&mut self, line: &Line, text: &[u8]) -> Result<(), FastaError> {
            self.0.push((*line, text.to_vec()));
            Ok(())
        }
    }

    fn lines_by_chunks(data: &[u8], cut: usize) -> Vec<(Line, Vec<u8>)> {
        let mut st = Stitcher::new();
        let mut sink = Collect::default();
        let mut off = 0;
        for c in data.chunks(cut.max(1)) {
            st.push(&scan_chunk(c, off as u64), &mut sink).unwrap();
            off += c.len();
        }
        st.finish(&mut sink).unwrap();
        sink.0
    }

    #[test]
    fn any_chunking_gives_the_same_lines() {
        let data = b">seq1 desc\nACGT\r\n\r\n\n>s2\nAC GT\n@q\n+\nIIII";
        let whole = lines_by_chunks(data, data.len());
        assert_eq!(whole.len(), 9);
        assert_eq!(whole[0].1, b">seq1 desc");
        assert_eq!(whole[1].0.graph, 4);
        assert!(whole[2].0.cr_only);
        assert_eq!(whole[3].0.len, 0);
        assert_eq!(whole[5].0.graph, 4);
        assert!(!whole[8].0.terminated);
        for cut in 1..data.len() {
            assert_eq!(lines_by_chunks(data, cut), whole, "cut {cut}");
        }
    }

    #[test]
    fn empty_and_newline_only() {
        assert!(lines_by_chunks(b"", 3).is_empty());
        let l = lines_by_chunks(b"\n\n", 1);
        assert_eq!(l.len(), 2);
        assert!(l.iter().all(|(x, _)| x.len == 0 && x.terminated));
    }

    #[test]
    fn graph_is_isgraph() {
        assert_eq!(count_graph(b" \t\r!~\x7f\x80A"), 3);
        for b in 0..=255u8 {
            for at in 0..17 {
                let mut v = vec![b'A'; 17];
                v[at] = b;
                let want = 16 + u64::from((0x21..=0x7e).contains(&b));
                assert_eq!(count_graph(&v), want, "byte {b:#x} at {at}");
            }
        }
    }
}
