//! Part files of range tasks (a sort's reduce tasks and merge tasks): each task writes the BGZF
//! blocks of its key ranges back to back into one part file, with a binary sidecar ([`PartIndex`])
//! of their sizes and index summaries, both under temporary names in a work directory; the
//! driver checks that every task's output is there ([`complete`]) and, finishing on one machine,
//! writes the parts in order into the output ([`write_output`]). Shared by `tasks::sort` and
//! `merge::tasks`, below both. Also the map tasks' partitioned files ([`write_sections`]).

use crate::error::{Error, ErrorKind, Result};
use crate::output::ResolvedOutput;
use crate::range_output::{self, EncodedRange, RangeWriter};
use crate::runtime::Runtime;
use crate::wire::WorkFile;
use crate::writer::CramOut;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bam::Header;
use sortase_bgzf::EncodedBlocks;
use sortase_index::RangeSummary;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The sidecar of a part file: per key range, its blocks and index summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PartIndex {
    /// The key ranges in order.
    pub ranges: Vec<EncodedRangeIndex>,
}

/// What starts a sidecar file (and says which form it has).
const SIDECAR_MAGIC: &[u8; 8] = b"SRTPIDX1";

impl PartIndex {
    /// The sidecar's bytes: the magic, then per key range its bytes, its blocks' sizes and its
    /// index summary ([`RangeSummary::encode`]), little-endian. Binary, not JSON: the driver
    /// of a distributed sort reads every part's sidecar, and JSON took ~154 bytes per index
    /// segment (60.7 MB per 1.6 GiB sorted) and most of the layout's time to parse.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = SIDECAR_MAGIC.to_vec();
        out.extend_from_slice(&(self.ranges.len() as u64).to_le_bytes());
        for r in &self.ranges {
            out.extend_from_slice(&r.bytes.to_le_bytes());
            out.extend_from_slice(&(r.blocks.len() as u64).to_le_bytes());
            for &(c, u) in &r.blocks {
                out.extend_from_slice(&c.to_le_bytes());
                out.extend_from_slice(&u.to_le_bytes());
            }
            match &r.summary {
                None => out.push(0),
                Some(s) => {
                    out.push(1);
                    s.encode(&mut out);
                }
            }
        }
        out
    }

    /// Reads what [`Self::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |what: &str| Error::new(ErrorKind::Internal, format!("part sidecar: {what}"));
        let mut at = bytes
            .strip_prefix(SIDECAR_MAGIC.as_slice())
            .ok_or_else(|| bad("not a sidecar"))?;
        let u64_ = |at: &mut &[u8]| -> Result<u64> {
            let (head, rest) = at
                .split_first_chunk::<8>()
                .ok_or_else(|| bad("truncated"))?;
            *at = rest;
            Ok(u64::from_le_bytes(*head))
        };
        let n = u64_(&mut at)?;
        let mut ranges = Vec::new();
        for _ in 0..n {
            let bytes = u64_(&mut at)?;
            let k = u64_(&mut at)? as usize;
            if k > at.len() / 8 {
                return Err(bad("truncated"));
            }
            let (blocks, rest) = at.split_at(8 * k);
            at = rest;
            let blocks = blocks
                .chunks_exact(8)
                .map(|b| {
                    let c = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
                    (c, u32::from_le_bytes(b[4..].try_into().expect("4 bytes")))
                })
                .collect();
            let (&flag, rest) = at.split_first().ok_or_else(|| bad("truncated"))?;
            at = rest;
            let summary = match flag {
                0 => None,
                1 => Some(RangeSummary::decode(&mut at).map_err(bad)?),
                _ => return Err(bad("bad summary flag")),
            };
            ranges.push(EncodedRangeIndex {
                bytes,
                blocks,
                summary,
            });
        }
        if !at.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(Self { ranges })
    }

    /// Reads the sidecar file at `path`.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let at = || path.display().to_string();
        let bytes = std::fs::read(path).with_context(at)?;
        Self::from_bytes(&bytes).with_context(at)
    }
}

/// One key range of a part file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EncodedRangeIndex {
    /// Bytes of its blocks.
    pub bytes: u64,
    /// `(compressed size, uncompressed size)` of each block.
    pub blocks: Vec<(u32, u32)>,
    /// Its index summary (offsets local to the range), with `--write-index`.
    pub summary: Option<RangeSummary>,
}

/// The two files a range task leaves for a parallel finish: the BGZF blocks of its key ranges back
/// to back, and their sizes and index summaries ([`PartIndex`]). Serialised flat into the task and
/// its output (`part_path`, `sidecar_path`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartFiles {
    /// The BGZF blocks.
    pub part_path: PathBuf,
    /// Their sizes and index summaries ([`PartIndex`], binary).
    pub sidecar_path: PathBuf,
}

impl PartFiles {
    /// `STAGE-PART.bgzf` and `STAGE-PART.sidecar` in `work_dir`.
    pub fn named(work_dir: &Path, stage: &str, part: usize) -> Self {
        Self {
            part_path: work_dir.join(format!("{stage}-{part:06}.bgzf")),
            sidecar_path: work_dir.join(format!("{stage}-{part:06}.sidecar")),
        }
    }

    /// Both files (what the task writes).
    pub fn paths(&self) -> Vec<PathBuf> {
        vec![self.part_path.clone(), self.sidecar_path.clone()]
    }

    /// Writes `ranges` encoded key ranges (`encode(k)` encodes the `k`-th, as BAM) into the part
    /// file and their sizes and index summaries into the sidecar, each under a temporary name
    /// renamed when complete: a sort's reduce task, a merge task and markdup's encode task.
    pub fn write(
        &self,
        rt: &Runtime,
        ranges: usize,
        mut encode: impl FnMut(usize) -> anyhow::Result<EncodedRange>,
    ) -> anyhow::Result<()> {
        let part = WorkFile::new(&self.part_path)?;
        let file = crate::files::create_private(part.path())
            .with_context(|| format!("{}: cannot create", part.path().display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut sidecar = PartIndex::default();
        for k in 0..ranges {
            rt.check_cancelled()?;
            let EncodedRange::Bam(blocks, summary) = encode(k)? else {
                return Err(
                    Error::new(ErrorKind::Internal, "a BAM encoder gave no BGZF blocks").into(),
                );
            };
            out.write_all(&blocks.bytes)
                .with_context(|| part.path().display().to_string())?;
            sidecar.ranges.push(EncodedRangeIndex {
                bytes: blocks.bytes.len() as u64,
                blocks: blocks.blocks,
                summary,
            });
        }
        out.flush()
            .with_context(|| part.path().display().to_string())?;
        drop(out);
        let side = WorkFile::new(&self.sidecar_path)?;
        let bytes = sidecar.to_bytes();
        crate::files::create_private(side.path())
            .and_then(|mut f| f.write_all(&bytes))
            .with_context(|| format!("{}: cannot write", side.path().display()))?;
        part.commit()?;
        side.commit()?;
        Ok(())
    }
}

/// The outputs of one stage by task number, each once (repeats of a task, e.g. a retry that also
/// finished, are ignored), checked complete.
pub fn complete<'a, T>(
    outputs: &'a [T],
    stage: &str,
    number: impl Fn(&T) -> (usize, usize),
) -> Result<Vec<&'a T>> {
    let Some(parts) = outputs.first().map(|o| number(o).1) else {
        return Err(Error::argument(format!("no {stage} outputs")));
    };
    let mut by_part: Vec<Option<&T>> = vec![None; parts];
    for o in outputs {
        let (part, of) = number(o);
        if of != parts || part >= parts {
            return Err(Error::argument(format!(
                "{stage} output {part} of {of} does not belong with the others ({parts} tasks)"
            )));
        }
        by_part[part].get_or_insert(o);
    }
    by_part
        .iter()
        .enumerate()
        .map(|(i, o)| o.ok_or_else(|| Error::argument(format!("no output of {stage} task {i}"))))
        .collect()
}

/// Writes `sections` one after the other to `path` (under a temporary name, renamed when
/// complete): a map task's partitions (markdup's signatures or read ends, fq2bam's signatures);
/// the offset of each and the end.
pub fn write_sections(path: &Path, sections: &[Vec<u8>]) -> anyhow::Result<Vec<u64>> {
    let file = WorkFile::new(path)?;
    let at = || path.display().to_string();
    let mut out = BufWriter::new(
        crate::files::create_private(file.path())
            .with_context(|| format!("{}: cannot create", at()))?,
    );
    let mut offsets = vec![0u64];
    for p in sections {
        out.write_all(p).with_context(at)?;
        offsets.push(offsets.last().copied().unwrap_or(0) + p.len() as u64);
    }
    out.flush().with_context(at)?;
    drop(out);
    file.commit()?;
    Ok(offsets)
}

/// A sort's and a merge's finish on one machine: opens `out` (as [`range_output::open`]), writes the
/// key ranges of the part files (`(files, key ranges)`, in output order) and finishes it.
pub fn write_output(
    out: &ResolvedOutput,
    header: &Header,
    parts: &[(&PartFiles, usize)],
    rt: &Runtime,
) -> anyhow::Result<()> {
    let (_, mut writer) = range_output::open(out, header, rt.threads(), &CramOut::default())?;
    write_parts(&mut writer, parts, rt)?;
    rt.check_cancelled()?;
    writer.finish()?;
    Ok(())
}

/// Appends the key ranges of part files (`(part, sidecar, key ranges)`, in output order) to
/// `writer`.
fn write_parts(
    writer: &mut RangeWriter,
    parts: &[(&PartFiles, usize)],
    rt: &Runtime,
) -> anyhow::Result<()> {
    let name = writer.name.clone();
    let at = |path: &Path| path.display().to_string();
    for &(files, ranges) in parts {
        let (part_path, sidecar_path) = (&files.part_path, &files.sidecar_path);
        let side = PartIndex::read(sidecar_path)?;
        if side.ranges.len() != ranges {
            bail!(
                "{}: {} key ranges, expected {ranges}",
                at(sidecar_path),
                side.ranges.len(),
            );
        }
        let mut part = BufReader::new(File::open(part_path).with_context(|| at(part_path))?);
        for r in side.ranges {
            rt.check_cancelled()?;
            let mut bytes = vec![0; r.bytes as usize];
            part.read_exact(&mut bytes).with_context(|| at(part_path))?;
            let blocks = EncodedBlocks {
                bytes,
                blocks: r.blocks,
            };
            writer
                .write(EncodedRange::Bam(blocks, r.summary))
                .with_context(|| name.clone())?;
        }
    }
    Ok(())
}

/// Removes a work directory and every task file in it (gone already is fine).
pub fn remove_work_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::from(
            anyhow::Error::new(e).context(format!("{}: cannot remove", dir.display())),
        )),
        _ => Ok(()),
    }
}

/// Creates the private (0700) `PREFIX.sortase-tasks-PID-N.tmp/` (inside `PREFIX` if it is a
/// directory); absolute. A shared directory without the sticky bit is refused.
pub fn create_work_dir(prefix: &Path) -> anyhow::Result<PathBuf> {
    let base = if prefix.is_dir() {
        prefix.join("sortase")
    } else {
        prefix.to_path_buf()
    };
    crate::files::check_shared_directory(base.parent().unwrap_or(Path::new(".")))?;
    let mut builder = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    for n in 0..1000 {
        let mut name = base.as_os_str().to_owned();
        name.push(format!(".sortase-tasks-{}-{n}.tmp", std::process::id()));
        let path = PathBuf::from(name);
        match builder.create(&path) {
            Ok(()) => return Ok(std::fs::canonicalize(&path)?),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create work directory {}", path.display()))
            }
        }
    }
    bail!("cannot create a work directory next to {}", base.display())
}
