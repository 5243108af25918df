//! Region queries on an indexed BAM (BAI or CSI through noodles), yielding the overlapping records as
//! htslib's iterator does: a record overlaps `[beg, end)` when `pos < end` and its end position (htslib
//! `bam_endpos`: `pos + 1` for unmapped or reference-free records) is past `beg`.

use crate::{BamError, Header, RecordBatch, RecordRef};
use noodles::core::Position;
use noodles::csi::BinningIndex;
use sortase_bgzf::SeekReader;
use sortase_io::Source;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// A genomic region in 0-based half-open coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Reference index.
    pub tid: usize,
    /// 0-based start.
    pub beg: i64,
    /// Exclusive end.
    pub end: i64,
}

fn parse_pos(s: &str) -> Option<i64> {
    let digits: String = s.chars().filter(|&c| c != ',').collect();
    digits.parse::<i64>().ok()
}

/// Parses a region as htslib's `hts_parse_region` does: `name`, `name:beg`, `name:beg-end` (1-based,
/// inclusive, commas allowed), `{name}` or `{name}:beg-end` for names with colons. A string that is both a
/// reference name and `name:range` of another reference is ambiguous and refused.
///
/// ```
/// let h = sortase_bam::Header::from_sam_text("@SQ\tSN:chr1\tLN:1000\n".into()).unwrap();
/// let r = sortase_bam::query::parse_region("chr1:1,001-2000", &h).unwrap();
/// assert_eq!((r.tid, r.beg, r.end), (0, 1000, 2000));
/// ```
pub fn parse_region(s: &str, header: &Header) -> Result<Region, String> {
    let unknown = || "specifies an unknown reference name".to_string();
    if let Some(rest) = s.strip_prefix('{') {
        let (name, after) = rest.split_once('}').ok_or("has an unclosed '{'")?;
        let tid = header.reference_id(name.as_bytes()).ok_or_else(unknown)?;
        return match after.strip_prefix(':') {
            None if after.is_empty() => Ok(Region {
                tid,
                beg: 0,
                end: i64::MAX,
            }),
            Some(range) => parse_range(range).map(|(beg, end)| Region { tid, beg, end }),
            None => Err("has text after '}'".into()),
        };
    }
    let whole = header.reference_id(s.as_bytes());
    let split = s.rsplit_once(':').and_then(|(name, range)| {
        let tid = header.reference_id(name.as_bytes())?;
        parse_range(range)
            .ok()
            .map(|(beg, end)| Region { tid, beg, end })
    });
    match (whole, split) {
        (Some(_), Some(_)) => Err(format!(
            "is ambiguous: use {{{s}}} or {{{}}}:{}",
            s.rsplit_once(':').map_or("", |p| p.0),
            s.rsplit_once(':').map_or("", |p| p.1)
        )),
        (Some(tid), None) => Ok(Region {
            tid,
            beg: 0,
            end: i64::MAX,
        }),
        (None, Some(r)) => Ok(r),
        (None, None) => Err("specifies an invalid region or unknown reference".into()),
    }
}

fn parse_range(range: &str) -> Result<(i64, i64), String> {
    let bad = || format!("has an invalid range {range:?}");
    let (beg, end) = match range.split_once('-') {
        Some((b, "")) => (parse_pos(b).ok_or_else(bad)?, i64::MAX),
        Some((b, e)) => (parse_pos(b).ok_or_else(bad)?, parse_pos(e).ok_or_else(bad)?),
        None => (parse_pos(range).ok_or_else(bad)?, i64::MAX),
    };
    let beg = (beg - 1).max(0);
    if end <= beg {
        return Err(bad());
    }
    Ok((beg, end))
}

/// Finds the index of `bam`: `bam.bai`, `bam`-without-`.bam` + `.bai`, `bam.csi` (next to a
/// remote object too: one metadata request per candidate).
pub fn find_index(bam: &Path) -> Option<PathBuf> {
    let s = bam.as_os_str().to_string_lossy();
    let mut candidates = vec![format!("{s}.bai")];
    if let Some(stem) = s.strip_suffix(".bam") {
        candidates.push(format!("{stem}.bai"));
    }
    candidates.push(format!("{s}.csi"));
    candidates
        .into_iter()
        .find(|p| sortase_io::exists(p))
        .map(PathBuf::from)
}

/// Reads the BAI or CSI index at `path` (a file or a URL; CSI by its `.csi` extension).
pub fn read_index(path: &Path) -> std::io::Result<Box<dyn BinningIndex + Send>> {
    let source = Source::open_path(path)?;
    Ok(if path.extension().is_some_and(|e| e == "csi") {
        Box::new(noodles::csi::io::Reader::new(source).read_index()?)
    } else {
        Box::new(noodles::bam::bai::io::Reader::new(BufReader::new(source)).read_index()?)
    })
}

/// An indexed BAM open for queries.
pub struct IndexedBam {
    index: Box<dyn BinningIndex + Send>,
    reader: SeekReader<BufReader<Source>>,
}

impl IndexedBam {
    /// Opens `bam` and its index.
    pub fn open(bam: &Path) -> Result<Self, BamError> {
        let index_path = find_index(bam).ok_or_else(|| {
            BamError::Header(
                "no index (.bai or .csi) found; create one with `samtools index`".into(),
            )
        })?;
        Self::open_with_index(bam, &index_path)
    }

    /// Opens `bam` (a file or a URL) with the index at `index_path`.
    pub fn open_with_index(bam: &Path, index_path: &Path) -> Result<Self, BamError> {
        let index = read_index(index_path)?;
        let reader = SeekReader::new(BufReader::new(Source::open_path(bam)?));
        Ok(Self { index, reader })
    }

    /// Reads the BAM header (seeks to the start of the file).
    pub fn read_header(&mut self) -> Result<Header, BamError> {
        self.reader.seek_virtual(0)?;
        Header::read_bam(&mut self.reader)
    }

    /// Compressed offset of the BGZF block the header ends in (reads the header): a reader of the
    /// header touches nothing past that block (and the blocks a record spanning it needs).
    pub fn header_end(&mut self) -> Result<u64, BamError> {
        self.read_header()?;
        Ok(self.reader.virtual_position() >> 16)
    }

    /// Compressed spans `[start, end)` of the index chunks holding the records of `tid` that
    /// overlap `[beg, end)` (`end` `i64::MAX`: to the end of the reference): the blocks a
    /// [`IndexedBam::query`] of that region reads, up to the block holding the first record at or
    /// past `end` (it starts at or after a span's end; a reader stops at it).
    pub fn chunk_spans(&self, tid: usize, beg: i64, end: i64) -> Result<Vec<(u64, u64)>, BamError> {
        let position =
            |p: i64| Position::try_from(p as usize).map_err(|e| BamError::Header(e.to_string()));
        let start = position(beg.max(0) + 1)?;
        let chunks = if end == i64::MAX {
            self.index.query(tid, (start..).into())?
        } else {
            // 1-based, inclusive: the region's last base.
            let last = position(end.max(beg.max(0) + 1))?;
            self.index.query(tid, (start..=last).into())?
        };
        Ok(chunks
            .iter()
            .map(|c| (u64::from(c.start()) >> 16, u64::from(c.end()) >> 16))
            .collect())
    }

    /// Compressed file offset of the first index chunk holding records that overlap `tid` from `pos`
    /// on: where a query from `pos` starts reading. `None` when no record of `tid` ends past `pos`.
    pub fn compressed_offset_at(&self, tid: usize, pos: i64) -> Result<Option<u64>, BamError> {
        let start = Position::try_from((pos.max(0) + 1) as usize)
            .map_err(|e| BamError::Header(e.to_string()))?;
        let chunks = self.index.query(tid, (start..).into())?;
        Ok(chunks.iter().map(|c| u64::from(c.start()) >> 16).min())
    }

    /// Compressed byte span `[first chunk start, last chunk end)` of the records placed on `tid`.
    pub fn compressed_span(&self, tid: usize) -> Result<Option<(u64, u64)>, BamError> {
        let chunks = self.index.query(tid, (Position::MIN..).into())?;
        let start = chunks.iter().map(|c| u64::from(c.start()) >> 16).min();
        let end = chunks.iter().map(|c| u64::from(c.end()) >> 16).max();
        Ok(start.zip(end))
    }

    /// Collects the unplaced records (samtools region `*`): those after the last placed record.
    pub fn query_unplaced(&mut self) -> Result<RecordBatch, BamError> {
        let start = self.index.last_first_record_start_position().map(u64::from);
        match start {
            Some(v) => self.reader.seek_virtual(v)?,
            None => return Ok(RecordBatch::default()),
        }
        let mut out = BatchBuilder::default();
        let mut record = Vec::new();
        while self.read_record(&mut record)? {
            if RecordRef::new_unchecked(&record[4..]).reference_sequence_id() < 0 {
                out.push(&record);
            }
        }
        Ok(out.finish())
    }

    /// Reads the next record (with its `block_size`) into `record`; false at the end of the file.
    fn read_record(&mut self, record: &mut Vec<u8>) -> Result<bool, BamError> {
        let at = self.reader.virtual_position();
        record.resize(4, 0);
        if read_full(&mut self.reader, &mut record[..4])? < 4 {
            return Ok(false);
        }
        let block_size = u32::from_le_bytes([record[0], record[1], record[2], record[3]]) as usize;
        crate::check_block_size(block_size, at)?;
        if read_body(&mut self.reader, record, block_size)? < block_size {
            return Err(BamError::Truncated {
                offset: at,
                block_size: block_size as u64,
                available: 0,
            });
        }
        RecordRef::new(&record[4..]).map_err(|reason| BamError::record(at, reason))?;
        Ok(true)
    }

    /// Collects the records overlapping `region`, in file order.
    pub fn query(&mut self, region: Region) -> Result<RecordBatch, BamError> {
        self.query_into(region, Vec::new())
    }

    /// [`IndexedBam::query`] into `buffer`'s allocation (cleared first), e.g. the
    /// [`RecordBatch::into_buffer`] of an earlier query: records are read straight into it.
    pub fn query_into(
        &mut self,
        region: Region,
        mut buffer: Vec<u8>,
    ) -> Result<RecordBatch, BamError> {
        let start = Position::try_from((region.beg + 1) as usize)
            .map_err(|e| BamError::Header(e.to_string()))?;
        let chunks = self.index.query(region.tid, (start..).into())?;
        buffer.clear();
        let mut out = BatchBuilder {
            buf: buffer,
            offsets: Vec::new(),
        };
        for chunk in chunks {
            self.reader.seek_virtual(u64::from(chunk.start()))?;
            while self.reader.virtual_position() < u64::from(chunk.end()) {
                let at = out.buf.len();
                if !self.read_record_appending(&mut out.buf)? {
                    break;
                }
                let r = RecordRef::new_unchecked(&out.buf[at + 4..]);
                let (tid, pos) = (r.reference_sequence_id(), i64::from(r.position()));
                if tid < 0
                    || tid > region.tid as i32
                    || (tid == region.tid as i32 && pos >= region.end)
                {
                    out.buf.truncate(at);
                    break; // sorted input: nothing further in this chunk can overlap
                }
                if tid == region.tid as i32 && r.end_position() > region.beg {
                    out.offsets.push(at as u32);
                } else {
                    out.buf.truncate(at);
                }
            }
        }
        Ok(out.finish())
    }

    /// Reads the next record (with its `block_size`) onto the end of `buf`; false at the end of the file.
    fn read_record_appending(&mut self, buf: &mut Vec<u8>) -> Result<bool, BamError> {
        let at = self.reader.virtual_position();
        let start = buf.len();
        buf.resize(start + 4, 0);
        if read_full(&mut self.reader, &mut buf[start..])? < 4 {
            buf.truncate(start);
            return Ok(false);
        }
        let b = &buf[start..];
        let block_size = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        crate::check_block_size(block_size, at)?;
        if read_body(&mut self.reader, buf, block_size)? < block_size {
            return Err(BamError::Truncated {
                offset: at,
                block_size: block_size as u64,
                available: 0,
            });
        }
        RecordRef::new(&buf[start + 4..]).map_err(|reason| BamError::record(at, reason))?;
        Ok(true)
    }
}

/// Records appended one by one into a [`RecordBatch`].
#[derive(Default)]
struct BatchBuilder {
    buf: Vec<u8>,
    offsets: Vec<u32>,
}

impl BatchBuilder {
    fn push(&mut self, record_with_size: &[u8]) {
        self.offsets.push(self.buf.len() as u32);
        self.buf.extend_from_slice(record_with_size);
    }

    fn finish(self) -> RecordBatch {
        let end = self.buf.len();
        RecordBatch::from_parts(self.buf, self.offsets, end, 0)
    }
}

/// Appends a record body of `block_size` bytes to `buf`; returns how many were there. Up to 1 MiB
/// the buffer is sized at once; a larger claim grows with the bytes really read, so a truncated or
/// hostile `block_size` allocates no more than the file holds.
fn read_body<R: Read>(r: &mut R, buf: &mut Vec<u8>, block_size: usize) -> std::io::Result<usize> {
    let start = buf.len();
    if block_size <= 1 << 20 {
        buf.resize(start + block_size, 0);
        let n = read_full(r, &mut buf[start..])?;
        buf.truncate(start + n);
        return Ok(n);
    }
    r.take(block_size as u64).read_to_end(buf)
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_forms() {
        let h =
            Header::from_sam_text("@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:HLA:1\tLN:50\n".into()).unwrap();
        let whole = |tid| {
            Ok(Region {
                tid,
                beg: 0,
                end: i64::MAX,
            })
        };
        assert_eq!(parse_region("chr1", &h), whole(0));
        assert_eq!(
            parse_region("chr1:5", &h),
            Ok(Region {
                tid: 0,
                beg: 4,
                end: i64::MAX
            })
        );
        assert_eq!(parse_region("HLA:1", &h), whole(1));
        assert_eq!(
            parse_region("HLA:1:2-3", &h),
            Ok(Region {
                tid: 1,
                beg: 1,
                end: 3
            })
        );
        assert_eq!(
            parse_region("{HLA:1}:2-3", &h),
            Ok(Region {
                tid: 1,
                beg: 1,
                end: 3
            })
        );
        assert!(parse_region("chrZ", &h).is_err());
    }
}
