//! sortase as a library: every command of the `sortase` binary is a typed job built from a plain,
//! serialisable spec and run on an explicit [`Runtime`] (its own thread pool, a [`MemoryPool`] handed
//! out as reservations, the temporary directory, a cancellation flag and a progress sink). The CLI,
//! the Python package and the Dask driver are faces of this crate; none of them holds engine code.
//!
//! Outputs are written under temporary names and renamed on success, so a failed or cancelled job
//! leaves neither partial output nor temporary files. Nothing here prints or reads the environment:
//! warnings come back in the job's report.
//!
//! Sort a file and count its flags, from Rust:
//!
//! ```
//! use sortase::{FlagstatJob, OutputSpec, Runtime, SortJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr2\t0\tchr1\t50\t60\t4M\t*\t0\t0\tACGT\tIIII\nr1\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! # let sorted = dir.path().join("sorted.bam");
//! let rt = Runtime::builder().threads(4).memory(1 << 30).build()?;
//!
//! let mut sort = SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(&sorted));
//! sort.output.write_index = true; // sorted.bam.csi, built while writing
//! let report = sort.run(&rt)?;
//! assert_eq!(report.records, 2);
//!
//! let stats = FlagstatJob::new(&sorted).run(&rt)?;
//! assert_eq!(stats.counts.mapped[0], 1); // [passed QC, failed QC], as samtools counts them
//! println!("{}", stats.to_json()); // samtools flagstat -O json
//! # Ok::<(), sortase::Error>(())
//! ```
//!
//! The range work of sort, merge, index, flagstat and snp-pileup is also exposed as serialisable
//! tasks (`plan` → tasks → `finish`), which run on any thread, process or machine and give the same
//! bytes as `run`: see [`IndexJob::plan`], [`FlagstatJob::plan`], [`SnpPileupJob::plan`].

pub mod agd;
pub mod agd_tasks;
pub mod bgzip;
pub mod checksum;
pub mod faidx;
pub mod fetch;
/// `sortase fq2bam` on one machine: crates/align `job.rs`.
pub use sortase_align::job as fq2bam;
pub mod index;
/// The markdup job (crates/markdup `job`), under its old path.
pub use sortase_markdup::job as markdup;
/// `sortase merge` and its key-range tasks: crates/sortjobs `merge.rs`.
pub use sortase_sortjobs::merge;
/// Inputs given as `s3://` or `http(s)://` URLs (crates/io): every job opens its inputs through
/// [`sortase_io::Source`], so a URL works wherever a BAM path does.
pub mod remote {
    pub use sortase_io::{
        alias_paths, fetched, is_url, redacted, set_s3_options, use_s3_settings, Aliases,
        S3Options, Source,
    };
}
pub mod snp_pileup;
/// `sortase sort`: crates/sortjobs `sort.rs`.
pub use sortase_sortjobs::sort;
pub mod stats;
pub mod summary;
pub mod tasks;
#[cfg(test)]
mod test_data;
pub mod verify;
pub mod versions;
pub mod view;

// The execution layer lives in `sortase-exec`; its modules keep their old paths here.
use sortase_exec::wire;
pub use sortase_exec::{
    bam_ranges, cram_ranges, error, files, input, memory, options, output, progress, proof,
    range_output, runtime, writer,
};

pub use agd::{AgdAddColumnJob, AgdColumnsReport, AgdDropColumnJob, AgdMarkdupJob};
pub use agd::{AgdExportJob, AgdExportReport, AgdImportJob, AgdImportReport};
pub use bam_ranges::InputSpan;
pub use bgzip::{BgzipJob, BgzipMode, BgzipReport};
pub use checksum::{ChecksumJob, ChecksumReport};
pub use error::{Error, ErrorKind, Result};
pub use faidx::{FaidxJob, FaidxReport};
pub use fetch::{FetchJob, FetchReport, FetchRequest, LocJob, LocReport};
pub use fq2bam::{DuplicateMarking, Fq2BamJob, Fq2BamReport};
pub use index::{IndexJob, IndexPart, IndexPlan, IndexReport, IndexTask};
pub use markdup::{MarkdupJob, MarkdupReport};
pub use memory::{MemoryPool, Reservation};
pub use merge::{
    MergeJob, MergeMethod, MergeRangeOptions, MergeReport, MergeTask, MergeTaskOutput,
    MergeTaskPlan,
};
pub use options::{Order, OutputSpec, Phase, Program};
pub use progress::{Progress, ProgressSink};
pub use runtime::{CancelFlag, Runtime, RuntimeBuilder};
pub use snp_pileup::{SnpPileupJob, SnpPileupPart, SnpPileupPlan, SnpPileupReport, SnpPileupTask};
pub use sort::{SortJob, SortReport};
pub use stats::{
    FileRange, FlagstatJob, FlagstatPart, FlagstatPlan, FlagstatReport, FlagstatTask, IdxstatsJob,
    IdxstatsPart, IdxstatsPlan, IdxstatsReport, IdxstatsRow, IdxstatsTask,
};
pub use summary::{SummaryJob, SummaryReport};
pub use verify::{Unsorted, VerifyJob, VerifyReport};
pub use view::{ViewJob, ViewReport};
