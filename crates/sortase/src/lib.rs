//! sortase as a library: every command of the `sortase` binary is a typed job built from a plain,
//! serialisable spec and run on an explicit [`Runtime`] (its own thread pool, a [`MemoryPool`] handed
//! out as reservations, the temporary directory, a cancellation flag and a progress sink). The CLI,
//! the Python package and the Dask driver are faces of this crate; none of them holds engine code.
//!
//! Outputs are written under temporary names and renamed on success, so a failed or cancelled job
//! leaves neither partial output nor temporary files. Nothing here prints or reads the environment:
//! warnings come back in the job's report.

pub mod bam_ranges;
pub mod bgzip;
pub mod error;
pub mod faidx;
pub mod fetch;
pub mod files;
pub mod index;
pub mod input;
pub mod memory;
pub mod merge;
pub mod options;
pub mod progress;
pub mod range_output;
pub mod runtime;
pub mod snp_pileup;
pub mod sort;
pub mod stats;
mod stream;
#[cfg(test)]
mod test_data;
pub mod view;
pub mod writer;

pub use bgzip::{BgzipJob, BgzipMode, BgzipReport};
pub use error::{Error, ErrorKind, Result};
pub use faidx::{FaidxJob, FaidxReport};
pub use fetch::{FetchJob, FetchReport, FetchRequest, LocJob, LocReport};
pub use index::{IndexJob, IndexPart, IndexPlan, IndexReport, IndexTask};
pub use memory::{MemoryPool, Reservation};
pub use merge::{MergeJob, MergeMethod, MergeReport};
pub use options::{Order, OutputSpec, Phase, Program};
pub use progress::{Progress, ProgressSink};
pub use runtime::{CancelFlag, Runtime, RuntimeBuilder};
pub use snp_pileup::{SnpPileupJob, SnpPileupPart, SnpPileupPlan, SnpPileupReport, SnpPileupTask};
pub use sort::{SortJob, SortReport};
pub use stats::{
    FlagstatJob, FlagstatPart, FlagstatPlan, FlagstatReport, FlagstatTask, IdxstatsJob,
    IdxstatsReport, IdxstatsRow,
};
pub use view::{ViewJob, ViewReport};
