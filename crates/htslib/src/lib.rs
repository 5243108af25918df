//! htslib 1.24 (with htscodecs), compiled from source by `build.rs`, and hand-written declarations
//! of exactly the part of its API that `sortase-cram` uses: opening CRAM files and streams, headers,
//! reading and writing records, the `.crai` index and region iterators.
//!
//! No bindgen: the handful of structs Rust reads or writes field by field (`bam1_t`, `bam1_core_t`,
//! `htsFormat`) are declared `#[repr(C)]` here, every other htslib type is opaque (reached only
//! through pointers and htslib's own functions, or the small C accessor in `src/shim.c`). The
//! build checks the declarations against the headers of the htslib it compiles: sizes, field
//! offsets and constants are asserted on both the C and the Rust side from one table, and each
//! function's prototype is checked by the C compiler (see `build.rs`). A header that disagrees
//! fails the build instead of corrupting memory.
//!
//! ```
//! let version = sortase_htslib::version();
//! assert!(version.starts_with("1."));
//! ```

#![allow(non_camel_case_types)]

// The compression libraries htslib links against (their -sys crates emit the link lines).
extern crate bzip2_sys;
extern crate libdeflate_sys;
extern crate libz_sys;
extern crate lzma_sys;

use libc::{c_char, c_int, c_short, c_void, off_t, size_t};
use std::ffi::CStr;
use std::mem::{offset_of, size_of};

/// Where the compiled htslib sources came from: `the pysam 0.24.1 sdist` or `a local source tree`
/// (`SORTASE_HTSLIB_SRC`).
pub const SOURCE: &str = env!("SORTASE_HTSLIB_ORIGIN");

/// A position (`hts_pos_t`).
pub type hts_pos_t = i64;

/// `bam1_core_t` (sam.h): the fixed fields of a record.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bam1_core_t {
    /// 0-based leftmost position.
    pub pos: hts_pos_t,
    /// Reference index, -1 if unplaced.
    pub tid: i32,
    /// BAI bin.
    pub bin: u16,
    /// Mapping quality.
    pub qual: u8,
    /// NULs added after the read name to align the CIGAR.
    pub l_extranul: u8,
    /// FLAG.
    pub flag: u16,
    /// Read name length, including the NUL and `l_extranul`.
    pub l_qname: u16,
    /// CIGAR operations.
    pub n_cigar: u32,
    /// Sequence length.
    pub l_qseq: i32,
    /// Mate's reference index.
    pub mtid: i32,
    /// Mate's position.
    pub mpos: hts_pos_t,
    /// Template length (`isize` in C).
    pub isize_: hts_pos_t,
}

/// `bam1_t` (sam.h): one record.
#[repr(C)]
#[derive(Debug)]
pub struct bam1_t {
    /// The fixed fields.
    pub core: bam1_core_t,
    /// Record id (not used by sortase).
    pub id: u64,
    /// Name, CIGAR, sequence, qualities and tags (allocated with `malloc`).
    pub data: *mut u8,
    /// Bytes used at `data`.
    pub l_data: c_int,
    /// Bytes allocated at `data`.
    pub m_data: u32,
    /// `mempolicy:2` and 30 reserved bits.
    pub mempolicy: u32,
}

/// `enum htsExactFormat` (hts.h).
pub type htsExactFormat = c_int;
/// `cram` of `enum htsExactFormat`.
pub const HTS_FORMAT_CRAM: htsExactFormat = 6;

/// `enum hts_fmt_option` (hts.h).
pub type hts_fmt_option = c_int;
/// `CRAM_OPT_REQUIRED_FIELDS`: takes an int of `SAM_*` bits.
pub const CRAM_OPT_REQUIRED_FIELDS: hts_fmt_option = 18;

/// `enum htsLogLevel` (hts_log.h).
pub type htsLogLevel = c_int;
/// `HTS_LOG_OFF`.
pub const HTS_LOG_OFF: htsLogLevel = 0;

/// `SAM_FLAG` (sam.h): the fields `CRAM_OPT_REQUIRED_FIELDS` names.
pub const SAM_FLAG: c_int = 0x2;
/// `SAM_RNAME`.
pub const SAM_RNAME: c_int = 0x4;
/// `SAM_POS`.
pub const SAM_POS: c_int = 0x8;
/// `SAM_MAPQ`.
pub const SAM_MAPQ: c_int = 0x10;
/// `SAM_RNEXT`.
pub const SAM_RNEXT: c_int = 0x40;
/// `SAM_PNEXT`.
pub const SAM_PNEXT: c_int = 0x80;

/// `HTS_IDX_NOCOOR` (hts.h): the `tid` of a query for the records without coordinates.
pub const HTS_IDX_NOCOOR: c_int = -2;

/// `htsFormat::version` (hts.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct htsFormatVersion {
    /// Major version.
    pub major: c_short,
    /// Minor version.
    pub minor: c_short,
}

/// `htsFormat` (hts.h): what `hts_get_format` reports.
#[repr(C)]
#[derive(Debug)]
pub struct htsFormat {
    /// `enum htsFormatCategory`.
    pub category: c_int,
    /// `enum htsExactFormat`.
    pub format: htsExactFormat,
    /// Format version.
    pub version: htsFormatVersion,
    /// `enum htsCompression`.
    pub compression: c_int,
    /// Compression level.
    pub compression_level: c_short,
    /// Format-specific options.
    pub specific: *mut hts_opt,
}

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// `htsFile` (hts.h), only through pointers.
    htsFile;
    /// `hFILE` (hfile.h).
    hFILE;
    /// `sam_hdr_t` (sam.h): read through `sam_hdr_nref`, `sam_hdr_tid2name`, `sam_hdr_tid2len`.
    sam_hdr_t;
    /// `hts_opt` (hts.h): a list of format options.
    hts_opt;
    /// `hts_idx_t` (hts.h).
    hts_idx_t;
    /// `hts_itr_t` (hts.h).
    hts_itr_t;
    /// `BGZF` (bgzf.h).
    BGZF;
    /// `cram_fd` (cram.h).
    cram_fd;
}

extern "C" {
    /// The library's version, e.g. `1.24`.
    pub fn hts_version() -> *const c_char;
    /// Sets htslib's log level.
    pub fn hts_set_log_level(level: htsLogLevel);
    /// Opens a file.
    pub fn hts_open(fn_: *const c_char, mode: *const c_char) -> *mut htsFile;
    /// An `hFILE` on a file descriptor.
    pub fn hdopen(fd: c_int, mode: *const c_char) -> *mut hFILE;
    /// Opens an `hFILE` as an htsFile (takes it on success).
    pub fn hts_hopen(fp: *mut hFILE, fn_: *const c_char, mode: *const c_char) -> *mut htsFile;
    /// Closes an `hFILE` without flushing.
    pub fn hclose_abruptly(fp: *mut hFILE);
    /// Closes a file.
    pub fn hts_close(fp: *mut htsFile) -> c_int;
    /// The format of an open file.
    pub fn hts_get_format(fp: *mut htsFile) -> *const htsFormat;
    /// Sets the reference FASTA.
    pub fn hts_set_fai_filename(fp: *mut htsFile, fn_aux: *const c_char) -> c_int;
    /// Sets a format option (variadic, as in C).
    pub fn hts_set_opt(fp: *mut htsFile, opt: hts_fmt_option, ...) -> c_int;
    /// Starts htslib's thread pool for the file.
    pub fn hts_set_threads(fp: *mut htsFile, n: c_int) -> c_int;
    /// Parses one `key=value` option onto a list.
    pub fn hts_opt_add(opts: *mut *mut hts_opt, c_arg: *const c_char) -> c_int;
    /// Applies an option list to a file.
    pub fn hts_opt_apply(fp: *mut htsFile, opts: *mut hts_opt) -> c_int;
    /// Frees an option list.
    pub fn hts_opt_free(opts: *mut hts_opt);
    /// Reads the header.
    pub fn sam_hdr_read(fp: *mut htsFile) -> *mut sam_hdr_t;
    /// Writes the header.
    pub fn sam_hdr_write(fp: *mut htsFile, h: *const sam_hdr_t) -> c_int;
    /// Parses header text.
    pub fn sam_hdr_parse(l_text: size_t, text: *const c_char) -> *mut sam_hdr_t;
    /// The header's text (owned by the header).
    pub fn sam_hdr_str(h: *mut sam_hdr_t) -> *const c_char;
    /// Number of references.
    pub fn sam_hdr_nref(h: *const sam_hdr_t) -> c_int;
    /// A reference's name (owned by the header).
    pub fn sam_hdr_tid2name(h: *const sam_hdr_t, tid: c_int) -> *const c_char;
    /// A reference's length.
    pub fn sam_hdr_tid2len(h: *const sam_hdr_t, tid: c_int) -> hts_pos_t;
    /// Frees a header.
    pub fn sam_hdr_destroy(h: *mut sam_hdr_t);
    /// Reads a record: >= 0 on success, -1 at the end, < -1 on error.
    pub fn sam_read1(fp: *mut htsFile, h: *mut sam_hdr_t, b: *mut bam1_t) -> c_int;
    /// Writes a record.
    pub fn sam_write1(fp: *mut htsFile, h: *const sam_hdr_t, b: *const bam1_t) -> c_int;
    /// Allocates a record.
    pub fn bam_init1() -> *mut bam1_t;
    /// Frees a record.
    pub fn bam_destroy1(b: *mut bam1_t);
    /// Builds an index.
    pub fn sam_index_build3(
        fn_: *const c_char,
        fnidx: *const c_char,
        min_shift: c_int,
        nthreads: c_int,
    ) -> c_int;
    /// Loads the index of an open file.
    pub fn sam_index_load(fp: *mut htsFile, fn_: *const c_char) -> *mut hts_idx_t;
    /// Frees an index.
    pub fn hts_idx_destroy(idx: *mut hts_idx_t);
    /// A region iterator.
    pub fn sam_itr_queryi(
        idx: *const hts_idx_t,
        tid: c_int,
        beg: hts_pos_t,
        end: hts_pos_t,
    ) -> *mut hts_itr_t;
    /// The iterator's next record (`sam_itr_next` for a CRAM file: `fp` NULL, `data` the htsFile).
    pub fn hts_itr_next(
        fp: *mut BGZF,
        iter: *mut hts_itr_t,
        r: *mut c_void,
        data: *mut c_void,
    ) -> c_int;
    /// Frees an iterator.
    pub fn hts_itr_destroy(iter: *mut hts_itr_t);
    /// Moves a CRAM stream (no container may be held by the decoder).
    pub fn cram_seek(fd: *mut cram_fd, offset: off_t, whence: c_int) -> c_int;
    /// `fp->fp.cram` of a CRAM file, NULL for other formats (src/shim.c).
    pub fn sortase_hts_cram_fd(fp: *mut htsFile) -> *mut cram_fd;
}

/// The version of the linked htslib (`hts_version()`), e.g. `1.24`.
pub fn version() -> String {
    // SAFETY: hts_version returns a pointer to a static NUL-terminated string inside htslib.
    unsafe { CStr::from_ptr(hts_version()) }
        .to_string_lossy()
        .into_owned()
}

include!(concat!(env!("OUT_DIR"), "/layout_check.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linked_htslib_is_the_compiled_source_and_has_the_cram_fixes() {
        // What hts_version() says at run time is the VERSION of the version.sh that was compiled.
        assert_eq!(version(), env!("SORTASE_HTSLIB_SOURCE_VERSION"));
        let numeric: Vec<u32> = version()
            .split(|c: char| !c.is_ascii_digit())
            .take(3)
            .map(|p| p.parse().unwrap_or(0))
            .collect();
        assert!(numeric.as_slice() >= [1, 23, 1].as_slice(), "{}", version());
        if SOURCE == "the pysam 0.24.1 sdist" {
            assert_eq!(version(), "1.24");
        }
    }

    #[test]
    fn a_record_round_trips_its_fields_through_htslib() {
        // SAFETY: allocation and release of one record; bam_init1 zeroes it.
        unsafe {
            let b = bam_init1();
            assert!(!b.is_null());
            assert_eq!((*b).core.tid, 0);
            assert_eq!((*b).l_data, 0);
            (*b).core.isize_ = -7;
            (*b).core.mpos = 123;
            assert_eq!((*b).core.isize_, -7);
            bam_destroy1(b);
        }
    }

    #[test]
    fn a_header_reads_through_the_accessors() {
        let text = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:chrM\tLN:16569\n";
        // SAFETY: a valid buffer; the header is freed below.
        unsafe {
            let h = sam_hdr_parse(text.len(), text.as_ptr().cast());
            assert!(!h.is_null());
            assert_eq!(sam_hdr_nref(h), 2);
            assert_eq!(CStr::from_ptr(sam_hdr_tid2name(h, 1)).to_bytes(), b"chrM");
            assert_eq!(sam_hdr_tid2len(h, 1), 16569);
            sam_hdr_destroy(h);
        }
    }
}
