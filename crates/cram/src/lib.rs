//! CRAM through htslib's own codec (htslib 1.19.1 and htscodecs, built by `hts-sys`): reading CRAM
//! into batches of raw BAM records, and writing raw BAM records as CRAM, so that CRAM decodes and
//! encodes exactly as samtools does (MD/NM regeneration, quality and TLEN rules, padding, reads past
//! the reference end, CRAM 3.0 and 3.1 codecs).
//!
//! htslib reads and writes an `hFILE` on a file descriptor. Both directions go through a socket pair:
//! a thread copies the caller's reader into it (reading), or copies htslib's output from it into the
//! caller's writer (writing). This keeps the callers' byte counting (progress), standard input and
//! already-consumed prefixes working unchanged. Sockets rather than pipes: the copying side sends with
//! `MSG_NOSIGNAL`, so a reader dropped early gives the thread `EPIPE` instead of killing the process
//! with `SIGPIPE`.
//!
//! Containers are decoded and encoded on htslib's thread pool (`hts_set_threads`). A file can also
//! be read as runs of whole containers ([`plan_container_ranges`], [`CramReader::open_range`]),
//! each decoded by its own htslib reader on its own thread: counting then runs on all cores with no
//! serial record-conversion step.
//!
//! htslib's own log messages are switched off (the library never prints); failures become
//! [`BamError::Cram`] values, a missing reference naming the `@SQ` line and its `M5`.

use hts_sys as hts;
use sortase_bam::{BamError, Header, RecordBatch, Reference};
use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::thread::JoinHandle;

mod containers;
mod convert;
mod missing;

pub use containers::{plan_container_ranges, scan_containers, ContainerPlan, ContainerRange};
pub use convert::{bam1_to_raw, raw_to_bam1, record_to_bam1};

fn cram_err(e: impl std::fmt::Display) -> BamError {
    BamError::Cram(e.to_string())
}

/// The version of the htslib this crate is linked with, as the library reports it at run time
/// (`hts_version()`, e.g. `1.19.1`): the CRAM codec `sortase --version` names.
///
/// ```
/// assert!(sortase_cram::htslib_version().starts_with("1."));
/// ```
pub fn htslib_version() -> String {
    // SAFETY: hts_version returns a pointer to a static NUL-terminated string inside htslib.
    unsafe { CStr::from_ptr(hts::hts_version()) }
        .to_string_lossy()
        .into_owned()
}

/// htslib prints errors and warnings to stderr by default; the library reports through its errors.
fn quiet_htslib() {
    static ONCE: Once = Once::new();
    // SAFETY: sets a global integer in htslib; no other state is touched.
    ONCE.call_once(|| unsafe { hts::hts_set_log_level(hts::htsLogLevel_HTS_LOG_OFF) });
}

/// Which record fields decoding must fill (htslib's `CRAM_OPT_REQUIRED_FIELDS`, as samtools sets it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fields {
    /// Every field: the records as samtools decodes them.
    #[default]
    All,
    /// FLAG, RNAME, POS, MAPQ, RNEXT and PNEXT only, for counting (flagstat, idxstats, `view -c`):
    /// read names, CIGAR, TLEN, sequence, qualities and tags are left undecoded (empty or `*`),
    /// which skips most of the work and needs no reference (htslib's cram_decode.c loads references
    /// only when SEQ or TLEN is required).
    Counting,
    /// FLAG, MAPQ and RNEXT (with the RNAME it implies), what samtools flagstat requires
    /// (bam_stat.c): positions are left undecoded too.
    Flagstat,
    /// FLAG and MAPQ only: what a count filtered on flags and mapping quality (`view -c -f/-F/-q`)
    /// reads.
    FlagMapq,
    /// FLAG and RNAME only: what samtools idxstats requires when it counts records
    /// (bam_idxstats.c `slow_idxstats`, the only way it reads a CRAM file).
    Idxstats,
}

impl Fields {
    /// The `SAM_*` bits of htslib's sam.h.
    fn mask(self) -> Option<i32> {
        const FLAG: i32 = 0x2;
        const RNAME: i32 = 0x4;
        const POS: i32 = 0x8;
        const MAPQ: i32 = 0x10;
        const RNEXT: i32 = 0x40;
        const PNEXT: i32 = 0x80;
        match self {
            Fields::All => None,
            Fields::Counting => Some(FLAG | RNAME | POS | MAPQ | RNEXT | PNEXT),
            Fields::Flagstat => Some(FLAG | MAPQ | RNEXT),
            Fields::FlagMapq => Some(FLAG | MAPQ),
            Fields::Idxstats => Some(FLAG | RNAME),
        }
    }
}

/// The fixed fields of a decoded record (0-based positions, -1 for none); only those of the
/// reader's [`Fields`] are decoded, the others are 0 or -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Core {
    /// FLAG.
    pub flag: u16,
    /// Reference index (RNAME), -1 if unplaced.
    pub tid: i32,
    /// Position.
    pub pos: i64,
    /// Mapping quality.
    pub mapq: u8,
    /// Mate's reference index (RNEXT).
    pub mtid: i32,
    /// Mate's position (PNEXT).
    pub mpos: i64,
}

/// How to read a CRAM file.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// The reference FASTA (`-T/--reference`); htslib builds a missing `.fai` next to it. Without it
    /// htslib looks references up by `M5` in `REF_CACHE`/`REF_PATH` (from the process environment,
    /// as samtools does) and by the `@SQ UR` file.
    pub reference: Option<PathBuf>,
    /// Decoding threads (htslib's pool; 0 or 1: decode on the reading thread).
    pub threads: usize,
    /// The fields the records need.
    pub fields: Fields,
}

/// How to write a CRAM file.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// The reference FASTA.
    pub reference: Option<PathBuf>,
    /// Encoding threads (htslib's pool).
    pub threads: usize,
    /// samtools `--output-fmt-option` settings for CRAM, `key=value` or `key`: `version=3.0`,
    /// `seqs_per_slice=N`, `embed_ref`, `no_ref`, ... applied in order after the defaults.
    pub format_options: Vec<String>,
}

/// samtools (1.22 and later) writes CRAM 3.1 unless told otherwise; htslib 1.19's default is 3.0.
const DEFAULT_VERSION: &str = "version=3.1";

/// A socket pair: `(ours, htslib's)`.
fn socket_pair() -> Result<(OwnedFd, OwnedFd), BamError> {
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
fn send_all(fd: &OwnedFd, mut buf: &[u8]) -> std::io::Result<()> {
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

/// An htslib file opened on one end of a socket pair.
struct HtsFile {
    fp: *mut hts::htsFile,
}

// SAFETY: an htsFile is used by one thread at a time (the owner); htslib's pool threads are its own.
unsafe impl Send for HtsFile {}

impl HtsFile {
    /// Opens the CRAM file at `path` for reading.
    fn open_path(path: &Path) -> Result<Self, BamError> {
        let cpath =
            CString::new(path.as_os_str().as_bytes()).map_err(|_| cram_err("path has NUL"))?;
        let mode = CString::new("rc").expect("no NUL");
        // SAFETY: valid NUL-terminated strings.
        let fp = unsafe { hts::hts_open(cpath.as_ptr(), mode.as_ptr()) };
        if fp.is_null() {
            return Err(cram_err(format!("{}: cannot open as CRAM", path.display())));
        }
        let file = Self { fp };
        // SAFETY: valid file; the format is filled in by hts_open.
        let format = unsafe { (*hts::hts_get_format(file.fp)).format };
        if format != hts::htsExactFormat_cram {
            return Err(cram_err(format!("{}: not a CRAM file", path.display())));
        }
        Ok(file)
    }

    /// Opens `fd` with the htslib mode `mode` (`"rc"`, `"wc"`); htslib takes the descriptor.
    fn on_fd(fd: OwnedFd, mode: &str) -> Result<Self, BamError> {
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

    fn set_reference(&mut self, reference: Option<&Path>) -> Result<(), BamError> {
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

    fn set_fields(&mut self, fields: Fields) -> Result<(), BamError> {
        if let Some(mask) = fields.mask() {
            // SAFETY: valid file; the option takes one int.
            let r = unsafe {
                hts::hts_set_opt(
                    self.fp,
                    hts::hts_fmt_option_CRAM_OPT_REQUIRED_FIELDS,
                    mask as libc::c_int,
                )
            };
            if r != 0 {
                return Err(cram_err("htslib refused the required-fields option"));
            }
        }
        Ok(())
    }

    fn set_threads(&mut self, threads: usize) -> Result<(), BamError> {
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
    fn close(mut self) -> Result<(), BamError> {
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
struct HtsHeader(*mut hts::sam_hdr_t);

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
    fn to_header(&self) -> Result<Header, BamError> {
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
        // SAFETY: n_targets entries in target_name/target_len, as sam_hdr_t documents.
        let refs = unsafe {
            let h = &*self.0;
            (0..h.n_targets.max(0) as usize)
                .map(|i| Reference {
                    name: CStr::from_ptr(*h.target_name.add(i)).to_bytes().to_vec(),
                    length: *h.target_len.add(i),
                })
                .collect()
        };
        Ok(Header::new(text, refs))
    }

    /// htslib's header from ours: the text, plus `@SQ` lines for references the text lacks (a BAM
    /// header may keep them only in its binary list).
    fn from_header(header: &Header) -> Result<Self, BamError> {
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
struct Bam1(*mut hts::bam1_t);

// SAFETY: used by one thread at a time.
unsafe impl Send for Bam1 {}

impl Bam1 {
    fn new() -> Self {
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
        file.set_reference(options.reference.as_deref())?;
        file.set_fields(options.fields)?;
        file.set_threads(options.threads)?;
        // SAFETY: valid file.
        let header = HtsHeader(unsafe { hts::sam_hdr_read(file.fp) });
        if header.0.is_null() {
            return Err(cram_err("cannot read the CRAM header"));
        }
        let ours = header.to_header()?;
        Ok((
            ours.clone(),
            Self {
                file,
                header,
                ours,
                record: Bam1::new(),
                reference: options.reference.clone(),
                feeder: Some(feeder),
                limit: None,
            },
        ))
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
        file.set_reference(options.reference.as_deref())?;
        file.set_fields(options.fields)?;
        file.set_threads(options.threads)?;
        // SAFETY: valid file.
        let header = HtsHeader(unsafe { hts::sam_hdr_read(file.fp) });
        if header.0.is_null() {
            return Err(cram_err("cannot read the CRAM header"));
        }
        let offset = libc::off_t::try_from(range.offset)
            .map_err(|_| cram_err("container offset out of range"))?;
        // SAFETY: a CRAM htsFile holds a cram_fd; no record has been read yet, so no container is
        // held in the decoder and seeking only moves the stream (cram_io.c, cram_seek).
        let r = unsafe { hts::cram_seek((*file.fp).fp.cram, offset, libc::SEEK_SET) };
        if r != 0 {
            return Err(cram_err(format!(
                "{}: cannot seek to the container at byte {}",
                path.display(),
                range.offset
            )));
        }
        let ours = header.to_header()?;
        Ok((
            ours.clone(),
            Self {
                file,
                header,
                ours,
                record: Bam1::new(),
                reference: options.reference.clone(),
                feeder: None,
                limit: Some(range.records),
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

/// Builds the `.crai` index of a CRAM file with htslib (`samtools index`), next to it or at `index`.
pub fn build_index(path: &Path, index: Option<&Path>, threads: usize) -> Result<(), BamError> {
    quiet_htslib();
    let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| cram_err("path has NUL"))?;
    let cindex = index
        .map(|p| CString::new(p.as_os_str().as_bytes()))
        .transpose()
        .map_err(|_| cram_err("path has NUL"))?;
    // SAFETY: valid NUL-terminated paths (or NULL for the default name).
    let r = unsafe {
        hts::sam_index_build3(
            cpath.as_ptr(),
            cindex.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            0,
            threads.max(1) as i32,
        )
    };
    if r != 0 {
        return Err(cram_err(format!(
            "{}: cannot build the .crai index",
            path.display()
        )));
    }
    Ok(())
}

/// A CRAM file open for region queries through its `.crai` index (as `samtools view FILE REGION`).
pub struct IndexedCram {
    file: HtsFile,
    header: HtsHeader,
    index: *mut hts::hts_idx_t,
    record: Bam1,
    reference: Option<PathBuf>,
}

// SAFETY: used by one thread at a time; the index is only read.
unsafe impl Send for IndexedCram {}

impl IndexedCram {
    /// Opens `path` and its index (`path.crai`).
    pub fn open(path: &Path, options: &ReadOptions) -> Result<Self, BamError> {
        quiet_htslib();
        let cpath =
            CString::new(path.as_os_str().as_bytes()).map_err(|_| cram_err("path has NUL"))?;
        let mode = CString::new("rc").expect("no NUL");
        // SAFETY: valid NUL-terminated strings.
        let fp = unsafe { hts::hts_open(cpath.as_ptr(), mode.as_ptr()) };
        if fp.is_null() {
            return Err(cram_err(format!("{}: cannot open as CRAM", path.display())));
        }
        let mut file = HtsFile { fp };
        file.set_reference(options.reference.as_deref())?;
        file.set_fields(options.fields)?;
        file.set_threads(options.threads)?;
        // SAFETY: valid file.
        let header = HtsHeader(unsafe { hts::sam_hdr_read(file.fp) });
        if header.0.is_null() {
            return Err(cram_err("cannot read the CRAM header"));
        }
        // SAFETY: valid file and path; NULL when there is no index.
        let index = unsafe { hts::sam_index_load(file.fp, cpath.as_ptr()) };
        if index.is_null() {
            return Err(cram_err(
                "no index (.crai) found; create one with `samtools index`",
            ));
        }
        Ok(Self {
            file,
            header,
            index,
            record: Bam1::new(),
            reference: options.reference.clone(),
        })
    }

    /// The file's header.
    pub fn header(&self) -> Result<Header, BamError> {
        self.header.to_header()
    }

    /// The records overlapping `[beg, end)` of reference `tid` (0-based), in file order; `tid` `None`:
    /// the unplaced records (samtools region `*`).
    pub fn query(
        &mut self,
        tid: Option<usize>,
        beg: i64,
        end: i64,
    ) -> Result<RecordBatch, BamError> {
        /// htslib's `HTS_IDX_NOCOOR`: the records without coordinates.
        const NOCOOR: i32 = -2;
        let tid = tid.map_or(NOCOOR, |t| t as i32);
        // SAFETY: valid index; the iterator is destroyed below.
        let itr = unsafe { hts::sam_itr_queryi(self.index, tid, beg, end) };
        if itr.is_null() {
            return Err(cram_err("cannot query the .crai index"));
        }
        let (mut buf, mut offsets) = (Vec::new(), Vec::new());
        let result = loop {
            // SAFETY: valid iterator, record and file (sam_itr_next for a CRAM file).
            let r = unsafe {
                hts::hts_itr_next(
                    std::ptr::null_mut(),
                    itr,
                    self.record.0.cast(),
                    self.file.fp.cast(),
                )
            };
            if r == -1 {
                break Ok(());
            }
            if r < -1 {
                let missing = self.header.to_header().ok().and_then(|h| {
                    missing::diagnose(&h, self.reference.as_deref(), tid.max(0), false)
                });
                break Err(cram_err(missing.unwrap_or_else(|| {
                    "htslib cannot decode the CRAM container of the region (corrupt file, or a \
                     reference that does not match the @SQ M5)"
                        .to_string()
                })));
            }
            offsets.push(buf.len() as u32);
            // SAFETY: the iterator filled the record.
            if let Err(e) = bam1_to_raw(unsafe { &*self.record.0 }, &mut buf) {
                break Err(e);
            }
        };
        // SAFETY: the iterator is ours and not used again.
        unsafe { hts::hts_itr_destroy(itr) };
        result?;
        let end = buf.len();
        Ok(RecordBatch::from_parts(buf, offsets, end, 0))
    }
}

impl Drop for IndexedCram {
    fn drop(&mut self) {
        // SAFETY: the index is ours and not used again (the file closes in its own Drop).
        unsafe { hts::hts_idx_destroy(self.index) };
    }
}
