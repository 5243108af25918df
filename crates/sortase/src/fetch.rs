//! [`LocJob`] builds the `.loc` record index (name, offset, size of every record) of a FASTA/FASTQ
//! file; [`FetchJob`] writes many whole records, found by name in the `.loc` or given as byte ranges,
//! in one pass that inflates each BGZF block it needs once (crates/fasta `access`).
//!
//! ```
//! use sortase::{FetchJob, FetchRequest, LocJob, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let fasta = dir.path().join("p.fa");
//! # std::fs::write(&fasta, ">a x\nMKV\n>b\nGG\nLL\n>c\nW\n").unwrap();
//! let rt = Runtime::with_threads(2)?;
//! assert_eq!(LocJob::new(&fasta).run(&rt)?.records, 3);
//! let mut job = FetchJob::new(&fasta, FetchRequest::Names(vec!["c".into(), "a".into()]));
//! job.output = Some(dir.path().join("out.fa"));
//! job.run(&rt)?;
//! assert_eq!(std::fs::read_to_string(dir.path().join("out.fa")).unwrap(), ">c\nW\n>a x\nMKV\n");
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::files::Destination;
use sortase_exec::runtime::Runtime;
use sortase_exec::stream::{
    fasta_error, finish, read_gzi, sniff_path, with_suffix, write_file, Cancellable,
};
use sortase_fasta::access::{RandomAccess, DEFAULT_WINDOW};
use sortase_fasta::loc::{self, LocBuilder};
use sortase_fasta::scan::{scan, Compression};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// Builds the `.loc` index of a FASTA/FASTQ file (and its `.gzi` if bgzipped and missing).
///
/// With the `clap` feature it is also `sortase loc`'s flags (`clap::Args`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LocJob {
    /// FASTA/FASTQ file, plain or bgzipped.
    pub input: PathBuf,
    /// Index file name [FILE.loc].
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_name = "FILE"))]
    pub output: Option<PathBuf>,
}

/// What a loc job did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LocReport {
    /// Records indexed.
    pub records: usize,
    /// Files written (`.gzi` if it was missing, then the `.loc`).
    pub outputs: Vec<PathBuf>,
    /// Warnings.
    pub warnings: Vec<String>,
}

impl LocJob {
    /// Indexes `input` into `FILE.loc`.
    pub fn new(input: impl Into<PathBuf>) -> Self {
        Self {
            input: input.into(),
            output: None,
        }
    }

    /// Runs the job on `rt`.
    pub fn run(&self, rt: &Runtime) -> sortase_exec::error::Result<LocReport> {
        let out = self
            .output
            .clone()
            .unwrap_or_else(|| with_suffix(&self.input, ".loc"));
        let mut report = LocReport::default();
        let result = build_loc(
            &self.input,
            &out,
            &with_suffix(&self.input, ".gzi"),
            rt,
            &mut report.outputs,
        );
        report.records = finish(rt, result)?;
        Ok(report)
    }
}

/// Which records a [`FetchJob`] writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FetchRequest {
    /// Names read from a file, one per line (`-n`; `None` or `-`: standard input).
    NamesFile(Option<PathBuf>),
    /// `OFFSET SIZE` pairs of uncompressed bytes read from a file, one per line (`-p`).
    PairsFile(PathBuf),
    /// These names.
    Names(Vec<String>),
    /// These (offset, size) pairs of uncompressed bytes.
    Pairs(Vec<(u64, u64)>),
}

/// Writes many whole records (by name through the `.loc`, or by byte range) in one pass.
///
/// With the `clap` feature it is also `sortase fetch`'s flags (`clap::Args`, flattened by the CLI):
/// a field's `arg(...)` is its flag and `--help` text; `request` (from `-n`/`-p`) is the CLI's to
/// fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FetchJob {
    /// FASTA/FASTQ file, plain or bgzipped (with its .gzi; built if missing).
    pub input: PathBuf,
    /// The records wanted.
    #[cfg_attr(feature = "clap", arg(skip = FetchRequest::NamesFile(None)))]
    pub request: FetchRequest,
    /// Write records in file order instead of request order.
    #[cfg_attr(feature = "clap", arg(long = "sorted"))]
    pub sorted: bool,
    /// Location index [FILE.loc; built if missing].
    #[cfg_attr(feature = "clap", arg(long = "loc", value_name = "FILE"))]
    pub loc: Option<PathBuf>,
    /// Write to FILE [stdout].
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_name = "FILE"))]
    pub output: Option<PathBuf>,
    /// Inflate every block read to its end and check its CRC32 (by default a block is inflated only
    /// up to the last byte wanted from it, about half the work; its CRC32 is then not checked).
    #[cfg_attr(feature = "clap", arg(long = "verify"))]
    pub verify: bool,
}

/// What a fetch job did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FetchReport {
    /// Records (ranges) written.
    pub records: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Index files built on the way (`.gzi`, `.loc`), then the output file.
    pub outputs: Vec<PathBuf>,
    /// Warnings.
    pub warnings: Vec<String>,
}

impl FetchJob {
    /// Writes the records of `request` from `input` to standard output, in request order.
    pub fn new(input: impl Into<PathBuf>, request: FetchRequest) -> Self {
        Self {
            input: input.into(),
            request,
            sorted: false,
            loc: None,
            output: None,
            verify: false,
        }
    }

    /// Runs the job on `rt`.
    pub fn run(&self, rt: &Runtime) -> sortase_exec::error::Result<FetchReport> {
        finish(rt, fetch(self, rt))
    }
}

/// Scans `input`, writes `loc_path` (and the `.gzi` of a bgzipped input if `gzi_path` is missing);
/// returns the number of records and adds the files written to `outputs`.
fn build_loc(
    input: &Path,
    loc_path: &Path,
    gzi_path: &Path,
    rt: &Runtime,
    outputs: &mut Vec<PathBuf>,
) -> Result<usize> {
    let what = input.display().to_string();
    let mut builder = LocBuilder::new();
    let summary = crate::faidx::scan_file(input, rt, "loc", "loc", &mut builder)?;
    let records = builder
        .finish(summary.total)
        .map_err(fasta_error)
        .with_context(|| format!("{what}: cannot build the loc index"))?;
    rt.check_cancelled()?;
    if summary.compression == Compression::Bgzf && !gzi_path.exists() {
        write_file(gzi_path, |w| summary.gzi.write(w))?;
        outputs.push(gzi_path.to_path_buf());
    }
    write_file(loc_path, |w| loc::write(w, &records))?;
    outputs.push(loc_path.to_path_buf());
    Ok(records.len())
}

/// Non-empty lines of `path` (`None` or `-`: standard input), CR-LF tolerated.
fn read_lines(path: Option<&Path>) -> Result<Vec<Vec<u8>>> {
    let (reader, what): (Box<dyn Read>, String) = match path {
        Some(p) if p != Path::new("-") => (
            Box::new(File::open(p).with_context(|| format!("{}: cannot open", p.display()))?),
            p.display().to_string(),
        ),
        _ => (Box::new(io::stdin()), "standard input".into()),
    };
    let mut out = Vec::new();
    for line in BufReader::with_capacity(1 << 20, reader).split(b'\n') {
        let mut line = line.with_context(|| format!("{what}: cannot read"))?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.is_empty() {
            out.push(line);
        }
    }
    Ok(out)
}

/// (offset, size) of each requested name, from the `.loc` (first record of a name wins, as in faidx).
fn resolve_names(names: &[Vec<u8>], loc_path: &Path, threads: usize) -> Result<Vec<(u64, u64)>> {
    let what = loc_path.display().to_string();
    let f = File::open(loc_path).with_context(|| format!("{what}: cannot open"))?;
    let keys: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let found = loc::lookup(f, &what, &keys, threads).map_err(fasta_error)?;
    let missing: Vec<String> = names
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
        .collect();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(5).map(String::as_str).collect();
        return Err(Error::argument(format!(
            "{} requested name(s) not in {what}: {}{}",
            missing.len(),
            shown.join(", "),
            if missing.len() > 5 { ", ..." } else { "" }
        ))
        .into());
    }
    Ok(found.into_iter().flatten().collect())
}

fn parse_pairs(lines: &[Vec<u8>], what: &str) -> Result<Vec<(u64, u64)>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let text = String::from_utf8_lossy(l);
            let mut f = text.split_ascii_whitespace().map(str::parse::<u64>);
            match (f.next(), f.next(), f.next()) {
                (Some(Ok(o)), Some(Ok(s)), None) => Ok((o, s)),
                _ => Err(Error::argument(format!(
                    "{what} line {}: expected OFFSET SIZE, found {text:?}",
                    i + 1
                ))
                .into()),
            }
        })
        .collect()
}

/// A line sink for a scan that only wants the block list.
struct IgnoreLines;

impl sortase_fasta::lines::LineSink for IgnoreLines {
    fn line(
        &mut self,
        _: &sortase_fasta::lines::Line,
        _: &[u8],
    ) -> Result<(), sortase_fasta::FastaError> {
        Ok(())
    }
}

/// The requested ranges, building the `.loc` first if names are asked and it is missing.
fn ranges(
    job: &FetchJob,
    rt: &Runtime,
    gzi_path: &Path,
    report: &mut FetchReport,
) -> Result<Vec<(u64, u64)>> {
    let names = match &job.request {
        FetchRequest::PairsFile(p) => {
            return parse_pairs(&read_lines(Some(p))?, &p.display().to_string())
        }
        FetchRequest::Pairs(pairs) => return Ok(pairs.clone()),
        FetchRequest::NamesFile(f) => read_lines(f.as_deref())?,
        FetchRequest::Names(names) => names.iter().map(|n| n.clone().into_bytes()).collect(),
    };
    let loc_path = job
        .loc
        .clone()
        .unwrap_or_else(|| with_suffix(&job.input, ".loc"));
    if !loc_path.exists() {
        build_loc(&job.input, &loc_path, gzi_path, rt, &mut report.outputs)?;
    }
    resolve_names(&names, &loc_path, rt.threads())
}

/// The `.gzi` of a BGZF input, built (and written next to it) when missing.
fn gzi_blocks(
    job: &FetchJob,
    rt: &Runtime,
    gzi_path: &Path,
    report: &mut FetchReport,
) -> Result<Vec<sortase_bgzf::gzi::GziEntry>> {
    if !gzi_path.exists() {
        let what = job.input.display().to_string();
        let file = File::open(&job.input)?;
        // Only the block list is needed (the file may not even be FASTA with -p).
        let summary = scan(Cancellable::new(file, rt), rt.threads(), &mut IgnoreLines)
            .map_err(fasta_error)
            .with_context(|| what.clone())?;
        rt.check_cancelled()?;
        write_file(gzi_path, |w| summary.gzi.write(w))?;
        report.outputs.push(gzi_path.to_path_buf());
    }
    read_gzi(gzi_path)
}

fn fetch(job: &FetchJob, rt: &Runtime) -> Result<FetchReport> {
    let threads = rt.threads();
    let mut report = FetchReport::default();
    let what = job.input.display().to_string();
    let gzi_path = with_suffix(&job.input, ".gzi");
    let compression = sniff_path(&job.input)?;
    if compression == Compression::Gzip {
        return Err(Error::new(
            ErrorKind::Format,
            format!("{what}: compressed with plain gzip, not BGZF; recompress with bgzip"),
        )
        .into());
    }
    let mut ranges = ranges(job, rt, &gzi_path, &mut report)?;
    if job.sorted {
        ranges.sort_unstable();
    }
    let gzi = match compression {
        Compression::Bgzf => Some(gzi_blocks(job, rt, &gzi_path, &mut report)?),
        _ => None,
    };
    let file = File::open(&job.input).with_context(|| format!("{what}: cannot open"))?;
    let access = RandomAccess::new(file, &what, compression, gzi.as_deref(), threads)
        .map_err(fasta_error)?
        .verify_whole_blocks(job.verify);
    // Every range is checked before the first byte is written: no partial output.
    let data_len = access
        .data_len()
        .map_err(fasta_error)
        .with_context(|| what.clone())?;
    if let Some(&(o, s)) = ranges
        .iter()
        .find(|&&(o, s)| o.checked_add(s).is_none_or(|e| e > data_len))
    {
        return Err(Error::argument(format!(
            "{what}: bytes {o}..{} requested but the uncompressed data ends at {data_len}",
            o.saturating_add(s)
        ))
        .into());
    }
    let (dest, out) = Destination::open(job.output.as_deref())?;
    let mut out = Cancellable::new(out, rt);
    access
        .fetch(&ranges, DEFAULT_WINDOW, |_, bytes| {
            report.bytes += bytes.len() as u64;
            Ok(out.write_all(bytes)?)
        })
        .map_err(fasta_error)
        .with_context(|| what.clone())?;
    out.flush()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    drop(out);
    rt.check_cancelled()?;
    dest.commit()?;
    report.records = ranges.len();
    report
        .outputs
        .extend(job.output.clone().filter(|o| o != Path::new("-")));
    Ok(report)
}
