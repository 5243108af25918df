//! Extra column groups written into a dataset and committed with its manifest (the update of a
//! dataset in place): a group's files go into a private directory inside the dataset
//! ([`PendingGroup`]), which is renamed to a directory name no manifest has used, and
//! `manifest.json` is replaced last (written under a temporary name, then renamed;
//! [`GroupCommit`], [`write_manifest`]). Until that rename the dataset is what it was; an
//! interrupted or failed run leaves at most a hidden directory that its guard removes. A replaced
//! group's old directory is removed after the rename. Also the `duplicate` group (agd markdup) read
//! back and applied to the records' flags ([`duplicate_column`], [`apply_duplicates`]).

use crate::error::Error;
use crate::files::{OutputFile, TempDir};
use anyhow::Context;
use arrow_array::{Array, BooleanArray, RecordBatch};
use sortase_agd::extra::{self, DUPLICATE_GROUP};
use sortase_agd::{ChunkEntry, ExtraGroup, Manifest, Provenance};
use std::io::Write;
use std::path::Path;

/// A group being written into a dataset: its private directory, then [`PendingGroup::commit`].
pub struct PendingGroup {
    temp: TempDir,
    name: String,
    columns: Vec<String>,
}

impl PendingGroup {
    /// Starts group `name` in dataset `dir`.
    pub fn create(dir: &Path, name: &str) -> anyhow::Result<Self> {
        sortase_agd::manifest::check_extra_name(name).map_err(Error::argument)?;
        let temp = TempDir::staging(&dir.join(format!(".{name}")))?;
        Ok(Self {
            temp,
            name: name.to_string(),
            columns: Vec::new(),
        })
    }

    /// Writes the group's file of `chunk`.
    pub fn write(&self, chunk: &ChunkEntry, batch: &RecordBatch, level: i32) -> anyhow::Result<()> {
        let path = extra::extra_dir_path(self.temp.path(), ".", chunk.index);
        let file = std::fs::File::create(&path)
            .with_context(|| format!("{}: cannot create", path.display()))?;
        let mut out = extra::write_extra(batch, std::io::BufWriter::new(file), level)?;
        out.flush()
            .with_context(|| format!("{}: cannot write", path.display()))?;
        Ok(())
    }

    /// Sets the group's columns (those of every chunk's batch).
    pub fn set_columns(&mut self, columns: Vec<String>) {
        self.columns = columns;
    }

    /// Moves the group into dataset `dir` under a directory no manifest uses and replaces the
    /// manifest with `manifest` plus this group (replacing a group of the same name, whose directory
    /// is then removed). Returns whether a group was replaced.
    pub fn commit(
        self,
        dir: &Path,
        manifest: Manifest,
        provenance: Provenance,
    ) -> anyhow::Result<bool> {
        let staged = GroupCommit::new(dir, manifest, &self.name, self.columns, provenance);
        staged.commit_dir(dir, self.temp.path())
    }
}

/// A group ready to enter a dataset: the directory it gets (unused by the manifest and absent
/// from the dataset) and the manifest that lists it (replacing a group of the same name).
#[derive(Debug, Clone)]
pub struct GroupCommit {
    /// The group's directory, relative to the dataset.
    pub dir: String,
    /// The new manifest.
    pub manifest: Manifest,
    /// The directory of the group it replaces.
    pub replaced: Option<String>,
}

impl GroupCommit {
    /// The entry of group `name` (`columns`) in dataset `dir` of `manifest`.
    pub fn new(
        dir: &Path,
        mut manifest: Manifest,
        name: &str,
        columns: Vec<String>,
        provenance: Provenance,
    ) -> Self {
        let fresh = (0..)
            .map(|n| {
                if n == 0 {
                    name.to_string()
                } else {
                    format!("{name}.{n}")
                }
            })
            .find(|d| !manifest.extra.iter().any(|g| &g.dir == d) && !dir.join(d).exists())
            .expect("an unused name");
        let group = ExtraGroup {
            name: name.to_string(),
            dir: fresh.clone(),
            columns,
            provenance,
        };
        let old = manifest.extra.iter().position(|g| g.name == name);
        let replaced = old.map(|i| std::mem::replace(&mut manifest.extra[i], group.clone()).dir);
        if old.is_none() {
            manifest.extra.push(group);
        }
        Self {
            dir: fresh,
            manifest,
            replaced,
        }
    }

    /// Moves the group's files from `staged` into dataset `dir` under [`GroupCommit::dir`] and
    /// replaces the manifest (the replaced group's directory is then removed). Returns whether a
    /// group was replaced.
    pub fn commit_dir(self, dir: &Path, staged: &Path) -> anyhow::Result<bool> {
        let target = dir.join(&self.dir);
        std::fs::rename(staged, &target).with_context(|| {
            format!(
                "{}: cannot rename from {}",
                target.display(),
                staged.display()
            )
        })?;
        if let Err(e) = write_manifest(dir, &self.manifest) {
            let _ = std::fs::remove_dir_all(&target);
            return Err(e);
        }
        if let Some(d) = &self.replaced {
            let _ = std::fs::remove_dir_all(dir.join(d));
        }
        Ok(self.replaced.is_some())
    }
}

/// Replaces `DIR/manifest.json` with `manifest`: written under a temporary name, renamed last.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> anyhow::Result<()> {
    let path = dir.join(sortase_agd::MANIFEST_FILE);
    let (pending, mut f) = OutputFile::create(&path)?;
    f.write_all(manifest.to_json().as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    drop(f);
    pending.commit()
}

/// The dataset's `duplicate` group (agd markdup), if it has one.
pub fn duplicate_group(manifest: &Manifest) -> Option<&sortase_agd::ExtraGroup> {
    manifest.extra_group(DUPLICATE_GROUP)
}

/// The `duplicate` column of `chunk` in `group` (`None`: the dataset has no such group).
pub fn duplicate_column(
    dir: &Path,
    group: Option<&sortase_agd::ExtraGroup>,
    chunk: &ChunkEntry,
) -> anyhow::Result<Option<BooleanArray>> {
    let Some(group) = group else {
        return Ok(None);
    };
    let file = extra::read_extra(dir, group, chunk)?;
    let column = file.batch.column(0);
    let b = column
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| sortase_agd::AgdError::chunk(&file.path, "duplicate is not Boolean"))?;
    Ok(Some(b.clone()))
}

/// Sets flag 0x400 on the records of `buf` (at `offsets`, with `block_size`) where `duplicate` is
/// true and clears it where false (null: the flag as imported).
pub fn apply_duplicates(buf: &mut [u8], offsets: &[u32], duplicate: &BooleanArray) {
    // flag: bytes 14..16 of the record after block_size (SAM spec §4.2).
    const FLAG_AT: usize = 4 + 14;
    for (i, &o) in offsets.iter().enumerate() {
        if duplicate.is_null(i) {
            continue;
        }
        let at = o as usize + FLAG_AT;
        let flag = u16::from_le_bytes([buf[at], buf[at + 1]]);
        let flag = if duplicate.value(i) {
            flag | sortase_bam::flags::DUPLICATE
        } else {
            flag & !sortase_bam::flags::DUPLICATE
        };
        buf[at..at + 2].copy_from_slice(&flag.to_le_bytes());
    }
}
