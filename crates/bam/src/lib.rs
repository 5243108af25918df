//! The BAM layer: raw record views, headers, the record splitter, SAM text in and out, CRAM adapters.
//!
//! Records stay as raw BAM bytes from input to output ("blit"); only the fields an operation needs are
//! decoded, through [`RecordRef`]. Batches of records live in one contiguous buffer ([`RecordBatch`]).

pub mod aux;
mod batch;
pub mod bin;
pub mod checksum;
pub mod cigar;
mod error;
pub mod flags;
mod header;
pub mod header_merge;
pub mod query;
mod record;
pub mod sam_format;
pub mod sam_parse;
mod sam_read;
mod stream;

pub use batch::RecordBatch;
pub use error::BamError;
pub use header::{Header, Reference, MAX_HEADER_TEXT, MAX_REFERENCES};
pub use record::{RecordBuf, RecordMut, RecordRef, FIXED_LEN};
pub use sam_read::SamReader;
pub use stream::{
    check_block_size, check_record, virtual_offset, BlockEntry, ChunkSource, ChunkStream,
    MAX_RECORD_BYTES,
};
