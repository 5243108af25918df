//! `fq2bam --markdup picard`: Picard MarkDuplicates' algorithm (crates/markdup `picard`, as
//! `sortase markdup --mode coordinate` runs it) needs the coordinate-sorted records twice, once to
//! find the duplicate sets and once to flag them. The sorter's final phase hands its key ranges in
//! order to Picard's end collector and to an LZ4 run in the temporary directory (the only copy of
//! the data besides the sorter's own runs); pass 2 reads the run back, sets 0x400 on Picard's
//! duplicates, and deflates and indexes batches of records on all threads.

use crate::sort::release_free_memory;
use anyhow::Context;
use rayon::prelude::*;
use sortase_bam::{flags, Header, RecordBatch};
use sortase_exec::options::PhaseClock;
use sortase_exec::output::{OutFormat, ResolvedOutput};
use sortase_exec::range_output::{self, EncodedRange};
use sortase_exec::runtime::Runtime;
use sortase_markdup::picard::{name::NameParser, Collector, Libraries, Options};
use sortase_sort::run::{RunReader, StreamingRunWriter};
use sortase_sort::{RangeSource, SortError, SortOrder, SortStats, Sorter};
use std::path::Path;

/// Bytes of records per batch of pass 2 (each batch starts a new BGZF block, as a key range does).
const BATCH_BYTES: usize = 4 << 20;

/// A batch of records as the range encoder's input.
struct Batch<'a>(&'a RecordBatch);

impl RangeSource for Batch<'_> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        for raw in self.0.iter_raw() {
            f(raw)?;
        }
        Ok(self.0.len() as u64)
    }
}

/// What pass 1 and 2 did.
pub(super) struct Marked {
    /// The sorter's statistics.
    pub stats: SortStats,
    /// Records flagged 0x400.
    pub duplicate_records: u64,
    /// With `--checksums`: the sums of the reads and of the records written.
    pub checksums: Option<sortase_exec::proof::Checksums>,
}

/// Sorts, marks with Picard's algorithm and writes `out` (pass 1 through the sorter's final phase,
/// pass 2 from the temporary run). `ends_budget`: memory for Picard's read ends before they spill.
#[allow(clippy::too_many_arguments)]
pub(super) fn sort_mark_write(
    sorter: Sorter,
    header: &Header,
    out: &ResolvedOutput,
    cram: &sortase_exec::writer::CramOut,
    temp: &Path,
    ends_budget: usize,
    rt: &Runtime,
    clock: &mut PhaseClock,
    proof: Option<&super::Proof<'_>>,
) -> anyhow::Result<Marked> {
    let threads = rt.threads();
    let names = NameParser::new(None).context("Picard's read name parser")?;
    let mut collector = Collector::new(
        Libraries::from_header(header.text()),
        Options {
            names,
            optical_distance: 100,
            max_optical_set: 300_000,
        },
    );
    let run_path = temp.join("sorted.run");
    let mut run = StreamingRunWriter::create(&run_path, SortOrder::Coordinate)?;
    let mut seq = 0u64;
    let stats = sorter.finish_ranges(
        threads,
        |p| {
            if p == "merge" {
                release_free_memory();
            }
            clock.next(p)
        },
        |records| {
            let (mut buf, mut offsets) = (Vec::new(), Vec::new());
            records.for_each(|r| {
                offsets.push(buf.len() as u32);
                buf.extend_from_slice(r);
                Ok(())
            })?;
            let end = buf.len();
            Ok(RecordBatch::from_parts(buf, offsets, end, 0))
        },
        |batch| {
            rt.install(|| collector.push(&batch))
                .map_err(|e| SortError::Internal(format!("sorted output out of order: {e:?}")))?;
            if collector.held() > ends_budget {
                collector.spill(ends_budget, temp)?;
            }
            for raw in batch.iter_raw() {
                run.push(seq, raw)?;
                seq += 1;
            }
            Ok(())
        },
    )?;
    run.finish()?;
    rt.check_cancelled()?;
    clock.next("mark");
    let outcome = rt
        .install(|| collector.finish(threads))
        .with_context(|| format!("{}: reading read ends back", temp.display()))?;
    let dups = &outcome.found.duplicates;

    clock.next("write");
    let index = out.index.as_ref().map(|(p, bai)| (p.as_path(), *bai));
    let (mut encoder, mut writer) = range_output::open(
        out.data.as_deref(),
        index,
        out.format,
        header,
        cram,
        rt.threads(),
    )?;
    encoder.expect_range_bytes(BATCH_BYTES);
    if proof.is_some() {
        encoder.sum_records(super::Proof::options());
    }
    let name = writer.name.clone();
    let mut reader = RunReader::open(&run_path)?;
    let (mut next_dup, mut index_in_file, mut marked) = (0usize, 0u64, 0u64);
    loop {
        rt.check_cancelled()?;
        let mut batches = Vec::with_capacity(threads * 2);
        while batches.len() < threads * 2 && reader.current().is_some() {
            let (mut buf, mut offsets) = (Vec::with_capacity(BATCH_BYTES + (1 << 16)), Vec::new());
            while let Some(raw) = reader.current() {
                if buf.len() >= BATCH_BYTES {
                    break;
                }
                offsets.push(buf.len() as u32);
                let at = buf.len();
                buf.extend_from_slice(raw);
                let dup = dups.get(next_dup) == Some(&index_in_file);
                next_dup += usize::from(dup);
                marked += u64::from(dup);
                index_in_file += 1;
                let flag = u16::from_le_bytes([buf[at + 18], buf[at + 18 + 1]]);
                let flag = if dup {
                    flag | flags::DUPLICATE
                } else {
                    flag & !flags::DUPLICATE
                };
                buf[at + 18..at + 20].copy_from_slice(&flag.to_le_bytes());
                reader.advance()?;
            }
            let end = buf.len();
            batches.push(RecordBatch::from_parts(buf, offsets, end, 0));
        }
        if batches.is_empty() {
            break;
        }
        let encoded: Vec<Result<EncodedRange, SortError>> = rt.install(|| {
            batches
                .par_iter()
                .map(|b| encoder.encode(&mut Batch(b)))
                .collect()
        });
        for e in encoded {
            writer.write(e?).with_context(|| name.clone())?;
        }
    }
    if index_in_file != seq {
        anyhow::bail!(
            "{}: {seq} records written, {index_in_file} read back",
            run_path.display()
        );
    }
    rt.check_cancelled()?;
    let checksums = proof
        .map(|p| p.check(encoder.written_sums(), out))
        .transpose()?;
    writer.finish(matches!(out.format, OutFormat::Bam(_)))?;
    Ok(Marked {
        stats,
        duplicate_records: marked,
        checksums,
    })
}
