//! Ranges decoded on worker threads, handed out in file order, in bounded memory.
//!
//! Workers take ranges in order, but never more than `window` ranges past the one the consumer is
//! reading; each range's record batches queue in its slot until the consumer gets there, and a
//! worker waits while the queues hold more than [`QUEUED_BYTES_PER_RANGE`] per range of the window
//! (the worker the consumer waits for never does). The consumer passes the batches of a range on as
//! they come, so memory is bounded whatever the file's size: the queues' budget plus one batch
//! being built per worker.
//!
//! Correctness does not rest on the boundary finder: a range's start is trusted only once the range
//! before it has ended exactly there (the consumer reads ranges in order). If a range runs past its
//! planned end without a record starting there (`BamError::RangeBoundary`), its records so far are
//! still right, so the stream drops every later range and goes on with one range from where that
//! range's last delivered record ended.

use crate::columns::BatchBuilder;
use crate::plan::Plan;
use crate::schema::Layout;
use arrow_array::{ArrayRef, RecordBatch};
use sortase::{CancelFlag, Error, Result};
use sortase_bam::query::Region;
use sortase_bam::{virtual_offset, BamError, RecordRef};
use sortase_bgzf::ChunkBuffers;
use sortase_index::range::RangeStream;
use sortase_ops::filter::expr::Scratch;
use sortase_ops::filter::RecordFilter;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Rows of one record batch (fewer at the end of a range).
pub const BATCH_ROWS: usize = 65536;
/// A batch is cut once a variable-length column holds this many bytes (Arrow's `utf8` offsets are
/// 32-bit; long reads reach it before [`BATCH_ROWS`]).
pub const BATCH_BYTES: usize = 256 << 20;

/// Arrow bytes the queues may hold per range of the window before workers ahead of the consumer
/// wait (highly compressible data inflates a 4 MiB range to ~100 MiB).
pub const QUEUED_BYTES_PER_RANGE: usize = 16 << 20;

/// How a range ended.
pub(crate) enum End {
    /// Read to its end.
    Done,
    /// Met a record past the region: nothing after it can overlap.
    Past,
    /// Ran past its planned end without meeting a record start; `resume` is the virtual offset
    /// right after its last delivered record.
    Boundary { resume: u64 },
    /// Failed.
    Failed(Error),
}

#[derive(Default)]
struct Slot {
    batches: VecDeque<RecordBatch>,
    end: Option<End>,
}

struct State {
    next_task: usize,
    current: usize,
    /// Bytes of the batches queued in all slots.
    queued: usize,
    slots: BTreeMap<usize, Slot>,
    stop: bool,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    window: usize,
    tasks: usize,
    max_queued: usize,
}

impl Shared {
    pub fn new(tasks: usize, window: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                next_task: 0,
                current: 0,
                queued: 0,
                slots: BTreeMap::new(),
                stop: false,
            }),
            changed: Condvar::new(),
            window: window.max(1),
            tasks,
            max_queued: window.max(1) * QUEUED_BYTES_PER_RANGE,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next task for a worker (waits while it would be too far ahead); `None`: no more work.
    pub fn take_task(&self) -> Option<usize> {
        let mut s = self.lock();
        loop {
            if s.stop || s.next_task >= self.tasks {
                return None;
            }
            if s.next_task < s.current + self.window {
                let k = s.next_task;
                s.next_task += 1;
                s.slots.entry(k).or_default();
                return Some(k);
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Queues a batch of task `k`; false once the stream is stopped. Waits while the queues hold
    /// more than their budget, unless this is the batch the consumer is waiting for.
    pub fn push(&self, k: usize, batch: RecordBatch) -> bool {
        let bytes = batch.get_array_memory_size();
        let mut s = self.lock();
        loop {
            if s.stop {
                return false;
            }
            let awaited = k == s.current && s.slots.get(&k).is_none_or(|x| x.batches.is_empty());
            if s.queued <= self.max_queued || awaited {
                break;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.queued += bytes;
        s.slots.entry(k).or_default().batches.push_back(batch);
        self.changed.notify_all();
        true
    }

    /// Ends task `k`.
    pub fn end(&self, k: usize, end: End) {
        let mut s = self.lock();
        s.slots.entry(k).or_default().end = Some(end);
        self.changed.notify_all();
    }

    /// Stops the workers.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }

    pub fn stopped(&self) -> bool {
        self.lock().stop
    }

    /// The consumer's next item: a batch of the current task, or the current task's end (the
    /// consumer then moves on); `None` after the last task.
    fn next(&self) -> Option<std::result::Result<RecordBatch, End>> {
        let mut s = self.lock();
        loop {
            if s.current >= self.tasks {
                return None;
            }
            let current = s.current;
            if let Some(slot) = s.slots.get_mut(&current) {
                if let Some(b) = slot.batches.pop_front() {
                    s.queued = s.queued.saturating_sub(b.get_array_memory_size());
                    self.changed.notify_all();
                    return Some(Ok(b));
                }
                if let Some(end) = slot.end.take() {
                    s.slots.remove(&current);
                    s.current += 1;
                    self.changed.notify_all();
                    return Some(Err(end));
                }
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// What the range workers share.
pub(crate) struct RangeWork {
    pub path: PathBuf,
    pub plan: Plan,
    pub n_ref: usize,
    pub layout: Arc<Layout>,
    pub names: ArrayRef,
    pub region: Option<Region>,
    /// The record filter (`None`: every record passes).
    pub filter: Option<Arc<RecordFilter>>,
    pub cancel: CancelFlag,
    pub batch_rows: usize,
    /// Records delivered.
    pub records: AtomicU64,
    /// Set when a range stops at a record past the region.
    pub past: AtomicBool,
    /// Compressed bytes of the ranges done.
    pub progress: Arc<sortase::Progress>,
    /// The file's size (the end of the last range).
    pub file_len: u64,
}

/// Where a record lies relative to a region (the input is sorted by coordinate, as an index needs).
enum Place {
    Before,
    In,
    Past,
}

#[inline]
fn place(r: &RecordRef<'_>, region: &Region) -> Place {
    let (tid, pos) = (r.reference_sequence_id(), i64::from(r.position()));
    let rtid = region.tid as i32;
    if tid < 0 || tid > rtid || (tid == rtid && pos >= region.end) {
        Place::Past
    } else if tid == rtid && r.end_position() > region.beg {
        Place::In
    } else {
        Place::Before
    }
}

/// Whether `r` passes `filter` (an expression that cannot be evaluated on it is an error, as in
/// samtools view).
#[inline]
pub(crate) fn keep(
    filter: Option<&RecordFilter>,
    r: &RecordRef<'_>,
    scratch: &mut Scratch,
) -> Result<bool> {
    match filter {
        None => Ok(true),
        Some(f) => f
            .passes(r, scratch)
            .map_err(|e| Error::from(anyhow::Error::new(e))),
    }
}

/// Appends `records` to `builder`, queueing a batch each time one fills; false once stopped.
pub(crate) fn feed(
    builder: &mut BatchBuilder,
    mut records: &[RecordRef<'_>],
    batch_rows: usize,
    mut emit: impl FnMut(RecordBatch) -> bool,
) -> Result<bool> {
    while !records.is_empty() {
        let take = batch_rows
            .saturating_sub(builder.rows())
            .clamp(1, records.len());
        builder.append(&records[..take]).map_err(format_error)?;
        records = &records[take..];
        if (builder.rows() >= batch_rows || builder.string_bytes() >= BATCH_BYTES)
            && !emit(builder.finish().map_err(format_error)?)
        {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(crate) fn format_error(message: String) -> Error {
    Error::new(sortase::ErrorKind::Format, message)
}

/// Chunk buffers a worker keeps for its next ranges: a range's reader has up to 4 batches in
/// flight, plus the chunk being split and the one being decoded.
const WORKER_BUFFERS: usize = 8;

/// What a worker keeps from one range to the next: its open file, its chunk buffers and its batch
/// builder (whose columns are sized from the last batch, see `buffers::next_capacity`).
pub(crate) struct WorkerState {
    pub file: sortase_io::Source,
    pub buffers: Arc<ChunkBuffers>,
    pub builder: BatchBuilder,
    /// The filter expression's buffers.
    pub scratch: Scratch,
}

/// Decodes range `k` of `work` into `shared`'s slot `k`.
pub(crate) fn run_range(work: &RangeWork, shared: &Shared, k: usize, state: &mut WorkerState) {
    let end = match decode_range(work, shared, k, state) {
        Ok(end) => end,
        Err(e) => End::Failed(e),
    };
    // A range that failed (maybe inside an append, leaving the columns uneven) or stopped leaves
    // rows behind: the next range starts from a new builder.
    if matches!(end, End::Failed(_)) || state.builder.rows() > 0 {
        state.builder = BatchBuilder::new(work.layout.clone(), work.names.clone());
    }
    shared.end(k, end);
}

fn decode_range(
    work: &RangeWork,
    shared: &Shared,
    k: usize,
    state: &mut WorkerState,
) -> Result<End> {
    let WorkerState {
        file,
        buffers,
        builder,
        scratch,
    } = state;
    let Some(range) = work.plan.range(k, file)? else {
        return Ok(End::Done);
    };
    let compressed = range.end.min(work.file_len << 16) >> 16;
    let _done = Done(&work.progress, compressed.saturating_sub(range.start >> 16));
    let mut stream =
        RangeStream::open_with_buffers(&work.path, &range, work.n_ref, Some(buffers.clone()))?;
    let emit = |b: RecordBatch| {
        work.records
            .fetch_add(b.num_rows() as u64, Ordering::Relaxed);
        shared.push(k, b)
    };
    let (mut cursor, mut resume) = (0usize, range.start);
    let mut end = End::Done;
    loop {
        work.cancel.check()?;
        if shared.stopped() {
            return Ok(End::Done);
        }
        let batch = match stream.next_batch() {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(BamError::RangeBoundary { .. }) => {
                end = End::Boundary { resume };
                break;
            }
            Err(e) => return Err(e.into()),
        };
        // One vector of views per chunk (~256 KiB of records), not per record.
        let mut records = Vec::with_capacity(batch.len());
        let reached_end = select(work, &batch, scratch, &mut records)?;
        if !feed(builder, &records, work.batch_rows, emit)? {
            return Ok(End::Done);
        }
        if reached_end {
            work.past.store(true, Ordering::Relaxed);
            end = End::Past;
            break;
        }
        let u_end = batch.stream_offset() + batch.bytes().len() as u64;
        resume = virtual_offset(stream.block_table(), &mut cursor, u_end);
        drop(records);
        buffers.put(batch.into_buffer());
    }
    if builder.rows() > 0 && !emit(builder.finish().map_err(format_error)?) {
        return Ok(End::Done);
    }
    Ok(end)
}

/// The records of `batch` the job keeps (in the region, passing the filter) onto `records`;
/// whether a record past the region's end was reached.
fn select<'b>(
    work: &RangeWork,
    batch: &'b sortase_bam::RecordBatch,
    scratch: &mut Scratch,
    records: &mut Vec<RecordRef<'b>>,
) -> Result<bool> {
    match &work.region {
        None => match work.filter.as_deref() {
            None => records.extend(batch.iter()),
            filter => {
                for r in batch.iter() {
                    if keep(filter, &r, scratch)? {
                        records.push(r);
                    }
                }
            }
        },
        Some(region) => {
            for r in batch.iter() {
                match place(&r, region) {
                    Place::Before => {}
                    Place::In => {
                        if keep(work.filter.as_deref(), &r, scratch)? {
                            records.push(r);
                        }
                    }
                    Place::Past => return Ok(true),
                }
            }
        }
    }
    Ok(false)
}

/// Adds a range's compressed bytes to the progress when the range ends.
struct Done<'a>(&'a sortase::Progress, u64);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.add(self.1);
    }
}

/// Worker threads and the ordered queue they fill.
pub(crate) struct Workers {
    pub shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts `threads` workers over `work`'s plan.
    pub fn ranges(work: Arc<RangeWork>, threads: usize) -> Self {
        let tasks = work.plan.len();
        let threads = threads.clamp(1, tasks);
        let shared = Shared::new(tasks, threads * 2);
        let handles = (0..threads)
            .map(|i| {
                let (work, shared) = (work.clone(), shared.clone());
                std::thread::Builder::new()
                    .name(format!("sortase-arrow-{i}"))
                    .spawn(move || {
                        let file = match sortase_io::Source::open_path(&work.path) {
                            Ok(f) => f,
                            Err(e) => {
                                while let Some(k) = shared.take_task() {
                                    let e = std::io::Error::new(e.kind(), e.to_string());
                                    shared.end(k, End::Failed(e.into()));
                                }
                                return;
                            }
                        };
                        let mut state = WorkerState {
                            file,
                            buffers: Arc::new(ChunkBuffers::new(WORKER_BUFFERS)),
                            builder: BatchBuilder::new(work.layout.clone(), work.names.clone()),
                            scratch: Scratch::default(),
                        };
                        while let Some(k) = shared.take_task() {
                            run_range(&work, &shared, k, &mut state);
                        }
                    })
                    .expect("spawn a worker thread")
            })
            .collect();
        Self { shared, handles }
    }

    /// One producer thread filling task 0.
    pub fn single(produce: impl FnOnce(&Shared) -> End + Send + 'static) -> Self {
        let shared = Shared::new(1, 1);
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("sortase-arrow-input".into())
            .spawn(move || {
                let k = s.take_task();
                debug_assert_eq!(k, Some(0));
                let end = produce(&s);
                s.end(0, end);
            })
            .expect("spawn the input thread");
        Self {
            shared,
            handles: vec![handle],
        }
    }

    /// The next batch, or the end of the current task.
    pub fn next(&self) -> Option<std::result::Result<RecordBatch, End>> {
        self.shared.next()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.stop();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
