//! Running a job from Python: the runtime built per call, the job on a thread of its own, and the
//! calling thread waiting in short slices without the GIL, between which it handles signals (Ctrl-C
//! cancels the job, which removes its temporary and partial files, then `KeyboardInterrupt` is
//! raised) and passes progress to a Python callback.

use crate::error::{raise, to_py_err};
use pyo3::prelude::*;
use sortase::{CancelFlag, ProgressSink, Runtime};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the waiting thread checks signals and reports progress.
const SLICE: Duration = Duration::from_millis(100);

/// The latest progress, kept for the waiting thread (the sink is called from the runtime's ticker
/// thread, which must not take the GIL).
#[derive(Default)]
pub struct LatestProgress {
    state: Mutex<Option<(String, u64, u64)>>,
}

impl ProgressSink for LatestProgress {
    fn update(&self, label: &str, done: u64, total: u64) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some((label.into(), done, total));
    }

    fn finish(&self, _label: &str) {}
}

impl LatestProgress {
    fn report(&self, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        let latest = self.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((label, done, total)) = latest {
            callback.call1((label, done, total))?;
        }
        Ok(())
    }
}

/// A runtime for one call: `threads` (default all cores), `memory` bytes (default 768 MiB per thread),
/// its own cancellation flag, and progress kept in `progress`.
pub fn runtime(
    threads: Option<usize>,
    memory: Option<usize>,
    progress: &Arc<LatestProgress>,
) -> sortase::Result<Runtime> {
    if threads == Some(0) {
        return Err(sortase::Error::argument("threads must be at least 1"));
    }
    let mut b = Runtime::builder()
        .cancel_flag(CancelFlag::new())
        .progress(progress.clone());
    if let Some(t) = threads {
        b = b.threads(t);
    }
    if let Some(m) = memory {
        b = b.memory(m);
    }
    b.build()
}

/// Runs `job` on a thread of its own while this thread waits without the GIL; Ctrl-C cancels it.
pub fn run_job<T: Send + 'static>(
    py: Python<'_>,
    rt: &Runtime,
    progress: Option<(&Bound<'_, PyAny>, &LatestProgress)>,
    job: impl FnOnce() -> sortase::Result<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, mut rx) = channel();
    let handle = std::thread::Builder::new()
        .name("sortase-job".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            let _ = tx.send(r);
        })
        .map_err(|e| raise(py, "InternalError", &format!("cannot start a thread: {e}")))?;
    loop {
        let (got, back) = py.detach(move || (rx.recv_timeout(SLICE), rx));
        rx = back;
        match got {
            Ok(result) => {
                let _ = handle.join();
                return match result {
                    Ok(Ok(v)) => Ok(v),
                    Ok(Err(e)) => Err(to_py_err(py, e)),
                    Err(panic) => Err(raise(py, "InternalError", &panic_message(&panic))),
                };
            }
            Err(RecvTimeoutError::Timeout) => {
                let interrupted = py.check_signals();
                let reported = match (&interrupted, progress) {
                    (Ok(()), Some((callback, latest))) => latest.report(callback),
                    _ => Ok(()),
                };
                if let Err(e) = interrupted.and(reported) {
                    rt.cancel();
                    py.detach(move || {
                        let _ = handle.join();
                    });
                    return Err(e);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = handle.join();
                return Err(raise(
                    py,
                    "InternalError",
                    "the job's thread ended without a result",
                ));
            }
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("internal error (a bug; please report it): {text}")
}
