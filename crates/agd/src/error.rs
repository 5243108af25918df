//! The crate's error: every variant names the file it is about, in one line.

use std::path::PathBuf;

/// An error reading or writing a dataset.
#[derive(Debug, thiserror::Error)]
pub enum AgdError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A chunk file is missing.
    #[error("{}: missing (the manifest lists chunk {chunk})", path.display())]
    MissingChunk {
        /// The file.
        path: PathBuf,
        /// The chunk's index.
        chunk: usize,
    },
    /// A chunk file is truncated, not Parquet, or its columns are not the group's.
    #[error("{}: {message}", path.display())]
    BadChunk {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The manifest cannot be read, or disagrees with itself.
    #[error("{}: {message}", path.display())]
    BadManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A record cannot be stored (its fields are outside BAM's limits).
    #[error("record {ordinal}: {message}")]
    BadRecord {
        /// The record's ordinal in the chunk.
        ordinal: usize,
        /// What is wrong.
        message: String,
    },
    /// Parquet failed while writing.
    #[error("writing Parquet: {0}")]
    Write(#[from] parquet::errors::ParquetError),
}

impl AgdError {
    /// A [`AgdError::BadChunk`] for `path`.
    pub fn chunk(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        AgdError::BadChunk {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
