//! `sortase faidx`: `.fai` (and `.gzi`) identical to samtools faidx, built over a parallel block scan;
//! region retrieval with samtools faidx's output.

use crate::output::{Destination, OutputFile};
use anyhow::{bail, Context, Result};
use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
use sortase_fasta::access::RandomAccess;
use sortase_fasta::fai::{Fai, FaiBuilder, Format};
use sortase_fasta::faidx::{write_regions, FaidxOptions};
use sortase_fasta::gzi::GziIndex;
use sortase_fasta::scan::{scan, Compression, ScanSummary};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// Arguments of `sortase faidx` (samtools faidx's flags).
#[derive(clap::Args, Debug)]
pub struct FaidxArgs {
    /// Write regions to FILE (.gz/.bgz/.bgzf: bgzipped); with no regions, the .fai name.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Bases per output line [the input's line length]; 0: no wrapping.
    #[arg(
        short = 'n',
        long = "length",
        value_name = "INT",
        allow_negative_numbers = true
    )]
    length: Option<i64>,
    /// Continue after a region whose sequence is not in the index.
    #[arg(short = 'c', long = "continue")]
    keep_going: bool,
    /// File of regions, one per line.
    #[arg(short = 'r', long = "region-file", value_name = "FILE")]
    region_file: Option<PathBuf>,
    /// File and index in FASTQ format.
    #[arg(short = 'f', long = "fastq")]
    fastq: bool,
    /// Reverse complement sequences.
    #[arg(short = 'i', long = "reverse-complement")]
    reverse: bool,
    /// Strand mark: rc (/rc on the reverse strand), no, sign ((+)/(-)), custom,POS,NEG.
    #[arg(long = "mark-strand", value_name = "TYPE", default_value = "rc")]
    mark_strand: String,
    /// Name of the .fai index [FILE.fai].
    #[arg(long = "fai-idx", value_name = "FILE")]
    fai_idx: Option<PathBuf>,
    /// Name of the .gzi index [FILE.gzi].
    #[arg(long = "gzi-idx", value_name = "FILE")]
    gzi_idx: Option<PathBuf>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// FASTA/FASTQ file, plain or bgzipped.
    input: PathBuf,
    /// Regions: NAME, NAME:BEG-END, {NAME}:BEG-END.
    regions: Vec<String>,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

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
                bail!("unknown --mark-strand option \"{spec}\" (rc, no, sign or custom,POS,NEG)")
            }
        },
    })
}

/// Scans `input` once and builds its `.fai`, with the `.gzi` when it is bgzipped.
pub fn build_fai(input: &Path, threads: usize) -> Result<(Fai, ScanSummary, Vec<String>)> {
    let what = input.display().to_string();
    let file = File::open(input).with_context(|| format!("{what}: cannot open"))?;
    let progress = crate::common::progress("faidx", file.metadata().map(|m| m.len()).unwrap_or(0));
    let mut builder = FaiBuilder::new();
    let summary = scan(progress.wrap(file), threads, &mut builder)
        .with_context(|| format!("{what}: cannot build the fai index"))?;
    progress.finish();
    let warnings = std::mem::take(&mut builder.warnings);
    let fai = builder
        .finish()
        .with_context(|| format!("{what}: cannot build the fai index"))?;
    Ok((fai, summary, warnings))
}

/// Writes a file through a temporary name.
pub fn write_file(path: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let (pending, file) = OutputFile::create(path)?;
    let mut w = io::BufWriter::with_capacity(1 << 20, file);
    f(&mut w)
        .and_then(|_| w.flush())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    drop(w);
    pending.commit()
}

/// Runs `sortase faidx`.
pub fn run(args: FaidxArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let build_only = args.regions.is_empty() && args.region_file.is_none();
    let fai_path = args
        .fai_idx
        .clone()
        .or_else(|| build_only.then(|| args.output.clone()).flatten())
        .unwrap_or_else(|| with_suffix(&args.input, ".fai"));
    let gzi_path = args
        .gzi_idx
        .clone()
        .unwrap_or_else(|| with_suffix(&args.input, ".gzi"));
    let what = args.input.display().to_string();
    let compression = {
        let f = File::open(&args.input).with_context(|| format!("{what}: cannot open"))?;
        sortase_fasta::scan::sniff(f)
            .with_context(|| what.clone())?
            .0
    };
    if compression == Compression::Gzip {
        bail!("{what}: compressed with plain gzip, not BGZF; cannot index files compressed with gzip, please use bgzip");
    }
    let needs_build = build_only
        || !fai_path.exists()
        || (compression == Compression::Bgzf && !gzi_path.exists());
    if needs_build {
        let (fai, summary, warnings) = build_fai(&args.input, threads)?;
        for w in warnings {
            eprintln!("[W::fai_insert_index] {w}");
        }
        if summary.compression == Compression::Bgzf {
            write_file(&gzi_path, |w| summary.gzi.write(w))?;
        }
        write_file(&fai_path, |w| fai.write(w))?;
        if build_only {
            // The process ends here: freeing a million names one by one would only cost time
            // (malloc_consolidate was 3.5 % of the samples of `faidx` on the bench FASTA).
            std::mem::forget(fai);
            return Ok(());
        }
    }
    let format = if args.fastq {
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
    )?;
    let gzi = match compression {
        Compression::Bgzf => {
            let bytes = std::fs::read(&gzi_path)
                .with_context(|| format!("{}: cannot open", gzi_path.display()))?;
            Some(GziIndex::read(&bytes, &gzi_path.display().to_string())?)
        }
        _ => None,
    };
    let file = File::open(&args.input).with_context(|| format!("{what}: cannot open"))?;
    let access = RandomAccess::new(file, &what, compression, gzi.as_deref(), threads)?;

    let mut regions = Vec::new();
    if let Some(rf) = &args.region_file {
        let f = File::open(rf).with_context(|| format!("{}: cannot open", rf.display()))?;
        for line in BufReader::new(f).split(b'\n') {
            let line = line.with_context(|| format!("{}: cannot read", rf.display()))?;
            regions.push(String::from_utf8_lossy(&line).into_owned());
        }
    }
    regions.extend(args.regions.iter().cloned());
    let line_len = match args.length {
        None => None,
        Some(n) if n < 0 => {
            eprintln!("[faidx] bad line length '{n}', using default:60");
            Some(60)
        }
        Some(n) => Some(n as u64),
    };
    let (pos_mark, neg_mark) = strand_marks(&args.mark_strand)?;
    let opts = FaidxOptions {
        line_len,
        reverse: args.reverse,
        pos_mark,
        neg_mark,
        keep_going: args.keep_going,
        format,
    };
    if args.output.as_deref() == Some(args.input.as_path()) {
        bail!("{what}: same input and output file");
    }
    let bgzip_out = args.output.as_ref().is_some_and(|o| {
        let s = o.to_string_lossy();
        s.ends_with(".gz") || s.ends_with(".bgz") || s.ends_with(".bgzf")
    });
    let (dest, out) = Destination::open(args.output.as_deref())?;
    let mut warn = |w: String| eprintln!("{w}");
    if bgzip_out {
        // samtools faidx writes bgzipped output at level 4.
        let mut w = ParallelWriter::new(
            out,
            WriterOptions::new(threads, CompressionLevel::samtools(4)),
        );
        write_regions(&fai, &access, &regions, &opts, &mut w, &mut warn)
            .with_context(|| what.clone())?;
        w.finish()
            .with_context(|| format!("{}: cannot write", dest.name))?;
    } else {
        let mut out = out;
        let result = write_regions(&fai, &access, &regions, &opts, &mut out, &mut warn);
        // Output already written stays on stdout, as with samtools; a file output is removed.
        out.flush()
            .with_context(|| format!("{}: cannot write", dest.name))?;
        result.with_context(|| what.clone())?;
    }
    dest.commit()
}
