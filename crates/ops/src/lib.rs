//! Operations over raw BAM records: counters whose per-range results combine by addition, so they run
//! on all cores over byte ranges (see `sortase_index::range`), the multi-BAM SNP pileup, and
//! samtools view's record filters (flags, BED regions, read groups, tags, names, expressions).

pub mod filter;
pub mod flagstat;
pub mod idxstats;
pub mod pileup;
pub mod summary;
