//! The tasks of a distributed fq2bam that need nothing but the aligner and the reads (issue 29):
//! [`FqScanTask`] (a byte range of a BGZF reads file, its records found and counted),
//! [`FqSplitTask`] (other reads cut into chunks of whole templates in one reads file) and
//! [`FqAlignTask`] (minimap2 on one chunk, the index loaded once per worker process
//! ([`crate::cache`]); its records, its templates' record counts and their samblaster signatures).
//! The plan that makes them and the sort map task are [`crate::plan`] (re-exported with these as
//! `sortase::tasks::fq2bam`); the kinds' registry is the facade's.

use crate::cache::{cached_aligner, index_loads};
use crate::job::stream_marking;
use crate::job::{self as one, DuplicateMarking, Fq2BamJob};
use crate::pipeline::{self, PipelineOptions, CHUNK_BASES};
use crate::reads::{ChunkFileSource, ChunkSource, FastqSource, ReadChunk};
use crate::Aligner;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_agd::Group;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::files::create_private;
use sortase_exec::parts::write_sections;
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{measured, Span, Task, READ_SLACK};
use sortase_exec::wire::WorkFile;
use sortase_fasta::fastq::FastqReader;
use sortase_markdup::tasks::query::{partition, FileSlice};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

// ------------------------------------------------------------------------------ stage 1: scan

/// Stage 1 for BGZF reads: one byte range of one reads file, its records found and counted
/// ([`sortase_fasta::fastq_cut`]), so that align tasks read the file from their first record
/// without a pass over the whole file first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqScanTask {
    /// Which reads file (0: R1, 1: R2).
    pub file: usize,
    /// The file.
    pub path: PathBuf,
    /// Which range of the file.
    pub range: usize,
    /// The range's first byte.
    pub start: u64,
    /// Past its last byte.
    pub end: u64,
}

/// What a [`FqScanTask`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqScanOutput {
    /// The reads file.
    pub file: usize,
    /// The range.
    pub range: usize,
    /// Virtual position of the range's first record (`None`: no record starts in it).
    pub first: Option<u64>,
    /// Records starting in the range.
    pub records: u64,
    /// Virtual position of the record after them (`None`: the end of the file).
    pub next: Option<u64>,
    /// Whether the records walked are four-line FASTQ (else the split task reads the file).
    pub regular: bool,
}

impl FqScanTask {
    /// Scans the range.
    pub fn run(&self) -> anyhow::Result<FqScanOutput> {
        let mut file = sortase_io::Source::open_path(&self.path)
            .with_context(|| format!("{}: cannot open", self.path.display()))?;
        file.expect_end(self.end.saturating_add(READ_SLACK));
        let s = sortase_fasta::fastq_cut::scan_range_in(file, &self.path, self.start, self.end)
            .map_err(|e| one::kinded(e.into()))?;
        Ok(FqScanOutput {
            file: self.file,
            range: self.range,
            first: s.first,
            records: s.records,
            next: s.next,
            regular: s.regular,
        })
    }
}

/// Where a part of a BGZF reads file starts: the record at `at` (a virtual position), then
/// `skip` records read and dropped (the templates before the part are [`FqReads::Bgzf`]'s
/// `before`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqStart {
    /// The file.
    pub path: PathBuf,
    /// A record's virtual position.
    pub at: u64,
    /// Records to drop from there.
    pub skip: u64,
    /// Past the last compressed byte the part's records can reach (the block holding the
    /// position where the last of their ranges' walks ended, or the file's end).
    pub end: u64,
}

/// The reads an align task maps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FqReads {
    /// A chunk of the split task's reads file.
    Chunk(FileSlice),
    /// Templates `before + 1 ..` of BGZF reads files (R1, and R2), read from their positions.
    Bgzf {
        /// R1, and R2.
        files: Vec<FqStart>,
        /// Templates before the chunk's first.
        before: u64,
    },
    /// The fragments whose first read lies in chunks `chunks` of an AGD dataset
    /// (`job/dataset.rs`).
    Dataset {
        /// The dataset.
        dir: PathBuf,
        /// Its chunks (numbers in the manifest's list).
        chunks: std::ops::Range<usize>,
    },
}

impl FqReads {
    /// The chunk's templates as a source of fragments.
    fn source(
        &self,
        fragments: u64,
        aligner: &Aligner,
        preset: &str,
    ) -> anyhow::Result<Box<dyn ChunkSource>> {
        let at = |p: &Path| p.display().to_string();
        Ok(match self {
            FqReads::Dataset { dir, chunks } => Box::new(
                one::dataset::DatasetReads::open(dir, preset)?
                    .fragment_mode(aligner.fragment_mode())
                    .part(chunks.clone())?,
            ),
            FqReads::Chunk(slice) => {
                let mut input = sortase_io::Source::open_path(&slice.path)
                    .with_context(|| format!("{}: cannot open", at(&slice.path)))?;
                input
                    .seek(SeekFrom::Start(slice.start))
                    .with_context(|| at(&slice.path))?;
                let input = BufReader::new(input.take(slice.end - slice.start));
                Box::new(ChunkFileSource::new(input, &slice.path, fragments))
            }
            FqReads::Bgzf { files, before } => {
                let mut readers = Vec::new();
                for f in files {
                    let mut file = sortase_io::Source::open_path(&f.path)
                        .with_context(|| format!("{}: cannot open", at(&f.path)))?;
                    file.expect_end(f.end);
                    let mut r = sortase_bgzf::SeekReader::new(file);
                    r.seek_virtual(f.at).with_context(|| at(&f.path))?;
                    let mut reader =
                        FastqReader::new(Box::new(r), &f.path).numbered_after(before - f.skip);
                    let mut rec = sortase_fasta::fastq::Record::default();
                    for _ in 0..f.skip {
                        reader.read(&mut rec).map_err(|e| one::kinded(e.into()))?;
                    }
                    readers.push(reader);
                }
                let mut readers = readers.into_iter();
                let r1 = readers.next().context("no reads file")?;
                // Pairs, or single reads that are templates of their own (see `plan`).
                Box::new(FastqSource::new(r1, readers.next(), false).part(*before, fragments))
            }
        })
    }

    /// The bytes it reads.
    fn spans(&self) -> Vec<Span> {
        match self {
            FqReads::Chunk(c) => vec![Span::ranges(&c.path, vec![(c.start, c.end)]).streamed()],
            FqReads::Bgzf { files, .. } => files
                .iter()
                .map(|f| Span::ranges(&f.path, vec![(f.at >> 16, f.end)]).streamed())
                .collect(),
            FqReads::Dataset { dir, .. } => self
                .dataset_files()
                .into_iter()
                .chain([dir.join(sortase_agd::MANIFEST_FILE)])
                .map(|p| Span::whole(&p))
                .collect(),
        }
    }

    /// A dataset part's chunk files (its chunks, and the next one, where a final READ1's mate
    /// may be).
    fn dataset_files(&self) -> Vec<PathBuf> {
        let FqReads::Dataset { dir, chunks } = self else {
            return Vec::new();
        };
        let groups = [Group::Names, Group::Bases, Group::Qual, Group::Results];
        (chunks.start..chunks.end + 1)
            .flat_map(|k| groups.map(|g| sortase_agd::chunk_path(dir, g, k)))
            .filter(|p| p.exists())
            .collect()
    }

    /// How many bytes that is.
    fn bytes(&self) -> u64 {
        match self {
            FqReads::Chunk(c) => c.end - c.start,
            FqReads::Bgzf { files, .. } => files.iter().map(|f| f.end - (f.at >> 16)).sum(),
            FqReads::Dataset { .. } => self
                .dataset_files()
                .iter()
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum(),
        }
    }

    /// The (first) file, for messages.
    fn path(&self) -> &Path {
        match self {
            FqReads::Chunk(c) => &c.path,
            FqReads::Bgzf { files, .. } => files.first().map_or(Path::new(""), |f| &f.path),
            FqReads::Dataset { dir, .. } => dir,
        }
    }
}

// ------------------------------------------------------------------------------ stage 1: split

/// Stage 1: the reads cut into chunks of whole templates, written to one reads file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqSplitTask {
    /// R1 (or the only reads file), as the job names it.
    pub reads1: PathBuf,
    /// R2.
    pub reads2: Option<PathBuf>,
    /// One file in fragment mode: consecutive reads of one name are a template.
    pub fragment_mode: bool,
    /// Templates per chunk.
    pub chunk_templates: u64,
    /// The reads file it writes.
    pub path: PathBuf,
}

/// One chunk of the reads file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqChunk {
    /// First byte.
    pub start: u64,
    /// Past the last byte.
    pub end: u64,
    /// Templates.
    pub fragments: u64,
    /// Reads.
    pub reads: u64,
    /// Bases.
    pub bases: u64,
}

/// What a [`FqSplitTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqSplitOutput {
    /// The reads file.
    pub path: PathBuf,
    /// Its chunks, in input order (at least one; an empty input has one empty chunk).
    pub chunks: Vec<FqChunk>,
}

impl FqSplitTask {
    /// Reads the input and writes the chunks. Errors are the one-machine job's.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<FqSplitOutput> {
        let hidden = sortase_exec::progress::Progress::hidden();
        let r1 = one::open_reads(&self.reads1, &hidden)?;
        let r2 = self
            .reads2
            .as_deref()
            .map(|p| one::open_reads(p, &hidden))
            .transpose()?;
        let mut source = FastqSource::new(r1, r2, self.fragment_mode);
        let file = WorkFile::new(&self.path)?;
        let at = || self.path.display().to_string();
        let mut out = BufWriter::new(
            create_private(file.path()).with_context(|| format!("{}: cannot create", at()))?,
        );
        let mut chunks = Vec::new();
        let mut cur = FqChunk {
            start: 0,
            end: 0,
            fragments: 0,
            reads: 0,
            bases: 0,
        };
        let mut offset = 0u64;
        let mut buf = ReadChunk::default();
        let mut counter = CountingWriter {
            inner: &mut out,
            bytes: 0,
        };
        loop {
            rt.check_cancelled()?;
            // Work-queue chunks of whole templates, written template by template: a chunk of
            // the file holds `chunk_templates` of them (the last one fewer).
            source.fill(&mut buf, CHUNK_BASES).map_err(one::kinded)?;
            if buf.is_empty() {
                break;
            }
            for f in 0..buf.fragments() {
                cur.bases += buf.write_fragment(f, &mut counter).with_context(at)? as u64;
                cur.fragments += 1;
                cur.reads += buf.fragment(f).len() as u64;
                if cur.fragments == self.chunk_templates {
                    cur.end = offset + counter.bytes;
                    offset = cur.end;
                    counter.bytes = 0;
                    chunks.push(cur.clone());
                    cur = FqChunk {
                        start: offset,
                        end: offset,
                        fragments: 0,
                        reads: 0,
                        bases: 0,
                    };
                }
            }
        }
        cur.end = offset + counter.bytes;
        if cur.fragments > 0 || chunks.is_empty() {
            chunks.push(cur);
        }
        out.flush().with_context(at)?;
        drop(out);
        file.commit()?;
        Ok(FqSplitOutput {
            path: self.path.clone(),
            chunks,
        })
    }
}

struct CountingWriter<'a, W> {
    inner: &'a mut W,
    bytes: u64,
}

impl<W: Write> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

// ------------------------------------------------------------------------------ stage 2: align

/// Stage 2: minimap2 on one chunk; its records, its templates' record counts and its signatures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqAlignTask {
    /// The job (index, preset, options).
    pub job: Box<Fq2BamJob>,
    /// minimap2's `-t` in the header's `CL:`.
    pub threads: usize,
    /// This chunk.
    pub chunk: usize,
    /// Chunks.
    pub chunks: usize,
    /// The chunk's reads.
    pub reads: FqReads,
    /// Templates in the chunk.
    pub fragments: u64,
    /// Signature partitions (0: no marking).
    pub partitions: usize,
    /// The index and the reads as minimap2's `@PG CL:` names them (`None`: the job's paths).
    #[serde(default)]
    pub names: Option<Vec<String>>,
    /// Where the records go (raw BAM records back to back).
    pub records_path: PathBuf,
    /// Where each template's number of records goes (u32 little-endian each).
    pub counts_path: PathBuf,
    /// Where the signatures go (16-byte signature, 4-byte ordinal; partition after partition).
    pub sigs_path: PathBuf,
}

/// What a [`FqAlignTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqAlignOutput {
    /// The chunk.
    pub chunk: usize,
    /// Chunks.
    pub chunks: usize,
    /// Templates.
    pub fragments: u64,
    /// Reads.
    pub reads: u64,
    /// Bases.
    pub bases: u64,
    /// Records.
    pub records: u64,
    /// Their bytes.
    pub record_bytes: u64,
    /// The records.
    pub records_path: PathBuf,
    /// The templates' record counts.
    pub counts_path: PathBuf,
    /// The signatures.
    pub sigs_path: PathBuf,
    /// Byte offset of each partition's signatures, and the end.
    pub offsets: Vec<u64>,
    /// minimap2's SAM header (the same for every chunk).
    pub sam_header: String,
    /// Whether this task loaded the index (else the worker process had it).
    pub index_loaded: bool,
    /// Indexes the worker process has loaded so far.
    pub index_loads: u64,
    /// The worker process.
    pub pid: u32,
}

impl FqAlignTask {
    /// Maps the chunk.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<FqAlignOutput> {
        let job = &*self.job;
        let (aligner, index_loaded) = cached_aligner(job, rt.threads())?;
        rt.check_cancelled()?;
        let layout = match job.markdup {
            DuplicateMarking::Samblaster => Some(one::sig_layout(&aligner, &job.index)?),
            _ => None,
        };
        let command_line = match self.names.as_deref() {
            Some([index, reads @ ..]) => aligner.command_line_naming(self.threads, index, reads),
            _ => one::command_line(&aligner, job, self.threads),
        };
        let sam_header = aligner.sam_header(&command_line);
        let at = |p: &Path| p.display().to_string();
        let source = self.reads.source(self.fragments, &aligner, &job.preset)?;
        let create = |p: &Path| -> anyhow::Result<(WorkFile, BufWriter<std::fs::File>)> {
            let f = WorkFile::new(p)?;
            let w = BufWriter::new(
                create_private(f.path()).with_context(|| format!("{}: cannot create", at(p)))?,
            );
            Ok((f, w))
        };
        let (records_file, mut records) = create(&self.records_path)?;
        let (counts_file, mut counts) = create(&self.counts_path)?;
        let mut parts: Vec<Vec<u8>> = vec![Vec::new(); self.partitions];
        let mut ordinal = 0u32;
        let mut record_bytes = 0u64;
        let stop = rt.cancel_flag().shared();
        let stats = pipeline::run(
            &aligner,
            source,
            &PipelineOptions::new(rt.threads()),
            &stop,
            |_, batch| stream_marking::verdicts(batch, layout.as_ref()),
            |batch, verdicts| -> anyhow::Result<()> {
                records
                    .write_all(batch.records.bytes())
                    .with_context(|| at(&self.records_path))?;
                record_bytes += batch.records.bytes().len() as u64;
                for f in 0..batch.fragments.len() {
                    let n = batch.fragment(f).len() as u32;
                    counts
                        .write_all(&n.to_le_bytes())
                        .with_context(|| at(&self.counts_path))?;
                }
                for v in &verdicts {
                    if let Some(sig) = stream_marking::signature(v)? {
                        let p = &mut parts[partition(sig, self.partitions)];
                        p.extend_from_slice(&sig.to_le_bytes());
                        p.extend_from_slice(&ordinal.to_le_bytes());
                    }
                    ordinal += 1;
                }
                Ok(())
            },
        )
        .map_err(one::classify)?;
        rt.check_cancelled()?;
        // A dataset part's fragments are known by reading it (pairs or single reads).
        let dataset = matches!(self.reads, FqReads::Dataset { .. });
        if !dataset && stats.fragments != self.fragments {
            return Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{}: chunk {} holds {} templates, the split wrote {}",
                    at(self.reads.path()),
                    self.chunk,
                    stats.fragments,
                    self.fragments
                ),
            )
            .into());
        }
        records.flush().with_context(|| at(&self.records_path))?;
        counts.flush().with_context(|| at(&self.counts_path))?;
        drop((records, counts));
        records_file.commit()?;
        counts_file.commit()?;
        let offsets = write_sections(&self.sigs_path, &parts)?;
        Ok(FqAlignOutput {
            chunk: self.chunk,
            chunks: self.chunks,
            fragments: stats.fragments,
            reads: stats.reads,
            bases: stats.bases,
            records: stats.records,
            record_bytes,
            records_path: self.records_path.clone(),
            counts_path: self.counts_path.clone(),
            sigs_path: self.sigs_path.clone(),
            offsets,
            sam_header,
            index_loaded,
            index_loads: index_loads(),
            pid: std::process::id(),
        })
    }
}

impl Task for FqSplitTask {
    const KIND: &'static str = "fq2bam.split";
    type Output = FqSplitOutput;

    fn run(&self, rt: &Runtime) -> Result<FqSplitOutput> {
        FqSplitTask::run(self, rt).map_err(Error::from)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        let mut v = vec![Span::whole(&self.reads1)];
        v.extend(self.reads2.iter().map(Span::whole));
        Ok(v)
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

impl Task for FqScanTask {
    const KIND: &'static str = "fq2bam.scan";
    type Output = FqScanOutput;

    fn run(&self, rt: &Runtime) -> Result<FqScanOutput> {
        rt.check_cancelled()?;
        FqScanTask::run(self).map_err(Error::from)
    }

    /// Its range and [`READ_SLACK`] past it: the walk reads on past its end to the next record's
    /// start (at most one record more, in the block after the range's last one). A task on
    /// object storage fetches these bytes alone.
    fn reads(&self) -> Result<Vec<Span>> {
        let end = self.end.saturating_add(READ_SLACK);
        Ok(vec![
            Span::ranges(&self.path, vec![(self.start, end)]).streamed()
        ])
    }

    fn writes(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

impl Task for FqAlignTask {
    const KIND: &'static str = "fq2bam.align";
    type Output = FqAlignOutput;

    fn run(&self, rt: &Runtime) -> Result<FqAlignOutput> {
        FqAlignTask::run(self, rt).map_err(Error::from)
    }

    /// The index (whole) and its chunk of the reads file.
    fn reads(&self) -> Result<Vec<Span>> {
        Ok(vec![Span::whole(&self.job.index)]
            .into_iter()
            .chain(self.reads.spans())
            .collect())
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![
            self.records_path.clone(),
            self.counts_path.clone(),
            self.sigs_path.clone(),
        ]
    }

    /// The chunk's bytes and the files written: the index is read once per worker process (on
    /// object storage a worker fetches it once and links it into each task's directory).
    fn local_bytes(&self) -> (u64, u64) {
        let (_, written) = measured(Ok(Vec::new()), &self.writes());
        (self.reads.bytes(), written)
    }
}
