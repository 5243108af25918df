//! FASTQ in, raw BAM records out: minimap2 (the `minimap2` crate's presets, its C library through
//! `minimap2-sys`) on a fine-grained work queue, writing the records minimap2's own `-a` output
//! holds once samtools has parsed it.
//!
//! - [`fastq`]: FASTQ/FASTA records (plain, gzip, BGZF) as minimap2's parser reads them (the
//!   parser lives in crates/fasta, `sortase_fasta::fastq`).
//! - [`reads`]: fragments (read pairs from R1/R2, or one file) cut into chunks of reads.
//! - [`index`]: [`Aligner`], the index and options of a preset, and minimap2's SAM header.
//! - `encode` (private): minimap2's `mm_write_sam3` as BAM record bytes.
//! - [`mapper`]: one thread's mapping of a chunk into an [`AlignedBatch`].
//! - [`pipeline`]: the bounded work queue over all mapping threads, results in input order.
//! - [`job`]: `sortase fq2bam` on one machine ([`job::Fq2BamJob`]): the reads (FASTQ or an AGD
//!   dataset) through the pipeline, samblaster's or Picard's marking, the sorter and the output.
//! - [`tasks`]: the distributed fq2bam's scan, split and align tasks; [`cache`]: the worker
//!   process's index, loaded once for its align tasks.
//!
//! ```no_run
//! use sortase_align::{fastq::FastqReader, index::{Aligner, AlignerOptions}, pipeline, reads::FastqSource};
//! use std::path::Path;
//! let aligner = Aligner::load(Path::new("ref.fa"), &AlignerOptions::default())?;
//! let r1 = FastqReader::open(Path::new("r1.fq.gz"))?;
//! let r2 = FastqReader::open(Path::new("r2.fq.gz"))?;
//! let source = FastqSource::new(r1, Some(r2), true);
//! let stop = std::sync::atomic::AtomicBool::new(false);
//! let mut records = 0;
//! pipeline::run(&aligner, source, &pipeline::PipelineOptions::new(2), &stop, |_, _| (), |batch, ()| {
//!     records += batch.records.len();
//!     Ok::<_, sortase_align::AlignError>(())
//! })?;
//! # Ok::<(), sortase_align::AlignError>(())
//! ```

pub mod cache;
mod encode;
mod error;
pub use sortase_fasta::fastq;
pub mod index;
pub mod job;
pub mod mapper;
pub mod pipeline;
pub mod plan;
pub mod reads;
pub mod tasks;

pub use error::AlignError;
pub use index::{Aligner, AlignerOptions, Reference};
pub use mapper::AlignedBatch;

/// The version of the minimap2 library compiled in (its `MM_VERSION` macro, e.g. `2.29-r1283`).
///
/// ```
/// assert!(sortase_align::minimap2_version().starts_with("2."));
/// ```
pub fn minimap2_version() -> &'static str {
    minimap2_sys::MM_VERSION.to_str().unwrap_or("unknown")
}
