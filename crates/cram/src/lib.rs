//! CRAM through htslib's own codec (htslib 1.24 and htscodecs, compiled from source by `sortase-htslib`): reading CRAM
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

use sortase_htslib as hts;
use std::path::PathBuf;

mod containers;
mod convert;
mod handles;
mod indexed;
mod missing;
mod reader;
mod writer;

pub use containers::{plan_container_ranges, scan_containers, ContainerPlan, ContainerRange};
pub use convert::{bam1_to_raw, raw_to_bam1, record_to_bam1};
pub use indexed::{build_index, IndexedCram};
pub use reader::CramReader;
pub use writer::CramWriter;

/// The version of the htslib this crate is linked with, as the library reports it at run time
/// (`hts_version()`, e.g. `1.24`): the CRAM codec `sortase --version` names.
///
/// ```
/// assert!(sortase_cram::htslib_version().starts_with("1."));
/// ```
pub fn htslib_version() -> String {
    hts::version()
}

/// Where the compiled htslib sources came from (`the pysam 0.24.1 sdist`, or `a local source tree`
/// when built with `SORTASE_HTSLIB_SRC`), for `sortase --version`.
pub fn htslib_source() -> &'static str {
    hts::SOURCE
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
        use hts::{
            SAM_FLAG as FLAG, SAM_MAPQ as MAPQ, SAM_PNEXT as PNEXT, SAM_POS as POS,
            SAM_RNAME as RNAME, SAM_RNEXT as RNEXT,
        };
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
