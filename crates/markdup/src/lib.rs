//! Duplicate marking on raw BAM records.
//!
//! - [`samblaster`]: samblaster 0.1.26's algorithm for query-grouped input (aligner output: all records
//!   of a read name together). Signatures from each end's orientation, reference and unclipped 5'
//!   position (plus library); the first group seen with a signature is kept, later ones get 0x400.
//! - [`picard`]: Picard MarkDuplicates' algorithm for coordinate-sorted input (pairs and fragments
//!   by unclipped 5' ends and orientations per library, the representative chosen by base-quality
//!   score with Picard's tie-breaks, optical duplicates, the metrics file).
//! - [`job`]: the markdup job ([`job::MarkdupJob`]): the algorithm chosen from the input's `@HD`
//!   line, run over the input, the outputs and the runtime of crates/exec (re-exported by the
//!   `sortase` facade as `sortase::markdup`).
//! - [`agd`]: the markdup of an AGD dataset ([`agd::AgdMarkdupJob`], `sortase agd markdup`): the
//!   same algorithms over the dataset's chunks, the marks written as its `duplicate` group (its
//!   tasks: [`tasks::agd`]).

pub mod agd;
pub mod job;
pub mod picard;
pub mod samblaster;
pub mod tasks;
