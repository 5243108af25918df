//! Byte streams the bgzip, faidx, loc and fetch jobs share: readers and writers that stop once the
//! job is cancelled (the BGZF and FASTA engines below read and write through them, so a cancelled
//! job stops within one buffer), small files written through a temporary name, sibling names such as
//! `FILE.gzi`, and the translation of the FASTA layer's errors into kinds.

use crate::error::{Error, ErrorKind};
use crate::files::OutputFile;
use crate::runtime::{CancelFlag, Runtime};
use anyhow::{Context, Result};
use sortase_bgzf::gzi::GziEntry;
use sortase_bgzf::BgzfError;
use sortase_fasta::scan::Compression;
use sortase_fasta::FastaError;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// `path` with `suffix` appended (`a.fa` + `.fai`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Writes a small file (an index) through a temporary name, renamed into place once complete.
pub fn write_file(path: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let (pending, file) = OutputFile::create(path)?;
    let mut w = io::BufWriter::with_capacity(1 << 20, file);
    f(&mut w)
        .and_then(|_| w.flush())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    drop(w);
    pending.commit()
}

/// The error a [`Cancellable`] stream returns once the flag is set. Not `Interrupted`: `read_to_end`
/// and `write_all` retry that kind forever.
fn cancelled() -> io::Error {
    io::Error::other("interrupted")
}

/// A reader or writer that fails once the job's cancellation flag is set.
pub struct Cancellable<T> {
    inner: T,
    flag: CancelFlag,
}

impl<T> Cancellable<T> {
    /// Wraps `inner`; it stops when `rt` is cancelled.
    pub fn new(inner: T, rt: &Runtime) -> Self {
        Self {
            inner,
            flag: rt.cancel_flag().clone(),
        }
    }
}

impl<R: Read> Read for Cancellable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.flag.is_cancelled() {
            return Err(cancelled());
        }
        self.inner.read(buf)
    }
}

impl<W: Write> Write for Cancellable<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.flag.is_cancelled() {
            return Err(cancelled());
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The job's result at its edge: any failure after cancellation is reported as
/// [`ErrorKind::Cancelled`] (what a stopping job ran into is not the news).
pub fn finish<T>(rt: &Runtime, result: Result<T>) -> crate::error::Result<T> {
    match result {
        Err(_) if rt.cancel_flag().is_cancelled() => Err(Error::cancelled()),
        Err(e) => Err(Error::from(e)),
        Ok(v) => Ok(v),
    }
}

/// A FASTA-layer error as an `anyhow` chain the facade classifies: I/O errors stay `io::Error`
/// (so a closed pipe is recognised), BGZF errors stay typed, the rest are [`ErrorKind::Format`].
/// The message is unchanged (the wrapped variants are `#[error(transparent)]`).
pub fn fasta_error(e: FastaError) -> anyhow::Error {
    match e {
        FastaError::Io(io) | FastaError::Bgzf(BgzfError::Io(io)) => io.into(),
        FastaError::Bgzf(b) => b.into(),
        other => Error::new(ErrorKind::Format, other.to_string()).into(),
    }
}

/// How the file at `path` is stored (plain, BGZF, plain gzip), from its first bytes.
pub fn sniff_path(path: &Path) -> Result<Compression> {
    let what = path.display().to_string();
    let f = File::open(path).with_context(|| format!("{what}: cannot open"))?;
    let (compression, _) = sortase_fasta::scan::sniff(f)
        .map_err(fasta_error)
        .with_context(|| what.clone())?;
    Ok(compression)
}

/// Reads a `.gzi` file's entries.
pub fn read_gzi(path: &Path) -> Result<Vec<GziEntry>> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot open", path.display()))?;
    parse_gzi(&bytes, &path.display().to_string())
}

/// The entries of `.gzi` bytes (`what` names the file in errors).
pub fn parse_gzi(bytes: &[u8], what: &str) -> Result<Vec<GziEntry>> {
    sortase_bgzf::gzi::read(bytes)
        .map_err(|e| fasta_error(FastaError::BadIndex(format!("{what}: {e}"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_in_front_of_a_kinded_error_is_kept() {
        let e: anyhow::Error = Error::argument("-o takes one input file").into();
        let e = Error::from(e.context("a.txt"));
        assert_eq!(e.kind(), ErrorKind::Argument);
        assert_eq!(e.to_string(), "a.txt: -o takes one input file");
        let e = Error::from(fasta_error(FastaError::BadIndex("bad .gzi".into())).context("a.fa"));
        assert_eq!(
            (e.kind(), e.to_string()),
            (ErrorKind::Format, "a.fa: bad .gzi".into())
        );
    }

    #[test]
    fn fasta_io_errors_stay_io_errors() {
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        let e = Error::from(fasta_error(FastaError::Io(pipe)).context("standard output"));
        assert!(e.is_broken_pipe());
    }

    #[test]
    fn cancellable_streams_stop_once_cancelled() {
        let rt = Runtime::with_threads(1).unwrap();
        let mut r = Cancellable::new(&b"abc"[..], &rt);
        let mut w = Cancellable::new(Vec::new(), &rt);
        let mut buf = [0u8; 2];
        assert_eq!(r.read(&mut buf).unwrap(), 2);
        w.write_all(b"x").unwrap();
        rt.cancel();
        assert!(r.read(&mut buf).is_err());
        assert!(w.write_all(b"y").is_err());
        let e = finish::<()>(&rt, Err(anyhow::anyhow!("a.fa: interrupted"))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
    }
}
