//! The parallel BGZF reader: one thread reads large sequential runs of blocks, N threads inflate them,
//! and the consumer receives [`Chunk`]s (many blocks' data in one contiguous buffer) in file order.
//!
//! Each chunk's buffer keeps [`CHUNK_HEADROOM`] free bytes in front of the data, so a consumer that cuts
//! the stream into records can prepend the tail of the previous chunk without copying this one.

use crate::block::{inflate_block, parse_header, stored_isize, BLOCK_MAX};
use crate::pool::{ordered_pool, Collector};
use crate::BgzfError;
use libdeflater::Decompressor;
use std::io::{ErrorKind, Read};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

/// Free bytes kept in front of every chunk's data for the previous chunk's unfinished record.
pub const CHUNK_HEADROOM: usize = 64 * 1024;

/// How a [`ParallelReader`] reads.
#[derive(Debug, Clone)]
pub struct ReaderOptions {
    /// Inflate threads (at least 1).
    pub threads: usize,
    /// File offset of the first byte the reader will see (the stream must already be positioned there).
    pub start: u64,
    /// Stop before the first block that starts at or after this offset.
    pub end: Option<u64>,
    /// Compressed bytes per batch handed to one inflate thread.
    pub batch_bytes: usize,
    /// Chunk buffers to reuse (the consumer gives them back, see [`ChunkBuffers`]); `None`: every
    /// chunk gets a new buffer.
    pub buffers: Option<Arc<ChunkBuffers>>,
}

impl ReaderOptions {
    /// Reads the whole stream with `threads` inflate threads.
    pub fn with_threads(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
            start: 0,
            end: None,
            batch_bytes: 512 * 1024,
            buffers: None,
        }
    }
}

/// Chunk buffers given back by a consumer, for the next chunks of the same or a later reader.
///
/// A consumer that opens many short readers (one per byte range) and drops every chunk after use
/// makes the allocator hand back and re-fault ~1 MiB per chunk: `read_bam`'s projection of the
/// large bench BAM took 94k-115k page faults (flagstat, 8 long readers: 10k), two thirds of them
/// in zeroing and inflating into fresh chunk buffers. Reused buffers are neither zeroed nor
/// faulted again: every byte of a chunk's data is inflated into, and the headroom is written before
/// it is read.
#[derive(Debug)]
///
/// The reader's compressed input buffers are recycled the same way (a list of their own): freshly
/// allocated per 256 KiB batch, they took ~75k of the projection's ~270k page faults (a
/// `perf record -e page-faults` of `read_columns ... keep`: `BatchReader::fill`'s zeroing).
pub struct ChunkBuffers {
    free: Mutex<Vec<Vec<u8>>>,
    compressed: Mutex<Vec<Vec<u8>>>,
    max: usize,
}

impl ChunkBuffers {
    /// A pool keeping at most `max` buffers.
    pub fn new(max: usize) -> Self {
        Self {
            free: Mutex::new(Vec::with_capacity(max)),
            compressed: Mutex::new(Vec::with_capacity(max)),
            max,
        }
    }

    /// Gives a buffer back (dropped when the pool is full).
    pub fn put(&self, buf: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.max {
            free.push(buf);
        }
    }

    /// A buffer of `len` bytes, of unspecified content.
    fn take(&self, len: usize) -> Vec<u8> {
        let reused = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match reused {
            Some(mut buf) => {
                // Only bytes past the old length are zeroed (once per buffer, in practice).
                buf.resize(len, 0);
                buf
            }
            None => vec![0u8; len],
        }
    }

    /// Gives a compressed input buffer back (dropped when the pool is full).
    fn put_compressed(&self, buf: Vec<u8>) {
        let mut free = self.compressed.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.max {
            free.push(buf);
        }
    }

    /// A compressed input buffer of at least `len` bytes, of unspecified content.
    fn take_compressed(&self, len: usize) -> Vec<u8> {
        let reused = self
            .compressed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        let mut buf = reused.unwrap_or_default();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf
    }
}

/// Where one block's data sits in a [`Chunk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    /// Compressed file offset of the block.
    pub coffset: u64,
    /// Compressed size of the block.
    pub csize: u32,
    /// Offset of the block's data inside [`Chunk::data`].
    pub ustart: u32,
    /// Uncompressed size of the block.
    pub usize: u32,
}

/// The inflated data of consecutive blocks, in one buffer.
#[derive(Debug, Default)]
pub struct Chunk {
    /// The buffer; the data is `buf[head..]`.
    pub buf: Vec<u8>,
    /// Start of the data in `buf`; `head` bytes of headroom precede it.
    pub head: usize,
    /// The blocks, in order.
    pub blocks: Vec<BlockMeta>,
}

impl Chunk {
    /// The inflated bytes of all blocks of the chunk.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.head..]
    }
}

struct Batch {
    compressed: Vec<u8>,
    /// (offset in `compressed`, block size, ISIZE)
    blocks: Vec<(usize, usize, usize)>,
    file_offset: u64,
}

/// Reads a BGZF stream on many threads; iterate it for [`Chunk`]s in file order.
pub struct ParallelReader {
    chunks: Collector<Result<Chunk, BgzfError>>,
    reader_thread: Option<JoinHandle<()>>,
    failed: bool,
    last_block_empty: bool,
    blocks_seen: u64,
}

impl ParallelReader {
    /// Starts reading `inner` with the given options.
    pub fn new<R: Read + Send + 'static>(inner: R, options: ReaderOptions) -> Self {
        let threads = options.threads.max(1);
        let buffers = options.buffers.clone();
        let (submitter, chunks) = ordered_pool(threads, 2 * threads + 2, || {
            let mut decompressor = Decompressor::new();
            let buffers = buffers.clone();
            move |batch: Batch| inflate_batch(&mut decompressor, batch, buffers.as_deref())
        });
        let reader_thread = thread::spawn(move || {
            let mut reading = BatchReader::new(inner, options);
            loop {
                match reading.next_batch() {
                    Ok(Some(batch)) => {
                        if submitter.submit(batch).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = submitter.submit_ready(Err(e));
                        return;
                    }
                }
            }
        });
        Self {
            chunks,
            reader_thread: Some(reader_thread),
            failed: false,
            last_block_empty: false,
            blocks_seen: 0,
        }
    }

    /// After the stream is exhausted: whether it ended with an empty block (the EOF marker).
    pub fn saw_eof_marker(&self) -> bool {
        self.last_block_empty
    }

    /// Blocks delivered so far.
    pub fn blocks_seen(&self) -> u64 {
        self.blocks_seen
    }
}

impl Iterator for ParallelReader {
    type Item = Result<Chunk, BgzfError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.chunks.next();
        match &item {
            Some(Ok(chunk)) => {
                if let Some(last) = chunk.blocks.last() {
                    self.last_block_empty = last.usize == 0;
                }
                self.blocks_seen += chunk.blocks.len() as u64;
            }
            Some(Err(_)) => self.failed = true,
            None => {
                if let Some(t) = self.reader_thread.take() {
                    let _ = t.join();
                }
            }
        }
        item
    }
}

fn inflate_batch(
    decompressor: &mut Decompressor,
    batch: Batch,
    buffers: Option<&ChunkBuffers>,
) -> Result<Chunk, BgzfError> {
    let total: usize = batch.blocks.iter().map(|b| b.2).sum();
    // Zeroing a new buffer costs one memset, small next to inflating the same bytes.
    let mut buf = match buffers {
        Some(b) => b.take(CHUNK_HEADROOM + total),
        None => vec![0u8; CHUNK_HEADROOM + total],
    };
    let mut blocks = Vec::with_capacity(batch.blocks.len());
    let mut ustart = 0usize;
    for &(off, size, isize) in &batch.blocks {
        let coffset = batch.file_offset + off as u64;
        let out = &mut buf[CHUNK_HEADROOM + ustart..CHUNK_HEADROOM + ustart + isize];
        inflate_block(
            decompressor,
            &batch.compressed[off..off + size],
            out,
            coffset,
        )?;
        blocks.push(BlockMeta {
            coffset,
            csize: size as u32,
            ustart: ustart as u32,
            usize: isize as u32,
        });
        ustart += isize;
    }
    if let Some(b) = buffers {
        b.put_compressed(batch.compressed);
    }
    Ok(Chunk {
        buf,
        head: CHUNK_HEADROOM,
        blocks,
    })
}

/// Cuts the compressed stream into batches of whole blocks (runs on the reader thread).
struct BatchReader<R> {
    inner: R,
    options: ReaderOptions,
    pending: Vec<u8>,
    /// File offset of `pending[0]`.
    offset: u64,
    eof: bool,
    done: bool,
}

impl<R: Read> BatchReader<R> {
    fn new(inner: R, options: ReaderOptions) -> Self {
        let offset = options.start;
        Self {
            inner,
            options,
            pending: Vec::new(),
            offset,
            eof: false,
            done: false,
        }
    }

    /// Reads into `buf[*filled..want]` (`buf` holds at least `want` bytes) until `want` bytes are
    /// filled or the input ends.
    fn fill(&mut self, buf: &mut [u8], filled: &mut usize, want: usize) -> std::io::Result<()> {
        while !self.eof && *filled < want {
            match self.inner.read(&mut buf[*filled..want]) {
                Ok(0) => self.eof = true,
                Ok(n) => *filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The whole blocks at the start of `buf` (offset, compressed size, inflated size), up to the
    /// batch's cap or the range's end, and the bytes they span; a block cut by the end of the
    /// input is an error.
    #[allow(clippy::type_complexity)]
    fn whole_blocks(
        &mut self,
        buf: &[u8],
    ) -> Result<(Vec<(usize, usize, usize)>, usize), BgzfError> {
        let mut blocks = Vec::new();
        let mut pos = 0;
        // The batch's inflated size is capped too: blocks of 64 KiB of one repeated byte deflate to
        // ~100 bytes, so a batch of compressed bytes from a "bomb" would otherwise need 650 times
        // its size. The blocks past the cap stay in `pending` for the next batch.
        let max_inflated = self
            .options
            .batch_bytes
            .saturating_mul(8)
            .max(4 * BLOCK_MAX);
        let mut inflated = 0;
        loop {
            let coffset = self.offset + pos as u64;
            if self.options.end.is_some_and(|end| coffset >= end) {
                self.done = true;
                break;
            }
            let rest = &buf[pos..];
            if rest.is_empty() {
                break;
            }
            let needed = header_len_needed(rest);
            if rest.len() < needed {
                if self.eof {
                    return Err(truncated(coffset, needed, rest.len()));
                }
                break;
            }
            let header = parse_header(rest).map_err(|reason| BgzfError::BadHeader {
                offset: coffset,
                reason,
            })?;
            if rest.len() < header.block_size {
                if self.eof {
                    return Err(truncated(coffset, header.block_size, rest.len()));
                }
                break;
            }
            let block = &rest[..header.block_size];
            let isize = stored_isize(block) as usize;
            if isize > BLOCK_MAX {
                return Err(BgzfError::BadHeader {
                    offset: coffset,
                    reason: "ISIZE larger than 65536",
                });
            }
            if !blocks.is_empty() && inflated + isize > max_inflated {
                break;
            }
            inflated += isize;
            blocks.push((pos, header.block_size, isize));
            pos += header.block_size;
        }
        Ok((blocks, pos))
    }

    fn next_batch(&mut self) -> Result<Option<Batch>, BgzfError> {
        if self.done {
            return Ok(None);
        }
        let want =
            (self.options.batch_bytes.max(2 * BLOCK_MAX)).max(self.pending.len() + BLOCK_MAX);
        // A recycled buffer keeps stale bytes past `filled`: only `buf[..filled]` is parsed.
        let mut buf = match &self.options.buffers {
            Some(b) => b.take_compressed(want),
            None => vec![0u8; want],
        };
        let mut filled = self.pending.len();
        buf[..filled].copy_from_slice(&self.pending);
        self.pending.clear();
        self.fill(&mut buf, &mut filled, want)?;
        let buf_len = filled;
        let (blocks, pos) = self.whole_blocks(&buf[..buf_len])?;
        self.pending.extend_from_slice(&buf[pos..buf_len]);
        let file_offset = self.offset;
        self.offset += pos as u64;
        if blocks.is_empty() {
            if self.done || (self.eof && self.pending.is_empty()) {
                self.done = true;
                return Ok(None);
            }
            // Not a single whole block yet (only possible with a tiny batch size): read more.
            return self.next_batch();
        }
        Ok(Some(Batch {
            compressed: buf,
            blocks,
            file_offset,
        }))
    }
}

/// Bytes needed before the header at the start of `rest` can be parsed.
fn header_len_needed(rest: &[u8]) -> usize {
    if rest.len() < 12 {
        return 18;
    }
    (12 + usize::from(u16::from_le_bytes([rest[10], rest[11]]))).max(18)
}

fn truncated(offset: u64, expected: usize, found: usize) -> BgzfError {
    BgzfError::Truncated {
        offset,
        expected,
        found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompressionLevel, ParallelWriter, WriterOptions};
    use std::io::Write;

    fn compress(data: &[u8], threads: usize) -> Vec<u8> {
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(threads, CompressionLevel::samtools(1)),
        );
        w.write_all(data).unwrap();
        w.finish().unwrap().0
    }

    fn read_all(bytes: Vec<u8>, threads: usize, batch: usize) -> Result<Vec<u8>, BgzfError> {
        let mut options = ReaderOptions::with_threads(threads);
        options.batch_bytes = batch;
        let mut out = Vec::new();
        let mut reader = ParallelReader::new(std::io::Cursor::new(bytes), options);
        for chunk in &mut reader {
            out.extend_from_slice(chunk?.data());
        }
        assert!(reader.saw_eof_marker());
        Ok(out)
    }

    #[test]
    fn roundtrip_many_blocks_any_threads() {
        let data: Vec<u8> = (0..1_000_000u32)
            .flat_map(|i| (i % 977).to_le_bytes())
            .collect();
        let bgzf = compress(&data, 3);
        for threads in [1, 2, 5] {
            assert_eq!(read_all(bgzf.clone(), threads, 1).unwrap(), data);
        }
    }

    /// Buffers given back hold stale bytes of other data; the chunks made from them are exact.
    #[test]
    fn reused_buffers_give_the_same_data() {
        let data: Vec<u8> = (0..600_000u32)
            .flat_map(|i| (i % 613).to_le_bytes())
            .collect();
        let other: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let buffers = Arc::new(ChunkBuffers::new(4));
        for (round, bytes) in [&other, &data, &data].into_iter().enumerate() {
            let mut options = ReaderOptions::with_threads(2);
            options.batch_bytes = 1 << 16;
            options.buffers = Some(buffers.clone());
            let mut out = Vec::new();
            for chunk in ParallelReader::new(std::io::Cursor::new(compress(bytes, 2)), options) {
                let chunk = chunk.unwrap();
                out.extend_from_slice(chunk.data());
                buffers.put(chunk.buf);
            }
            assert!(out == *bytes, "round {round}");
        }
        let kept = buffers.free.lock().unwrap().len();
        assert!((1..=4).contains(&kept), "{kept} buffers kept");
        let kept = buffers.compressed.lock().unwrap().len();
        assert!((1..=4).contains(&kept), "{kept} compressed buffers kept");
    }

    /// A recycled compressed buffer still holds the blocks of an earlier read past the bytes read
    /// now: a truncated stream read into it must fail, not go on with the stale blocks.
    #[test]
    fn recycled_compressed_buffers_do_not_hide_truncation() {
        // Incompressible (a linear congruential sequence), so the stream has several blocks.
        let data: Vec<u8> = (0..400_000u32)
            .map(|i| (i.wrapping_mul(1_103_515_245).wrapping_add(12_345) >> 16) as u8)
            .collect();
        let whole = compress(&data, 2);
        let buffers = Arc::new(ChunkBuffers::new(4));
        let read = |bytes: Vec<u8>| {
            let mut options = ReaderOptions::with_threads(1);
            options.buffers = Some(buffers.clone());
            ParallelReader::new(std::io::Cursor::new(bytes), options)
                .map(|c| c.map(|c| c.data().len()))
                .collect::<Result<Vec<_>, _>>()
        };
        let sizes = read(whole.clone()).unwrap();
        assert_eq!(sizes.iter().sum::<usize>(), data.len());
        let cut = whole[..whole.len() / 2].to_vec();
        assert!(matches!(read(cut), Err(BgzfError::Truncated { .. })));
    }

    #[test]
    fn empty_stream_is_empty() {
        assert!(read_all(compress(&[], 1), 2, 1).unwrap().is_empty());
    }

    #[test]
    fn truncation_names_the_block_offset() {
        let data = vec![7u8; 200_000];
        let mut bgzf = compress(&data, 1);
        bgzf.truncate(bgzf.len() - 40);
        let err = read_all(bgzf, 2, 1).unwrap_err();
        assert!(matches!(err, BgzfError::Truncated { .. }), "{err}");
    }
}
