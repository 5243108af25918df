//! Opening any alignment input (SAM, bgzipped SAM, BAM, CRAM, or an AGD dataset directory; a path
//! or `-` for stdin) as a header plus a stream of raw-record batches.

use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use sortase_bam::{ChunkStream, Header, RecordBatch, SamReader};
use sortase_bgzf::{ChunkBuffers, ParallelReader, ReaderOptions};
use sortase_cram::{CramReader, Fields, ReadOptions};
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;
use std::sync::Arc;

/// The header of the BAM at `path`.
pub fn read_bam_header(path: &str) -> Result<Header> {
    let file = sortase_io::Source::open(path).context("cannot open")?;
    let mut reader = sortase_bgzf::SeekReader::new(BufReader::new(file));
    Ok(Header::read_bam(&mut reader)?)
}

/// The size of the input at `path` (a file or a URL) for progress; 0 when unknown (stdin).
pub fn input_size(path: &str) -> u64 {
    if path == "-" {
        return 0;
    }
    sortase_io::size(path).unwrap_or(0)
}

/// Batch size for SAM and CRAM input, in BAM bytes.
const TEXT_BATCH_BYTES: usize = 4 << 20;

/// The format of an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// SAM text, plain or bgzipped.
    Sam,
    /// BAM.
    Bam,
    /// CRAM.
    Cram,
    /// An AGD dataset directory (its records are those of the BAM it came from).
    Agd,
}

enum Records {
    Bam(ChunkStream),
    Sam(SamReader<Box<dyn BufRead + Send>>),
    Cram(Box<CramReader>),
    /// A dataset's chunks, decoded `threads` at a time.
    Agd {
        dir: std::path::PathBuf,
        manifest: Box<sortase_agd::Manifest>,
        threads: usize,
    },
    /// Only the header was read: records come from an index ([`Input::bam_header_only`]).
    HeaderOnly,
}

/// An opened input.
pub struct Input {
    /// The header as read.
    pub header: Header,
    /// The detected format.
    pub format: Format,
    records: Records,
    cancel: Option<crate::runtime::CancelFlag>,
}

/// Whether `path` is a CRAM file (its magic).
pub fn is_cram(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    sortase_io::Source::open_path(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"CRAM"
}

fn read_prefix<R: Read>(r: &mut R, n: usize) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(n);
    r.by_ref().take(n as u64).read_to_end(&mut head)?;
    Ok(head)
}

impl Input {
    /// Opens `path` (`-` for stdin), detecting the format from its first bytes. `threads` decode BGZF
    /// blocks or CRAM containers (htslib's pool).
    pub fn open(
        path: &str,
        threads: usize,
        reference: Option<&Path>,
        progress: &Progress,
    ) -> Result<Self> {
        Self::open_fields(path, threads, reference, Fields::All, progress)
    }

    /// [`Input::open`] for a caller that reads only `fields` of the records: CRAM decodes only those
    /// (the others are left empty); SAM and BAM records are always whole.
    pub fn open_fields(
        path: &str,
        threads: usize,
        reference: Option<&Path>,
        fields: Fields,
        progress: &Progress,
    ) -> Result<Self> {
        if path != "-" && crate::agd::is_dataset(Path::new(path)) {
            // No progress: the bar counts the bytes of a file.
            let manifest = crate::agd::open_manifest(Path::new(path))?;
            return Ok(Self {
                header: crate::agd::dataset_header(&manifest),
                format: Format::Agd,
                records: Records::Agd {
                    dir: path.into(),
                    manifest: Box::new(manifest),
                    threads,
                },
                cancel: None,
            });
        }
        let raw: Box<dyn Read + Send> = if path == "-" {
            Box::new(std::io::stdin())
        } else {
            Box::new(sortase_io::Source::open(path).context("cannot open")?)
        };
        let mut raw: Box<dyn Read + Send> = Box::new(progress.wrap(raw));
        let head = read_prefix(&mut raw, 18).context("cannot read")?;
        if head.is_empty() {
            bail!("file is empty (not SAM, BAM or CRAM)");
        }
        let whole: Box<dyn Read + Send> = Box::new(Cursor::new(head.clone()).chain(raw));
        if head.starts_with(&[0x1f, 0x8b]) {
            if !sortase_bgzf::is_bgzf(&head) {
                bail!("compressed with plain gzip, not BGZF; recompress with `bgzip`");
            }
            // Chunk buffers circulate between the inflating threads and the batches' consumers:
            // as many as the reader keeps in flight, plus the ones being consumed.
            let pool = Arc::new(ChunkBuffers::new(threads + 4));
            let options = ReaderOptions {
                buffers: Some(Arc::clone(&pool)),
                ..ReaderOptions::with_threads(threads)
            };
            let reader = ParallelReader::new(whole, options);
            let mut stream = ChunkStream::new(Box::new(reader)).with_buffers(pool);
            if stream.peek()?.starts_with(b"BAM\x01") {
                let header = stream.read_header()?;
                return Ok(Self {
                    header,
                    format: Format::Bam,
                    records: Records::Bam(stream),
                    cancel: None,
                });
            }
            let text: Box<dyn BufRead + Send> = Box::new(BufReader::with_capacity(1 << 20, stream));
            return Self::sam(text);
        }
        if head.starts_with(b"CRAM") {
            let options = ReadOptions {
                reference: reference.map(Path::to_path_buf),
                threads,
                fields,
            };
            let (header, reader) = CramReader::new(whole, &options)?;
            return Ok(Self {
                header,
                format: Format::Cram,
                records: Records::Cram(Box::new(reader)),
                cancel: None,
            });
        }
        if head.starts_with(b"BAM\x01") {
            bail!("uncompressed BAM without BGZF framing is not supported");
        }
        Self::sam(Box::new(BufReader::with_capacity(1 << 20, whole)))
    }

    /// The BAM at `path` with its header read and nothing else: for region queries, which read
    /// records through the index (a remote input is then not streamed from its start).
    pub fn bam_header_only(path: &str) -> Result<Self> {
        Ok(Self {
            header: read_bam_header(path)?,
            format: Format::Bam,
            records: Records::HeaderOnly,
            cancel: None,
        })
    }

    fn sam(text: Box<dyn BufRead + Send>) -> Result<Self> {
        let (header, reader) = SamReader::new(text)?;
        Ok(Self {
            header,
            format: Format::Sam,
            records: Records::Sam(reader),
            cancel: None,
        })
    }

    /// Stops [`Input::for_each_batch`] between batches once `flag` is set.
    pub fn set_cancel(&mut self, flag: crate::runtime::CancelFlag) {
        self.cancel = Some(flag);
    }

    /// Calls `f` on every batch of records, in file order.
    pub fn for_each_batch(&mut self, mut f: impl FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        let cancel = self.cancel.clone();
        let mut f = move |b: RecordBatch| -> Result<()> {
            if let Some(c) = &cancel {
                c.check()?;
            }
            f(b)
        };
        match &mut self.records {
            Records::Bam(stream) => {
                while let Some(batch) = stream.next_batch()? {
                    f(batch)?;
                }
            }
            Records::Sam(reader) => {
                while let Some(batch) = reader.next_batch(&self.header, TEXT_BATCH_BYTES)? {
                    f(batch)?;
                }
            }
            Records::Cram(reader) => {
                let mut failure = None;
                let r = reader.for_each_batch(TEXT_BATCH_BYTES, |b| {
                    f(b).map_err(|e| {
                        failure = Some(e);
                        sortase_bam::BamError::Cram("stopped".into())
                    })
                });
                if let Some(e) = failure {
                    return Err(e);
                }
                r?;
            }
            Records::Agd {
                dir,
                manifest,
                threads,
            } => crate::agd::for_each_chunk_batch_on(dir, manifest, *threads, f)?,
            Records::HeaderOnly => bail!("the input was opened for its header only"),
        }
        Ok(())
    }
}
