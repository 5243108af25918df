//! The finish of a sort or a merge run as tasks, with no serial data path (issue 29).
//!
//! `sortase::tasks::SortPlan::finish` copies every part through one process. Here the driver only
//! lays the output out: from the parts' sidecars (block sizes and index summaries, a few bytes
//! per 64 KiB block) it computes where every part goes, the header's BGZF blocks and the index,
//! exactly as [`crate::range_output::RangeWriter`] would have written them ([`Layout`]). The bytes
//! are then placed by tasks: on a file system every worker sees, one [`PlaceTask`] per part writes
//! it at its offset into the output's temporary file (preallocated by the driver; the first task
//! also writes the header, the last the BGZF EOF block), and [`Layout::commit`] renames the file
//! and its index into place. On object storage a driver uses the layout to make the parts the
//! parts of one multipart upload (`python/sortase/distributed.py`).
//!
//! The output is header blocks, each part's blocks in order, the EOF block: the bytes
//! `RangeWriter` writes, so the distributed output stays byte-identical to one machine's.

use crate::error::{Error, ErrorKind, Result};
use crate::parts::remove_work_dir;
use crate::parts::{PartFiles, PartIndex};
use crate::range_output::{header_blocks, BamLayout};
use crate::runtime::Runtime;
use crate::task::{Span, Task};
use crate::wire::hex;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bam::Header;
use sortase_bgzf::{CompressionLevel, EOF_MARKER};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where one part file goes in the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The part file (a reduce or merge task's BGZF blocks).
    pub path: PathBuf,
    /// Its offset in the output.
    pub offset: u64,
    /// Its bytes.
    pub bytes: u64,
}

/// Bytes the driver computed, at an offset of the output (the header's blocks, the EOF block).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inline {
    /// Offset in the output.
    pub offset: u64,
    /// The bytes.
    #[serde(with = "hex")]
    pub bytes: Vec<u8>,
}

/// The index of the output: where it goes and the file holding its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexFile {
    /// The index file (`out.bam.csi`, ...).
    pub target: PathBuf,
    /// Its bytes, written by [`layout`] next to the target, renamed by [`Layout::commit`].
    pub temp: PathBuf,
}

/// The output of a sort or merge laid out from its parts' sidecars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// The output file.
    pub data: PathBuf,
    /// Its temporary name next to it (what [`PlaceTask`]s write; preallocated when asked).
    pub temp: PathBuf,
    /// Bytes of the output.
    pub size: u64,
    /// The header's BGZF blocks, at offset 0.
    pub header: Inline,
    /// The parts in output order.
    pub parts: Vec<Placement>,
    /// The BGZF EOF block, at `size - 28`.
    pub eof: Inline,
    /// The index, with `--write-index`.
    pub index: Option<IndexFile>,
    /// Other files of the job written by the driver under temporary names and renamed by
    /// [`Layout::commit`] after the output (a markdup's metrics file).
    #[serde(default)]
    pub extras: Vec<IndexFile>,
    /// The job's report (JSON: a sort's or a merge's), given back by [`Layout::commit`].
    pub report: serde_json::Value,
    /// The job's work directory (removed by [`Layout::commit`]).
    pub work_dir: PathBuf,
    /// Index segments (runs of records of one reference and bin) the layout replayed from the
    /// parts' summaries: what its index work grows with (a driver's report shows it).
    #[serde(default)]
    pub index_segments: u64,
}

/// One part placed into the output (and the header or the EOF block with the first and last).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaceTask {
    /// The output's temporary file (it must exist with `size` bytes: [`layout`] preallocates it).
    pub target: PathBuf,
    /// Its size.
    pub size: u64,
    /// This task's number.
    pub part: usize,
    /// Tasks of the layout.
    pub parts: usize,
    /// Bytes written as given.
    pub inline: Vec<Inline>,
    /// Part files copied whole to their offsets.
    pub copies: Vec<Placement>,
}

/// What a [`PlaceTask`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaceOutput {
    /// The task's number.
    pub part: usize,
    /// Tasks of the layout.
    pub parts: usize,
    /// Bytes read from part files (and written to the output).
    pub copied: u64,
}

/// `.NAME.WORK` next to `target`: the temporary name of an output assembled from the parts of the
/// job whose work directory is `work_dir` (unique per plan, so [`remove_temps`] finds it).
pub fn temp_name(target: &Path, work_dir: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(".");
    name.push(work_dir.file_name().unwrap_or_default());
    target.with_file_name(name)
}

/// Removes the temporary files [`layout`] creates for `data` and `index` (gone already is fine).
pub fn remove_temps(data: Option<&Path>, index: Option<&Path>, work_dir: &Path) {
    for target in data.into_iter().chain(index) {
        let _ = std::fs::remove_file(temp_name(target, work_dir));
    }
}

/// Lays the output out from its parts (`(files, key ranges)` in output order): the header
/// blocks at `level`, each part's offset, the EOF block; with `index` (`(path, bai)`) builds the
/// index from the sidecars' summaries and writes it under its temporary name. With `preallocate`
/// creates the output's temporary file at its full size for [`PlaceTask`]s.
#[allow(clippy::too_many_arguments)]
pub fn layout(
    header: &Header,
    level: CompressionLevel,
    data: &Path,
    index: Option<(&Path, bool)>,
    parts: &[(&PartFiles, usize)],
    work_dir: &Path,
    report: serde_json::Value,
    preallocate: bool,
    rt: &Runtime,
) -> anyhow::Result<Layout> {
    let name = data.display().to_string();
    let head = header_blocks(level, header).with_context(|| name.clone())?;
    let mut lay = BamLayout::new(&head, header, index.map(|(_, bai)| bai));
    let mut placements = Vec::with_capacity(parts.len());
    let mut index_segments = 0;
    for &(files, ranges) in parts {
        rt.check_cancelled()?;
        let offset = lay.bytes();
        let bytes = place_part(
            &mut lay,
            &files.sidecar_path,
            ranges,
            &name,
            &mut index_segments,
        )?;
        placements.push(Placement {
            path: files.part_path.clone(),
            offset,
            bytes,
        });
    }
    let eof_offset = lay.bytes();
    let size = eof_offset + EOF_MARKER.len() as u64;
    let index_bytes = lay.finish();
    let index = write_index(index, index_bytes, work_dir)?;
    let temp = temp_name(data, work_dir);
    if preallocate {
        preallocate_file(&temp, size).with_context(|| format!("{}: cannot create", name))?;
    }
    Ok(Layout {
        data: data.to_path_buf(),
        temp,
        size,
        header: Inline {
            offset: 0,
            bytes: head.bytes,
        },
        parts: placements,
        eof: Inline {
            offset: eof_offset,
            bytes: EOF_MARKER.to_vec(),
        },
        index,
        extras: Vec::new(),
        report,
        work_dir: work_dir.to_path_buf(),
        index_segments,
    })
}

/// Adds one part to the layout from its sidecar (which must hold `ranges` key ranges whose blocks
/// add up); the part's bytes. `name`: the output's; `segments` counts the summaries' segments.
fn place_part(
    lay: &mut BamLayout,
    sidecar: &Path,
    ranges: usize,
    name: &str,
    segments: &mut u64,
) -> anyhow::Result<u64> {
    let at = |path: &Path| path.display().to_string();
    let side = PartIndex::read(sidecar)?;
    if side.ranges.len() != ranges {
        bail!(
            "{}: {} key ranges, expected {ranges}",
            at(sidecar),
            side.ranges.len()
        );
    }
    let mut bytes = 0;
    for r in side.ranges {
        let sum: u64 = r.blocks.iter().map(|&(c, _)| u64::from(c)).sum();
        if sum != r.bytes {
            bail!(
                "{}: a key range's blocks do not add up to its bytes",
                at(sidecar)
            );
        }
        bytes += r.bytes;
        *segments += r.summary.as_ref().map_or(0, |s| s.segments.len() as u64);
        lay.push(&r.blocks, r.summary)
            .with_context(|| name.to_string())?;
    }
    Ok(bytes)
}

/// Writes the index built from the parts' summaries under its temporary name.
fn write_index(
    index: Option<(&Path, bool)>,
    bytes: Option<Vec<u8>>,
    work_dir: &Path,
) -> anyhow::Result<Option<IndexFile>> {
    Ok(match (index, bytes) {
        (Some((target, _)), Some(bytes)) => {
            let temp = temp_name(target, work_dir);
            write_synced(&temp, &bytes)
                .with_context(|| format!("{}: cannot write index", target.display()))?;
            Some(IndexFile {
                target: target.to_path_buf(),
                temp,
            })
        }
        _ => None,
    })
}

/// Creates `path` afresh for an output: a file left there by an earlier attempt of this plan is
/// removed (a symlink itself, not its target), then the name is created exclusively and never
/// followed (`O_EXCL|O_NOFOLLOW`, crate::files), so a link planted at the name fails the job instead
/// of redirecting the output into another file.
fn create_fresh(path: &Path) -> std::io::Result<File> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    crate::files::create_exclusive(path)
}

/// Writes `bytes` to a fresh file at `path` (an old file or link there is removed first) and
/// syncs it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = create_fresh(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Creates `path` with `size` bytes: blocks reserved where the file system can (`fallocate`, never
/// glibc's emulation that writes every block), the length set in any case.
fn preallocate_file(path: &Path, size: u64) -> std::io::Result<()> {
    let f = create_fresh(path)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if size > 0 {
            // SAFETY: a valid open descriptor; mode 0 only allocates. Failure (EOPNOTSUPP on NFS,
            // tmpfs quirks) leaves a sparse file, which the tasks fill all the same.
            unsafe {
                libc::fallocate(f.as_raw_fd(), 0, 0, size as libc::off_t);
            }
        }
    }
    f.set_len(size)?;
    f.sync_all()
}

impl Layout {
    /// One [`PlaceTask`] per part, the header with the first and the EOF block with the last.
    pub fn place_tasks(&self) -> Vec<PlaceTask> {
        let n = self.parts.len().max(1);
        (0..n)
            .map(|i| {
                let mut inline = Vec::new();
                if i == 0 {
                    inline.push(self.header.clone());
                }
                if i + 1 == n {
                    inline.push(self.eof.clone());
                }
                PlaceTask {
                    target: self.temp.clone(),
                    size: self.size,
                    part: i,
                    parts: n,
                    inline,
                    copies: self.parts.get(i).cloned().into_iter().collect(),
                }
            })
            .collect()
    }

    /// Renames the placed output (its size checked) and the index into place, removes the work
    /// directory (a failure to is a warning of the report) and gives back the job's report.
    pub fn commit(&self) -> Result<serde_json::Value> {
        self.commit_inner().map_err(Error::from)
    }

    fn commit_inner(&self) -> anyhow::Result<serde_json::Value> {
        let name = self.data.display().to_string();
        let len = std::fs::metadata(&self.temp)
            .with_context(|| format!("{name}: the placed output {} is gone", self.temp.display()))?
            .len();
        if len != self.size {
            bail!(Error::new(
                ErrorKind::Internal,
                format!(
                    "{name}: the placed output has {len} bytes, not {}",
                    self.size
                )
            ));
        }
        std::fs::rename(&self.temp, &self.data)
            .with_context(|| format!("{name}: cannot rename from {}", self.temp.display()))?;
        for ix in self.index.iter().chain(&self.extras) {
            std::fs::rename(&ix.temp, &ix.target).with_context(|| {
                format!(
                    "{}: cannot rename from {}",
                    ix.target.display(),
                    ix.temp.display()
                )
            })?;
        }
        let mut report = self.report.clone();
        if let Err(e) = remove_work_dir(&self.work_dir) {
            if let Some(w) = report.get_mut("warnings").and_then(|w| w.as_array_mut()) {
                w.push(format!("tasks: {e}").into());
            }
        }
        Ok(report)
    }
}

impl PlaceTask {
    /// Writes the task's bytes at their offsets of the preallocated output and syncs them.
    pub fn run(&self, rt: &Runtime) -> Result<PlaceOutput> {
        self.run_inner(rt)
            .with_context(|| format!("place task {}", self.part))
            .map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<PlaceOutput> {
        let name = self.target.display().to_string();
        // No `create`: the driver preallocated the file; a task never makes a stray output.
        let out = OpenOptions::new()
            .write(true)
            .open(&self.target)
            .with_context(|| format!("{name}: cannot open for writing"))?;
        let len = out.metadata().with_context(|| name.clone())?.len();
        if len != self.size {
            bail!("{name}: {len} bytes, not the planned {}", self.size);
        }
        for b in &self.inline {
            if b.offset + b.bytes.len() as u64 > self.size {
                bail!("{name}: bytes past its end");
            }
            out.write_all_at(&b.bytes, b.offset)
                .with_context(|| name.clone())?;
        }
        let mut copied = 0;
        let mut buf = vec![0u8; 8 << 20];
        for c in &self.copies {
            let at = c.path.display().to_string();
            let mut part = File::open(&c.path).with_context(|| format!("{at}: cannot open"))?;
            let plen = part.metadata().with_context(|| at.clone())?.len();
            if plen != c.bytes || c.offset + c.bytes > self.size {
                bail!("{at}: {plen} bytes, the layout has {}", c.bytes);
            }
            let mut done = 0;
            while done < c.bytes {
                rt.check_cancelled()?;
                let n = (c.bytes - done).min(buf.len() as u64) as usize;
                part.read_exact(&mut buf[..n]).with_context(|| at.clone())?;
                out.write_all_at(&buf[..n], c.offset + done)
                    .with_context(|| name.clone())?;
                done += n as u64;
            }
            copied += c.bytes;
        }
        out.sync_data().with_context(|| name.clone())?;
        Ok(PlaceOutput {
            part: self.part,
            parts: self.parts,
            copied,
        })
    }
}

impl Task for PlaceTask {
    const KIND: &'static str = "place";
    type Output = PlaceOutput;

    fn run(&self, rt: &Runtime) -> Result<PlaceOutput> {
        PlaceTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(self
            .copies
            .iter()
            .map(|c| Span::ranges(&c.path, vec![(0, c.bytes)]))
            .collect())
    }

    fn writes(&self) -> Vec<PathBuf> {
        vec![self.target.clone()]
    }

    /// The part files it copies, and those bytes plus the header's or the EOF block's written at
    /// their offsets (not the whole output, which every place task shares).
    fn local_bytes(&self) -> (u64, u64) {
        let copied: u64 = self.copies.iter().map(|c| c.bytes).sum();
        let inline: u64 = self.inline.iter().map(|b| b.bytes.len() as u64).sum();
        (copied, copied + inline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_at_the_temporary_names_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let work = dir.path().join("work");
        let index = temp_name(&dir.path().join("out.bam.bai"), &work);
        let data = temp_name(&dir.path().join("out.bam"), &work);
        for link in [&index, &data] {
            std::os::unix::fs::symlink(&victim, link).unwrap();
        }
        write_synced(&index, b"index bytes").unwrap();
        preallocate_file(&data, 1000).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        for (path, len) in [(&index, 11), (&data, 1000)] {
            let meta = std::fs::symlink_metadata(path).unwrap();
            assert!(
                meta.file_type().is_file(),
                "{} is not a plain file",
                path.display()
            );
            assert_eq!(meta.len(), len);
        }
    }
}
