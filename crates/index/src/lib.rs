//! BAM indexes: BAI/CSI built exactly as htslib builds them (byte-identical files), in parallel over
//! byte ranges of the BAM.

mod build;
mod builder;
pub mod khash;
mod parallel;
pub mod range;
mod save;
mod summary;

pub use build::IndexError;
pub use builder::{IndexBuilder, IndexFormat, PushError, Segment};
pub use parallel::{
    assemble, index_file, index_file_cancellable, index_file_with_progress, longest_reference,
    summarise_range, RecordsDone,
};
pub use summary::RangeSummary;
