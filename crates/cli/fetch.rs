//! `sortase loc` (the `.loc` record index) and `sortase fetch` (many whole records in one pass).

use crate::faidx::write_file;
use crate::output::Destination;
use anyhow::{bail, Context, Result};
use sortase_fasta::access::{RandomAccess, DEFAULT_WINDOW};
use sortase_fasta::gzi::GziIndex;
use sortase_fasta::loc::{self, LocBuilder};
use sortase_fasta::scan::{scan, Compression};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// Arguments of `sortase loc`.
#[derive(clap::Args, Debug)]
pub struct LocArgs {
    /// Index file name [FILE.loc].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// FASTA/FASTQ file, plain or bgzipped.
    input: PathBuf,
}

/// Arguments of `sortase fetch`.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// File of record names, one per line [stdin].
    #[arg(
        short = 'n',
        long = "names",
        value_name = "FILE",
        conflicts_with = "pairs"
    )]
    names: Option<PathBuf>,
    /// File of `OFFSET SIZE` pairs (uncompressed bytes), one per line.
    #[arg(short = 'p', long = "pairs", value_name = "FILE")]
    pairs: Option<PathBuf>,
    /// Write records in file order instead of request order.
    #[arg(long = "sorted")]
    sorted: bool,
    /// Location index [FILE.loc; built if missing].
    #[arg(long = "loc", value_name = "FILE")]
    loc: Option<PathBuf>,
    /// Write to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Inflate every block read to its end and check its CRC32 (by default a block is inflated only up
    /// to the last byte wanted from it, about half the work; its CRC32 is then not checked).
    #[arg(long = "verify")]
    verify: bool,
    /// FASTA/FASTQ file, plain or bgzipped (with its .gzi; built if missing).
    input: PathBuf,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Scans `input`, writes `loc_path` (and the `.gzi` of a bgzipped input if `gzi_path` is missing).
fn build_loc(input: &Path, loc_path: &Path, gzi_path: &Path, threads: usize) -> Result<()> {
    let what = input.display().to_string();
    let file = File::open(input).with_context(|| format!("{what}: cannot open"))?;
    let progress = crate::common::progress("loc", file.metadata().map(|m| m.len()).unwrap_or(0));
    let mut builder = LocBuilder::new();
    let summary = scan(progress.wrap(file), threads, &mut builder)
        .with_context(|| format!("{what}: cannot build the loc index"))?;
    progress.finish();
    let records = builder
        .finish(summary.total)
        .with_context(|| format!("{what}: cannot build the loc index"))?;
    if summary.compression == Compression::Bgzf && !gzi_path.exists() {
        write_file(gzi_path, |w| summary.gzi.write(w))?;
    }
    write_file(loc_path, |w| loc::write(w, &records))
}

/// Runs `sortase loc`.
pub fn loc(args: LocArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| with_suffix(&args.input, ".loc"));
    build_loc(
        &args.input,
        &out,
        &with_suffix(&args.input, ".gzi"),
        threads,
    )
}

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
    let found = loc::lookup(f, &what, &keys, threads)?;
    let missing: Vec<String> = names
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
        .collect();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(5).map(String::as_str).collect();
        bail!(
            "{} requested name(s) not in {what}: {}{}",
            missing.len(),
            shown.join(", "),
            if missing.len() > 5 { ", ..." } else { "" }
        );
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
                _ => bail!(
                    "{what} line {}: expected OFFSET SIZE, found {text:?}",
                    i + 1
                ),
            }
        })
        .collect()
}

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

/// Runs `sortase fetch`.
pub fn fetch(args: FetchArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let what = args.input.display().to_string();
    let gzi_path = with_suffix(&args.input, ".gzi");
    let compression = {
        let f = File::open(&args.input).with_context(|| format!("{what}: cannot open"))?;
        sortase_fasta::scan::sniff(f)
            .with_context(|| what.clone())?
            .0
    };
    if compression == Compression::Gzip {
        bail!("{what}: compressed with plain gzip, not BGZF; recompress with bgzip");
    }
    let mut ranges = match &args.pairs {
        Some(p) => parse_pairs(&read_lines(Some(p))?, &p.display().to_string())?,
        None => {
            let names = read_lines(args.names.as_deref())?;
            let loc_path = args
                .loc
                .clone()
                .unwrap_or_else(|| with_suffix(&args.input, ".loc"));
            if !loc_path.exists() {
                build_loc(&args.input, &loc_path, &gzi_path, threads)?;
            }
            resolve_names(&names, &loc_path, threads)?
        }
    };
    if args.sorted {
        ranges.sort_unstable();
    }
    let gzi = match compression {
        Compression::Bgzf => {
            if !gzi_path.exists() {
                let file = File::open(&args.input)?;
                // Only the block list is needed (the file may not even be FASTA with -p).
                let summary =
                    scan(file, threads, &mut IgnoreLines).with_context(|| what.clone())?;
                write_file(&gzi_path, |w| summary.gzi.write(w))?;
            }
            let bytes = std::fs::read(&gzi_path)
                .with_context(|| format!("{}: cannot open", gzi_path.display()))?;
            Some(GziIndex::read(&bytes, &gzi_path.display().to_string())?)
        }
        _ => None,
    };
    let file = File::open(&args.input).with_context(|| format!("{what}: cannot open"))?;
    let access = RandomAccess::new(file, &what, compression, gzi.as_deref(), threads)?
        .verify_whole_blocks(args.verify);
    // Every range is checked before the first byte is written: no partial output.
    let data_len = access.data_len().with_context(|| what.clone())?;
    if let Some(&(o, s)) = ranges
        .iter()
        .find(|&&(o, s)| o.checked_add(s).is_none_or(|e| e > data_len))
    {
        bail!(
            "{what}: bytes {o}..{} requested but the uncompressed data ends at {data_len}",
            o.saturating_add(s)
        );
    }
    let (dest, mut out) = Destination::open(args.output.as_deref())?;
    access
        .fetch(
            &ranges,
            DEFAULT_WINDOW,
            |_, bytes| Ok(out.write_all(bytes)?),
        )
        .with_context(|| what.clone())?;
    out.flush()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    drop(out);
    dest.commit()
}
