//! An ordered worker pool: inputs are processed on N threads and results come out in submission order.
//!
//! This is the backbone of the parallel reader and writer (and of any ordered parallel stage, such as
//! SAM formatting). Order is kept with one single-use channel per job: the submitter queues the job's
//! receiving end in a bounded "order" channel before handing the job to the workers, and the collector
//! waits on those receivers in turn. The order channel's capacity bounds the jobs in flight, so memory
//! stays flat however fast the producer is.

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use std::thread;

/// The submitting side of an [`ordered_pool`].
pub struct Submitter<I, O> {
    jobs: Sender<(I, Sender<O>)>,
    order: Sender<Receiver<O>>,
}

/// The collecting side of an [`ordered_pool`]: yields results in submission order.
pub struct Collector<O> {
    order: Receiver<Receiver<O>>,
}

/// The collector is gone: nobody will read further results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnected;

/// Starts `threads` workers, each running a function made by `make_worker`, with at most `in_flight`
/// jobs submitted but not yet collected.
///
/// ```
/// let (tx, rx) = sortase_bgzf::pool::ordered_pool(3, 4, || |x: u32| x * 2);
/// std::thread::spawn(move || for i in 0..100 { tx.submit(i).unwrap(); });
/// let out: Vec<u32> = rx.collect();
/// assert_eq!(out, (0..100).map(|i| i * 2).collect::<Vec<_>>());
/// ```
pub fn ordered_pool<I, O, W, F>(
    threads: usize,
    in_flight: usize,
    make_worker: W,
) -> (Submitter<I, O>, Collector<O>)
where
    I: Send + 'static,
    O: Send + 'static,
    W: Fn() -> F,
    F: FnMut(I) -> O + Send + 'static,
{
    let (jobs_tx, jobs_rx) = unbounded::<(I, Sender<O>)>();
    let (order_tx, order_rx) = bounded(in_flight.max(1));
    for _ in 0..threads.max(1) {
        let jobs_rx = jobs_rx.clone();
        let mut work = make_worker();
        thread::spawn(move || {
            for (input, reply) in jobs_rx {
                // The collector may be gone (early stop); the result is then dropped.
                let _ = reply.send(work(input));
            }
        });
    }
    (
        Submitter {
            jobs: jobs_tx,
            order: order_tx,
        },
        Collector { order: order_rx },
    )
}

impl<I, O> Submitter<I, O> {
    /// Queues `input`; blocks while `in_flight` jobs are waiting to be collected.
    pub fn submit(&self, input: I) -> Result<(), Disconnected> {
        let (reply_tx, reply_rx) = bounded(1);
        self.order.send(reply_rx).map_err(|_| Disconnected)?;
        self.jobs.send((input, reply_tx)).map_err(|_| Disconnected)
    }

    /// Queues a result that needs no work (for example an error), keeping its place in the order.
    pub fn submit_ready(&self, output: O) -> Result<(), Disconnected> {
        let (reply_tx, reply_rx) = bounded(1);
        reply_tx.send(output).map_err(|_| Disconnected)?;
        self.order.send(reply_rx).map_err(|_| Disconnected)
    }
}

impl<O> Iterator for Collector<O> {
    type Item = O;

    fn next(&mut self) -> Option<O> {
        let reply = self.order.recv().ok()?;
        // INVARIANT: a worker always answers a job it took; a closed reply channel means it panicked.
        Some(reply.recv().expect("a worker thread panicked"))
    }
}
