//! Runs of whole containers of a CRAM file as units of work: CRAM containers decode independently,
//! so a counting job cuts the file into runs ([`sortase_cram::plan_container_ranges`], from the
//! container headers alone) and decodes each run with its own htslib reader on one of the runtime's
//! threads. htslib's own pool (one reader, `-@N`) leaves the conversion of every record to `bam1_t`
//! and the counting on the reading thread; runs decode, convert and count on every thread.
//!
//! Runs also go out as serialisable [`CramSlice`]s, the range tasks of a distributed driver.

use crate::bam_ranges::RANGES_PER_THREAD;
use crate::runtime::Runtime;
use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_bam::{BamError, Header};
use sortase_cram::{ContainerRange, Core, CramReader, Fields, ReadOptions};
use std::path::{Path, PathBuf};

/// Records between two checks of the cancel flag.
pub const CANCEL_EVERY: u32 = 1 << 14;

/// Runs `add` over the fixed fields of every record of the CRAM file at `path`, decoding only
/// `fields`, on `rt.threads()` threads: one accumulator per run of containers (made by `new` from
/// the number of references), returned in file order with the header. `None` when the file has no
/// records (the caller reads it as a stream). Checks `rt`'s cancellation every [`CANCEL_EVERY`]
/// records. An error from `add` stops the scan.
pub fn scan<T: Send>(
    path: &Path,
    rt: &Runtime,
    fields: Fields,
    new: impl Fn(usize) -> T + Sync,
    add: impl Fn(&mut T, &Core) -> Result<(), BamError> + Sync,
) -> Result<Option<(Header, Vec<T>)>> {
    let ranges = sortase_cram::plan_container_ranges(path, rt.threads() * RANGES_PER_THREAD)?;
    if ranges.is_empty() {
        return Ok(None);
    }
    let parts = rt.install(|| {
        ranges
            .par_iter()
            .map(|range| scan_range(path, range, rt, fields, &new, &add))
            .collect::<Result<Vec<_>>>()
    })?;
    rt.check_cancelled()?;
    let mut parts = parts.into_iter();
    let (header, first) = parts.next().expect("at least one range");
    let mut all = vec![first];
    all.extend(parts.map(|(_, acc)| acc));
    Ok(Some((header, all)))
}

/// Runs `add` over the records of one run of containers (see [`scan`]), with a fresh accumulator.
pub fn scan_range<T>(
    path: &Path,
    range: &ContainerRange,
    rt: &Runtime,
    fields: Fields,
    new: impl Fn(usize) -> T,
    add: impl Fn(&mut T, &Core) -> Result<(), BamError>,
) -> Result<(Header, T)> {
    let options = ReadOptions {
        reference: None,
        threads: 0,
        fields,
    };
    let (header, mut reader) = CramReader::open_range(path, &options, range)?;
    let mut acc = new(header.references().len());
    let mut stopped = None;
    let mut seen = 0u32;
    let r = reader.for_each_core(|r| {
        seen = seen.wrapping_add(1);
        if seen.is_multiple_of(CANCEL_EVERY) {
            if let Err(e) = rt.check_cancelled() {
                stopped = Some(e);
                return Err(BamError::Cram("stopped".into()));
            }
        }
        add(&mut acc, r)
    });
    if let Some(e) = stopped {
        return Err(e.into());
    }
    r.with_context(|| format!("containers from byte {}", range.offset))?;
    Ok((header, acc))
}

/// One run of whole containers of a CRAM file, as a serialisable unit of work (a range task that
/// another process or machine runs). Container boundaries come from the container headers, so a
/// run never starts inside a container and needs no fallback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CramSlice {
    /// The CRAM file.
    pub input: PathBuf,
    /// The slice's number in file order (0-based).
    pub part: usize,
    /// End of the header container: a task reads bytes `0..header_end` (file definition and SAM
    /// header), then `offset..offset + bytes`.
    pub header_end: u64,
    /// File offset of the run's first container.
    pub offset: u64,
    /// Bytes of the run's containers.
    pub bytes: u64,
    /// Records in the run.
    pub records: u64,
}

impl CramSlice {
    /// The run of containers.
    pub fn range(&self) -> ContainerRange {
        ContainerRange {
            offset: self.offset,
            bytes: self.bytes,
            records: self.records,
        }
    }
}

/// About `n` slices covering the records of the CRAM file at `input` (none if it has no records).
pub fn plan_slices(input: &Path, n: usize) -> Result<Vec<CramSlice>> {
    let plan = sortase_cram::scan_containers(input, n)?;
    Ok(plan
        .ranges
        .iter()
        .enumerate()
        .map(|(part, r)| CramSlice {
            input: input.to_path_buf(),
            part,
            header_end: plan.header_end,
            offset: r.offset,
            bytes: r.bytes,
            records: r.records,
        })
        .collect())
}
