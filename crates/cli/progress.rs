//! A progress bar on stderr when it is a terminal, driven by the bytes read from the input.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// A bar over `total` input bytes (hidden unless stderr is a terminal), ticking from a counter.
pub struct Progress {
    bar: ProgressBar,
    count: Arc<AtomicU64>,
    ticker: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    /// A bar for reading `total` bytes (0: unknown) labelled `label`.
    pub fn new(label: &str, total: u64) -> Self {
        let bar = if std::io::stderr().is_terminal() {
            let bar = if total > 0 {
                ProgressBar::new(total)
            } else {
                ProgressBar::new_spinner()
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "{msg} {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_message(label.to_string());
            bar
        } else {
            ProgressBar::hidden()
        };
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = (!bar.is_hidden()).then(|| {
            let (bar, count, stop) = (bar.clone(), count.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    bar.set_position(count.load(Ordering::Relaxed));
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            })
        });
        Self {
            bar,
            count,
            ticker,
            stop,
        }
    }

    /// Wraps a reader so its bytes advance the bar.
    pub fn wrap<R: Read>(&self, inner: R) -> CountingReader<R> {
        CountingReader {
            inner,
            count: self.count.clone(),
        }
    }

    /// Advances the bar by `n` bytes (for work not read through [`Progress::wrap`]).
    pub fn add(&self, n: u64) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    /// Removes the bar.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}
