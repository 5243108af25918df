//! The `.gzi` index of bgzip: for every block but the first, its compressed and uncompressed offsets
//! (htslib `bgzf_index_dump`: a little-endian u64 count, then count pairs of u64).

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

/// Entries for the blocks of a [`BlockLog`], as bgzip writes them (the first block, at 0/0, is implied).
///
/// ```
/// let log = sortase_bgzf::BlockLog { blocks: vec![(100, 65280), (90, 1000)] };
/// let gzi = sortase_bgzf::gzi::from_block_log(&log);
/// assert_eq!(gzi.len(), 1);
/// assert_eq!((gzi[0].compressed, gzi[0].uncompressed), (100, 65280));
/// ```
pub fn from_block_log(log: &BlockLog) -> Vec<GziEntry> {
    let mut entries = Vec::with_capacity(log.blocks.len());
    let (mut c, mut u) = (0u64, 0u64);
    for (i, &(cs, us)) in log.blocks.iter().enumerate() {
        if i > 0 {
            entries.push(GziEntry {
                compressed: c,
                uncompressed: u,
            });
        }
        c += u64::from(cs);
        u += u64::from(us);
    }
    entries
}

/// Writes a `.gzi` index.
pub fn write<W: Write>(mut out: W, entries: &[GziEntry]) -> std::io::Result<()> {
    out.write_all(&(entries.len() as u64).to_le_bytes())?;
    for e in entries {
        out.write_all(&e.compressed.to_le_bytes())?;
        out.write_all(&e.uncompressed.to_le_bytes())?;
    }
    out.flush()
}

/// Reads a `.gzi` index.
pub fn read<R: Read>(mut input: R) -> Result<Vec<GziEntry>, BgzfError> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
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
        let entries = vec![
            GziEntry {
                compressed: 10,
                uncompressed: 65280,
            },
            GziEntry {
                compressed: 30,
                uncompressed: 130560,
            },
        ];
        let mut bytes = Vec::new();
        write(&mut bytes, &entries).unwrap();
        assert_eq!(bytes.len(), 8 + 32);
        assert_eq!(read(&bytes[..]).unwrap(), entries);
        assert!(read(&bytes[..20]).is_err());
    }
}
