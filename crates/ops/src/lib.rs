//! Operations over raw BAM records: counters whose per-range results combine by addition, so they run
//! on all cores over byte ranges (see `sortase_index::range`), and the multi-BAM SNP pileup.

pub mod flagstat;
pub mod idxstats;
pub mod pileup;
