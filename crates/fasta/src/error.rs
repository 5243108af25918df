//! Errors of the FASTA/FASTQ layer. Format errors name the line and, where known, the sequence.

/// An error indexing or reading FASTA/FASTQ.
#[derive(Debug, thiserror::Error)]
pub enum FastaError {
    /// The text breaks the FASTA/FASTQ rules htslib's `fai_build_core` enforces.
    #[error("line {line}: {reason}")]
    Format {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// The file holds no complete record.
    #[error("{0}")]
    Incomplete(String),
    /// An index file (`.fai`, `.loc`, `.gzi`) is malformed or does not fit the data.
    #[error("{0}")]
    BadIndex(String),
    /// A requested byte range lies (partly) past the end of the data.
    #[error("bytes {offset}..{end} requested but the uncompressed data ends at {len}")]
    PastEnd {
        /// Start of the range.
        offset: u64,
        /// End of the range.
        end: u64,
        /// Uncompressed length.
        len: u64,
    },
    /// BGZF decoding failed.
    #[error(transparent)]
    Bgzf(#[from] sortase_bgzf::BgzfError),
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl FastaError {
    pub(crate) fn format(line: u64, reason: impl Into<String>) -> Self {
        Self::Format {
            line,
            reason: reason.into(),
        }
    }
}
