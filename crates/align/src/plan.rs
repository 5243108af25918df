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
//! 5. The sort's reduce tasks, then the sort's parallel finish ([`sortase_exec::assemble`]).
//!
//! Why the bytes match: minimap2 maps every fragment on its own (the one-machine job already maps
//! ~64 KiB chunks on many threads, with the output of `minimap2 -ax` that maps 500 Mbases per
//! batch; minimap2 estimates no paired-end statistics per batch), so the records and their order
//! do not depend on the chunks. The marking decides by the first occurrence in input order, which
//! the chunk order and the ordinals give. A sort's output depends only on the record sequence
//! (see [`sortase_sortjobs::sort_tasks`]), which is the one-machine job's: chunk after chunk, minimap2's
//! order within. The header is minimap2's with the job's `@PG` lines, as on one machine; its
//! `CL:` names the job's reads and the plan's threads as `-t`.

use crate::job::stream_marking::set_duplicate;
use crate::job::{self as one, DuplicateMarking, Fq2BamJob};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::RecordBatch;
use sortase_exec::assemble::Layout;
use sortase_exec::error::{bail_argument, Error, ErrorKind, Result};
use sortase_exec::options::Order;
use sortase_exec::output::temp_prefix;
use sortase_exec::parts::{complete, create_work_dir, remove_work_dir};
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{by_file, DynTask, Span, Task};
use sortase_fasta::fastq_cut::{self, RangeScan, RangeStart};
use sortase_markdup::tasks::query::{FileSlice, MdReduceOutput, MdReduceTask};
use sortase_sort::SortOrder;
use sortase_sortjobs::sort::SortJob;
use sortase_sortjobs::sort_tasks::map::MapBatches;
use sortase_sortjobs::sort_tasks::{MapOutput, MapTask, PlanOptions, ReduceOutput, SortPlan};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

// The scan, split and align tasks need nothing from the sort's jobs: they are `tasks.rs` (the
// index cache `cache.rs`).
pub use crate::cache::index_loads;
pub use crate::tasks::{
    FqAlignOutput, FqAlignTask, FqChunk, FqReads, FqScanOutput, FqScanTask, FqSplitOutput,
    FqSplitTask, FqStart,
};

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
    /// The index and the reads as minimap2's `@PG CL:` names them, where the job's paths are local
    /// copies of what the user named (objects on S3: their URLs); `None`: the job's paths.
    #[serde(default)]
    pub names: Option<Vec<String>>,
}

/// Compressed bytes of a BGZF reads file one scan task reads, by default.
const SCAN_BYTES: u64 = 64 << 20;

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
    /// [`Fq2BamTasksJob::names`].
    #[serde(default)]
    names: Option<Vec<String>>,
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
    /// As a task of any kind (the facade's registry wraps it as its `AnyTask`).
    pub fn into_task(self) -> Box<dyn DynTask> {
        match self {
            Fq2BamTask::Scan(t) => Box::new(t),
            Fq2BamTask::Split(t) => Box::new(t),
            Fq2BamTask::Align(t) => Box::new(t),
            Fq2BamTask::SortMap(t) => Box::new(t),
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
    let fragment_mode = crate::index::preset_fragment_mode(&job.preset).map_err(one::kinded)?;
    one::check_pairing(job, fragment_mode)?;
    if let Some(rg) = &job.read_group {
        crate::index::parse_read_group(rg).map_err(one::kinded)?;
    }
    let sort = sort_job(job);
    // The output checked as the sort's tasks check it (BAM to a file).
    SortPlan::of_records(
        &sort,
        options,
        &sortase_bam::Header::default(),
        PathBuf::new(),
    )?;
    let data = sortase_exec::output::resolve_output(
        &job.output,
        sortase_sortjobs::sort::DEFAULT_LEVEL,
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
        names: t.names.clone(),
    })
}

/// The reads files with their sizes if every one is BGZF (its first bytes a BGZF block header),
/// else none: plain and gzip FASTQ is read by one split task. A file is opened as the library
/// opens inputs (`sortase_io::Source`), so a driver on object storage reads the first bytes of
/// the object its local name stands for.
fn bgzf_reads(job: &Fq2BamJob) -> anyhow::Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for path in std::iter::once(&job.reads1).chain(job.reads2.as_ref()) {
        let mut head = [0u8; 18];
        let Ok(mut f) = sortase_io::Source::open_path(path) else {
            return Ok(Vec::new()); // the split task reports it as on one machine
        };
        let len = f.len().unwrap_or(0);
        if f.read_exact(&mut head).is_err() || sortase_bgzf::parse_header(&head).is_err() {
            return Ok(Vec::new());
        }
        files.push((path.clone(), len));
    }
    Ok(files)
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
        let mut counts = Vec::new();
        sortase_io::Source::open_path(&self.counts_path)
            .and_then(|mut f| f.read_to_end(&mut counts))
            .with_context(|| at(&self.counts_path))?;
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
            sortase_io::Source::open_path(&self.records_path)
                .with_context(|| format!("{}: cannot open", at(&self.records_path)))?,
        );
        let mut held = MapBatches::new(rt, "fq2bam sort task: records");
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
        for i in 0..self.records {
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
            left -= 1;
            // A batch is full, or the chunk's last record is in.
            if buf.len() >= BATCH_BYTES || i + 1 == self.records {
                let end = buf.len();
                let batch = RecordBatch::from_parts(
                    std::mem::take(&mut buf),
                    std::mem::take(&mut offsets),
                    end,
                    0,
                );
                held.push(rt, batch, self.first_seq + held.records(), || {
                    format!("the chunk of {} records", self.records)
                })?;
            }
        }
        if held.bytes() != self.record_bytes
            || input.read(&mut [0u8])? != 0
            || counts.next().is_some()
        {
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
        held.into_output(
            rt,
            SortOrder::Coordinate,
            &self.run_path,
            self.chunk,
            self.chunks,
        )
    }
}

// ------------------------------------------------------------------------------ the driver's side

/// BGZF reads files cut by the scans: each file's ranges that hold records, and the templates.
struct ReadsCut {
    files: Vec<Vec<RangeStart>>,
    templates: u64,
}

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
            let ranges: Vec<RangeScan> = mine
                .iter()
                .map(|s| RangeScan {
                    first: s.first,
                    records: s.records,
                    next: s.next,
                    regular: s.regular,
                })
                .collect();
            let (starts, records) = fastq_cut::range_starts(&ranges)?;
            if templates.is_some_and(|t| t != records) {
                return None; // unpaired: the split task fails with the one-machine message
            }
            templates = Some(records);
            files.push(starts);
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
                let r = fastq_cut::records_at(ranges, *len, before, count);
                FqStart {
                    path: path.clone(),
                    at: r.at,
                    skip: r.skip,
                    end: r.end,
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
                    names: self.names.clone(),
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
    ) -> Result<Vec<Box<dyn DynTask>>> {
        Ok(self
            .sort_plan(aligns)?
            .reduce_tasks(maps, rt)?
            .into_iter()
            .map(|t| t.into_task())
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
        let sorted: sortase_sortjobs::SortReport = serde_json::from_value(lay.report.clone())
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

impl Task for FqSortMapTask {
    const KIND: &'static str = "fq2bam.sort_map";
    const OUTPUT_KIND: &'static str = MapTask::KIND;
    type Output = MapOutput;

    fn run(&self, rt: &Runtime) -> Result<MapOutput> {
        FqSortMapTask::run(self, rt)
            .with_context(|| format!("fq2bam sort map task {}", self.chunk))
            .map_err(Error::from)
    }

    /// Its align task's records and counts, whole, and its slices of the dedup tasks' files: all
    /// read through `sortase_io` (`FileSlice::read` for the slices).
    fn reads(&self) -> Result<Vec<Span>> {
        let mut v = vec![
            Span::whole(&self.records_path),
            Span::whole(&self.counts_path),
        ];
        v.extend(by_file(
            self.duplicates
                .iter()
                .map(|s| (s.path.clone(), Some((s.start, s.end)))),
        ));
        Ok(v.into_iter().map(Span::streamed).collect())
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.run_path.clone()]
    }
}
