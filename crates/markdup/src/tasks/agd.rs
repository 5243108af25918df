//! `sortase agd markdup` as serialisable tasks (issue 29): the dataset's chunks are the map tasks'
//! inputs, the reduce (and in Picard's mode the join) tasks are the BAM markdup's, and a last
//! stage writes the `duplicate` group's file of every chunk; the driver then puts the group into
//! the manifest as the one-machine job does. The dataset ends byte-identical to
//! [`AgdMarkdupJob::run`]'s with the same options: the same files with the same bytes, the same
//! manifest.
//!
//! Why the marks match: a dataset's records in chunk order are the records in file order of the
//! BAM it was imported from (and of its export), and the manifest gives each chunk's first
//! ordinal. So the map tasks of the BAM markdup run unchanged on runs of consecutive chunks
//! instead of byte ranges, with no count stage:
//!
//! - samblaster's mode (query-grouped): `agd_markdup.map` ([`AgdMdMapTask`]) reads a run's chunks,
//!   skips its leading records named as the last record of the chunk before (that group belongs
//!   to the run before), follows its last group into the next chunks, and writes every group's
//!   signature with its ordinal partitioned by hash (the BAM map task's code,
//!   [`super::query::MdMapTask`]); `markdup.reduce` keeps the first occurrence in file order;
//!   `agd_markdup.write` ([`AgdMdWriteTask`]) reads the run's read names and flags, gives every
//!   record its group's verdict or'ed with its 0x400 (samblaster only adds marks), and writes
//!   one Boolean file per chunk.
//! - Picard's mode (coordinate-sorted): `agd_markdup.coordinate_map` ([`AgdPmMapTask`]) collects
//!   a run's read ends with their file indices (the chunk's first ordinal onwards), as
//!   [`super::coordinate::PmMapTask`] does; `markdup.coordinate_join` and
//!   `markdup.coordinate_reduce` decide the duplicate sets; `agd_markdup.write` sets exactly the
//!   duplicates found (Picard clears 0x400 elsewhere) and needs no record.
//!
//! Files: the group's files go into a staging directory inside the dataset
//! (`.duplicate.sortase-tasks-PID-N.tmp/`), written under temporary names and renamed (a retried
//! task overwrites its earlier attempt); the finish renames the directory to the group's and
//! replaces `manifest.json` last, as [`AgdMarkdupJob::run`]. Until then the dataset is what it
//! was; [`AgdMarkdupPlan::abort`] removes the staging and work directories. A driver on object
//! storage (`remote`) finishes itself: the finish writes the new manifest to the driver's copy and
//! names the staging directory, the group's directory and the replaced one, and the driver moves
//! the objects, uploads the manifest last and removes what it replaced.
//!
//! Memory: a run holds about `task_memory` of record data (estimated from the first chunk's
//! Parquet footers, as a dataset's sort); a samblaster map task streams its chunks one at a time
//! and holds a signature per group, a Picard one its run's read ends; a reduce or join task holds
//! one partition, and there are enough partitions for `task_memory` to hold one.

use super::coordinate::{
    map_ends, EndsMap, PicardPlan, PicardTask, PmJoinOutput, PmJoinTask, PmMapOutput,
    PmReduceOutput, PmReduceTask, BYTES_PER_RECORD,
};
use super::query::{
    map_groups, Batches, FileSlice, MdMapOutput, MdReduceOutput, MdReduceTask, REDUCE_BYTES_PER_SIG,
};
use crate::agd::{check_options, AgdMarkdupJob};
use crate::job::{detect_mode, MarkdupJob, MarkdupReport, Mode};
use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::UInt16Type;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sortase_agd::extra::{self, DUPLICATE_GROUP};
use sortase_agd::{ChunkEntry, ExtraGroup, Group, Provenance};
use sortase_bam::flags;
use sortase_exec::agd::columns::{duplicate_column, duplicate_group, GroupCommit};
use sortase_exec::agd::{chunk_batch_with, dataset_header, open_manifest};
use sortase_exec::error::{bail_argument, Error, ErrorKind, Result};
use sortase_exec::options::OutputSpec;
use sortase_exec::output::temp_prefix;
use sortase_exec::parts::{complete, create_work_dir, remove_work_dir};
use sortase_exec::runtime::Runtime;
use sortase_exec::task::{outputs_of, DynTask, Span, Task};
use sortase_exec::wire::WorkFile;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Chunks after its run a samblaster map task may read to finish its last read-name group.
const FOLLOW_CHUNKS: usize = 2;

/// The job spec of kind `agd_markdup`: the job and whether the driver finishes on object storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMarkdupTasksJob {
    /// The job (its `dataset` the directory the tasks see).
    pub job: AgdMarkdupJob,
    /// The dataset is a driver's copy of one on object storage: the finish leaves the group's
    /// files where the tasks uploaded them and says where they go ([`AgdMarkdupCommit`]).
    #[serde(default)]
    pub remote: bool,
}

/// An `agd markdup` planned as tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMarkdupPlan {
    job: AgdMarkdupJob,
    remote: bool,
    /// The dataset directory, absolute.
    dataset: PathBuf,
    mode: Mode,
    /// The dataset's chunks, as the manifest lists them.
    chunks: Vec<ChunkEntry>,
    /// One run of consecutive chunks per map (and write) task: `[start, end)` into `chunks`.
    runs: Vec<(usize, usize)>,
    /// The dataset's `duplicate` group, applied to the flags as export applies them.
    duplicate: Option<ExtraGroup>,
    /// The references' lengths (samblaster's signature layout).
    lengths: Vec<u64>,
    /// Hash partitions (reduce tasks).
    partitions: usize,
    work_dir: PathBuf,
    /// Where the write tasks put the group's files.
    staging: PathBuf,
    /// Picard's mode: the BAM markdup plan whose join and reduce stages the tasks share.
    picard: Option<Box<PicardPlan>>,
}

/// Where the group of a remote job goes ([`AgdMarkdupTasksJob::remote`]): the driver moves the
/// staging directory's files to `dir`, uploads the manifest (written to its copy) and then removes
/// `replaced`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMarkdupCommit {
    /// The staging directory, relative to the dataset.
    pub staging: String,
    /// The group's directory, relative to the dataset.
    pub dir: String,
    /// The directory of the group it replaces.
    pub replaced: Option<String>,
}

impl AgdMarkdupJob {
    /// Plans the job as tasks (see the module documentation): `task_memory` bounds a map task's
    /// run of chunks and a reduce (or join) task's partition; `reduce_tasks` asks for at least
    /// that many partitions. Creates the work and staging directories ([`AgdMarkdupPlan::abort`]
    /// or the finish removes them).
    pub fn plan_tasks(
        &self,
        rt: &Runtime,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Result<AgdMarkdupPlan> {
        plan(self, false, rt, task_memory, reduce_tasks)
            .with_context(|| format!("agd markdup {}", self.dataset.display()))
            .map_err(Error::from)
    }
}

/// The [`MarkdupJob`] whose options the BAM markdup's task code reads.
fn markdup_job(job: &AgdMarkdupJob, mode: Mode) -> MarkdupJob {
    MarkdupJob {
        mode,
        temp_prefix: job.temp_prefix.clone(),
        samblaster: job.samblaster.clone(),
        picard: job.picard.clone(),
        ..MarkdupJob::new(job.dataset.display().to_string(), OutputSpec::default())
    }
}

/// Creates `PREFIX.sortase-tasks-PID-N.tmp/` with the default permissions (it becomes the group's
/// directory, as the one-machine job's staging directory does).
fn create_staging(prefix: &Path) -> anyhow::Result<PathBuf> {
    for n in 0..1000 {
        let mut name = prefix.as_os_str().to_owned();
        name.push(format!(".sortase-tasks-{}-{n}.tmp", std::process::id()));
        let path = PathBuf::from(name);
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(
                    anyhow::Error::new(e).context(format!("{}: cannot create", path.display()))
                )
            }
        }
    }
    bail!("{}: no free staging directory name", prefix.display())
}

fn plan(
    job: &AgdMarkdupJob,
    remote: bool,
    rt: &Runtime,
    task_memory: usize,
    reduce_tasks: Option<usize>,
) -> anyhow::Result<AgdMarkdupPlan> {
    check_options(job)?;
    if task_memory == 0 {
        bail_argument!("task_memory 0: give the memory of one task, e.g. 768M");
    }
    let manifest = open_manifest(&job.dataset)?;
    let dataset = std::fs::canonicalize(&job.dataset)
        .with_context(|| format!("{}: cannot resolve", job.dataset.display()))?;
    let header = dataset_header(&manifest);
    let mode = match job.mode {
        Mode::Auto => detect_mode(&header),
        m => m,
    };
    let name = job.dataset.display().to_string();
    let lengths: Vec<u64> = header
        .references()
        .iter()
        .map(|r| u64::from(r.length))
        .collect();
    let md = markdup_job(job, mode);
    if mode == Mode::Coordinate {
        let regex = job.picard.read_name_regex.as_deref();
        if let Err(e) = crate::picard::name::NameParser::new(regex) {
            bail_argument!("--read-name-regex {regex:?}: {e}");
        }
    } else {
        // As the one-machine job: a layout that fails is an error of the input.
        super::query::sig_layout(&lengths, &md)
            .map_err(|e| Error::new(ErrorKind::Format, format!("{name}: {e}")))?;
    }
    let n = match sortase_exec::agd::estimate_record_bytes(&dataset, &manifest) {
        Some(estimate) => estimate.div_ceil(task_memory as u64),
        None => manifest.chunks.len() as u64,
    };
    let n = n.clamp(1, manifest.chunks.len().max(1) as u64) as usize;
    let mut runs = Vec::new();
    let mut at = 0;
    for r in sortase_exec::agd::runs(&manifest.chunks, n) {
        runs.push((at, at + r.len()));
        at += r.len();
    }
    let per_record = if mode == Mode::Coordinate {
        BYTES_PER_RECORD
    } else {
        REDUCE_BYTES_PER_SIG
    };
    let by_memory = (manifest.records * per_record).div_ceil(task_memory as u64) as usize;
    let partitions = reduce_tasks.unwrap_or(runs.len()).max(by_memory).max(1);
    let prefix = temp_prefix(
        job.temp_prefix.as_deref(),
        Some(&dataset.join(".markdup")),
        rt.temp_dir(),
    );
    let work_dir = create_work_dir(&prefix)?;
    let staging = match create_staging(&dataset.join(format!(".{DUPLICATE_GROUP}"))) {
        Ok(s) => s,
        Err(e) => {
            let _ = remove_work_dir(&work_dir);
            return Err(e);
        }
    };
    let picard = (mode == Mode::Coordinate).then(|| {
        Box::new(PicardPlan::for_dataset(
            md,
            dataset.clone(),
            &header,
            work_dir.clone(),
            task_memory,
            Some(partitions),
        ))
    });
    Ok(AgdMarkdupPlan {
        job: job.clone(),
        remote,
        dataset,
        mode,
        duplicate: duplicate_group(&manifest).cloned(),
        chunks: manifest.chunks,
        runs,
        lengths,
        partitions,
        work_dir,
        staging,
        picard,
    })
}

/// The files of `chunks` a task that decodes their records reads (through `sortase_agd`'s chunk
/// reader, so through `sortase_io`): every core group's file and the `duplicate` group's.
fn record_files(dir: &Path, chunks: &[ChunkEntry], duplicate: Option<&ExtraGroup>) -> Vec<Span> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend(Group::ALL.map(|g| chunk_file(sortase_agd::chunk_path(dir, g, c.index))));
        if let Some(d) = duplicate {
            out.push(chunk_file(extra::extra_path(dir, d, c.index)));
        }
    }
    out
}

/// A chunk file a task reads whole through `sortase_agd`'s chunk reader.
fn chunk_file(path: PathBuf) -> Span {
    Span::whole(path).streamed()
}

/// The records of `chunks`, one batch per chunk, each checked against the manifest's count.
fn chunk_batches<'a>(
    dir: &'a Path,
    duplicate: Option<&'a ExtraGroup>,
    chunks: &'a [ChunkEntry],
) -> impl FnMut() -> anyhow::Result<Option<sortase_bam::RecordBatch>> + 'a {
    let mut next = chunks.iter();
    move || {
        let Some(c) = next.next() else {
            return Ok(None);
        };
        let batch = chunk_batch_with(dir, duplicate, c)?;
        if batch.len() as u64 != c.records {
            bail!(Error::new(
                ErrorKind::Input,
                format!(
                    "{}: chunk {} holds {} records, the manifest says {}",
                    dir.display(),
                    c.index,
                    batch.len(),
                    c.records
                )
            ));
        }
        Ok(Some(batch))
    }
}

// ------------------------------------------------------------------ samblaster's mode: map

/// samblaster's map stage on a run of chunks: its read-name groups' signatures, partitioned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMdMapTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The dataset as the job names it (messages).
    pub input_name: String,
    /// The references' lengths.
    pub lengths: Vec<u64>,
    /// The job (samblaster's options).
    pub job: Box<MarkdupJob>,
    /// The run's number.
    pub part: usize,
    /// Runs.
    pub parts: usize,
    /// The run's chunks.
    pub chunks: Vec<ChunkEntry>,
    /// The chunk before the run (its last read name's records belong to the run before).
    pub before: Option<ChunkEntry>,
    /// The chunks after the run that its last group may continue into.
    pub after: Vec<ChunkEntry>,
    /// Whether the dataset has chunks past `after`.
    pub more_after: bool,
    /// The dataset's `duplicate` group.
    pub duplicate: Option<ExtraGroup>,
    /// Hash partitions (reduce tasks).
    pub partitions: usize,
    /// The signature file it writes.
    pub path: PathBuf,
}

/// The last read name of `chunk` (its `names` group alone).
fn last_name(dir: &Path, chunk: &ChunkEntry) -> anyhow::Result<Vec<u8>> {
    let names = sortase_agd::read_group(dir, Group::Names, chunk, None)?;
    let column = names.batch.column(0).as_string::<i32>();
    if column.is_empty() {
        bail!("{}: chunk {} has no records", dir.display(), chunk.index);
    }
    Ok(column.value(column.len() - 1).as_bytes().to_vec())
}

impl AgdMdMapTask {
    /// Reads the run's groups and writes its signature file.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<MdMapOutput> {
        let skip_name = match &self.before {
            Some(c) => last_name(&self.input, c)?,
            None => Vec::new(),
        };
        let duplicate = self.duplicate.as_ref();
        let mut in_run = chunk_batches(&self.input, duplicate, &self.chunks);
        let (input, after, more) = (self.input.clone(), self.after.clone(), self.more_after);
        let mut rest = || -> anyhow::Result<Box<Batches<'static>>> {
            let (input, after, duplicate) = (input.clone(), after.clone(), duplicate.cloned());
            let mut next = 0;
            Ok(Box::new(move || {
                let Some(c) = after.get(next) else {
                    if more {
                        bail_argument!(
                            "{}: a read-name group continues more than {FOLLOW_CHUNKS} chunks \
                             past a task's chunks; run `sortase agd markdup` on one machine",
                            input.display()
                        );
                    }
                    return Ok(None);
                };
                next += 1;
                chunk_batch_with(&input, duplicate.as_ref(), c).map(Some)
            }))
        };
        let m = map_groups(
            rt,
            &self.job,
            &self.input_name,
            &self.lengths,
            &skip_name,
            self.partitions,
            &self.path,
            false,
            &mut in_run,
            &mut rest,
        )?;
        let records = self.chunks.iter().map(|c| c.records).sum();
        Ok(MdMapOutput {
            part: self.part,
            parts: self.parts,
            skipped: m.skipped,
            groups: m.groups,
            signatures: m.signatures,
            cutting: super::query::Cutting {
                records,
                ..Default::default()
            },
            start: 0,
            end: None,
            path: self.path.clone(),
            offsets: m.offsets,
            ..MdMapOutput::default()
        })
    }
}

impl Task for AgdMdMapTask {
    const KIND: &'static str = "agd_markdup.map";
    const OUTPUT_KIND: &'static str = "markdup.map";
    type Output = MdMapOutput;

    fn run(&self, rt: &Runtime) -> Result<MdMapOutput> {
        AgdMdMapTask::run(self, rt)
            .with_context(|| format!("agd markdup map task {}", self.part))
            .map_err(Error::from)
    }

    /// The run's chunks and those after it, and the `names` file of the chunk before.
    fn reads(&self) -> Result<Vec<Span>> {
        let mut out = Vec::new();
        if let Some(c) = &self.before {
            out.push(chunk_file(sortase_agd::chunk_path(
                &self.input,
                Group::Names,
                c.index,
            )));
        }
        out.extend(record_files(
            &self.input,
            &self.chunks,
            self.duplicate.as_ref(),
        ));
        out.extend(record_files(
            &self.input,
            &self.after,
            self.duplicate.as_ref(),
        ));
        Ok(out)
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

// --------------------------------------------------------------------- Picard's mode: map

/// Picard's map stage on a run of chunks: its read ends, partitioned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdPmMapTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The dataset as the job names it (messages).
    pub input_name: String,
    /// The header's `@RG` lines (the libraries).
    pub rg_lines: String,
    /// `--read-name-regex`.
    pub read_name_regex: Option<String>,
    /// The run's number.
    pub part: usize,
    /// Runs.
    pub parts: usize,
    /// The run's chunks.
    pub chunks: Vec<ChunkEntry>,
    /// The dataset's `duplicate` group.
    pub duplicate: Option<ExtraGroup>,
    /// Partitions (join and reduce tasks).
    pub partitions: usize,
    /// The file it writes.
    pub path: PathBuf,
}

impl Task for AgdPmMapTask {
    const KIND: &'static str = "agd_markdup.coordinate_map";
    const OUTPUT_KIND: &'static str = "markdup.coordinate_map";
    type Output = PmMapOutput;

    fn run(&self, rt: &Runtime) -> Result<PmMapOutput> {
        let m = EndsMap {
            input_name: &self.input_name,
            rg_lines: &self.rg_lines,
            read_name_regex: self.read_name_regex.as_deref(),
            part: self.part,
            parts: self.parts,
            base: self.chunks.first().map_or(0, |c| c.first),
            records: Some(self.chunks.iter().map(|c| c.records).sum()),
            partitions: self.partitions,
            path: &self.path,
            cutting: false,
        };
        let mut next = chunk_batches(&self.input, self.duplicate.as_ref(), &self.chunks);
        map_ends(rt, &m, &mut next)
            .with_context(|| format!("agd markdup map task {}", self.part))
            .map_err(Error::from)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(record_files(
            &self.input,
            &self.chunks,
            self.duplicate.as_ref(),
        ))
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

// ------------------------------------------------------------------------ both modes: write

/// How a write task knows its records' marks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Marks {
    /// samblaster's: by read-name group, or'ed with each record's 0x400.
    Groups {
        /// Leading records that belong to the group of a run before.
        skipped: u64,
        /// The run's groups (its map task's count).
        groups: u64,
        /// The run's duplicate groups' ordinals (u32), one slice per reduce task.
        duplicates: Vec<FileSlice>,
        /// With `skipped`: that group's ordinal in its run and the run's duplicate slices.
        before: Option<(u64, Vec<FileSlice>)>,
    },
    /// Picard's: exactly the duplicates' file indices (u64), one slice per reduce task.
    Records {
        /// The duplicates.
        duplicates: Vec<FileSlice>,
    },
}

/// The last stage: the `duplicate` group's file of each chunk of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMdWriteTask {
    /// The dataset directory.
    pub input: PathBuf,
    /// The run's number.
    pub part: usize,
    /// Runs.
    pub parts: usize,
    /// The run's chunks.
    pub chunks: Vec<ChunkEntry>,
    /// The dataset's `duplicate` group (its marks are the records' 0x400 in samblaster's mode).
    pub duplicate: Option<ExtraGroup>,
    /// The marks.
    pub marks: Marks,
    /// The staging directory of the group's files.
    pub staging: PathBuf,
    /// zstd level of the files.
    pub zstd_level: i32,
}

/// What an [`AgdMdWriteTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgdMdWriteOutput {
    /// The run's number.
    pub part: usize,
    /// Runs.
    pub parts: usize,
    /// Records marked.
    pub records: u64,
    /// Of them, duplicates.
    pub duplicate_records: u64,
}

/// The set bits of `slices` (entries of `width` bytes, little-endian), as sorted values.
fn entries(slices: &[FileSlice], width: usize) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for s in slices {
        let bytes = s.read()?;
        if !bytes.len().is_multiple_of(width) {
            bail!("{}: a slice of {} bytes", s.path.display(), bytes.len());
        }
        out.extend(bytes.chunks_exact(width).map(|e| {
            let mut v = [0u8; 8];
            v[..width].copy_from_slice(e);
            u64::from_le_bytes(v)
        }));
    }
    out.sort_unstable();
    Ok(out)
}

impl AgdMdWriteTask {
    fn file(&self, c: &ChunkEntry) -> PathBuf {
        extra::extra_dir_path(&self.staging, ".", c.index)
    }

    /// Marks the run's records and writes their files.
    pub fn run(&self, rt: &Runtime) -> anyhow::Result<AgdMdWriteOutput> {
        let records: u64 = self.chunks.iter().map(|c| c.records).sum();
        let mut marks: Vec<bool> = Vec::with_capacity(records as usize);
        match &self.marks {
            Marks::Records { duplicates } => {
                let base = self.chunks.first().map_or(0, |c| c.first);
                marks.resize(records as usize, false);
                for d in entries(duplicates, 8)? {
                    let i = d.wrapping_sub(base);
                    if i >= records {
                        bail!("duplicate {d} outside the run of records {base}..");
                    }
                    marks[i as usize] = true;
                }
            }
            Marks::Groups {
                skipped,
                groups,
                duplicates,
                before,
            } => {
                let dups = entries(duplicates, 4)?;
                let before_dup = match before {
                    Some((ordinal, slices)) => entries(slices, 4)?.binary_search(ordinal).is_ok(),
                    None => false,
                };
                let mut group = 0u64;
                let mut prev: Vec<u8> = Vec::new();
                let mut index = 0u64;
                for c in &self.chunks {
                    rt.check_cancelled()?;
                    let names = sortase_agd::read_group(&self.input, Group::Names, c, None)?;
                    let names = names.batch.column(0).as_string::<i32>();
                    let results =
                        sortase_agd::read_group(&self.input, Group::Results, c, Some(&["flag"]))?;
                    let flag = results.batch.column(0).as_primitive::<UInt16Type>();
                    let set = duplicate_column(&self.input, self.duplicate.as_ref(), c)?;
                    for i in 0..flag.len() {
                        let marked = match &set {
                            Some(s) if !s.is_null(i) => s.value(i),
                            _ => flag.value(i) & flags::DUPLICATE != 0,
                        };
                        let name = names.value(i).as_bytes();
                        let dup = if index < *skipped {
                            before_dup
                        } else {
                            if index > *skipped && name != prev.as_slice() {
                                group += 1;
                            }
                            if group >= *groups {
                                bail!(
                                    "{}: run {} has more groups than its map task found",
                                    self.input.display(),
                                    self.part
                                );
                            }
                            dups.binary_search(&group).is_ok()
                        };
                        prev.clear();
                        prev.extend_from_slice(name);
                        marks.push(dup || marked);
                        index += 1;
                    }
                }
                if marks.len() as u64 != records {
                    bail!(
                        "{}: run {} has {} records, the manifest says {records}",
                        self.input.display(),
                        self.part,
                        marks.len()
                    );
                }
            }
        }
        rt.check_cancelled()?;
        let mut at = 0usize;
        for c in &self.chunks {
            let values = &marks[at..at + c.records as usize];
            at += c.records as usize;
            let column: ArrayRef = Arc::new(BooleanArray::from(values.to_vec()));
            let batch = RecordBatch::try_from_iter([(DUPLICATE_GROUP, column)])?;
            let path = self.file(c);
            let file = WorkFile::new(&path)?;
            let f = std::fs::File::create(file.path())
                .with_context(|| format!("{}: cannot create", file.path().display()))?;
            let mut out = extra::write_extra(&batch, std::io::BufWriter::new(f), self.zstd_level)?;
            out.flush()
                .with_context(|| format!("{}: cannot write", path.display()))?;
            drop(out);
            file.commit()?;
        }
        Ok(AgdMdWriteOutput {
            part: self.part,
            parts: self.parts,
            records,
            duplicate_records: marks.iter().filter(|&&d| d).count() as u64,
        })
    }
}

impl Task for AgdMdWriteTask {
    const KIND: &'static str = "agd_markdup.write";
    type Output = AgdMdWriteOutput;

    fn run(&self, rt: &Runtime) -> Result<AgdMdWriteOutput> {
        AgdMdWriteTask::run(self, rt)
            .with_context(|| format!("agd markdup write task {}", self.part))
            .map_err(Error::from)
    }

    /// The duplicate slices; in samblaster's mode the run's `names` files and `results` files
    /// (their `flag` column) and the `duplicate` group's.
    fn reads(&self) -> Result<Vec<Span>> {
        let mut out: Vec<Span> = Vec::new();
        match &self.marks {
            Marks::Records { duplicates } => {
                out.extend(super::kinds::slices(duplicates));
            }
            Marks::Groups {
                duplicates, before, ..
            } => {
                let before = before.iter().flat_map(|(_, s)| s.iter());
                out.extend(super::kinds::slices(duplicates.iter().chain(before)));
                for c in &self.chunks {
                    for g in [Group::Names, Group::Results] {
                        out.push(chunk_file(sortase_agd::chunk_path(&self.input, g, c.index)));
                    }
                    if let Some(d) = &self.duplicate {
                        out.push(chunk_file(extra::extra_path(&self.input, d, c.index)));
                    }
                }
            }
        }
        Ok(out)
    }

    fn writes(&self) -> Vec<PathBuf> {
        self.chunks.iter().map(|c| self.file(c)).collect()
    }
}

// --------------------------------------------------------------------------------- the driver

impl AgdMarkdupPlan {
    /// The plan from a job spec of kind `agd_markdup` ([`AgdMarkdupTasksJob`]).
    pub fn new(
        spec: &AgdMarkdupTasksJob,
        rt: &Runtime,
        task_memory: usize,
        reduce_tasks: Option<usize>,
    ) -> Result<Self> {
        plan(&spec.job, spec.remote, rt, task_memory, reduce_tasks)
            .with_context(|| format!("agd markdup {}", spec.job.dataset.display()))
            .map_err(Error::from)
    }

    /// The algorithm (resolved from the header under `auto`).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The stages, in order.
    pub fn stages(&self) -> &'static [&'static str] {
        if self.picard.is_some() {
            &["map", "join", "reduce", "write"]
        } else {
            &["map", "reduce", "write"]
        }
    }

    /// The work directory.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The staging directory of the group's files.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    fn run_chunks(&self, r: usize) -> &[ChunkEntry] {
        let (a, b) = self.runs[r];
        &self.chunks[a..b]
    }

    /// The map stage: one task per run of chunks.
    pub fn map_tasks(&self) -> Vec<Box<dyn DynTask>> {
        let parts = self.runs.len();
        let name = self.job.dataset.display().to_string();
        (0..parts)
            .map(|part| -> Box<dyn DynTask> {
                let (a, b) = self.runs[part];
                let chunks = self.chunks[a..b].to_vec();
                if let Some(p) = &self.picard {
                    return Box::new(AgdPmMapTask {
                        input: self.dataset.clone(),
                        input_name: name.clone(),
                        rg_lines: p.rg_lines().to_string(),
                        read_name_regex: self.job.picard.read_name_regex.clone(),
                        part,
                        parts,
                        chunks,
                        duplicate: self.duplicate.clone(),
                        partitions: self.partitions,
                        path: self.work_dir.join(format!("pmap-{part:06}.ends")),
                    });
                }
                let follow = (b + FOLLOW_CHUNKS).min(self.chunks.len());
                Box::new(AgdMdMapTask {
                    input: self.dataset.clone(),
                    input_name: name.clone(),
                    lengths: self.lengths.clone(),
                    job: Box::new(markdup_job(&self.job, self.mode)),
                    part,
                    parts,
                    chunks,
                    before: a.checked_sub(1).map(|i| self.chunks[i].clone()),
                    after: self.chunks[b..follow].to_vec(),
                    more_after: follow < self.chunks.len(),
                    duplicate: self.duplicate.clone(),
                    partitions: self.partitions,
                    path: self.work_dir.join(format!("map-{part:06}.sigs")),
                })
            })
            .collect()
    }

    fn picard(&self, stage: &str) -> Result<&PicardPlan> {
        self.picard
            .as_deref()
            .ok_or_else(|| Error::argument(format!("no stage {stage:?} in samblaster's mode")))
    }

    /// The tasks of `stage` from the outputs of the stages before (any kinds, any order).
    pub fn stage_tasks(&self, stage: &str, outputs: &[Value]) -> Result<Vec<Box<dyn DynTask>>> {
        let picard_tasks =
            |t: Vec<PicardTask>| t.into_iter().map(|t| t.into_task()).collect::<Vec<_>>();
        if self.runs.is_empty() && self.stages().contains(&stage) {
            return Ok(Vec::new()); // no records: the finish writes an empty group
        }
        Ok(match stage {
            "map" => self.map_tasks(),
            "join" => picard_tasks(
                self.picard(stage)?
                    .join_tasks(&outputs_of(outputs, "markdup.coordinate_map")?)?,
            ),
            "reduce" => match &self.picard {
                Some(p) => picard_tasks(p.reduce_tasks(
                    &outputs_of(outputs, "markdup.coordinate_map")?,
                    &outputs_of(outputs, "markdup.coordinate_join")?,
                )?),
                None => self.reduce_tasks(&outputs_of(outputs, "markdup.map")?)?,
            },
            "write" => self.write_tasks(outputs)?,
            _ => return Err(Error::argument(format!("no stage {stage:?} in this plan"))),
        })
    }

    /// samblaster's reduce stage: one task per hash partition.
    fn reduce_tasks(&self, maps: &[MdMapOutput]) -> Result<Vec<Box<dyn DynTask>>> {
        let maps = complete(maps, "map", |m| (m.part, m.parts))?;
        let partitions = maps[0].offsets.len().saturating_sub(1);
        if maps.iter().any(|m| m.offsets.len() != partitions + 1) {
            return Err(Error::argument("map outputs disagree on the partitions"));
        }
        Ok((0..partitions)
            .map(|p| -> Box<dyn DynTask> {
                Box::new(MdReduceTask {
                    part: p,
                    parts: partitions,
                    inputs: maps
                        .iter()
                        .map(|m| FileSlice::nth(&m.path, &m.offsets, p))
                        .collect(),
                    heads: Vec::new(),
                    path: self.work_dir.join(format!("reduce-{p:06}.dups")),
                })
            })
            .collect())
    }

    /// The write stage from the map and the reduce outputs: one task per run.
    fn write_tasks(&self, outputs: &[Value]) -> Result<Vec<Box<dyn DynTask>>> {
        let parts = self.runs.len();
        let task = |part: usize, marks: Marks| -> Box<dyn DynTask> {
            Box::new(AgdMdWriteTask {
                input: self.dataset.clone(),
                part,
                parts,
                chunks: self.run_chunks(part).to_vec(),
                duplicate: self.duplicate.clone(),
                marks,
                staging: self.staging.clone(),
                zstd_level: self.job.zstd_level,
            })
        };
        if let Some(p) = &self.picard {
            let maps: Vec<PmMapOutput> = outputs_of(outputs, "markdup.coordinate_map")?;
            let maps = p.checked_maps(&maps)?;
            let reduces: Vec<PmReduceOutput> = outputs_of(outputs, PmReduceTask::KIND)?;
            let reduces = complete(&reduces, "reduce", |r| (r.part, r.parts))?;
            if maps.len() != parts || reduces.iter().any(|r| r.offsets.len() != parts + 1) {
                return Err(Error::argument(
                    "reduce outputs do not cover the map tasks' runs",
                ));
            }
            return Ok((0..parts)
                .map(|r| {
                    let duplicates = reduces
                        .iter()
                        .map(|d| FileSlice::nth(&d.path, &d.offsets, r))
                        .collect();
                    task(r, Marks::Records { duplicates })
                })
                .collect());
        }
        let maps: Vec<MdMapOutput> = outputs_of(outputs, "markdup.map")?;
        let maps = complete(&maps, "map", |m| (m.part, m.parts))?;
        let reduces: Vec<MdReduceOutput> = outputs_of(outputs, MdReduceTask::KIND)?;
        let reduces = complete(&reduces, "reduce", |r| (r.part, r.parts))?;
        if maps.len() != parts || reduces.iter().any(|r| r.offsets.len() != parts + 1) {
            return Err(Error::argument(
                "reduce outputs do not cover the map tasks' runs",
            ));
        }
        let slices = |r: usize| -> Vec<FileSlice> {
            reduces
                .iter()
                .map(|d| FileSlice::nth(&d.path, &d.offsets, r))
                .collect()
        };
        let mut tasks = Vec::with_capacity(parts);
        // The latest run with a group: the one a run's skipped records belong to.
        let mut last_group: Option<usize> = None;
        for (r, m) in maps.iter().enumerate() {
            let before = if m.skipped > 0 {
                let j = last_group.ok_or_else(|| {
                    Error::new(
                        ErrorKind::Internal,
                        format!("map task {r} skipped records no run before holds"),
                    )
                })?;
                Some((maps[j].groups - 1, slices(j)))
            } else {
                None
            };
            tasks.push(task(
                r,
                Marks::Groups {
                    skipped: m.skipped,
                    groups: m.groups,
                    duplicates: slices(r),
                    before,
                },
            ));
            if m.groups > 0 {
                last_group = Some(r);
            }
        }
        Ok(tasks)
    }

    /// Puts the group into the dataset from every stage's outputs: the staging directory renamed
    /// to the group's and the manifest replaced (or, for a remote job, the manifest written to the
    /// driver's copy and the directories named in the report's `commit`); the work directory
    /// removed. The report as JSON: the one-machine job's, plus `commit` for a remote job.
    pub fn finish(&self, outputs: &[Value]) -> Result<String> {
        self.finish_inner(outputs)
            .with_context(|| format!("agd markdup {}", self.job.dataset.display()))
            .map_err(Error::from)
    }

    fn finish_inner(&self, outputs: &[Value]) -> anyhow::Result<String> {
        // Every task's output (none of a dataset without records).
        fn all<'a, T>(
            plan: &AgdMarkdupPlan,
            outputs: &'a [T],
            stage: &str,
            number: impl Fn(&T) -> (usize, usize),
        ) -> Result<Vec<&'a T>> {
            if plan.runs.is_empty() && outputs.is_empty() {
                return Ok(Vec::new());
            }
            complete(outputs, stage, number)
        }
        let writes: Vec<AgdMdWriteOutput> = outputs_of(outputs, AgdMdWriteTask::KIND)?;
        let writes = all(self, &writes, "write", |w| (w.part, w.parts))?;
        let manifest = open_manifest(&self.dataset)?;
        if manifest.chunks != self.chunks {
            bail!(
                "{}: the dataset changed while the job ran",
                self.dataset.display()
            );
        }
        let mut report = MarkdupReport {
            mode: self.mode,
            records: manifest.records,
            duplicate_records: writes.iter().map(|w| w.duplicate_records).sum(),
            ..MarkdupReport::default()
        };
        if self.picard.is_some() {
            let maps: Vec<PmMapOutput> = outputs_of(outputs, "markdup.coordinate_map")?;
            let joins: Vec<PmJoinOutput> = outputs_of(outputs, PmJoinTask::KIND)?;
            report.pairs = all(self, &maps, "map", |m| (m.part, m.parts))?
                .iter()
                .map(|m| m.pairs_formed)
                .sum::<u64>()
                + all(self, &joins, "join", |j| (j.part, j.parts))?
                    .iter()
                    .map(|j| j.pairs_formed)
                    .sum::<u64>();
        } else {
            let maps: Vec<MdMapOutput> = outputs_of(outputs, "markdup.map")?;
            let reduces: Vec<MdReduceOutput> = outputs_of(outputs, MdReduceTask::KIND)?;
            report.read_names = all(self, &maps, "map", |m| (m.part, m.parts))?
                .iter()
                .map(|m| m.groups)
                .sum();
            report.duplicate_groups = all(self, &reduces, "reduce", |r| (r.part, r.parts))?
                .iter()
                .map(|r| r.duplicates)
                .sum();
            report.summary.push(format!(
                "sortase agd markdup: marked {} duplicate groups of {} read names",
                report.duplicate_groups, report.read_names
            ));
        }
        let provenance = Provenance {
            command_line: self.job.command_line.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
        };
        let group = GroupCommit::new(
            &self.dataset,
            manifest,
            DUPLICATE_GROUP,
            vec![DUPLICATE_GROUP.to_string()],
            provenance,
        );
        let mut value = serde_json::to_value(&report).context("agd markdup report JSON")?;
        if self.remote {
            let staging = self
                .staging
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let commit = AgdMarkdupCommit {
                staging,
                dir: group.dir.clone(),
                replaced: group.replaced.clone(),
            };
            sortase_exec::agd::columns::write_manifest(&self.dataset, &group.manifest)?;
            let _ = std::fs::remove_dir_all(&self.staging);
            value["commit"] = serde_json::to_value(&commit).context("commit JSON")?;
        } else {
            group.commit_dir(&self.dataset, &self.staging)?;
        }
        let _ = remove_work_dir(&self.work_dir);
        Ok(value.to_string())
    }

    /// Gives the job up: removes the work and staging directories (the dataset is untouched).
    pub fn abort(&self) -> Result<()> {
        let staged = remove_work_dir(&self.staging);
        remove_work_dir(&self.work_dir).and(staged)
    }
}
