//! Alignment records into [Apache Arrow](https://arrow.apache.org/) record batches, on all cores.
//!
//! A BAM is cut into byte ranges (the range planner's boundary finder, or an index region's chunks)
//! that worker threads inflate and decode into Arrow columns, straight from the raw record bytes;
//! the batches come out in file order, in bounded memory (a window of ranges in flight). SAM and
//! CRAM are read as one stream. Only the columns asked for are decoded.
//!
//! The columns and their meaning, as pysam's `AlignedSegment` gives them ([`Field`]):
//!
//! | column  | Arrow type                  | pysam                                   |
//! |---------|-----------------------------|-----------------------------------------|
//! | `qname` | utf8                        | `query_name`                            |
//! | `flag`  | uint16                      | `flag`                                  |
//! | `rname` | dictionary<int32, utf8>     | `reference_name` (null: unplaced)       |
//! | `pos`   | int64, 1-based, 0 = unset   | `reference_start + 1` (SAM's POS)       |
//! | `mapq`  | uint8                       | `mapping_quality`                       |
//! | `cigar` | utf8                        | `cigarstring` (null: none)              |
//! | `rnext` | dictionary<int32, utf8>     | `next_reference_name` (null: none)      |
//! | `pnext` | int64, 1-based, 0 = unset   | `next_reference_start + 1` (SAM's PNEXT)|
//! | `tlen`  | int32                       | `template_length`                       |
//! | `seq`   | utf8                        | `query_sequence` (null: none)           |
//! | `qual`  | utf8, Phred+33              | `qual` (null: none)                     |
//! | `tags`  | utf8                        | the other tags as SAM text, tab-joined  |
//! | `XX`    | by [`TagKind`]              | `get_tag("XX")` (null: absent)          |

mod buffers;
mod columns;
mod job;
mod pipeline;
pub mod plan;
pub mod schema;
mod tags;

pub use columns::BatchBuilder;
pub use job::{read_header, BatchStream, ReadJob, ReadReport};
pub use pipeline::{BATCH_BYTES, BATCH_ROWS};
pub use schema::{Field, Layout, TagColumn, TagKind};
