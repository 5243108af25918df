//! The library's integration tests, one binary: each module was a test binary of its own, and
//! each linked the whole library (arrow, parquet, htslib, minimap2) again: five links of ~60-80 MB
//! in every CI run for ~1,100 lines of tests.

mod agd_markdup;
mod agd_round_trip;
mod agd_sort_tasks;
mod fixtures;
mod fq2bam;
mod markdup_coordinate_tasks;
mod markdup_tasks;
mod merge_tasks;
mod runtime;
mod sort_tasks;
mod task_plans;
// The library's unit-test inputs (src/test_data.rs), for the tests that moved out of the sort.
#[allow(dead_code)]
#[path = "../../src/test_data.rs"]
mod test_data;
