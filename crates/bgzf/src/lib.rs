//! BGZF, the blocked gzip format of BAM, bgzipped FASTA/FASTQ and tabix files (SAM spec §4.1).
//!
//! A BGZF file is a series of independent gzip members of at most 64 KiB each, so every block can be
//! inflated or deflated on its own. This crate exploits that: [`ParallelReader`] reads large sequential
//! runs of blocks, inflates them on N threads and delivers them in order; [`ParallelWriter`] cuts an
//! uncompressed stream into blocks, deflates them on N threads and writes them in order. Both keep a
//! bounded number of batches in flight, so memory stays flat whatever the file size.
//!
//! [`scanner`] finds verified block starts from any byte offset (for splitting a file without an index),
//! and [`gzi`] reads and writes the `.gzi` index of bgzip.
//!
//! Nothing here knows about BAM: record-level logic lives in `sortase-bam`.

mod block;
mod cutter;
pub mod deflate;
pub mod direct_io;
mod encoder;
mod error;
pub mod gzi;
mod level;
pub mod pool;
mod reader;
pub mod scanner;
mod seek;
mod writer;

pub use block::{
    deflate_block, inflate_block, inflate_block_prefix, parse_header, BlockHeader, BLOCK_DATA_MAX,
    BLOCK_HEADER_LEN, BLOCK_MAX, EOF_MARKER,
};
pub use deflate::{Deflater, ISAL_VERSION};
pub use encoder::{BlockEncoder, EncodedBlocks, BLOCKS_PER_DEFLATE};
pub use error::BgzfError;
pub use level::CompressionLevel;
pub use reader::{BlockMeta, Chunk, ChunkBuffers, ParallelReader, ReaderOptions, CHUNK_HEADROOM};
pub use seek::SeekReader;
pub use writer::{BlockLog, ParallelWriter, WriterOptions};

/// The version of the libdeflate compiled into this crate (libdeflate.h's `LIBDEFLATE_VERSION_STRING`,
/// read by the build script from the header `libdeflate-sys` compiled; libdeflate has no run-time
/// version call).
///
/// ```
/// assert!(sortase_bgzf::LIBDEFLATE_VERSION.starts_with("1."));
/// ```
pub const LIBDEFLATE_VERSION: &str = env!("SORTASE_LIBDEFLATE_VERSION");

/// A BGZF virtual file offset: compressed offset of a block start << 16 | offset inside its data.
pub type VirtualPosition = u64;

/// Builds a virtual position from a compressed block offset and an offset inside the block's data.
///
/// ```
/// assert_eq!(sortase_bgzf::virtual_position(1, 2), (1 << 16) | 2);
/// ```
pub fn virtual_position(block_offset: u64, in_block: u16) -> VirtualPosition {
    (block_offset << 16) | u64::from(in_block)
}

/// Returns `true` when `bytes` start with a BGZF block header (gzip magic with the `BC` extra field).
///
/// ```
/// assert!(sortase_bgzf::is_bgzf(&sortase_bgzf::EOF_MARKER));
/// assert!(!sortase_bgzf::is_bgzf(b"@HD\tVN:1.6"));
/// ```
pub fn is_bgzf(bytes: &[u8]) -> bool {
    parse_header(bytes).is_ok()
}
