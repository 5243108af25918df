//! [`Fq2BamJob`]: FASTQ in, sorted, duplicate-marked, indexed BAM out (issue 20), in one streamed
//! pass: minimap2 through its library (crates/align: a bounded work queue over all threads, minimap2's
//! SAM records written as raw BAM), samblaster's duplicate marking on the aligner's query-grouped
//! stream (crates/markdup: signatures on the mapping threads, first-seen-wins in input order), the
//! sorter (crates/sort, under the runtime's memory pool) and the key-range writer with the on-the-fly
//! index (range_output). No intermediate SAM/BAM is written besides the sorter's own runs.
//!
//! With `--markdup picard` the marking runs after the sort instead, as Picard MarkDuplicates on the
//! sorted records ([`picard`]).
//!
//! The records equal those of `minimap2 -ax PRESET | samblaster --ignoreUnmated | samtools sort`
//! with the same minimap2 version (tests/e2e/fq2bam.rs). `--ignoreUnmated` because samblaster
//! refuses single-end unmapped reads without it; paired minimap2 output never needs it.
//!
//! ```no_run
//! use sortase_align::job::Fq2BamJob;
//! use sortase_exec::{options::OutputSpec, runtime::Runtime};
//! let rt = Runtime::with_threads(2)?;
//! let mut job = Fq2BamJob::new("ref.fa", "r1.fq.gz", OutputSpec::to_path("out.bam"));
//! job.reads2 = Some("r2.fq.gz".into());
//! job.output.write_index = true;
//! let report = job.run(&rt)?;
//! println!("{} reads, {} records, {} duplicates", report.reads, report.records, report.duplicate_records);
//! # Ok::<(), sortase_exec::error::Error>(())
//! ```

use crate::fastq::{FastqError, FastqReader};
use crate::pipeline;
use crate::reads::{ChunkSource, FastqSource};
use crate::{AlignError, Aligner, AlignerOptions};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::{ChecksumOptions, Checksummer, Sums};
use sortase_bam::Header;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::files::TempDir;
use sortase_exec::options::{add_program, OutputSpec, Phase, PhaseClock, Program};
use sortase_exec::output::{resolve_output, temp_prefix, ResolvedOutput};
use sortase_exec::proof::Checksums;
use sortase_exec::range_output;
use sortase_exec::runtime::Runtime;
use sortase_exec::sorting::release_free_memory;
use sortase_markdup::samblaster::Layout;
use sortase_sort::{SortOptions, SortOrder, SortStats, Sorter};
use std::path::{Path, PathBuf};

pub(crate) mod dataset;
mod memory;
mod picard;
pub(crate) mod stream_marking;

use memory::MemoryPlan;
use stream_marking::Marker;

/// How duplicates are marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum DuplicateMarking {
    /// samblaster's algorithm on the aligner's query-grouped output, before the sort.
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "samblaster's algorithm on the aligner's output, before the sort",)
    )]
    Samblaster,
    /// Picard MarkDuplicates' algorithm on the sorted records (a second pass over them, kept in
    /// the temporary directory).
    #[cfg_attr(feature = "clap", value(help = "Picard MarkDuplicates' algorithm, after the sort"))]
    Picard,
    /// No marking.
    #[cfg_attr(feature = "clap", value(help = "No duplicate marking"))]
    None,
}

/// FASTQ to sorted, duplicate-marked (indexed) BAM with minimap2.
///
/// With the `clap` feature it is also `sortase fq2bam`'s flags (`clap::Args`, flattened by the
/// CLI): a field's `arg(...)` is its flag and `--help` text; `program` (--no-PG) is the CLI's to
/// fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Fq2BamJob {
    /// minimap2 index (.mmi) or reference FASTA.
    #[cfg_attr(feature = "clap", arg(short = 'x', long = "index", value_name = "REF.mmi|REF.fa"))]
    pub index: PathBuf,
    /// Reads: FASTQ/FASTA, plain, gzip or BGZF (R1 of a pair), or an AGD dataset of the reads
    /// (`sortase agd import -1 R1 -2 R2`), given alone.
    pub reads1: PathBuf,
    /// R2 of a pair.
    pub reads2: Option<PathBuf>,
    /// The output (`write_index` for `--write-index`).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub output: OutputSpec,
    /// minimap2 preset: sr, map-ont, map-hifi, map-pb, lr:hq, splice, asm5, ... (minimap2 -x).
    #[cfg_attr(
        feature = "clap",
        arg(long = "preset", value_name = "PRESET", default_value = "sr")
    )]
    pub preset: String,
    /// Read group line, e.g. '@RG\tID:lane1\tSM:x' (minimap2 -R).
    #[cfg_attr(feature = "clap", arg(short = 'R', value_name = "STR"))]
    pub read_group: Option<String>,
    /// Duplicate marking.
    #[cfg_attr(
        feature = "clap",
        arg(long = "markdup", value_enum, default_value_t = DuplicateMarking::Samblaster)
    )]
    pub markdup: DuplicateMarking,
    /// Write MD tags (minimap2 --MD).
    #[cfg_attr(feature = "clap", arg(long = "MD"))]
    pub md: bool,
    /// Write short cs tags (minimap2 --cs).
    #[cfg_attr(feature = "clap", arg(long = "cs"))]
    pub cs: bool,
    /// Temporary files go to `PREFIX.sortase-PID-N.tmp/`; default: next to the output.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'T', value_name = "PREFIX", help = sortase_exec::options::TEMP_PREFIX_HELP)
    )]
    pub temp_prefix: Option<PathBuf>,
    /// Most runs the final merge may open; at least 2.
    #[cfg_attr(feature = "clap", arg(skip = 64usize))]
    pub max_fan_in: usize,
    /// The sortase `@PG` line (`None`: none; minimap2's is always written, as minimap2 does).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub program: Option<Program>,
    /// Prove that no read was lost or changed: sum the reads as samtools import makes them records
    /// and the primary records written (samtools checksum's defaults: the duplicate flag, mapping
    /// and mates outside the sums) and fail, removing the output, if they differ; -v prints them.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "checksums"))]
    pub checksums: bool,
}

/// What an fq2bam run did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Fq2BamReport {
    /// Reads mapped.
    pub reads: u64,
    /// Templates (read pairs, or single reads).
    pub fragments: u64,
    /// Bases mapped.
    pub bases: u64,
    /// Records written.
    pub records: u64,
    /// Templates marked as duplicates (samblaster; 0 with Picard, which counts records).
    pub duplicate_templates: u64,
    /// Records flagged 0x400.
    pub duplicate_records: u64,
    /// Chunks of the alignment work queue.
    pub chunks: u64,
    /// Memory of the minimap2 index (its size, or an estimate when built from FASTA).
    pub index_memory: usize,
    /// The memory budget (the runtime's pool).
    pub memory_budget: usize,
    /// The part of it left for the sorter's records.
    pub record_memory: usize,
    /// Runs the sorter spilled.
    pub runs_spilled: u64,
    /// Threads.
    pub threads: usize,
    /// Phases: `index`, `align` (reading, mapping, marking and sorting in memory or into runs,
    /// overlapped), then the sorter's `sort`, `merge`/`write` (compression and the index); with
    /// Picard, `merge`/`write` feed the end collector, then `mark` and `write`.
    pub phases: Vec<Phase>,
    /// Files written (data file, then index).
    pub outputs: Vec<PathBuf>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// With [`Fq2BamJob::checksums`]: the sums of the reads and of the primary records written.
    pub checksums: Option<Checksums>,
}

impl Fq2BamJob {
    /// Aligns `reads1` (single-end or interleaved) against `index` with the `sr` preset, marks
    /// duplicates with samblaster's algorithm and writes `output`, coordinate-sorted.
    pub fn new(index: impl Into<PathBuf>, reads1: impl Into<PathBuf>, output: OutputSpec) -> Self {
        Self {
            index: index.into(),
            reads1: reads1.into(),
            reads2: None,
            output,
            preset: "sr".into(),
            read_group: None,
            markdup: DuplicateMarking::Samblaster,
            md: false,
            cs: false,
            temp_prefix: None,
            max_fan_in: 64,
            program: None,
            checksums: false,
        }
    }

    /// Runs the job on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<Fq2BamReport> {
        run(self, rt).map_err(Error::from)
    }
}

/// The memory budget of a job with `threads` threads when none is given (`sortase fq2bam` without
/// `-m` or `--max-memory`, `sortase.fq2bam` without `max_memory`): samtools sort's 768 MiB per thread for
/// the read batches and the sort, plus the index, which minimap2 holds whole whatever the thread
/// count (an `.mmi` takes about its file size in memory; an index built from a FASTA about 3x the
/// FASTA: 927 MiB for the bench's 319 MB reference with `-x sr`). Without it, `-@1` on the bench
/// reference was refused for a budget smaller than the index alone. `None` if the index cannot be
/// read: the job then reports the missing file.
pub fn default_memory(threads: usize, index: &std::path::Path) -> Option<usize> {
    let bytes = usize::try_from(std::fs::metadata(index).ok()?.len()).ok()?;
    let is_mmi = index.extension().is_some_and(|e| e == "mmi");
    let index_memory = if is_mmi {
        bytes
    } else {
        bytes.saturating_mul(3)
    };
    Some(
        sortase_exec::runtime::DEFAULT_MEMORY_PER_THREAD
            .saturating_mul(threads)
            .saturating_add(index_memory),
    )
}

/// The crate's errors with the kind a caller acts on (I/O errors keep their own).
pub(crate) fn kinded(e: AlignError) -> anyhow::Error {
    let kind = match &e {
        AlignError::File(FastqError::Io { .. }) => return e.into(),
        AlignError::Option(_) => ErrorKind::Argument,
        AlignError::Stopped(_) => ErrorKind::Cancelled,
        AlignError::Index { .. } | AlignError::Source(_) => ErrorKind::Input,
        AlignError::File(FastqError::Format { .. })
        | AlignError::Pairing(_)
        | AlignError::Record { .. } => ErrorKind::Format,
    };
    Error::new(kind, e.to_string()).into_anyhow()
}

/// Classifies an error that may have come out of the pipeline as a bare `AlignError`.
pub(crate) fn classify(e: anyhow::Error) -> anyhow::Error {
    if e.chain().count() == 1 && e.is::<AlignError>() {
        if let Ok(a) = e.downcast::<AlignError>() {
            return kinded(a);
        }
        unreachable!("checked with is::<AlignError>()");
    }
    e
}

/// fq2bam's reads: FASTQ files, or an AGD dataset ([`dataset`]).
enum Reads {
    Fastq(FastqReader, Option<FastqReader>),
    Dataset(Box<dataset::DatasetReads>),
}

impl Reads {
    /// Opens the job's reads (a dataset is a directory holding a manifest, given alone).
    fn open(
        job: &Fq2BamJob,
        bytes_read: &sortase_exec::progress::Progress,
    ) -> anyhow::Result<Self> {
        if sortase_exec::agd::is_dataset(&job.reads1) {
            if let Some(r2) = &job.reads2 {
                return Err(Error::argument(format!(
                    "{}: a dataset holds both reads of its pairs: give it alone, not with {}",
                    job.reads1.display(),
                    r2.display()
                ))
                .into());
            }
            let reads = dataset::DatasetReads::open(&job.reads1, &job.preset)?;
            return Ok(Reads::Dataset(Box::new(reads)));
        }
        let r1 = open_reads(&job.reads1, bytes_read)?;
        let r2 = job
            .reads2
            .as_deref()
            .map(|p| open_reads(p, bytes_read))
            .transpose()?;
        Ok(Reads::Fastq(r1, r2))
    }

    /// The aligner's source of fragments.
    fn source(self, fragment_mode: bool) -> Box<dyn ChunkSource> {
        match self {
            Reads::Fastq(r1, r2) => Box::new(FastqSource::new(r1, r2, fragment_mode)),
            Reads::Dataset(d) => Box::new(d.fragment_mode(fragment_mode)),
        }
    }
}

/// Opens a reads file (plain, gzip or BGZF FASTQ/FASTA; a local path, or an `s3://`/`https://`
/// URL read as a stream of ranged requests), its bytes counted in `progress`.
pub(crate) fn open_reads(
    path: &Path,
    progress: &sortase_exec::progress::Progress,
) -> anyhow::Result<FastqReader> {
    let file = sortase_io::Source::open_path(path).map_err(|e| kinded(AlignError::io(path, e)))?;
    FastqReader::from_reader(Box::new(progress.wrap(file)), path).map_err(|e| kinded(e.into()))
}

/// With `--checksums`: the sums of the reads, compared with those of the records written before
/// the output is renamed into place.
pub(crate) struct Proof<'a> {
    job: &'a Fq2BamJob,
    fragment_mode: bool,
    read: Sums,
}

impl Proof<'_> {
    /// What is summed: `samtools checksum`'s defaults (primary records; the flag sum's
    /// PAIRED/READ1/READ2 only, so duplicate marking, mapping and mates are outside it).
    fn options() -> ChecksumOptions {
        ChecksumOptions::default()
    }

    /// The sums of the records encoded (`written`) against the reads' (fails when they differ).
    pub fn check(&self, written: Option<Sums>, out: &ResolvedOutput) -> anyhow::Result<Checksums> {
        let written = written.context("fq2bam: the records written were not summed")?;
        let mut c = Checksums::check("fq2bam", &Self::options(), &self.read, &written)?;
        c.command = self.command_line(out);
        Ok(c)
    }

    /// The samtools commands that print the same sums for the reads and for the output.
    fn command_line(&self, out: &ResolvedOutput) -> String {
        let checksum = Self::options().command_line();
        let reads = match &self.job.reads2 {
            Some(r2) => format!("-1 {} -2 {}", self.job.reads1.display(), r2.display()),
            None if self.fragment_mode => format!("-s {}", self.job.reads1.display()),
            None => format!("-0 {}", self.job.reads1.display()),
        };
        let output = out
            .data
            .as_deref()
            .map_or_else(|| "-".to_string(), |p| p.display().to_string());
        format!("samtools import {reads} | {checksum}; {checksum} {output}")
    }
}

/// The sorter's final phase into the output (key ranges encoded on all threads, the on-the-fly
/// index), as `sortase sort` writes; with `proof`, the records encoded are summed and checked
/// before the output is renamed into place.
fn write_sorted(
    sorter: Sorter,
    header: &Header,
    out: &ResolvedOutput,
    cram: &sortase_exec::writer::CramOut,
    rt: &Runtime,
    clock: &mut PhaseClock,
    proof: Option<&Proof<'_>>,
) -> anyhow::Result<(SortStats, Option<Checksums>)> {
    let (mut encoder, mut writer) = range_output::open(out, header, rt.threads(), cram)?;
    if proof.is_some() {
        encoder.sum_records(Proof::options());
    }
    let name = writer.name.clone();
    let sorted = sorter
        .finish_ranges(
            rt.threads(),
            |p| {
                if p == "merge" {
                    release_free_memory();
                }
                clock.next(p)
            },
            |records| encoder.encode(records),
            |range| writer.write(range),
        )
        .with_context(|| name.clone())?;
    rt.check_cancelled()?;
    let checksums = proof
        .map(|p| p.check(encoder.written_sums(), out))
        .transpose()?;
    writer.finish()?;
    Ok((sorted, checksums))
}

/// Paired input needs a preset that maps a template's reads together.
pub(crate) fn check_pairing(job: &Fq2BamJob, fragment_mode: bool) -> anyhow::Result<()> {
    if job.reads2.is_some() && !fragment_mode {
        return Err(Error::argument(format!(
            "--preset {} maps reads one by one (minimap2 maps two files of it as separate reads): give one FASTQ file, or use a paired preset such as sr",
            job.preset
        ))
        .into());
    }
    Ok(())
}

/// minimap2's command line for `@PG CL:` (its `-t` is `threads`, the reads as the job names them).
pub(crate) fn command_line(aligner: &Aligner, job: &Fq2BamJob, threads: usize) -> String {
    aligner.command_line(
        threads,
        &[Some(job.reads1.as_path()), job.reads2.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>(),
    )
}

/// The output's header: minimap2's SAM header `sam`, coordinate-sorted, sortase's `@PG` added.
pub(crate) fn sorted_header(sam: String, program: Option<&Program>) -> anyhow::Result<Header> {
    let mut header = Header::from_sam_text(sam)?;
    header.set_sort_order("coordinate", None);
    add_program(&mut header, program);
    Ok(header)
}

/// The aligner's options of `job` (`threads` build an index from a FASTA).
pub(crate) fn aligner_options(job: &Fq2BamJob, threads: usize) -> AlignerOptions {
    AlignerOptions {
        preset: job.preset.clone(),
        md: job.md,
        cs: job.cs,
        read_group: job.read_group.clone(),
        index_threads: threads,
    }
}

/// samblaster's layout of the index's references.
pub(crate) fn sig_layout(aligner: &Aligner, index: &Path) -> anyhow::Result<Layout> {
    let lengths: Vec<u64> = aligner
        .references()
        .iter()
        .map(|r| u64::from(r.length))
        .collect();
    Layout::new(&lengths, 500)
        .map_err(|e| Error::new(ErrorKind::Input, format!("{}: {e}", index.display())).into())
}

fn run(job: &Fq2BamJob, rt: &Runtime) -> anyhow::Result<Fq2BamReport> {
    let threads = rt.threads();
    if job.max_fan_in < 2 {
        return Err(Error::argument(format!(
            "--max-fan-in {}: must be at least 2",
            job.max_fan_in
        ))
        .into());
    }
    let mut report = Fq2BamReport {
        threads,
        ..Default::default()
    };
    let out = resolve_output(
        &job.output,
        sortase_exec::options::DEFAULT_LEVEL,
        true,
        &mut report.warnings,
    )?;
    // Reads mapped (a spinner with reads/s); the files' bytes are not counted.
    let progress = rt.progress("fq2bam reads", 0);
    let bytes_read = sortase_exec::progress::Progress::hidden();
    if sortase_io::is_url_path(&job.index) {
        return Err(Error::argument(format!(
            "{}: minimap2 loads its index from a local file: copy the object first (the reads may \
             be s3:// or https:// URLs)",
            sortase_io::redacted(&job.index.display().to_string())
        ))
        .into());
    }
    // The reads first: a missing file fails before the index is built.
    let reads = Reads::open(job, &bytes_read)?;

    let mut clock = PhaseClock::new("index");
    let aligner = Aligner::load(&job.index, &aligner_options(job, threads)).map_err(kinded)?;
    rt.check_cancelled()?;
    check_pairing(job, aligner.fragment_mode())?;
    report.index_memory = aligner.memory();
    let plan = MemoryPlan::new(rt, &aligner, out.format, job)?;
    let cancel = rt.cancel_flag().clone();
    let mut fixed_reserve = rt.memory().reservation("fq2bam: index, batches, output");
    if fixed_reserve
        .grow_waiting(plan.fixed, || cancel.is_cancelled())
        .is_err()
    {
        rt.check_cancelled()?;
    }

    let header = sorted_header(
        aligner.sam_header(&command_line(&aligner, job, threads)),
        job.program.as_ref(),
    )?;

    let temp = TempDir::create(&temp_prefix(
        job.temp_prefix.as_deref(),
        out.data.as_deref(),
        rt.temp_dir(),
    ))?;
    let mut sorter = Sorter::new(SortOptions {
        order: SortOrder::Coordinate,
        memory: plan.record_memory,
        temp_dir: temp.path().to_path_buf(),
        max_fan_in: job.max_fan_in,
        ranges: Default::default(),
    })
    .with_budget(Box::new(sortase_exec::sorting::PoolBudget::new(
        rt,
        "fq2bam: records",
        plan.record_memory,
    )))
    .with_pool(rt.shared_pool())
    .with_cancel(rt.cancel_flag().shared());

    clock.next("align");
    let layout = match job.markdup {
        DuplicateMarking::Samblaster => Some(sig_layout(&aligner, &job.index)?),
        _ => None,
    };
    let mut marker = Marker::default();
    let source = reads.source(aligner.fragment_mode());
    let stop = rt.cancel_flag().shared();
    // With --checksums: the reads' sums, each chunk's on the thread that maps it.
    let mut read = Sums::EMPTY;
    let stats = pipeline::run(
        &aligner,
        source,
        &plan.pipeline,
        &stop,
        |chunk, batch| {
            let sums = job.checksums.then(|| {
                let mut c = Checksummer::new(Proof::options());
                chunk.add_to_sums(&mut c);
                c.sums
            });
            (stream_marking::verdicts(batch, layout.as_ref()), sums)
        },
        |mut batch, (verdicts, sums)| -> anyhow::Result<()> {
            if let Some(s) = sums {
                read.merge(&s);
            }
            marker.mark(&mut batch, &verdicts)?;
            progress.add(batch.reads as u64);
            sorter.push(batch.records)?;
            Ok(())
        },
    )
    .map_err(classify)?;
    rt.check_cancelled()?;
    progress.finish();
    let proof = job.checksums.then(|| Proof {
        job,
        fragment_mode: aligner.fragment_mode(),
        read,
    });
    let index_memory = aligner.memory();
    drop(aligner);
    fixed_reserve.shrink(index_memory + plan.batches);

    let sorted = if job.markdup == DuplicateMarking::Picard {
        let m = picard::sort_mark_write(
            sorter,
            &header,
            &out,
            &job.output.cram(),
            temp.path(),
            plan.ends_budget,
            rt,
            &mut clock,
            proof.as_ref(),
        )?;
        marker.records = m.duplicate_records;
        report.checksums = m.checksums;
        m.stats
    } else {
        let (stats, checksums) = write_sorted(
            sorter,
            &header,
            &out,
            &job.output.cram(),
            rt,
            &mut clock,
            proof.as_ref(),
        )?;
        report.checksums = checksums;
        stats
    };
    drop(temp);
    drop(fixed_reserve);
    report.phases = clock.finish();
    report.reads = stats.reads;
    report.fragments = stats.fragments;
    report.bases = stats.bases;
    report.records = stats.records;
    report.chunks = stats.chunks;
    report.duplicate_templates = marker.templates;
    report.duplicate_records = marker.records;
    report.memory_budget = plan.memory;
    report.record_memory = plan.record_memory;
    report.runs_spilled = sorted.runs_spilled;
    report.outputs = out.files();
    Ok(report)
}
