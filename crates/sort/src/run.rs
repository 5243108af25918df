//! Temporary runs: sorted raw BAM records in LZ4 blocks, each with a CRC-32 of its raw bytes.
//!
//! Block layout (little-endian): `compressed_len u32, raw_len u32, crc32(raw) u32, n_records u32`,
//! then `compressed_len` bytes of LZ4 block data. Records inside a block are whole BAM records with
//! their `block_size` prefixes, so a reader needs no record framing of its own. Blocks are compressed in
//! parallel (rayon) in windows, written in order.
//!
//! LZ4 rather than BGZF for temporary data: on the bench BAM's records lz4_flex compresses at several
//! hundred MB/s per core and decompresses at GB/s, against ~40 MB/s for DEFLATE at samtools' level
//! (the figure is in bench/RESULTS.md, "sort" section).

use crate::SortError;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Raw bytes per run block: big enough for LZ4 to find matches across records, small enough that
/// 64 open runs cost little memory in the final merge (~200 KiB each: raw + compressed block).
pub const RUN_BLOCK_RAW: usize = 128 << 10;
const BLOCK_HEADER: usize = 16;

/// A run on disk.
#[derive(Debug, Clone)]
pub struct RunFile {
    /// Where it is.
    pub path: PathBuf,
    /// Records it holds.
    pub records: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = libdeflater::Crc::new();
    crc.update(data);
    crc.sum()
}

fn encode_block(records: &[&[u8]], raw: &mut Vec<u8>) -> Vec<u8> {
    raw.clear();
    for r in records {
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

/// Writes `records` (in order) to a new run at `path`, compressing blocks on the rayon pool.
pub fn write_run<'a, I>(path: &Path, records: I) -> Result<RunFile, SortError>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let io = |e| SortError::temp(path, e);
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
    let window = rayon::current_num_threads().max(1) * 4;
    let mut groups: Vec<Vec<&[u8]>> = Vec::with_capacity(window);
    let mut current: Vec<&[u8]> = Vec::new();
    let mut current_len = 0usize;
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut flush = |groups: &mut Vec<Vec<&[u8]>>| -> Result<(), SortError> {
        let blocks: Vec<Vec<u8>> = groups
            .par_iter()
            .map_init(Vec::new, |raw, g| encode_block(g, raw))
            .collect();
        for b in &blocks {
            out.write_all(b).map_err(io)?;
            bytes += b.len() as u64;
        }
        groups.clear();
        Ok(())
    };
    for r in records {
        if current_len + r.len() > RUN_BLOCK_RAW && !current.is_empty() {
            groups.push(std::mem::take(&mut current));
            current_len = 0;
            if groups.len() == window {
                flush(&mut groups)?;
            }
        }
        current_len += r.len();
        current.push(r);
        n += 1;
    }
    if !current.is_empty() {
        groups.push(current);
    }
    flush(&mut groups)?;
    out.flush().map_err(io)?;
    Ok(RunFile {
        path: path.to_path_buf(),
        records: n,
        bytes,
    })
}

/// Writes a run one record at a time on the calling thread (used by background compaction, which
/// must not compete with the foreground for the rayon pool).
pub struct StreamingRunWriter {
    path: PathBuf,
    out: BufWriter<File>,
    raw: Vec<u8>,
    n_block: u32,
    records: u64,
    bytes: u64,
}

impl StreamingRunWriter {
    /// Creates the run file.
    pub fn create(path: &Path) -> Result<Self, SortError> {
        let file = File::create(path).map_err(|e| SortError::temp(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            raw: Vec::with_capacity(RUN_BLOCK_RAW),
            n_block: 0,
            records: 0,
            bytes: 0,
        })
    }

    /// Appends one record (with its `block_size` prefix).
    pub fn push(&mut self, record: &[u8]) -> Result<(), SortError> {
        if self.raw.len() + record.len() > RUN_BLOCK_RAW && !self.raw.is_empty() {
            self.flush_block()?;
        }
        self.raw.extend_from_slice(record);
        self.n_block += 1;
        self.records += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), SortError> {
        let body = lz4_flex::block::compress(&self.raw);
        let mut head = [0u8; BLOCK_HEADER];
        head[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        head[8..12].copy_from_slice(&crc32(&self.raw).to_le_bytes());
        head[12..16].copy_from_slice(&self.n_block.to_le_bytes());
        let io = |e| SortError::temp(&self.path, e);
        self.out.write_all(&head).map_err(io)?;
        self.out.write_all(&body).map_err(io)?;
        self.bytes += (BLOCK_HEADER + body.len()) as u64;
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
            .map_err(|e| SortError::temp(&self.path, e))?;
        Ok(RunFile {
            path: self.path,
            records: self.records,
            bytes: self.bytes,
        })
    }
}

/// Reads a run back block by block; [`RunReader::current`] is the record under the cursor.
pub struct RunReader {
    path: PathBuf,
    /// Unbuffered: blocks are read whole with two `read_exact` calls, so a buffer would only cost
    /// memory per open run.
    file: File,
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
        let file = File::open(path).map_err(|e| SortError::temp(path, e))?;
        let mut r = Self {
            path: path.to_path_buf(),
            file,
            compressed: Vec::new(),
            raw: Vec::new(),
            at: 0,
            offset: 0,
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
        let n = record_len(&self.raw[self.at..]);
        Some(&self.raw[self.at..self.at + n])
    }

    /// Moves to the next record.
    #[inline]
    pub fn advance(&mut self) -> Result<(), SortError> {
        if self.done {
            return Ok(());
        }
        self.at += record_len(&self.raw[self.at..]);
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
        let info = write_run(&path, recs.iter().map(|r| r.as_slice())).unwrap();
        assert_eq!(info.records, recs.len() as u64);
        let mut reader = RunReader::open(&path).unwrap();
        for r in &recs {
            assert_eq!(reader.current(), Some(r.as_slice()));
            reader.advance().unwrap();
        }
        assert_eq!(reader.current(), None);
    }

    #[test]
    fn empty_run_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.run");
        write_run(&path, std::iter::empty()).unwrap();
        assert!(RunReader::open(&path).unwrap().current().is_none());
    }

    #[test]
    fn corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.run");
        let recs: Vec<Vec<u8>> = (0..100).map(|i| rec(i, 64)).collect();
        write_run(&path, recs.iter().map(|r| r.as_slice())).unwrap();
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
