//! Errors of the BAM layer. Offsets are in the uncompressed stream, so they locate a record exactly.

/// An error reading, parsing or converting alignment records.
#[derive(Debug, thiserror::Error)]
pub enum BamError {
    /// The stream does not start with `BAM\1`.
    #[error("not a BAM file: bad magic {found:?} (expected \"BAM\\1\")")]
    BadMagic {
        /// The first bytes found.
        found: Vec<u8>,
    },
    /// The header is malformed.
    #[error("invalid BAM header: {0}")]
    Header(String),
    /// A record is malformed.
    #[error("invalid record at uncompressed offset {offset}: {reason}")]
    Record {
        /// Uncompressed offset of the record's `block_size` field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The stream ends inside a record.
    #[error("truncated record at uncompressed offset {offset}: block_size {block_size} runs past the end of the data ({available} bytes left)")]
    Truncated {
        /// Uncompressed offset of the record's `block_size` field.
        offset: u64,
        /// The record's stated size.
        block_size: u64,
        /// Bytes available.
        available: u64,
    },
    /// A SAM text line is malformed.
    #[error("line {line}: {reason}")]
    Sam {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// A byte range's end is not where the next range's first record starts: the boundary finder was
    /// fooled (for example by quality strings that look like records). Callers fall back to one range.
    #[error("range boundary at virtual offset {expected:#x} is not a record start (next record at {found:#x})")]
    RangeBoundary {
        /// The planned boundary.
        expected: u64,
        /// Where the next record really starts (`u64::MAX`: end of file).
        found: u64,
    },
    /// A CRAM conversion failed.
    #[error("CRAM: {0}")]
    Cram(String),
    /// A BGZF error.
    #[error(transparent)]
    Bgzf(#[from] sortase_bgzf::BgzfError),
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl BamError {
    pub(crate) fn record(offset: u64, reason: impl Into<String>) -> Self {
        Self::Record {
            offset,
            reason: reason.into(),
        }
    }
}
