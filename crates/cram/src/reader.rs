//! [`CramReader`]: a whole CRAM stream (or a run of containers) as batches of raw BAM records.

use crate::handles::*;
use crate::{bam1_to_raw, missing, ContainerRange, Core, ReadOptions};
use sortase_bam::{BamError, Header, RecordBatch};
use sortase_htslib as hts;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// Reads a whole CRAM stream as our header plus batches of raw BAM records (with `block_size`).
pub struct CramReader {
    file: HtsFile,
    header: HtsHeader,
    ours: Header,
    record: Bam1,
    reference: Option<PathBuf>,
    feeder: Option<JoinHandle<std::io::Result<()>>>,
    /// For a reader of a [`ContainerRange`]: the records it holds, read and then stopped at.
    limit: Option<u64>,
}

impl CramReader {
    /// Reads CRAM from `inner` (the whole stream, from its first byte).
    pub fn new(
        inner: Box<dyn Read + Send>,
        options: &ReadOptions,
    ) -> Result<(Header, Self), BamError> {
        quiet_htslib();
        let (ours_end, hts_end) = socket_pair()?;
        let feeder = std::thread::Builder::new()
            .name("cram-feed".into())
            .spawn(move || feed(inner, ours_end))
            .map_err(BamError::Io)?;
        let mut file = HtsFile::on_fd(hts_end, "rc")?;
        let header = file.read_header(options)?;
        Self::with_header(file, header, options, Some(feeder), None)
    }

    /// Reads the records of `range` (from [`plan_container_ranges`]) of the CRAM file at `path`:
    /// the file is opened by htslib itself and positioned at the range's first container, so
    /// several readers decode different ranges of one file at the same time, each on its own thread
    /// (`options.threads` adds htslib's pool to each).
    pub fn open_range(
        path: &Path,
        options: &ReadOptions,
        range: &ContainerRange,
    ) -> Result<(Header, Self), BamError> {
        quiet_htslib();
        let mut file = HtsFile::open_path(path)?;
        let header = file.read_header(options)?;
        let offset = libc::off_t::try_from(range.offset)
            .map_err(|_| cram_err("container offset out of range"))?;
        // SAFETY: a CRAM htsFile holds a cram_fd; no record has been read yet, so no container is
        // held in the decoder and seeking only moves the stream (cram_io.c, cram_seek).
        let r =
            unsafe { hts::cram_seek(hts::sortase_hts_cram_fd(file.fp), offset, libc::SEEK_SET) };
        if r != 0 {
            return Err(cram_err(format!(
                "{}: cannot seek to the container at byte {}",
                path.display(),
                range.offset
            )));
        }
        Self::with_header(file, header, options, None, Some(range.records))
    }

    /// The reader of `file` whose header `header` has been read; with that header.
    fn with_header(
        file: HtsFile,
        header: HtsHeader,
        options: &ReadOptions,
        feeder: Option<JoinHandle<std::io::Result<()>>>,
        limit: Option<u64>,
    ) -> Result<(Header, Self), BamError> {
        let ours = header.to_header()?;
        Ok((
            ours.clone(),
            Self {
                file,
                header,
                ours,
                record: Bam1::new(),
                reference: options.reference.clone(),
                feeder,
                limit,
            },
        ))
    }

    /// Decodes every record and hands out batches of about `target_bytes` of raw BAM records.
    pub fn for_each_batch(
        &mut self,
        target_bytes: usize,
        mut f: impl FnMut(RecordBatch) -> Result<(), BamError>,
    ) -> Result<(), BamError> {
        let mut buf = Vec::with_capacity(target_bytes + (64 << 10));
        let mut offsets = Vec::new();
        let mut last_tid = -1;
        let mut n: u64 = 0;
        while self.read_next(n, last_tid)? {
            offsets.push(buf.len() as u32);
            // SAFETY: sam_read1 filled the record.
            let b = unsafe { &*self.record.0 };
            bam1_to_raw(b, &mut buf)?;
            last_tid = b.core.tid;
            n += 1;
            if buf.len() >= target_bytes {
                let end = buf.len();
                let full =
                    std::mem::replace(&mut buf, Vec::with_capacity(target_bytes + (64 << 10)));
                f(RecordBatch::from_parts(
                    full,
                    std::mem::take(&mut offsets),
                    end,
                    0,
                ))?;
            }
        }
        if !offsets.is_empty() {
            let end = buf.len();
            f(RecordBatch::from_parts(buf, offsets, end, 0))?;
        }
        self.finish_feeder()
    }

    /// Decodes every record and calls `f` with its fixed fields only ([`Core`]): for counting, which
    /// needs neither the variable-length data nor a raw BAM copy of each record.
    pub fn for_each_core(
        &mut self,
        mut f: impl FnMut(&Core) -> Result<(), BamError>,
    ) -> Result<(), BamError> {
        let mut n: u64 = 0;
        let mut last_tid = -1;
        while self.read_next(n, last_tid)? {
            // SAFETY: sam_read1 filled the record.
            let c = unsafe { &(*self.record.0).core };
            let core = Core {
                flag: c.flag,
                tid: c.tid,
                pos: c.pos,
                mapq: c.qual,
                mtid: c.mtid,
                mpos: c.mpos,
            };
            last_tid = c.tid;
            n += 1;
            f(&core)?;
        }
        self.finish_feeder()
    }

    /// Decodes the next record into `self.record`: `false` at the end of the stream (or of the
    /// range, after its records); `n` records were read so far, the last on reference `last_tid`.
    fn read_next(&mut self, n: u64, last_tid: i32) -> Result<bool, BamError> {
        if self.limit.is_some_and(|limit| n >= limit) {
            return Ok(false);
        }
        // SAFETY: valid file, header and record.
        let r = unsafe { hts::sam_read1(self.file.fp, self.header.0, self.record.0) };
        if r == -1 {
            if let Some(limit) = self.limit {
                return Err(cram_err(format!(
                    "the CRAM file ended after {n} of the containers' {limit} records"
                )));
            }
            return Ok(false);
        }
        if r < -1 {
            return Err(self.read_failure(last_tid, n));
        }
        Ok(true)
    }

    /// The feeder's read error, if the stream could not be read.
    fn finish_feeder(&mut self) -> Result<(), BamError> {
        match self.feeder.take().map(|t| t.join()) {
            Some(Ok(Err(e))) => Err(BamError::Io(e)),
            Some(Err(_)) => Err(cram_err("the CRAM input thread panicked")),
            _ => Ok(()),
        }
    }

    /// The error for a failed `sam_read1`: a missing reference if one of the `@SQ` references the
    /// records may need is unavailable, else a decoding failure.
    fn read_failure(&mut self, last_tid: i32, decoded: u64) -> BamError {
        if self.feeder.as_ref().is_some_and(|t| t.is_finished()) {
            if let Some(Ok(Err(e))) = self.feeder.take().map(|t| t.join()) {
                return BamError::Io(e);
            }
        }
        if let Some(msg) = missing::diagnose(&self.ours, self.reference.as_deref(), last_tid, false)
        {
            return cram_err(msg);
        }
        cram_err(format!(
            "htslib cannot decode the CRAM container after record {decoded} (corrupt or truncated \
             file, or a reference that does not match the @SQ M5)"
        ))
    }
}

impl Drop for CramReader {
    fn drop(&mut self) {
        // Close htslib's end first so a feeder blocked on a full socket gets EPIPE and ends; a
        // feeder blocked reading its source (standard input) is left to finish on its own.
        let file = std::mem::replace(
            &mut self.file,
            HtsFile {
                fp: std::ptr::null_mut(),
            },
        );
        drop(file);
        if let Some(t) = self.feeder.take() {
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// Copies `inner` into the socket until the end of the input (or htslib closes its end).
fn feed(mut inner: Box<dyn Read + Send>, out: OwnedFd) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match inner.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if let Err(e) = send_all(&out, &buf[..n]) {
            // htslib stopped reading (a reader dropped early): not an input error.
            return if e.kind() == std::io::ErrorKind::BrokenPipe {
                Ok(())
            } else {
                Err(e)
            };
        }
    }
}
