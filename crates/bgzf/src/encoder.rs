//! Filling and deflating BGZF blocks on the calling thread: the unit of work of a task that owns one
//! slice of an output file (a key range of a sort), whose blocks are later concatenated in order.
//!
//! Block boundaries follow the same rules as [`crate::ParallelWriter`] (htslib's: at most
//! [`BLOCK_DATA_MAX`] bytes, a record starts a new block unless it fits in the open one), so a
//! slice's bytes depend only on the records written into it. Complete blocks are deflated every
//! [`BLOCKS_PER_DEFLATE`] blocks, so the uncompressed data held stays under ~1 MiB whatever the slice
//! size.
//!
//! ```
//! use sortase_bgzf::{BlockEncoder, CompressionLevel};
//! let mut enc = BlockEncoder::new(CompressionLevel::default());
//! enc.write_record(b"\x04\x00\x00\x00abcd").unwrap();
//! let out = enc.finish().unwrap();
//! assert_eq!(out.blocks.len(), 1);
//! assert_eq!(out.blocks[0].1, 8);
//! ```

use crate::block::{compressor_for, BLOCK_DATA_MAX};
use crate::cutter::{deflate_blocks, BlockCutter};
use crate::deflate::Deflater;
use crate::{BgzfError, CompressionLevel};

/// Complete blocks gathered before they are deflated.
pub const BLOCKS_PER_DEFLATE: usize = 16;

/// Deflated blocks of one slice, ready to be written after the slices before it.
#[derive(Debug, Default)]
pub struct EncodedBlocks {
    /// The BGZF blocks, back to back.
    pub bytes: Vec<u8>,
    /// `(compressed size, uncompressed size)` per block, in order.
    pub blocks: Vec<(u32, u32)>,
}

/// Cuts written bytes into BGZF blocks and deflates them (see the module documentation).
pub struct BlockEncoder {
    compressor: Option<Deflater>,
    /// Complete blocks not yet deflated, then the open block.
    cutter: BlockCutter,
    out: EncodedBlocks,
}

impl BlockEncoder {
    /// An encoder at `level`.
    pub fn new(level: CompressionLevel) -> Self {
        Self::with_capacity(level, 0)
    }

    /// An encoder at `level` whose output buffer starts with room for `bytes` (the expected size of
    /// the slice's blocks): a large slice then costs no reallocation, and no doubled capacity.
    pub fn with_capacity(level: CompressionLevel, bytes: usize) -> Self {
        Self {
            compressor: compressor_for(level),
            cutter: BlockCutter {
                data: Vec::with_capacity((BLOCKS_PER_DEFLATE + 1) * BLOCK_DATA_MAX),
                cuts: Vec::with_capacity(BLOCKS_PER_DEFLATE),
                open: 0,
            },
            out: EncodedBlocks {
                bytes: Vec::with_capacity(bytes),
                blocks: Vec::with_capacity(bytes / BLOCK_DATA_MAX + 1),
            },
        }
    }

    /// Where the next byte will go: (block number in this slice, offset inside the block).
    #[inline]
    pub fn position(&self) -> (u64, u16) {
        (
            (self.out.blocks.len() + self.cutter.cuts.len()) as u64,
            self.cutter.open_len() as u16,
        )
    }

    /// Ends the open block if `len` more bytes would not fit in it (htslib `bgzf_flush_try`).
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Result<(), BgzfError> {
        if self.cutter.must_end_before(len) {
            self.end_block()?;
        }
        Ok(())
    }

    /// Writes one record, starting a new block first if it would not fit in the open one.
    #[inline]
    pub fn write_record(&mut self, record: &[u8]) -> Result<(), BgzfError> {
        self.reserve(record.len())?;
        self.write_all(record)
    }

    /// Writes bytes, ending each block when it is full.
    pub fn write_all(&mut self, mut buf: &[u8]) -> Result<(), BgzfError> {
        while !buf.is_empty() {
            buf = self.cutter.fill(buf);
            self.deflate_if_full()?;
        }
        Ok(())
    }

    /// Ends the open block (if it holds any data).
    pub fn end_block(&mut self) -> Result<(), BgzfError> {
        if self.cutter.end_block() {
            self.deflate_if_full()?;
        }
        Ok(())
    }

    fn deflate_if_full(&mut self) -> Result<(), BgzfError> {
        if self.cutter.cuts.len() >= BLOCKS_PER_DEFLATE {
            self.deflate_complete()?;
        }
        Ok(())
    }

    /// Deflates the complete blocks and moves the open block to the front of `data`.
    fn deflate_complete(&mut self) -> Result<(), BgzfError> {
        let c = &mut self.cutter;
        let out = &mut self.out;
        deflate_blocks(
            self.compressor.as_mut(),
            &c.data,
            &c.cuts,
            &mut out.bytes,
            &mut out.blocks,
        )?;
        c.cuts.clear();
        c.data.drain(..c.open);
        c.open = 0;
        Ok(())
    }

    /// Ends the open block and returns every block of the slice.
    pub fn finish(mut self) -> Result<EncodedBlocks, BgzfError> {
        self.end_block()?;
        self.deflate_complete()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ParallelWriter, WriterOptions, EOF_MARKER};
    use std::io::Write;

    fn records() -> Vec<Vec<u8>> {
        (0..3000u32)
            .map(|i| vec![(i % 251) as u8; 20 + (i as usize * 37) % 900])
            .chain(std::iter::once(vec![7u8; 3 * BLOCK_DATA_MAX + 5]))
            .collect()
    }

    #[test]
    fn same_blocks_as_the_parallel_writer() {
        let level = CompressionLevel::default();
        let mut w = ParallelWriter::new(Vec::new(), WriterOptions::new(2, level));
        let mut enc = BlockEncoder::new(level);
        for r in records() {
            w.write_record(&r).unwrap();
            enc.write_record(&r).unwrap();
            assert_eq!(enc.position(), w.position());
        }
        w.flush().unwrap();
        let (bytes, log) = w.finish().unwrap();
        let out = enc.finish().unwrap();
        assert_eq!(out.blocks, log.blocks);
        assert_eq!(&bytes[..bytes.len() - EOF_MARKER.len()], &out.bytes[..]);
    }

    #[test]
    fn empty_slice_has_no_blocks() {
        let out = BlockEncoder::new(CompressionLevel::STORED)
            .finish()
            .unwrap();
        assert!(out.bytes.is_empty() && out.blocks.is_empty());
    }
}
