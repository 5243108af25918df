//! The markdup job cut into serialisable tasks (issue 29), for a driver that runs the pieces
//! anywhere and in any order: [`query`] (samblaster's mode, query-grouped input: count, map,
//! reduce, encode) and [`coordinate`] (Picard's mode, coordinate-sorted input: count, map, join,
//! reduce, encode); [`agd`] is a dataset's markdup (`agd markdup`), whose map tasks read runs of
//! chunks and whose reduce and join tasks are those two modes'. Every task implements [`sortase_exec::task::Task`] (`kinds.rs`); the facade's
//! registry (`sortase::tasks::KINDS`) decodes them by kind, and its `Plan` wraps their plans.

pub mod agd;
pub mod coordinate;
mod kinds;
pub mod query;
