//! Building an index on all cores: each byte range summarises its records as [`Segment`]s (runs of one
//! reference and bin) plus a partial linear index; the ranges' summaries are then replayed in order
//! through htslib's state machine ([`IndexBuilder`]), which gives the same bytes as a sequential build.
//!
//! The two steps are public ([`summarise_range`], [`assemble`]) so that ranges can be summarised
//! anywhere (another process or machine: [`RangeSummary`] is serialisable) and assembled in one place.

use crate::range::{map_ranges, plan_ranges, RangeStream, RecordRange};
use crate::summary::RangeSummary;
use crate::{IndexBuilder, IndexError, IndexFormat, PushError};
use sortase_bam::{flags::UNMAPPED, virtual_offset, Header, RecordRef};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

struct Rec {
    tid: i32,
    beg: i64,
    end: i64,
    mapped: bool,
    start_u: u64,
    end_u: u64,
    name: String,
}

/// Called with the number of records of each batch summarised (progress; once per batch).
pub type RecordsDone<'a> = &'a (dyn Fn(u64) + Sync);

fn summarise(
    mut stream: RangeStream,
    geometry: (u32, u32),
    cancel: Option<&AtomicBool>,
    done: Option<RecordsDone>,
) -> Result<RangeSummary, IndexError> {
    let mut out = RangeSummary::new(geometry);
    let mut cursor = 0usize;
    let mut pending: Vec<Rec> = Vec::new();
    let mut prev: Option<(i32, i64)> = None;
    loop {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(IndexError::Cancelled);
        }
        let batch = stream.next_batch()?;
        resolve(&mut out, &mut pending, stream.block_table(), &mut cursor)?;
        let Some(batch) = batch else { break };
        if let Some(done) = done {
            done(batch.len() as u64);
        }
        let mut u = batch.stream_offset();
        for raw in batch.iter_raw() {
            // HOT: once per record: refID, pos, flag, CIGAR reference length.
            let r = RecordRef::new_unchecked(&raw[4..]);
            let end_u = u + raw.len() as u64;
            let (tid, pos) = (r.reference_sequence_id(), i64::from(r.position()).max(0));
            if let Some((pt, pp)) = prev {
                if pt == tid && tid >= 0 && pp > pos {
                    return Err(IndexError::Push {
                        name: String::from_utf8_lossy(r.read_name()).into_owned(),
                        source: PushError::Unsorted {
                            tid: tid + 1,
                            prev: pp + 1,
                            pos: pos + 1,
                        },
                    });
                }
            }
            prev = Some((tid, pos));
            pending.push(Rec {
                tid: r.reference_sequence_id(),
                beg: i64::from(r.position()),
                end: r.end_position(),
                mapped: r.flag() & UNMAPPED == 0,
                start_u: u,
                end_u,
                name: String::new(),
            });
            u = end_u;
        }
        // All but the last record can be resolved now (the last may end at a block not yet read).
        let keep = pending.pop();
        resolve(&mut out, &mut pending, stream.block_table(), &mut cursor)?;
        pending.extend(keep);
    }
    Ok(out)
}

/// Turns pending records' stream offsets into virtual offsets and adds them to the summary.
fn resolve(
    out: &mut RangeSummary,
    pending: &mut Vec<Rec>,
    table: &[sortase_bam::BlockEntry],
    cursor: &mut usize,
) -> Result<(), IndexError> {
    for rec in pending.drain(..) {
        let start_off = virtual_offset(table, cursor, rec.start_u);
        let end_off = virtual_offset(table, cursor, rec.end_u);
        out.push(rec.tid, rec.beg, rec.end, rec.mapped, start_off, end_off)
            .map_err(|source| IndexError::Push {
                name: rec.name,
                source,
            })?;
    }
    Ok(())
}

/// The length of the longest reference of `header` (what [`IndexFormat::csi_for`] sizes a CSI by).
pub fn longest_reference(header: &Header) -> u64 {
    header
        .references()
        .iter()
        .map(|r| u64::from(r.length))
        .max()
        .unwrap_or(0)
}

/// Summarises the records of one `range` of the BAM at `path` (`n_ref` references) for an index in
/// `format`; stops with [`IndexError::Cancelled`] between batches once `cancel` is set.
pub fn summarise_range(
    path: &Path,
    range: &RecordRange,
    n_ref: usize,
    format: IndexFormat,
    cancel: Option<&AtomicBool>,
) -> Result<RangeSummary, IndexError> {
    let stream = RangeStream::open(path, range, n_ref)?;
    summarise(stream, format.geometry(), cancel, None)
}

/// The index file's bytes from the summaries of every range of the BAM at `path`, in file order;
/// `offset0` is the virtual offset of the first record (the first range's start).
pub fn assemble(
    path: &Path,
    format: IndexFormat,
    n_ref: usize,
    offset0: u64,
    summaries: &[RangeSummary],
) -> Result<Vec<u8>, IndexError> {
    let mut builder = IndexBuilder::new(format, n_ref, offset0);
    let mut final_offset = offset0;
    for s in summaries {
        s.replay(&mut builder).map_err(|source| IndexError::Push {
            name: String::new(),
            source,
        })?;
        final_offset = s.end_offset().unwrap_or(final_offset);
    }
    Ok(builder.finish(final_offset.max(eof_offset(path)?)))
}

/// Builds the index of the BAM at `path` on `threads` threads and returns the index file's bytes;
/// `format` is chosen from the longest reference's length.
pub fn index_file(
    path: &Path,
    threads: usize,
    format: impl Fn(u64) -> IndexFormat,
) -> Result<Vec<u8>, IndexError> {
    index_file_cancellable(path, threads, format, None)
}

/// [`index_file`] that stops with [`IndexError::Cancelled`] once `cancel` is set.
pub fn index_file_cancellable(
    path: &Path,
    threads: usize,
    format: impl Fn(u64) -> IndexFormat,
    cancel: Option<&AtomicBool>,
) -> Result<Vec<u8>, IndexError> {
    index_file_with_progress(path, threads, format, cancel, None)
}

/// [`index_file_cancellable`] that tells `done` the records of each batch summarised.
pub fn index_file_with_progress(
    path: &Path,
    threads: usize,
    format: impl Fn(u64) -> IndexFormat,
    cancel: Option<&AtomicBool>,
    done: Option<RecordsDone>,
) -> Result<Vec<u8>, IndexError> {
    let plan = plan_ranges(path, threads.max(1) * 4)?;
    let format = format(longest_reference(&plan.header));
    let geometry = format.geometry();
    let summaries = map_ranges(path, &plan, threads, |stream| {
        summarise(stream, geometry, cancel, done)
    })?;
    let n_ref = plan.header.references().len();
    assemble(path, format, n_ref, plan.ranges[0].start, &summaries)
}

/// Virtual offset of the end of the data: the start of the EOF marker block (or of the file's end).
fn eof_offset(path: &Path) -> Result<u64, IndexError> {
    let mut f = sortase_io::Source::open_path(path).map_err(sortase_bam::BamError::from)?;
    let len = f.len().map_err(sortase_bam::BamError::from)?;
    use std::io::{Read, Seek, SeekFrom};
    if len >= 28 {
        let mut tail = [0u8; 28];
        f.seek(SeekFrom::Start(len - 28))
            .map_err(sortase_bam::BamError::from)?;
        f.read_exact(&mut tail)
            .map_err(sortase_bam::BamError::from)?;
        if tail == sortase_bgzf::EOF_MARKER {
            return Ok((len - 28) << 16);
        }
    }
    Ok(len << 16)
}
