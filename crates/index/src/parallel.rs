//! Building an index on all cores: each byte range summarises its records as [`Segment`]s (runs of one
//! reference and bin) plus a partial linear index; the ranges' summaries are then replayed in order
//! through htslib's state machine ([`IndexBuilder`]), which gives the same bytes as a sequential build.

use crate::range::{map_ranges, plan_ranges, RangeStream};
use crate::summary::RangeSummary;
use crate::{IndexBuilder, IndexError, IndexFormat, PushError};
use sortase_bam::{flags::UNMAPPED, virtual_offset, RecordRef};
use std::path::Path;

struct Rec {
    tid: i32,
    beg: i64,
    end: i64,
    mapped: bool,
    start_u: u64,
    end_u: u64,
    name: String,
}

fn summarise(
    mut stream: RangeStream,
    min_shift: u32,
    n_lvls: u32,
) -> Result<RangeSummary, IndexError> {
    let mut out = RangeSummary::new((min_shift, n_lvls));
    let mut cursor = 0usize;
    let mut pending: Vec<Rec> = Vec::new();
    let mut prev: Option<(i32, i64)> = None;
    loop {
        let batch = stream.next_batch()?;
        resolve(&mut out, &mut pending, stream.block_table(), &mut cursor)?;
        let Some(batch) = batch else { break };
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

/// Builds the index of the BAM at `path` on `threads` threads and returns the index file's bytes.
pub fn index_file(
    path: &Path,
    threads: usize,
    format: impl Fn(u64) -> IndexFormat,
) -> Result<Vec<u8>, IndexError> {
    let plan = plan_ranges(path, threads.max(1) * 4)?;
    let longest = plan
        .header
        .references()
        .iter()
        .map(|r| u64::from(r.length))
        .max()
        .unwrap_or(0);
    let format = format(longest);
    let offset0 = plan.ranges[0].start;
    let mut builder = IndexBuilder::new(format, plan.header.references().len(), offset0);
    let (min_shift, n_lvls) = builder.geometry();
    let summaries = map_ranges(path, &plan, threads, |stream| {
        summarise(stream, min_shift, n_lvls)
    })?;
    let mut final_offset = offset0;
    for s in &summaries {
        s.replay(&mut builder).map_err(|source| IndexError::Push {
            name: String::new(),
            source,
        })?;
        final_offset = s.end_offset().unwrap_or(final_offset);
    }
    Ok(builder.finish(final_offset.max(eof_offset(path)?)))
}

/// Virtual offset of the end of the data: the start of the EOF marker block (or of the file's end).
fn eof_offset(path: &Path) -> Result<u64, IndexError> {
    let len = std::fs::metadata(path)
        .map_err(sortase_bam::BamError::from)?
        .len();
    let mut f = std::fs::File::open(path).map_err(sortase_bam::BamError::from)?;
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
