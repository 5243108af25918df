//! The alignment work queue (Persona's fine-grained executor, issue 20): one reader thread cuts the
//! FASTQ input into small chunks of whole fragments (~64 KiB of bases) and puts them on ONE bounded
//! queue; every mapping thread takes the next chunk as soon as it is free, so no thread idles while
//! another finishes a large batch (minimap2's CLI maps 500 Mbases per step and waits for the slowest
//! thread at each step's end). Mapped chunks come back to the calling thread, which hands them on
//! in input order.
//!
//! Bounded: the reader takes a credit per chunk and the caller returns it once the chunk is handed
//! on, so at most `in_flight` chunks exist at a time (queued, being mapped, or waiting for an
//! earlier one), whatever the speed of each stage. Read buffers go back to the reader for reuse.
//! If the caller fails, dropping the channels stops the reader and the mappers.

use crate::error::AlignError;
use crate::index::Aligner;
use crate::mapper::{AlignedBatch, Mapper};
use crate::reads::{ChunkSource, ReadChunk};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bases per chunk of the work queue: ~200 short-read pairs, a few long reads; tens of
/// milliseconds of mapping, so a thread's share of the last chunks is small.
pub const CHUNK_BASES: usize = 64 << 10;

/// How the pipeline runs.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Mapping threads.
    pub threads: usize,
    /// Bases per chunk.
    pub chunk_bases: usize,
    /// Most chunks alive at a time (at least `threads + 1`).
    pub in_flight: usize,
}

impl PipelineOptions {
    /// `threads` mapping threads with four chunks in flight per thread.
    pub fn new(threads: usize) -> Self {
        let threads = threads.max(1);
        Self {
            threads,
            chunk_bases: CHUNK_BASES,
            in_flight: threads * 4,
        }
    }
}

/// What the pipeline did.
#[derive(Debug, Clone, Default)]
pub struct PipelineStats {
    /// Reads mapped.
    pub reads: u64,
    /// Fragments (templates) mapped.
    pub fragments: u64,
    /// Bases mapped.
    pub bases: u64,
    /// Records written.
    pub records: u64,
    /// Chunks of the work queue.
    pub chunks: u64,
}

type Mapped<T> = Result<(AlignedBatch, T), AlignError>;

/// A mapping thread: maps the chunks it receives (until `stop` or the end), hands each back for
/// reuse and sends what it made of it.
fn map_chunks<T>(
    aligner: &Aligner,
    stop: &AtomicBool,
    work_rx: Receiver<(u64, ReadChunk)>,
    done_tx: Sender<(u64, Mapped<T>)>,
    free_tx: Sender<ReadChunk>,
    prepare: &(impl Fn(&ReadChunk, &AlignedBatch) -> T + Sync),
) {
    let mut mapper = Mapper::new(aligner);
    while let Ok((seq, chunk)) = work_rx.recv() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mapped = mapper.map_chunk(&chunk).map(|b| {
            let t = prepare(&chunk, &b);
            (b, t)
        });
        let _ = free_tx.send(chunk);
        if done_tx.send((seq, mapped)).is_err() {
            break;
        }
    }
}

/// Gives the mapped chunks to `consume` in input order (a credit back to the reader for each);
/// the number of chunks consumed.
fn consume_in_order<T, E: From<AlignError>>(
    done_rx: &Receiver<(u64, Mapped<T>)>,
    credit_tx: &Sender<()>,
    stats: &mut PipelineStats,
    consume: &mut impl FnMut(AlignedBatch, T) -> Result<(), E>,
) -> Result<u64, E> {
    let mut waiting: BTreeMap<u64, Mapped<T>> = BTreeMap::new();
    let mut next = 0u64;
    for (seq, mapped) in done_rx.iter() {
        waiting.insert(seq, mapped);
        while let Some(mapped) = waiting.remove(&next) {
            let (batch, t) = mapped?;
            stats.reads += batch.reads as u64;
            stats.bases += batch.bases as u64;
            stats.records += batch.records.len() as u64;
            consume(batch, t)?;
            next += 1;
            let _ = credit_tx.send(());
        }
    }
    Ok(next)
}

/// Maps all of `source` on `opts.threads` threads. `prepare` runs on the mapping thread right after
/// a chunk is mapped, with the chunk's reads and its records (work that needs no order, e.g.
/// duplicate signatures, or the checksums of the reads); `consume` gets every
/// chunk with what `prepare` made of it, in input order, on the calling thread. `stop` (checked
/// between chunks) cancels the run; it then ends with the error `consume` or the reader gave, or
/// `AlignError::Stopped`.
pub fn run<T, E>(
    aligner: &Aligner,
    mut source: impl ChunkSource,
    opts: &PipelineOptions,
    stop: &AtomicBool,
    prepare: impl Fn(&ReadChunk, &AlignedBatch) -> T + Sync,
    mut consume: impl FnMut(AlignedBatch, T) -> Result<(), E>,
) -> Result<PipelineStats, E>
where
    T: Send,
    E: From<AlignError>,
{
    let in_flight = opts.in_flight.max(opts.threads + 1);
    let mut stats = PipelineStats::default();
    let (consumed, read) = std::thread::scope(|s| {
        let (work_tx, work_rx) = bounded::<(u64, ReadChunk)>(in_flight);
        let (done_tx, done_rx) = bounded::<(u64, Mapped<T>)>(in_flight);
        let (credit_tx, credit_rx) = bounded::<()>(in_flight);
        let (free_tx, free_rx) = unbounded::<ReadChunk>();
        for _ in 0..in_flight {
            // INVARIANT: the channel holds `in_flight` credits and its receiver is alive.
            credit_tx.send(()).expect("credit channel open");
        }
        let chunk_bases = opts.chunk_bases.max(1);
        let reader = s.spawn(move || -> Result<u64, AlignError> {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) && credit_rx.recv().is_ok() {
                let mut chunk = free_rx.try_recv().unwrap_or_default();
                source.fill(&mut chunk, chunk_bases)?;
                if chunk.is_empty() || work_tx.send((seq, chunk)).is_err() {
                    break;
                }
                seq += 1;
            }
            Ok(source.fragments())
        });
        for _ in 0..opts.threads {
            let (work_rx, done_tx, free_tx) = (work_rx.clone(), done_tx.clone(), free_tx.clone());
            let prepare = &prepare;
            s.spawn(move || map_chunks(aligner, stop, work_rx, done_tx, free_tx, prepare));
        }
        drop((work_rx, done_tx, free_tx));
        let consumed = consume_in_order(&done_rx, &credit_tx, &mut stats, &mut consume);
        drop((done_rx, credit_tx));
        let read = reader.join();
        (consumed, read)
    });
    let chunks = consumed?;
    let fragments = match read {
        Ok(r) => r?,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    if stop.load(Ordering::Relaxed) {
        return Err(AlignError::Stopped("interrupted".into()).into());
    }
    stats.chunks = chunks;
    stats.fragments = fragments;
    Ok(stats)
}
