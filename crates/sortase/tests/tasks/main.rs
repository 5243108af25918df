//! The library's integration tests, one binary: each module was a test binary of its own, and
//! each linked the whole library (arrow, parquet, htslib, minimap2) again: five links of ~60-80 MB
//! in every CI run for ~1,100 lines of tests.

mod agd_markdup;
mod agd_round_trip;
mod fixtures;
mod fq2bam;
mod markdup_coordinate_tasks;
mod markdup_tasks;
mod merge_tasks;
mod runtime;
mod sort_tasks;
mod task_plans;
