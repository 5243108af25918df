//! The `.gzi` index of bgzip, exactly as htslib writes it (`bgzf_index_dump`: a little-endian u64
//! count, then count pairs of u64), for every case bgzip and samtools produce.
//!
//! htslib records the start of every block that holds data (empty blocks, such as an EOF marker in the
//! middle of concatenated files, get no entry) and dumps all but the first, after a count of
//! `blocks - 1`; with no data block at all that count wraps to 2^64 - 1 (checked against bgzip 1.16
//! `-i`/`-r` and samtools 1.24 faidx).

use crate::{BgzfError, BlockLog};
use std::io::{Read, Write};

/// One `.gzi` entry: where a block starts in the compressed and in the uncompressed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GziEntry {
    /// Compressed offset of the block.
    pub compressed: u64,
    /// Uncompressed offset of the block's first byte.
    pub uncompressed: u64,
}

/// The blocks holding data, in file order, as (compressed, uncompressed) start offsets.
///
/// ```
/// use sortase_bgzf::{gzi::GziIndex, BlockLog};
/// // Two data blocks and the EOF marker: one entry (the first block, at 0/0, is implied).
/// let log = BlockLog { blocks: vec![(100, 65280), (90, 1000), (28, 0)] };
/// let gzi = GziIndex::from_block_log(&log);
/// assert_eq!(gzi.entries().len(), 1);
/// assert_eq!((gzi.entries()[0].compressed, gzi.entries()[0].uncompressed), (100, 65280));
/// let mut bytes = Vec::new();
/// gzi.write(&mut bytes).unwrap();
/// assert_eq!(sortase_bgzf::gzi::read(&bytes[..]).unwrap(), gzi.entries());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GziIndex {
    /// Start of every non-empty block, the first included.
    pub data_blocks: Vec<GziEntry>,
}

impl GziIndex {
    /// From the block log of a [`crate::ParallelWriter`].
    pub fn from_block_log(log: &BlockLog) -> Self {
        let (mut c, mut u) = (0u64, 0u64);
        let mut data_blocks = Vec::with_capacity(log.blocks.len());
        for &(cs, us) in &log.blocks {
            if us > 0 {
                data_blocks.push(GziEntry {
                    compressed: c,
                    uncompressed: u,
                });
            }
            c += u64::from(cs);
            u += u64::from(us);
        }
        Self { data_blocks }
    }

    /// The entries a `.gzi` lists (every data block but the first).
    pub fn entries(&self) -> &[GziEntry] {
        self.data_blocks.get(1..).unwrap_or_default()
    }

    /// Writes the `.gzi` bytes.
    pub fn write<W: Write>(&self, mut out: W) -> std::io::Result<()> {
        let count = (self.data_blocks.len() as u64).wrapping_sub(1);
        out.write_all(&count.to_le_bytes())?;
        for e in self.entries() {
            out.write_all(&e.compressed.to_le_bytes())?;
            out.write_all(&e.uncompressed.to_le_bytes())?;
        }
        out.flush()
    }
}

/// Reads a `.gzi` index: its entries (the first block, at 0/0, is implied). A count of 2^64 - 1 with
/// no entries is htslib's index of a file without data.
pub fn read<R: Read>(mut input: R) -> Result<Vec<GziEntry>, BgzfError> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
    if bytes.len() == 8 && bytes == u64::MAX.to_le_bytes() {
        return Ok(Vec::new());
    }
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| BgzfError::Gzi("shorter than its 8-byte entry count".into()))?;
    let body = &bytes[8..];
    if (body.len() as u64) != n.saturating_mul(16) {
        return Err(BgzfError::Gzi(format!(
            "{n} entries need {} bytes, found {}",
            n.saturating_mul(16),
            body.len()
        )));
    }
    Ok(body
        .chunks_exact(16)
        .map(|e| GziEntry {
            compressed: u64::from_le_bytes(e[..8].try_into().expect("8 bytes")),
            uncompressed: u64::from_le_bytes(e[8..].try_into().expect("8 bytes")),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read() {
        let blocks = |c, u| GziEntry {
            compressed: c,
            uncompressed: u,
        };
        let gzi = GziIndex {
            data_blocks: vec![blocks(0, 0), blocks(10, 65280), blocks(30, 130560)],
        };
        let mut bytes = Vec::new();
        gzi.write(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 8 + 32);
        assert_eq!(read(&bytes[..]).unwrap(), gzi.entries());
        assert!(read(&bytes[..20]).is_err());
    }

    #[test]
    fn empty_file_count_wraps_like_htslib() {
        let mut out = Vec::new();
        GziIndex::default().write(&mut out).unwrap();
        assert_eq!(out, [0xff; 8]);
        assert!(read(&out[..]).unwrap().is_empty());
    }

    #[test]
    fn empty_blocks_get_no_entry() {
        // Two files concatenated: data, EOF marker, data, EOF marker.
        let log = BlockLog {
            blocks: vec![(100, 65280), (28, 0), (90, 1000), (28, 0)],
        };
        let g = GziIndex::from_block_log(&log);
        assert_eq!(
            g.entries(),
            &[GziEntry {
                compressed: 128,
                uncompressed: 65280
            }]
        );
    }
}
