//! Runs of whole containers of a CRAM file as units of work: CRAM containers decode independently,
//! so a counting job cuts the file into runs ([`sortase_cram::plan_container_ranges`], from the
//! container headers alone) and decodes each run with its own htslib reader on one of the runtime's
//! threads. htslib's own pool (one reader, `-@N`) leaves the conversion of every record to `bam1_t`
//! and the counting on the reading thread; runs decode, convert and count on every thread.

use crate::bam_ranges::RANGES_PER_THREAD;
use crate::runtime::Runtime;
use anyhow::{Context, Result};
use rayon::prelude::*;
use sortase_bam::{BamError, Header};
use sortase_cram::{Core, CramReader, Fields, ReadOptions};
use std::path::Path;

/// Records between two checks of the cancel flag.
const CANCEL_EVERY: u32 = 1 << 14;

/// Runs `add` over the fixed fields of every record of the CRAM file at `path`, decoding only
/// `fields`, on `rt.threads()` threads: one accumulator per run of containers (made by `new` from
/// the number of references), returned in file order with the header. `None` when the file has no
/// records (the caller reads it as a stream). Checks `rt`'s cancellation every [`CANCEL_EVERY`]
/// records.
pub fn scan<T: Send>(
    path: &Path,
    rt: &Runtime,
    fields: Fields,
    new: impl Fn(usize) -> T + Sync,
    add: impl Fn(&mut T, &Core) + Sync,
) -> Result<Option<(Header, Vec<T>)>> {
    let ranges = sortase_cram::plan_container_ranges(path, rt.threads() * RANGES_PER_THREAD)?;
    if ranges.is_empty() {
        return Ok(None);
    }
    let options = ReadOptions {
        reference: None,
        threads: 0,
        fields,
    };
    let parts = rt.install(|| {
        ranges
            .par_iter()
            .map(|range| -> Result<(Header, T)> {
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
                    add(&mut acc, r);
                    Ok(())
                });
                if let Some(e) = stopped {
                    return Err(e.into());
                }
                r.with_context(|| format!("containers from byte {}", range.offset))?;
                Ok((header, acc))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    rt.check_cancelled()?;
    let mut parts = parts.into_iter();
    let (header, first) = parts.next().expect("at least one range");
    let mut all = vec![first];
    all.extend(parts.map(|(_, acc)| acc));
    Ok(Some((header, all)))
}
