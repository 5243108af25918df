//! [`BgzipJob`]: htslib bgzip's modes on the parallel BGZF engine. Block boundaries are bgzip's
//! (every 0xff00 bytes), so `.gzi` files and `-b/-s` output equal htslib's; decompression restores
//! the bytes (plain gzip too, as bgzip does). Files are written under a temporary name and renamed
//! on success; an input file is removed (without `keep`, `stdout` or `output`) only after its
//! output is complete, as bgzip does. Several files are handled one after the other; the first
//! failure stops the job (the files before it are done, as with bgzip).
//!
//! ```
//! use sortase::{BgzipJob, BgzipMode, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let text = dir.path().join("notes.txt");
//! # std::fs::write(&text, "ACGT\n".repeat(1000)).unwrap();
//! let rt = Runtime::with_threads(2)?;
//! // bgzip -i notes.txt: writes notes.txt.gz and notes.txt.gz.gzi, removes notes.txt.
//! let mut job = BgzipJob::new(BgzipMode::Compress, vec![text.clone()]);
//! job.index = true;
//! let report = job.run(&rt)?;
//! assert_eq!(report.uncompressed_bytes, 5000);
//! assert_eq!(report.removed, vec![text.clone()]);
//! // bgzip -b 4 -s 6 -o part.txt notes.txt.gz: bytes 4..10 through the .gzi.
//! let mut range = BgzipJob::new(BgzipMode::Range { offset: 4, size: Some(6) }, report.outputs[..1].to_vec());
//! range.output = Some(dir.path().join("part.txt"));
//! range.run(&rt)?;
//! assert_eq!(std::fs::read(dir.path().join("part.txt")).unwrap(), b"\nACGT\n");
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sortase_bgzf::gzi::GziIndex;
use sortase_bgzf::{
    CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions,
};
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::files::Destination;
use sortase_exec::runtime::Runtime;
use sortase_exec::stream::{fasta_error, finish, parse_gzi, with_suffix, write_file, Cancellable};
use sortase_fasta::access::RandomAccess;
use sortase_fasta::scan::Compression;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// What bgzip does with each file (one mode per run, as bgzip's flags pick one).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BgzipMode {
    /// Compress to BGZF (the default).
    #[default]
    Compress,
    /// Decompress (`-d`).
    Decompress,
    /// (Re)build the `.gzi` of a compressed file (`-r`).
    Reindex,
    /// Check every block and the EOF marker (`-t`).
    Test,
    /// Decompress `size` bytes (default: to the end) from uncompressed `offset` through the `.gzi`
    /// (`-b OFFSET -s SIZE`).
    Range {
        /// Uncompressed offset.
        offset: u64,
        /// Bytes wanted (cut at the end of the data).
        size: Option<u64>,
    },
}

/// htslib bgzip as a job: one mode over several files, picked by the flags as bgzip picks it
/// ([`BgzipJob::mode`]).
///
/// With the `clap` feature it is also bgzip's flags (`clap::Args`, flattened by `sortase bgzip`):
/// a field's doc comment is its `--help` text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BgzipJob {
    /// Decompress at this uncompressed offset (needs FILE.gzi); output goes to stdout.
    #[cfg_attr(feature = "clap", arg(short = 'b', long = "offset", value_name = "INT"))]
    pub offset: Option<u64>,
    /// Write on standard output, keep input files.
    #[cfg_attr(feature = "clap", arg(short = 'c', long = "stdout"))]
    pub stdout: bool,
    /// Decompress.
    #[cfg_attr(feature = "clap", arg(short = 'd', long = "decompress"))]
    pub decompress: bool,
    /// Overwrite existing output files.
    #[cfg_attr(feature = "clap", arg(short = 'f', long = "force"))]
    pub force: bool,
    /// Compress and write a BGZF index (FILE.gz.gzi).
    #[cfg_attr(feature = "clap", arg(short = 'i', long = "index"))]
    pub index: bool,
    /// Name of the BGZF index file [FILE.gz.gzi].
    #[cfg_attr(feature = "clap", arg(short = 'I', long = "index-name", value_name = "FILE"))]
    pub index_name: Option<PathBuf>,
    /// Keep input files.
    #[cfg_attr(feature = "clap", arg(short = 'k', long = "keep"))]
    pub keep: bool,
    /// Compression level, 0 to 9, -1 for the default (htslib's level map onto libdeflate).
    #[cfg_attr(
        feature = "clap",
        arg(
            short = 'l',
            long = "compress-level",
            value_name = "INT",
            allow_negative_numbers = true
        )
    )]
    pub level: Option<i32>,
    /// Write to this file, keep input files.
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_name = "FILE"))]
    pub output: Option<PathBuf>,
    /// (Re)build the index of a compressed file.
    #[cfg_attr(feature = "clap", arg(short = 'r', long = "reindex"))]
    pub reindex: bool,
    /// Decompress this many bytes (with -b).
    #[cfg_attr(feature = "clap", arg(short = 's', long = "size", value_name = "INT"))]
    pub size: Option<u64>,
    /// Test the integrity of compressed files.
    #[cfg_attr(feature = "clap", arg(short = 't', long = "test"))]
    pub test: bool,
    /// Input files [stdin].
    pub files: Vec<PathBuf>,
}

/// What a bgzip job did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BgzipReport {
    /// Files handled (standard input counts as one).
    pub files: usize,
    /// Uncompressed bytes compressed, decompressed, checked or cut out.
    pub uncompressed_bytes: u64,
    /// Files written (data files, then `.gzi` of each).
    pub outputs: Vec<PathBuf>,
    /// Input files removed after their output was complete.
    pub removed: Vec<PathBuf>,
    /// Warnings.
    pub warnings: Vec<String>,
}

impl BgzipJob {
    /// `mode` over `files` with every option at bgzip's default.
    pub fn new(mode: BgzipMode, files: Vec<PathBuf>) -> Self {
        let mut job = Self {
            files,
            ..Self::default()
        };
        match mode {
            BgzipMode::Compress => {}
            BgzipMode::Decompress => job.decompress = true,
            BgzipMode::Reindex => job.reindex = true,
            BgzipMode::Test => job.test = true,
            BgzipMode::Range { offset, size } => (job.offset, job.size) = (Some(offset), size),
        }
        job
    }

    /// The mode the flags pick, as bgzip picks it: `reindex`, then `offset` (with `size`), then
    /// `test`, then `decompress`, else compress.
    pub fn mode(&self) -> BgzipMode {
        match (self.reindex, self.offset, self.test, self.decompress) {
            (true, ..) => BgzipMode::Reindex,
            (false, Some(offset), ..) => BgzipMode::Range {
                offset,
                size: self.size,
            },
            (false, None, true, _) => BgzipMode::Test,
            (false, None, false, true) => BgzipMode::Decompress,
            (false, None, false, false) => BgzipMode::Compress,
        }
    }

    /// Runs the job on `rt` (its threads inflate and deflate).
    pub fn run(&self, rt: &Runtime) -> sortase_exec::error::Result<BgzipReport> {
        finish(rt, run(self, rt))
    }
}

fn run(job: &BgzipJob, rt: &Runtime) -> Result<BgzipReport> {
    let files: Vec<Option<PathBuf>> = if job.files.is_empty() {
        vec![None]
    } else {
        job.files
            .iter()
            .map(|f| (f != Path::new("-")).then(|| f.clone()))
            .collect()
    };
    if job.output.is_some() && files.len() > 1 {
        return Err(Error::argument("-o takes one input file").into());
    }
    let mut report = BgzipReport::default();
    for file in &files {
        rt.check_cancelled()?;
        let path = file.as_deref();
        match job.mode() {
            BgzipMode::Reindex => reindex(path, job, rt, &mut report)?,
            BgzipMode::Range { offset, size } => ranged(path, offset, size, job, rt, &mut report)?,
            BgzipMode::Test => test(path, rt, &mut report)?,
            BgzipMode::Decompress => decompress(path, job, rt, &mut report)?,
            BgzipMode::Compress => compress(path, job, rt, &mut report)?,
        }
        report.files += 1;
    }
    Ok(report)
}

fn name(path: Option<&Path>) -> String {
    path.map_or("standard input".into(), |p| p.display().to_string())
}

fn open_input(
    path: Option<&Path>,
    rt: &Runtime,
) -> Result<(Cancellable<Box<dyn Read + Send>>, u64)> {
    let (reader, len): (Box<dyn Read + Send>, u64) = match path {
        None => (Box::new(io::stdin()), 0),
        Some(p) => {
            let f = File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            (Box::new(f), len)
        }
    };
    Ok((Cancellable::new(reader, rt), len))
}

/// Where compressed or decompressed output goes: `output`, stdout (`stdout` or stdin input) or
/// `default`.
fn destination(
    job: &BgzipJob,
    input: Option<&Path>,
    default: Option<PathBuf>,
) -> Result<Option<PathBuf>> {
    if let Some(o) = &job.output {
        return Ok((o != Path::new("-")).then(|| o.clone()));
    }
    if job.stdout || input.is_none() {
        return Ok(None);
    }
    let target = default.expect("a default name for file input");
    if target.exists() && !job.force {
        return Err(Error::new(
            ErrorKind::Output,
            format!(
                "{}: already exists; use -f to overwrite (or -c to write to standard output)",
                target.display()
            ),
        )
        .into());
    }
    Ok(Some(target))
}

/// bgzip's rule: a named input is removed once its output is complete, unless kept (`-k`) or the
/// output went elsewhere (`-c`, `-o`).
fn remove_input(job: &BgzipJob, input: Option<&Path>, report: &mut BgzipReport) -> Result<()> {
    if let Some(p) = input {
        if !job.keep && !job.stdout && job.output.is_none() {
            std::fs::remove_file(p).with_context(|| format!("{}: cannot remove", p.display()))?;
            report.removed.push(p.to_path_buf());
        }
    }
    Ok(())
}

fn compress(
    input: Option<&Path>,
    job: &BgzipJob,
    rt: &Runtime,
    report: &mut BgzipReport,
) -> Result<()> {
    let what = name(input);
    let target = destination(job, input, input.map(|p| with_suffix(p, ".gz")))?;
    let index_path = if job.index || job.index_name.is_some() {
        Some(match (&job.index_name, &target) {
            (Some(i), _) => i.clone(),
            (None, Some(t)) => with_suffix(t, ".gzi"),
            (None, None) => {
                return Err(Error::argument(
                    "-i with standard output needs an index name: use -I FILE",
                )
                .into())
            }
        })
    } else {
        None
    };
    let (reader, total) = open_input(input, rt)?;
    let progress = rt.progress("bgzip", total);
    let (dest, out) = Destination::open(Some(target.as_deref().unwrap_or(Path::new("-"))))?;
    let level = CompressionLevel::samtools(job.level.unwrap_or(-1));
    let mut writer = ParallelWriter::new(out, WriterOptions::new(rt.threads(), level));
    let mut buf = vec![0u8; 4 << 20];
    let mut reader = progress.wrap(reader);
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
        report.uncompressed_bytes += n as u64;
    }
    rt.check_cancelled()?;
    let (mut out, log) = writer
        .finish()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    out.flush()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    drop(out);
    progress.finish();
    if let Some(ip) = &index_path {
        write_gzi(ip, &GziIndex::from_block_log(&log))?;
    }
    dest.commit()?;
    report.outputs.extend(target);
    report.outputs.extend(index_path);
    remove_input(job, input, report)
}

fn write_gzi(path: &Path, gzi: &GziIndex) -> Result<()> {
    write_file(path, |w| gzi.write(w))
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
    Err(Error::argument(format!(
        "{}: unknown suffix (not .gz, .bgz or .bgzf) -- ignored",
        p.display()
    ))
    .into())
}

fn decompress(
    input: Option<&Path>,
    job: &BgzipJob,
    rt: &Runtime,
    report: &mut BgzipReport,
) -> Result<()> {
    let what = name(input);
    let default = match input {
        Some(p) if !job.stdout && job.output.is_none() => Some(decompressed_name(p)?),
        _ => None,
    };
    let (reader, total) = open_input(input, rt)?;
    let progress = rt.progress("bgzip -d", total);
    let (compression, reader) = sortase_fasta::scan::sniff(progress.wrap(reader))
        .map_err(fasta_error)
        .with_context(|| what.clone())?;
    if compression == Compression::None {
        return Err(Error::new(ErrorKind::Format, format!("{what}: not in gzip format")).into());
    }
    let target = destination(job, input, default)?;
    let (dest, out) = Destination::open(Some(target.as_deref().unwrap_or(Path::new("-"))))?;
    let mut out = Cancellable::new(out, rt);
    let werr = |name: &str| format!("{name}: cannot write");
    if compression == Compression::Gzip {
        // Plain gzip: bgzip decompresses it too (sequentially: it has no blocks).
        let mut gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, reader));
        report.uncompressed_bytes +=
            io::copy(&mut gz, &mut out).with_context(|| format!("{what}: cannot decompress"))?;
    } else {
        let mut r = ParallelReader::new(reader, ReaderOptions::with_threads(rt.threads()));
        for chunk in &mut r {
            let chunk = chunk.with_context(|| what.clone())?;
            rt.check_cancelled()?;
            out.write_all(chunk.data())
                .with_context(|| werr(&dest.name))?;
            report.uncompressed_bytes += chunk.data().len() as u64;
        }
    }
    out.flush().with_context(|| werr(&dest.name))?;
    drop(out);
    progress.finish();
    rt.check_cancelled()?;
    dest.commit()?;
    report.outputs.extend(target);
    remove_input(job, input, report)
}

fn gzi_path(job: &BgzipJob, input: &Path) -> PathBuf {
    job.index_name
        .clone()
        .unwrap_or_else(|| with_suffix(input, ".gzi"))
}

fn reindex(
    input: Option<&Path>,
    job: &BgzipJob,
    rt: &Runtime,
    report: &mut BgzipReport,
) -> Result<()> {
    let Some(input) = input else {
        return Err(
            Error::argument("-r needs a file name (the index is written next to it)").into(),
        );
    };
    let what = input.display().to_string();
    let (reader, total) = open_input(Some(input), rt)?;
    let progress = rt.progress("bgzip -r", total);
    let (gzi, bytes) = scan_gzi(progress.wrap(reader), rt).with_context(|| what.clone())?;
    progress.finish();
    rt.check_cancelled()?;
    let path = gzi_path(job, input);
    write_gzi(&path, &gzi)?;
    report.uncompressed_bytes += bytes;
    report.outputs.push(path);
    Ok(())
}

/// The `.gzi` of a BGZF stream and its uncompressed length, from its block metadata (every block is
/// inflated and CRC-checked).
fn scan_gzi<R: Read + Send + 'static>(reader: R, rt: &Runtime) -> Result<(GziIndex, u64)> {
    let (compression, reader) = sortase_fasta::scan::sniff(reader).map_err(fasta_error)?;
    if compression != Compression::Bgzf {
        return Err(Error::new(
            ErrorKind::Format,
            "not BGZF (bgzip) compressed; cannot index",
        )
        .into());
    }
    let mut gzi = GziIndex::default();
    let mut u = 0u64;
    for chunk in ParallelReader::new(reader, ReaderOptions::with_threads(rt.threads())) {
        rt.check_cancelled()?;
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
    Ok((gzi, u))
}

fn test(input: Option<&Path>, rt: &Runtime, report: &mut BgzipReport) -> Result<()> {
    let what = name(input);
    let (reader, _) = open_input(input, rt)?;
    let (compression, reader) = sortase_fasta::scan::sniff(reader)
        .map_err(fasta_error)
        .with_context(|| what.clone())?;
    if compression != Compression::Bgzf {
        return Err(Error::new(
            ErrorKind::Format,
            format!("{what}: not BGZF (bgzip) compressed"),
        )
        .into());
    }
    let mut r = ParallelReader::new(reader, ReaderOptions::with_threads(rt.threads()));
    for chunk in &mut r {
        let chunk = chunk.with_context(|| what.clone())?;
        rt.check_cancelled()?;
        report.uncompressed_bytes += chunk.data().len() as u64;
    }
    if !r.saw_eof_marker() {
        return Err(Error::new(
            ErrorKind::Format,
            format!("{what}: no BGZF EOF marker; the file may be truncated"),
        )
        .into());
    }
    Ok(())
}

/// Random access to the uncompressed bytes of `input` (a BGZF file through its `.gzi`, or a plain
/// one), with their length.
fn open_access(input: &Path, job: &BgzipJob, rt: &Runtime) -> Result<(RandomAccess, u64)> {
    let what = input.display().to_string();
    let threads = rt.threads();
    let file = File::open(input).with_context(|| format!("{what}: cannot open"))?;
    let (compression, _) = sortase_fasta::scan::sniff(file.try_clone()?)
        .map_err(fasta_error)
        .with_context(|| what.clone())?;
    let ip = gzi_path(job, input);
    Ok(match compression {
        Compression::Gzip => {
            return Err(Error::new(
                ErrorKind::Format,
                format!("{what}: compressed with plain gzip, not BGZF; ranges need bgzip"),
            )
            .into())
        }
        Compression::None => {
            let len = file.metadata()?.len();
            let access =
                RandomAccess::new(file, &what, compression, None, threads).map_err(fasta_error)?;
            (access, len)
        }
        Compression::Bgzf => {
            let bytes = std::fs::read(&ip).with_context(|| {
                format!("{}: cannot load the index (build it with -r)", ip.display())
            })?;
            let entries = parse_gzi(&bytes, &ip.display().to_string())?;
            let access = RandomAccess::new(file, &what, compression, Some(&entries), threads)
                .map_err(fasta_error)?;
            let len = access
                .data_len()
                .map_err(fasta_error)
                .with_context(|| what.clone())?;
            (access, len)
        }
    })
}

/// `-b OFFSET [-s SIZE]`: bytes of the uncompressed stream, read through the `.gzi`. A range running
/// past the end is cut at the end (as bgzip); an offset past the end is an error.
fn ranged(
    input: Option<&Path>,
    offset: u64,
    size: Option<u64>,
    job: &BgzipJob,
    rt: &Runtime,
    report: &mut BgzipReport,
) -> Result<()> {
    let Some(input) = input else {
        return Err(Error::argument("-b needs a file name (and its .gzi index)").into());
    };
    let what = input.display().to_string();
    let (access, data_len) = open_access(input, job, rt)?;
    if offset > data_len {
        return Err(Error::argument(format!(
            "{what}: offset {offset} is past the end of the uncompressed data ({data_len} bytes)"
        ))
        .into());
    }
    let size = size.unwrap_or(u64::MAX).min(data_len - offset);
    let (dest, mut out) = Destination::open(job.output.as_deref())?;
    const STEP: u64 = 64 << 20;
    let mut at = offset;
    while at < offset + size {
        rt.check_cancelled()?;
        let n = STEP.min(offset + size - at);
        access
            .fetch(&[(at, n)], n, |_, b| Ok(out.write_all(b)?))
            .map_err(fasta_error)
            .with_context(|| what.clone())?;
        at += n;
    }
    out.flush()
        .with_context(|| format!("{}: cannot write", dest.name))?;
    drop(out);
    dest.commit()?;
    report.uncompressed_bytes += size;
    report
        .outputs
        .extend(job.output.clone().filter(|o| o != Path::new("-")));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_job_keeps_the_input_and_leaves_no_output() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.txt");
        std::fs::write(&input, b"ACGT\n".repeat(100_000)).unwrap();
        let rt = Runtime::with_threads(2).unwrap();
        rt.cancel();
        let e = BgzipJob::new(BgzipMode::Compress, vec![input.clone()])
            .run(&rt)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the input is left");
        assert!(input.exists());
    }

    #[test]
    fn files_are_handled_in_turn_and_inputs_removed() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..3)
            .map(|i| dir.path().join(format!("{i}.txt")))
            .collect();
        for f in &files {
            std::fs::write(f, b"hello\n").unwrap();
        }
        let rt = Runtime::with_threads(1).unwrap();
        let report = BgzipJob::new(BgzipMode::Compress, files.clone())
            .run(&rt)
            .unwrap();
        assert_eq!((report.files, report.uncompressed_bytes), (3, 18));
        assert_eq!(report.removed, files);
        let gz: Vec<PathBuf> = files.iter().map(|f| with_suffix(f, ".gz")).collect();
        assert_eq!(report.outputs, gz);
        let mut job = BgzipJob::new(BgzipMode::Decompress, gz.clone());
        job.keep = true;
        let report = job.run(&rt).unwrap();
        assert!(report.removed.is_empty() && gz.iter().all(|g| g.exists()));
        assert_eq!(std::fs::read(&files[2]).unwrap(), b"hello\n");
        let mut job = BgzipJob::new(BgzipMode::Compress, files[..2].to_vec());
        job.output = Some(dir.path().join("x.gz"));
        let e = job.run(&rt).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument);
    }
}
