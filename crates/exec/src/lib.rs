//! The execution layer below sortase's jobs (the model is DataFusion's `datafusion-execution`):
//! the [`Runtime`] a job runs on (its own thread pool, a [`MemoryPool`] handed out as reservations,
//! the temporary directory, a cancellation flag and a progress sink), the library's [`Error`],
//! private temporary files renamed into place on success ([`files`]), the source every job reads
//! records from (any alignment input opened as one stream of batches, [`input`], or cut into byte
//! ranges of whole BGZF blocks or CRAM containers, [`bam_ranges`], [`cram_ranges`], either as one
//! [`file_ranges::FileRange`] for counting tasks, after
//! [`probe`] has looked at it) and the
//! sink it writes them to: the output options ([`OutputSpec`]), their resolution as samtools does it
//! ([`output`]: format, level, index target, temporary names) and the writer ([`writer`]), or, for
//! output made range by range on many threads, [`range_output`]. Range tasks write their ranges into
//! part files ([`parts`]) with their serialised forms ([`wire`]), which [`assemble`] lays out into
//! the output; [`proof`] sums the records read and written (`--checksums`). [`sorting`] is the
//! frame of a job that sorts out of core (the sorter's share of the memory pool, its temporary
//! runs, its final phase). [`stream`] holds the byte streams of the bgzip, faidx, loc and fetch
//! jobs (cancellable readers and writers, small files written through a temporary name, `.gzi`
//! files, FASTA errors as kinds). [`task`] is the task protocol's trait ([`task::Task`]: kind,
//! run, byte spans read, files written), so that the crates above implement it for their tasks;
//! the registry of kinds is the facade's. [`agd`] is the AGD dataset as a source and a sink (its
//! chunks read as record batches or counted on their `results` columns, chunks and extra column
//! groups written into a dataset); [`fastq`] is FASTQ as a source of unmapped records, as
//! `samtools import` reads it.
//!
//! Nothing here knows a job: the `sortase` crate builds its jobs on these pieces.

pub mod agd;
pub mod assemble;
pub mod bam_ranges;
pub mod cram_ranges;
pub mod error;
pub mod fastq;
pub mod file_ranges;
pub mod files;
pub mod indexed_bams;
pub mod input;
pub mod memory;
pub mod options;
pub mod output;
pub mod parts;
pub mod probe;
pub mod progress;
pub mod proof;
pub mod range_output;
pub mod runtime;
pub mod sorting;
pub mod stream;
pub mod task;
pub mod wire;
pub mod writer;

pub use bam_ranges::InputSpan;
pub use error::{Error, ErrorKind, Result};
pub use memory::{MemoryPool, Reservation};
pub use options::{Order, OutputSpec, Phase, Program};
pub use progress::{Progress, ProgressSink};
pub use runtime::{CancelFlag, Runtime, RuntimeBuilder};
