//! sortase as a library: every command of the `sortase` binary is a typed job built from a plain,
//! serialisable spec and run on an explicit [`Runtime`] (its own thread pool, a [`MemoryPool`] handed
//! out as reservations, the temporary directory, a cancellation flag and a progress sink). The CLI,
//! the Python package and the Dask driver are faces of this crate; none of them holds engine code.
//!
//! Outputs are written under temporary names and renamed on success, so a failed or cancelled job
//! leaves neither partial output nor temporary files. Nothing here prints or reads the environment:
//! warnings come back in the job's report.

pub mod bgzip;
pub mod error;
pub mod faidx;
pub mod fetch;
pub mod files;
pub mod fq2bam;
pub mod input;
pub mod memory;
pub mod options;
pub mod progress;
pub mod range_output;
pub mod runtime;
pub mod sort;
mod stream;
pub mod writer;

pub use bgzip::{BgzipJob, BgzipMode, BgzipReport};
pub use error::{Error, ErrorKind, Result};
pub use faidx::{FaidxJob, FaidxReport};
pub use fetch::{FetchJob, FetchReport, FetchRequest, LocJob, LocReport};
pub use fq2bam::{DuplicateMarking, Fq2BamJob, Fq2BamReport};
pub use memory::{MemoryPool, Reservation};
pub use options::{Order, OutputSpec, Phase, Program};
pub use progress::{Progress, ProgressSink};
pub use runtime::{CancelFlag, Runtime, RuntimeBuilder};
pub use sort::{SortJob, SortReport};
