//! Cutting a byte stream into BGZF block payloads by htslib's rules: a block holds at most
//! [`BLOCK_DATA_MAX`] bytes, and a writer that keeps records whole ends the open block before a
//! record that would not fit in it (`bgzf_flush_try`). Shared by the parallel writer (which deflates
//! blocks on a pool) and the block encoder (which deflates them on the calling thread), so both cut
//! the same records into the same blocks.

use crate::block::{deflate_block, BLOCK_DATA_MAX};
use crate::deflate::Deflater;
use crate::BgzfError;

/// Complete blocks not yet handed on, then the open block, in one buffer.
#[derive(Debug, Default)]
pub(crate) struct BlockCutter {
    /// Complete blocks, then the open block.
    pub data: Vec<u8>,
    /// End offset in `data` of each complete block.
    pub cuts: Vec<u32>,
    /// Start of the open block in `data`.
    pub open: usize,
}

impl BlockCutter {
    /// Bytes in the open block.
    #[inline]
    pub fn open_len(&self) -> usize {
        self.data.len() - self.open
    }

    /// Whether the open block must end before `len` more bytes (htslib `bgzf_flush_try`).
    #[inline]
    pub fn must_end_before(&self, len: usize) -> bool {
        self.open_len() > 0 && self.open_len() + len > BLOCK_DATA_MAX
    }

    /// Copies as much of `buf` as fits into the open block, ends the block if that fills it, and
    /// returns the rest of `buf`.
    #[inline]
    pub fn fill<'b>(&mut self, buf: &'b [u8]) -> &'b [u8] {
        let take = (BLOCK_DATA_MAX - self.open_len()).min(buf.len());
        self.data.extend_from_slice(&buf[..take]);
        if self.open_len() == BLOCK_DATA_MAX {
            self.end_block();
        }
        &buf[take..]
    }

    /// Ends the open block if it holds any data; returns whether it did.
    #[inline]
    pub fn end_block(&mut self) -> bool {
        if self.data.len() > self.open {
            self.cuts.push(self.data.len() as u32);
            self.open = self.data.len();
            true
        } else {
            false
        }
    }
}

/// Deflates the blocks of `data` that end at `cuts` into `out`, appending `(compressed size,
/// uncompressed size)` of each to `sizes`.
pub(crate) fn deflate_blocks(
    mut compressor: Option<&mut Deflater>,
    data: &[u8],
    cuts: &[u32],
    out: &mut Vec<u8>,
    sizes: &mut Vec<(u32, u32)>,
) -> Result<(), BgzfError> {
    let mut start = 0usize;
    for &end in cuts {
        let before = out.len();
        let block = &data[start..end as usize];
        deflate_block(compressor.as_deref_mut(), block, out)?;
        sizes.push(((out.len() - before) as u32, block.len() as u32));
        start = end as usize;
    }
    Ok(())
}
