//! Finding BGZF block starts from an arbitrary byte offset, without an index (docs/architecture.md).
//!
//! A candidate is accepted only if its header parses, the next block header (or the end of the data)
//! is exactly `BSIZE + 1` bytes further, and the candidate inflates with a matching CRC32. A random
//! 18-byte match passing all three is vanishingly unlikely, so the scanner never guesses.

use crate::block::{inflate_block, parse_header, stored_isize, BLOCK_MAX};
use libdeflater::Decompressor;
use std::io::{Read, Seek, SeekFrom};

/// Offset in `bytes` of the first verified block start at or after `from`.
///
/// `at_eof` says that `bytes` runs to the end of the file, so a block ending exactly at the end of
/// `bytes` is acceptable without a following header.
///
/// ```
/// let eof = sortase_bgzf::EOF_MARKER;
/// let mut data = b"junk".to_vec();
/// data.extend_from_slice(&eof);
/// assert_eq!(sortase_bgzf::scanner::find_block_start(&data, 0, true), Some(4));
/// ```
pub fn find_block_start(bytes: &[u8], from: usize, at_eof: bool) -> Option<usize> {
    let mut decompressor = Decompressor::new();
    let mut out = vec![0u8; BLOCK_MAX];
    let mut i = from;
    while i + 18 <= bytes.len() {
        let hit = memchr_magic(&bytes[i..])?;
        i += hit;
        if verify(&bytes[i..], at_eof, &mut decompressor, &mut out) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Next gzip member magic (ID1 ID2 CM). FLG is left to `parse_header`, which like htslib only requires
/// FEXTRA, so the scanner finds every block the reader accepts (a fuzzer found FLG 0xf7 missed).
fn memchr_magic(bytes: &[u8]) -> Option<usize> {
    bytes.windows(3).position(|w| w == [0x1f, 0x8b, 0x08])
}

fn verify(candidate: &[u8], at_eof: bool, decompressor: &mut Decompressor, out: &mut [u8]) -> bool {
    let Ok(header) = parse_header(candidate) else {
        return false;
    };
    let size = header.block_size;
    if candidate.len() < size {
        return false;
    }
    let next = &candidate[size..];
    let next_ok = if next.is_empty() {
        at_eof
    } else {
        next.len() >= 18 && parse_header(next).is_ok()
            || (next.len() < 18 && !at_eof && next.starts_with(&[0x1f, 0x8b][..next.len().min(2)]))
    };
    if !next_ok {
        return false;
    }
    let block = &candidate[..size];
    let isize = stored_isize(block) as usize;
    isize <= BLOCK_MAX && inflate_block(decompressor, block, &mut out[..isize], 0).is_ok()
}

/// Compressed offset of the first verified block start at or after `offset` in a seekable file, or
/// `None` if there is none before the end of the file.
pub fn find_block_start_in<R: Read + Seek>(
    inner: &mut R,
    offset: u64,
) -> std::io::Result<Option<u64>> {
    let file_len = inner.seek(SeekFrom::End(0))?;
    let mut at = offset;
    while at < file_len {
        // A window of 3 maximal blocks holds a whole candidate block plus the next header.
        let want = (3 * BLOCK_MAX) as u64;
        inner.seek(SeekFrom::Start(at))?;
        let mut buf = Vec::with_capacity(want as usize);
        inner.by_ref().take(want).read_to_end(&mut buf)?;
        let at_eof = at + buf.len() as u64 >= file_len;
        let limit = if at_eof { buf.len() } else { BLOCK_MAX + 1 };
        if let Some(i) = find_block_start(&buf[..buf.len()], 0, at_eof).filter(|&i| i < limit) {
            return Ok(Some(at + i as u64));
        }
        if at_eof {
            break;
        }
        at += limit as u64;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompressionLevel, ParallelWriter, WriterOptions};
    use std::io::Write;

    #[test]
    fn finds_every_block_from_every_offset() {
        let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(2, CompressionLevel::samtools(1)),
        );
        w.write_all(&data).unwrap();
        let (bytes, log) = w.finish().unwrap();
        let starts = log.compressed_offsets();
        let mut cursor = std::io::Cursor::new(&bytes);
        for probe in (0..bytes.len() as u64).step_by(997) {
            let found = find_block_start_in(&mut cursor, probe).unwrap();
            let expected = starts.iter().copied().find(|&s| s >= probe);
            assert_eq!(found, expected, "probe {probe}");
        }
    }
}
