//! [`DatasetSink`]: the AGD sink of the sort job (`sortase sort -O agd`, `sortase agd sort`), a new
//! dataset holding the sorted records.
//!
//! The sort's final phase hands out key ranges on all threads; each range's records are cut into
//! chunks of at most `chunk_size` records and encoded and written by the thread that merged them
//! (`Sorter::finish_ranges`), into a staging directory, then renamed to their index in order. A chunk
//! never spans two ranges, so chunks are `chunk_size` records except the last of each range. The new
//! dataset is written into a hidden directory next to the output and renamed at the end, as import
//! does.
//!
//! Of a dataset source, the `duplicate` group is applied to the records' flags before they are
//! sorted (the sorted dataset holds them in `flag`); other extra groups are not carried (their rows
//! would need the permutation): [`DatasetSink::extra_group_warnings`] names each.

use super::{check_new_output, hidden_sibling, write_chunk, CHUNK_BYTES, DEFAULT_ZSTD_LEVEL};
use crate::files::TempDir;
use crate::options::{OutputSpec, PhaseClock};
use crate::progress::Progress;
use crate::range_output::Counted;
use crate::runtime::Runtime;
use crate::sorting::{Held, SortFrame};
use anyhow::Context;
use sortase_agd::{self as agd, ChunkBuilder, Group, Manifest};
use sortase_bam::Header;
use sortase_sort::{RangeSource, SortError, SortStats};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A new dataset being written: its hidden directory (renamed to `output` by [`Self::finish`]), the
/// chunks' zstd level and size, and the record counts of the chunks written.
pub struct DatasetSink {
    output: PathBuf,
    hidden: TempDir,
    chunk_size: u64,
    zstd_level: i32,
    counts: Vec<u64>,
}

fn sort_error(e: impl std::fmt::Display) -> SortError {
    SortError::Output(std::io::Error::other(e.to_string()))
}

impl DatasetSink {
    /// Opens the dataset `output` (must not exist, or be empty) of `chunk_size` records per chunk,
    /// its files at `output`'s `level` (zstd; default [`DEFAULT_ZSTD_LEVEL`]).
    pub fn open(output: &OutputSpec, path: &Path, chunk_size: u64) -> anyhow::Result<Self> {
        if chunk_size == 0 {
            crate::error::bail_argument!("--chunk-size 0: must be at least 1");
        }
        let zstd_level = output.level.unwrap_or(DEFAULT_ZSTD_LEVEL);
        super::check_zstd_level(zstd_level, "-l")?;
        check_new_output(path)?;
        let hidden = hidden_sibling(path)?;
        let dir = hidden.path();
        for d in [dir.to_path_buf(), dir.join(".staging")] {
            for g in Group::ALL {
                std::fs::create_dir_all(d.join(g.name()))
                    .with_context(|| format!("{}: cannot create", d.display()))?;
            }
        }
        Ok(Self {
            output: path.to_path_buf(),
            hidden,
            chunk_size,
            zstd_level,
            counts: Vec::new(),
        })
    }

    /// The warnings of a dataset source whose extra groups (but `duplicate`, applied to the flags)
    /// the sorted dataset does not carry.
    pub fn extra_group_warnings(source: &Manifest) -> Vec<String> {
        source
            .extra
            .iter()
            .filter(|g| g.name != sortase_agd::extra::DUPLICATE_GROUP)
            .map(|g| {
                format!(
                    "[agd sort] extra group {} is not carried into the sorted dataset; add it again",
                    g.name
                )
            })
            .collect()
    }

    /// Chunks written so far.
    pub fn chunks(&self) -> usize {
        self.counts.len()
    }

    /// The final phase: each key range's records cut into chunks of at most `chunk_size` records,
    /// written into the staging directory by the thread that merged them, then renamed to their
    /// index in order (the records counted into `written`).
    pub fn write(
        &mut self,
        rt: &Runtime,
        frame: SortFrame,
        clock: &mut PhaseClock,
        written: &Progress,
    ) -> anyhow::Result<(SortStats, Held)> {
        let dir = self.hidden.path().to_path_buf();
        let staging = dir.join(".staging");
        let options = agd::WriteOptions {
            zstd_level: self.zstd_level,
            ..agd::WriteOptions::default()
        };
        let chunk_size = self.chunk_size;
        let staged = AtomicUsize::new(0);
        let encode = |records: &mut sortase_sort::RangeRecords<'_>| {
            let mut out: Vec<(usize, u64)> = Vec::new();
            let mut chunk = ChunkBuilder::default();
            let mut flush = |chunk: &mut ChunkBuilder| -> std::result::Result<(), SortError> {
                let i = staged.fetch_add(1, Ordering::Relaxed);
                let w = write_chunk(&staging, i, std::mem::take(chunk), &options, None)
                    .map_err(sort_error)?;
                out.push((i, w.records));
                Ok(())
            };
            Counted::new(records, written).for_each(|raw| {
                if chunk.len() as u64 == chunk_size || chunk.bytes() + raw.len() > CHUNK_BYTES {
                    flush(&mut chunk)?;
                }
                chunk.push(&raw[4..]).map_err(sort_error)
            })?;
            if !chunk.is_empty() {
                flush(&mut chunk)?;
            }
            Ok(out)
        };
        let counts = &mut self.counts;
        let sink = |staged_chunks: Vec<(usize, u64)>| {
            for (i, records) in staged_chunks {
                for g in Group::ALL {
                    let from = agd::chunk_path(&staging, g, i);
                    let to = agd::chunk_path(&dir, g, counts.len());
                    std::fs::rename(&from, &to)?;
                }
                counts.push(records);
            }
            Ok(())
        };
        frame
            .finish_ranges(rt.threads(), clock, encode, sink)
            .with_context(|| dir.display().to_string())
    }

    /// Writes the manifest (`header` and its references, the chunks' record counts, `command_line`
    /// as every group's provenance) and renames the dataset into place.
    pub fn finish(self, header: &Header, command_line: &str) -> anyhow::Result<()> {
        let dir = self.hidden.path().to_path_buf();
        let staging = dir.join(".staging");
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("{}: cannot remove", staging.display()))?;
        let mut manifest = super::new_manifest(header, self.chunk_size, command_line);
        manifest.set_chunks(&self.counts);
        let manifest_path = dir.join(agd::MANIFEST_FILE);
        std::fs::write(&manifest_path, manifest.to_json())
            .with_context(|| format!("{}: cannot write", manifest_path.display()))?;
        std::fs::rename(&dir, &self.output).with_context(|| {
            format!(
                "{}: cannot rename from {}",
                self.output.display(),
                dir.display()
            )
        })?;
        drop(self.hidden);
        Ok(())
    }
}
