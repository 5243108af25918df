//! The AGD dataset (crates/agd) as a record source and sink, beside the BAM/CRAM [`crate::input`]
//! and [`crate::writer`]: a dataset directory recognised ([`is_dataset`]) and opened
//! ([`open_manifest`], [`dataset_header`]), its chunks rebuilt as record batches with the
//! `duplicate` group's flags applied ([`chunk_batch`], [`for_each_chunk_batch`]) or their
//! `results` columns counted ([`counts`]); batches written in order to a [`SortedOutput`]
//! ([`write_in_order`]); chunks encoded and written into a new dataset ([`write_chunk`],
//! [`new_manifest`], the sort's [`sink::DatasetSink`]); and extra column groups written into a
//! dataset and committed with its manifest ([`columns`]); a dataset read restricted to regions and
//! filtered by flags and mapping quality ([`query`]).
//!
//! The jobs that use these (import, export, view, add/drop column, markdup of a dataset) are the
//! crates above's.

use crate::error::Error;
use crate::files::TempDir;
use crate::proof;
use crate::runtime::Runtime;
use crate::writer::SortedOutput;
use anyhow::Context;
use rayon::prelude::*;
use sortase_agd::{self as agd, ChunkBuilder, Group, Manifest, Provenance, ReferenceEntry};
use sortase_bam::checksum::{ChecksumOptions, Sums};
use sortase_bam::{Header, RecordBatch, Reference};
use std::io::Write;
use std::path::Path;

pub mod columns;
pub mod counts;
pub mod query;
pub mod sink;

/// Records per chunk without `--chunk-size`: Persona's 100 000. On the small bench BAM (808 685
/// records) chunks of 20 000 / 100 000 / 500 000 made datasets of 94.70 / 94.66 / 93.76 MB (zstd works
/// per page, not per chunk), and 9 chunks keep 2-8 threads busy on a file that size.
pub const DEFAULT_CHUNK_SIZE: u64 = 100_000;

/// Most record bytes per chunk whatever the chunk size (long reads): bounds the memory of a chunk in
/// flight and keeps Arrow's 32-bit offsets far from overflowing.
pub const CHUNK_BYTES: usize = 256 << 20;

/// zstd level of chunk files without `--level`. On the small bench BAM, level 9 made the dataset 5%
/// smaller than level 3 for 5-6 times the compression CPU (figures at `sortase_agd::WriteOptions`).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Refuses a zstd level the chunk files cannot have (Parquet's zstd takes 1 to 22), before any
/// file is written: `FLAG LEVEL: ...` (`flag`: the option that gave it), an argument error.
pub fn check_zstd_level(level: i32, flag: &str) -> crate::error::Result<()> {
    if !(1..=22).contains(&level) {
        return Err(Error::argument(format!(
            "{flag} {level}: the zstd level of a dataset's files is 1 to 22"
        )));
    }
    Ok(())
}

/// A chunk written: its index, records, raw records, bytes per group and positions.
pub struct Written {
    /// The chunk's index.
    pub index: usize,
    /// Its records.
    pub records: u64,
    /// Its records kept whole in `raw_record`.
    pub raw: u64,
    /// Bytes of each group's file, in [`Group::ALL`] order.
    pub bytes: [u64; 4],
    /// The reference spans of its records.
    pub positions: agd::ChunkPositions,
    /// With `--checksums`: the sums of the records rebuilt from the chunk's columns.
    pub sums: Option<Sums>,
}

/// The sums of the records `groups` (a chunk's encoded columns, in [`Group::ALL`] order) decode
/// to, rebuilt as `agd export` rebuilds them.
fn encoded_sums(
    dir: &Path,
    index: usize,
    groups: &[(Group, arrow_array::RecordBatch)],
    opts: &ChecksumOptions,
) -> anyhow::Result<Sums> {
    let files: Vec<agd::ChunkFile> = groups
        .iter()
        .map(|(g, batch)| agd::ChunkFile {
            path: agd::chunk_path(dir, *g, index),
            batch: batch.clone(),
        })
        .collect();
    let (mut buf, mut offsets) = (Vec::new(), Vec::new());
    agd::append_records(&files, &mut buf, &mut offsets)?;
    let end = buf.len();
    Ok(proof::batch_sums_here(
        opts,
        &RecordBatch::from_parts(buf, offsets, end, 0),
    ))
}

/// Encodes one chunk and writes its group files into `dir`; with `sums`, also sums the records
/// its columns decode to.
pub fn write_chunk(
    dir: &Path,
    index: usize,
    mut chunk: ChunkBuilder,
    options: &agd::WriteOptions,
    sums: Option<&ChecksumOptions>,
) -> anyhow::Result<Written> {
    let records = chunk.len() as u64;
    let raw = chunk.raw_records() as u64;
    let positions = chunk.take_positions();
    let mut bytes = [0u64; 4];
    let groups = chunk.finish()?;
    let sums = sums
        .map(|opts| encoded_sums(dir, index, &groups, opts))
        .transpose()?;
    for (group, batch) in groups {
        let path = agd::chunk_path(dir, group, index);
        let file = std::fs::File::create(&path)
            .with_context(|| format!("{}: cannot create", path.display()))?;
        let mut out = agd::write_group(
            group,
            &batch,
            std::io::BufWriter::with_capacity(1 << 20, file),
            options,
        )?;
        out.flush()
            .with_context(|| format!("{}: cannot write", path.display()))?;
        bytes[group as usize] = out.get_ref().metadata()?.len();
    }
    Ok(Written {
        index,
        records,
        raw,
        bytes,
        positions,
        sums,
    })
}

/// Refuses an output that holds anything: importing never replaces a dataset.
pub fn check_new_output(output: &Path) -> anyhow::Result<()> {
    if let Ok(mut entries) = std::fs::read_dir(output) {
        if entries.next().is_some() {
            return Err(Error::argument(format!(
                "{}: exists and is not empty; remove it or choose another -o",
                output.display()
            ))
            .into());
        }
    } else if output.exists() {
        return Err(Error::argument(format!(
            "{}: exists and is not a directory",
            output.display()
        ))
        .into());
    }
    Ok(())
}

/// A hidden sibling of `output` for the dataset being written (`TempDir` would put it inside an
/// existing, empty, output directory).
pub fn hidden_sibling(output: &Path) -> anyhow::Result<TempDir> {
    let name = output
        .file_name()
        .with_context(|| format!("{}: not a directory name", output.display()))?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    TempDir::staging(&output.with_file_name(hidden))
}

/// A new dataset's manifest (no chunks yet): every group, `header` and its references,
/// `command_line` as every group's provenance. Import and the sort's dataset sink write it.
pub fn new_manifest(header: &Header, chunk_size: u64, command_line: &str) -> Manifest {
    let references = header
        .references()
        .iter()
        .map(|r| ReferenceEntry {
            name: String::from_utf8_lossy(&r.name).into_owned(),
            length: r.length,
        })
        .collect();
    let provenance = Provenance {
        command_line: command_line.to_string(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    Manifest::new(
        &Group::ALL,
        header.text().to_string(),
        references,
        chunk_size,
        provenance,
    )
}

/// Decodes `items` into record batches on `rt`, a window of one item per thread at a time, and
/// writes them to `out` in order on a writer thread (one window in flight: bounded memory); runs
/// `check` once all is written, then finishes `out` (a failed check leaves no output) and returns
/// the records written. Shared by `agd export` and `agd view`.
pub fn write_in_order<T: Sync>(
    rt: &Runtime,
    items: &[T],
    out: SortedOutput,
    decode: impl Fn(&T) -> anyhow::Result<RecordBatch> + Sync,
    check: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let name = out.name.clone();
    let (tx, rx) = crossbeam_channel::bounded::<Vec<RecordBatch>>(1);
    let writer = std::thread::spawn(move || -> anyhow::Result<SortedOutput> {
        let mut out = out;
        for window in rx {
            for batch in window.into_iter().filter(|b| !b.is_empty()) {
                out.sink
                    .write_batch(batch)
                    .with_context(|| out.name.clone())?;
            }
        }
        Ok(out)
    });
    let mut records = 0u64;
    let decoded = items.chunks(rt.threads().max(1)).try_for_each(|window| {
        rt.check_cancelled()?;
        // Results in order, then the first error in chunk order: which of two damaged chunks a
        // run names must not depend on thread timing.
        let decoded: Vec<anyhow::Result<RecordBatch>> =
            rt.install(|| window.par_iter().map(&decode).collect());
        let batches = decoded.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        records += batches.iter().map(|b| b.len() as u64).sum::<u64>();
        if tx.send(batches).is_err() {
            anyhow::bail!("{name}: writing stopped");
        }
        anyhow::Ok(())
    });
    drop(tx);
    let written = writer
        .join()
        .map_err(|_| anyhow::anyhow!("{name}: writer panicked"))?;
    // The writer's own error first: it is why a window could not be sent ("writing stopped").
    let written = written?;
    decoded?;
    check()?;
    written.finish()?;
    Ok(records)
}

/// Whether `path` is an AGD dataset directory (it holds a manifest): what `view`, `flagstat` and
/// `idxstats` read as a dataset instead of a SAM/BAM/CRAM file.
pub fn is_dataset(path: &Path) -> bool {
    path.join(agd::MANIFEST_FILE).is_file()
}

/// Reads a dataset's manifest, with the directory as context.
pub fn open_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    if !dir.is_dir() {
        return Err(Error::new(
            crate::error::ErrorKind::Input,
            format!("{}: not a dataset directory", dir.display()),
        )
        .into());
    }
    let manifest = Manifest::read(dir)?;
    for g in Group::ALL {
        if !manifest.has_group(g) {
            anyhow::bail!(
                "{}: the manifest has no {} group",
                dir.join(agd::MANIFEST_FILE).display(),
                g.name()
            );
        }
    }
    Ok(manifest)
}

/// The header a dataset was imported with.
pub fn dataset_header(manifest: &Manifest) -> Header {
    let references = manifest
        .references
        .iter()
        .map(|r| Reference {
            name: r.name.as_bytes().to_vec(),
            length: r.length,
        })
        .collect();
    Header::new(manifest.header.clone(), references)
}

/// Rebuilds one chunk's records as a batch, with the `duplicate` group's flags applied.
pub fn chunk_batch(
    dir: &Path,
    manifest: &Manifest,
    chunk: &agd::ChunkEntry,
) -> anyhow::Result<RecordBatch> {
    chunk_batch_with(dir, columns::duplicate_group(manifest), chunk)
}

/// [`chunk_batch`] with the dataset's `duplicate` group given (`None`: it has none): for tasks
/// that carry the group instead of the manifest.
pub fn chunk_batch_with(
    dir: &Path,
    duplicate: Option<&agd::ExtraGroup>,
    chunk: &agd::ChunkEntry,
) -> anyhow::Result<RecordBatch> {
    let files = agd::read_columns(dir, chunk)?;
    let bytes: usize = files.iter().map(|f| f.batch.get_array_memory_size()).sum();
    let mut buf = Vec::with_capacity(bytes + 64 * chunk.records as usize);
    let mut offsets = Vec::with_capacity(chunk.records as usize);
    agd::append_records(&files, &mut buf, &mut offsets)?;
    if let Some(duplicate) = columns::duplicate_column(dir, duplicate, chunk)? {
        columns::apply_duplicates(&mut buf, &offsets, &duplicate);
    }
    let end = buf.len();
    Ok(RecordBatch::from_parts(buf, offsets, end, 0))
}

/// Decodes the chunks of dataset `dir` into record batches on `rt`'s pool, `threads` chunks at a
/// time (the next window while `f` takes the previous one), and gives them to `f` in order. The
/// records `f` has taken are the progress of `label` (ending in " records").
pub fn for_each_chunk_batch(
    dir: &Path,
    manifest: &Manifest,
    rt: &Runtime,
    label: &str,
    mut f: impl FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let progress = rt.progress(label, manifest.records);
    let decode = |window: &[agd::ChunkEntry]| {
        rt.check_cancelled()?;
        rt.install(|| {
            window
                .par_iter()
                .map(|c| chunk_batch(dir, manifest, c))
                .collect::<anyhow::Result<Vec<_>>>()
        })
    };
    decode_in_order(manifest, rt.threads(), decode, |b| {
        let n = b.len() as u64;
        f(b)?;
        progress.add(n);
        Ok(())
    })
}

/// [`for_each_chunk_batch`] without a runtime (the records of an [`crate::input::Input`] opened on
/// a dataset): each window of `threads` chunks decoded on as many scoped threads.
pub fn for_each_chunk_batch_on(
    dir: &Path,
    manifest: &Manifest,
    threads: usize,
    f: impl FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let decode = |window: &[agd::ChunkEntry]| {
        std::thread::scope(|s| {
            let decoding: Vec<_> = window
                .iter()
                .map(|c| s.spawn(move || chunk_batch(dir, manifest, c)))
                .collect();
            decoding
                .into_iter()
                .map(|d| {
                    d.join()
                        .map_err(|_| anyhow::anyhow!("chunk decoder panicked"))?
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
    };
    decode_in_order(manifest, threads, decode, f)
}

/// The chunks of `manifest` decoded `window` at a time by `decode` on a thread of their own (the
/// next window while `f` takes the previous one) and given to `f` in order.
fn decode_in_order(
    manifest: &Manifest,
    window: usize,
    decode: impl Fn(&[agd::ChunkEntry]) -> anyhow::Result<Vec<RecordBatch>> + Send,
    f: impl FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (tx, rx) = crossbeam_channel::bounded::<Vec<RecordBatch>>(1);
    std::thread::scope(|s| {
        let decoder = s.spawn(move || {
            manifest
                .chunks
                .chunks(window.max(1))
                .try_for_each(|window| {
                    let batches = decode(window)?;
                    if tx.send(batches).is_err() {
                        // The consumer stopped on an error of its own, which it reports.
                        return Ok(());
                    }
                    anyhow::Ok(())
                })
        });
        let consumed = rx.iter().flatten().try_for_each(f);
        drop(rx);
        let decoded = decoder
            .join()
            .map_err(|_| anyhow::anyhow!("chunk decoder panicked"))?;
        decoded.and(consumed)
    })
}

/// Cuts `items` (a dataset's chunks) into at most `n` runs of consecutive items of near-equal
/// length: the runs of chunks of a dataset's tasks.
pub fn runs<T: Clone>(items: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.clamp(1, items.len().max(1));
    let (base, extra) = (items.len() / n, items.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        if len > 0 {
            out.push(items[at..at + len].to_vec());
        }
        at += len;
    }
    out
}

/// The dataset's record bytes, estimated from the uncompressed size of the first chunk's column
/// data (its four Parquet footers) per record; `None` when a footer cannot be read.
pub fn estimate_record_bytes(dir: &Path, manifest: &Manifest) -> Option<u64> {
    let first = manifest.chunks.first()?;
    let mut bytes = 0u64;
    for g in Group::ALL {
        let file = std::fs::File::open(agd::chunk_path(dir, g, first.index)).ok()?;
        let meta = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .ok()?;
        bytes += meta
            .row_groups()
            .iter()
            .map(|r| r.total_byte_size().max(0) as u64)
            .sum::<u64>();
    }
    let per_record = bytes.div_ceil(first.records.max(1));
    Some(per_record * manifest.records)
}

/// samtools fastq's complement of a SAM base letter (`seq_comp_table`; IUPAC codes complemented,
/// `=` and `N` kept).
pub fn complement(b: u8) -> u8 {
    match b {
        b'A' => b'T',
        b'C' => b'G',
        b'G' => b'C',
        b'T' => b'A',
        b'M' => b'K',
        b'K' => b'M',
        b'R' => b'Y',
        b'Y' => b'R',
        b'V' => b'B',
        b'B' => b'V',
        b'H' => b'D',
        b'D' => b'H',
        other => other,
    }
}
