//! `sortase fq2bam` as serialisable tasks whose finished output is byte-identical to
//! [`Fq2BamJob::run`] with the same options, samblaster's marking or none (issue 29).
//!
//! The stages:
//!
//! 1. [`FqSplitTask`] (one task): reads R1 (and R2) once, with the one-machine job's reader and
//!    pairing (so a truncated or unpaired input fails with its message), and writes the
//!    fragments (templates) into one reads file, cut into chunks of `chunk_templates` fragments
//!    (the last may be smaller). Returns each chunk's byte range in the file.
//! 2. [`FqAlignTask`] (one per chunk): minimap2 on the chunk through the one-machine job's work
//!    queue (all the task's threads), the index loaded once per worker process (a per-process
//!    cache keyed by the index file, its size and mtime, and the options that build the index:
//!    [`index_loads`] counts the loads). Writes the records (raw BAM, minimap2's order) and the
//!    number of records of each fragment, and each fragment's samblaster signature with its
//!    ordinal (its number in the chunk), partitioned by the signature's hash as the distributed
//!    markdup's map stage writes them.
//! 3. `dedup`: the distributed markdup's reduce tasks ([`MdReduceTask`]), one per hash
//!    partition: every chunk's signatures of the partition in chunk order, so the first
//!    occurrence in input order wins, as on one machine; writes the duplicates' ordinals per chunk.
//! 4. [`FqSortMapTask`] (one per chunk): reads the chunk's records, sets 0x400 on every record of a
//!    duplicate fragment, and sorts them into one run as the sort's map task does, its records
//!    numbered from the chunk's first record's number in the whole input.
//! 5. The sort's reduce tasks, then the sort's parallel finish ([`crate::tasks::assemble`]).
//!
//! Why the bytes match: minimap2 maps every fragment on its own (the one-machine job already maps
//! ~64 KiB chunks on many threads, with the output of `minimap2 -ax` that maps 500 Mbases per
//! batch; minimap2 estimates no paired-end statistics per batch), so the records and their order
//! do not depend on the chunks. The marking decides by the first occurrence in input order, which
//! the chunk order and the ordinals give. A sort's output depends only on the record sequence
//! (see [`crate::tasks::sort`]), which is the one-machine job's: chunk after chunk, minimap2's
//! order within. The header is minimap2's with the job's `@PG` lines, as on one machine; its
//! `CL:` names the job's reads and the plan's threads as `-t`.

use super::markdup::{partition, FileSlice, MdReduceOutput, MdReduceTask};
use super::registry::{AnyTask, Task};
use super::sort::map::{hold, sort_into_run};
use super::sort::{MapOutput, MapTask, ReduceOutput};
use super::{Layout, PlanOptions, SortPlan};
use crate::error::{bail_argument, Error, ErrorKind, Result};
use crate::fq2bam::stream_marking::{self, set_duplicate};
use crate::fq2bam::{self as one, DuplicateMarking, Fq2BamJob};
use crate::options::Order;
use crate::output::temp_prefix;
use crate::parts::{complete, create_work_dir, remove_work_dir, write_sections};
use crate::runtime::Runtime;
use crate::sort::SortJob;
use crate::wire::WorkFile;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_agd::Group;
use sortase_align::pipeline::{self, PipelineOptions, CHUNK_BASES};
use sortase_align::reads::{ChunkFileSource, ChunkSource, FastqSource, ReadChunk};
use sortase_align::Aligner;
use sortase_bam::RecordBatch;
use sortase_fasta::fastq::FastqReader;
use sortase_sort::SortOrder;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of record data a sort map task reads into one batch.
const BATCH_BYTES: usize = 32 << 20;
/// Memory a chunk's template takes in a sort map task, for the default chunk size: two ~150-base
/// records of ~400 bytes with their sort entries.
const TEMPLATE_MEMORY: usize = 1000;

/// The job as a driver plans it: the one-machine job and how to cut it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fq2BamTasksJob {
    /// The one-machine job (its `index` and reads as every worker sees them).
    pub job: Fq2BamJob,
    /// Templates per chunk (default: `task_memory` / 1000 bytes, ~770 000 at the default).
    #[serde(default)]
    pub chunk_templates: Option<u64>,
    /// Compressed bytes of a BGZF reads file per scan task (default 64 MiB).
    #[serde(default)]
    pub scan_bytes: Option<u64>,
}

/// Compressed bytes of a BGZF reads file one scan task reads, by default.
const SCAN_BYTES: u64 = 64 << 20;
/// The largest BGZF block (compressed).
const BGZF_BLOCK_MAX: u64 = sortase_bgzf::BLOCK_MAX as u64;

/// A distributed fq2bam, planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fq2BamPlan {
    job: Fq2BamJob,
    /// minimap2's `-t` in `@PG CL:` (the plan's threads, as `-@` on one machine).
    threads: usize,
    chunk_templates: u64,
    /// Whether the preset maps a template's reads together.
    fragment_mode: bool,
    /// The reads files cut by blocks (R1, R2), each with its size; empty: read by one split task.
    bgzf: Vec<(PathBuf, u64)>,
    scan_bytes: u64,
    options: PlanOptions,
    work_dir: PathBuf,
    /// An AGD dataset's reads (`reads1` names it): the records of each of its chunks; `None`:
    /// FASTQ.
    #[serde(default)]
    dataset: Option<Vec<u64>>,
}

/// A task of a distributed fq2bam (its own kinds; the dedup stage's are markdup's reduce tasks,
/// the last stage's the sort's reduce tasks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fq2BamTask {
    /// Stage 1 (BGZF reads).
    Scan(FqScanTask),
    /// Stage 1 (other reads, or BGZF reads the scans could not cut).
    Split(FqSplitTask),
    /// Stage 2.
    Align(FqAlignTask),
    /// Stage 4.
    SortMap(FqSortMapTask),
}

impl Fq2BamTask {
    /// As a task of any kind.
    pub fn into_task(self) -> AnyTask {
        match self {
            Fq2BamTask::Scan(t) => t.into(),
            Fq2BamTask::Split(t) => t.into(),
            Fq2BamTask::Align(t) => t.into(),
            Fq2BamTask::SortMap(t) => t.into(),
        }
    }
}

impl Fq2BamTasksJob {
    /// Plans the job (reads no input: the split task does): checks the options and the output,
    /// creates the work directory. `rt`'s threads are minimap2's `-t` in the header.
    pub fn plan(&self, rt: &Runtime, options: &PlanOptions) -> Result<Fq2BamPlan> {
        plan(self, rt, options).map_err(Error::from)
    }
}

fn sort_job(job: &Fq2BamJob) -> SortJob {
    let mut sort = SortJob::new("", job.output.clone());
    sort.order = Order::Coordinate;
    sort.temp_prefix = job.temp_prefix.clone();
    sort.max_fan_in = job.max_fan_in;
    // The header carries the job's @PG already.
    sort.program = None;
    sort
}

fn plan(t: &Fq2BamTasksJob, rt: &Runtime, options: &PlanOptions) -> anyhow::Result<Fq2BamPlan> {
    let job = &t.job;
    if job.markdup == DuplicateMarking::Picard {
        bail_argument!(
            "distributed fq2bam marks duplicates with samblaster's algorithm or not at all \
             (markdup samblaster|none); run `sortase fq2bam --markdup picard` on one machine"
        );
    }
    if job.checksums {
        bail_argument!(
            "distributed fq2bam does not sum its reads and records (checksums); run \
             `sortase fq2bam --checksums` on one machine"
        );
    }
    let fragment_mode =
        sortase_align::index::preset_fragment_mode(&job.preset).map_err(one::kinded)?;
    one::check_pairing(job, fragment_mode)?;
    if let Some(rg) = &job.read_group {
        sortase_align::index::parse_read_group(rg).map_err(one::kinded)?;
    }
    let sort = sort_job(job);
    // The output checked as the sort's tasks check it (BAM to a file).
    SortPlan::of_records(
        &sort,
        options,
        &sortase_bam::Header::default(),
        PathBuf::new(),
    )?;
    let data = crate::output::resolve_output(
        &job.output,
        crate::sort::DEFAULT_LEVEL,
        true,
        &mut Vec::new(),
    )?
    .data
    .context("no output file")?;
    let chunk_templates = t
        .chunk_templates
        .unwrap_or((options.task_memory / TEMPLATE_MEMORY) as u64)
        .max(1);
    let dataset = if sortase_exec::agd::is_dataset(&job.reads1) {
        if let Some(r2) = &job.reads2 {
            bail_argument!(
                "{}: a dataset holds both reads of its pairs: give it alone, not with {}",
                job.reads1.display(),
                r2.display()
            );
        }
        let manifest = sortase_exec::agd::open_manifest(&job.reads1)?;
        Some(manifest.chunks.iter().map(|c| c.records).collect())
    } else {
        None
    };
    let bgzf = if dataset.is_some() || (fragment_mode && job.reads2.is_none()) {
        // One file in fragment mode: a template's reads are only known by reading on.
        Vec::new()
    } else {
        bgzf_reads(job)?
    };
    let prefix = temp_prefix(job.temp_prefix.as_deref(), Some(&data), rt.temp_dir());
    let work_dir = create_work_dir(&prefix)?;
    Ok(Fq2BamPlan {
        job: job.clone(),
        threads: rt.threads(),
        chunk_templates,
        fragment_mode,
        bgzf,
        scan_bytes: t.scan_bytes.unwrap_or(SCAN_BYTES).max(1),
        options: options.clone(),
        work_dir,
        dataset,
    })
}

/// The reads files with their sizes if every one is BGZF (its first bytes a BGZF block header),
/// else none: plain and gzip FASTQ is read by one split task.
fn bgzf_reads(job: &Fq2BamJob) -> anyhow::Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for path in std::iter::once(&job.reads1).chain(job.reads2.as_ref()) {
        let mut head = [0u8; 18];
        let Ok(mut f) = std::fs::File::open(path) else {
            return Ok(Vec::new()); // the split task reports it as on one machine
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if f.read_exact(&mut head).is_err() || sortase_bgzf::parse_header(&head).is_err() {
            return Ok(Vec::new());
        }
        files.push((path.clone(), len));
    }
    Ok(files)
}

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
        let s = sortase_fasta::fastq_cut::scan_range(&self.path, self.start, self.end)
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

/// A range of a BGZF reads file that holds records: its first record's position, the records
/// of the file before it, and where the range's walk ended (`None`: the end of the file).
#[derive(Debug, Clone, Copy)]
struct RangeStart {
    first: u64,
    before: u64,
    next: Option<u64>,
}

/// BGZF reads files cut by the scans: each file's ranges that hold records, and the templates.
struct ReadsCut {
    files: Vec<Vec<RangeStart>>,
    templates: u64,
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
    /// ([`crate::fq2bam::dataset`]).
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
                let mut input = std::fs::File::open(&slice.path)
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
                    let file = std::fs::File::open(&f.path)
                        .with_context(|| format!("{}: cannot open", at(&f.path)))?;
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
    fn spans(&self) -> Vec<super::Span> {
        match self {
            FqReads::Chunk(c) => vec![super::Span::ranges(&c.path, vec![(c.start, c.end)])],
            FqReads::Bgzf { files, .. } => files
                .iter()
                .map(|f| super::Span::ranges(&f.path, vec![(f.at >> 16, f.end)]))
                .collect(),
            FqReads::Dataset { dir, .. } => self
                .dataset_files()
                .into_iter()
                .chain([dir.join(sortase_agd::MANIFEST_FILE)])
                .map(|p| super::Span::whole(&p))
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
            crate::files::create_private(file.path())
                .with_context(|| format!("{}: cannot create", at()))?,
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

/// What identifies a loaded index: its file and the options it was built or loaded with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IndexKey {
    path: PathBuf,
    len: u64,
    modified: Option<std::time::SystemTime>,
    preset: String,
    md: bool,
    cs: bool,
    read_group: Option<String>,
}

/// The worker process's index: loaded by its first align task, kept for the next ones.
static INDEX: Mutex<Option<(IndexKey, Arc<Aligner>)>> = Mutex::new(None);
/// Indexes this process has loaded (built or read).
static INDEX_LOADS: AtomicU64 = AtomicU64::new(0);

/// How many times this process has loaded a minimap2 index for align tasks.
pub fn index_loads() -> u64 {
    INDEX_LOADS.load(Ordering::Relaxed)
}

/// The index of `job`, from the process's cache or loaded (then cached, replacing another);
/// whether it was loaded now.
fn cached_aligner(job: &Fq2BamJob, threads: usize) -> anyhow::Result<(Arc<Aligner>, bool)> {
    let meta = std::fs::metadata(&job.index).map_err(|e| {
        one::kinded(sortase_align::AlignError::Io {
            path: job.index.clone(),
            source: e,
        })
    })?;
    let key = IndexKey {
        path: job.index.clone(),
        len: meta.len(),
        modified: meta.modified().ok(),
        preset: job.preset.clone(),
        md: job.md,
        cs: job.cs,
        read_group: job.read_group.clone(),
    };
    // Held while loading: a second task of this process waits instead of loading it again.
    let mut slot = INDEX.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((k, a)) = slot.as_ref() {
        if *k == key {
            return Ok((a.clone(), false));
        }
    }
    // The old index first: two need not fit at once.
    *slot = None;
    let aligner =
        Aligner::load(&job.index, &one::aligner_options(job, threads)).map_err(one::kinded)?;
    INDEX_LOADS.fetch_add(1, Ordering::Relaxed);
    let aligner = Arc::new(aligner);
    *slot = Some((key, aligner.clone()));
    Ok((aligner, true))
}

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
        let sam_header = aligner.sam_header(&one::command_line(&aligner, job, self.threads));
        let at = |p: &Path| p.display().to_string();
        let source = self.reads.source(self.fragments, &aligner, &job.preset)?;
        let create = |p: &Path| -> anyhow::Result<(WorkFile, BufWriter<std::fs::File>)> {
            let f = WorkFile::new(p)?;
            let w = BufWriter::new(
                crate::files::create_private(f.path())
                    .with_context(|| format!("{}: cannot create", at(p)))?,
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

// ------------------------------------------------------------------------------ stage 4: sort map

/// Stage 4: one chunk's records, duplicates flagged, sorted into one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqSortMapTask {
    /// This chunk.
    pub chunk: usize,
    /// Chunks.
    pub chunks: usize,
    /// Its records.
    pub records_path: PathBuf,
    /// Their number (checked).
    pub records: u64,
    /// Their bytes (checked).
    pub record_bytes: u64,
    /// Its templates' record counts.
    pub counts_path: PathBuf,
    /// Templates.
    pub fragments: u64,
    /// The number of its first record in the whole input.
    pub first_seq: u64,
    /// The ordinals of its duplicate templates, one slice per dedup task.
    pub duplicates: Vec<FileSlice>,
    /// Where the run goes.
    pub run_path: PathBuf,
}

impl FqSortMapTask {
    /// Flags and sorts the chunk.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<MapOutput> {
        let at = |p: &Path| p.display().to_string();
        let mut dup = vec![false; self.fragments as usize];
        for s in &self.duplicates {
            for o in s.read()?.chunks_exact(4) {
                let o = u32::from_le_bytes(o.try_into().expect("4 bytes")) as usize;
                *dup.get_mut(o).with_context(|| {
                    format!(
                        "{}: ordinal {o} of {} templates",
                        at(&s.path),
                        self.fragments
                    )
                })? = true;
            }
        }
        let counts = std::fs::read(&self.counts_path).with_context(|| at(&self.counts_path))?;
        if counts.len() as u64 != self.fragments * 4 {
            bail_argument!(
                "{}: {} bytes for {} templates",
                at(&self.counts_path),
                counts.len(),
                self.fragments
            );
        }
        let mut counts = counts
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")));
        let mut input = BufReader::new(
            std::fs::File::open(&self.records_path)
                .with_context(|| format!("{}: cannot open", at(&self.records_path)))?,
        );
        let mut memory = rt.memory().reservation("fq2bam sort task: records");
        let (mut batches, mut first_seqs) = (Vec::<RecordBatch>::new(), Vec::new());
        let (mut seq, mut bytes) = (self.first_seq, 0u64);
        let (mut fragment, mut left) = (0usize, 0u32);
        let (mut buf, mut offsets) = (Vec::new(), Vec::new());
        let short = || {
            Error::new(
                ErrorKind::Input,
                format!(
                    "{}: fewer records than the {} the align task wrote",
                    at(&self.records_path),
                    self.records
                ),
            )
        };
        let mut flush = |buf: &mut Vec<u8>,
                         offsets: &mut Vec<u32>,
                         batches: &mut Vec<RecordBatch>,
                         first_seqs: &mut Vec<u64>,
                         seq: &mut u64|
         -> anyhow::Result<()> {
            if offsets.is_empty() {
                return Ok(());
            }
            let end = buf.len();
            let batch =
                RecordBatch::from_parts(std::mem::take(buf), std::mem::take(offsets), end, 0);
            hold(rt, &mut memory, &batch, || {
                format!("the chunk of {} records", self.records)
            })?;
            first_seqs.push(*seq);
            *seq += batch.len() as u64;
            batches.push(batch);
            Ok(())
        };
        for _ in 0..self.records {
            rt.check_cancelled()?;
            while left == 0 {
                left = counts.next().ok_or_else(short)?;
                fragment += 1;
            }
            let start = buf.len();
            let mut size = [0u8; 4];
            input.read_exact(&mut size).map_err(|_| short())?;
            let n = u32::from_le_bytes(size) as usize;
            buf.extend_from_slice(&size);
            buf.resize(start + 4 + n, 0);
            input
                .read_exact(&mut buf[start + 4..])
                .map_err(|_| short())?;
            if dup[fragment - 1] {
                set_duplicate(&mut buf[start..]);
            }
            offsets.push(start as u32);
            bytes += 4 + n as u64;
            left -= 1;
            if buf.len() >= BATCH_BYTES {
                flush(
                    &mut buf,
                    &mut offsets,
                    &mut batches,
                    &mut first_seqs,
                    &mut seq,
                )?;
            }
        }
        flush(
            &mut buf,
            &mut offsets,
            &mut batches,
            &mut first_seqs,
            &mut seq,
        )?;
        if bytes != self.record_bytes || input.read(&mut [0u8])? != 0 || counts.next().is_some() {
            return Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{}: not the {} records ({} bytes) the align task wrote",
                    at(&self.records_path),
                    self.records,
                    self.record_bytes
                ),
            )
            .into());
        }
        let (run, samples) = sort_into_run(
            rt,
            SortOrder::Coordinate,
            &batches,
            &first_seqs,
            &self.run_path,
        )?;
        Ok(MapOutput {
            part: self.chunk,
            parts: self.chunks,
            run,
            samples,
            records: self.records,
            record_bytes: bytes,
        })
    }
}

// ------------------------------------------------------------------------------ the driver's side

impl Fq2BamPlan {
    /// The work directory.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// Stage 1: one scan task per byte range of each BGZF reads file (none for other reads).
    pub fn scan_tasks(&self) -> Vec<Fq2BamTask> {
        let mut tasks = Vec::new();
        for (file, (path, len)) in self.bgzf.iter().enumerate() {
            for range in 0..len.div_ceil(self.scan_bytes).max(1) {
                tasks.push(Fq2BamTask::Scan(FqScanTask {
                    file,
                    path: path.clone(),
                    range: range as usize,
                    start: range * self.scan_bytes,
                    end: ((range + 1) * self.scan_bytes).min(*len),
                }));
            }
        }
        tasks
    }

    /// Stage 1b: the split task, unless the scans cut the reads (every file four-line FASTQ,
    /// the ranges joined up, R1 and R2 with as many records).
    pub fn split_tasks(&self, scans: &[FqScanOutput]) -> Vec<Fq2BamTask> {
        if self.dataset.is_some() || self.cut(scans).is_some() {
            return Vec::new();
        }
        vec![Fq2BamTask::Split(FqSplitTask {
            reads1: self.job.reads1.clone(),
            reads2: self.job.reads2.clone(),
            fragment_mode: self.fragment_mode,
            chunk_templates: self.chunk_templates,
            path: self.work_dir.join("reads.chunks"),
        })]
    }

    /// Each BGZF reads file's ranges that hold records, and the templates; `None` if the scans
    /// cannot be trusted ([`sortase_fasta::fastq_cut::chain`]) or the files differ in records.
    fn cut(&self, scans: &[FqScanOutput]) -> Option<ReadsCut> {
        if self.bgzf.is_empty() {
            return None;
        }
        let mut files = Vec::new();
        let mut templates = None;
        for (file, (_, len)) in self.bgzf.iter().enumerate() {
            let mut mine: Vec<&FqScanOutput> = scans.iter().filter(|s| s.file == file).collect();
            mine.sort_by_key(|s| s.range);
            let expected = len.div_ceil(self.scan_bytes).max(1) as usize;
            if mine.len() != expected || mine.iter().enumerate().any(|(k, s)| s.range != k) {
                return None;
            }
            let ranges: Vec<sortase_fasta::fastq_cut::RangeScan> = mine
                .iter()
                .map(|s| sortase_fasta::fastq_cut::RangeScan {
                    first: s.first,
                    records: s.records,
                    next: s.next,
                    regular: s.regular,
                })
                .collect();
            let (before, records) = sortase_fasta::fastq_cut::chain(&ranges)?;
            if templates.is_some_and(|t| t != records) {
                return None; // unpaired: the split task fails with the one-machine message
            }
            templates = Some(records);
            files.push(
                mine.iter()
                    .zip(before)
                    .filter_map(|(s, before)| {
                        s.first.map(|first| RangeStart {
                            first,
                            before,
                            next: s.next,
                        })
                    })
                    .collect(),
            );
        }
        Some(ReadsCut {
            files,
            templates: templates.unwrap_or(0),
        })
    }

    /// Where template `before + 1` starts in each BGZF reads file, and how far the chunk of
    /// `count` templates from there can reach.
    fn starts(&self, files: &[Vec<RangeStart>], before: u64, count: u64) -> Vec<FqStart> {
        files
            .iter()
            .zip(&self.bgzf)
            .map(|(ranges, (path, len))| {
                // The last range starting at or before the record (none: an empty file).
                let holding = |record: u64| ranges.iter().rposition(|r| r.before <= record);
                let (at, skip) = holding(before)
                    .map_or((0, 0), |j| (ranges[j].first, before - ranges[j].before));
                let end = match count.checked_sub(1).and_then(|c| holding(before + c)) {
                    None => at >> 16,
                    Some(j) => ranges[j]
                        .next
                        .map_or(*len, |next| ((next >> 16) + BGZF_BLOCK_MAX).min(*len)),
                };
                FqStart {
                    path: path.clone(),
                    at,
                    skip,
                    end: end.max(at >> 16),
                }
            })
            .collect()
    }

    /// Stage 2 from the scans' or the split's outputs: one align task per chunk.
    pub fn align_tasks(
        &self,
        scans: &[FqScanOutput],
        splits: &[FqSplitOutput],
    ) -> Result<Vec<Fq2BamTask>> {
        let chunks: Vec<(FqReads, u64)> = match (&self.dataset, splits.first()) {
            (Some(records), _) => {
                // Runs of whole chunks of about two records per template.
                let per = 2 * self.chunk_templates;
                let mut runs = Vec::new();
                let (mut start, mut held) = (0, 0);
                for (k, r) in records.iter().enumerate() {
                    held += r;
                    if held >= per || k + 1 == records.len() {
                        let dir = self.job.reads1.clone();
                        runs.push((
                            FqReads::Dataset {
                                dir,
                                chunks: start..k + 1,
                            },
                            0,
                        ));
                        (start, held) = (k + 1, 0);
                    }
                }
                if runs.is_empty() {
                    let dir = self.job.reads1.clone();
                    runs.push((FqReads::Dataset { dir, chunks: 0..0 }, 0));
                }
                runs
            }
            (None, Some(split)) => split
                .chunks
                .iter()
                .map(|c| {
                    let slice = FileSlice {
                        path: split.path.clone(),
                        start: c.start,
                        end: c.end,
                    };
                    (FqReads::Chunk(slice), c.fragments)
                })
                .collect(),
            (None, None) => {
                let ReadsCut {
                    files: ranges,
                    templates,
                } = self
                    .cut(scans)
                    .ok_or_else(|| Error::argument("no split output, and the scans cut nothing"))?;
                let per = self.chunk_templates;
                (0..templates.div_ceil(per).max(1))
                    .map(|k| {
                        let before = k * per;
                        let count = per.min(templates - before);
                        let files = self.starts(&ranges, before, count);
                        (FqReads::Bgzf { files, before }, count)
                    })
                    .collect()
            }
        };
        let n = chunks.len();
        let partitions = match self.job.markdup {
            DuplicateMarking::Samblaster => self.options.reduce_tasks.unwrap_or(n).max(1),
            _ => 0,
        };
        Ok(chunks
            .into_iter()
            .enumerate()
            .map(|(k, (reads, fragments))| {
                Fq2BamTask::Align(FqAlignTask {
                    job: Box::new(self.job.clone()),
                    threads: self.threads,
                    chunk: k,
                    chunks: n,
                    reads,
                    fragments,
                    partitions,
                    records_path: self.work_dir.join(format!("align-{k:06}.records")),
                    counts_path: self.work_dir.join(format!("align-{k:06}.counts")),
                    sigs_path: self.work_dir.join(format!("align-{k:06}.sigs")),
                })
            })
            .collect())
    }

    /// Stage 3 from the align outputs: one markdup reduce task per signature partition (none
    /// without marking).
    pub fn dedup_tasks(&self, aligns: &[FqAlignOutput]) -> Result<Vec<MdReduceTask>> {
        let aligns = complete(aligns, "align", |a| (a.chunk, a.chunks))?;
        let partitions = aligns[0].offsets.len().saturating_sub(1);
        if aligns.iter().any(|a| a.offsets.len() != partitions + 1) {
            return Err(Error::argument("align outputs disagree on the partitions"));
        }
        Ok((0..partitions)
            .map(|p| MdReduceTask {
                part: p,
                parts: partitions,
                inputs: aligns
                    .iter()
                    .map(|a| FileSlice::nth(&a.sigs_path, &a.offsets, p))
                    .collect(),
                heads: Vec::new(),
                path: self.work_dir.join(format!("dedup-{p:06}.dups")),
            })
            .collect())
    }

    /// Stage 4 from the align and the dedup outputs: one sort map task per chunk.
    pub fn sort_map_tasks(
        &self,
        aligns: &[FqAlignOutput],
        dedups: &[MdReduceOutput],
    ) -> Result<Vec<Fq2BamTask>> {
        let aligns = complete(aligns, "align", |a| (a.chunk, a.chunks))?;
        let partitions = aligns[0].offsets.len().saturating_sub(1);
        let dedups = if partitions == 0 {
            Vec::new()
        } else {
            complete(dedups, "dedup", |r| (r.part, r.parts))?
        };
        if dedups.len() != partitions || dedups.iter().any(|d| d.offsets.len() != aligns.len() + 1)
        {
            return Err(Error::argument(
                "dedup outputs do not cover the align tasks' chunks",
            ));
        }
        let mut first_seq = 0;
        Ok(aligns
            .iter()
            .enumerate()
            .map(|(k, a)| {
                let task = FqSortMapTask {
                    chunk: k,
                    chunks: aligns.len(),
                    records_path: a.records_path.clone(),
                    records: a.records,
                    record_bytes: a.record_bytes,
                    counts_path: a.counts_path.clone(),
                    fragments: a.fragments,
                    first_seq,
                    duplicates: dedups
                        .iter()
                        .map(|d| FileSlice::nth(&d.path, &d.offsets, k))
                        .collect(),
                    run_path: self.work_dir.join(format!("map-{k:06}.run")),
                };
                first_seq += a.records;
                Fq2BamTask::SortMap(task)
            })
            .collect())
    }

    /// The sort of the chunks' records: its header from the align outputs (they must agree).
    pub(crate) fn sort_plan(&self, aligns: &[FqAlignOutput]) -> Result<SortPlan> {
        let aligns = complete(aligns, "align", |a| (a.chunk, a.chunks))?;
        let sam = &aligns[0].sam_header;
        if aligns.iter().any(|a| a.sam_header != *sam) {
            return Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{}: the align tasks' minimap2 headers differ (the index changed during the job?)",
                    self.job.index.display()
                ),
            ));
        }
        let header = one::sorted_header(sam.clone(), self.job.program.as_ref())?;
        Ok(SortPlan::of_records(
            &sort_job(&self.job),
            &self.options,
            &header,
            self.work_dir.clone(),
        )?)
    }

    /// Stage 5 from the align and the sort map outputs: the sort's reduce tasks.
    pub fn reduce_tasks(
        &self,
        aligns: &[FqAlignOutput],
        maps: &[MapOutput],
        rt: &Runtime,
    ) -> Result<Vec<AnyTask>> {
        Ok(self
            .sort_plan(aligns)?
            .reduce_tasks(maps, rt)?
            .into_iter()
            .map(super::SortTask::into_task)
            .collect())
    }

    /// The parallel finish's first step (as a sort's), from the align and the reduce outputs; the
    /// report is fq2bam's.
    pub fn layout(
        &self,
        aligns: &[FqAlignOutput],
        dedups: &[MdReduceOutput],
        reduces: &[ReduceOutput],
        preallocate: bool,
        rt: &Runtime,
    ) -> Result<Layout> {
        let mut lay = self.sort_plan(aligns)?.layout(reduces, preallocate, rt)?;
        let sorted: crate::sort::SortReport = serde_json::from_value(lay.report.clone())
            .map_err(|e| Error::new(ErrorKind::Internal, format!("sort report JSON: {e}")))?;
        let aligns = complete(aligns, "align", |a| (a.chunk, a.chunks))?;
        let report = one::Fq2BamReport {
            reads: aligns.iter().map(|a| a.reads).sum(),
            fragments: aligns.iter().map(|a| a.fragments).sum(),
            bases: aligns.iter().map(|a| a.bases).sum(),
            records: sorted.records,
            duplicate_templates: dedups.iter().map(|d| d.duplicates).sum(),
            chunks: aligns.len() as u64,
            threads: rt.threads(),
            phases: sorted.phases,
            outputs: sorted.outputs,
            warnings: sorted.warnings,
            ..Default::default()
        };
        lay.report = serde_json::to_value(&report)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("fq2bam report JSON: {e}")))?;
        Ok(lay)
    }

    /// Gives the job up: removes the work directory and the finish's temporary files.
    pub fn abort(&self) -> Result<()> {
        let plan = SortPlan::of_records(
            &sort_job(&self.job),
            &self.options,
            &sortase_bam::Header::default(),
            self.work_dir.clone(),
        );
        match plan {
            Ok(p) => p.abort(),
            Err(_) => remove_work_dir(&self.work_dir),
        }
    }
}

impl Task for FqSplitTask {
    const KIND: &'static str = "fq2bam.split";
    type Output = FqSplitOutput;

    fn run(&self, rt: &Runtime) -> Result<FqSplitOutput> {
        FqSplitTask::run(self, rt).map_err(Error::from)
    }

    fn reads(&self) -> Result<Vec<super::Span>> {
        let mut v = vec![super::Span::whole(&self.reads1)];
        v.extend(self.reads2.iter().map(super::Span::whole));
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

    /// Its range (the walk reads on past its end to the next record's start: at most one
    /// record more).
    fn reads(&self) -> Result<Vec<super::Span>> {
        Ok(vec![super::Span::ranges(
            &self.path,
            vec![(self.start, self.end)],
        )])
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
    fn reads(&self) -> Result<Vec<super::Span>> {
        Ok(vec![super::Span::whole(&self.job.index)]
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

    /// The chunk's bytes and the files written: the index is read once per worker process (and
    /// a driver on object storage does not fetch it: it is a path every worker sees).
    fn local_bytes(&self) -> (u64, u64) {
        let (_, written) = super::registry::measured(Ok(Vec::new()), &self.writes());
        (self.reads.bytes(), written)
    }
}

impl Task for FqSortMapTask {
    const KIND: &'static str = "fq2bam.sort_map";
    const OUTPUT_KIND: &'static str = MapTask::KIND;
    type Output = MapOutput;

    fn run(&self, rt: &Runtime) -> Result<MapOutput> {
        FqSortMapTask::run(self, rt)
            .with_context(|| format!("fq2bam sort map task {}", self.chunk))
            .map_err(Error::from)
    }

    fn reads(&self) -> Result<Vec<super::Span>> {
        let mut v = vec![
            super::Span::whole(&self.records_path),
            super::Span::whole(&self.counts_path),
        ];
        v.extend(super::registry::by_file(
            self.duplicates
                .iter()
                .map(|s| (s.path.clone(), Some((s.start, s.end)))),
        ));
        Ok(v)
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.run_path.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OutputSpec;
    use crate::tasks::{plan_json, run_task_json, stage_tasks_json};
    use serde_json::Value;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn bases(seed: &mut u64, n: usize) -> Vec<u8> {
        (0..n).map(|_| b"ACGT"[(lcg(seed) % 4) as usize]).collect()
    }

    fn revcomp(s: &[u8]) -> Vec<u8> {
        s.iter()
            .rev()
            .map(|&c| match c {
                b'A' => b'T',
                b'C' => b'G',
                b'G' => b'C',
                _ => b'A',
            })
            .collect()
    }

    /// ref.fa of two contigs and `pairs` FR pairs of 100 bases, a tenth exact copies of the pair
    /// before (duplicates), as r1.fq and r2.fq.
    fn simulate(dir: &Path, pairs: usize) -> (PathBuf, PathBuf, PathBuf) {
        let mut seed = 29;
        let contigs = [bases(&mut seed, 30_000), bases(&mut seed, 12_000)];
        let mut fa = String::new();
        for (i, c) in contigs.iter().enumerate() {
            fa += &format!(">c{}\n{}\n", i + 1, String::from_utf8_lossy(c));
        }
        let (mut r1, mut r2) = (String::new(), String::new());
        let mut last: Option<(Vec<u8>, Vec<u8>)> = None;
        for i in 0..pairs {
            let (a, b) = match last.take() {
                Some(prev) if lcg(&mut seed).is_multiple_of(10) => prev,
                _ => {
                    let c = &contigs[(lcg(&mut seed) % 2) as usize];
                    let ins = 200 + (lcg(&mut seed) % 300) as usize;
                    let s = (lcg(&mut seed) as usize) % (c.len() - ins);
                    let frag = &c[s..s + ins];
                    let mut a = frag[..100].to_vec();
                    if lcg(&mut seed).is_multiple_of(7) {
                        a[50] = b"ACGT"[(lcg(&mut seed) % 4) as usize];
                    }
                    (a, revcomp(frag)[..100].to_vec())
                }
            };
            let q = "I".repeat(100);
            r1 += &format!("@p{i}/1\n{}\n+\n{q}\n", String::from_utf8_lossy(&a));
            r2 += &format!("@p{i}/2\n{}\n+\n{q}\n", String::from_utf8_lossy(&b));
            last = Some((a, b));
        }
        let paths = (dir.join("ref.fa"), dir.join("r1.fq"), dir.join("r2.fq"));
        std::fs::write(&paths.0, fa).unwrap();
        std::fs::write(&paths.1, r1).unwrap();
        std::fs::write(&paths.2, r2).unwrap();
        paths
    }

    /// Runs every task of a stage (in reverse order: any order goes), through JSON.
    fn stage(plan: &str, name: &str, inputs: &[Value], rt: &Runtime) -> Vec<Value> {
        let inputs = serde_json::to_string(inputs).unwrap();
        let tasks: Vec<Value> =
            serde_json::from_str(&stage_tasks_json(plan, name, &inputs, rt).unwrap()).unwrap();
        tasks
            .iter()
            .rev()
            .map(|t| {
                let out = run_task_json(&t.to_string(), rt).unwrap();
                serde_json::from_str(&out).unwrap()
            })
            .collect()
    }

    #[test]
    fn tasks_write_the_bytes_of_one_machine_and_load_the_index_once() {
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 2_000);
        let rt = Runtime::with_threads(2).unwrap();
        let one = dir.path().join("one.bam");
        let mut output = OutputSpec::to_path(&one);
        output.write_index = true;
        let mut job = Fq2BamJob::new(&fa, &r1, output);
        job.reads2 = Some(r2.clone());
        let report = job.run(&rt).unwrap();
        assert!(report.duplicate_templates > 100, "{report:?}");
        let loads = index_loads();
        for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::None] {
            let many = dir.path().join("many.bam");
            job.output.path = Some(many.clone());
            job.markdup = markdup;
            let mut reference = job.clone();
            reference.output.path = Some(one.clone());
            reference.run(&rt).unwrap();
            let spec = Fq2BamTasksJob {
                job: job.clone(),
                chunk_templates: Some(450),
                scan_bytes: None,
            };
            let plan = plan_json(
                "fq2bam",
                &serde_json::to_string(&spec).unwrap(),
                r#"{"reduce_tasks": 3}"#,
                &rt,
            )
            .unwrap();
            let scans = stage(&plan, "scan", &[], &rt);
            assert!(scans.is_empty(), "plain FASTQ: no scans");
            let splits = stage(&plan, "split", &scans, &rt);
            let aligns = stage(&plan, "align", &splits, &rt);
            assert_eq!(aligns.len(), 5);
            let dedups = stage(&plan, "dedup", &aligns, &rt);
            assert_eq!(
                dedups.len(),
                if markdup == DuplicateMarking::None {
                    0
                } else {
                    3
                }
            );
            let maps = stage(
                &plan,
                "map",
                &[aligns.clone(), dedups.clone()].concat(),
                &rt,
            );
            let reduces = stage(&plan, "reduce", &[aligns.clone(), maps].concat(), &rt);
            let all = [aligns, dedups, reduces].concat();
            let p: crate::tasks::Plan = serde_json::from_str(&plan).unwrap();
            let crate::tasks::Plan::Fq2Bam(fq) = &p else {
                panic!("not an fq2bam plan")
            };
            let work_dir = fq.work_dir().to_path_buf();
            let layout = p.layout(&all, true, &rt).unwrap();
            for t in layout.place_tasks() {
                t.run(&rt).unwrap();
            }
            let value = layout.commit().unwrap();
            assert_eq!(value["fragments"], 2_000);
            assert!(
                std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
                "{markdup:?}: the bytes differ"
            );
            // The index, as --write-index names it (CSI by default, as samtools).
            let index = |p: &Path| std::fs::read(format!("{}.csi", p.display())).unwrap();
            assert_eq!(index(&one), index(&many));
            assert!(!work_dir.exists());
        }
        // The same index and options: loaded by the first align task of this process only.
        assert_eq!(index_loads(), loads + 1);
    }

    /// `text` as BGZF with a block every `every` bytes, so that records straddle blocks.
    fn bgzf(text: &[u8], path: &Path, every: usize) {
        let mut w = sortase_bgzf::ParallelWriter::new(
            std::fs::File::create(path).unwrap(),
            sortase_bgzf::WriterOptions::new(1, sortase_bgzf::CompressionLevel::samtools(1)),
        );
        for piece in text.chunks(every) {
            w.write_all(piece).unwrap();
            w.end_block().unwrap();
        }
        w.finish().unwrap();
    }

    /// Runs a planned job's stages as a driver does (from its stage graph, each stage's tasks in
    /// reverse order) and assembles the output; the tasks per stage, or the first error (the
    /// plan aborted).
    fn drive(plan: &str, rt: &Runtime) -> std::result::Result<Vec<(String, usize)>, String> {
        let p: crate::tasks::Plan = serde_json::from_str(plan).unwrap();
        let graph = p.stage_graph();
        let run = || -> Result<Vec<(String, usize)>> {
            let mut done = std::collections::HashMap::<String, Vec<Value>>::new();
            let mut counts = Vec::new();
            for st in &graph.stages {
                let taken: Vec<Value> = st.takes.iter().flat_map(|n| done[n].clone()).collect();
                let mut outputs = Vec::new();
                for t in p.stage_tasks(&st.name, &taken, rt)?.iter().rev() {
                    outputs.push(t.run(rt)?);
                }
                counts.push((st.name.clone(), outputs.len()));
                done.insert(st.name.clone(), outputs);
            }
            let all: Vec<Value> = graph.finish.iter().flat_map(|n| done[n].clone()).collect();
            let layout = p.layout(&all, true, rt)?;
            for t in layout.place_tasks() {
                t.run(rt)?;
            }
            layout.commit()?;
            Ok(counts)
        };
        run().map_err(|e| {
            p.abort().unwrap();
            e.to_string()
        })
    }

    #[test]
    fn bgzf_reads_are_cut_by_blocks_with_the_bytes_of_one_machine() {
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 1_500);
        let (z1, z2) = (dir.path().join("r1.fq.gz"), dir.path().join("r2.fq.gz"));
        bgzf(&std::fs::read(&r1).unwrap(), &z1, 3000);
        bgzf(&std::fs::read(&r2).unwrap(), &z2, 4100);
        let rt = Runtime::with_threads(2).unwrap();
        let one = dir.path().join("one.bam");
        let many = dir.path().join("many.bam");
        // One machine reads the same files (their names are in the header's @PG).
        let mut job = Fq2BamJob::new(&fa, &z1, OutputSpec::to_path(&one));
        job.reads2 = Some(z2.clone());
        job.run(&rt).unwrap();
        job.output.path = Some(many.clone());
        let spec = |job: &Fq2BamJob| {
            serde_json::to_string(&Fq2BamTasksJob {
                job: job.clone(),
                chunk_templates: Some(400),
                scan_bytes: Some(10_000),
            })
            .unwrap()
        };
        let plan = plan_json("fq2bam", &spec(&job), r#"{"reduce_tasks": 2}"#, &rt).unwrap();
        let counts = drive(&plan, &rt).unwrap();
        let count = |name: &str| counts.iter().find(|c| c.0 == name).unwrap().1;
        let scans = std::fs::metadata(&z1).unwrap().len().div_ceil(10_000)
            + std::fs::metadata(&z2).unwrap().len().div_ceil(10_000);
        assert_eq!(count("scan") as u64, scans);
        assert_eq!((count("split"), count("align")), (0, 4), "{counts:?}");
        assert!(
            std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
            "the bytes differ from one machine's"
        );

        // A name that differs in the middle of R2: the chunk's align task fails with the one
        // machine's message, records numbered from the file's start.
        let text = std::fs::read_to_string(&r2).unwrap();
        let bad = text.replacen("@p1000/2", "@x1000/2", 1);
        assert_ne!(bad, text);
        bgzf(bad.as_bytes(), &z2, 4100);
        job.output.path = Some(dir.path().join("bad.bam"));
        let want = job.run(&rt).unwrap_err().to_string();
        let plan = plan_json("fq2bam", &spec(&job), "{}", &rt).unwrap();
        assert_eq!(drive(&plan, &rt).unwrap_err(), want);
        // R2 shorter than R1: the scans disagree, the split task reads the files and fails as
        // one machine does.
        let short: String = text
            .lines()
            .take(4 * 1_200)
            .map(|l| format!("{l}\n"))
            .collect();
        bgzf(short.as_bytes(), &z2, 4100);
        let want = job.run(&rt).unwrap_err().to_string();
        let plan = plan_json("fq2bam", &spec(&job), "{}", &rt).unwrap();
        assert_eq!(drive(&plan, &rt).unwrap_err(), want);
        assert!(!dir.path().join("bad.bam").exists());
    }

    /// An AGD dataset of the reads (`agd import -1 -2`, chunks of an odd number of records, so
    /// pairs straddle chunks and the align tasks' runs of chunks): no scan or split task, and
    /// the bytes of one-machine `fq2bam` of the dataset, with either marking.
    #[test]
    fn a_dataset_of_reads_aligns_in_runs_of_chunks_with_the_bytes_of_one_machine() {
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 1_500);
        let ds = dir.path().join("reads.agd");
        let fastq = crate::agd::FastqInput {
            read1: Some(r1.display().to_string()),
            read2: Some(r2.display().to_string()),
            ..Default::default()
        };
        let rt = Runtime::with_threads(2).unwrap();
        let mut import = crate::AgdImportJob::from_fastq(fastq, &ds);
        import.chunk_size = 333;
        import.run(&rt).unwrap();
        for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::None] {
            let (one, many) = (dir.path().join("one.bam"), dir.path().join("many.bam"));
            let mut job = Fq2BamJob::new(&fa, &ds, OutputSpec::to_path(&one));
            job.markdup = markdup;
            let report = job.run(&rt).unwrap();
            assert_eq!(report.fragments, 1_500);
            job.output.path = Some(many.clone());
            let spec = Fq2BamTasksJob {
                job: job.clone(),
                chunk_templates: Some(400),
                scan_bytes: None,
            };
            let spec = serde_json::to_string(&spec).unwrap();
            let plan = plan_json("fq2bam", &spec, r#"{"reduce_tasks": 2}"#, &rt).unwrap();
            let counts = drive(&plan, &rt).unwrap();
            let count = |name: &str| counts.iter().find(|c| c.0 == name).unwrap().1;
            // 3,000 records in 10 chunks of 333 (the last of 3), runs of >= 800 records: 4 runs,
            // each ending inside a pair.
            assert_eq!((count("scan"), count("split"), count("align")), (0, 0, 4));
            assert!(
                std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
                "{markdup:?}: the bytes differ from one machine's"
            );
        }
        // With R2 too: refused at plan time, as on one machine.
        let mut job = Fq2BamJob::new(&fa, &ds, OutputSpec::to_path(dir.path().join("x.bam")));
        job.reads2 = Some(r2);
        let spec = Fq2BamTasksJob {
            job: job.clone(),
            chunk_templates: None,
            scan_bytes: None,
        };
        let e = plan_json("fq2bam", &serde_json::to_string(&spec).unwrap(), "{}", &rt);
        assert!(e.unwrap_err().to_string().contains("give it alone"));
    }

    #[test]
    fn one_machine_checksums_prove_reads_and_records_with_either_marking() {
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 300);
        let rt = Runtime::with_threads(2).unwrap();
        let out = dir.path().join("c.bam");
        let mut job = Fq2BamJob::new(&fa, &r1, OutputSpec::to_path(&out));
        job.reads2 = Some(r2);
        job.checksums = true;
        for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::Picard] {
            job.markdup = markdup;
            let report = job.run(&rt).unwrap();
            let c = report.checksums.expect("fq2bam reports its sums");
            assert_eq!((c.read, c.read.count), (c.written, 600), "{markdup:?}");
            assert!(report.duplicate_records > 0, "{markdup:?}");
            assert!(
                c.command.starts_with("samtools import -1 ")
                    && c.command
                        .ends_with(&format!("; samtools checksum {}", out.display())),
                "{}",
                c.command
            );
        }
        job.checksums = false;
        assert!(job.run(&rt).unwrap().checksums.is_none());
    }

    #[test]
    fn bad_input_fails_as_on_one_machine() {
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 50);
        let short = dir.path().join("short.fq");
        let text = std::fs::read_to_string(&r2).unwrap();
        std::fs::write(
            &short,
            text.lines().take(4 * 30).collect::<Vec<_>>().join("\n") + "\n",
        )
        .unwrap();
        let rt = Runtime::with_threads(1).unwrap();
        let mut job = Fq2BamJob::new(&fa, &r1, OutputSpec::to_path(dir.path().join("o.bam")));
        job.reads2 = Some(short);
        let want = job.run(&rt).unwrap_err().to_string();
        let plan = Fq2BamTasksJob {
            job: job.clone(),
            chunk_templates: Some(10),
            scan_bytes: None,
        }
        .plan(&rt, &PlanOptions::default())
        .unwrap();
        let Fq2BamTask::Split(split) = plan.split_tasks(&[]).remove(0) else {
            unreachable!()
        };
        let got = Task::run(&split, &rt).unwrap_err().to_string();
        assert_eq!(got, want);
        plan.abort().unwrap();
        assert!(!plan.work_dir().exists());
        job.reads2 = Some(r2);
        job.markdup = DuplicateMarking::Picard;
        let e = Fq2BamTasksJob {
            job: job.clone(),
            chunk_templates: None,
            scan_bytes: None,
        }
        .plan(&rt, &PlanOptions::default())
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument);
        job.markdup = DuplicateMarking::Samblaster;
        job.checksums = true;
        let e = Fq2BamTasksJob {
            job,
            chunk_templates: None,
            scan_bytes: None,
        }
        .plan(&rt, &PlanOptions::default())
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument);
        assert!(e.to_string().contains("checksums"), "{e}");
    }
}
