//! End-to-end differential tests: `sortase view` against samtools (the
//! oracle: pysam's bundled samtools via `tests/samtools`, or `$SORTASE_ORACLE`).
//!
//! Without the oracle (or the htslib test corpus) tests print `SKIP` and pass,
//! unless `SORTASE_REQUIRE_SAMTOOLS=1` or `CI=true`, where they fail.
//! `SORTASE_E2E_BIN` runs the suite against another sortase binary.

#[path = "e2e/agd.rs"]
mod agd;
#[path = "e2e/agd_fastq.rs"]
mod agd_fastq;
#[path = "e2e/agd_ops.rs"]
mod agd_ops;
#[path = "e2e/agd_view.rs"]
mod agd_view;
#[path = "e2e/bgzf.rs"]
mod bgzf;
#[path = "e2e/checks.rs"]
mod checks;
#[path = "e2e/checksum.rs"]
mod checksum;
#[path = "e2e/common.rs"]
mod common;
#[path = "e2e/cram_idxstats.rs"]
mod cram_idxstats;
#[path = "e2e/cram_jobs.rs"]
mod cram_jobs;
#[path = "e2e/deflate_levels.rs"]
mod deflate_levels;
#[path = "e2e/disk_full.rs"]
mod disk_full;
#[path = "e2e/edge_cases.rs"]
mod edge_cases;
#[path = "e2e/fasta.rs"]
mod fasta;
#[path = "e2e/fq2bam.rs"]
mod fq2bam;
#[path = "e2e/hostile_input.rs"]
mod hostile_input;
#[path = "e2e/markdup_coord.rs"]
mod markdup_coord;
#[path = "e2e/markdup_metrics.rs"]
mod markdup_metrics;
#[path = "e2e/markdup_query.rs"]
mod markdup_query;
#[path = "e2e/merge.rs"]
mod merge;
#[path = "e2e/oracle.rs"]
mod oracle;
#[path = "e2e/pipe_level.rs"]
mod pipe_level;
#[path = "e2e/progress.rs"]
mod progress;
#[path = "e2e/remote.rs"]
mod remote;
#[path = "e2e/snp_pileup.rs"]
mod snp_pileup;
#[path = "e2e/sort.rs"]
mod sort;
#[path = "e2e/sort_template.rs"]
mod sort_template;
#[path = "e2e/sort_verify.rs"]
mod sort_verify;
#[path = "e2e/stats.rs"]
mod stats;
#[path = "e2e/stats_plot.rs"]
mod stats_plot;
#[path = "e2e/temp_files.rs"]
mod temp_files;
#[path = "e2e/version.rs"]
mod version;
#[path = "e2e/view_corpus.rs"]
mod view_corpus;
#[path = "e2e/view_corpus_files.rs"]
mod view_corpus_files;
#[path = "e2e/view_edge.rs"]
mod view_edge;
#[path = "e2e/view_errors.rs"]
mod view_errors;
#[path = "e2e/view_filters.rs"]
mod view_filters;
#[path = "e2e/view_options.rs"]
mod view_options;
#[path = "e2e/view_query.rs"]
mod view_query;
