//! Writing BAI (raw) and CSI (BGZF with zlib, as htslib's `hts_idx_save`) files.

use crate::IndexFormat;
use flate2::{Compress, Compression, FlushCompress};

/// One bin: number, linear offset (CSI), chunks.
pub type BinParts<'a> = (u32, u64, &'a [(u64, u64)]);

/// One reference's bins (in table order) and linear index.
pub struct ReferenceParts<'a> {
    /// `(bin, loff, chunks)`.
    pub bins: Vec<BinParts<'a>>,
    /// Linear index (BAI only).
    pub linear: &'a [u64],
}

/// Everything that is written.
pub struct IndexParts<'a> {
    /// BAI or CSI.
    pub format: IndexFormat,
    /// Bits of the smallest bin.
    pub min_shift: u32,
    /// Depth.
    pub n_lvls: u32,
    /// Per reference.
    pub references: Vec<ReferenceParts<'a>>,
    /// Unplaced records.
    pub n_no_coor: u64,
}

/// The bytes of the index file.
pub fn serialise(parts: &IndexParts<'_>) -> Vec<u8> {
    let csi = matches!(parts.format, IndexFormat::Csi { .. });
    let mut out = Vec::new();
    if csi {
        out.extend_from_slice(b"CSI\x01");
        out.extend_from_slice(&(parts.min_shift as i32).to_le_bytes());
        out.extend_from_slice(&(parts.n_lvls as i32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // l_aux
    } else {
        out.extend_from_slice(b"BAI\x01");
    }
    out.extend_from_slice(&(parts.references.len() as i32).to_le_bytes());
    for r in &parts.references {
        out.extend_from_slice(&(r.bins.len() as i32).to_le_bytes());
        for &(bin, loff, chunks) in &r.bins {
            out.extend_from_slice(&bin.to_le_bytes());
            if csi {
                out.extend_from_slice(&loff.to_le_bytes());
            }
            out.extend_from_slice(&(chunks.len() as i32).to_le_bytes());
            for &(u, v) in chunks {
                out.extend_from_slice(&u.to_le_bytes());
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        if !csi {
            out.extend_from_slice(&(r.linear.len() as i32).to_le_bytes());
            for o in r.linear {
                out.extend_from_slice(&o.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&parts.n_no_coor.to_le_bytes());
    if csi {
        bgzf_zlib(&out)
    } else {
        out
    }
}

/// BGZF with zlib's default level in 0xff00-byte blocks, as htslib writes a CSI (pysam's htslib links
/// zlib, so libdeflate would give other bytes).
fn bgzf_zlib(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    for block in data.chunks(sortase_bgzf::BLOCK_DATA_MAX) {
        let mut z = Compress::new(Compression::new(6), false);
        let mut payload = Vec::with_capacity(block.len() + 64);
        z.compress_vec(block, &mut payload, FlushCompress::Finish)
            .expect("zlib deflate into a large enough buffer");
        let start = out.len();
        out.extend_from_slice(&sortase_bgzf::EOF_MARKER[..sortase_bgzf::BLOCK_HEADER_LEN]);
        out.extend_from_slice(&payload);
        let mut crc = flate2::Crc::new();
        crc.update(block);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(block.len() as u32).to_le_bytes());
        let bsize = (out.len() - start - 1) as u16;
        out[start + 16..start + 18].copy_from_slice(&bsize.to_le_bytes());
    }
    out.extend_from_slice(&sortase_bgzf::EOF_MARKER);
    out
}
