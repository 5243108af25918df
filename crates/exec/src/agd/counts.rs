//! A dataset's `results` columns counted into crates/ops' counters: flagstat's ([`flagstat_chunk`],
//! `flag`, `ref_id`, `next_ref_id`, `mapq`, with the `duplicate` group applied) and idxstats'
//! ([`idxstats_chunks`], `ref_id` and `flag`; the `duplicate` group is not read, idxstats does not
//! look at flag 0x400). Only those columns of each chunk's `results` file are read; the reports
//! are the jobs' (the facade's `stats`).

use super::columns;
use crate::runtime::Runtime;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt16Type, UInt8Type};
use arrow_array::Array;
use rayon::prelude::*;
use sortase_agd::{self as agd, ChunkEntry, Group};
use sortase_ops::flagstat::FlagStat;
use sortase_ops::idxstats::IdxStats;
use std::path::Path;

/// The columns flagstat reads.
const FLAGSTAT_COLUMNS: [&str; 4] = ["flag", "ref_id", "next_ref_id", "mapq"];

/// Flag statistics of one chunk, with the dataset's `duplicate` group applied if it has one.
pub fn flagstat_chunk(
    dir: &Path,
    duplicate: Option<&agd::ExtraGroup>,
    chunk: &agd::ChunkEntry,
) -> anyhow::Result<FlagStat> {
    let file = agd::read_group(dir, Group::Results, chunk, Some(&FLAGSTAT_COLUMNS))?;
    let b = &file.batch;
    let column = |name: &str| file.column(name);
    let flag = column("flag")?.as_primitive::<UInt16Type>();
    let ref_id = column("ref_id")?.as_primitive::<Int32Type>();
    let next_ref_id = column("next_ref_id")?.as_primitive::<Int32Type>();
    let mapq = column("mapq")?.as_primitive::<UInt8Type>();
    let duplicate = columns::duplicate_column(dir, duplicate, chunk)?;
    let mut counts = FlagStat::default();
    // HOT: once per record, four plain arrays (no nulls in these columns).
    for i in 0..b.num_rows() {
        let f = match &duplicate {
            Some(d) if d.is_valid(i) && d.value(i) => flag.value(i) | sortase_bam::flags::DUPLICATE,
            Some(d) if d.is_valid(i) => flag.value(i) & !sortase_bam::flags::DUPLICATE,
            _ => flag.value(i),
        };
        counts.add_fields(f, ref_id.value(i), next_ref_id.value(i), mapq.value(i));
    }
    Ok(counts)
}

/// The per-reference idxstats counters of `chunks`, one per chunk in chunk order (the first error
/// in chunk order, not the first in time, as export).
pub fn idxstats_chunks(
    dir: &Path,
    chunks: &[ChunkEntry],
    n_ref: usize,
    rt: &Runtime,
) -> anyhow::Result<Vec<IdxStats>> {
    let parts: Vec<anyhow::Result<IdxStats>> = rt.install(|| {
        chunks
            .par_iter()
            .map(|c| idxstats_chunk(dir, c, n_ref))
            .collect()
    });
    parts.into_iter().collect()
}

/// The columns idxstats reads.
const IDXSTATS_COLUMNS: [&str; 2] = ["flag", "ref_id"];

/// The idxstats counters of one chunk.
fn idxstats_chunk(dir: &Path, chunk: &ChunkEntry, n_ref: usize) -> anyhow::Result<IdxStats> {
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
