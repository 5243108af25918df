//! The worker process's minimap2 index for distributed fq2bam's align tasks
//! ([`crate::tasks::FqAlignTask`]): loaded by the process's first align task, kept for the next
//! ones while the index file (its identity, size and mtime) and the options that build it stay the
//! same. The identity is the file's (device, inode), not its path: tasks on object storage see the
//! index under a name in their own scratch directory, a link to the worker's one copy of it.

use crate::job::{self as one, Fq2BamJob};
use crate::Aligner;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What identifies a loaded index: its file and the options it was built or loaded with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IndexKey {
    file: (u64, u64),
    len: u64,
    modified: Option<std::time::SystemTime>,
    preset: String,
    md: bool,
    cs: bool,
    read_group: Option<String>,
}

/// The worker process's index: loaded by its first align task, kept for the next ones.
static INDEX: Mutex<Option<(IndexKey, Arc<Aligner>)>> = Mutex::new(None);
/// Indexes this process has loaded (built or read).
static INDEX_LOADS: AtomicU64 = AtomicU64::new(0);

/// How many times this process has loaded a minimap2 index for align tasks.
pub fn index_loads() -> u64 {
    INDEX_LOADS.load(Ordering::Relaxed)
}

/// The index of `job`, from the process's cache or loaded (then cached, replacing another);
/// whether it was loaded now.
pub fn cached_aligner(job: &Fq2BamJob, threads: usize) -> anyhow::Result<(Arc<Aligner>, bool)> {
    let meta = std::fs::metadata(&job.index)
        .map_err(|e| one::kinded(crate::AlignError::io(&job.index, e)))?;
    let key = IndexKey {
        file: identity(&meta),
        len: meta.len(),
        modified: meta.modified().ok(),
        preset: job.preset.clone(),
        md: job.md,
        cs: job.cs,
        read_group: job.read_group.clone(),
    };
    // Held while loading: a second task of this process waits instead of loading it again.
    let mut slot = INDEX.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((k, a)) = slot.as_ref() {
        if *k == key {
            return Ok((a.clone(), false));
        }
    }
    // The old index first: two need not fit at once.
    *slot = None;
    let aligner =
        Aligner::load(&job.index, &one::aligner_options(job, threads)).map_err(one::kinded)?;
    INDEX_LOADS.fetch_add(1, Ordering::Relaxed);
    let aligner = Arc::new(aligner);
    *slot = Some((key, aligner.clone()));
    Ok((aligner, true))
}

/// The file's (device, inode): the same for every name (hard link) of one file.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}
