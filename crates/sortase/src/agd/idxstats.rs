//! `sortase idxstats DATASET` ([`crate::IdxstatsJob`] of a dataset directory): samtools idxstats of
//! a dataset from two columns of its `results` group (`ref_id`, `flag`), chunks counted in parallel
//! and merged in chunk order.
//!
//! ```
//! use sortase::{AgdImportJob, IdxstatsJob, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
//! let rt = Runtime::with_threads(2)?;
//! let ds = dir.path().join("ds");
//! AgdImportJob::new(sam.to_str().unwrap(), &ds).run(&rt)?;
//! let report = IdxstatsJob::new(&ds).run(&rt)?;
//! assert_eq!(report.to_text(), "chr1\t100\t1\t0\n*\t0\t0\t1\n");
//! # Ok::<(), sortase::Error>(())
//! ```
//!
//! A dataset has no index, so the counts are those of samtools' `slow_idxstats` (what `sortase
//! idxstats` prints for the exported BAM without an index): per reference the records with and
//! without flag 0x4, then the `*` line for the records without a reference; a dataset whose
//! references come in more than one run fails with "file is not position sorted". The `duplicate`
//! group is not read (idxstats does not look at flag 0x400).

use super::open_manifest;
use crate::stats::{from_counts, IdxstatsReport};
use anyhow::Context;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt16Type};
use rayon::prelude::*;
use sortase_agd::{self as agd, ChunkEntry, Group, ReferenceEntry};
use sortase_bam::{Header, Reference};
use sortase_exec::error::Result;
use sortase_exec::runtime::Runtime;
use sortase_ops::idxstats::IdxStats;
use std::path::Path;

/// [`crate::IdxstatsJob::run`] of dataset `dir`: per-reference mapped and unmapped counts,
/// identical to `sortase idxstats` (and samtools idxstats) of the BAM `sortase agd export` writes.
pub(crate) fn idxstats(dir: &Path, rt: &Runtime) -> Result<IdxstatsReport> {
    let manifest = open_manifest(dir).with_context(|| format!("agd idxstats {}", dir.display()))?;
    let parts = count_chunks(dir, &manifest.chunks, manifest.references.len(), rt)
        .with_context(|| format!("agd idxstats {}", dir.display()))?;
    report(dir, &manifest.references, &parts)
}

/// The per-reference counters of `chunks`, one per chunk in chunk order (the first error in chunk
/// order, not the first in time, as export).
pub(crate) fn count_chunks(
    dir: &Path,
    chunks: &[ChunkEntry],
    n_ref: usize,
    rt: &Runtime,
) -> anyhow::Result<Vec<IdxStats>> {
    let parts: Vec<anyhow::Result<IdxStats>> = rt.install(|| {
        chunks
            .par_iter()
            .map(|c| count_chunk(dir, c, n_ref))
            .collect()
    });
    parts.into_iter().collect()
}

/// The columns idxstats reads.
const IDXSTATS_COLUMNS: [&str; 2] = ["flag", "ref_id"];

/// The counters of one chunk.
fn count_chunk(dir: &Path, chunk: &ChunkEntry, n_ref: usize) -> anyhow::Result<IdxStats> {
    let file = agd::read_group(dir, Group::Results, chunk, Some(&IDXSTATS_COLUMNS))?;
    let column = |name: &str| file.column(name);
    let flag = column("flag")?.as_primitive::<UInt16Type>();
    let ref_id = column("ref_id")?.as_primitive::<Int32Type>();
    let mut counts = IdxStats::new(n_ref);
    // HOT: once per record, two plain arrays (no nulls in these columns).
    for (i, &tid) in ref_id.values().iter().enumerate() {
        if !counts.add_fields(tid, flag.value(i)) {
            return Err(agd::AgdError::chunk(
                &file.path,
                format!("row {i}: ref_id {tid} is not one of the {n_ref} references"),
            )
            .into());
        }
    }
    Ok(counts)
}

/// The report from the counters of consecutive chunks in chunk order (samtools' text needs the
/// references' names and lengths only).
pub(crate) fn report(
    dir: &Path,
    references: &[ReferenceEntry],
    parts: &[IdxStats],
) -> Result<IdxstatsReport> {
    let header = Header::new(
        String::new(),
        references
            .iter()
            .map(|r| Reference {
                name: r.name.as_bytes().to_vec(),
                length: r.length,
            })
            .collect(),
    );
    from_counts(&dir.display().to_string(), &header, parts)
}
