//! Sorting raw BAM records as samtools sort does: coordinate, read name (natural or lexicographic),
//! tag and template-coordinate orders, stable, in memory when the budget allows, otherwise through LZ4 temporary runs that
//! are compacted in the background so the final merge opens a bounded number of sources.
//!
//! ```
//! use sortase_sort::{SortOptions, SortOrder, Sorter};
//! let dir = std::env::temp_dir();
//! let sorter = Sorter::new(SortOptions {
//!     order: SortOrder::Coordinate,
//!     memory: 1 << 20,
//!     temp_dir: dir,
//!     max_fan_in: 64,
//!     ranges: Default::default(),
//! });
//! let mut out = Vec::new();
//! let stats = sorter.finish(|_| {}, |r| { out.extend_from_slice(r); Ok(()) }).unwrap();
//! assert_eq!(stats.records, 0);
//! ```

mod final_merge;
pub mod merge;
pub mod merge_files;
mod name_key;
pub mod order;
pub mod ranges;
pub mod run;
mod sorter;
pub mod template;

pub use final_merge::{
    end_offset, open_run_from, ordered_tasks, start_block, RangeRecords, RangeSource,
};

pub use order::SortOrder;
pub use sorter::{sort_batches, Budget, FixedBudget, SortOptions, SortStats, Sorter};
pub use template::TemplateOrder;

use std::path::{Path, PathBuf};

/// Errors of the sort library.
#[derive(Debug, thiserror::Error)]
pub enum SortError {
    /// Reading or writing a temporary file failed.
    #[error("temporary file {path}")]
    Temp {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A temporary run does not read back as written (disk or memory corruption).
    #[error("temporary file {path}: block at byte {offset}: {what}")]
    CorruptRun {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad block.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// Writing the output failed (raised by the caller's `emit`).
    #[error(transparent)]
    Output(#[from] std::io::Error),
    /// Reading an input failed (the message names the file).
    #[error("{0}")]
    Input(String),
    /// An input is not in the order a fast path relies on (the caller falls back to a slower path
    /// that handles it, e.g. `merge` of unsorted inputs); the message names the file.
    #[error("{0}")]
    Unordered(String),
    /// The caller cancelled the sort (its flag, [`SortOptions::cancel`], was set).
    #[error("interrupted")]
    Cancelled,
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl SortError {
    fn temp(path: &Path, source: std::io::Error) -> Self {
        SortError::Temp {
            path: path.to_path_buf(),
            source,
        }
    }
}
