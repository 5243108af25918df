//! SAM text → header and batches of raw BAM records.

use crate::{sam_parse, BamError, Header, RecordBatch};
use std::io::BufRead;

/// Reads SAM text (plain or from a decompressed stream).
pub struct SamReader<R> {
    inner: R,
    line: Vec<u8>,
    line_no: u64,
    /// A record line read while looking for the end of the header.
    pending: bool,
}

impl<R: BufRead> SamReader<R> {
    /// Reads the header lines (those starting with `@` at the top of the file).
    pub fn new(mut inner: R) -> Result<(Header, Self), BamError> {
        let mut text = String::new();
        let mut line = Vec::new();
        let mut line_no = 0;
        let mut pending = false;
        loop {
            line.clear();
            if inner.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            line_no += 1;
            if line.first() != Some(&b'@') {
                pending = true;
                break;
            }
            let s = std::str::from_utf8(&line).map_err(|_| BamError::Sam {
                line: line_no,
                reason: "header line is not UTF-8".into(),
            })?;
            text.push_str(s.trim_end_matches(['\n', '\r']));
            text.push('\n');
        }
        let header = Header::from_sam_text(text)?;
        Ok((
            header,
            Self {
                inner,
                line,
                line_no,
                pending,
            },
        ))
    }

    /// Parses records until about `target_bytes` of BAM data are collected.
    pub fn next_batch(
        &mut self,
        header: &Header,
        target_bytes: usize,
    ) -> Result<Option<RecordBatch>, BamError> {
        let mut buf = Vec::with_capacity(target_bytes + 1024);
        let mut offsets = Vec::new();
        while buf.len() < target_bytes {
            if !self.pending {
                self.line.clear();
                if self.inner.read_until(b'\n', &mut self.line)? == 0 {
                    break;
                }
                self.line_no += 1;
            }
            self.pending = false;
            let mut l = &self.line[..];
            while let Some((b'\n' | b'\r', rest)) = l.split_last() {
                l = rest;
            }
            if l.is_empty() {
                continue;
            }
            offsets.push(buf.len() as u32);
            sam_parse::parse_record(l, header, &mut buf).map_err(|reason| BamError::Sam {
                line: self.line_no,
                reason,
            })?;
        }
        if offsets.is_empty() {
            return Ok(None);
        }
        let end = buf.len();
        Ok(Some(RecordBatch::from_parts(buf, offsets, end, 0)))
    }
}
