//! [`CramWriter`]: raw BAM records written as CRAM, through htslib's encoder.

use crate::handles::*;
use crate::{missing, record_to_bam1, WriteOptions};
use sortase_bam::{BamError, Header, RecordBatch};
use sortase_htslib as hts;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// samtools (1.22 and later) writes CRAM 3.1 unless told otherwise. htslib 1.24's own default is 3.1
/// too (cram_io.c); stated anyway, so a build from other htslib sources (`SORTASE_HTSLIB_SRC`)
/// writes the same.
const DEFAULT_VERSION: &str = "version=3.1";

/// Writes raw BAM records as CRAM into a writer.
pub struct CramWriter<W: Write + Send + 'static> {
    file: Option<HtsFile>,
    header: HtsHeader,
    record: Bam1,
    reference: Option<PathBuf>,
    drain: Option<JoinHandle<(W, std::io::Result<()>)>>,
}

impl<W: Write + Send + 'static> CramWriter<W> {
    /// Starts a CRAM stream into `inner` and writes `header`.
    pub fn new(inner: W, header: &Header, options: &WriteOptions) -> Result<Self, BamError> {
        quiet_htslib();
        let (ours_end, hts_end) = socket_pair()?;
        let drain = std::thread::Builder::new()
            .name("cram-drain".into())
            .spawn(move || drain(ours_end, inner))
            .map_err(BamError::Io)?;
        let mut file = HtsFile::on_fd(hts_end, "wc")?;
        let mut settings = vec![DEFAULT_VERSION.to_string()];
        settings.extend(options.format_options.iter().cloned());
        for s in &settings {
            apply_option(&mut file, s)?;
        }
        file.set_reference(options.reference.as_deref())?;
        file.set_threads(options.threads)?;
        let header = HtsHeader::from_header(header)?;
        // SAFETY: valid file and header.
        if unsafe { hts::sam_hdr_write(file.fp, header.0) } != 0 {
            return Err(cram_err(write_failure(
                &header,
                options.reference.as_deref(),
            )));
        }
        Ok(Self {
            file: Some(file),
            header,
            record: Bam1::new(),
            reference: options.reference.clone(),
            drain: Some(drain),
        })
    }

    /// Writes the records of a batch.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), BamError> {
        let file = self.file.as_ref().expect("open until finish");
        for r in batch.iter() {
            // SAFETY: the record is ours; record_to_bam1 keeps its data allocation consistent.
            unsafe { record_to_bam1(r, self.record.0)? };
            // SAFETY: valid file, header and record.
            if unsafe { hts::sam_write1(file.fp, self.header.0, self.record.0) } < 0 {
                return Err(cram_err(write_failure(
                    &self.header,
                    self.reference.as_deref(),
                )));
            }
        }
        Ok(())
    }

    /// Ends the stream (last container and EOF container) and returns the inner writer.
    pub fn finish(mut self) -> Result<W, BamError> {
        let closed = self.file.take().expect("open until finish").close();
        let (inner, copied) = self
            .drain
            .take()
            .expect("drain thread until finish")
            .join()
            .map_err(|_| cram_err("the CRAM output thread panicked"))?;
        copied.map_err(BamError::Io)?;
        closed?;
        Ok(inner)
    }
}

impl<W: Write + Send + 'static> Drop for CramWriter<W> {
    fn drop(&mut self) {
        drop(self.file.take());
        if let Some(t) = self.drain.take() {
            let _ = t.join();
        }
    }
}

/// The error for a header or record htslib could not encode: the first `@SQ` missing from the
/// reference if there is one, else a general message.
fn write_failure(header: &HtsHeader, reference: Option<&Path>) -> String {
    header
        .to_header()
        .ok()
        .and_then(|h| missing::diagnose(&h, reference, 0, true))
        .unwrap_or_else(|| {
            "htslib cannot encode the CRAM output (is every @SQ in the reference?)".to_string()
        })
}

/// Applies one samtools-style `key=value` (or `key`) format option through `hts_opt_add`.
fn apply_option(file: &mut HtsFile, setting: &str) -> Result<(), BamError> {
    let c = CString::new(setting).map_err(|_| cram_err("format option contains a NUL byte"))?;
    let mut opts: *mut hts::hts_opt = std::ptr::null_mut();
    // SAFETY: `opts` is an empty list that hts_opt_add extends; freed below.
    let r = unsafe { hts::hts_opt_add(&mut opts, c.as_ptr()) };
    if r != 0 {
        // SAFETY: frees whatever was built.
        unsafe { hts::hts_opt_free(opts) };
        return Err(cram_err(format!("unknown CRAM output option {setting:?}")));
    }
    // SAFETY: valid file and option list.
    let r = unsafe { hts::hts_opt_apply(file.fp, opts) };
    // SAFETY: the list is ours.
    unsafe { hts::hts_opt_free(opts) };
    if r != 0 {
        return Err(cram_err(format!(
            "CRAM output option {setting:?} was refused"
        )));
    }
    Ok(())
}

/// Copies htslib's output from the socket into `inner`. After a write error it keeps reading (and
/// discarding) so htslib never blocks or meets a closed socket; the error is returned at the end.
fn drain<W: Write>(from: OwnedFd, mut inner: W) -> (W, std::io::Result<()>) {
    let mut src = std::fs::File::from(from);
    let mut buf = vec![0u8; 1 << 20];
    let mut failure = None;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                failure.get_or_insert(e);
                break;
            }
        };
        if failure.is_none() {
            if let Err(e) = inner.write_all(&buf[..n]) {
                failure = Some(e);
            }
        }
    }
    let result = match failure {
        Some(e) => Err(e),
        None => inner.flush(),
    };
    (inner, result)
}
