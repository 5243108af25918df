//! The containers of a CRAM file, from their headers alone (CRAM spec §7 and §8): a container header
//! gives the container's byte length and record count, so a scan that reads only the headers (a few
//! dozen bytes per container, each about a megabyte long) splits a file into runs of whole containers
//! that decode independently.

use sortase_bam::BamError;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// A run of consecutive containers: where the first one starts, how many bytes the run covers and
/// how many records its containers hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerRange {
    /// File offset of the first container's header.
    pub offset: u64,
    /// Bytes from `offset` to the end of the last container.
    pub bytes: u64,
    /// Records in the run's containers.
    pub records: u64,
}

fn bad(path: &Path, what: &str) -> BamError {
    BamError::Cram(format!("{}: {what}", path.display()))
}

/// Reads an ITF-8 integer (CRAM spec §2.3): the count of leading 1 bits of the first byte says how
/// many bytes follow.
fn itf8(r: &mut impl Read) -> std::io::Result<i32> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    let first = u32::from(b[0]);
    let extra = (first as u8).leading_ones().min(4) as usize;
    let mut rest = [0u8; 4];
    r.read_exact(&mut rest[..extra])?;
    let v = match extra {
        0 => first,
        1 => (first & 0x3f) << 8 | u32::from(rest[0]),
        2 => (first & 0x1f) << 16 | u32::from(rest[0]) << 8 | u32::from(rest[1]),
        3 => {
            (first & 0x0f) << 24
                | u32::from(rest[0]) << 16
                | u32::from(rest[1]) << 8
                | u32::from(rest[2])
        }
        _ => {
            (first & 0x0f) << 28
                | u32::from(rest[0]) << 20
                | u32::from(rest[1]) << 12
                | u32::from(rest[2]) << 4
                | u32::from(rest[3]) & 0x0f
        }
    };
    Ok(v as i32)
}

/// Skips an LTF-8 integer (CRAM spec §2.4): up to 8 more bytes, counted by the leading 1 bits.
fn skip_ltf8(r: &mut impl Read) -> std::io::Result<()> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    let extra = b[0].leading_ones() as usize;
    let mut rest = [0u8; 8];
    r.read_exact(&mut rest[..extra])
}

/// One container header: `(header bytes, data bytes, records)`.
fn container_header(r: &mut impl Read, major: u8) -> std::io::Result<(u64, u64, u64)> {
    /// Counts the bytes a header reader consumes.
    struct Counted<'a, R> {
        inner: &'a mut R,
        n: u64,
    }
    impl<R: Read> Read for Counted<'_, R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.n += n as u64;
            Ok(n)
        }
    }
    let mut c = Counted { inner: r, n: 0 };
    let mut len = [0u8; 4];
    c.read_exact(&mut len)?;
    let length = i32::from_le_bytes(len);
    itf8(&mut c)?; // reference sequence id
    itf8(&mut c)?; // alignment start
    itf8(&mut c)?; // alignment span
    let records = itf8(&mut c)?;
    if major >= 3 {
        skip_ltf8(&mut c)?; // record counter
        skip_ltf8(&mut c)?; // bases
    } else {
        itf8(&mut c)?;
        itf8(&mut c)?;
    }
    itf8(&mut c)?; // blocks
    let landmarks = itf8(&mut c)?;
    for _ in 0..landmarks.max(0) {
        itf8(&mut c)?;
    }
    if major >= 3 {
        let mut crc = [0u8; 4];
        c.read_exact(&mut crc)?;
    }
    if length < 0 || records < 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "negative container length or record count",
        ));
    }
    Ok((c.n, length as u64, records as u64))
}

/// A CRAM file cut into runs of whole containers ([`scan_containers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    /// File offset just past the header container: a reader of a run reads the file definition
    /// and the header container (bytes `0..header_end`), then the run's bytes.
    pub header_end: u64,
    /// The runs, in file order.
    pub ranges: Vec<ContainerRange>,
}

/// The record-bearing containers of the CRAM file at `path` (the header container and the EOF
/// container hold no records and are left out), cut into about `n` runs of about equal bytes.
/// A file with no records gives no runs.
pub fn plan_container_ranges(path: &Path, n: usize) -> Result<Vec<ContainerRange>, BamError> {
    scan_containers(path, n).map(|plan| plan.ranges)
}

/// As [`plan_container_ranges`], with where the header container ends.
pub fn scan_containers(path: &Path, n: usize) -> Result<ContainerPlan, BamError> {
    let file = std::fs::File::open(path).map_err(BamError::Io)?;
    let size = file.metadata().map_err(BamError::Io)?.len();
    let mut r = std::io::BufReader::with_capacity(4096, file);
    // File definition (§6): "CRAM", major, minor, 20-byte file id.
    let mut def = [0u8; 26];
    r.read_exact(&mut def)
        .map_err(|_| bad(path, "too short for CRAM"))?;
    if &def[..4] != b"CRAM" {
        return Err(bad(path, "not a CRAM file"));
    }
    let major = def[4];
    let mut containers = Vec::new();
    let mut at = 26u64;
    let mut header_end = None;
    while at < size {
        let (head, data, records) =
            container_header(&mut r, major).map_err(|_| bad(path, "truncated container header"))?;
        let end = at + head + data;
        if end > size {
            return Err(bad(path, "container runs past the end of the file"));
        }
        // The first container holds the SAM header (§7.1).
        header_end.get_or_insert(end);
        if records > 0 {
            containers.push((at, end - at, records));
        }
        r.seek(SeekFrom::Start(end)).map_err(BamError::Io)?;
        at = end;
    }
    let total: u64 = containers.iter().map(|c| c.1).sum();
    let target = total.div_ceil(n.max(1) as u64).max(1);
    let mut ranges: Vec<ContainerRange> = Vec::new();
    for (offset, bytes, records) in containers {
        match ranges.last_mut() {
            Some(last) if last.bytes < target && last.offset + last.bytes == offset => {
                last.bytes += bytes;
                last.records += records;
            }
            _ => ranges.push(ContainerRange {
                offset,
                bytes,
                records,
            }),
        }
    }
    Ok(ContainerPlan {
        header_end: header_end.unwrap_or(at),
        ranges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itf8_reads_every_length() {
        let cases: [(&[u8], i32); 5] = [
            (&[0x05], 5),
            (&[0x81, 0x02], 0x102),
            (&[0xc1, 0x02, 0x03], 0x10203),
            (&[0xe1, 0x02, 0x03, 0x04], 0x1020304),
            (&[0xff, 0xff, 0xff, 0xff, 0x0f], -1),
        ];
        for (bytes, want) in cases {
            assert_eq!(itf8(&mut &bytes[..]).unwrap(), want, "{bytes:x?}");
        }
    }
}
