//! Temporary runs: sorted raw BAM records in LZ4 blocks, each with a CRC-32 of its raw bytes.
//!
//! Block layout (little-endian): `compressed_len u32, raw_len u32, crc32(raw) u32, n_records u32`,
//! then `compressed_len` bytes of LZ4 block data. Inside a block each record is its input sequence
//! number (`u64`, the record's place in the sort's input) followed by the whole BAM record with its
//! `block_size` prefix, so a reader needs no record framing of its own. Blocks are compressed in
//! parallel (rayon) in windows, written in order.
//!
//! Every run keeps a sparse index in memory ([`RunFile::blocks`]): each block's file offset, first
//! sequence number and first record's key ([`crate::order::key_prefix`]), so the final merge can start
//! reading any run at the first record of a key range ([`RunReader::open_at`]). Sequence numbers make
//! the output order a strict order on (key, sequence), which lets key ranges split ties too.
//!
//! LZ4 rather than BGZF for temporary data: on the bench BAM's records lz4_flex compresses at several
//! hundred MB/s per core and decompresses at GB/s, against ~40 MB/s for DEFLATE at samtools' level
//! (the figure is in bench/RESULTS.md, "sort" section).

use crate::order::{key_prefix, SortOrder};
use crate::SortError;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Raw bytes per run block: big enough for LZ4 to find matches across records, small enough that
/// 64 open runs cost little memory in the final merge (~200 KiB each: raw + compressed block).
pub const RUN_BLOCK_RAW: usize = 128 << 10;
const BLOCK_HEADER: usize = 16;

/// Bytes before each record in a run block: its input sequence number.
pub const SEQ_LEN: usize = 8;

/// A run on disk.
#[derive(Debug, Clone, Default)]
pub struct RunFile {
    /// Where it is.
    pub path: PathBuf,
    /// Records it holds.
    pub records: u64,
    /// Bytes on disk.
    pub bytes: u64,
    /// The sparse index: one entry per block.
    pub blocks: Vec<RunBlock>,
    /// The blocks' first keys, back to back (see [`RunBlock::key_end`]).
    pub keys: Vec<u8>,
}

/// Where a run block starts and what its first record is.
#[derive(Debug, Clone, Copy)]
pub struct RunBlock {
    /// File offset of the block header.
    pub offset: u64,
    /// Sequence number of the block's first record.
    pub first_seq: u64,
    /// End of the first record's key in [`RunFile::keys`] (it starts where the previous one ends).
    pub key_end: usize,
}

impl RunFile {
    /// The first key of block `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.blocks[i - 1].key_end
        };
        &self.keys[start..self.blocks[i].key_end]
    }

    fn add_block(&mut self, order: &SortOrder, first: (u64, &[u8]), offset: u64) {
        self.keys
            .extend_from_slice(key_prefix(order, &first.1[4..]));
        self.blocks.push(RunBlock {
            offset,
            first_seq: first.0,
            key_end: self.keys.len(),
        });
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = libdeflater::Crc::new();
    crc.update(data);
    crc.sum()
}

fn encode_block(records: &[(u64, &[u8])], raw: &mut Vec<u8>) -> Vec<u8> {
    raw.clear();
    for (seq, r) in records {
        raw.extend_from_slice(&seq.to_le_bytes());
        raw.extend_from_slice(r);
    }
    let body = lz4_flex::block::compress(raw);
    let mut out = Vec::with_capacity(BLOCK_HEADER + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(raw).to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Creates a run file: `O_EXCL|O_NOFOLLOW`, mode 0600 (runs hold the input's records; an existing
/// file or symlink at the name is an error, never followed).
pub fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Writes `(sequence number, record)` pairs (in order) to a new run at `path`, compressing blocks on
/// the rayon pool while a writer thread writes the previous window of blocks (writing on the
/// compressing thread left one of two cores idle for a third of each spill: bench/RESULTS.md).
pub fn write_run<'a, I>(path: &Path, order: SortOrder, records: I) -> Result<RunFile, SortError>
where
    I: IntoIterator<Item = (u64, &'a [u8])>,
{
    let io = |e| SortError::temp(path, e);
    let out = BufWriter::with_capacity(1 << 20, create_private(path).map_err(io)?);
    let mut file = RunFile {
        path: path.to_path_buf(),
        ..RunFile::default()
    };
    let (tx, rx) = crossbeam_channel::bounded::<Vec<Vec<u8>>>(2);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> std::io::Result<()> {
            let mut out = out;
            for window in rx {
                for b in &window {
                    out.write_all(b)?;
                }
            }
            out.flush()
        });
        let compressed =
            compress_windows(&order, records, &mut file, |window| tx.send(window).is_ok());
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("run writer panicked")));
        written.map_err(io)?;
        compressed
    })?;
    Ok(file)
}

/// Cuts records into blocks, compresses them a window at a time on the rayon pool, indexes them in
/// `file`, and hands each window to `write` (which returns false if writing stopped).
fn compress_windows<'a, I>(
    order: &SortOrder,
    records: I,
    file: &mut RunFile,
    mut write: impl FnMut(Vec<Vec<u8>>) -> bool,
) -> Result<(), SortError>
where
    I: IntoIterator<Item = (u64, &'a [u8])>,
{
    let window = rayon::current_num_threads().max(1) * 4;
    let mut groups: Vec<Vec<(u64, &[u8])>> = Vec::with_capacity(window);
    let mut current: Vec<(u64, &[u8])> = Vec::new();
    let mut current_len = 0usize;
    let mut flush = |groups: &mut Vec<Vec<(u64, &[u8])>>, file: &mut RunFile| -> bool {
        let blocks: Vec<Vec<u8>> = groups
            .par_iter()
            .map_init(Vec::new, |raw, g| encode_block(g, raw))
            .collect();
        for (b, g) in blocks.iter().zip(groups.iter()) {
            file.add_block(order, g[0], file.bytes);
            file.bytes += b.len() as u64;
            file.records += g.len() as u64;
        }
        groups.clear();
        write(blocks)
    };
    let stopped = || SortError::Internal("run writer stopped".into());
    for (seq, r) in records {
        let r: &[u8] = r;
        if current_len + r.len() > RUN_BLOCK_RAW && !current.is_empty() {
            groups.push(std::mem::take(&mut current));
            current_len = 0;
            if groups.len() == window && !flush(&mut groups, file) {
                return Err(stopped());
            }
        }
        current_len += SEQ_LEN + r.len();
        current.push((seq, r));
    }
    if !current.is_empty() {
        groups.push(current);
    }
    if !flush(&mut groups, file) {
        return Err(stopped());
    }
    Ok(())
}

/// Writes a run one record at a time on the calling thread (used by background compaction, which
/// must not compete with the foreground for the rayon pool).
pub struct StreamingRunWriter {
    order: SortOrder,
    out: BufWriter<File>,
    raw: Vec<u8>,
    n_block: u32,
    file: RunFile,
}

impl StreamingRunWriter {
    /// Creates the run file.
    pub fn create(path: &Path, order: SortOrder) -> Result<Self, SortError> {
        let out = create_private(path).map_err(|e| SortError::temp(path, e))?;
        Ok(Self {
            order,
            out: BufWriter::with_capacity(1 << 20, out),
            raw: Vec::with_capacity(RUN_BLOCK_RAW),
            n_block: 0,
            file: RunFile {
                path: path.to_path_buf(),
                ..RunFile::default()
            },
        })
    }

    /// Appends one record (with its `block_size` prefix) and its input sequence number.
    pub fn push(&mut self, seq: u64, record: &[u8]) -> Result<(), SortError> {
        if self.raw.len() + SEQ_LEN + record.len() > RUN_BLOCK_RAW && !self.raw.is_empty() {
            self.flush_block()?;
        }
        if self.raw.is_empty() {
            let at = self.file.bytes;
            self.file.add_block(&self.order, (seq, record), at);
        }
        self.raw.extend_from_slice(&seq.to_le_bytes());
        self.raw.extend_from_slice(record);
        self.n_block += 1;
        self.file.records += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), SortError> {
        let body = lz4_flex::block::compress(&self.raw);
        let mut head = [0u8; BLOCK_HEADER];
        head[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        head[8..12].copy_from_slice(&crc32(&self.raw).to_le_bytes());
        head[12..16].copy_from_slice(&self.n_block.to_le_bytes());
        let io = |e| SortError::temp(&self.file.path, e);
        self.out.write_all(&head).map_err(io)?;
        self.out.write_all(&body).map_err(io)?;
        self.file.bytes += (BLOCK_HEADER + body.len()) as u64;
        self.raw.clear();
        self.n_block = 0;
        Ok(())
    }

    /// Writes the last block and closes the file.
    pub fn finish(mut self) -> Result<RunFile, SortError> {
        if !self.raw.is_empty() {
            self.flush_block()?;
        }
        self.out
            .flush()
            .map_err(|e| SortError::temp(&self.file.path, e))?;
        Ok(self.file)
    }
}

/// Reads a run back block by block; [`RunReader::current`] is the record under the cursor.
pub struct RunReader {
    path: PathBuf,
    /// Unbuffered: blocks are read whole with two `read_exact` calls, so a buffer would only cost
    /// memory per open run. A local file, or (a distributed reduce task's) the run's object.
    file: sortase_io::Source,
    compressed: Vec<u8>,
    raw: Vec<u8>,
    /// Start of the current record in `raw` (== raw.len() when the block is used up).
    at: usize,
    /// File offset of the next block, for error messages.
    offset: u64,
    done: bool,
}

impl RunReader {
    /// Opens a run and positions the cursor on its first record.
    pub fn open(path: &Path) -> Result<Self, SortError> {
        Self::open_at(path, 0)
    }

    /// Opens a run and positions the cursor on the first record of the block at file offset `offset`
    /// (from [`RunFile::blocks`]).
    pub fn open_at(path: &Path, offset: u64) -> Result<Self, SortError> {
        Self::open_range(path, offset, None)
    }

    /// [`RunReader::open_at`], reading expected to stop at file offset `end` (a stretch of the
    /// run: a run on object storage is fetched to there, not to its end).
    pub fn open_range(path: &Path, offset: u64, end: Option<u64>) -> Result<Self, SortError> {
        let mut file = sortase_io::Source::open_path(path).map_err(|e| SortError::temp(path, e))?;
        if let Some(end) = end {
            file.expect_end(end);
        }
        if offset > 0 {
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| SortError::temp(path, e))?;
        }
        let mut r = Self {
            path: path.to_path_buf(),
            file,
            compressed: Vec::new(),
            raw: Vec::new(),
            at: 0,
            offset,
            done: false,
        };
        r.next_block()?;
        Ok(r)
    }

    fn corrupt(&self, what: &str) -> SortError {
        SortError::CorruptRun {
            path: self.path.clone(),
            offset: self.offset,
            what: what.to_string(),
        }
    }

    fn next_block(&mut self) -> Result<(), SortError> {
        let mut head = [0u8; BLOCK_HEADER];
        match self.file.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.done = true;
                self.raw.clear();
                self.at = 0;
                return Ok(());
            }
            Err(e) => return Err(SortError::temp(&self.path, e)),
        }
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (clen, rlen, crc) = (word(0) as usize, word(4) as usize, word(8));
        self.compressed.resize(clen, 0);
        self.file
            .read_exact(&mut self.compressed)
            .map_err(|_| self.corrupt("truncated block"))?;
        self.raw.resize(rlen, 0);
        let got = lz4_flex::block::decompress_into(&self.compressed, &mut self.raw)
            .map_err(|_| self.corrupt("LZ4 data does not decode"))?;
        if got != rlen || crc32(&self.raw) != crc {
            return Err(self.corrupt("checksum mismatch"));
        }
        self.offset += (BLOCK_HEADER + clen) as u64;
        self.at = 0;
        Ok(())
    }

    /// The record under the cursor (with its `block_size` prefix), or `None` at the end.
    #[inline]
    pub fn current(&self) -> Option<&[u8]> {
        if self.done {
            return None;
        }
        let start = self.at + SEQ_LEN;
        let n = record_len(&self.raw[start..]);
        Some(&self.raw[start..start + n])
    }

    /// The input sequence number of the record under the cursor (meaningless at the end).
    #[inline]
    pub fn current_seq(&self) -> u64 {
        match self.raw.get(self.at..self.at + SEQ_LEN) {
            Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            None => u64::MAX,
        }
    }

    /// Moves to the next record.
    #[inline]
    pub fn advance(&mut self) -> Result<(), SortError> {
        if self.done {
            return Ok(());
        }
        self.at += SEQ_LEN + record_len(&self.raw[self.at + SEQ_LEN..]);
        if self.at >= self.raw.len() {
            self.next_block()?;
            if !self.done && self.raw.is_empty() {
                return Err(self.corrupt("empty block"));
            }
        }
        Ok(())
    }
}

/// Length of the record at the start of `b`, `block_size` prefix included.
#[inline]
fn record_len(b: &[u8]) -> usize {
    4 + u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: SortOrder = SortOrder::Tag {
        tag: *b"XX",
        by_name: None,
    };

    fn seqs(recs: &[Vec<u8>]) -> impl Iterator<Item = (u64, &[u8])> {
        recs.iter()
            .enumerate()
            .map(|(i, r)| (10 * i as u64, r.as_slice()))
    }

    fn rec(i: u32, len: usize) -> Vec<u8> {
        let mut r = ((len - 4) as u32).to_le_bytes().to_vec();
        r.extend(std::iter::repeat_n((i % 251) as u8, len - 4));
        r
    }

    #[test]
    fn round_trip_many_blocks_and_a_huge_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.run");
        let mut recs: Vec<Vec<u8>> = (0..20_000)
            .map(|i| rec(i, 40 + (i as usize % 300)))
            .collect();
        recs.push(rec(7, RUN_BLOCK_RAW * 3));
        recs.push(rec(8, 36));
        let info = write_run(&path, ORDER, seqs(&recs)).unwrap();
        assert_eq!(info.records, recs.len() as u64);
        let mut reader = RunReader::open(&path).unwrap();
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(reader.current(), Some(r.as_slice()));
            assert_eq!(reader.current_seq(), 10 * i as u64);
            reader.advance().unwrap();
        }
        assert_eq!(reader.current(), None);
        // Every block can be opened on its own, starting at its first record.
        assert!(info.blocks.len() > 10);
        let mut first = 0;
        for b in &info.blocks {
            let r = RunReader::open_at(&path, b.offset).unwrap();
            assert_eq!(r.current_seq(), b.first_seq);
            assert!(b.first_seq >= first);
            first = b.first_seq;
        }
    }

    #[test]
    fn empty_run_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.run");
        let info = write_run(&path, ORDER, std::iter::empty()).unwrap();
        assert!(info.blocks.is_empty());
        assert!(RunReader::open(&path).unwrap().current().is_none());
    }

    #[test]
    fn corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.run");
        let recs: Vec<Vec<u8>> = (0..100).map(|i| rec(i, 64)).collect();
        write_run(&path, ORDER, seqs(&recs)).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        let err = (|| -> Result<(), SortError> {
            let mut r = RunReader::open(&path)?;
            while r.current().is_some() {
                r.advance()?;
            }
            Ok(())
        })();
        assert!(err.is_err());
    }
}
