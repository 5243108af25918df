//! Decompressed BGZF stream → BAM header and batches of whole raw records (the record splitter).
//!
//! The splitter walks the 4-byte `block_size` fields of the inflated chunks: exact and cheap. A record
//! cut by a chunk boundary is finished by copying its head into the next chunk's headroom
//! ([`sortase_bgzf::CHUNK_HEADROOM`]), so chunks are never copied whole; only a record longer than the
//! headroom costs a copy of that chunk.

use crate::{BamError, Header, RecordBatch, RecordRef};
use sortase_bgzf::{BgzfError, Chunk, ChunkBuffers};
use std::io::{self, Read};
use std::sync::Arc;

/// A source of inflated chunks (normally a [`sortase_bgzf::ParallelReader`]).
pub type ChunkSource = Box<dyn Iterator<Item = Result<Chunk, BgzfError>> + Send>;

/// Reads the BAM header, then batches of records, from a stream of inflated chunks.
/// Also implements [`Read`] over the decompressed bytes (for headers and bgzipped text).
pub struct ChunkStream {
    chunks: ChunkSource,
    current: Option<Chunk>,
    /// Read position inside the current chunk's data.
    pos: usize,
    /// Unfinished record bytes carried over from the previous chunk.
    carry: Vec<u8>,
    /// Uncompressed offset of the first byte not yet consumed (the start of `carry` if any).
    offset: u64,
    n_ref: i32,
    /// Every block seen, when enabled: (uncompressed start, compressed offset, uncompressed size).
    block_table: Option<Vec<BlockEntry>>,
    /// Uncompressed bytes in all chunks taken from the source so far.
    inflated: u64,
    /// The chunk source's buffer pool: batches give their buffers back to it when dropped.
    buffers: Option<Arc<ChunkBuffers>>,
}

/// Where one BGZF block sits in the compressed file and in the decompressed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEntry {
    /// Uncompressed offset of the block's first byte in the stream.
    pub ustart: u64,
    /// Compressed file offset of the block.
    pub coffset: u64,
    /// Uncompressed size (0 for an empty block such as the EOF marker).
    pub usize: u32,
}

impl ChunkStream {
    /// Wraps a chunk source.
    pub fn new(chunks: ChunkSource) -> Self {
        Self {
            chunks,
            current: None,
            pos: 0,
            carry: Vec::new(),
            offset: 0,
            n_ref: 0,
            block_table: None,
            inflated: 0,
            buffers: None,
        }
    }

    /// Batches give their buffers back to `pool` when dropped: give the same pool to the
    /// [`sortase_bgzf::ParallelReader`] (`ReaderOptions::buffers`) so that it inflates into them.
    pub fn with_buffers(mut self, pool: Arc<ChunkBuffers>) -> Self {
        self.buffers = Some(pool);
        self
    }

    /// Sets the reference count used to validate refIDs (when the header was read elsewhere).
    pub fn set_reference_count(&mut self, n_ref: usize) {
        self.n_ref = n_ref as i32;
    }

    /// Uncompressed offset of the next byte not yet consumed (after `read_header`: the header's length).
    pub fn position(&self) -> u64 {
        self.offset
    }

    /// Records every block from now on (for virtual offsets: see [`virtual_offset`]).
    pub fn enable_block_table(&mut self) {
        self.block_table.get_or_insert_with(Vec::new);
    }

    /// The blocks recorded so far (empty unless enabled).
    pub fn block_table(&self) -> &[BlockEntry] {
        self.block_table.as_deref().unwrap_or(&[])
    }

    /// Reads the BAM header and remembers its reference count for record validation.
    pub fn read_header(&mut self) -> Result<Header, BamError> {
        let header = Header::read_bam(self)?;
        self.n_ref = header.references().len() as i32;
        Ok(header)
    }

    /// The decompressed bytes available without consuming them (empty at the end of the stream).
    pub fn peek(&mut self) -> Result<&[u8], BgzfError> {
        if let Some(c) = self.next_chunk()? {
            self.current = Some(c);
        }
        Ok(self
            .current
            .as_ref()
            .map_or(&[][..], |c| &c.data()[self.pos..]))
    }

    fn next_chunk(&mut self) -> Result<Option<Chunk>, BgzfError> {
        if let Some(c) = self.current.take() {
            if self.pos < c.data().len() {
                return Ok(Some(c));
            }
        }
        self.pos = 0;
        loop {
            match self.chunks.next() {
                None => return Ok(None),
                Some(Err(e)) => return Err(e),
                Some(Ok(c)) => {
                    if let Some(table) = self.block_table.as_mut() {
                        table.extend(c.blocks.iter().map(|b| BlockEntry {
                            ustart: self.inflated + u64::from(b.ustart),
                            coffset: b.coffset,
                            usize: b.usize,
                        }));
                    }
                    self.inflated += c.data().len() as u64;
                    if !c.data().is_empty() {
                        return Ok(Some(c));
                    }
                }
            }
        }
    }

    /// The next batch of whole records, or `None` at the end of the stream.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, BamError> {
        loop {
            let Some(chunk) = self.next_chunk()? else {
                if self.carry.is_empty() {
                    return Ok(None);
                }
                return Err(self.truncated_tail());
            };
            let pos = self.pos;
            self.pos = 0;
            let data_start = chunk.head + pos;
            let (buf, start) = if self.carry.is_empty() {
                (chunk.buf, data_start)
            } else if self.carry.len() <= data_start {
                let mut buf = chunk.buf;
                let start = data_start - self.carry.len();
                buf[start..data_start].copy_from_slice(&self.carry);
                self.carry.clear();
                (buf, start)
            } else {
                let mut buf = std::mem::take(&mut self.carry);
                buf.extend_from_slice(&chunk.buf[data_start..]);
                if let Some(pool) = &self.buffers {
                    pool.put(chunk.buf);
                }
                (buf, 0)
            };
            let region_offset = self.offset;
            let (offsets, end) = self.split(&buf, start, region_offset)?;
            self.offset = region_offset + (end - start) as u64;
            self.carry.extend_from_slice(&buf[end..]);
            if !offsets.is_empty() {
                let batch = RecordBatch::from_parts(buf, offsets, end, region_offset);
                return Ok(Some(match &self.buffers {
                    Some(pool) => batch.recycled_into(Arc::clone(pool)),
                    None => batch,
                }));
            }
            if let Some(pool) = &self.buffers {
                pool.put(buf);
            }
        }
    }

    /// Walks records in `buf[start..]`; returns their offsets and the end of the last whole one.
    fn split(
        &self,
        buf: &[u8],
        start: usize,
        region_offset: u64,
    ) -> Result<(Vec<u32>, usize), BamError> {
        // HOT: once per record. Reads block_size, validates the variable-length fields, records the offset.
        let mut offsets = Vec::with_capacity((buf.len() - start) / 256 + 1);
        let mut i = start;
        while i + 4 <= buf.len() {
            let block_size =
                u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]) as usize;
            let at = region_offset + (i - start) as u64;
            if i + 4 + block_size > buf.len() {
                // A whole record is awaited in the carry buffer: refuse a hostile size first.
                check_block_size(block_size, at)?;
                break;
            }
            check_record(&buf[i + 4..i + 4 + block_size], self.n_ref, at)?;
            offsets.push(i as u32);
            i += 4 + block_size;
        }
        Ok((offsets, i))
    }

    fn truncated_tail(&self) -> BamError {
        let c = &self.carry;
        if c.len() < 4 {
            return BamError::Truncated {
                offset: self.offset,
                block_size: 0,
                available: c.len() as u64,
            };
        }
        BamError::Truncated {
            offset: self.offset,
            block_size: u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            available: c.len() as u64 - 4,
        }
    }
}

/// The virtual offset of uncompressed stream offset `u`, as htslib's `bgzf_tell` reports it: an offset at
/// a block boundary belongs to the next block (even an empty one). `cursor` is a hint that only grows
/// (offsets asked in increasing order cost O(1)); `table` must cover `u`.
pub fn virtual_offset(table: &[BlockEntry], cursor: &mut usize, u: u64) -> u64 {
    while *cursor < table.len() {
        let b = table[*cursor];
        if b.ustart == u || b.ustart + u64::from(b.usize) > u {
            return (b.coffset << 16) | (u - b.ustart);
        }
        *cursor += 1;
    }
    // Past the last recorded block: the end of the file after it.
    table
        .last()
        .map_or(0, |b| (b.coffset << 16) | (u - b.ustart))
}

impl Read for ChunkStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(chunk) = self.next_chunk().map_err(io::Error::from)? else {
                return Ok(0);
            };
            let data = &chunk.data()[self.pos..];
            let n = data.len().min(out.len());
            out[..n].copy_from_slice(&data[..n]);
            self.pos += n;
            self.offset += n as u64;
            self.current = Some(chunk);
            if n > 0 || out.is_empty() {
                return Ok(n);
            }
        }
    }
}

/// The largest record (`block_size`) sortase reads: 1 GiB. htslib reads `block_size` as an `int32_t`
/// and refuses 2 GiB and over; a real record is far below either (a 250-Mb contig aligned as one
/// record is about 400 MB). Checked before any buffer is sized by the field, so a hostile claim is
/// an error, not an allocation.
pub const MAX_RECORD_BYTES: usize = 1 << 30;

/// Refuses a `block_size` (of the record at uncompressed or virtual offset `at`) larger than
/// [`MAX_RECORD_BYTES`].
///
/// ```
/// assert!(sortase_bam::check_block_size(1000, 0).is_ok());
/// let e = sortase_bam::check_block_size(1 << 31, 7).unwrap_err().to_string();
/// assert!(e.contains("offset 7") && e.contains("block_size 2147483648"), "{e}");
/// ```
pub fn check_block_size(block_size: usize, at: u64) -> Result<(), BamError> {
    if block_size > MAX_RECORD_BYTES {
        return Err(BamError::record(
            at,
            format!("block_size {block_size} is larger than the 1 GiB a record may have"),
        ));
    }
    Ok(())
}

/// Validates one record (no `block_size` prefix) whose `block_size` field is at `at`: its layout
/// ([`RecordRef::new`]) and its reference ids against the header's `n_ref` references.
pub fn check_record(bytes: &[u8], n_ref: i32, at: u64) -> Result<RecordRef<'_>, BamError> {
    let r = RecordRef::new(bytes).map_err(|reason| BamError::record(at, reason))?;
    for (what, id) in [
        ("refID", r.reference_sequence_id()),
        ("next_refID", r.mate_reference_sequence_id()),
    ] {
        if id < -1 || id >= n_ref {
            return Err(BamError::record(
                at,
                format!("{what} {id} not in header ({n_ref} references)"),
            ));
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortase_bgzf::{
        CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions,
    };
    use std::io::Write;

    fn record(name: &[u8], l_seq: usize) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&(-1i32).to_le_bytes()); // refID
        r.extend_from_slice(&(-1i32).to_le_bytes()); // pos
        r.push(name.len() as u8 + 1); // l_read_name
        r.push(0); // mapq
        r.extend_from_slice(&4680u16.to_le_bytes()); // bin
        r.extend_from_slice(&0u16.to_le_bytes()); // n_cigar_op
        r.extend_from_slice(&4u16.to_le_bytes()); // flag
        r.extend_from_slice(&(l_seq as u32).to_le_bytes()); // l_seq
        r.extend_from_slice(&(-1i32).to_le_bytes()); // next_refID
        r.extend_from_slice(&(-1i32).to_le_bytes()); // next_pos
        r.extend_from_slice(&0i32.to_le_bytes()); // tlen
        r.extend_from_slice(name);
        r.push(0);
        r.resize(r.len() + l_seq.div_ceil(2) + l_seq, 0x11);
        let mut out = (r.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&r);
        out
    }

    fn bam(records: &[Vec<u8>]) -> Vec<u8> {
        let header = Header::new(String::new(), vec![]);
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(2, CompressionLevel::samtools(1)),
        );
        w.write_all(&header.to_bam_bytes()).unwrap();
        for r in records {
            w.write_all(r).unwrap(); // not record-aware: records straddle blocks on purpose
        }
        w.finish().unwrap().0
    }

    fn stream(bytes: Vec<u8>, batch: usize) -> ChunkStream {
        let mut o = ReaderOptions::with_threads(2);
        o.batch_bytes = batch;
        ChunkStream::new(Box::new(ParallelReader::new(
            std::io::Cursor::new(bytes),
            o,
        )))
    }

    #[test]
    fn every_record_once_across_chunk_boundaries() {
        let records: Vec<Vec<u8>> = (0..5000)
            .map(|i| record(format!("r{i}").as_bytes(), [0, 1, 150, 100_000][i % 4]))
            .collect();
        let mut s = stream(bam(&records), 1);
        s.read_header().unwrap();
        let mut got = Vec::new();
        while let Some(b) = s.next_batch().unwrap() {
            got.extend(b.iter_raw().map(<[u8]>::to_vec));
        }
        assert_eq!(got, records);
    }

    #[test]
    fn block_size_past_the_end_is_truncation() {
        let mut r = record(b"x", 10);
        r.truncate(r.len() - 3);
        let mut s = stream(bam(&[r]), 1);
        s.read_header().unwrap();
        assert!(matches!(s.next_batch(), Err(BamError::Truncated { .. })));
    }

    #[test]
    fn unknown_reference_is_an_error() {
        let mut r = record(b"x", 0);
        r[4..8].copy_from_slice(&3i32.to_le_bytes());
        let mut s = stream(bam(&[r]), 1);
        s.read_header().unwrap();
        let err = s.next_batch().unwrap_err().to_string();
        assert!(err.contains("refID 3 not in header"), "{err}");
    }
}
