//! Part files of range tasks (a sort's reduce tasks and merge tasks): each task writes the BGZF
//! blocks of its key ranges back to back into one part file, with a JSON sidecar ([`PartIndex`])
//! of their sizes and index summaries, both under temporary names in a work directory; the
//! driver checks that every task's output is there ([`complete`]) and appends the parts in order
//! ([`write_parts`]). Shared by `tasks::sort` and `merge::tasks`, below both.

use crate::error::{Error, ErrorKind, Result};
use crate::range_output::{EncodedRange, RangeWriter};
use crate::runtime::Runtime;
use crate::wire::WorkFile;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
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

/// Writes `ranges` encoded key ranges (`encode(k)` encodes the `k`-th, as BAM) into one part
/// file at `part_path` and their sizes and index summaries into its sidecar ([`PartIndex`]),
/// each under a temporary name renamed when complete: a sort's [`ReduceTask`] and a merge task.
pub fn write_part(
    rt: &Runtime,
    part_path: &Path,
    sidecar_path: &Path,
    ranges: usize,
    mut encode: impl FnMut(usize) -> anyhow::Result<EncodedRange>,
) -> anyhow::Result<()> {
    let part = WorkFile::new(part_path)?;
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
    let side = WorkFile::new(sidecar_path)?;
    let json = serde_json::to_vec(&sidecar).context("part index JSON")?;
    crate::files::create_private(side.path())
        .and_then(|mut f| f.write_all(&json))
        .with_context(|| format!("{}: cannot write", side.path().display()))?;
    part.commit()?;
    side.commit()?;
    Ok(())
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

/// Appends the key ranges of part files (`(part, sidecar, key ranges)`, in output order) to
/// `writer`: a sort's and a merge's finish.
pub fn write_parts(
    writer: &mut RangeWriter,
    parts: &[(&Path, &Path, usize)],
    rt: &Runtime,
) -> anyhow::Result<()> {
    let name = writer.name.clone();
    let at = |path: &Path| path.display().to_string();
    for &(part_path, sidecar_path, ranges) in parts {
        let side: PartIndex =
            serde_json::from_slice(&std::fs::read(sidecar_path).with_context(|| at(sidecar_path))?)
                .with_context(|| at(sidecar_path))?;
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
