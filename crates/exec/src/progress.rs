//! Progress of long work, reported to whoever runs the job: the CLI draws an `indicatif` bar on a
//! terminal, the Python package a tqdm bar, the Dask driver counts tasks. The library itself never
//! prints.
//!
//! Hot loops only add to an atomic counter ([`Progress::add`], or a reader wrapped by
//! [`Progress::wrap`]); a ticker thread, started only when the runtime has a sink, passes the count to
//! the sink five times a second, so reporting costs nothing per record.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Receives progress updates (called from a ticker thread, never from a hot loop).
pub trait ProgressSink: Send + Sync {
    /// Work `label` has done `done` of `total` units (bytes; `total` 0: unknown).
    fn update(&self, label: &str, done: u64, total: u64);
    /// Work `label` has ended (successfully or not).
    fn finish(&self, label: &str);
}

/// Counts bytes read through it.
pub struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The progress of one piece of work: a counter and, with a sink, a ticker reporting it.
pub struct Progress {
    label: String,
    count: Arc<AtomicU64>,
    sink: Option<Arc<dyn ProgressSink>>,
    ticker: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Progress {
    /// Progress of `label` over `total` units (0: unknown), reported to `sink` if any.
    pub fn new(sink: Option<Arc<dyn ProgressSink>>, label: &str, total: u64) -> Self {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = sink.clone().map(|sink| {
            let (count, stop, label) = (count.clone(), stop.clone(), label.to_string());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    sink.update(&label, count.load(Ordering::Relaxed), total);
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            })
        });
        Self {
            label: label.to_string(),
            count,
            sink,
            ticker,
            stop,
        }
    }

    /// Progress that nobody watches.
    pub fn hidden() -> Self {
        Self::new(None, "", 0)
    }

    /// Wraps a reader so its bytes advance the count.
    pub fn wrap<R: Read>(&self, inner: R) -> CountingReader<R> {
        CountingReader {
            inner,
            count: self.count.clone(),
        }
    }

    /// Advances the count by `n` (for work not read through [`Progress::wrap`]).
    pub fn add(&self, n: u64) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn done(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Ends the work.
    pub fn finish(mut self) {
        self.stop_ticker();
    }

    fn stop_ticker(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
            if let Some(s) = &self.sink {
                s.finish(&self.label);
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_ticker();
    }
}
