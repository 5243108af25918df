//! One BGZF block: header parsing, inflate with CRC32/ISIZE checks, deflate (SAM spec §4.1).

use crate::deflate::Deflater;
use crate::{BgzfError, CompressionLevel};
use libdeflater::Decompressor;

/// Largest uncompressed payload we put in a block: htslib `BGZF_BLOCK_SIZE`, so a block of incompressible
/// data still fits the 64 KiB limit and block boundaries fall where samtools puts them.
pub const BLOCK_DATA_MAX: usize = 0xff00;
/// Largest block, compressed or not: the 16-bit `BSIZE` field plus one (SAM spec §4.1).
pub const BLOCK_MAX: usize = 0x10000;
/// Length of the standard BGZF header (gzip header with a single 6-byte `BC` extra field).
pub const BLOCK_HEADER_LEN: usize = 18;
/// Length of the gzip footer: CRC32 and ISIZE.
const FOOTER_LEN: usize = 8;
/// The empty block that ends every BGZF file (SAM spec §4.1.2).
pub const EOF_MARKER: [u8; 28] = [
    0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 0x06, 0, 0x42, 0x43, 0x02, 0, 0x1b, 0, 0x03, 0, 0,
    0, 0, 0, 0, 0, 0, 0,
];

/// What a block header tells: where its DEFLATE data starts and how long the whole block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Total block length in bytes (`BSIZE + 1`).
    pub block_size: usize,
    /// Offset of the DEFLATE data inside the block (`12 + XLEN`).
    pub data_offset: usize,
}

/// Parses a BGZF block header at the start of `bytes`.
///
/// Accepts any extra-field layout as long as one subfield is `BC` with length 2 (SAM spec §4.1).
/// `bytes` must hold at least the whole header (12 bytes plus `XLEN`).
///
/// ```
/// let h = sortase_bgzf::parse_header(&sortase_bgzf::EOF_MARKER).unwrap();
/// assert_eq!(h.block_size, 28);
/// ```
pub fn parse_header(bytes: &[u8]) -> Result<BlockHeader, &'static str> {
    if bytes.len() < 12 {
        return Err("shorter than a gzip header");
    }
    if bytes[0] != 0x1f || bytes[1] != 0x8b {
        return Err("no gzip magic");
    }
    if bytes[2] != 8 {
        return Err("compression method is not DEFLATE");
    }
    if bytes[3] & 4 == 0 {
        return Err("gzip member without extra field (plain gzip, not BGZF)");
    }
    let xlen = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    let extra = bytes
        .get(12..12 + xlen)
        .ok_or("shorter than its extra field")?;
    let mut i = 0;
    while i + 4 <= extra.len() {
        let slen = usize::from(u16::from_le_bytes([extra[i + 2], extra[i + 3]]));
        if extra[i] == b'B' && extra[i + 1] == b'C' && slen == 2 && i + 6 <= extra.len() {
            let bsize = usize::from(u16::from_le_bytes([extra[i + 4], extra[i + 5]]));
            let block_size = bsize + 1;
            let data_offset = 12 + xlen;
            if block_size < data_offset + FOOTER_LEN {
                return Err("BSIZE smaller than header and footer");
            }
            return Ok(BlockHeader {
                block_size,
                data_offset,
            });
        }
        i += 4 + slen;
    }
    Err("gzip member without BGZF 'BC' field (plain gzip, not BGZF)")
}

/// ISIZE of a complete block: the uncompressed length stored in its last 4 bytes.
pub(crate) fn stored_isize(block: &[u8]) -> u32 {
    let n = block.len();
    u32::from_le_bytes([block[n - 4], block[n - 3], block[n - 2], block[n - 1]])
}

fn stored_crc(block: &[u8]) -> u32 {
    let n = block.len();
    u32::from_le_bytes([block[n - 8], block[n - 7], block[n - 6], block[n - 5]])
}

/// Inflates one complete block into `out`, which must be exactly ISIZE bytes long, and checks CRC32.
///
/// `offset` is the block's compressed file offset, used only in error messages.
pub fn inflate_block(
    decompressor: &mut Decompressor,
    block: &[u8],
    out: &mut [u8],
    offset: u64,
) -> Result<(), BgzfError> {
    let header = parse_header(block).map_err(|reason| BgzfError::BadHeader { offset, reason })?;
    let payload = &block[header.data_offset..block.len() - FOOTER_LEN];
    let n = decompressor
        .deflate_decompress(payload, out)
        .map_err(|_| BgzfError::Inflate { offset })?;
    if n != out.len() {
        return Err(BgzfError::Checksum {
            offset,
            what: "ISIZE",
            stored: out.len() as u32,
            computed: n as u32,
        });
    }
    let computed = libdeflater::crc32(out);
    let stored = stored_crc(block);
    if computed != stored {
        return Err(BgzfError::Checksum {
            offset,
            what: "CRC32",
            stored,
            computed,
        });
    }
    Ok(())
}

/// Longest DEFLATE match (RFC 1951 §3.2.5): the most bytes one symbol writes.
const MATCH_MAX: usize = 258;

/// Inflates only the first `need` bytes of a complete block into `out` (ISIZE bytes long); the rest
/// of `out` is unspecified. Used for random access, where a record in the middle of a block needs
/// only the block's head: on the bench's protein FASTA this halves the inflate work of `fetch`.
///
/// When `need` is close enough to ISIZE the whole block is inflated and its CRC32 checked; otherwise
/// the CRC32 cannot be checked (it covers the whole block), but the DEFLATE stream up to `need` is
/// still decoded and any invalid code in it is an error. This relies on libdeflate writing output
/// strictly in order and stopping with `INSUFFICIENT_SPACE` before a literal or match that does not
/// fit (libdeflate's `decompress_template.h`): every byte before the stopping point is final, and
/// since a match writes at most 258 bytes, a buffer 258 bytes longer than `need` holds `need` final
/// bytes. The unit test below checks every prefix length against a full inflate.
pub fn inflate_block_prefix(
    decompressor: &mut Decompressor,
    block: &[u8],
    out: &mut [u8],
    need: usize,
    offset: u64,
) -> Result<(), BgzfError> {
    let limit = need.saturating_add(MATCH_MAX);
    if limit >= out.len() {
        return inflate_block(decompressor, block, out, offset);
    }
    let header = parse_header(block).map_err(|reason| BgzfError::BadHeader { offset, reason })?;
    let payload = &block[header.data_offset..block.len() - FOOTER_LEN];
    match decompressor.deflate_decompress(payload, &mut out[..limit]) {
        Err(libdeflater::DecompressionError::InsufficientSpace) => Ok(()),
        Ok(n) => Err(BgzfError::Checksum {
            offset,
            what: "ISIZE",
            stored: out.len() as u32,
            computed: n as u32,
        }),
        Err(_) => Err(BgzfError::Inflate { offset }),
    }
}

/// Deflates `data` (at most [`BLOCK_MAX`] bytes, normally ≤ [`BLOCK_DATA_MAX`]) as one BGZF block
/// appended to `out`.
///
/// Level 0 writes a stored DEFLATE block as htslib does for `-u`; data that does not shrink enough to fit
/// a block is stored too.
pub fn deflate_block(
    compressor: Option<&mut Deflater>,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), BgzfError> {
    const STORED_OVERHEAD: usize = 5; // BFINAL/BTYPE byte, LEN, NLEN (RFC 1951 §3.2.4)
    if data.len() > BLOCK_MAX - BLOCK_HEADER_LEN - FOOTER_LEN - STORED_OVERHEAD {
        return Err(BgzfError::BlockTooLarge { len: data.len() });
    }
    let start = out.len();
    out.extend_from_slice(&EOF_MARKER[..BLOCK_HEADER_LEN]);
    let payload_start = out.len();
    let mut compressed = false;
    if let Some(c) = compressor {
        out.resize(start + BLOCK_MAX - FOOTER_LEN, 0);
        if let Some(n) = c.compress(data, &mut out[payload_start..]) {
            out.truncate(payload_start + n);
            compressed = true;
        } else {
            out.truncate(payload_start);
        }
    }
    if !compressed {
        let len = data.len() as u16;
        out.push(1); // BFINAL = 1, BTYPE = 00 (stored)
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(data);
    }
    out.extend_from_slice(&libdeflater::crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let bsize = (out.len() - start - 1) as u16;
    out[start + 16..start + 18].copy_from_slice(&bsize.to_le_bytes());
    Ok(())
}

/// A compressor for `level`, or `None` for stored blocks.
pub(crate) fn compressor_for(level: CompressionLevel) -> Option<Deflater> {
    Deflater::for_level(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(data: &[u8], level: i32) -> Vec<u8> {
        let mut c = compressor_for(CompressionLevel::samtools(level));
        let mut block = Vec::new();
        deflate_block(c.as_mut(), data, &mut block).unwrap();
        let h = parse_header(&block).unwrap();
        assert_eq!(h.block_size, block.len());
        let mut out = vec![0; stored_isize(&block) as usize];
        inflate_block(&mut Decompressor::new(), &block, &mut out, 0).unwrap();
        out
    }

    #[test]
    fn roundtrip_levels_and_sizes() {
        let data: Vec<u8> = (0..BLOCK_DATA_MAX).map(|i| (i * 7 % 251) as u8).collect();
        for level in [-1, 0, 1, 6, 9] {
            for len in [0, 1, 100, BLOCK_DATA_MAX] {
                assert_eq!(roundtrip(&data[..len], level), &data[..len]);
            }
        }
    }

    #[test]
    fn empty_block_is_the_eof_marker() {
        let mut block = Vec::new();
        deflate_block(None, &[], &mut block).unwrap();
        let h = parse_header(&block).unwrap();
        assert_eq!(h.block_size, block.len());
        assert_eq!(stored_isize(&block), 0);
    }

    #[test]
    fn corrupt_crc_is_reported_with_offset() {
        let mut block = Vec::new();
        deflate_block(None, b"hello", &mut block).unwrap();
        let n = block.len();
        block[n - 8] ^= 1;
        let err = inflate_block(&mut Decompressor::new(), &block, &mut [0; 5], 1234).unwrap_err();
        assert!(err.to_string().contains("1234") && err.to_string().contains("CRC32"));
    }

    #[test]
    fn header_rejects_plain_gzip_and_text() {
        assert!(parse_header(b"@HD\tVN:1.6\n").is_err());
        let plain_gzip = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0, 0];
        assert!(parse_header(&plain_gzip).is_err());
        assert!(parse_header(&EOF_MARKER[..11]).is_err());
    }

    #[test]
    fn prefix_inflate_matches_full_inflate() {
        // Text with long repeats (matches of every length) and literals.
        let mut data = Vec::new();
        let mut x = 12345u32;
        while data.len() < BLOCK_DATA_MAX {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            if x.is_multiple_of(3) && data.len() > 300 {
                let from = data.len() - 1 - (x as usize >> 8) % 300;
                let n = 3 + (x as usize >> 4) % 256;
                for k in 0..n {
                    data.push(data[from + k]);
                }
            } else {
                data.push(b"ACGTNacgt>\n"[(x >> 16) as usize % 11]);
            }
        }
        data.truncate(BLOCK_DATA_MAX);
        let mut block = Vec::new();
        let mut c = compressor_for(CompressionLevel::samtools(6));
        deflate_block(c.as_mut(), &data, &mut block).unwrap();
        let mut d = Decompressor::new();
        let mut out = vec![0u8; data.len()];
        for need in (0..data.len())
            .step_by(97)
            .chain([data.len() - 1, data.len()])
        {
            out.fill(0);
            inflate_block_prefix(&mut d, &block, &mut out, need, 0).unwrap();
            assert_eq!(&out[..need], &data[..need], "need {need}");
        }
        // A corrupt stream is still an error when its bad part is decoded.
        let mut bad = block.clone();
        for b in &mut bad[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + 40] {
            *b = 0xff;
        }
        assert!(inflate_block_prefix(&mut d, &bad, &mut out, 1000, 0).is_err());
    }
}
