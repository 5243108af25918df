//! Operations over raw BAM records whose per-range results combine by addition, so they run on all
//! cores over byte ranges (see `sortase_index::range`).

pub mod flagstat;
pub mod idxstats;
