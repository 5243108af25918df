//! [`FaidxJob`]: samtools faidx. The `.fai` (and `.gzi` of a bgzipped file) is identical to samtools',
//! built over a parallel block scan; regions are written with samtools faidx's output (crates/fasta
//! `faidx`), to a file (bgzipped at level 4 for `.gz`/`.bgz`/`.bgzf` names, as samtools) or standard
//! output.
//!
//! samtools prints its warnings as it meets them, and some come just before an error (an unknown
//! region without `-c`). [`FaidxJob::run_with_warnings`] hands each to the caller at once, so the CLI
//! prints them even when the job then fails; [`FaidxJob::run`] collects them in the report.
//!
//! ```
//! use sortase::{FaidxJob, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let fasta = dir.path().join("ref.fa");
//! # std::fs::write(&fasta, ">chr1 first\nACGTACGTAC\nGGTT\n>chr2\nTTTT\n").unwrap();
//! let rt = Runtime::with_threads(2)?;
//! // samtools faidx ref.fa: builds ref.fa.fai.
//! let report = FaidxJob::new(&fasta).run(&rt)?;
//! assert_eq!(report.sequences, 2);
//! // samtools faidx -i -o out.fa ref.fa chr1:9-12
//! let mut job = FaidxJob::new(&fasta);
//! job.regions = vec!["chr1:9-12".into()];
//! job.reverse_complement = true;
//! job.output = Some(dir.path().join("out.fa"));
//! job.run(&rt)?;
//! assert_eq!(std::fs::read_to_string(dir.path().join("out.fa")).unwrap(), ">chr1:9-12/rc\nCCGT\n");
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::files::Destination;
use sortase_exec::runtime::Runtime;
use sortase_exec::stream::{
    fasta_error, finish, read_gzi, sniff_path, with_suffix, write_file, Cancellable,
};
use sortase_fasta::access::RandomAccess;
use sortase_fasta::fai::{Fai, FaiBuilder, Format};
use sortase_fasta::faidx::{write_regions, FaidxOptions};
use sortase_fasta::lines::LineSink;
use sortase_fasta::scan::{scan, Compression, ScanSummary};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// samtools faidx as a job: index a FASTA/FASTQ file, and write regions of it if any are asked.
///
/// With the `clap` feature it is also samtools faidx's flags (`clap::Args`, flattened by `sortase
/// faidx`): a field's `arg(...)` is its flag and `--help` text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FaidxJob {
    /// FASTA/FASTQ file, plain or bgzipped.
    pub input: PathBuf,
    /// Regions: NAME, NAME:BEG-END, {NAME}:BEG-END.
    pub regions: Vec<String>,
    /// File of regions, one per line.
    #[cfg_attr(feature = "clap", arg(short = 'r', long = "region-file", value_name = "FILE"))]
    pub region_file: Option<PathBuf>,
    /// Write regions to FILE (.gz/.bgz/.bgzf: bgzipped); with no regions, the .fai name.
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_name = "FILE"))]
    pub output: Option<PathBuf>,
    /// Bases per output line [the input's line length]; 0: no wrapping.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'n', long = "length", value_name = "INT", allow_negative_numbers = true)
    )]
    pub line_length: Option<i64>,
    /// Continue after a region whose sequence is not in the index.
    #[cfg_attr(feature = "clap", arg(short = 'c', long = "continue"))]
    pub keep_going: bool,
    /// File and index in FASTQ format.
    #[cfg_attr(feature = "clap", arg(short = 'f', long = "fastq"))]
    pub fastq: bool,
    /// Reverse complement sequences.
    #[cfg_attr(feature = "clap", arg(short = 'i', long = "reverse-complement"))]
    pub reverse_complement: bool,
    /// Strand mark: rc (/rc on the reverse strand), no, sign ((+)/(-)), custom,POS,NEG.
    #[cfg_attr(
        feature = "clap",
        arg(long = "mark-strand", value_name = "TYPE", default_value = "rc")
    )]
    pub mark_strand: String,
    /// Name of the .fai index [FILE.fai].
    #[cfg_attr(feature = "clap", arg(long = "fai-idx", value_name = "FILE"))]
    pub fai_index: Option<PathBuf>,
    /// Name of the .gzi index [FILE.gzi].
    #[cfg_attr(feature = "clap", arg(long = "gzi-idx", value_name = "FILE"))]
    pub gzi_index: Option<PathBuf>,
}

/// What a faidx job did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FaidxReport {
    /// Whether the index was (re)built (no regions asked, or an index file was missing).
    pub indexed: bool,
    /// Sequences in the index.
    pub sequences: usize,
    /// Regions written.
    pub regions: usize,
    /// Files written (`.gzi`, `.fai`, then the regions' file).
    pub outputs: Vec<PathBuf>,
    /// Warnings, in samtools' words (collected by [`FaidxJob::run`]).
    pub warnings: Vec<String>,
}

impl FaidxJob {
    /// Indexes `input` (no regions) with every option at samtools' default.
    pub fn new(input: impl Into<PathBuf>) -> Self {
        Self {
            input: input.into(),
            regions: Vec::new(),
            region_file: None,
            output: None,
            line_length: None,
            keep_going: false,
            fastq: false,
            reverse_complement: false,
            mark_strand: "rc".into(),
            fai_index: None,
            gzi_index: None,
        }
    }

    /// Runs the job on `rt`; warnings end up in the report.
    pub fn run(&self, rt: &Runtime) -> sortase_exec::error::Result<FaidxReport> {
        let mut warnings = Vec::new();
        let mut report = self.run_with_warnings(rt, &mut |w| warnings.push(w))?;
        report.warnings = warnings;
        Ok(report)
    }

    /// Runs the job on `rt`, handing each warning to `warn` as it arises (the report's `warnings`
    /// stay empty).
    pub fn run_with_warnings(
        &self,
        rt: &Runtime,
        warn: &mut dyn FnMut(String),
    ) -> sortase_exec::error::Result<FaidxReport> {
        finish(rt, run(self, rt, warn))
    }
}

/// samtools faidx's `--mark-strand` marks: (forward, reverse).
fn strand_marks(spec: &str) -> Result<(String, String)> {
    Ok(match spec {
        "no" => (String::new(), String::new()),
        "sign" => ("(+)".into(), "(-)".into()),
        "rc" => (String::new(), "/rc".into()),
        _ => match spec.strip_prefix("custom,") {
            Some(rest) => match rest.split_once(',') {
                Some((p, n)) => (p.into(), n.into()),
                None => (rest.into(), String::new()),
            },
            None => {
                return Err(Error::argument(format!(
                    "unknown --mark-strand option \"{spec}\" (rc, no, sign or custom,POS,NEG)"
                ))
                .into())
            }
        },
    })
}

/// Scans the FASTA/FASTQ file `input` on all cores into `sink` (a builder of the `index`
/// index), `label` on the progress bar.
pub(crate) fn scan_file(
    input: &Path,
    rt: &Runtime,
    label: &str,
    index: &str,
    sink: &mut impl LineSink,
) -> Result<ScanSummary> {
    let what = input.display();
    let file = File::open(input).with_context(|| format!("{what}: cannot open"))?;
    let progress = rt.progress(label, file.metadata().map(|m| m.len()).unwrap_or(0));
    let summary = scan(
        Cancellable::new(progress.wrap(file), rt),
        rt.threads(),
        sink,
    )
    .map_err(fasta_error)
    .with_context(|| format!("{what}: cannot build the {index} index"))?;
    progress.finish();
    Ok(summary)
}

/// Scans `input` once and builds its `.fai` (the summary holds the `.gzi` when it is bgzipped);
/// duplicate names become warnings.
fn build_fai(input: &Path, rt: &Runtime) -> Result<(Fai, ScanSummary, Vec<String>)> {
    let what = input.display().to_string();
    let mut builder = FaiBuilder::new();
    let summary = scan_file(input, rt, "faidx", "fai", &mut builder)?;
    let warnings = std::mem::take(&mut builder.warnings);
    let fai = builder
        .finish()
        .map_err(fasta_error)
        .with_context(|| format!("{what}: cannot build the fai index"))?;
    Ok((fai, summary, warnings))
}

/// Frees a large index off the caller's thread: freeing a million names one by one was 3.5 % of
/// the samples of `faidx` on the bench FASTA (malloc_consolidate), time a finished job need not
/// spend (a process that exits next never waits for it).
fn drop_in_background(fai: Fai) {
    if fai.records.len() < 10_000 {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("sortase-free".into())
        .spawn(move || drop(fai));
}

fn run(job: &FaidxJob, rt: &Runtime, warn: &mut dyn FnMut(String)) -> Result<FaidxReport> {
    let mut report = FaidxReport::default();
    let build_only = job.regions.is_empty() && job.region_file.is_none();
    let fai_path = job
        .fai_index
        .clone()
        .or_else(|| build_only.then(|| job.output.clone()).flatten())
        .unwrap_or_else(|| with_suffix(&job.input, ".fai"));
    let gzi_path = job
        .gzi_index
        .clone()
        .unwrap_or_else(|| with_suffix(&job.input, ".gzi"));
    let what = job.input.display().to_string();
    let compression = sniff_path(&job.input)?;
    if compression == Compression::Gzip {
        return Err(Error::new(ErrorKind::Format, format!("{what}: compressed with plain gzip, not BGZF; cannot index files compressed with gzip, please use bgzip")).into());
    }
    let needs_build = build_only
        || !fai_path.exists()
        || (compression == Compression::Bgzf && !gzi_path.exists());
    if needs_build {
        let fai = build_index(job, rt, &fai_path, &gzi_path, &mut report, warn)?;
        if build_only {
            drop_in_background(fai);
            return Ok(report);
        }
    }
    let format = if job.fastq {
        Format::Fastq
    } else {
        Format::Fasta
    };
    let fai_file =
        File::open(&fai_path).with_context(|| format!("{}: cannot open", fai_path.display()))?;
    let fai = Fai::read(
        BufReader::new(fai_file),
        format,
        &fai_path.display().to_string(),
    )
    .map_err(fasta_error)?;
    report.sequences = fai.records.len();
    let gzi = match compression {
        Compression::Bgzf => Some(read_gzi(&gzi_path)?),
        _ => None,
    };
    let file = File::open(&job.input).with_context(|| format!("{what}: cannot open"))?;
    let access = RandomAccess::new(file, &what, compression, gzi.as_deref(), rt.threads())
        .map_err(fasta_error)?;
    let regions = region_list(job)?;
    let opts = options(job, format, warn)?;
    write_output(job, rt, &fai, &access, &regions, &opts, warn)?;
    report.regions = regions.len();
    report
        .outputs
        .extend(job.output.clone().filter(|o| o != Path::new("-")));
    Ok(report)
}

/// Builds the index of the input and writes it to `fai_path` (and, for a BGZF input, its `.gzi` to
/// `gzi_path`), noting both in `report`.
fn build_index(
    job: &FaidxJob,
    rt: &Runtime,
    fai_path: &Path,
    gzi_path: &Path,
    report: &mut FaidxReport,
    warn: &mut dyn FnMut(String),
) -> anyhow::Result<Fai> {
    let (fai, summary, warnings) = build_fai(&job.input, rt)?;
    for w in warnings {
        warn(format!("[W::fai_insert_index] {w}"));
    }
    rt.check_cancelled()?;
    if summary.compression == Compression::Bgzf {
        write_file(gzi_path, |w| summary.gzi.write(w))?;
        report.outputs.push(gzi_path.to_path_buf());
    }
    write_file(fai_path, |w| fai.write(w))?;
    report.outputs.push(fai_path.to_path_buf());
    report.indexed = true;
    report.sequences = fai.records.len();
    Ok(fai)
}

/// The regions asked for: the region file's lines, then the regions given.
fn region_list(job: &FaidxJob) -> anyhow::Result<Vec<String>> {
    let mut regions = Vec::new();
    if let Some(rf) = &job.region_file {
        let f = File::open(rf).with_context(|| format!("{}: cannot open", rf.display()))?;
        for line in BufReader::new(f).split(b'\n') {
            let line = line.with_context(|| format!("{}: cannot read", rf.display()))?;
            regions.push(String::from_utf8_lossy(&line).into_owned());
        }
    }
    regions.extend(job.regions.iter().cloned());
    Ok(regions)
}

/// How the regions are written (a negative line length warns and takes samtools' 60).
fn options(
    job: &FaidxJob,
    format: Format,
    warn: &mut dyn FnMut(String),
) -> anyhow::Result<FaidxOptions> {
    let line_len = match job.line_length {
        None => None,
        Some(n) if n < 0 => {
            warn(format!("[faidx] bad line length '{n}', using default:60"));
            Some(60)
        }
        Some(n) => Some(n as u64),
    };
    let (pos_mark, neg_mark) = strand_marks(&job.mark_strand)?;
    Ok(FaidxOptions {
        line_len,
        reverse: job.reverse_complement,
        pos_mark,
        neg_mark,
        keep_going: job.keep_going,
        format,
    })
}

/// Writes `regions` to the job's output (bgzipped at samtools' level 4 when its name ends in
/// `.gz`, `.bgz` or `.bgzf`), committed once all is written.
fn write_output(
    job: &FaidxJob,
    rt: &Runtime,
    fai: &Fai,
    access: &RandomAccess,
    regions: &[String],
    opts: &FaidxOptions,
    warn: &mut dyn FnMut(String),
) -> anyhow::Result<()> {
    let what = job.input.display().to_string();
    if job.output.as_deref() == Some(job.input.as_path()) {
        return Err(Error::argument(format!("{what}: same input and output file")).into());
    }
    let bgzip_out = job.output.as_ref().is_some_and(|o| {
        let s = o.to_string_lossy();
        s.ends_with(".gz") || s.ends_with(".bgz") || s.ends_with(".bgzf")
    });
    let (dest, out) = Destination::open(job.output.as_deref())?;
    let out = Cancellable::new(out, rt);
    if bgzip_out {
        // samtools faidx writes bgzipped output at level 4.
        let mut w = ParallelWriter::new(
            out,
            WriterOptions::new(rt.threads(), CompressionLevel::samtools(4)),
        );
        write_regions(fai, access, regions, opts, &mut w, warn)
            .map_err(fasta_error)
            .with_context(|| what.clone())?;
        w.finish()
            .with_context(|| format!("{}: cannot write", dest.name))?;
    } else {
        let mut out = out;
        let result = write_regions(fai, access, regions, opts, &mut out, warn);
        // Output already written stays on stdout, as with samtools; a file output is removed.
        out.flush()
            .with_context(|| format!("{}: cannot write", dest.name))?;
        result.map_err(fasta_error).with_context(|| what.clone())?;
    }
    rt.check_cancelled()?;
    dest.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_before_an_unknown_region_reach_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let fa = dir.path().join("a.fa");
        std::fs::write(&fa, ">a\nACGT\n").unwrap();
        let rt = Runtime::with_threads(1).unwrap();
        let mut job = FaidxJob::new(&fa);
        job.regions = vec!["a".into(), "nope".into()];
        job.output = Some(dir.path().join("out.fa"));
        let mut warnings = Vec::new();
        let e = job
            .run_with_warnings(&rt, &mut |w| warnings.push(w))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: sequence 'nope' not found in the index (use -c to continue past missing regions)",
                fa.display()
            )
        );
        assert_eq!(warnings.len(), 2);
        assert!(!dir.path().join("out.fa").exists());
        job.keep_going = true;
        let report = job.run(&rt).unwrap();
        assert_eq!((report.regions, report.warnings.len()), (2, 2));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.fa")).unwrap(),
            ">a\nACGT\n>nope\n"
        );
    }
}
