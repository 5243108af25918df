//! The one output writer of the library: a stream of raw records (in their final order) written as
//! BAM, SAM or CRAM, with an optional index built on the fly for BAM (`--write-index`), as samtools
//! view, sort, merge and markdup write their output. The facade's `range_output` is its front end for
//! output produced range by range on many threads (sort, merge); both write what [`crate::output`]
//! resolves (format, data path, index target), through [`OutputFiles`] (temporary names, renamed
//! on success).
//!
//! The index: records are written into [`ParallelWriter`], whose blocks are deflated on other threads,
//! so a record's compressed offset is unknown when it is written. The builder is fed "block number
//! << 16 | offset in block" and translated to real virtual offsets from the [`BlockLog`] at the end
//! ([`IndexBuilder::translate_offsets`]).

use crate::files::{Destination, OutputFile};
use crate::options::OutputSpec;
use crate::output::{OutFormat, ResolvedOutput, AGD_REFUSED};
use anyhow::{bail, Context, Result};
use sortase_bam::{sam_format, Header, RecordBatch, RecordRef};
use sortase_bgzf::{pool::ordered_pool, BlockLog, ParallelWriter, WriterOptions};
use sortase_cram::{CramWriter, WriteOptions};
use sortase_index::{IndexBuilder, IndexFormat};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What CRAM output needs besides the records: the reference and samtools' `--output-fmt-option`
/// settings (`version=3.0`, `seqs_per_slice=N`, `embed_ref`, `no_ref`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CramOut {
    /// The reference FASTA.
    pub reference: Option<PathBuf>,
    /// `key=value` settings, applied in order.
    pub format_options: Vec<String>,
}

impl CramOut {
    /// htslib's writer options with `threads` encoding threads.
    pub fn write_options(&self, threads: usize) -> WriteOptions {
        WriteOptions {
            reference: self.reference.clone(),
            threads,
            format_options: self.format_options.clone(),
        }
    }
}

impl crate::options::OutputSpec {
    /// The CRAM settings of this output.
    pub fn cram(&self) -> CramOut {
        CramOut {
            reference: self.reference.clone(),
            format_options: self.format_options.clone(),
        }
    }
}

/// Records per SAM formatting job / CRAM batch.
const BATCH_BYTES: usize = 4 << 20;

/// An on-the-fly index (samtools `--write-index`): its format, then the builder once the header is
/// written.
pub struct OnTheFlyIndex {
    format: IndexFormat,
    n_ref: usize,
    builder: Option<IndexBuilder>,
}

impl OnTheFlyIndex {
    /// An index for `header` in `format` (samtools: CSI with min_shift 14, or BAI).
    pub fn new(header: &Header, bai: bool) -> Self {
        let longest = header
            .references()
            .iter()
            .map(|r| u64::from(r.length))
            .max()
            .unwrap_or(0);
        let format = if bai {
            IndexFormat::Bai
        } else {
            IndexFormat::csi_for(14, longest)
        };
        Self {
            format,
            n_ref: header.references().len(),
            builder: None,
        }
    }
}

impl OnTheFlyIndex {
    /// The index format.
    pub fn format(&self) -> IndexFormat {
        self.format
    }

    /// References in the header.
    pub fn n_ref(&self) -> usize {
        self.n_ref
    }
}

/// Where sorted records go.
pub enum RecordSink {
    /// BAM through the parallel BGZF writer, with an optional on-the-fly index.
    Bam {
        /// The writer.
        writer: ParallelWriter<Box<dyn Write + Send>>,
        /// The index being built.
        index: Option<Box<OnTheFlyIndex>>,
    },
    /// SAM formatted in parallel batches.
    Sam {
        /// Formatting jobs.
        formatter: Option<sortase_bgzf::pool::Submitter<RecordBatch, Vec<u8>>>,
        /// The thread writing formatted text.
        writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
        /// Records waiting for the next job.
        pending: Pending,
    },
    /// CRAM through htslib.
    Cram {
        /// The writer.
        writer: Box<CramWriter<Box<dyn Write + Send>>>,
        /// Records waiting for the next batch.
        pending: Pending,
    },
}

/// Raw records collected into a batch.
#[derive(Default)]
pub struct Pending {
    buf: Vec<u8>,
    offsets: Vec<u32>,
}

impl Pending {
    fn push(&mut self, raw: &[u8]) -> bool {
        self.offsets.push(self.buf.len() as u32);
        self.buf.extend_from_slice(raw);
        self.buf.len() >= BATCH_BYTES
    }

    fn take(&mut self) -> RecordBatch {
        let buf = std::mem::take(&mut self.buf);
        let end = buf.len();
        RecordBatch::from_parts(buf, std::mem::take(&mut self.offsets), end, 0)
    }
}

impl RecordSink {
    /// Opens the sink and writes the header.
    pub fn new(
        format: OutFormat,
        header: &Header,
        threads: usize,
        cram: &CramOut,
        index: Option<OnTheFlyIndex>,
        mut out: Box<dyn Write + Send>,
    ) -> Result<Self> {
        Ok(match format {
            OutFormat::Bam(level) => {
                let mut writer = ParallelWriter::new(out, WriterOptions::new(threads, level));
                writer.write_all(&header.to_bam_bytes())?;
                writer.end_block()?;
                let index = index.map(|mut ix| {
                    let offset0 = pseudo_offset(writer.position());
                    ix.builder = Some(IndexBuilder::new(ix.format, ix.n_ref, offset0));
                    Box::new(ix)
                });
                RecordSink::Bam { writer, index }
            }
            OutFormat::Sam => {
                out.write_all(header.text().as_bytes())?;
                let shared = Arc::new(header.clone());
                let (tx, rx) = ordered_pool(threads, 2 * threads + 2, || {
                    let header = shared.clone();
                    move |batch: RecordBatch| {
                        let mut text = Vec::with_capacity(batch.bytes().len() * 2);
                        for r in batch.iter() {
                            sam_format::format_record(&r, &header, &mut text);
                        }
                        text
                    }
                });
                let writer = std::thread::spawn(move || {
                    for text in rx {
                        out.write_all(&text)?;
                    }
                    out.flush()
                });
                RecordSink::Sam {
                    formatter: Some(tx),
                    writer: Some(writer),
                    pending: Pending::default(),
                }
            }
            OutFormat::Cram => RecordSink::Cram {
                writer: Box::new(CramWriter::new(out, header, &cram.write_options(threads))?),
                pending: Pending::default(),
            },
            OutFormat::Agd => return Err(crate::error::Error::argument(AGD_REFUSED).into()),
        })
    }

    /// Writes one record (with its `block_size` prefix).
    #[inline]
    pub fn write(&mut self, raw: &[u8]) -> std::io::Result<()> {
        match self {
            RecordSink::Bam { writer, index } => {
                writer.write_record(raw)?;
                if let Some(builder) = index.as_mut().and_then(|ix| ix.builder.as_mut()) {
                    let r = RecordRef::new_unchecked(&raw[4..]);
                    builder
                        .push(
                            r.reference_sequence_id(),
                            i64::from(r.position()),
                            r.end_position(),
                            pseudo_offset(writer.position()),
                            r.flag() & sortase_bam::flags::UNMAPPED == 0,
                        )
                        .map_err(|e| std::io::Error::other(format!("indexing: {e}")))?;
                }
                Ok(())
            }
            RecordSink::Sam {
                formatter,
                writer,
                pending,
            } => {
                if pending.push(raw) {
                    submit_sam(formatter, writer, pending.take())?;
                }
                Ok(())
            }
            RecordSink::Cram { writer, pending } => {
                if pending.push(raw) {
                    writer
                        .write_batch(&pending.take())
                        .map_err(std::io::Error::other)?;
                }
                Ok(())
            }
        }
    }

    /// Writes a whole batch of records (SAM: one formatting job; CRAM: one batch; BAM: record by
    /// record).
    pub fn write_batch(&mut self, batch: RecordBatch) -> std::io::Result<()> {
        match self {
            RecordSink::Sam {
                formatter,
                writer,
                pending,
            } => {
                if !pending.offsets.is_empty() {
                    submit_sam(formatter, writer, pending.take())?;
                }
                submit_sam(formatter, writer, batch)
            }
            RecordSink::Cram { writer, pending } => {
                if !pending.offsets.is_empty() {
                    writer
                        .write_batch(&pending.take())
                        .map_err(std::io::Error::other)?;
                }
                writer.write_batch(&batch).map_err(std::io::Error::other)
            }
            RecordSink::Bam { .. } => batch.iter_raw().try_for_each(|r| self.write(r)),
        }
    }

    /// Flushes everything; returns the serialised index if one was built.
    pub fn finish(self) -> Result<Option<Vec<u8>>> {
        match self {
            RecordSink::Bam { writer, index } => {
                let (mut out, log) = writer.finish()?;
                out.flush()?;
                // INVARIANT: the builder is created when the sink writes the header.
                Ok(index.map(|ix| {
                    let builder = ix.builder.expect("index builder created with the header");
                    finish_index(builder, &log)
                }))
            }
            RecordSink::Sam {
                mut formatter,
                mut writer,
                mut pending,
            } => {
                if !pending.offsets.is_empty() {
                    submit_sam(&mut formatter, &mut writer, pending.take())?;
                }
                drop(formatter);
                if let Some(t) = writer {
                    t.join()
                        .map_err(|_| anyhow::anyhow!("SAM writer panicked"))??;
                }
                Ok(None)
            }
            RecordSink::Cram {
                mut writer,
                mut pending,
            } => {
                if !pending.offsets.is_empty() {
                    writer.write_batch(&pending.take())?;
                }
                let mut out = writer.finish()?;
                out.flush()?;
                Ok(None)
            }
        }
    }
}

fn submit_sam(
    formatter: &mut Option<sortase_bgzf::pool::Submitter<RecordBatch, Vec<u8>>>,
    writer: &mut Option<std::thread::JoinHandle<std::io::Result<()>>>,
    batch: RecordBatch,
) -> std::io::Result<()> {
    let tx = formatter.as_ref().expect("formatter lives until finish");
    if tx.submit(batch).is_err() {
        *formatter = None;
        return match writer.take().map(|t| t.join()) {
            Some(Ok(Err(e))) => Err(e),
            _ => Err(std::io::Error::other("SAM writer stopped")),
        };
    }
    Ok(())
}

/// "block number << 16 | offset in block", translated by [`finish_index`].
#[inline]
pub fn pseudo_offset((block, within): (u64, u16)) -> u64 {
    block << 16 | u64::from(within)
}

/// Translates the builder's pseudo-offsets through the block log and serialises the index.
pub fn finish_index(mut builder: IndexBuilder, log: &BlockLog) -> Vec<u8> {
    let starts = log.compressed_offsets();
    // A position at the very end of a block reads back (htslib `bgzf_tell` after the block is
    // consumed) as the start of the next block, and `samtools index` records it so.
    let real = |v: u64| {
        let (block, within) = ((v >> 16) as usize, v & 0xffff);
        match log.blocks.get(block) {
            Some(&(_, size)) if within == u64::from(size) => starts[block + 1] << 16,
            _ => (starts[block] << 16) | within,
        }
    };
    builder.translate_offsets(real);
    let end = *starts.last().expect("offsets has a final entry") << 16;
    builder.finish(end)
}

/// The files of one output: the data file (or standard output) and, with `--write-index`, the index
/// file, both under temporary names until [`OutputFiles::commit`] renames them; dropped uncommitted
/// (error, cancellation) they are removed.
pub struct OutputFiles {
    dest: Destination,
    index: Option<(OutputFile, std::fs::File)>,
    /// The output's name for messages.
    pub name: String,
}

impl OutputFiles {
    /// Opens `path` (`None` or `-`: standard output) and the index file `index`; returns the writer of
    /// the data file.
    pub fn open(
        path: Option<&Path>,
        index: Option<&Path>,
    ) -> Result<(Self, Box<dyn Write + Send>)> {
        let (dest, out) = Destination::open(path)?;
        let name = dest.name.clone();
        let index = index.map(OutputFile::create).transpose()?;
        Ok((Self { dest, index, name }, out))
    }

    /// Writes the index's bytes (if there is an index file and `index` is `Some`) and renames the
    /// files into place. The data file's writer must be flushed and dropped first.
    pub fn commit(self, index: Option<&[u8]>) -> Result<()> {
        match (self.index, index) {
            (Some((pending, mut f)), Some(bytes)) => {
                f.write_all(bytes)
                    .with_context(|| format!("{}: cannot write index", self.name))?;
                drop(f);
                self.dest.commit()?;
                pending.commit()
            }
            _ => self.dest.commit(),
        }
    }
}

impl OutputFiles {
    /// Builds the `.crai` of the finished CRAM data file into the index file with htslib (`samtools
    /// index`'s code, on `threads`), then renames both into place; without an index file, only
    /// renames the data file. The data file's writer must be flushed and dropped first.
    pub fn commit_crai(self, threads: usize) -> Result<()> {
        let Some((pending, f)) = self.index else {
            return self.dest.commit();
        };
        drop(f);
        let Some(data) = self.dest.file.as_ref() else {
            bail!("--write-index needs an output file (-o)");
        };
        sortase_cram::build_index(data.written_path(), Some(pending.written_path()), threads)
            .with_context(|| self.name.clone())?;
        self.dest.commit()?;
        pending.commit()
    }
}

/// The output of a sort, merge or view: the data file (or stdout) being written through a
/// [`RecordSink`] and, with `--write-index`, the index file. Both are written under temporary names
/// and renamed only by [`SortedOutput::finish`], so a failed run leaves neither.
pub struct SortedOutput {
    /// Where records go.
    pub sink: RecordSink,
    files: OutputFiles,
    /// CRAM output with an index: htslib's threads for building the `.crai` from the finished file.
    crai_threads: Option<usize>,
    /// The output's name for messages.
    pub name: String,
}

impl SortedOutput {
    /// Opens `out`'s data file (`None`: stdout) and its index file if it has one: for BAM a BAI or
    /// CSI built on the fly, for CRAM a `.crai` built from the finished file.
    pub fn open(
        out: &ResolvedOutput,
        header: &Header,
        threads: usize,
        cram: &CramOut,
    ) -> Result<Self> {
        let index = out.index_file();
        let (files, sink_out) = OutputFiles::open(out.data.as_deref(), index.map(|(p, _)| p))?;
        let name = files.name.clone();
        let crai_threads = (out.format == OutFormat::Cram && index.is_some()).then_some(threads);
        let builder = index
            .filter(|_| crai_threads.is_none())
            .map(|(_, bai)| OnTheFlyIndex::new(header, bai));
        let sink = RecordSink::new(out.format, header, threads, cram, builder, sink_out)
            .with_context(|| name.clone())?;
        Ok(Self {
            sink,
            files,
            crai_threads,
            name,
        })
    }

    /// Opens the output `spec` names, as samtools view writes it ([`OutputSpec::resolve_as`]); with
    /// the files it will leave, data file first.
    pub fn for_spec(
        spec: &OutputSpec,
        format: OutFormat,
        header: &Header,
        threads: usize,
    ) -> Result<(Self, Vec<PathBuf>)> {
        let out = spec.resolve_as(format)?;
        Ok((
            Self::open(&out, header, threads, &spec.cram())?,
            out.files(),
        ))
    }

    /// Flushes the records, writes the index, and renames both into place.
    pub fn finish(self) -> Result<()> {
        let index_bytes = self.sink.finish().with_context(|| self.name.clone())?;
        match self.crai_threads {
            Some(threads) => self.files.commit_crai(threads),
            None => self.files.commit(index_bytes.as_deref()),
        }
    }
}
