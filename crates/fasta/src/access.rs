//! Batch random access by uncompressed byte ranges, for `faidx` regions and `fetch` records.
//!
//! Requests are taken in windows of bounded total size. For each window the BGZF blocks the ranges
//! touch are found from the `.gzi`, each needed block is read and inflated exactly once (runs of
//! consecutive blocks are one `pread` and one job on the ordered pool), and the ranges are cut out and
//! handed back in request order. Memory is bounded by the window, whatever the number of requests.
//! Plain files are read with one `pread` per range.

use crate::scan::Compression;
use crate::FastaError;
use libdeflater::Decompressor;
use sortase_bgzf::gzi::GziEntry;
use sortase_bgzf::pool::ordered_pool;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Requested bytes gathered before blocks are read (bounds memory for request-order output).
pub const DEFAULT_WINDOW: u64 = 256 << 20;
/// Consecutive blocks read and inflated by one job.
const BLOCKS_PER_JOB: usize = 16;

/// A plain or bgzipped file opened for random access by uncompressed offset.
pub struct RandomAccess {
    file: Arc<File>,
    name: String,
    file_len: u64,
    /// BGZF: (compressed, uncompressed) start of every block, the first (0, 0) included.
    blocks: Option<Arc<Vec<(u64, u64)>>>,
    threads: usize,
    /// Inflate whole blocks and check their CRC32 even when only their head is needed.
    verify: bool,
}

struct Inflated {
    /// (block index, uncompressed start, data range in `data`)
    blocks: Vec<(usize, u64, std::ops::Range<usize>)>,
    data: Vec<u8>,
}

impl RandomAccess {
    /// Opens `file` (called `name` in errors); BGZF needs the `.gzi` entries.
    pub fn new(
        file: File,
        name: &str,
        compression: Compression,
        gzi: Option<&[GziEntry]>,
        threads: usize,
    ) -> Result<Self, FastaError> {
        let file_len = file.metadata()?.len();
        let blocks = match compression {
            Compression::None => None,
            Compression::Gzip => return Err(crate::scan::plain_gzip_error()),
            Compression::Bgzf => {
                let gzi = gzi.ok_or_else(|| {
                    FastaError::BadIndex(format!("{name}: a .gzi index is needed for BGZF input"))
                })?;
                let mut v = Vec::with_capacity(gzi.len() + 1);
                v.push((0, 0));
                for e in gzi {
                    let &(c, u) = v.last().expect("non-empty");
                    if e.compressed <= c || e.uncompressed < u || e.compressed >= file_len {
                        return Err(FastaError::BadIndex(format!(
                            "{name}: .gzi entry ({}, {}) is out of order or past the end of the file",
                            e.compressed, e.uncompressed
                        )));
                    }
                    v.push((e.compressed, e.uncompressed));
                }
                Some(Arc::new(v))
            }
        };
        Ok(Self {
            file: Arc::new(file),
            name: name.to_string(),
            file_len,
            blocks,
            threads: threads.max(1),
            verify: false,
        })
    }

    /// Inflates every block it reads to its end and checks its CRC32. Without this (the default) a
    /// block is inflated only up to the last byte a range needs, which halves the inflate work of
    /// random retrieval but checks the CRC32 only of blocks read to their end (see
    /// [`sortase_bgzf::inflate_block_prefix`]).
    pub fn verify_whole_blocks(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }

    /// Length of the uncompressed data (BGZF: the last indexed block's start plus the ISIZE of every
    /// block from there to the end of the file).
    pub fn data_len(&self) -> Result<u64, FastaError> {
        let Some(blocks) = &self.blocks else {
            return Ok(self.file_len);
        };
        let &(c, u) = blocks.last().expect("the first block is always there");
        let mut tail = vec![0u8; (self.file_len - c) as usize];
        self.file.read_exact_at(&mut tail, c)?;
        let (mut at, mut total) = (0usize, u);
        while at < tail.len() {
            let offset = c + at as u64;
            let header = sortase_bgzf::parse_header(&tail[at..])
                .map_err(|reason| sortase_bgzf::BgzfError::BadHeader { offset, reason })?;
            let end = at + header.block_size;
            if end > tail.len() {
                return Err(sortase_bgzf::BgzfError::Truncated {
                    offset,
                    expected: header.block_size,
                    found: tail.len() - at,
                }
                .into());
            }
            total += u64::from(u32::from_le_bytes(
                tail[end - 4..end].try_into().expect("4 bytes"),
            ));
            at = end;
        }
        Ok(total)
    }

    /// Calls `emit(i, bytes)` for every range `i` (offset, length), in order. A range past the end of
    /// the data is an error (nothing of it is emitted).
    pub fn fetch(
        &self,
        ranges: &[(u64, u64)],
        window: u64,
        mut emit: impl FnMut(usize, &[u8]) -> Result<(), FastaError>,
    ) -> Result<(), FastaError> {
        let mut at = 0;
        while at < ranges.len() {
            let mut end = at;
            let mut bytes = 0u64;
            while end < ranges.len() && (end == at || bytes + ranges[end].1 <= window) {
                bytes += ranges[end].1;
                end += 1;
            }
            let bufs = match &self.blocks {
                None => self.read_plain(&ranges[at..end])?,
                Some(blocks) => self.read_bgzf(blocks, &ranges[at..end])?,
            };
            for (i, buf) in bufs.iter().enumerate() {
                emit(at + i, buf)?;
            }
            at = end;
        }
        Ok(())
    }

    fn past_end(&self, offset: u64, len: u64, data_len: u64) -> FastaError {
        let _ = &self.name;
        FastaError::PastEnd {
            offset,
            end: offset + len,
            len: data_len,
        }
    }

    fn read_plain(&self, ranges: &[(u64, u64)]) -> Result<Vec<Vec<u8>>, FastaError> {
        let mut out = Vec::with_capacity(ranges.len());
        for &(off, len) in ranges {
            if off.checked_add(len).is_none_or(|e| e > self.file_len) {
                return Err(self.past_end(off, len, self.file_len));
            }
            let mut buf = vec![0; len as usize];
            self.file.read_exact_at(&mut buf, off)?;
            out.push(buf);
        }
        Ok(out)
    }

    fn read_bgzf(
        &self,
        blocks: &Arc<Vec<(u64, u64)>>,
        ranges: &[(u64, u64)],
    ) -> Result<Vec<Vec<u8>>, FastaError> {
        let (pairs, jobs) = self.block_jobs(blocks, ranges)?;
        let mut out: Vec<Vec<u8>> = ranges
            .iter()
            .map(|r| Vec::with_capacity(r.1 as usize))
            .collect();
        let (submitter, collector) = {
            let (file, blocks, file_len) = (self.file.clone(), blocks.clone(), self.file_len);
            ordered_pool(self.threads, 2 * self.threads + 2, move || {
                let (file, blocks) = (file.clone(), blocks.clone());
                let mut d = Decompressor::new();
                move |job: Vec<(usize, u64)>| inflate_run(&file, &blocks, file_len, &job, &mut d)
            })
        };
        let feeder = std::thread::spawn(move || {
            for job in jobs {
                if submitter.submit(job).is_err() {
                    break;
                }
            }
        });
        let mut p = 0;
        let mut failure = None;
        for result in collector {
            match result {
                Ok(inflated) => scatter(&inflated, &pairs, ranges, &mut out, &mut p),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let _ = feeder.join();
        if let Some(e) = failure {
            return Err(e);
        }
        for (r, buf) in out.iter().enumerate() {
            let (off, len) = ranges[r];
            if buf.len() as u64 != len {
                return Err(self.past_end(off, len, off + buf.len() as u64));
            }
        }
        Ok(out)
    }

    /// The (block, range) pairs sorted by block (which ranges each inflated block feeds), and the
    /// runs of consecutive blocks to inflate, each block with the bytes needed from its start.
    #[allow(clippy::type_complexity)]
    fn block_jobs(
        &self,
        blocks: &[(u64, u64)],
        ranges: &[(u64, u64)],
    ) -> Result<(Vec<(usize, usize)>, Vec<Vec<(usize, u64)>>), FastaError> {
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for (r, &(off, len)) in ranges.iter().enumerate() {
            if len == 0 {
                continue;
            }
            let end = off
                .checked_add(len)
                .ok_or_else(|| self.past_end(off, len, 0))?;
            let first = blocks.partition_point(|b| b.1 <= off).saturating_sub(1);
            let last = blocks.partition_point(|b| b.1 < end).saturating_sub(1);
            pairs.extend((first..=last).map(|b| (b, r)));
        }
        pairs.sort_unstable();
        // (block, bytes of it needed from its start): the furthest end of a range inside it.
        let mut needed: Vec<(usize, u64)> = Vec::new();
        for &(b, r) in &pairs {
            let (off, len) = ranges[r];
            let need = (off + len).saturating_sub(blocks[b].1);
            match needed.last_mut() {
                Some(last) if last.0 == b => last.1 = last.1.max(need),
                _ => needed.push((b, need)),
            }
        }
        let full = self.verify;
        let mut jobs: Vec<Vec<(usize, u64)>> = Vec::new();
        for (b, need) in needed {
            let need = if full { u64::MAX } else { need };
            match jobs.last_mut() {
                Some(j) if j.len() < BLOCKS_PER_JOB && j.last().expect("non-empty").0 + 1 == b => {
                    j.push((b, need))
                }
                _ => jobs.push(vec![(b, need)]),
            }
        }
        Ok((pairs, jobs))
    }
}

/// Appends the bytes of the `inflated` blocks to the ranges they feed (`pairs` from `p` on: the
/// (block, range) pairs, sorted by block; `p` moves past the blocks done).
fn scatter(
    inflated: &Inflated,
    pairs: &[(usize, usize)],
    ranges: &[(u64, u64)],
    out: &mut [Vec<u8>],
    p: &mut usize,
) {
    for (b, ustart, range) in &inflated.blocks {
        let data = &inflated.data[range.clone()];
        while *p < pairs.len() && pairs[*p].0 < *b {
            *p += 1;
        }
        let mut q = *p;
        while q < pairs.len() && pairs[q].0 == *b {
            let r = pairs[q].1;
            let (off, len) = ranges[r];
            let lo = off.max(*ustart);
            let hi = (off + len).min(ustart + data.len() as u64);
            // Blocks of a range come in order, so appending keeps its bytes in order.
            if lo < hi && off + out[r].len() as u64 == lo {
                out[r].extend_from_slice(&data[(lo - ustart) as usize..(hi - ustart) as usize]);
            }
            q += 1;
        }
    }
}

/// Reads a run of consecutive blocks with one `pread` and inflates each up to the bytes needed of it
/// (`u64::MAX`: all of it, CRC32 checked).
fn inflate_run(
    file: &File,
    blocks: &[(u64, u64)],
    file_len: u64,
    job: &[(usize, u64)],
    d: &mut Decompressor,
) -> Result<Inflated, FastaError> {
    let (first, last) = (job[0].0, job[job.len() - 1].0);
    let cstart = blocks[first].0;
    let cend = blocks.get(last + 1).map_or(file_len, |b| b.0);
    let mut comp = vec![0u8; (cend - cstart) as usize];
    file.read_exact_at(&mut comp, cstart)?;
    let mut out = Inflated {
        blocks: Vec::with_capacity(job.len()),
        data: Vec::with_capacity(job.len() * 0x10000),
    };
    let mut at = 0usize;
    for &(b, need) in job {
        let coffset = cstart + at as u64;
        if coffset != blocks[b].0 {
            return Err(FastaError::BadIndex(format!(
                ".gzi does not match the file: block {b} expected at byte {}, found at {coffset}",
                blocks[b].0
            )));
        }
        let rest = &comp[at..];
        let header = sortase_bgzf::parse_header(rest).map_err(|reason| {
            sortase_bgzf::BgzfError::BadHeader {
                offset: coffset,
                reason,
            }
        })?;
        if rest.len() < header.block_size {
            return Err(sortase_bgzf::BgzfError::Truncated {
                offset: coffset,
                expected: header.block_size,
                found: rest.len(),
            }
            .into());
        }
        let block = &rest[..header.block_size];
        let n = block.len();
        let isize =
            u32::from_le_bytes([block[n - 4], block[n - 3], block[n - 2], block[n - 1]]) as usize;
        if isize > sortase_bgzf::BLOCK_MAX {
            return Err(sortase_bgzf::BgzfError::BadHeader {
                offset: coffset,
                reason: "ISIZE larger than 65536",
            }
            .into());
        }
        if let Some(next) = blocks.get(b + 1) {
            if next.1 != blocks[b].1 + isize as u64 {
                return Err(FastaError::BadIndex(format!(
                    ".gzi does not match the file: block at byte {coffset} holds {isize} bytes, index says {}",
                    next.1 - blocks[b].1
                )));
            }
        }
        let start = out.data.len();
        out.data.resize(start + isize, 0);
        let need = usize::try_from(need).unwrap_or(usize::MAX).min(isize);
        sortase_bgzf::inflate_block_prefix(d, block, &mut out.data[start..], need, coffset)?;
        out.data.truncate(start + need);
        out.blocks.push((b, blocks[b].1, start..start + need));
        at += header.block_size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
    use std::io::Write;

    #[test]
    fn ranges_across_blocks_in_request_order() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(2, CompressionLevel::samtools(1)),
        );
        w.write_all(&data).unwrap();
        let (gz, log) = w.finish().unwrap();
        let gzi = sortase_bgzf::gzi::GziIndex::from_block_log(&log);
        let dir = std::env::temp_dir().join(format!("sortase-fasta-access-{}", std::process::id()));
        std::fs::write(&dir, &gz).unwrap();
        let ra = RandomAccess::new(
            File::open(&dir).unwrap(),
            "t",
            Compression::Bgzf,
            Some(gzi.entries()),
            2,
        )
        .unwrap();
        let ranges = [
            (299_990, 10),
            (0, 5),
            (65_270, 20),
            (65_270, 20),
            (100, 0),
            (1000, 200_000),
        ];
        let mut got = Vec::new();
        ra.fetch(&ranges, 150_000, |i, b| {
            got.push((i, b.to_vec()));
            Ok(())
        })
        .unwrap();
        for (i, b) in got {
            let (o, l) = ranges[i];
            assert_eq!(b, &data[o as usize..(o + l) as usize], "range {i}");
        }
        assert!(ra.fetch(&[(299_995, 10)], 1 << 20, |_, _| Ok(())).is_err());
        std::fs::remove_file(&dir).unwrap();
    }
}
