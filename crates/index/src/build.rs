//! Errors of index building.

use crate::PushError;
use sortase_bam::BamError;

/// An error building an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The BAM could not be read.
    #[error(transparent)]
    Bam(#[from] BamError),
    /// A record could not be indexed.
    #[error("record {name}: {source}")]
    Push {
        /// Read name of the record.
        name: String,
        /// Why.
        source: PushError,
    },
    /// The caller's cancellation flag was set.
    #[error("interrupted")]
    Cancelled,
}
