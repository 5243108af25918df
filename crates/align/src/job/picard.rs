//! `fq2bam --markdup picard`: Picard MarkDuplicates' algorithm (crates/markdup `picard`, as
//! `sortase markdup --mode coordinate` runs it) needs the coordinate-sorted records twice, once to
//! find the duplicate sets and once to flag them. The sorter's final phase hands its key ranges in
//! order to Picard's end collector and to an LZ4 run in the temporary directory (the only copy of
//! the data besides the sorter's own runs); pass 2 reads the run back, sets 0x400 on Picard's
//! duplicates (clearing it elsewhere) and writes one stream, deflated and indexed on all threads,
//! with `sortase markdup`'s writer: the output equals `sortase markdup --no-PG` of the sorted,
//! unmarked records byte for byte, which is how the distributed fq2bam marks with Picard's
//! algorithm (its sort, then the distributed markdup).

use anyhow::Context;
use sortase_bam::checksum::{Fault, Tally};
use sortase_bam::{flags, Header, RecordBatch, RecordBuf, RecordRef};
use sortase_exec::options::PhaseClock;
use sortase_exec::output::ResolvedOutput;
use sortase_exec::runtime::Runtime;
use sortase_exec::sorting::release_free_memory;
use sortase_exec::writer::SortedOutput;
use sortase_markdup::picard::{name::NameParser, Collector, Libraries, Options};
use sortase_sort::run::{RunReader, StreamingRunWriter};
use sortase_sort::{RangeSource, SortError, SortOrder, SortStats, Sorter};
use std::path::Path;

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
    let (marked, checksums) = write_marked(&run_path, seq, dups, header, out, cram, rt, proof)?;
    Ok(Marked {
        stats,
        duplicate_records: marked,
        checksums,
    })
}

/// Pass 2: the sorted run read back, 0x400 set on `dups` (file indices, ascending) and cleared
/// elsewhere, written as one stream (htslib's block cut, as `sortase markdup` writes), so the
/// output equals `sortase markdup --no-PG` of the sorted records byte for byte. Returns the
/// records marked and, with `proof`, the checked sums.
#[allow(clippy::too_many_arguments)]
fn write_marked(
    run_path: &Path,
    records: u64,
    dups: &[u64],
    header: &Header,
    out: &ResolvedOutput,
    cram: &sortase_exec::writer::CramOut,
    rt: &Runtime,
    proof: Option<&super::Proof<'_>>,
) -> anyhow::Result<(u64, Option<sortase_exec::proof::Checksums>)> {
    let mut output = SortedOutput::open(out, header, rt.threads(), cram)?;
    let mut tally = proof.map(|_| Tally::new(&super::Proof::options(), &Fault::from_env()));
    let mut reader = RunReader::open(run_path)?;
    let mut rec = RecordBuf::default();
    let (mut next_dup, mut index_in_file, mut marked) = (0usize, 0u64, 0u64);
    while let Some(raw) = reader.current() {
        if index_in_file % (1 << 16) == 0 {
            rt.check_cancelled()?;
        }
        let dup = dups.get(next_dup) == Some(&index_in_file);
        next_dup += usize::from(dup);
        marked += u64::from(dup);
        index_in_file += 1;
        let flag = RecordRef::new_unchecked(&raw[4..]).flag();
        let want = if dup {
            flag | flags::DUPLICATE
        } else {
            flag & !flags::DUPLICATE
        };
        let bytes = if want == flag {
            raw
        } else {
            rec.copy_from(raw);
            rec.set_flag(want);
            rec.as_raw()
        };
        let bytes = match tally.as_mut() {
            Some(t) => t.pass(bytes),
            None => bytes,
        };
        output
            .sink
            .write(bytes)
            .with_context(|| output.name.clone())?;
        reader.advance()?;
    }
    if index_in_file != records {
        anyhow::bail!(
            "{}: {records} records written, {index_in_file} read back",
            run_path.display()
        );
    }
    rt.check_cancelled()?;
    let checksums = proof
        .map(|p| p.check(tally.map(|t| t.sums()), out))
        .transpose()?;
    output.finish()?;
    Ok((marked, checksums))
}
