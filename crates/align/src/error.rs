//! The errors of the alignment crate.

use sortase_fasta::fastq::FastqError;
use std::path::PathBuf;

/// What can go wrong between FASTQ in and BAM records out.
#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    /// Reading a file failed (the I/O error is the source), or a FASTQ/FASTA record is malformed:
    /// the FASTQ parser's errors, which the aligner's own reads share.
    #[error(transparent)]
    File(#[from] FastqError),
    /// R1 and R2 do not pair up (count or names).
    #[error("{0}")]
    Pairing(String),
    /// The reference or index cannot be used.
    #[error("{path}: {what}")]
    Index {
        /// The index or FASTA file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// An option is invalid (unknown preset, malformed read group line).
    #[error("{0}")]
    Option(String),
    /// A read cannot be written as a BAM record (e.g. its name is longer than 254 bytes).
    #[error("read {name}: {what}")]
    Record {
        /// The read's name.
        name: String,
        /// What is wrong.
        what: String,
    },
    /// Reads from another source than FASTQ (a dataset) could not be read; the message names
    /// the source.
    #[error("{0}")]
    Source(String),
    /// The consumer of the aligned records failed or stopped the pipeline.
    #[error("{0}")]
    Stopped(String),
}

impl AlignError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        AlignError::File(FastqError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Record `record` (1-based) of `path` is malformed.
    pub(crate) fn format(path: &std::path::Path, record: u64, what: String) -> Self {
        AlignError::File(FastqError::Format {
            path: path.to_path_buf(),
            record,
            what,
        })
    }
}
