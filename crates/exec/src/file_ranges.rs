//! The parts of an alignment file that counting tasks read, whatever its format: byte ranges of
//! a BAM ([`crate::bam_ranges`]) or runs of containers of a CRAM file ([`crate::cram_ranges`]), as
//! one serialisable [`FileRange`]; [`scan`] counts a whole file over them on all of a runtime's
//! threads, and [`read_header`] reads either's header. Used by flagstat, idxstats and their tasks,
//! so that no job branches on the format.

use crate::bam_ranges::{self, BamSlice};
use crate::cram_ranges::{self, CramSlice};
use crate::error::Result;
use crate::runtime::Runtime;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::{BamError, Header, RecordRef};
use sortase_cram::{Core, Fields};
use std::path::Path;

/// The part of the file a counting task reads (JSON: `{"slice": ...}` or `{"cram": ...}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FileRange {
    /// A byte range of a BAM.
    Bam {
        /// The range.
        slice: BamSlice,
    },
    /// A run of containers of a CRAM file.
    Cram {
        /// The run.
        cram: CramSlice,
    },
}

impl FileRange {
    /// About `n` byte ranges of equal compressed size of a BAM (fewer for small files), or runs of
    /// whole containers of a CRAM file (none if it has no records).
    pub fn plan(input: &Path, n: usize) -> anyhow::Result<Vec<FileRange>> {
        if crate::input::is_cram(input) {
            let slices = cram_ranges::plan_slices(input, n)?;
            return Ok(slices
                .into_iter()
                .map(|cram| FileRange::Cram { cram })
                .collect());
        }
        let (_, slices) = bam_ranges::plan_slices(input, n)?;
        Ok(slices
            .into_iter()
            .map(|slice| FileRange::Bam { slice })
            .collect())
    }

    /// The range's number in file order.
    pub fn part(&self) -> usize {
        match self {
            FileRange::Bam { slice } => slice.part,
            FileRange::Cram { cram } => cram.part,
        }
    }

    /// The ranges to count instead when a task failed: the whole BAM as one range (see
    /// [`crate::bam_ranges`]); none for a CRAM file, whose runs start at container headers.
    pub fn fallback<'a>(ranges: impl Iterator<Item = &'a FileRange>) -> Option<Vec<FileRange>> {
        let slices: Vec<BamSlice> = ranges
            .filter_map(|r| match r {
                FileRange::Bam { slice } => Some(slice.clone()),
                FileRange::Cram { .. } => None,
            })
            .collect();
        if slices.is_empty() {
            return None;
        }
        let whole = bam_ranges::whole(&slices);
        Some(
            whole
                .into_iter()
                .map(|slice| FileRange::Bam { slice })
                .collect(),
        )
    }

    /// Counts the range's records into `new(n_ref)`: BAM records with `add`, CRAM records (only
    /// `fields` decoded) with `add_cram`.
    pub fn count<S>(
        &self,
        rt: &Runtime,
        fields: sortase_cram::Fields,
        new: impl Fn(usize) -> S,
        add: impl Fn(&mut S, &sortase_bam::RecordRef<'_>),
        add_cram: impl Fn(&mut S, &sortase_cram::Core) -> std::result::Result<(), BamError>,
    ) -> Result<S> {
        match self {
            FileRange::Bam { slice } => {
                let mut counts = new(slice.n_ref);
                slice
                    .for_each_batch(rt, |batch| batch.iter().for_each(|r| add(&mut counts, &r)))
                    .with_context(|| slice.input.display().to_string())?;
                Ok(counts)
            }
            FileRange::Cram { cram } => {
                let (_, counts) =
                    cram_ranges::scan_range(&cram.input, &cram.range(), rt, fields, new, add_cram)
                        .with_context(|| cram.input.display().to_string())?;
                Ok(counts)
            }
        }
    }
}

/// Counts every record of `path` into per-range accumulators `new(n_ref)`, in file order, on all
/// of `rt`'s threads: BAM records with `add` per byte range; CRAM records with `add_cram` per run of
/// containers, decoding only `fields` (a CRAM file with no run of containers is read whole, with
/// `add`). The header comes with them.
pub fn scan<S: Send>(
    path: &Path,
    rt: &Runtime,
    fields: Fields,
    new: impl Fn(usize) -> S + Sync,
    add: impl Fn(&mut S, &RecordRef<'_>) + Sync,
    add_cram: impl Fn(&mut S, &Core) -> std::result::Result<(), BamError> + Sync,
) -> anyhow::Result<(Header, Vec<S>)> {
    if !crate::input::is_cram(path) {
        return bam_ranges::scan(path, rt, new, add);
    }
    if let Some(ranges) = cram_ranges::scan(path, rt, fields, &new, add_cram)? {
        return Ok(ranges);
    }
    let (header, counts) = scan_cram(path, rt, new, add)?;
    Ok((header, vec![counts]))
}

/// Counts a CRAM file's records with `add`, decoding only the counting fields (no reference needed)
/// on htslib's pool of `rt`'s threads.
fn scan_cram<T>(
    path: &Path,
    rt: &Runtime,
    init: impl FnOnce(usize) -> T,
    add: impl Fn(&mut T, &RecordRef<'_>),
) -> anyhow::Result<(Header, T)> {
    let path = path.to_str().context("path is not UTF-8")?;
    let mut input = crate::input::Input::open_fields(
        path,
        rt.threads(),
        None,
        Fields::Counting,
        &crate::progress::Progress::hidden(),
    )?;
    input.set_cancel(rt.cancel_flag().clone());
    let mut counts = init(input.header.references().len());
    input.for_each_batch(|batch| {
        batch.iter().for_each(|r| add(&mut counts, &r));
        Ok(())
    })?;
    Ok((input.header, counts))
}

/// The header of a BAM or CRAM file (a CRAM file's header container, through htslib).
pub fn read_header(path: &Path) -> anyhow::Result<Header> {
    if crate::input::is_cram(path) {
        let path = path.to_str().context("path is not UTF-8")?;
        let input = crate::input::Input::open_fields(
            path,
            1,
            None,
            Fields::Idxstats,
            &crate::progress::Progress::hidden(),
        )?;
        return Ok(input.header);
    }
    let file = sortase_io::Source::open_path(path).context("cannot open")?;
    let mut reader = sortase_bgzf::SeekReader::new(std::io::BufReader::new(file));
    Ok(Header::read_bam(&mut reader)?)
}
