//! Errors of the BGZF engine. Every variant names the compressed byte offset of the block at fault.

/// An error reading or writing BGZF.
#[derive(Debug, thiserror::Error)]
pub enum BgzfError {
    /// The bytes at `offset` are not a BGZF block header.
    #[error("not a BGZF block at byte offset {offset}: {reason}")]
    BadHeader {
        /// Compressed offset of the would-be block.
        offset: u64,
        /// What was wrong.
        reason: &'static str,
    },
    /// The file ends inside a block.
    #[error(
        "truncated BGZF block at byte offset {offset}: expected {expected} bytes, found {found}"
    )]
    Truncated {
        /// Compressed offset of the block.
        offset: u64,
        /// Block size from its header.
        expected: usize,
        /// Bytes present.
        found: usize,
    },
    /// DEFLATE data could not be inflated.
    #[error("corrupt BGZF block at byte offset {offset}: invalid DEFLATE data")]
    Inflate {
        /// Compressed offset of the block.
        offset: u64,
    },
    /// The inflated data does not match the block's CRC32 or ISIZE.
    #[error("corrupt BGZF block at byte offset {offset}: {what} mismatch (stored {stored:#x}, computed {computed:#x})")]
    Checksum {
        /// Compressed offset of the block.
        offset: u64,
        /// `CRC32` or `ISIZE`.
        what: &'static str,
        /// Value in the footer.
        stored: u32,
        /// Value of the data.
        computed: u32,
    },
    /// A block of more than 64 KiB was given to the deflater.
    #[error("BGZF block data of {len} bytes exceeds the 65536-byte limit")]
    BlockTooLarge {
        /// Bytes given.
        len: usize,
    },
    /// A `.gzi` index is malformed.
    #[error("invalid .gzi index: {0}")]
    Gzi(String),
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<BgzfError> for std::io::Error {
    fn from(e: BgzfError) -> Self {
        match e {
            BgzfError::Io(io) => io,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other),
        }
    }
}
