//! The errors of the alignment crate.

use std::path::PathBuf;

/// What can go wrong between FASTQ in and BAM records out.
#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    /// Reading a file failed (including a truncated or corrupt gzip stream); the I/O error is the
    /// source.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A FASTQ/FASTA record is malformed.
    #[error("{path}: record {record}: {what}")]
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based number of the record.
        record: u64,
        /// What is wrong.
        what: String,
    },
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

impl From<sortase_fasta::fastq::FastqError> for AlignError {
    fn from(e: sortase_fasta::fastq::FastqError) -> Self {
        use sortase_fasta::fastq::FastqError;
        match e {
            FastqError::Io { path, source } => AlignError::Io { path, source },
            FastqError::Format { path, record, what } => AlignError::Format { path, record, what },
        }
    }
}

impl AlignError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        AlignError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
