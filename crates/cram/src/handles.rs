//! htslib's handles (an open file, a header, a record) as owned values that close themselves, the
//! socket pair the CRAM streams go through, and the error of a failed htslib call.

use crate::{Fields, ReadOptions};
use sortase_bam::{BamError, Header, Reference};
use sortase_htslib as hts;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Once;

pub(crate) fn cram_err(e: impl std::fmt::Display) -> BamError {
    BamError::Cram(e.to_string())
}

/// htslib prints errors and warnings to stderr by default; the library reports through its errors.
pub(crate) fn quiet_htslib() {
    static ONCE: Once = Once::new();
    // SAFETY: sets a global integer in htslib; no other state is touched.
    ONCE.call_once(|| unsafe { hts::hts_set_log_level(hts::HTS_LOG_OFF) });
}

/// A socket pair: `(ours, htslib's)`.
pub(crate) fn socket_pair() -> Result<(OwnedFd, OwnedFd), BamError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(BamError::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: socketpair succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sends all of `buf` on a socket without raising `SIGPIPE`.
pub(crate) fn send_all(fd: &OwnedFd, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid slice; `fd` is an open socket.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// `path` as a C string.
pub(crate) fn c_path(path: &Path) -> Result<CString, BamError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| cram_err("path has NUL"))
}

/// An htslib file opened on one end of a socket pair.
pub(crate) struct HtsFile {
    pub(crate) fp: *mut hts::htsFile,
}

// SAFETY: an htsFile is used by one thread at a time (the owner); htslib's pool threads are its own.
unsafe impl Send for HtsFile {}

impl HtsFile {
    /// Opens the CRAM file at `path` for reading.
    pub(crate) fn open_path(path: &Path) -> Result<Self, BamError> {
        let file = Self::open_c(&c_path(path)?, path)?;
        // SAFETY: valid file; the format is filled in by hts_open.
        let format = unsafe { (*hts::hts_get_format(file.fp)).format };
        if format != hts::HTS_FORMAT_CRAM {
            return Err(cram_err(format!("{}: not a CRAM file", path.display())));
        }
        Ok(file)
    }

    /// Opens the file at `cpath` (`path`, for messages) with htslib's mode `"rc"`, its format
    /// unchecked.
    pub(crate) fn open_c(cpath: &CStr, path: &Path) -> Result<Self, BamError> {
        let mode = CString::new("rc").expect("no NUL");
        // SAFETY: valid NUL-terminated strings.
        let fp = unsafe { hts::hts_open(cpath.as_ptr(), mode.as_ptr()) };
        if fp.is_null() {
            return Err(cram_err(format!("{}: cannot open as CRAM", path.display())));
        }
        Ok(Self { fp })
    }

    /// Applies `options` (reference, fields, threads), then reads the header.
    pub(crate) fn read_header(&mut self, options: &ReadOptions) -> Result<HtsHeader, BamError> {
        self.set_reference(options.reference.as_deref())?;
        self.set_fields(options.fields)?;
        self.set_threads(options.threads)?;
        // SAFETY: valid file.
        let header = HtsHeader(unsafe { hts::sam_hdr_read(self.fp) });
        if header.0.is_null() {
            return Err(cram_err("cannot read the CRAM header"));
        }
        Ok(header)
    }

    /// Opens `fd` with the htslib mode `mode` (`"rc"`, `"wc"`); htslib takes the descriptor.
    pub(crate) fn on_fd(fd: OwnedFd, mode: &str) -> Result<Self, BamError> {
        let cmode = CString::new(mode).expect("mode has no NUL");
        let raw = fd.into_raw_fd();
        // SAFETY: `raw` is an open descriptor we give up; hdopen owns it from here (or we close it).
        let hfile = unsafe { hts::hdopen(raw, cmode.as_ptr()) };
        if hfile.is_null() {
            // SAFETY: hdopen failed, so the descriptor is still ours.
            unsafe { libc::close(raw) };
            return Err(cram_err("cannot open a stream for htslib"));
        }
        let name = CString::new("-").expect("no NUL");
        // SAFETY: `hfile` is a valid hFILE; on failure hts_hopen leaves it to us.
        let fp = unsafe { hts::hts_hopen(hfile, name.as_ptr(), cmode.as_ptr()) };
        if fp.is_null() {
            // SAFETY: hts_hopen failed and did not take `hfile`.
            unsafe { hts::hclose_abruptly(hfile) };
            return Err(cram_err("not a CRAM stream"));
        }
        Ok(Self { fp })
    }

    pub(crate) fn set_reference(&mut self, reference: Option<&Path>) -> Result<(), BamError> {
        let Some(path) = reference else {
            return Ok(());
        };
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| cram_err("reference path contains a NUL byte"))?;
        // SAFETY: valid file and NUL-terminated path; htslib copies the string.
        let r = unsafe { hts::hts_set_fai_filename(self.fp, c.as_ptr()) };
        if r != 0 {
            return Err(cram_err(format!(
                "{}: cannot load the reference (a FASTA file, indexed by a .fai next to it or \
                 in a writable directory)",
                path.display()
            )));
        }
        Ok(())
    }

    pub(crate) fn set_fields(&mut self, fields: Fields) -> Result<(), BamError> {
        if let Some(mask) = fields.mask() {
            // SAFETY: valid file; the option takes one int.
            let r = unsafe {
                hts::hts_set_opt(self.fp, hts::CRAM_OPT_REQUIRED_FIELDS, mask as libc::c_int)
            };
            if r != 0 {
                return Err(cram_err("htslib refused the required-fields option"));
            }
        }
        Ok(())
    }

    pub(crate) fn set_threads(&mut self, threads: usize) -> Result<(), BamError> {
        if threads > 1 {
            // SAFETY: valid file; htslib creates and owns the pool.
            let r = unsafe { hts::hts_set_threads(self.fp, threads.min(256) as i32) };
            if r != 0 {
                return Err(cram_err("cannot start htslib's thread pool"));
            }
        }
        Ok(())
    }

    /// Closes the file; `Err` if htslib reports a failure (for a writer: the last container or the
    /// EOF container could not be written).
    pub(crate) fn close(mut self) -> Result<(), BamError> {
        let fp = std::mem::replace(&mut self.fp, std::ptr::null_mut());
        // SAFETY: `fp` is open and is not used again.
        let r = unsafe { hts::hts_close(fp) };
        if r != 0 {
            return Err(cram_err("htslib could not finish the CRAM stream"));
        }
        Ok(())
    }
}

impl Drop for HtsFile {
    fn drop(&mut self) {
        if !self.fp.is_null() {
            // SAFETY: `fp` is open and is not used again.
            unsafe { hts::hts_close(self.fp) };
        }
    }
}

/// An owned htslib header.
pub(crate) struct HtsHeader(pub(crate) *mut hts::sam_hdr_t);

// SAFETY: used by one thread at a time.
unsafe impl Send for HtsHeader {}

impl Drop for HtsHeader {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: owned, not used again.
            unsafe { hts::sam_hdr_destroy(self.0) };
        }
    }
}

impl HtsHeader {
    /// Our header from htslib's: its text as `sam_hdr_str` gives it (what samtools prints) and its
    /// target list.
    pub(crate) fn to_header(&self) -> Result<Header, BamError> {
        // SAFETY: valid header; the string lives as long as the header and is copied at once.
        let text = unsafe {
            let s = hts::sam_hdr_str(self.0);
            if s.is_null() {
                String::new()
            } else {
                String::from_utf8(CStr::from_ptr(s).to_bytes().to_vec())
                    .map_err(|_| BamError::Header("header text is not UTF-8".into()))?
            }
        };
        // SAFETY: valid header; tids below sam_hdr_nref have a name, owned by the header and
        // copied at once.
        let refs = unsafe {
            (0..hts::sam_hdr_nref(self.0).max(0))
                .map(|tid| Reference {
                    name: CStr::from_ptr(hts::sam_hdr_tid2name(self.0, tid))
                        .to_bytes()
                        .to_vec(),
                    length: u32::try_from(hts::sam_hdr_tid2len(self.0, tid)).unwrap_or(u32::MAX),
                })
                .collect()
        };
        Ok(Header::new(text, refs))
    }

    /// htslib's header from ours: the text, plus `@SQ` lines for references the text lacks (a BAM
    /// header may keep them only in its binary list).
    pub(crate) fn from_header(header: &Header) -> Result<Self, BamError> {
        let mut text = header.text().to_string();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if !text.lines().any(|l| l.starts_with("@SQ\t")) {
            for r in header.references() {
                text.push_str("@SQ\tSN:");
                text.push_str(&String::from_utf8_lossy(&r.name));
                text.push_str(&format!("\tLN:{}\n", r.length));
            }
        }
        // SAFETY: text pointer and length describe a valid buffer; htslib copies it.
        let h = unsafe { hts::sam_hdr_parse(text.len(), text.as_ptr().cast()) };
        if h.is_null() {
            return Err(BamError::Header("htslib cannot parse the header".into()));
        }
        Ok(Self(h))
    }
}

/// An owned `bam1_t`.
pub(crate) struct Bam1(pub(crate) *mut hts::bam1_t);

// SAFETY: used by one thread at a time.
unsafe impl Send for Bam1 {}

impl Bam1 {
    pub(crate) fn new() -> Self {
        // SAFETY: allocation; checked for NULL below.
        let b = unsafe { hts::bam_init1() };
        assert!(!b.is_null(), "bam_init1: out of memory");
        Self(b)
    }
}

impl Drop for Bam1 {
    fn drop(&mut self) {
        // SAFETY: owned, not used again.
        unsafe { hts::bam_destroy1(self.0) };
    }
}
