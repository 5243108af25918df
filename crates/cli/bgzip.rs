//! `sortase bgzip`: htslib bgzip's options on the parallel BGZF engine. Block boundaries are bgzip's
//! (every 0xff00 bytes), so `.gzi` files and `-b/-s` output equal htslib's; `-d` restores the bytes.
//! Files are written under a temporary name and renamed on success; the input is removed (without
//! `-k`/`-c`/`-o`) only after the output is complete, as bgzip does.

use crate::output::{Destination, OutputFile};
use anyhow::{bail, Context, Result};
use sortase_bgzf::{
    CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions,
};
use sortase_fasta::access::RandomAccess;
use sortase_fasta::gzi::GziIndex;
use sortase_fasta::scan::Compression;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// Arguments of `sortase bgzip` (htslib bgzip's flags).
#[derive(clap::Args, Debug)]
pub struct BgzipArgs {
    /// Decompress at this uncompressed offset (needs FILE.gzi); output goes to stdout.
    #[arg(short = 'b', long = "offset", value_name = "INT")]
    offset: Option<u64>,
    /// Write on standard output, keep input files.
    #[arg(short = 'c', long = "stdout")]
    stdout: bool,
    /// Decompress.
    #[arg(short = 'd', long = "decompress")]
    decompress: bool,
    /// Overwrite existing output files.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// Compress and write a BGZF index (FILE.gz.gzi).
    #[arg(short = 'i', long = "index")]
    index: bool,
    /// Name of the BGZF index file [FILE.gz.gzi].
    #[arg(short = 'I', long = "index-name", value_name = "FILE")]
    index_name: Option<PathBuf>,
    /// Keep input files.
    #[arg(short = 'k', long = "keep")]
    keep: bool,
    /// Compression level, 0 to 9, -1 for the default (htslib's level map onto libdeflate).
    #[arg(
        short = 'l',
        long = "compress-level",
        value_name = "INT",
        allow_negative_numbers = true
    )]
    level: Option<i32>,
    /// Write to this file, keep input files.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// (Re)build the index of a compressed file.
    #[arg(short = 'r', long = "reindex")]
    reindex: bool,
    /// Decompress this many bytes (with -b).
    #[arg(short = 's', long = "size", value_name = "INT")]
    size: Option<u64>,
    /// Test the integrity of compressed files.
    #[arg(short = 't', long = "test")]
    test: bool,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Input files [stdin].
    files: Vec<PathBuf>,
}

/// Runs `sortase bgzip`.
pub fn run(args: BgzipArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let files: Vec<Option<PathBuf>> = if args.files.is_empty() {
        vec![None]
    } else {
        args.files
            .iter()
            .map(|f| (f != Path::new("-")).then(|| f.clone()))
            .collect()
    };
    if args.output.is_some() && files.len() > 1 {
        bail!("-o takes one input file");
    }
    for file in &files {
        let path = file.as_deref();
        if args.reindex {
            reindex(path, &args, threads)?;
        } else if args.offset.is_some() {
            ranged(path, &args, threads)?;
        } else if args.test {
            test(path, threads)?;
        } else if args.decompress {
            decompress(path, &args, threads)?;
        } else {
            compress(path, &args, threads)?;
        }
    }
    Ok(())
}

fn name(path: Option<&Path>) -> String {
    path.map_or("standard input".into(), |p| p.display().to_string())
}

fn open_input(path: Option<&Path>) -> Result<(Box<dyn Read + Send>, u64)> {
    match path {
        None => Ok((Box::new(io::stdin()), 0)),
        Some(p) => {
            let f = File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            Ok((Box::new(f), len))
        }
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Where compressed or decompressed output goes: `-o`, stdout (`-c` or stdin input) or `default`.
fn destination(
    args: &BgzipArgs,
    input: Option<&Path>,
    default: Option<PathBuf>,
) -> Result<Option<PathBuf>> {
    if let Some(o) = &args.output {
        return Ok((o != Path::new("-")).then(|| o.clone()));
    }
    if args.stdout || input.is_none() {
        return Ok(None);
    }
    let target = default.expect("a default name for file input");
    if target.exists() && !args.force {
        bail!(
            "{}: already exists; use -f to overwrite (or -c to write to standard output)",
            target.display()
        );
    }
    Ok(Some(target))
}

fn removes_input(args: &BgzipArgs, input: Option<&Path>) -> bool {
    input.is_some() && !args.keep && !args.stdout && args.output.is_none()
}

fn compress(input: Option<&Path>, args: &BgzipArgs, threads: usize) -> Result<()> {
    let what = name(input);
    let target = destination(args, input, input.map(|p| with_suffix(p, ".gz")))?;
    let index_path = if args.index || args.index_name.is_some() {
        Some(match (&args.index_name, &target) {
            (Some(i), _) => i.clone(),
            (None, Some(t)) => with_suffix(t, ".gzi"),
            (None, None) => bail!("-i with standard output needs an index name: use -I FILE"),
        })
    } else {
        None
    };
    let (mut reader, total) = open_input(input)?;
    let progress = crate::common::progress("bgzip", total);
    let (dest, out) = Destination::open(Some(target.as_deref().unwrap_or(Path::new("-"))))?;
    let level = CompressionLevel::samtools(args.level.unwrap_or(-1));
    let mut writer = ParallelWriter::new(out, WriterOptions::new(threads, level));
    let mut buf = vec![0u8; 4 << 20];
    let mut reader = progress.wrap(&mut reader);
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("{what}: cannot read")),
        };
        writer
            .write_all(&buf[..n])
            .with_context(|| format!("{}: cannot write", dest.name))?;
    }
    let (mut out, log) = writer
        .finish()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    out.flush()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    drop(out);
    progress.finish();
    if let Some(ip) = index_path {
        write_gzi(&ip, &GziIndex::from_block_log(&log))?;
    }
    dest.commit()?;
    if removes_input(args, input) {
        if let Some(p) = input {
            std::fs::remove_file(p).with_context(|| format!("{}: cannot remove", p.display()))?;
        }
    }
    Ok(())
}

fn write_gzi(path: &Path, gzi: &GziIndex) -> Result<()> {
    let (pending, f) = OutputFile::create(path)?;
    gzi.write(io::BufWriter::new(f))
        .with_context(|| format!("{}: cannot write", path.display()))?;
    pending.commit()
}

fn decompressed_name(p: &Path) -> Result<PathBuf> {
    let s = p.to_string_lossy();
    for suffix in [".gz", ".bgz", ".bgzf"] {
        if let Some(stem) = s.strip_suffix(suffix) {
            if !stem.is_empty() {
                return Ok(PathBuf::from(stem));
            }
        }
    }
    bail!(
        "{}: unknown suffix (not .gz, .bgz or .bgzf) -- ignored",
        p.display()
    )
}

fn decompress(input: Option<&Path>, args: &BgzipArgs, threads: usize) -> Result<()> {
    let what = name(input);
    let default = match input {
        Some(p) if !args.stdout && args.output.is_none() => Some(decompressed_name(p)?),
        _ => None,
    };
    let (reader, total) = open_input(input)?;
    let progress = crate::common::progress("bgzip -d", total);
    let (compression, reader) =
        sortase_fasta::scan::sniff(progress.wrap(reader)).with_context(|| what.clone())?;
    if compression == Compression::None {
        bail!("{what}: not in gzip format");
    }
    let target = destination(args, input, default)?;
    let (dest, mut out) = Destination::open(Some(target.as_deref().unwrap_or(Path::new("-"))))?;
    let werr = |name: &str| format!("{name}: cannot write");
    if compression == Compression::Gzip {
        // Plain gzip: bgzip decompresses it too (sequentially: it has no blocks).
        let mut gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, reader));
        io::copy(&mut gz, &mut out).with_context(|| format!("{what}: cannot decompress"))?;
    } else {
        let mut r = ParallelReader::new(reader, ReaderOptions::with_threads(threads));
        for chunk in &mut r {
            let chunk = chunk.with_context(|| what.clone())?;
            out.write_all(chunk.data())
                .with_context(|| werr(&dest.name))?;
        }
    }
    out.flush().with_context(|| werr(&dest.name))?;
    drop(out);
    progress.finish();
    dest.commit()?;
    if removes_input(args, input) {
        if let Some(p) = input {
            std::fs::remove_file(p).with_context(|| format!("{}: cannot remove", p.display()))?;
        }
    }
    Ok(())
}

fn gzi_path(args: &BgzipArgs, input: &Path) -> PathBuf {
    args.index_name
        .clone()
        .unwrap_or_else(|| with_suffix(input, ".gzi"))
}

fn reindex(input: Option<&Path>, args: &BgzipArgs, threads: usize) -> Result<()> {
    let Some(input) = input else {
        bail!("-r needs a file name (the index is written next to it)");
    };
    let what = input.display().to_string();
    let (reader, total) = open_input(Some(input))?;
    let progress = crate::common::progress("bgzip -r", total);
    let gzi = scan_gzi(progress.wrap(reader), threads).with_context(|| what.clone())?;
    progress.finish();
    write_gzi(&gzi_path(args, input), &gzi)
}

/// The `.gzi` of a BGZF stream, from its block metadata (every block is inflated and CRC-checked).
fn scan_gzi<R: Read + Send + 'static>(reader: R, threads: usize) -> Result<GziIndex> {
    let (compression, reader) = sortase_fasta::scan::sniff(reader)?;
    if compression != Compression::Bgzf {
        bail!("not BGZF (bgzip) compressed; cannot index");
    }
    let mut gzi = GziIndex::default();
    let mut u = 0u64;
    for chunk in ParallelReader::new(reader, ReaderOptions::with_threads(threads)) {
        for b in chunk?.blocks {
            if b.usize > 0 {
                gzi.data_blocks.push(sortase_bgzf::gzi::GziEntry {
                    compressed: b.coffset,
                    uncompressed: u,
                });
            }
            u += u64::from(b.usize);
        }
    }
    Ok(gzi)
}

fn test(input: Option<&Path>, threads: usize) -> Result<()> {
    let what = name(input);
    let (reader, _) = open_input(input)?;
    let (compression, reader) = sortase_fasta::scan::sniff(reader).with_context(|| what.clone())?;
    if compression != Compression::Bgzf {
        bail!("{what}: not BGZF (bgzip) compressed");
    }
    let mut r = ParallelReader::new(reader, ReaderOptions::with_threads(threads));
    for chunk in &mut r {
        chunk.with_context(|| what.clone())?;
    }
    if !r.saw_eof_marker() {
        bail!("{what}: no BGZF EOF marker; the file may be truncated");
    }
    Ok(())
}

/// `-b OFFSET [-s SIZE]`: bytes of the uncompressed stream, read through the `.gzi`. A range running
/// past the end is cut at the end (as bgzip); an offset past the end is an error.
fn ranged(input: Option<&Path>, args: &BgzipArgs, threads: usize) -> Result<()> {
    let Some(input) = input else {
        bail!("-b needs a file name (and its .gzi index)");
    };
    let what = input.display().to_string();
    let file = File::open(input).with_context(|| format!("{what}: cannot open"))?;
    let (compression, _) =
        sortase_fasta::scan::sniff(file.try_clone()?).with_context(|| what.clone())?;
    let offset = args.offset.unwrap_or(0);
    let ip = gzi_path(args, input);
    let (access, data_len) = match compression {
        Compression::Gzip => {
            bail!("{what}: compressed with plain gzip, not BGZF; ranges need bgzip")
        }
        Compression::None => {
            let len = file.metadata()?.len();
            (
                RandomAccess::new(file, &what, compression, None, threads)?,
                len,
            )
        }
        Compression::Bgzf => {
            let bytes = std::fs::read(&ip).with_context(|| {
                format!("{}: cannot load the index (build it with -r)", ip.display())
            })?;
            let entries = GziIndex::read(&bytes, &ip.display().to_string())?;
            let access = RandomAccess::new(file, &what, compression, Some(&entries), threads)?;
            let len = access.data_len().with_context(|| what.clone())?;
            (access, len)
        }
    };
    if offset > data_len {
        bail!(
            "{what}: offset {offset} is past the end of the uncompressed data ({data_len} bytes)"
        );
    }
    let size = args.size.unwrap_or(u64::MAX).min(data_len - offset);
    let (dest, mut out) = Destination::open(args.output.as_deref())?;
    const STEP: u64 = 64 << 20;
    let mut at = offset;
    while at < offset + size {
        let n = STEP.min(offset + size - at);
        access
            .fetch(&[(at, n)], n, |_, b| Ok(out.write_all(b)?))
            .with_context(|| what.clone())?;
        at += n;
    }
    out.flush()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    drop(out);
    dest.commit()
}
