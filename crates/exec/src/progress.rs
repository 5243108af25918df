//! Progress of long work, reported to whoever runs the job: the CLI draws an `indicatif` bar on a
//! terminal, the Python package a tqdm bar, the Dask driver counts tasks. The library itself never
//! prints.
//!
//! Hot loops only add to an atomic counter ([`Progress::add`], or a reader wrapped by
//! [`Progress::wrap`]); a ticker thread, started only when the runtime has a sink, passes the count to
//! the sink five times a second, so reporting costs nothing per record. Ending the work wakes the
//! ticker instead of waiting out its period: a job that takes 5 ms is not held for 200.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the ticker passes the count to the sink.
const PERIOD: Duration = Duration::from_millis(200);

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
        Self::with_period(sink, label, total, PERIOD)
    }

    fn with_period(
        sink: Option<Arc<dyn ProgressSink>>,
        label: &str,
        total: u64,
        period: Duration,
    ) -> Self {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = sink.clone().map(|sink| {
            let (count, stop, label) = (count.clone(), stop.clone(), label.to_string());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    sink.update(&label, count.load(Ordering::Relaxed), total);
                    // Woken early by `stop_ticker` (an unpark before the park returns at once).
                    std::thread::park_timeout(period);
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
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.ticker.take() {
            t.thread().unpark();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Instant;

    #[derive(Default)]
    struct Seen(Mutex<Vec<(u64, bool)>>);

    impl ProgressSink for Seen {
        fn update(&self, _label: &str, done: u64, _total: u64) {
            self.0.lock().unwrap().push((done, false));
        }
        fn finish(&self, _label: &str) {
            self.0.lock().unwrap().push((0, true));
        }
    }

    #[test]
    fn finishing_wakes_the_ticker_instead_of_waiting_out_its_period() {
        let seen = Arc::new(Seen::default());
        // A period no test run waits out: finishing must not depend on it.
        let period = Duration::from_secs(600);
        let p = Progress::with_period(Some(seen.clone()), "x", 10, period);
        p.add(7);
        let start = Instant::now();
        p.finish();
        assert!(
            start.elapsed() < period / 2,
            "finish waited {:?}",
            start.elapsed()
        );
        let seen = seen.0.lock().unwrap();
        assert_eq!(seen.last(), Some(&(0, true)), "{seen:?}");
    }

    #[test]
    fn the_ticker_reports_the_count_every_period() {
        let seen = Arc::new(Seen::default());
        let p = Progress::with_period(Some(seen.clone()), "x", 0, Duration::from_millis(1));
        p.add(5);
        let start = Instant::now();
        while seen.0.lock().unwrap().iter().all(|&(done, _)| done != 5) {
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "no report of the count"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(p);
        assert_eq!(seen.0.lock().unwrap().last(), Some(&(0, true)));
    }
}
