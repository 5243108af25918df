//! The runtime a job runs on: its own thread pool, a memory pool, the temporary directory, a
//! cancellation flag and a progress sink. Nothing in the library sizes or relies on rayon's global
//! pool: every parallel section runs inside [`Runtime::install`], and threads the library spawns
//! itself (inflate and deflate workers, range workers) are counted from [`Runtime::threads`]. Two jobs
//! in one process may run on runtimes of different sizes, at the same time or one after the other.

use crate::error::{Error, ErrorKind, Result};
use crate::memory::MemoryPool;
use crate::progress::{Progress, ProgressSink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// samtools' default memory per thread for sort (`SORT_DEFAULT_MEGS_PER_THREAD`), the default budget
/// per thread of a runtime.
pub const DEFAULT_MEMORY_PER_THREAD: usize = 768 << 20;

/// A cancellation flag shared by a job's threads. Loops check it between batches; once set the job
/// stops its threads, removes its temporary files and partial outputs, and returns
/// [`crate::error::ErrorKind::Cancelled`].
#[derive(Clone, Default, Debug)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(cancelled)` once the flag is set.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::cancelled())
        } else {
            Ok(())
        }
    }

    /// The shared flag, for crates below the facade that take a plain `Arc<AtomicBool>`.
    pub fn shared(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// Builds a [`Runtime`].
#[derive(Default)]
pub struct RuntimeBuilder {
    threads: Option<usize>,
    memory: Option<usize>,
    pool: Option<MemoryPool>,
    temp_dir: Option<PathBuf>,
    cancel: Option<CancelFlag>,
    progress: Option<Arc<dyn ProgressSink>>,
}

impl RuntimeBuilder {
    /// Threads in total (default: all cores).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n.max(1));
        self
    }

    /// A new memory pool of `bytes` (default: 768 MiB per thread, samtools sort's default).
    pub fn memory(mut self, bytes: usize) -> Self {
        self.memory = Some(bytes);
        self
    }

    /// Shares an existing memory pool (several runtimes, one budget).
    pub fn memory_pool(mut self, pool: MemoryPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Where temporary files go when a job names no place of its own (default: the system's).
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    /// Shares a cancellation flag (e.g. set by a signal handler).
    pub fn cancel_flag(mut self, flag: CancelFlag) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// Where progress goes (default: nowhere).
    pub fn progress(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Builds the runtime and its thread pool.
    pub fn build(self) -> Result<Runtime> {
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let id = next_runtime_id();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("sortase-{id}-{i}"))
            .build()
            .map_err(|e| Error::new(ErrorKind::Internal, format!("thread pool: {e}")))?;
        let memory = self.pool.unwrap_or_else(|| {
            MemoryPool::new(
                self.memory
                    .unwrap_or(DEFAULT_MEMORY_PER_THREAD.saturating_mul(threads)),
            )
        });
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                threads,
                pool: Arc::new(pool),
                memory,
                temp_dir: self.temp_dir.unwrap_or_else(std::env::temp_dir),
                cancel: self.cancel.unwrap_or_default(),
                progress: self.progress,
            }),
        })
    }
}

fn next_runtime_id() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

struct RuntimeInner {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
    memory: MemoryPool,
    temp_dir: PathBuf,
    cancel: CancelFlag,
    progress: Option<Arc<dyn ProgressSink>>,
}

/// Threads, memory, temporary directory, cancellation and progress for jobs; cheap to clone (shared).
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

impl Runtime {
    /// A builder.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime of `threads` threads with the default memory pool.
    pub fn with_threads(threads: usize) -> Result<Self> {
        Self::builder().threads(threads).build()
    }

    /// Threads in total.
    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// Runs `f` inside the runtime's thread pool (rayon's parallel iterators in `f` use it).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.inner.pool.install(f)
    }

    /// The thread pool.
    pub fn pool(&self) -> &rayon::ThreadPool {
        &self.inner.pool
    }

    /// The thread pool, shared (for crates below the facade that hold it).
    pub fn shared_pool(&self) -> Arc<rayon::ThreadPool> {
        self.inner.pool.clone()
    }

    /// The memory pool.
    pub fn memory(&self) -> &MemoryPool {
        &self.inner.memory
    }

    /// The default place for temporary files.
    pub fn temp_dir(&self) -> &Path {
        &self.inner.temp_dir
    }

    /// The cancellation flag.
    pub fn cancel_flag(&self) -> &CancelFlag {
        &self.inner.cancel
    }

    /// Asks every job on this runtime to stop.
    pub fn cancel(&self) {
        self.inner.cancel.cancel();
    }

    /// `Err(cancelled)` once cancelled.
    pub fn check_cancelled(&self) -> Result<()> {
        self.inner.cancel.check()
    }

    /// Progress of `label` over `total` units, reported to the runtime's sink.
    pub fn progress(&self, label: &str, total: u64) -> Progress {
        Progress::new(self.inner.progress.clone(), label, total)
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("threads", &self.inner.threads)
            .field("memory", &self.inner.memory)
            .field("temp_dir", &self.inner.temp_dir)
            .finish()
    }
}
