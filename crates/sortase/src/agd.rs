//! AGD datasets (crates/agd) as jobs: [`AgdImportJob`] turns SAM/BAM/CRAM or FASTQ ([`fastq`], as
//! `samtools import` reads it) into a dataset,
//! [`AgdExportJob`] turns a dataset back into the same records. A dataset is also a record source
//! of the jobs that read one: [`crate::ViewJob`], [`crate::FlagstatJob`] and [`crate::IdxstatsJob`]
//! given a dataset directory ([`is_dataset`]) read it through the dataset source of crates/exec
//! ([`sortase_exec::agd`]: chunks as record batches, or flags and references counted on the
//! `results` columns alone; [`sortase_exec::agd::query`], its regions and filters, for view).
//!
//! Import reads records in file order on the calling thread (BGZF inflated on the reader's own
//! threads), cuts them into chunks and encodes and writes chunks on the runtime's pool, at most
//! `2 * threads + 1` chunks in flight. Every file goes into a private directory next to the output,
//! `manifest.json` last, and that directory is renamed to the output at the end: an interrupted import
//! leaves nothing, and an existing dataset is never touched (the output must not exist or be empty).
//! Export decodes windows of chunks on the pool while the previous window is written.
//!
//! ```
//! use sortase::{AgdExportJob, AgdImportJob, FlagstatJob, OutputSpec, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
//! let rt = Runtime::with_threads(2)?;
//! let ds = dir.path().join("ds");
//! let import = AgdImportJob::new(sam.to_str().unwrap(), &ds).run(&rt)?;
//! assert_eq!(import.records, 2);
//! let flagstat = FlagstatJob::new(&ds).run(&rt)?;
//! assert_eq!(flagstat.counts.mapped, [1, 0]);
//! let out = dir.path().join("out.sam");
//! AgdExportJob::new(&ds, OutputSpec::to_path(&out)).run(&rt)?;
//! assert!(std::fs::read_to_string(&out)?.ends_with("r2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use anyhow::Context;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt16Type;
use arrow_array::Array;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::{self as agd, ChunkBuilder, Group, Manifest};
use sortase_bam::checksum::{ChecksumOptions, Checksummer, Fault, Sums, Tally};
use sortase_bam::{Header, RecordBatch};
use sortase_exec::agd::{
    check_new_output, chunk_batch, complement, dataset_header, hidden_sibling, new_manifest,
    open_manifest, write_chunk, write_in_order, Written, CHUNK_BYTES,
};
use sortase_exec::error::{bail_argument, Error, Result};
use sortase_exec::input::Input;
use sortase_exec::options::{OutputSpec, DEFAULT_LEVEL};
use sortase_exec::proof::{self, Checksums, SumsCell};
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::SortedOutput;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(crate) mod columns;
/// FASTQ input (crates/exec `fastq.rs`), under its old path.
pub use sortase_exec::fastq;

/// The dataset source and sink (crates/exec `agd`): its defaults and the test of a dataset
/// directory under their old paths.
pub use sortase_exec::agd::{is_dataset, DEFAULT_CHUNK_SIZE, DEFAULT_ZSTD_LEVEL};

pub use columns::{AgdAddColumnJob, AgdColumnsReport, AgdDropColumnJob, ColumnType};
pub use fastq::FastqInput;
/// The markdup of a dataset (crates/markdup `agd.rs`), under its old path.
pub use sortase_markdup::agd::AgdMarkdupJob;

/// `sortase agd import`: SAM, BAM or CRAM, or FASTQ (as `samtools import` reads it), into a new
/// dataset directory.
///
/// With the `clap` feature it is also the command's flags (`clap::Args`, flattened by `sortase agd
/// import`, which adds `-@` and `-v`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AgdImportJob {
    /// Input SAM/BAM/CRAM file [stdin], or one FASTQ file (as -s), or two FASTQ files (as -1 -2).
    #[cfg_attr(feature = "clap", arg(num_args = 0..=2))]
    pub inputs: Vec<String>,
    /// The dataset directory to create (must not exist, or be empty).
    #[cfg_attr(feature = "clap", arg(short = 'o', value_name = "DIR"))]
    pub output: PathBuf,
    /// Most records per chunk.
    #[cfg_attr(
        feature = "clap",
        arg(long = "chunk-size", value_name = "INT", default_value_t = DEFAULT_CHUNK_SIZE)
    )]
    pub chunk_size: u64,
    /// zstd level of the column files (1-22).
    #[cfg_attr(
        feature = "clap",
        arg(long = "level", value_name = "INT", default_value_t = DEFAULT_ZSTD_LEVEL)
    )]
    pub zstd_level: i32,
    /// Reference FASTA (CRAM input).
    #[cfg_attr(feature = "clap", arg(long = "reference", value_name = "FILE"))]
    pub reference: Option<PathBuf>,
    /// The command line recorded as the provenance of every group.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub command_line: String,
    /// FASTQ files named by samtools import's options (then `inputs` is empty); without them, one
    /// input that looks like FASTQ ([`fastq::looks_like_fastq`]) is read as `samtools import -s
    /// FILE`, two as `-1 R1 -2 R2`.
    #[serde(default)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub fastq: FastqInput,
    /// Prove that no record was lost or changed: sum the records read and the records each chunk's
    /// encoded columns decode to (samtools checksum -F 0 -P -C -M) and fail, leaving no dataset, if
    /// they differ; -v prints them.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "checksums"))]
    pub checksums: bool,
}

/// What an import reads, resolved from its inputs ([`AgdImportJob::source`]).
enum ImportSource {
    /// SAM, BAM or CRAM (`-`: standard input).
    Records(String),
    /// FASTQ files.
    Fastq(FastqInput),
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AgdImportReport {
    /// Records imported.
    pub records: u64,
    /// Chunks written.
    pub chunks: usize,
    /// Records kept whole in `raw_record` (the typed columns could not rebuild them exactly).
    pub raw_records: u64,
    /// Bytes of the dataset's files.
    pub bytes: u64,
    /// Bytes of each group's files, in [`Group::ALL`] order.
    pub group_bytes: Vec<(String, u64)>,
    /// With [`AgdImportJob::checksums`]: the sums of the records read and encoded.
    pub checksums: Option<Checksums>,
}

impl AgdImportJob {
    /// Imports `input` into the new dataset `output` with default chunking and encoding.
    pub fn new(input: impl Into<String>, output: impl Into<PathBuf>) -> Self {
        Self {
            inputs: vec![input.into()],
            output: output.into(),
            chunk_size: DEFAULT_CHUNK_SIZE,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            reference: None,
            command_line: String::new(),
            fastq: FastqInput::default(),
            checksums: false,
        }
    }

    /// Imports FASTQ files `fastq` (samtools import's `-0 -1 -2 -s`) into the new dataset `output`.
    pub fn from_fastq(fastq: FastqInput, output: impl Into<PathBuf>) -> Self {
        Self {
            inputs: Vec::new(),
            fastq,
            ..Self::new("", output)
        }
    }

    /// What the import reads: its `inputs` (none for stdin, one SAM/BAM/CRAM or FASTQ file, or R1
    /// and R2 FASTQ files) or the FASTQ files `fastq` names with `-0 -1 -2 -s`, not both; `fastq`'s
    /// read group (`-R`/`-r`) applies to FASTQ input only. The one reading of an import's inputs,
    /// for every face (CLI, Python).
    fn source(&self) -> Result<ImportSource> {
        let inputs = self.inputs.as_slice();
        let mut fastq = self.fastq.clone();
        match (!fastq.paths().is_empty(), inputs) {
            (true, []) => {}
            (true, _) => {
                bail_argument!("give FASTQ files either with -0/-1/-2/-s or as arguments, not both")
            }
            (false, [r1, _]) if !fastq::looks_like_fastq(r1) => bail_argument!(
                "{r1}: not FASTQ; two inputs are R1 and R2 FASTQ files (one SAM/BAM/CRAM at a time)"
            ),
            (false, [r1, r2]) => {
                fastq.read1 = Some(r1.clone());
                fastq.read2 = Some(r2.clone());
            }
            (false, [one]) if fastq::looks_like_fastq(one) => fastq.interleaved = Some(one.clone()),
            (false, [_, _, ..]) => bail_argument!(
                "give one input (SAM/BAM/CRAM/FASTQ) or two FASTQ inputs (R1 and R2)"
            ),
            (false, _) if fastq.read_group.is_some() || !fastq.read_group_line.is_empty() => {
                bail_argument!("-R and -r apply to FASTQ input only")
            }
            (false, _) => {
                let input = inputs.first().cloned().unwrap_or_else(|| "-".into());
                return Ok(ImportSource::Records(input));
            }
        }
        Ok(ImportSource::Fastq(fastq))
    }

    /// The inputs as the error messages name them: the arguments, then the FASTQ options' files
    /// (`-`: standard input).
    fn named(&self) -> String {
        let all: Vec<&str> = (self.inputs.iter().map(String::as_str))
            .chain(self.fastq.paths())
            .collect();
        match all.is_empty() {
            true => "-".into(),
            false => all.join(" "),
        }
    }

    /// Runs the import on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<AgdImportReport> {
        import(self, rt)
            .with_context(|| format!("agd import {}", self.named()))
            .map_err(Error::from)
    }
}

fn import(job: &AgdImportJob, rt: &Runtime) -> anyhow::Result<AgdImportReport> {
    if job.chunk_size == 0 {
        return Err(Error::argument("--chunk-size 0: must be at least 1").into());
    }
    sortase_exec::agd::check_zstd_level(job.zstd_level, "--level")?;
    check_new_output(&job.output)?;
    let source = job.source()?;
    let size = match &source {
        ImportSource::Fastq(f) => fastq::FastqRecords::size(f),
        ImportSource::Records(path) => std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
    };
    let progress = rt.progress("agd import", size);
    let mut input = match &source {
        ImportSource::Fastq(f) => Source::Fastq(
            fastq::FastqRecords::open(f, &progress)?,
            Header::new(f.header_text()?, Vec::new()),
        ),
        ImportSource::Records(path) => {
            let threads = rt.threads();
            let mut input = Input::open(path, threads, job.reference.as_deref(), &progress)?;
            input.set_cancel(rt.cancel_flag().clone());
            Source::Alignments(input)
        }
    };
    let temp = hidden_sibling(&job.output)?;
    let dir = temp.path().to_path_buf();
    for g in Group::ALL {
        std::fs::create_dir(dir.join(g.name()))
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }

    // With --checksums: every record and field (an import changes nothing), the records read
    // summed as read and those encoded as their chunk's columns decode; the test fault between.
    let opts = ChecksumOptions::every_record();
    let sum_opts = job.checksums.then_some(&opts);
    let mut read_sums = Sums::EMPTY;
    let written = encode_chunks(job, rt, &mut input, &dir, sum_opts, &mut read_sums)?;
    progress.finish();
    rt.check_cancelled()?;

    let manifest = write_import_manifest(job, &input.header(), &written, &dir)?;
    let checksums = if job.checksums {
        let mut encoded = Sums::EMPTY;
        written
            .iter()
            .filter_map(|w| w.sums.as_ref())
            .for_each(|s| encoded.merge(s));
        let mut c = Checksums::check("checksums", &opts, &read_sums, &encoded)?;
        if let ImportSource::Fastq(f) = &source {
            c.command = format!("{} | {}", import_command(f), c.command);
        }
        Some(c)
    } else {
        None
    };
    std::fs::rename(&dir, &job.output).with_context(|| {
        format!(
            "{}: cannot rename from {}",
            job.output.display(),
            dir.display()
        )
    })?;
    drop(temp);
    Ok(import_report(&manifest, &written, checksums))
}

/// Reads the records of `input` into chunks of at most `chunk_size` records, encoded and written
/// into `dir` on `rt`'s pool while the calling thread reads (with `sum_opts`, the records read are
/// summed into `read_sums`); the chunks written, in order.
fn encode_chunks(
    job: &AgdImportJob,
    rt: &Runtime,
    input: &mut Source,
    dir: &Path,
    sum_opts: Option<&ChecksumOptions>,
    read_sums: &mut Sums,
) -> anyhow::Result<Vec<Written>> {
    let options = agd::WriteOptions {
        zstd_level: job.zstd_level,
        ..agd::WriteOptions::default()
    };
    let fault = if job.checksums {
        Fault::from_env()
    } else {
        Fault::default()
    };
    let mut scratch = Vec::new();
    let written = Mutex::new(Vec::new());
    let (tx, rx) = crossbeam_channel::bounded::<(usize, ChunkBuilder)>(rt.threads());
    let read_result = std::thread::scope(|s| {
        let encoder = s.spawn(|| {
            rt.install(|| {
                rx.into_iter().par_bridge().try_for_each(|(index, chunk)| {
                    let w = write_chunk(dir, index, chunk, &options, sum_opts)?;
                    written.lock().unwrap_or_else(|p| p.into_inner()).push(w);
                    anyhow::Ok(())
                })
            })
        });
        let mut chunk = ChunkBuilder::default();
        let mut index = 0;
        let sums = sum_opts.map(|o| (o, read_sums));
        let read = input.for_each_record(rt.cancel_flag(), sums, |bytes| {
            let bytes = fault.apply_record(bytes, &mut scratch);
            if chunk.len() as u64 == job.chunk_size || chunk.bytes() + bytes.len() > CHUNK_BYTES {
                let full = std::mem::take(&mut chunk);
                if tx.send((index, full)).is_err() {
                    anyhow::bail!("encoding stopped");
                }
                index += 1;
            }
            chunk.push(bytes)?;
            Ok(())
        });
        let read = read.and_then(|()| {
            if !chunk.is_empty() && tx.send((index, chunk)).is_err() {
                anyhow::bail!("encoding stopped");
            }
            Ok(())
        });
        drop(tx);
        // An encoding error explains a read that stopped because encoding stopped.
        let encoded = encoder
            .join()
            .map_err(|_| anyhow::anyhow!("chunk encoder panicked"))?;
        encoded.and(read)
    });
    read_result?;
    let mut written = written.into_inner().unwrap_or_else(|p| p.into_inner());
    written.sort_by_key(|w| w.index);
    Ok(written)
}

/// Writes the imported dataset's manifest into `dir`: `header`, its references and the chunks
/// `written`.
fn write_import_manifest(
    job: &AgdImportJob,
    header: &Header,
    written: &[Written],
    dir: &Path,
) -> anyhow::Result<Manifest> {
    let mut manifest = new_manifest(header, job.chunk_size, &job.command_line);
    let counts: Vec<u64> = written.iter().map(|w| w.records).collect();
    manifest.set_chunks(&counts);
    manifest.set_positions(written.iter().map(|w| w.positions.clone()).collect());
    let manifest_path = dir.join(agd::MANIFEST_FILE);
    std::fs::write(&manifest_path, manifest.to_json())
        .with_context(|| format!("{}: cannot write", manifest_path.display()))?;
    Ok(manifest)
}

/// What an import wrote: records, chunks and each group's bytes.
fn import_report(
    manifest: &Manifest,
    written: &[Written],
    checksums: Option<Checksums>,
) -> AgdImportReport {
    let mut report = AgdImportReport {
        records: manifest.records,
        chunks: written.len(),
        raw_records: written.iter().map(|w| w.raw).sum(),
        checksums,
        ..Default::default()
    };
    for g in Group::ALL {
        let b: u64 = written.iter().map(|w| w.bytes[g as usize]).sum();
        report.group_bytes.push((g.name().into(), b));
        report.bytes += b;
    }
    report
}

/// The `samtools import` command line that makes the records a FASTQ import reads.
fn import_command(f: &FastqInput) -> String {
    let mut s = String::from("samtools import");
    for (flag, value) in [
        ("-0", &f.unpaired),
        ("-1", &f.read1),
        ("-2", &f.read2),
        ("-s", &f.interleaved),
        ("-R", &f.read_group),
    ] {
        if let Some(v) = value {
            s += &format!(" {flag} {v}");
        }
    }
    for field in f
        .read_group_line
        .iter()
        .flat_map(|l| l.split('\t'))
        .filter(|f| *f != "@RG")
    {
        s += &format!(" -r {field}");
    }
    s
}

/// Where an import's records come from.
enum Source {
    /// SAM, BAM or CRAM.
    Alignments(Input),
    /// FASTQ files and the header samtools import gives them.
    Fastq(fastq::FastqRecords, Header),
}

impl Source {
    /// Calls `f` on every record's BAM bytes (without `block_size`), in input order; with `sums`,
    /// adds the records to them first, on the calling thread (the pool's threads are the chunk
    /// encoders', which may all be waiting for this thread's next chunk).
    fn for_each_record(
        &mut self,
        cancel: &sortase_exec::runtime::CancelFlag,
        sums: Option<(&ChecksumOptions, &mut Sums)>,
        mut f: impl FnMut(&[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match (self, sums) {
            (Source::Alignments(input), sums) => {
                let mut sums = sums;
                input.for_each_batch(|batch| {
                    if let Some((opts, read)) = sums.as_mut() {
                        read.merge(&proof::batch_sums_here(opts, &batch));
                    }
                    for r in batch.iter() {
                        f(r.as_bytes())?;
                    }
                    Ok(())
                })
            }
            (Source::Fastq(records, _), None) => records.for_each_record(cancel, f),
            (Source::Fastq(records, _), Some((opts, read))) => {
                let mut c = Checksummer::new(opts.clone());
                let done = records.for_each_record(cancel, |bytes| {
                    if let Some(crcs) = c.crcs(bytes) {
                        c.sums.add(&crcs);
                    }
                    f(bytes)
                });
                read.merge(&c.sums);
                done
            }
        }
    }

    fn header(self) -> Header {
        match self {
            Source::Alignments(input) => input.header,
            Source::Fastq(_, header) => header,
        }
    }
}

/// `sortase agd export`: a dataset back into SAM, BAM or CRAM, record for record as imported, or
/// into FASTQ as samtools fastq prints the BAM it came from.
///
/// With the `clap` feature it is also the command's flags (`clap::Args`, flattened by `sortase agd
/// export`, which adds `-@` and `-v`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AgdExportJob {
    /// The dataset directory.
    pub input: PathBuf,
    /// The output: format from `-O` (`sam`, `bam`, `cram`, `fastq`) or the extension, default BAM;
    /// `--write-index` as samtools view's (BAM and CRAM).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub output: OutputSpec,
    /// Prove that no record was lost or changed: sum the records decoded from the chunks and the
    /// records written (samtools checksum -F 0 -P -C -M) and fail, removing the output, if they
    /// differ; -v prints them (SAM, BAM and CRAM output).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "checksums"))]
    pub checksums: bool,
}

/// What an export did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AgdExportReport {
    /// Records written.
    pub records: u64,
    /// Chunks read.
    pub chunks: usize,
    /// Files written (the output, then its index).
    pub outputs: Vec<PathBuf>,
    /// With [`AgdExportJob::checksums`]: the sums of the records decoded and written.
    pub checksums: Option<Checksums>,
}

impl AgdExportJob {
    /// Exports dataset `input` to `output`.
    pub fn new(input: impl Into<PathBuf>, output: OutputSpec) -> Self {
        Self {
            input: input.into(),
            output,
            checksums: false,
        }
    }

    /// Runs the export on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<AgdExportReport> {
        export(self, rt)
            .with_context(|| format!("agd export {}", self.input.display()))
            .map_err(Error::from)
    }
}

/// Whether the export is FASTQ: `-O fastq`, or a `.fastq`/`.fq` output without `-O`.
fn is_fastq(output: &OutputSpec) -> bool {
    match output.format.as_deref() {
        Some(f) => f.eq_ignore_ascii_case("fastq"),
        None => output
            .path
            .as_deref()
            .and_then(|p| p.extension())
            .is_some_and(|e| e == "fastq" || e == "fq"),
    }
}

/// A chunk's FASTQ records: their text back to back, and per record the end of its text, its name
/// and its part (0: other, 1: READ1 only, 2: READ2 only; samtools `which_readpart`).
struct FastqChunk {
    text: Vec<u8>,
    records: Vec<(usize, std::ops::Range<usize>, usize)>,
}

/// One chunk's records as samtools fastq prints each with its defaults: secondary and supplementary
/// records skipped (`-F 0x900`), `/1` or `/2` appended to a READ1 or READ2, reverse-strand reads
/// reverse-complemented, absent qualities printed as `B` (what samtools 1.24 prints; checked on the
/// htslib corpus).
fn chunk_fastq(dir: &Path, chunk: &agd::ChunkEntry) -> anyhow::Result<FastqChunk> {
    use sortase_bam::flags::{READ1, READ2, REVERSE, SECONDARY, SUPPLEMENTARY};
    let names = agd::read_group(dir, Group::Names, chunk, None)?;
    let bases = agd::read_group(dir, Group::Bases, chunk, None)?;
    let qual = agd::read_group(dir, Group::Qual, chunk, None)?;
    let results = agd::read_group(dir, Group::Results, chunk, Some(&["flag"]))?;
    let qname = names.batch.column(0).as_string::<i32>();
    let seq = bases.batch.column(0).as_string::<i32>();
    let quality = qual.batch.column(0).as_string::<i32>();
    let flag = results.batch.column(0).as_primitive::<UInt16Type>();
    let mut text = Vec::with_capacity(bases.batch.get_array_memory_size() * 2);
    let mut records = Vec::with_capacity(flag.len());
    for i in 0..flag.len() {
        let f = flag.value(i);
        if f & (SECONDARY | SUPPLEMENTARY) != 0 {
            continue;
        }
        text.push(b'@');
        let name_start = text.len();
        text.extend_from_slice(qname.value(i).as_bytes());
        let name = name_start..text.len();
        let part = match (f & READ1 != 0, f & READ2 != 0) {
            (true, false) => 1,
            (false, true) => 2,
            _ => 0,
        };
        if part != 0 {
            text.extend_from_slice(if part == 1 { b"/1" } else { b"/2" });
        }
        text.push(b'\n');
        let s = if seq.is_valid(i) {
            seq.value(i).as_bytes()
        } else {
            b""
        };
        let reverse = f & REVERSE != 0;
        if reverse {
            text.extend(s.iter().rev().map(|&b| complement(b)));
        } else {
            text.extend_from_slice(s);
        }
        text.extend_from_slice(b"\n+\n");
        if quality.is_valid(i) {
            let q = quality.value(i).as_bytes();
            if reverse {
                text.extend(q.iter().rev());
            } else {
                text.extend_from_slice(q);
            }
        } else {
            text.resize(text.len() + s.len(), b'B');
        }
        text.push(b'\n');
        records.push((text.len(), name, part));
    }
    Ok(FastqChunk { text, records })
}

/// samtools fastq's templates (`bam2fq_mainloop`): consecutive records with the same name form a
/// template, which keeps the first record of each part and prints READ1, READ2, then the other one.
/// Checked on the htslib corpus (`xx#triplet.sam`, `xx#repeated.sam`, `xx#unsorted.sam`,
/// `mpileup/mp_I.sam`). Templates
/// may span chunks, so this runs on the writing thread, in record order.
#[derive(Default)]
struct Templates {
    name: Vec<u8>,
    parts: [Vec<u8>; 3],
    present: [bool; 3],
}

impl Templates {
    fn push(
        &mut self,
        name: &[u8],
        part: usize,
        text: &[u8],
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        if name != self.name.as_slice() {
            self.flush(out)?;
            self.name.clear();
            self.name.extend_from_slice(name);
        }
        if !self.present[part] {
            self.parts[part].clear();
            self.parts[part].extend_from_slice(text);
            self.present[part] = true;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        for part in [1, 2, 0] {
            if std::mem::take(&mut self.present[part]) {
                out.write_all(&self.parts[part])?;
            }
        }
        Ok(())
    }
}

/// The FASTQ export: chunks formatted on the pool, one window of `threads` chunks at a time, then
/// grouped into templates in order.
fn export_fastq(
    job: &AgdExportJob,
    manifest: &Manifest,
    rt: &Runtime,
) -> anyhow::Result<AgdExportReport> {
    let (dest, mut out) = sortase_exec::files::Destination::open(job.output.path.as_deref())?;
    let mut templates = Templates::default();
    let progress = rt.progress("agd export records", manifest.records);
    for window in manifest.chunks.chunks(rt.threads().max(1)) {
        rt.check_cancelled()?;
        let chunks = rt.install(|| {
            window
                .par_iter()
                .map(|c| chunk_fastq(&job.input, c))
                .collect::<anyhow::Result<Vec<_>>>()
        })?;
        for (c, entry) in chunks.into_iter().zip(window) {
            progress.add(entry.records);
            let mut start = 0;
            for (end, name, part) in c.records {
                templates
                    .push(&c.text[name], part, &c.text[start..end], &mut out)
                    .with_context(|| dest.name.clone())?;
                start = end;
            }
        }
    }
    templates
        .flush(&mut out)
        .with_context(|| dest.name.clone())?;
    out.flush().with_context(|| dest.name.clone())?;
    drop(out);
    dest.commit()?;
    Ok(AgdExportReport {
        records: manifest.records,
        chunks: manifest.chunks.len(),
        outputs: job.output.data_path()?.into_iter().collect(),
        checksums: None,
    })
}

fn export(job: &AgdExportJob, rt: &Runtime) -> anyhow::Result<AgdExportReport> {
    let manifest = open_manifest(&job.input)?;
    if is_fastq(&job.output) {
        if job.checksums {
            return Err(Error::argument(
                "--checksums: FASTQ output is not summed (samtools fastq drops secondary and \
                 supplementary records); export SAM, BAM or CRAM",
            )
            .into());
        }
        if job.output.write_index {
            return Err(Error::argument(
                "--write-index: sortase writes indexes for BAM and CRAM output only",
            )
            .into());
        }
        return export_fastq(job, &manifest, rt);
    }
    let header = dataset_header(&manifest);
    let threads = rt.threads();
    let format = job.output.format_or_bam(DEFAULT_LEVEL)?;
    let (out, outputs) = SortedOutput::for_spec(&job.output, format, &header, threads)?;
    let progress = rt.progress("agd export records", manifest.records);
    // With --checksums: every record and field, summed as decoded from each chunk and as handed
    // to the writer (the test fault between), on the threads that decode.
    let opts = ChecksumOptions::every_record();
    let fault = if job.checksums {
        Fault::from_env()
    } else {
        Fault::default()
    };
    let (read, wrote) = (SumsCell::default(), SumsCell::default());
    let mut checksums = None;
    let records = write_in_order(
        rt,
        &manifest.chunks,
        out,
        |c| {
            let batch = chunk_batch(&job.input, &manifest, c)?;
            progress.add(batch.len() as u64);
            if !job.checksums {
                return Ok(batch);
            }
            read.merge(&proof::batch_sums_here(&opts, &batch));
            let mut tally = Tally::new(&opts, &fault);
            let batch = pass_batch(batch, &mut tally, fault.is_set());
            wrote.merge(&tally.sums());
            Ok(batch)
        },
        || {
            if job.checksums {
                checksums = Some(Checksums::check(
                    "checksums",
                    &opts,
                    &read.get(),
                    &wrote.get(),
                )?);
            }
            Ok(())
        },
    )?;
    progress.finish();
    Ok(AgdExportReport {
        records,
        chunks: manifest.chunks.len(),
        outputs,
        checksums,
    })
}

/// `batch`'s records passed through `tally` (summed as written); when the test fault is set
/// (`faulty`), the batch rebuilt from what the tally gives (a named record changed).
fn pass_batch(batch: RecordBatch, tally: &mut Tally, faulty: bool) -> RecordBatch {
    if !faulty {
        batch.iter_raw().for_each(|raw| {
            tally.pass(raw);
        });
        return batch;
    }
    let (mut buf, mut offsets) = (Vec::with_capacity(batch.bytes().len()), Vec::new());
    for raw in batch.iter_raw() {
        offsets.push(buf.len() as u32);
        buf.extend_from_slice(tally.pass(raw));
    }
    let end = buf.len();
    RecordBatch::from_parts(buf, offsets, end, 0)
}
