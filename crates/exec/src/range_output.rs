//! The output writer ([`crate::writer`]) for output produced key range by key range on many threads
//! (crates/sort `Sorter::finish_ranges`; sort and merge).
//!
//! [`RangeEncoder`] runs on the sort's worker threads: for BAM it fills BGZF blocks by htslib's rules
//! and deflates them, and with `--write-index` summarises the range's records for the index with
//! offsets local to the range; for SAM it formats text; for CRAM it gathers the records. The
//! [`RangeWriter`] receives encoded ranges in order on the calling thread: it appends their bytes,
//! keeps the block log, and replays each index summary shifted to the range's first block. Every
//! range starts a new BGZF block, and the ranges depend only on the input (crates/sort `ranges`), so
//! the bytes are the same for any `-@` and `-m`.

use crate::output::{OutFormat, ResolvedOutput, AGD_REFUSED};
use crate::proof::SumsCell;
use crate::writer::{finish_index, pseudo_offset, CramOut, OnTheFlyIndex, OutputFiles};
use anyhow::{Context, Result};
use sortase_bam::checksum::{ChecksumOptions, Fault, Sums, Tally};
use sortase_bam::{sam_format, Header, RecordBatch, RecordRef};
use sortase_bgzf::{BlockEncoder, BlockLog, CompressionLevel, EncodedBlocks, EOF_MARKER};
use sortase_cram::CramWriter;
use sortase_index::{IndexBuilder, RangeSummary};
use sortase_sort::{RangeSource, SortError};
use std::io::Write;
use std::path::PathBuf;

/// One range, encoded.
pub enum EncodedRange {
    /// BGZF blocks and, with an index, the range's summary (offsets local to the range).
    Bam(EncodedBlocks, Option<RangeSummary>),
    /// SAM text.
    Text(Vec<u8>),
    /// Records for the CRAM writer.
    Records(RecordBatch),
}

/// A range's records passed through while adding their number to a [`crate::Progress`] (every
/// 4096 records, so threads rarely touch the shared counter).
pub struct Counted<'a, R> {
    inner: &'a mut R,
    progress: &'a crate::Progress,
}

impl<'a, R> Counted<'a, R> {
    /// Counts `inner`'s records into `progress`.
    pub fn new(inner: &'a mut R, progress: &'a crate::Progress) -> Self {
        Self { inner, progress }
    }
}

impl<R: RangeSource> RangeSource for Counted<'_, R> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        const STEP: u64 = 4096;
        let mut pending = 0u64;
        let progress = self.progress;
        let n = self.inner.for_each(|r| {
            pending += 1;
            if pending == STEP {
                progress.add(STEP);
                pending = 0;
            }
            f(r)
        })?;
        progress.add(pending);
        Ok(n)
    }
}

/// A range's records passed through a [`Tally`] (the sums of what is written, `crate::proof`).
struct Summed<'a, R> {
    inner: &'a mut R,
    sums: &'a mut Tally,
}

impl<R: RangeSource> RangeSource for Summed<'_, R> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        let sums = &mut *self.sums;
        self.inner.for_each(|r| f(sums.pass(r)))
    }
}

/// Encodes ranges on worker threads (shared by all of them).
pub struct RangeEncoder {
    /// With [`RangeEncoder::sum_records`]: what is summed and the sums of the records encoded.
    proof: Option<(ChecksumOptions, Fault, SumsCell)>,
    format: OutFormat,
    header: Header,
    /// Index geometry, with `--write-index`.
    index: Option<(u32, u32)>,
    /// Expected record bytes per range (sizes output buffers).
    range_bytes: usize,
}

fn output_error(e: impl std::fmt::Display) -> SortError {
    SortError::Output(std::io::Error::other(e.to_string()))
}

impl RangeEncoder {
    /// An encoder with no output file, for ranges written by another process (the sort tasks of
    /// [`crate::tasks`]): `index` is the index geometry ([`IndexBuilder::geometry`]) with
    /// `--write-index`. The header is read for SAM output only.
    pub fn new(format: OutFormat, header: Header, index: Option<(u32, u32)>) -> Self {
        Self {
            proof: None,
            format,
            header,
            index,
            range_bytes: sortase_sort::ranges::RANGE_BYTES as usize,
        }
    }

    /// Sums every record encoded from now on (`samtools checksum`'s sums under `opts`), on the
    /// workers that encode them; [`RangeEncoder::written_sums`] gives them.
    /// The job's test [`Fault`] is read here.
    pub fn sum_records(&mut self, opts: ChecksumOptions) {
        self.proof = Some((opts, Fault::from_env(), SumsCell::default()));
    }

    /// The sums of the records encoded since [`RangeEncoder::sum_records`] (`None` without it).
    pub fn written_sums(&self) -> Option<Sums> {
        self.proof.as_ref().map(|(_, _, cell)| cell.get())
    }

    /// Sets the expected record bytes per range (default: the sort's `RANGE_BYTES`).
    pub fn expect_range_bytes(&mut self, bytes: usize) {
        self.range_bytes = bytes;
    }

    /// Encodes one range.
    pub fn encode<R: RangeSource>(&self, records: &mut R) -> Result<EncodedRange, SortError> {
        let Some((opts, fault, cell)) = &self.proof else {
            return self.encode_records(records);
        };
        let mut sums = Tally::new(opts, fault);
        let encoded = self.encode_records(&mut Summed {
            inner: records,
            sums: &mut sums,
        })?;
        cell.merge(&sums.sums());
        Ok(encoded)
    }

    fn encode_records<R: RangeSource>(&self, records: &mut R) -> Result<EncodedRange, SortError> {
        match self.format {
            OutFormat::Bam(level) => self.encode_bam(level, records),
            OutFormat::Sam => {
                let mut text = Vec::new();
                records.for_each(|raw| {
                    let r = RecordRef::new_unchecked(&raw[4..]);
                    sam_format::format_record(&r, &self.header, &mut text);
                    Ok(())
                })?;
                Ok(EncodedRange::Text(text))
            }
            OutFormat::Cram => {
                let (mut buf, mut offsets) = (Vec::new(), Vec::new());
                records.for_each(|raw| {
                    offsets.push(buf.len() as u32);
                    buf.extend_from_slice(raw);
                    Ok(())
                })?;
                let end = buf.len();
                Ok(EncodedRange::Records(RecordBatch::from_parts(
                    buf, offsets, end, 0,
                )))
            }
            OutFormat::Agd => Err(SortError::Output(std::io::Error::other(AGD_REFUSED))),
        }
    }

    fn encode_bam(
        &self,
        level: CompressionLevel,
        records: &mut impl RangeSource,
    ) -> Result<EncodedRange, SortError> {
        // Room for the whole range's blocks up front: a growing buffer would be copied at each
        // doubling, leave the old copies free in the arena and end with up to twice the capacity
        // (with `-u`, 16 MiB ranges, peak RSS of the out-of-core bench sort dropped from 343-412 MiB
        // to 308-350 MiB). Capacity beyond what is written is never touched.
        let expected = if level == CompressionLevel::STORED {
            self.range_bytes + self.range_bytes / 8
        } else {
            self.range_bytes / 2
        };
        let mut enc = BlockEncoder::with_capacity(level, expected);
        let mut summary = self.index.map(RangeSummary::new);
        // HOT: once per record: a copy into the open block; with an index also the record's end
        // (CIGAR walk) and a segment update. Deflate runs every 16 blocks inside `enc`.
        records.for_each(|raw| {
            enc.reserve(raw.len()).map_err(output_error)?;
            let start = pseudo_offset(enc.position());
            enc.write_all(raw).map_err(output_error)?;
            if let Some(s) = summary.as_mut() {
                let r = RecordRef::new_unchecked(&raw[4..]);
                s.push(
                    r.reference_sequence_id(),
                    i64::from(r.position()),
                    r.end_position(),
                    r.flag() & sortase_bam::flags::UNMAPPED == 0,
                    start,
                    pseudo_offset(enc.position()),
                )
                .map_err(|e| output_error(format!("indexing: {e}")))?;
            }
            Ok(())
        })?;
        Ok(EncodedRange::Bam(
            enc.finish().map_err(output_error)?,
            summary,
        ))
    }
}

/// The BGZF blocks of a BAM output's header at `level`, as every BAM writer of the library starts
/// its file.
pub fn header_blocks(level: CompressionLevel, header: &Header) -> Result<EncodedBlocks> {
    let mut enc = BlockEncoder::new(level);
    enc.write_all(&header.to_bam_bytes())?;
    Ok(enc.finish()?)
}

/// Appends one encoded range's blocks to the block log and replays its index summary (offsets
/// local to the range) shifted to the range's first block.
fn push_range(
    log: &mut BlockLog,
    index: Option<&mut IndexBuilder>,
    blocks: &[(u32, u32)],
    summary: Option<RangeSummary>,
) -> Result<(), SortError> {
    if let (Some(mut s), Some(builder)) = (summary, index) {
        s.shift(pseudo_offset((log.blocks.len() as u64, 0)));
        s.replay(builder)
            .map_err(|e| output_error(format!("indexing: {e}")))?;
    }
    log.blocks.extend_from_slice(blocks);
    Ok(())
}

/// A BAM output assembled from encoded ranges written elsewhere (the parts of a distributed sort or
/// merge, `crate::tasks::assemble`): the block log and the index, exactly as [`RangeWriter`] keeps
/// them, without the ranges' bytes.
pub struct BamLayout {
    log: BlockLog,
    index: Option<IndexBuilder>,
}

impl BamLayout {
    /// Starts after the header's `blocks`; `bai` is `Some` with `--write-index` (BAI, else CSI).
    pub fn new(blocks: &EncodedBlocks, header: &Header, bai: Option<bool>) -> Self {
        let mut log = BlockLog::default();
        log.blocks.extend_from_slice(&blocks.blocks);
        let index = bai.map(|bai| {
            let ix = OnTheFlyIndex::new(header, bai);
            let offset0 = pseudo_offset((log.blocks.len() as u64, 0));
            IndexBuilder::new(ix.format(), ix.n_ref(), offset0)
        });
        Self { log, index }
    }

    /// Appends the next range: its blocks' sizes and index summary.
    pub fn push(
        &mut self,
        blocks: &[(u32, u32)],
        summary: Option<RangeSummary>,
    ) -> Result<(), SortError> {
        push_range(&mut self.log, self.index.as_mut(), blocks, summary)
    }

    /// Compressed bytes so far (header and ranges; not the EOF block).
    pub fn bytes(&self) -> u64 {
        self.log.blocks.iter().map(|&(c, _)| u64::from(c)).sum()
    }

    /// The index's bytes (with `--write-index`).
    pub fn finish(self) -> Option<Vec<u8>> {
        let log = self.log;
        self.index.map(|builder| finish_index(builder, &log))
    }
}

/// Writes encoded ranges in order (on the calling thread).
pub struct RangeWriter {
    out: Box<dyn Write + Send>,
    /// BAM output: ends with the BGZF EOF block.
    bam: bool,
    files: OutputFiles,
    log: BlockLog,
    index: Option<IndexBuilder>,
    cram: Option<Box<CramWriter<Box<dyn Write + Send>>>>,
    /// With `--write-index` on CRAM output: the data file, the `.crai` and htslib's threads.
    crai: Option<(PathBuf, PathBuf, usize)>,
    /// The output's name for messages.
    pub name: String,
}

/// Opens `out` (data `None`: stdout) and writes the header; with `--write-index` (`out.index`) a
/// BAM's index is built on the fly and a CRAM's `.crai` from the finished file by htslib; CRAM is
/// encoded on `threads` htslib threads. Returns the encoder for the workers and the writer for the
/// caller.
pub fn open(
    out: &ResolvedOutput,
    header: &Header,
    threads: usize,
    cram_out: &CramOut,
) -> Result<(RangeEncoder, RangeWriter)> {
    let (format, index, path) = (out.format, out.index_file(), out.data.as_deref());
    if format == OutFormat::Agd {
        return Err(crate::error::Error::argument(AGD_REFUSED).into());
    }
    let index_path = index.filter(|_| matches!(format, OutFormat::Bam(_)));
    let (files, mut sink) = OutputFiles::open(path, index_path.map(|(p, _)| p))?;
    let name = files.name.clone();
    let mut log = BlockLog::default();
    let mut cram = None;
    let mut builder = None;
    let crai = match (format, index, path) {
        (OutFormat::Cram, Some((i, _)), Some(p)) => {
            Some((p.to_path_buf(), i.to_path_buf(), threads))
        }
        _ => None,
    };
    match format {
        OutFormat::Bam(level) => {
            let blocks = header_blocks(level, header)?;
            sink.write_all(&blocks.bytes)
                .with_context(|| name.clone())?;
            let layout = BamLayout::new(&blocks, header, index.map(|(_, bai)| bai));
            log = layout.log;
            builder = layout.index;
        }
        OutFormat::Sam => sink
            .write_all(header.text().as_bytes())
            .with_context(|| name.clone())?,
        OutFormat::Cram => {
            let w = CramWriter::new(sink, header, &cram_out.write_options(threads))
                .with_context(|| name.clone())?;
            cram = Some(Box::new(w));
            sink = Box::new(std::io::sink());
        }
        OutFormat::Agd => unreachable!("refused above"),
    }
    let geometry = builder.as_ref().map(IndexBuilder::geometry);
    Ok((
        RangeEncoder {
            proof: None,
            format,
            header: header.clone(),
            index: geometry,
            range_bytes: sortase_sort::ranges::RANGE_BYTES as usize,
        },
        RangeWriter {
            out: sink,
            bam: matches!(format, OutFormat::Bam(_)),
            files,
            log,
            index: builder,
            cram,
            crai,
            name,
        },
    ))
}

impl RangeWriter {
    /// Appends the next range.
    pub fn write(&mut self, range: EncodedRange) -> Result<(), SortError> {
        match range {
            EncodedRange::Bam(blocks, summary) => {
                push_range(&mut self.log, self.index.as_mut(), &blocks.blocks, summary)?;
                self.out.write_all(&blocks.bytes)?;
            }
            EncodedRange::Text(text) => self.out.write_all(&text)?,
            EncodedRange::Records(batch) => {
                let cram = self
                    .cram
                    .as_mut()
                    .expect("records are encoded for CRAM only");
                cram.write_batch(&batch).map_err(output_error)?;
            }
        }
        Ok(())
    }

    /// Ends the file (BGZF EOF marker, index) and renames the outputs into place.
    pub fn finish(mut self) -> Result<()> {
        let name = self.name.clone();
        if let Some(cram) = self.cram.take() {
            let mut out = cram.finish().with_context(|| name.clone())?;
            out.flush().with_context(|| name.clone())?;
        }
        if self.bam {
            self.out
                .write_all(&EOF_MARKER)
                .with_context(|| name.clone())?;
        }
        self.out.flush().with_context(|| name.clone())?;
        drop(self.out);
        let bytes = self.index.map(|builder| finish_index(builder, &self.log));
        self.files.commit(bytes.as_deref())?;
        if let Some((data, crai, threads)) = self.crai {
            sortase_cram::build_index(&data, Some(&crai), threads).with_context(|| name.clone())?;
        }
        Ok(())
    }
}
