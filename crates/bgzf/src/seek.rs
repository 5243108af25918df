//! A single-threaded BGZF reader that seeks to virtual positions, for index queries that touch a few
//! blocks (region lookups). Streaming whole files goes through [`crate::ParallelReader`] instead.

use crate::block::{inflate_block, parse_header, stored_isize, BLOCK_MAX};
use crate::{BgzfError, VirtualPosition};
use libdeflater::Decompressor;
use std::io::{self, BufRead, Read, Seek, SeekFrom};

/// Reads BGZF data from a seekable source, one block at a time.
pub struct SeekReader<R> {
    inner: R,
    decompressor: Decompressor,
    compressed: Vec<u8>,
    data: Vec<u8>,
    /// Read position inside `data`.
    pos: usize,
    /// Compressed offset of the block in `data`.
    block_offset: u64,
    /// Compressed offset of the next block.
    next_offset: u64,
}

impl<R: Read + Seek> SeekReader<R> {
    /// Wraps `inner`, positioned at its start.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            decompressor: Decompressor::new(),
            compressed: Vec::with_capacity(BLOCK_MAX),
            data: Vec::with_capacity(BLOCK_MAX),
            pos: 0,
            block_offset: 0,
            next_offset: 0,
        }
    }

    /// Moves to a virtual position (compressed block offset << 16 | offset in the block's data).
    pub fn seek_virtual(&mut self, vpos: VirtualPosition) -> Result<(), BgzfError> {
        let (block, within) = (vpos >> 16, (vpos & 0xffff) as usize);
        self.inner.seek(SeekFrom::Start(block))?;
        self.next_offset = block;
        self.read_block()?;
        if within > self.data.len() {
            return Err(BgzfError::BadHeader {
                offset: block,
                reason: "virtual offset past the end of the block",
            });
        }
        self.pos = within;
        Ok(())
    }

    /// The virtual position of the next byte.
    pub fn virtual_position(&self) -> VirtualPosition {
        if self.pos == self.data.len() {
            self.next_offset << 16
        } else {
            (self.block_offset << 16) | self.pos as u64
        }
    }

    /// The virtual position of the next byte, in the block that holds it: a used-up block is
    /// replaced by the next non-empty one first, so a record starting at a block boundary gets the
    /// position `(next block << 16) | 0`, as index builders and the range planner give it. `None` at
    /// the end of the file.
    pub fn next_byte_position(&mut self) -> Result<Option<VirtualPosition>, BgzfError> {
        while self.pos == self.data.len() {
            if !self.read_block()? {
                return Ok(None);
            }
        }
        Ok(Some((self.block_offset << 16) | self.pos as u64))
    }

    /// Loads the next block; returns false at the end of the file.
    fn read_block(&mut self) -> Result<bool, BgzfError> {
        let offset = self.next_offset;
        self.compressed.resize(18, 0);
        let got = read_full(&mut self.inner, &mut self.compressed[..18])?;
        if got == 0 {
            self.data.clear();
            self.pos = 0;
            return Ok(false);
        }
        if got < 18 {
            return Err(BgzfError::Truncated {
                offset,
                expected: 18,
                found: got,
            });
        }
        let xlen = usize::from(u16::from_le_bytes([
            self.compressed[10],
            self.compressed[11],
        ]));
        if xlen > 6 {
            self.compressed.resize(12 + xlen, 0);
            let got = read_full(&mut self.inner, &mut self.compressed[18..])?;
            if got < xlen - 6 {
                return Err(BgzfError::Truncated {
                    offset,
                    expected: 12 + xlen,
                    found: 18 + got,
                });
            }
        }
        let header = parse_header(&self.compressed)
            .map_err(|reason| BgzfError::BadHeader { offset, reason })?;
        let have = self.compressed.len();
        self.compressed.resize(header.block_size, 0);
        let got = read_full(&mut self.inner, &mut self.compressed[have..])?;
        if have + got < header.block_size {
            return Err(BgzfError::Truncated {
                offset,
                expected: header.block_size,
                found: have + got,
            });
        }
        let isize = stored_isize(&self.compressed) as usize;
        if isize > BLOCK_MAX {
            return Err(BgzfError::BadHeader {
                offset,
                reason: "ISIZE larger than 65536",
            });
        }
        self.data.resize(isize, 0);
        inflate_block(
            &mut self.decompressor,
            &self.compressed,
            &mut self.data,
            offset,
        )?;
        self.block_offset = offset;
        self.next_offset = offset + header.block_size as u64;
        self.pos = 0;
        Ok(true)
    }
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read + Seek> Read for SeekReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let data = self.fill_buf()?;
        let n = buf.len().min(data.len());
        buf[..n].copy_from_slice(&data[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// The rest of the current block's data, so line readers see block by block without a copy and
/// [`SeekReader::next_byte_position`] tells where each line starts.
impl<R: Read + Seek> io::BufRead for SeekReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos == self.data.len() {
            if !self.read_block()? {
                return Ok(&[]);
            }
        }
        Ok(&self.data[self.pos..])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.data.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompressionLevel, ParallelWriter, WriterOptions};

    #[test]
    fn seek_to_positions_from_the_writer() {
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(2, CompressionLevel::samtools(1)),
        );
        let mut marks = Vec::new();
        for i in 0..20_000u32 {
            marks.push((w.position(), i));
            w.write_record(&i.to_le_bytes()).unwrap();
        }
        let (bytes, log) = w.finish().unwrap();
        let offsets = log.compressed_offsets();
        let mut r = SeekReader::new(std::io::Cursor::new(bytes));
        for &((block, within), i) in marks.iter().step_by(777) {
            r.seek_virtual(crate::virtual_position(offsets[block as usize], within))
                .unwrap();
            let mut b = [0u8; 4];
            r.read_exact(&mut b).unwrap();
            assert_eq!(u32::from_le_bytes(b), i);
        }
    }
}
