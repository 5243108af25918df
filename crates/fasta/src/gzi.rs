//! `.gzi` files exactly as htslib writes them, for every case bgzip and samtools produce.
//!
//! htslib records the start of every block that holds data (empty blocks, such as an EOF marker in the
//! middle of concatenated files, get no entry) and dumps all but the first, after a count of
//! `blocks - 1`; with no data block at all that count wraps to 2^64 - 1 (checked against bgzip 1.16
//! `-i`/`-r` and samtools 1.24 faidx).

use crate::FastaError;
use sortase_bgzf::gzi::GziEntry;
use sortase_bgzf::BlockLog;
use std::io::Write;

/// The blocks holding data, in file order, as (compressed, uncompressed) start offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GziIndex {
    /// Start of every non-empty block, the first included.
    pub data_blocks: Vec<GziEntry>,
}

impl GziIndex {
    /// From the block log of a [`sortase_bgzf::ParallelWriter`].
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

    /// Reads `.gzi` bytes (`what` names the file in errors).
    pub fn read(bytes: &[u8], what: &str) -> Result<Vec<GziEntry>, FastaError> {
        if bytes.len() == 8 && bytes == u64::MAX.to_le_bytes() {
            return Ok(Vec::new());
        }
        sortase_bgzf::gzi::read(bytes).map_err(|e| FastaError::BadIndex(format!("{what}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_count_wraps_like_htslib() {
        let mut out = Vec::new();
        GziIndex::default().write(&mut out).unwrap();
        assert_eq!(out, [0xff; 8]);
        assert!(GziIndex::read(&out, "x").unwrap().is_empty());
    }

    #[test]
    fn first_block_is_implied() {
        let log = BlockLog {
            blocks: vec![(100, 65280), (90, 1000)],
        };
        let g = GziIndex::from_block_log(&log);
        assert_eq!(
            g.entries(),
            &[GziEntry {
                compressed: 100,
                uncompressed: 65280
            }]
        );
    }
}
