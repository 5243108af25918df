//! [`MarkdupJob`]: duplicate marking on query-grouped input (samblaster 0.1.26's algorithm,
//! [`query`]) or on coordinate-sorted input (Picard MarkDuplicates', [`coordinate`]); the input's
//! `@HD` line decides which unless [`Mode`] says so. The algorithms themselves live in
//! this crate's [`crate::samblaster`] and [`crate::picard`]; this module drives them over the input, the outputs and the runtime.
//!
//! ```
//! use sortase_exec::{options::OutputSpec, runtime::Runtime};
//! use sortase_markdup::job::MarkdupJob;
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # let rec = |n: &str| format!("{n}\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
//! # std::fs::write(&input, format!("@SQ\tSN:chr1\tLN:100\n{}{}", rec("r1"), rec("r2"))).unwrap();
//! let runtime = Runtime::with_threads(2)?;
//! let job = MarkdupJob::new(input.to_str().unwrap(), OutputSpec::to_path(dir.path().join("out.bam")));
//! let report = job.run(&runtime)?;
//! assert_eq!((report.records, report.duplicate_records), (2, 1)); // r2 repeats r1's alignment
//! # Ok::<(), sortase_exec::error::Error>(())
//! ```

pub mod coordinate;
pub mod marking;
pub mod query;
mod side_out;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::Header;
use sortase_exec::error::{Error, Result};
use sortase_exec::input::Input;
use sortase_exec::options::{OutputSpec, Program};
use sortase_exec::proof::Checksums;
use sortase_exec::runtime::Runtime;
use std::path::PathBuf;

/// Which algorithm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// From the input's `@HD` line: `SO:coordinate` is [`Mode::Coordinate`], anything else
    /// [`Mode::Query`].
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(
            help = "From the input's @HD line: SO:coordinate is coordinate, anything else query-grouped",
        )
    )]
    Auto,
    /// Query-grouped input (aligner output): samblaster's algorithm.
    Query,
    /// Coordinate-sorted input: Picard MarkDuplicates' algorithm.
    Coordinate,
}

/// samblaster's options (query-grouped input), with samblaster's defaults. With the `clap` feature
/// also samblaster's flags (`clap::Args`; the CLI flattens them under their heading).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct SamblasterOptions {
    /// Add MC and MQ tags to all records of pairs with both primaries present (samblaster
    /// --addMateTags).
    #[cfg_attr(feature = "clap", arg(long = "addMateTags"))]
    pub add_mate_tags: bool,
    /// Accept the input's duplicate marks: mark nothing (samblaster -a).
    #[cfg_attr(feature = "clap", arg(short = 'a', long = "acceptDupMarks"))]
    pub accept_dups: bool,
    /// Pass groups without a usable primary pair through instead of failing (samblaster
    /// --ignoreUnmated).
    #[cfg_attr(feature = "clap", arg(long = "ignoreUnmated"))]
    pub ignore_unmated: bool,
    /// Padding of each reference in samblaster's signature layout (samblaster --maxReadLength;
    /// changes which alignments at reference ends compare equal).
    #[cfg_attr(
        feature = "clap",
        arg(long = "maxReadLength", value_name = "INT", default_value_t = SamblasterOptions::default().max_read_length)
    )]
    pub max_read_length: i32,
    /// Leave duplicates out of the side outputs -d, -s, --unmappedFile (samblaster -e; -r implies
    /// it).
    #[cfg_attr(feature = "clap", arg(short = 'e', long = "excludeDups"))]
    pub exclude_dups: bool,
    /// Write discordant pairs' primaries to FILE (SAM; BAM if it ends in .bam) (samblaster -d).
    #[cfg_attr(feature = "clap", arg(short = 'd', long = "discordantFile", value_name = "FILE"))]
    pub discordant_file: Option<PathBuf>,
    /// Write split reads to FILE (SAM; BAM if it ends in .bam), names suffixed _1/_2 (samblaster
    /// -s).
    #[cfg_attr(feature = "clap", arg(short = 's', long = "splitterFile", value_name = "FILE"))]
    pub splitter_file: Option<PathBuf>,
    /// Write unmapped and clipped reads to FILE as FASTQ (FASTA if they have no qualities).
    /// samblaster's short form -u is not taken: -u is samtools' uncompressed BAM here.
    #[cfg_attr(feature = "clap", arg(long = "unmappedFile", value_name = "FILE"))]
    pub unmapped_file: Option<PathBuf>,
    /// Split-read compatibility with bwa mem -M: 0x100 records are split-read candidates too.
    #[cfg_attr(feature = "clap", arg(short = 'M'))]
    pub compat: bool,
    /// Most alignments of a read for it to be a split-read candidate.
    #[cfg_attr(
        feature = "clap",
        arg(long = "maxSplitCount", value_name = "INT", default_value_t = SamblasterOptions::default().max_split_count)
    )]
    pub max_split_count: i32,
    /// Fewest bases of a split read's alignments that must not overlap.
    #[cfg_attr(
        feature = "clap",
        arg(long = "minNonOverlap", value_name = "INT", default_value_t = SamblasterOptions::default().min_non_overlap)
    )]
    pub min_non_overlap: i32,
    /// Smallest indel between alignments on one strand for a split read.
    #[cfg_attr(
        feature = "clap",
        arg(long = "minIndelSize", value_name = "INT", default_value_t = SamblasterOptions::default().min_indel_size)
    )]
    pub min_indel_size: i32,
    /// Most unaligned bases between a split read's alignments.
    #[cfg_attr(
        feature = "clap",
        arg(long = "maxUnmappedBases", value_name = "INT", default_value_t = SamblasterOptions::default().max_unmapped_bases)
    )]
    pub max_unmapped_bases: i32,
    /// Shortest clip for --unmappedFile.
    #[cfg_attr(
        feature = "clap",
        arg(long = "minClipSize", value_name = "INT", default_value_t = SamblasterOptions::default().min_clip)
    )]
    pub min_clip: i32,
}

impl Default for SamblasterOptions {
    /// samblaster 0.1.26's defaults.
    fn default() -> Self {
        Self {
            add_mate_tags: false,
            accept_dups: false,
            ignore_unmated: false,
            max_read_length: 500,
            exclude_dups: false,
            discordant_file: None,
            splitter_file: None,
            unmapped_file: None,
            compat: false,
            max_split_count: 2,
            min_non_overlap: 20,
            min_indel_size: 50,
            max_unmapped_bases: 50,
            min_clip: 20,
        }
    }
}

/// Picard MarkDuplicates' options (coordinate-sorted input), with Picard's defaults. The read ends
/// are held within the runtime's memory pool and spilled to sorted runs beyond it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PicardOptions {
    /// Picard's duplication metrics go to this file (`M=`). Not among the flags: `sortase markdup`
    /// has `--metrics`, `sortase agd markdup` none.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub metrics: Option<PathBuf>,
    /// The command line in the metrics file's header (default: the `@PG` line's).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub metrics_command_line: Option<String>,
    /// Largest x/y distance between optical duplicates (Picard OPTICAL_DUPLICATE_PIXEL_DISTANCE).
    #[cfg_attr(
        feature = "clap",
        arg(long = "optical-distance", value_name = "INT", default_value_t = PicardOptions::default().optical_distance)
    )]
    pub optical_distance: i32,
    /// Regex with 3 groups (tile, x, y) matched against read names; `null` turns optical detection
    /// off (Picard READ_NAME_REGEX) [the last three ':'-separated fields].
    #[cfg_attr(feature = "clap", arg(long = "read-name-regex", value_name = "REGEX"))]
    pub read_name_regex: Option<String>,
    /// Largest duplicate set searched for optical duplicates; -1: no limit (Picard
    /// MAX_OPTICAL_DUPLICATE_SET_SIZE).
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "max-optical-set",
            value_name = "INT",
            default_value_t = PicardOptions::default().max_optical_set,
            allow_negative_numbers = true
        )
    )]
    pub max_optical_set: i64,
}

impl Default for PicardOptions {
    /// Picard 2.27.5's defaults.
    fn default() -> Self {
        Self {
            metrics: None,
            metrics_command_line: None,
            optical_distance: 100,
            read_name_regex: None,
            max_optical_set: 300_000,
        }
    }
}

/// Duplicate marking as a job: one input (SAM, BAM, CRAM; `-` for standard input) into one output,
/// with 0x400 set on duplicates (or duplicates left out).
///
/// With the `clap` feature it is also `sortase markdup`'s flags (`clap::Args`, flattened by the
/// CLI): a field's `arg(...)` is its flag and `--help` text; `mode`, `samblaster` and `picard`
/// (the marking flags `markdup` and `agd markdup` share) and `program` (--no-PG) are the CLI's to
/// fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MarkdupJob {
    /// Input SAM/BAM/CRAM file [stdin], or an AGD dataset directory (marked as the BAM it came
    /// from).
    #[cfg_attr(feature = "clap", arg(default_value = "-", hide_default_value = true))]
    pub input: String,
    /// The output (`write_index`: coordinate-sorted BAM or CRAM output only).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub output: OutputSpec,
    /// The algorithm.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub mode: Mode,
    /// Remove duplicates instead of flagging them (samblaster -r, Picard REMOVE_DUPLICATES).
    #[cfg_attr(feature = "clap", arg(short = 'r', long = "removeDups"))]
    pub remove_duplicates: bool,
    /// Temporary files (spilled read ends, a copy of standard input) go to
    /// `PREFIX.sortase-PID-N.tmp/`; default: next to the output, else the runtime's temporary
    /// directory.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'T', value_name = "PREFIX", help = sortase_exec::options::TEMP_PREFIX_HELP)
    )]
    pub temp_prefix: Option<PathBuf>,
    /// samblaster's options.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub samblaster: SamblasterOptions,
    /// Picard's options.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub picard: PicardOptions,
    /// The `@PG` line to add (`None`: `--no-PG`).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub program: Option<Program>,
    /// Prove that no record was lost or changed but for the duplicate flag: sum the records read
    /// and written (samtools checksum -F 0 -P -C -M; with -r the removed ones too) and fail,
    /// removing the output, if they differ; -v prints them.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "checksums"))]
    pub checksums: bool,
}

/// What a duplicate marking did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MarkdupReport {
    /// The algorithm that ran ([`Mode::Query`] or [`Mode::Coordinate`]).
    pub mode: Mode,
    /// Records read.
    pub records: u64,
    /// Records flagged as duplicates (or left out when removing).
    pub duplicate_records: u64,
    /// Query-grouped input: read-name groups.
    pub read_names: u64,
    /// Query-grouped input: groups that were duplicates.
    pub duplicate_groups: u64,
    /// Coordinate-sorted input: read pairs formed.
    pub pairs: u64,
    /// Coordinate-sorted input: runs of read ends spilled beyond the memory pool.
    pub runs_spilled: usize,
    /// Coordinate-sorted input: bytes of those runs.
    pub spilled_bytes: u64,
    /// samblaster's summary lines (the CLI prints them on stderr unless `-q`).
    pub summary: Vec<String>,
    /// Files written (data file, index, side outputs, metrics).
    pub outputs: Vec<PathBuf>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// With [`MarkdupJob::checksums`]: the sums of the records read, written and left out.
    pub checksums: Option<Checksums>,
}

impl MarkdupJob {
    /// Marks duplicates in `input` into `output`, the algorithm chosen from the input's `@HD` line,
    /// every other option at its default.
    pub fn new(input: impl Into<String>, output: OutputSpec) -> Self {
        Self {
            input: input.into(),
            output,
            mode: Mode::Auto,
            remove_duplicates: false,
            temp_prefix: None,
            samblaster: SamblasterOptions::default(),
            picard: PicardOptions::default(),
            program: None,
            checksums: false,
        }
    }

    /// Runs the job on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<MarkdupReport> {
        run(self, rt).map_err(Error::from)
    }
}

/// The `@HD` field `key` (e.g. `SO`), if the header has one.
pub fn hd_field<'h>(header: &'h Header, key: &str) -> Option<&'h str> {
    let hd = header.text().lines().find(|l| l.starts_with("@HD\t"))?;
    hd.split('\t')
        .skip(1)
        .find_map(|f| f.strip_prefix(key)?.strip_prefix(':'))
}

/// The algorithm for `header` under [`Mode::Auto`].
pub fn detect_mode(header: &Header) -> Mode {
    match hd_field(header, "SO") {
        Some("coordinate") => Mode::Coordinate,
        _ => Mode::Query,
    }
}

fn run(job: &MarkdupJob, rt: &Runtime) -> anyhow::Result<MarkdupReport> {
    let size = std::fs::metadata(&job.input).map(|m| m.len()).unwrap_or(0);
    let progress = rt.progress("markdup", size);
    let mut input = Input::open(
        &job.input,
        rt.threads(),
        job.output.reference.as_deref(),
        &progress,
    )
    .with_context(|| job.input.clone())?;
    input.set_cancel(rt.cancel_flag().clone());
    let mode = match job.mode {
        Mode::Auto => detect_mode(&input.header),
        m => m,
    };
    let mut report = match mode {
        Mode::Coordinate => coordinate::run(job, rt, input, progress)?,
        _ => query::run(job, rt, input, progress)?,
    };
    report.mode = mode;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_from_hd() {
        let h = |t: &str| Header::from_sam_text(t.into()).unwrap();
        assert_eq!(
            detect_mode(&h("@HD\tVN:1.6\tSO:coordinate\n")),
            Mode::Coordinate
        );
        assert_eq!(detect_mode(&h("@HD\tVN:1.6\tSO:queryname\n")), Mode::Query);
        assert_eq!(
            detect_mode(&h("@HD\tVN:1.6\tSO:unsorted\tGO:query\n")),
            Mode::Query
        );
        assert_eq!(detect_mode(&h("@SQ\tSN:c\tLN:5\n")), Mode::Query);
        assert_eq!(hd_field(&h("@HD\tVN:1.6\tGO:query\n"), "GO"), Some("query"));
    }

    #[test]
    fn a_cancelled_job_leaves_no_output_in_either_mode() {
        let dir = tempfile::tempdir().unwrap();
        let rec = "r1\t0\tc\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n";
        for (so, mode) in [("coordinate", Mode::Coordinate), ("queryname", Mode::Query)] {
            let input = dir.path().join(format!("{so}.sam"));
            let sam = format!("@HD\tVN:1.6\tSO:{so}\n@SQ\tSN:c\tLN:100\n{rec}");
            std::fs::write(&input, sam).unwrap();
            let out = dir.path().join("out.bam");
            let mut job = MarkdupJob::new(input.to_str().unwrap(), OutputSpec::to_path(&out));
            job.picard.metrics = Some(dir.path().join("metrics.txt"));
            let rt = Runtime::with_threads(1).unwrap();
            rt.cancel();
            let e = job.run(&rt).unwrap_err();
            assert_eq!(
                e.kind(),
                sortase_exec::error::ErrorKind::Cancelled,
                "{mode:?}: {e}"
            );
            let left = |dir: &std::path::Path| -> Vec<String> {
                let names = std::fs::read_dir(dir)
                    .unwrap()
                    .map(|e| e.unwrap().file_name());
                let names = names.map(|n| n.to_string_lossy().into_owned());
                names.filter(|n| !n.ends_with(".sam")).collect()
            };
            assert!(
                left(dir.path()).is_empty(),
                "{mode:?}: {:?}",
                left(dir.path())
            );
            let report = job.run(&Runtime::with_threads(1).unwrap()).unwrap();
            assert_eq!((report.mode, report.records), (mode, 1));
            assert!(!left(dir.path()).is_empty());
            for n in left(dir.path()) {
                std::fs::remove_file(dir.path().join(n)).unwrap();
            }
        }
    }
}
