//! Reads grouped into fragments (the segments of one template: a read pair, or one read) and cut
//! into small chunks for the aligner's work queue.
//!
//! Paired input (R1 and R2 files) pairs the n-th records of both files, as minimap2's
//! `mm_bseq_read_frag2`, but refuses files of unequal length or records whose names differ
//! (after dropping a `/1` `/2` suffix) instead of skipping or ignoring them. One file in fragment
//! mode (the `sr` preset) groups consecutive reads of one name, as `mm_bseq_read3` does; other
//! presets map each read alone.

use crate::error::AlignError;
use crate::fastq::{base_name, FastqReader, Record};
use sortase_bam::checksum::Checksummer;

/// minimap2's `MM_MAX_SEG`: most segments in one fragment.
pub const MAX_SEGMENTS: usize = 255;

/// Where one read lies in a chunk's buffer: `name \0 sequence \0 quality`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    name_len: u32,
    seq_len: u32,
    has_qual: bool,
}

/// One read of a chunk.
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    /// The name as read.
    pub name: &'a [u8],
    /// The name followed by a NUL byte (for minimap2's C functions).
    pub name_nul: &'a [u8],
    /// The bases.
    pub seq: &'a [u8],
    /// The bases followed by a NUL byte (minimap2's MD/cs writers take a C string).
    pub seq_nul: &'a [u8],
    /// The qualities (`None`: FASTA).
    pub qual: Option<&'a [u8]>,
}

impl Read<'_> {
    /// A read of no bases (a placeholder in fixed-size arrays).
    pub const EMPTY: Read<'static> = Read {
        name: b"",
        name_nul: b"\0",
        seq: b"",
        seq_nul: b"\0",
        qual: None,
    };
}

/// Reads stored back to back in one buffer, grouped into fragments. Reused between chunks: its
/// buffers keep their capacity, so reading allocates nothing once the first chunks are made.
#[derive(Debug, Default)]
pub struct ReadChunk {
    data: Vec<u8>,
    spans: Vec<Span>,
    /// Index of each fragment's first read in `spans`.
    fragments: Vec<u32>,
    bases: usize,
}

impl ReadChunk {
    /// Empties the chunk, keeping its buffers.
    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.fragments.clear();
        self.bases = 0;
    }

    /// Number of fragments.
    pub fn fragments(&self) -> usize {
        self.fragments.len()
    }

    /// Number of reads.
    pub fn reads(&self) -> usize {
        self.spans.len()
    }

    /// Bases of all reads.
    pub fn bases(&self) -> usize {
        self.bases
    }

    /// Bytes the chunk's buffers hold.
    pub fn allocated(&self) -> usize {
        self.data.capacity() + self.spans.capacity() * std::mem::size_of::<Span>()
    }

    /// Whether the chunk holds no read.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The reads of fragment `f`, as a range of read indices.
    pub fn fragment(&self, f: usize) -> std::ops::Range<usize> {
        let start = self.fragments[f] as usize;
        let end = self
            .fragments
            .get(f + 1)
            .map_or(self.spans.len(), |&e| e as usize);
        start..end
    }

    /// Read `i`.
    pub fn read(&self, i: usize) -> Read<'_> {
        let s = self.spans[i];
        let (n, l) = (s.name_len as usize, s.seq_len as usize);
        let seq_start = s.start + n + 1;
        let qual_start = seq_start + l + 1;
        Read {
            name: &self.data[s.start..s.start + n],
            name_nul: &self.data[s.start..s.start + n + 1],
            seq: &self.data[seq_start..seq_start + l],
            seq_nul: &self.data[seq_start..seq_start + l + 1],
            qual: s.has_qual.then(|| &self.data[qual_start..qual_start + l]),
        }
    }

    /// Starts a fragment: the reads pushed next are its reads (a source other than FASTQ builds
    /// its chunks with this and [`ReadChunk::push_parts`]).
    pub fn start_fragment(&mut self) {
        self.fragments.push(self.spans.len() as u32);
    }

    fn push(&mut self, rec: &Record) {
        self.push_parts(rec.name(), rec.sequence(), rec.quality());
    }

    /// Adds a read to the current fragment: its name, bases and qualities (phred + 33).
    pub fn push_parts(&mut self, name: &[u8], seq: &[u8], qual: Option<&[u8]>) {
        let start = self.data.len();
        self.data.extend_from_slice(name);
        self.data.push(0);
        self.data.extend_from_slice(seq);
        self.data.push(0);
        if let Some(q) = qual {
            self.data.extend_from_slice(q);
        }
        self.spans.push(Span {
            start,
            name_len: name.len() as u32,
            seq_len: seq.len() as u32,
            has_qual: qual.is_some(),
        });
        self.bases += seq.len();
    }

    fn last_name(&self) -> Option<&[u8]> {
        (!self.spans.is_empty()).then(|| self.read(self.spans.len() - 1).name)
    }
}

impl ReadChunk {
    /// Adds the chunk's reads to `sums` as the records `samtools import` makes of them and the
    /// aligner's primary records hold: per fragment of more than one read, the name without its
    /// `/1` `/2` suffix and PAIRED with READ1 on the first read, READ2 on the last (and the `FI`
    /// tag past two reads, as minimap2 writes it); a lone read keeps its name, unpaired. Allocates
    /// nothing.
    pub fn add_to_sums(&self, sums: &mut Checksummer) {
        use sortase_bam::flags::{MATE_UNMAPPED, PAIRED, READ1, READ2, UNMAPPED};
        for f in 0..self.fragments() {
            let reads = self.fragment(f);
            let n_seg = reads.len();
            for (j, i) in reads.enumerate() {
                let r = self.read(i);
                let (name, mut flag) = if n_seg > 1 {
                    (base_name(r.name), UNMAPPED | PAIRED | MATE_UNMAPPED)
                } else {
                    (r.name, UNMAPPED)
                };
                if n_seg > 1 && j == 0 {
                    flag |= READ1;
                } else if n_seg > 1 && j == n_seg - 1 {
                    flag |= READ2;
                }
                // INVARIANT: a fragment holds at most MAX_SEGMENTS (255) reads.
                let fi = [b'F', b'I', b'C', j as u8];
                let aux: &[u8] = if n_seg > 2 { &fi } else { &[] };
                sums.add_read(name, flag, r.seq, r.qual, aux);
            }
        }
    }
}

/// Where the aligner's work queue takes its reads from: whole fragments, chunk after chunk.
pub trait ChunkSource: Send {
    /// Fills `chunk` (emptied first) with whole fragments until it holds at least `target_bases`
    /// bases or the input ends; an empty chunk means the end of the input.
    fn fill(&mut self, chunk: &mut ReadChunk, target_bases: usize) -> Result<(), AlignError>;

    /// Fragments read so far.
    fn fragments(&self) -> u64;
}

impl ReadChunk {
    /// Appends the chunk's fragments to `out` in the reads file format [`ChunkFileSource`] reads:
    /// per fragment its number of reads (1 byte), then per read the name's and the sequence's
    /// lengths (u32 little-endian each), whether it has qualities (1 byte), the name, the
    /// sequence and the qualities. What minimap2 is given of a read, nothing else.
    pub fn write_fragments(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        for f in 0..self.fragments() {
            self.write_fragment(f, out)?;
        }
        Ok(())
    }

    /// Appends fragment `f` to `out` as [`ReadChunk::write_fragments`] does; returns its bases.
    pub fn write_fragment(
        &self,
        f: usize,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<usize> {
        let reads = self.fragment(f);
        // INVARIANT: a fragment holds at most MAX_SEGMENTS (255) reads.
        out.write_all(&[reads.len() as u8])?;
        let mut bases = 0;
        for i in reads {
            let r = self.read(i);
            out.write_all(&(r.name.len() as u32).to_le_bytes())?;
            out.write_all(&(r.seq.len() as u32).to_le_bytes())?;
            out.write_all(&[u8::from(r.qual.is_some())])?;
            out.write_all(r.name)?;
            out.write_all(r.seq)?;
            if let Some(q) = r.qual {
                out.write_all(q)?;
            }
            bases += r.seq.len();
        }
        Ok(bases)
    }
}

/// Fragments written by [`ReadChunk::write_fragments`] (a distributed job's chunk of reads), read
/// back into the work queue's chunks: exactly `expected` fragments.
pub struct ChunkFileSource<R> {
    reader: R,
    path: std::path::PathBuf,
    expected: u64,
    fragments: u64,
    name: Vec<u8>,
    seq: Vec<u8>,
    qual: Vec<u8>,
}

impl<R: std::io::Read + Send> ChunkFileSource<R> {
    /// Reads `expected` fragments from `reader` (`path` names it in errors).
    pub fn new(reader: R, path: &std::path::Path, expected: u64) -> Self {
        Self {
            reader,
            path: path.to_path_buf(),
            expected,
            fragments: 0,
            name: Vec::new(),
            seq: Vec::new(),
            qual: Vec::new(),
        }
    }

    fn read_exact(&mut self, n: usize, which: u8) -> Result<(), AlignError> {
        let buf = match which {
            0 => &mut self.name,
            1 => &mut self.seq,
            _ => &mut self.qual,
        };
        buf.resize(n, 0);
        self.reader.read_exact(buf).map_err(|e| self.bad(e))
    }

    fn bad(&self, e: std::io::Error) -> AlignError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            AlignError::format(
                &self.path,
                self.fragments + 1,
                format!(
                    "the reads file ends after {} of its {} fragments",
                    self.fragments, self.expected
                ),
            )
        } else {
            AlignError::io(&self.path, e)
        }
    }

    fn fragment(&mut self, chunk: &mut ReadChunk) -> Result<(), AlignError> {
        let mut head = [0u8; 9];
        self.reader
            .read_exact(&mut head[..1])
            .map_err(|e| self.bad(e))?;
        let reads = head[0];
        if reads == 0 {
            return Err(AlignError::format(
                &self.path,
                self.fragments + 1,
                "a fragment of no reads".into(),
            ));
        }
        chunk.start_fragment();
        for _ in 0..reads {
            self.reader.read_exact(&mut head).map_err(|e| self.bad(e))?;
            let name = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let seq = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
            let has_qual = head[8] != 0;
            self.read_exact(name, 0)?;
            self.read_exact(seq, 1)?;
            self.read_exact(if has_qual { seq } else { 0 }, 2)?;
            chunk.push_parts(
                &self.name,
                &self.seq,
                has_qual.then_some(self.qual.as_slice()),
            );
        }
        self.fragments += 1;
        Ok(())
    }
}

impl<R: std::io::Read + Send> ChunkSource for ChunkFileSource<R> {
    fn fill(&mut self, chunk: &mut ReadChunk, target_bases: usize) -> Result<(), AlignError> {
        chunk.clear();
        while self.fragments < self.expected && chunk.bases < target_bases {
            self.fragment(chunk)?;
        }
        Ok(())
    }

    fn fragments(&self) -> u64 {
        self.fragments
    }
}

impl<S: ChunkSource + ?Sized> ChunkSource for Box<S> {
    fn fill(&mut self, chunk: &mut ReadChunk, target_bases: usize) -> Result<(), AlignError> {
        (**self).fill(chunk, target_bases)
    }

    fn fragments(&self) -> u64 {
        (**self).fragments()
    }
}

impl ChunkSource for FastqSource {
    fn fill(&mut self, chunk: &mut ReadChunk, target_bases: usize) -> Result<(), AlignError> {
        FastqSource::fill(self, chunk, target_bases)
    }

    fn fragments(&self) -> u64 {
        FastqSource::fragments(self)
    }
}

/// The FASTQ input of an alignment: one file, or R1 and R2.
pub struct FastqSource {
    r1: FastqReader,
    r2: Option<FastqReader>,
    frag_mode: bool,
    rec1: Record,
    rec2: Record,
    /// A read taken from R1 (single-file input) that starts the next chunk's first fragment.
    pending: bool,
    fragments: u64,
    /// Fragments before the first one read (a part of the input): for messages.
    before: u64,
    /// Fragments to read at most.
    limit: u64,
}

impl FastqSource {
    /// Reads `r1` alone (fragment mode: consecutive reads of one name form a fragment), or `r1`
    /// and `r2` as pairs.
    pub fn new(r1: FastqReader, r2: Option<FastqReader>, frag_mode: bool) -> Self {
        Self {
            r1,
            r2,
            frag_mode,
            rec1: Record::default(),
            rec2: Record::default(),
            pending: false,
            fragments: 0,
            before: 0,
            limit: u64::MAX,
        }
    }

    /// Reads `limit` fragments at most, the first of which is fragment `before + 1` of the input
    /// (the readers are positioned there, [`FastqReader::numbered_after`]): a part of the input.
    /// Not in fragment mode, where a fragment's reads are only known by reading on.
    pub fn part(mut self, before: u64, limit: u64) -> Self {
        debug_assert!(!self.frag_mode);
        self.before = before;
        self.limit = limit;
        self
    }

    /// Fragments read so far.
    pub fn fragments(&self) -> u64 {
        self.fragments
    }

    /// Fills `chunk` (emptied first) with whole fragments until it holds at least `target_bases`
    /// bases or the input ends; an empty chunk means the end of the input.
    pub fn fill(&mut self, chunk: &mut ReadChunk, target_bases: usize) -> Result<(), AlignError> {
        chunk.clear();
        if self.r2.is_some() {
            self.fill_pairs(chunk, target_bases)
        } else {
            self.fill_single(chunk, target_bases)
        }
    }

    fn fill_pairs(&mut self, chunk: &mut ReadChunk, target: usize) -> Result<(), AlignError> {
        let Some(r2) = self.r2.as_mut() else {
            return Ok(());
        };
        while chunk.bases < target && self.fragments < self.limit {
            let a = self.r1.read(&mut self.rec1)?;
            let b = r2.read(&mut self.rec2)?;
            match (a, b) {
                (false, false) => break,
                (true, true) => {}
                (more1, _) => {
                    let (short, long) = if more1 {
                        (r2.path(), self.r1.path())
                    } else {
                        (self.r1.path(), r2.path())
                    };
                    return Err(AlignError::Pairing(format!(
                        "{} ends after {} records but {} has more: R1 and R2 must hold the same reads in the same order",
                        short.display(),
                        self.before + self.fragments,
                        long.display()
                    )));
                }
            }
            if base_name(self.rec1.name()) != base_name(self.rec2.name()) {
                return Err(AlignError::Pairing(format!(
                    "record {}: R1 read {} and R2 read {} differ in name: R1 and R2 must hold the same reads in the same order",
                    self.before + self.fragments + 1,
                    String::from_utf8_lossy(self.rec1.name()),
                    String::from_utf8_lossy(self.rec2.name())
                )));
            }
            chunk.start_fragment();
            chunk.push(&self.rec1);
            chunk.push(&self.rec2);
            self.fragments += 1;
        }
        Ok(())
    }

    fn fill_single(&mut self, chunk: &mut ReadChunk, target: usize) -> Result<(), AlignError> {
        let mut segments = 0;
        loop {
            if !self.pending && (self.fragments >= self.limit || !self.r1.read(&mut self.rec1)?) {
                break;
            }
            self.pending = true;
            let joins = self.frag_mode
                && chunk
                    .last_name()
                    .is_some_and(|n| base_name(n) == base_name(self.rec1.name()));
            if joins {
                segments += 1;
                if segments > MAX_SEGMENTS {
                    return Err(AlignError::format(
                        self.r1.path(),
                        self.r1.records(),
                        format!(
                            "more than {MAX_SEGMENTS} consecutive reads named {} (minimap2's limit of segments per fragment)",
                            String::from_utf8_lossy(base_name(self.rec1.name()))
                        ),
                    ));
                }
            } else {
                if chunk.bases >= target {
                    break;
                }
                chunk.start_fragment();
                self.fragments += 1;
                segments = 1;
            }
            chunk.push(&self.rec1);
            self.pending = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn source(r1: &'static str, r2: Option<&'static str>, frag: bool) -> FastqSource {
        let open =
            |t: &'static str, p: &str| FastqReader::new(Box::new(t.as_bytes()), Path::new(p));
        FastqSource::new(open(r1, "r1.fq"), r2.map(|t| open(t, "r2.fq")), frag)
    }

    fn fragments(src: &mut FastqSource, target: usize) -> Vec<Vec<Vec<String>>> {
        let mut chunks = Vec::new();
        let mut chunk = ReadChunk::default();
        loop {
            src.fill(&mut chunk, target).unwrap();
            if chunk.is_empty() {
                return chunks;
            }
            chunks.push(
                (0..chunk.fragments())
                    .map(|f| {
                        chunk
                            .fragment(f)
                            .map(|i| String::from_utf8_lossy(chunk.read(i).name).into_owned())
                            .collect()
                    })
                    .collect(),
            );
        }
    }

    const R1: &str = "@a/1\nAC\n+\nII\n@b/1\nAC\n+\nII\n@c/1\nAC\n+\nII\n";
    const R2: &str = "@a/2\nGT\n+\nII\n@b/2\nGT\n+\nII\n@c/2\nGT\n+\nII\n";

    #[test]
    fn pairs_come_in_chunks_of_whole_fragments() {
        let got = fragments(&mut source(R1, Some(R2), true), 5);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], [vec!["a/1", "a/2"], vec!["b/1", "b/2"]]);
        assert_eq!(got[1], [vec!["c/1", "c/2"]]);
    }

    #[test]
    fn one_file_in_fragment_mode_groups_by_name() {
        let text = "@a/1\nAC\n+\nII\n@a/2\nAC\n+\nII\n@b\nAC\n+\nII\n@c/1\nA\n+\nI\n";
        let got = fragments(&mut source(text, None, true), 1);
        assert_eq!(
            got,
            [vec![vec!["a/1", "a/2"]], vec![vec!["b"]], vec![vec!["c/1"]]]
        );
        let got = fragments(&mut source(text, None, false), 100);
        assert_eq!(got[0].len(), 4);
    }

    #[test]
    fn chunk_files_give_back_the_fragments() {
        let text = "@a/1\nAC\n+\nII\n@a/2\nGTT\n+\nIII\n@b\nA\n+\nI\n";
        let mut src = source(text, None, true);
        let mut chunk = ReadChunk::default();
        src.fill(&mut chunk, 1000).unwrap();
        let mut file = Vec::new();
        chunk.write_fragments(&mut file).unwrap();
        let fasta = FastqReader::new(Box::new(&b">c\nACGT\n"[..]), Path::new("c.fa"));
        let mut other = ReadChunk::default();
        FastqSource::new(fasta, None, true)
            .fill(&mut other, 1000)
            .unwrap();
        other.write_fragments(&mut file).unwrap();
        let mut back = ChunkFileSource::new(&file[..], Path::new("chunk"), 3);
        let mut got = ReadChunk::default();
        back.fill(&mut got, 1).unwrap();
        assert_eq!((got.fragments(), got.reads()), (1, 2));
        assert_eq!(got.read(1).seq, b"GTT");
        assert_eq!(got.read(1).qual, Some(&b"III"[..]));
        back.fill(&mut got, 1000).unwrap();
        assert_eq!((got.fragments(), got.reads(), got.bases()), (2, 2, 5));
        assert_eq!(got.read(1).name, b"c");
        assert_eq!(got.read(1).qual, None);
        back.fill(&mut got, 1000).unwrap();
        assert!(got.is_empty());
        let mut short = ChunkFileSource::new(&file[..file.len() - 2], Path::new("chunk"), 3);
        short.fill(&mut got, 1).unwrap();
        let e = short.fill(&mut got, 1000).unwrap_err();
        assert!(
            e.to_string().contains("ends after 2 of its 3 fragments"),
            "{e}"
        );
    }

    #[test]
    fn chunk_sums_name_and_flag_reads_by_their_fragment() {
        use sortase_bam::checksum::ChecksumOptions;
        // A pair (suffixes dropped, READ1/READ2), a lone read keeping its suffix, a triple (FI).
        let text = "@a/1\nAC\n+\nII\n@a/2\nGT\n+\nI#\n@b/1\nA\n+\nI\n\
                    @c\nA\n+\nI\n@c\nC\n+\nI\n@c\nG\n+\nI\n";
        let mut chunk = ReadChunk::default();
        source(text, None, true).fill(&mut chunk, 1000).unwrap();
        assert_eq!(chunk.fragments(), 3);
        let opts = ChecksumOptions::default();
        let mut got = Checksummer::new(opts.clone());
        chunk.add_to_sums(&mut got);
        let mut want = Checksummer::new(opts);
        want.add_read(b"a", 0x41, b"AC", Some(b"II"), b"");
        want.add_read(b"a", 0x81, b"GT", Some(b"I#"), b"");
        want.add_read(b"b/1", 0, b"A", Some(b"I"), b"");
        want.add_read(b"c", 0x41, b"A", Some(b"I"), b"FIC\x00");
        want.add_read(b"c", 0x01, b"C", Some(b"I"), b"FIC\x01");
        want.add_read(b"c", 0x81, b"G", Some(b"I"), b"FIC\x02");
        assert_eq!(got.sums, want.sums);
        assert_eq!(got.sums.count, 6);
    }

    #[test]
    fn unequal_or_mismatched_pairs_are_errors() {
        let mut chunk = ReadChunk::default();
        let short = "@a/2\nGT\n+\nII\n";
        let e = source(R1, Some(short), true)
            .fill(&mut chunk, 1000)
            .unwrap_err();
        assert!(e.to_string().contains("r2.fq ends after 1 records"), "{e}");
        let other = "@a/2\nGT\n+\nII\n@x/2\nGT\n+\nII\n";
        let e = source(R1, Some(other), true)
            .fill(&mut chunk, 1000)
            .unwrap_err();
        assert!(e.to_string().contains("b/1 and R2 read x/2"), "{e}");
    }
}
