//! The sorter: batches of raw records accumulate under a memory budget; a full budget is sorted on all
//! cores and spilled as a run; runs are compacted in the background so the final merge never opens more
//! than `max_fan_in` sources; the last batch stays in memory.
//!
//! Stability: every entry carries `batch << 32 | record` (input order within the in-memory set) and runs
//! are numbered in input order, so records that compare equal come out in input order, as samtools'.
//! Every record also has an input sequence number (stored in runs), and every
//! `sample_every`-th record ([`RangePlan`]) is kept as a candidate split point, so the final phase
//! can cut the output into key ranges that depend on the input alone ([`crate::ranges`]).

use crate::final_merge::{ordered_tasks, FinalSources, RangeRecords, RangeSource};
use crate::merge::{memory_seq, merge, Source};
use crate::name_key::NameKeys;
use crate::order::{coordinate_key, tag_at, tag_offset, SortOrder};
use crate::ranges::{choose_splits, RangePlan, SplitPoint};
use crate::run::{write_run, RunFile, RunReader};
use crate::template::TIE_SAME_NAME;
use crate::SortError;
use rayon::prelude::*;
use sortase_bam::{RecordBatch, RecordRef};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Memory for records held in memory, granted by the caller (the facade's memory pool): the sorter
/// asks before it keeps a batch and spills when refused.
pub trait Budget: Send {
    /// Takes `n` more bytes if they are available now.
    fn try_grow(&mut self, n: usize) -> bool;
    /// Takes `n` more bytes, waiting for other holders to give memory back; false if `n` can never
    /// be granted (or the wait was stopped).
    fn grow_waiting(&mut self, n: usize) -> bool;
    /// Gives back everything held; called when a run was spilled, after the records it held were
    /// dropped (a budget may return their memory to the system here).
    fn free(&mut self);
}

/// A budget of a fixed number of bytes used by this sorter alone.
#[derive(Debug, Clone)]
pub struct FixedBudget {
    limit: usize,
    used: usize,
}

impl FixedBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self { limit, used: 0 }
    }
}

impl Budget for FixedBudget {
    fn try_grow(&mut self, n: usize) -> bool {
        if self.used + n <= self.limit {
            self.used += n;
            true
        } else {
            false
        }
    }

    fn grow_waiting(&mut self, n: usize) -> bool {
        self.try_grow(n)
    }

    fn free(&mut self) {
        self.used = 0;
    }
}

/// How to sort.
#[derive(Debug, Clone)]
pub struct SortOptions {
    /// The order.
    pub order: SortOrder,
    /// Memory budget in bytes for records held in memory (all threads together), used when the
    /// caller gives no [`Budget`] of its own ([`Sorter::with_budget`]).
    pub memory: usize,
    /// Directory for temporary runs (created by the caller, removed by the caller).
    pub temp_dir: PathBuf,
    /// Most sources the final merge may open (runs + the in-memory batch); at least 2.
    pub max_fan_in: usize,
    /// How the output is cut into key ranges (keep the default where output bytes must not vary).
    pub ranges: RangePlan,
}

/// What a sort did, for `-v`.
#[derive(Debug, Clone, Default)]
pub struct SortStats {
    /// Records sorted.
    pub records: u64,
    /// Uncompressed bytes of the records (BAM encoding, `block_size` prefixes included).
    pub record_bytes: u64,
    /// Runs spilled from memory.
    pub runs_spilled: u64,
    /// Compactions (merges of runs into a bigger run).
    pub compactions: u64,
    /// Bytes written to temporary files (spills and compactions).
    pub temp_bytes: u64,
    /// Bytes spilled from memory (first writes only), to compute write amplification.
    pub spilled_bytes: u64,
    /// Sources opened by the final merge (0: everything was in memory).
    pub final_fan_in: usize,
    /// Key ranges the final phase was cut into.
    pub ranges: usize,
    /// Time spent spilling (sorting + writing runs) while reading.
    pub spill_time: Duration,
    /// Time spent waiting for compaction.
    pub compaction_wait: Duration,
}

struct Run {
    file: RunFile,
    level: u32,
    id: u64,
}

struct Compaction {
    ids: Vec<u64>,
    new_id: u64,
    /// Level of the merged run.
    level: u32,
    handle: JoinHandle<Result<RunFile, SortError>>,
}

/// Sorts batches pushed in input order; [`Sorter::finish`] emits the records in order.
pub struct Sorter {
    opts: SortOptions,
    budget: Box<dyn Budget>,
    pool: Option<Arc<rayon::ThreadPool>>,
    cancel: Arc<AtomicBool>,
    batches: Vec<RecordBatch>,
    /// Each batch's tie words (template-coordinate order only, else empty): see [`push_entries`].
    ties: Vec<Vec<u64>>,
    /// Input sequence number of each batch's first record.
    first_seqs: Vec<u64>,
    /// Sequence number of the next record pushed.
    next_seq: u64,
    /// Candidate split points (every `RangePlan::sample_every`-th input record).
    samples: Vec<SplitPoint>,
    entries: Vec<(u64, u64)>,
    used: usize,
    runs: Vec<Run>,
    next_id: u64,
    compaction: Option<Compaction>,
    stats: SortStats,
    /// Bytes of the budget held for the sorter's own I/O buffers besides the records ([`IoCosts`]).
    io_held: usize,
}

/// Bytes a run reader holds while open: one block's raw bytes and its compressed copy.
pub const RUN_READER_BYTES: usize = 2 * crate::run::RUN_BLOCK_RAW;

/// The sorter's I/O buffers besides the records, taken from its budget (issue 33: the budget bounded
/// the records while the run writers and readers came on top of it). A run being spilled holds its
/// 1 MiB file buffer and up to four windows of `4 x threads` compressed blocks (being compressed,
/// two queued, being written: `run::write_run`); a compaction opens `fan_in / 2` runs and writes one;
/// the final merge opens every run once per range being merged (`threads` at a time).
#[derive(Debug, Clone, Copy)]
struct IoCosts {
    threads: usize,
    /// The final merge's fan-in: `max_fan_in`, lowered so that the merge's readers take at most a
    /// quarter of the budget (at least 2).
    fan_in: usize,
}

impl IoCosts {
    fn new(memory: usize, threads: usize, max_fan_in: usize) -> Self {
        let threads = threads.max(1);
        let fit = memory / 4 / (threads * RUN_READER_BYTES);
        Self {
            threads,
            fan_in: max_fan_in.min(fit).max(2),
        }
    }

    fn spill(&self) -> usize {
        (1 << 20) + 4 * 4 * self.threads * crate::run::RUN_BLOCK_RAW
    }

    fn compaction(&self) -> usize {
        (self.fan_in / 2).max(2) * RUN_READER_BYTES + (1 << 20) + crate::run::RUN_BLOCK_RAW
    }

    fn merge(&self, sources: usize) -> usize {
        self.threads * sources * RUN_READER_BYTES
    }
}

/// Memory charged per record besides its bytes: the 16-byte entry (and slack for the sort).
const ENTRY_COST: usize = 16;

impl Sorter {
    /// A sorter with `opts`.
    pub fn new(opts: SortOptions) -> Self {
        Self {
            budget: Box::new(FixedBudget::new(opts.memory)),
            pool: None,
            cancel: Arc::new(AtomicBool::new(false)),
            opts,
            batches: Vec::new(),
            ties: Vec::new(),
            first_seqs: Vec::new(),
            next_seq: 0,
            samples: Vec::new(),
            entries: Vec::new(),
            used: 0,
            runs: Vec::new(),
            next_id: 0,
            compaction: None,
            stats: SortStats::default(),
            io_held: 0,
        }
    }

    fn io_costs(&self) -> IoCosts {
        IoCosts::new(self.opts.memory, self.threads(), self.opts.max_fan_in)
    }

    /// Holds `need` bytes of the budget for I/O buffers (more if already held); false if the budget
    /// refused (a budget smaller than the buffers: the sort goes on, over it).
    fn hold_io(&mut self, need: usize) -> bool {
        if self.io_held >= need {
            return true;
        }
        if self.budget.grow_waiting(need - self.io_held) {
            self.io_held = need;
            return true;
        }
        false
    }

    /// The I/O buffers of the read phase: a spill, and a compaction while one runs.
    fn hold_read_io(&mut self) {
        let io = self.io_costs();
        let compaction = if self.compaction.is_some() {
            io.compaction()
        } else {
            0
        };
        self.hold_io(io.spill() + compaction);
    }

    /// Takes memory for records from `budget` instead of `SortOptions::memory`.
    pub fn with_budget(mut self, budget: Box<dyn Budget>) -> Self {
        self.budget = budget;
        self
    }

    /// Runs the parallel steps (sorting batches, compressing runs, choosing split points) on `pool`
    /// instead of the pool of the calling thread.
    pub fn with_pool(mut self, pool: Arc<rayon::ThreadPool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Stops (with [`SortError::Cancelled`]) once `flag` is set: checked for every batch pushed,
    /// every 64Ki records merged by a compaction and every key range of the final phase.
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = flag;
        self
    }

    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    fn check_cancel(&self) -> Result<(), SortError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(SortError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Threads of the pool the parallel steps run on.
    pub fn threads(&self) -> usize {
        self.install(rayon::current_num_threads)
    }

    /// Adds a batch (records in input order). Spills a run when the budget refuses the batch.
    pub fn push(&mut self, batch: RecordBatch) -> Result<(), SortError> {
        self.check_cancel()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.hold_read_io();
        let b = self.batches.len() as u64;
        let capacity = self.entries.capacity();
        self.entries.reserve(batch.len());
        let order = self.opts.order;
        let mut ties = Vec::new();
        let entries = &mut self.entries;
        let mut push = || push_entries(&order, &batch, b, entries, &mut ties);
        let pushed = match &self.pool {
            Some(p) => p.install(push),
            None => push(),
        };
        if let Err(e) = pushed {
            self.entries
                .truncate(self.entries.len() - self.entries.len().min(batch.len()));
            return Err(e);
        }
        let first = self.next_seq;
        let every = self.opts.ranges.sample_every.max(1);
        let mut seq = first.next_multiple_of(every);
        while seq < first + batch.len() as u64 {
            let rec = &batch.raw((seq - first) as usize)[4..];
            self.samples.push(SplitPoint::new(&order, rec, seq));
            seq += every;
        }
        self.next_seq += batch.len() as u64;
        self.stats.records += batch.len() as u64;
        self.stats.record_bytes += batch.bytes().len() as u64;
        // The entries are charged by capacity: their vector doubles, and the unused half is
        // allocated memory too (~5% of the records at 350-byte records).
        let grown = self.entries.capacity().saturating_sub(capacity) * ENTRY_COST;
        let cost = batch.allocated() + grown + ties.capacity() * 8;
        let fits = self.budget.try_grow(cost);
        if !fits && !self.batches.is_empty() {
            // Spill what is held before this batch (its entries were pushed last: set them aside).
            let mine = self.entries.split_off(self.entries.len() - batch.len());
            self.spill()?;
            let cost = batch.allocated() + mine.capacity() * ENTRY_COST + ties.capacity() * 8;
            self.entries = mine;
            for e in &mut self.entries {
                e.1 &= 0xffff_ffff; // the batch becomes batch 0
            }
            self.first_seqs.push(first);
            self.batches.push(batch);
            self.ties.push(ties);
            self.used = cost;
            if !self.budget.grow_waiting(cost) {
                self.spill()?; // bigger than the whole budget: a run of its own
            }
            return Ok(());
        }
        self.first_seqs.push(first);
        self.used += cost;
        self.batches.push(batch);
        self.ties.push(ties);
        if !fits {
            self.spill()?; // a first batch bigger than the budget: a run of its own
        }
        Ok(())
    }

    fn sort_entries(&mut self) {
        let order = self.opts.order;
        let (batches, ties) = (&self.batches, &self.ties);
        let entries = &mut self.entries;
        let pool = self.pool.clone();
        let mut sort = move || sort_entries(order, batches, ties, entries);
        match pool {
            Some(p) => p.install(sort),
            None => sort(),
        }
    }

    fn spill(&mut self) -> Result<(), SortError> {
        self.check_cancel()?;
        let started = Instant::now();
        self.sort_entries();
        let id = self.next_id;
        self.next_id += 1;
        let path = self.opts.temp_dir.join(format!("run-{id:06}.lz4"));
        let (batches, first_seqs, entries) = (&self.batches, &self.first_seqs, &self.entries);
        let order = self.opts.order;
        let file = self.install(|| {
            write_run(
                &path,
                order,
                entries.iter().map(|&(_, loc)| {
                    (
                        memory_seq(first_seqs, loc),
                        batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize),
                    )
                }),
            )
        })?;
        self.stats.runs_spilled += 1;
        self.stats.temp_bytes += file.bytes;
        self.stats.spilled_bytes += file.bytes;
        self.runs.push(Run { file, level: 0, id });
        self.batches.clear();
        self.ties.clear();
        self.first_seqs.clear();
        self.entries = Vec::new();
        self.used = 0;
        self.budget.free();
        self.io_held = 0;
        self.stats.spill_time += started.elapsed();
        self.maybe_compact(false)?;
        self.hold_read_io();
        Ok(())
    }

    /// Collects a finished compaction; starts one when the runs (plus the in-memory batch) exceed the
    /// fan-in. With `wait`, blocks for a running compaction.
    fn maybe_compact(&mut self, wait: bool) -> Result<(), SortError> {
        if let Some(c) = &self.compaction {
            if wait || c.handle.is_finished() {
                let started = Instant::now();
                let c = self.compaction.take().expect("checked above");
                let file = c
                    .handle
                    .join()
                    .map_err(|_| SortError::Internal("compaction thread panicked".into()))??;
                self.stats.compaction_wait += started.elapsed();
                self.stats.compactions += 1;
                self.stats.temp_bytes += file.bytes;
                let at = self
                    .runs
                    .iter()
                    .position(|r| r.id == c.ids[0])
                    .expect("compacted runs are still listed");
                let old: Vec<Run> = self.runs.drain(at..at + c.ids.len()).collect();
                for r in &old {
                    let _ = std::fs::remove_file(&r.file.path);
                }
                self.runs.insert(
                    at,
                    Run {
                        file,
                        level: c.level,
                        id: c.new_id,
                    },
                );
            }
        }
        if self.compaction.is_none() && self.runs.len() + 1 > self.io_costs().fan_in {
            self.start_compaction();
            self.hold_read_io();
        }
        Ok(())
    }

    /// Merges the oldest runs among those of level ≤ L, for the lowest L with at least two such runs,
    /// into one run on a background thread. Levels never increase from the oldest run to the newest,
    /// so runs of level ≤ L are the newest ones and the group is contiguous (input order kept).
    fn start_compaction(&mut self) {
        let max_level = self.runs.iter().map(|r| r.level).max().unwrap_or(0);
        let level = (0..=max_level)
            .find(|&l| self.runs.iter().filter(|r| r.level <= l).count() >= 2)
            .unwrap_or(max_level);
        let group = (self.io_costs().fan_in / 2).max(2);
        let picked: Vec<&Run> = self
            .runs
            .iter()
            .filter(|r| r.level <= level)
            .take(group)
            .collect();
        let new_level = picked.iter().map(|r| r.level).max().unwrap_or(0) + 1;
        let ids: Vec<u64> = picked.iter().map(|r| r.id).collect();
        let paths: Vec<PathBuf> = picked.iter().map(|r| r.file.path.clone()).collect();
        let new_id = self.next_id;
        self.next_id += 1;
        let out = self.opts.temp_dir.join(format!("run-{new_id:06}.lz4"));
        let order = self.opts.order;
        let cancel = self.cancel.clone();
        let handle = std::thread::spawn(move || -> Result<RunFile, SortError> {
            let mut sources = paths
                .iter()
                .map(|p| RunReader::open(p).map(Source::Run))
                .collect::<Result<Vec<_>, _>>()?;
            let mut writer = crate::run::StreamingRunWriter::create(&out, order)?;
            let mut n = 0u32;
            merge(order, &mut sources, |_, seq, r| {
                n = n.wrapping_add(1);
                if n.is_multiple_of(1 << 16) && cancel.load(Ordering::Relaxed) {
                    return Err(SortError::Cancelled);
                }
                writer.push(seq, r)
            })?;
            writer.finish()
        });
        self.compaction = Some(Compaction {
            ids,
            new_id,
            level: new_level,
            handle,
        });
    }

    /// Sorts what is in memory and emits every record in order on the calling thread (a convenience
    /// over [`Sorter::finish_ranges`]). `phase` is told when the final phase starts ("sort", then
    /// "merge" or "write").
    pub fn finish(
        self,
        phase: impl FnMut(&str),
        mut emit: impl FnMut(&[u8]) -> Result<(), SortError>,
    ) -> Result<SortStats, SortError> {
        let threads = self.threads();
        self.finish_ranges(
            threads,
            phase,
            |records| {
                let mut batch = Vec::new();
                records.for_each(|r| {
                    batch.extend_from_slice(r);
                    Ok(())
                })?;
                Ok(batch)
            },
            |batch| {
                let mut rest = &batch[..];
                while !rest.is_empty() {
                    let n = 4 + u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                    emit(&rest[..n])?;
                    rest = &rest[n..];
                }
                Ok(())
            },
        )
    }

    /// Sorts what is in memory, then produces the output as key ranges on `threads` threads:
    /// `encode` turns one range's records (in order) into output bytes on a worker thread, and `sink`
    /// receives the encoded ranges in order on the calling thread. `phase` is told when the final
    /// phase starts ("sort", then "merge" or "write").
    pub fn finish_ranges<T: Send>(
        mut self,
        threads: usize,
        mut phase: impl FnMut(&str),
        encode: impl Fn(&mut RangeRecords<'_>) -> Result<T, SortError> + Sync,
        sink: impl FnMut(T) -> Result<(), SortError>,
    ) -> Result<SortStats, SortError> {
        phase("sort");
        let io = self.io_costs();
        if !self.runs.is_empty()
            && !self.batches.is_empty()
            && !self.hold_io(io.merge(io.fan_in.min(self.runs.len() + 1)))
        {
            // The merge's run readers do not fit beside the records held: those become a run too.
            self.spill()?;
        }
        self.sort_entries();
        let in_memory = usize::from(!self.entries.is_empty());
        loop {
            self.maybe_compact(true)?;
            if self.compaction.is_none() && self.runs.len() + in_memory <= io.fan_in {
                break;
            }
        }
        if !self.runs.is_empty() {
            self.hold_io(io.merge(self.runs.len() + in_memory));
        }
        let samples = std::mem::take(&mut self.samples);
        let (order, plan, bytes) = (self.opts.order, self.opts.ranges, self.stats.record_bytes);
        let splits = self.install(|| choose_splits(&order, &plan, samples, bytes));
        let mut stats = self.stats.clone();
        stats.final_fan_in = if self.runs.is_empty() {
            0
        } else {
            self.runs.len() + in_memory
        };
        stats.ranges = splits.len() + 1;
        phase(if self.runs.is_empty() {
            "write"
        } else {
            "merge"
        });
        // The `threads` ranges being encoded come on top of the budget (with `-u` a range is up to
        // `range_bytes`). A worker that finishes before the oldest range would idle (lookahead
        // `threads`) unless it may run one range ahead: that needs `threads` more finished ranges
        // waiting for the writer, taken from the budget if it has room now (an in-memory sort
        // usually has; a tight out-of-core budget keeps the old lookahead and its memory).
        let waiting = threads * self.opts.ranges.range_bytes as usize;
        let lookahead = if self.budget.try_grow(waiting) {
            self.io_held += waiting;
            2 * threads
        } else {
            threads
        };
        let runs: Vec<&RunFile> = self.runs.iter().map(|r| &r.file).collect();
        let sources = FinalSources {
            order: self.opts.order,
            runs: &runs,
            batches: &self.batches,
            first_seqs: &self.first_seqs,
            entries: &self.entries,
            splits: &splits,
        };
        let cancel = &self.cancel;
        ordered_tasks(
            threads,
            sources.ranges(),
            lookahead,
            |i| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(SortError::Cancelled);
                }
                encode(&mut sources.open(i)?)
            },
            sink,
        )?;
        for r in &self.runs {
            let _ = std::fs::remove_file(&r.file.path);
        }
        Ok(stats)
    }
}

impl Drop for Sorter {
    fn drop(&mut self) {
        if let Some(c) = self.compaction.take() {
            let _ = c.handle.join();
        }
        for r in &self.runs {
            let _ = std::fs::remove_file(&r.file.path);
        }
    }
}

/// Sorts the records of `batches` (in input order) as the sorter sorts what it holds in memory, on
/// the current rayon pool: returns `(key, batch << 32 | record)` entries in output order, records
/// that compare equal in input order. For callers that sort one slice of an input on their own
/// (the facade's sort tasks), so that their order and ties are exactly the sorter's.
///
/// Fails on a record the order cannot place (template-coordinate without an `MC` tag).
pub fn sort_batches(
    order: SortOrder,
    batches: &[RecordBatch],
) -> Result<Vec<(u64, u64)>, SortError> {
    let mut entries = Vec::with_capacity(batches.iter().map(RecordBatch::len).sum());
    let mut ties = Vec::with_capacity(batches.len());
    for (b, batch) in batches.iter().enumerate() {
        ties.push(Vec::new());
        push_entries(&order, batch, b as u64, &mut entries, &mut ties[b])?;
    }
    sort_entries(order, batches, &ties, &mut entries);
    Ok(entries)
}

/// Appends `(key, b << 32 | record)` for every record of batch `b`, and for the
/// template-coordinate order each record's tie word to `ties`.
fn push_entries(
    order: &SortOrder,
    batch: &RecordBatch,
    b: u64,
    entries: &mut Vec<(u64, u64)>,
    ties: &mut Vec<u64>,
) -> Result<(), SortError> {
    entries.reserve(batch.len());
    if let SortOrder::TemplateCoordinate(t) = order {
        return push_template_entries(t, batch, b, entries, ties);
    }
    // HOT: once per record; the key makes most comparisons a u64 compare.
    for i in 0..batch.len() {
        let key = entry_key(order, &batch.raw(i)[4..]);
        entries.push((key, b << 32 | i as u64));
    }
    Ok(())
}

/// [`push_entries`] of the template-coordinate order, on the current rayon pool: the full key
/// (aux fields, CIGAR, `MC`) costs ~0.6 µs a record, too much for the one thread that pushes
/// batches (it made the read phase of a 12.7M-record sort 5 s longer than the coordinate sort's).
///
/// The full key is built (and checked) once here; only the packed prefix and the tie word are
/// kept. Recomputing the full key on every tie of the packed key (mates always tie) cost ~9% of the
/// sort's cycles (`perf`, large bench data).
fn push_template_entries(
    t: &crate::TemplateOrder,
    batch: &RecordBatch,
    b: u64,
    entries: &mut Vec<(u64, u64)>,
    ties: &mut Vec<u64>,
) -> Result<(), SortError> {
    const CHUNK: usize = 2048;
    let start = entries.len();
    entries.resize(start + batch.len(), (0, 0));
    ties.resize(batch.len(), 0);
    let name = |i: usize| RecordRef::new_unchecked(&batch.raw(i)[4..]).read_name();
    // HOT: once per record.
    let first_bad = entries[start..]
        .par_chunks_mut(CHUNK)
        .zip(ties.par_chunks_mut(CHUNK))
        .enumerate()
        .filter_map(|(c, (es, ts))| {
            for (j, (e, tie)) in es.iter_mut().zip(ts).enumerate() {
                let i = c * CHUNK + j;
                let Ok(key) = t.key(&batch.raw(i)[4..]) else {
                    return Some(i);
                };
                let (packed, word) = t.pack_with_tie(&key);
                let same = i > 0 && name(i) == name(i - 1);
                *e = (packed, b << 32 | i as u64);
                *tie = word | if same { TIE_SAME_NAME } else { 0 };
            }
            None
        })
        .min();
    match first_bad {
        // The first record the order cannot place, as a sequential loop would report it.
        Some(i) => Err(SortError::Input(
            t.key(&batch.raw(i)[4..]).expect_err("failed above"),
        )),
        None => Ok(()),
    }
}

/// Sorts entries by the order's comparison, ties by `batch << 32 | record` (input order).
fn sort_entries(
    order: SortOrder,
    batches: &[RecordBatch],
    ties: &[Vec<u64>],
    entries: &mut [(u64, u64)],
) {
    match order {
        SortOrder::Coordinate => entries.par_sort_unstable(),
        SortOrder::Name { natural } => {
            // The keys depend on every name held (see `name_key`), so they are made here.
            let record =
                |loc: u64| &batches[(loc >> 32) as usize].raw((loc & 0xffff_ffff) as usize)[4..];
            let keys = NameKeys::plan(natural, entries.par_iter().map(|e| record(e.1)));
            entries
                .par_iter_mut()
                .for_each(|e| e.0 = keys.key(record(e.1)));
            entries.par_sort_unstable_by(|a, b| {
                compare_entries(&order, batches, a, b).then(a.1.cmp(&b.1))
            })
        }
        SortOrder::TemplateCoordinate(t) => {
            // By the packed key first, as the coordinate order (no closure, no record read); then
            // each run of equal packed keys (a pair's mates always make one) by the rest of the
            // comparison, from the tie words and read names.
            entries.par_sort_unstable();
            let split = |loc: u64| ((loc >> 32) as usize, (loc & 0xffff_ffff) as usize);
            let tie = |loc: u64| {
                let (b, i) = split(loc);
                (loc, ties[b][i])
            };
            let record = |loc: u64| {
                let (b, i) = split(loc);
                &batches[b].raw(i)[4..]
            };
            let cmp = |a: &(u64, u64), b: &(u64, u64)| {
                t.compare_ties(tie(a.1), tie(b.1), record)
                    .then(a.1.cmp(&b.1))
            };
            entries
                .par_chunk_by_mut(|a, b| a.0 == b.0)
                .for_each(|run| match run.len() {
                    0 | 1 => {}
                    // A long run (the unmapped tail) is sorted in parallel too.
                    n if n >= 1 << 16 => run.par_sort_unstable_by(cmp),
                    _ => run.sort_unstable_by(cmp),
                });
        }
        _ => entries.par_sort_unstable_by(|a, b| {
            compare_entries(&order, batches, a, b).then(a.1.cmp(&b.1))
        }),
    }
}

/// The 8-byte key stored with each record: the whole coordinate key, nothing yet for the name
/// orders (their keys are made when the entries are sorted), the tag's offset for tag order,
/// the packed prefix of the template-coordinate order.
#[inline]
fn entry_key(order: &SortOrder, rec: &[u8]) -> u64 {
    match *order {
        SortOrder::TemplateCoordinate(t) => t.packed_key(rec),
        SortOrder::Coordinate => coordinate_key(rec),
        SortOrder::Name { .. } => 0, // made when the entries are sorted (`sort_entries`)
        SortOrder::Tag { tag, .. } => tag_offset(rec, tag),
    }
}

#[inline]
fn compare_entries(
    order: &SortOrder,
    batches: &[RecordBatch],
    a: &(u64, u64),
    b: &(u64, u64),
) -> std::cmp::Ordering {
    if let SortOrder::Name { .. } = order {
        if a.0 != b.0 {
            return a.0.cmp(&b.0);
        }
    }
    let ra = &batches[(a.1 >> 32) as usize].raw((a.1 & 0xffff_ffff) as usize)[4..];
    let rb = &batches[(b.1 >> 32) as usize].raw((b.1 & 0xffff_ffff) as usize)[4..];
    let (ta, tb) = match order {
        SortOrder::Tag { .. } => (tag_at(ra, a.0), tag_at(rb, b.0)),
        _ => (None, None),
    };
    order.compare(ra, rb, ta, tb)
}

#[cfg(test)]
#[path = "../tests/support/raw_record.rs"]
mod raw_record;

#[cfg(test)]
mod tests {
    use super::*;

    use super::raw_record::{batch, record};

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn random_records(n: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut rng = Rng(seed | 1);
        (0..n)
            .map(|i| {
                let tid = rng.below(4) as i32 - 1;
                let pos = if tid < 0 { -1 } else { rng.below(50) as i32 };
                let flag = [0u16, 16, 64, 128, 256, 2048, 4, 83][rng.below(8) as usize];
                let name = format!("r{}x{}", rng.below(30), rng.below(12));
                let aux = match rng.below(4) {
                    0 => Vec::new(),
                    1 => [&b"RGZ"[..], format!("g{}", rng.below(3)).as_bytes(), &[0]].concat(),
                    2 => vec![b'R', b'G', b'c', rng.below(5) as u8],
                    _ => [&b"XIi"[..], &(i as i32).to_le_bytes()].concat(),
                };
                record(tid, pos, flag, &name, &aux)
            })
            .collect()
    }

    fn sort_with(
        order: SortOrder,
        recs: &[Vec<u8>],
        memory: usize,
        fan_in: usize,
        ranges: RangePlan,
    ) -> Vec<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        let mut sorter = Sorter::new(SortOptions {
            order,
            memory,
            temp_dir: dir.path().to_path_buf(),
            max_fan_in: fan_in,
            ranges,
        });
        for chunk in recs.chunks(37) {
            sorter.push(batch(chunk)).unwrap();
        }
        let mut out = Vec::new();
        let stats = sorter
            .finish(
                |_| {},
                |r| {
                    out.push(r.to_vec());
                    Ok(())
                },
            )
            .unwrap();
        if ranges.range_bytes < 1000 {
            assert!(stats.ranges > 50, "only {} ranges", stats.ranges);
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "runs left behind"
        );
        out
    }

    /// The reference: a stable sort by the order's comparison (samtools' sorts are stable).
    fn reference(order: SortOrder, recs: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut v = recs.to_vec();
        let tag = |r: &[u8]| match order {
            SortOrder::Tag { tag, .. } => crate::order::find_tag(&r[4..], tag).map(<[u8]>::to_vec),
            _ => None,
        };
        v.sort_by(|a, b| {
            let (ta, tb) = (tag(a), tag(b));
            order.compare(&a[4..], &b[4..], ta.as_deref(), tb.as_deref())
        });
        v
    }

    /// `recs` sorted in `order` at each `(memory, fan_in)` of `budgets`, in one range and in many
    /// small ones (split points every 7 input records, so ties are split across ranges too), equal
    /// [`reference`]'s order.
    fn assert_sorts_as_reference(order: SortOrder, recs: &[Vec<u8>], budgets: &[(usize, usize)]) {
        let want = reference(order, recs);
        let many = RangePlan {
            sample_every: 7,
            range_bytes: 600,
            min_ranges: 1,
            min_range_bytes: 600,
        };
        for plan in [RangePlan::default(), many] {
            for &(memory, fan_in) in budgets {
                let got = sort_with(order, recs, memory, fan_in, plan);
                assert_eq!(got.len(), want.len());
                let first_bad = got.iter().zip(&want).position(|(a, b)| a != b);
                assert!(
                    first_bad.is_none(),
                    "{order:?} memory {memory} fan-in {fan_in} {plan:?}: first difference at record {first_bad:?}"
                );
            }
        }
    }

    #[test]
    fn every_order_and_budget_equals_a_stable_sort() {
        let recs = random_records(3000, 7);
        for order in [
            SortOrder::Coordinate,
            SortOrder::Name { natural: true },
            SortOrder::Name { natural: false },
            SortOrder::Tag {
                tag: *b"RG",
                by_name: None,
            },
            SortOrder::Tag {
                tag: *b"RG",
                by_name: Some(true),
            },
        ] {
            let budgets = [(1 << 30, 64), (1, 64), (1, 2), (2000, 3), (5000, 5)];
            assert_sorts_as_reference(order, &recs, &budgets);
        }
    }

    /// samtools' template-coordinate order (crate::template): paired records with MC tags, mapped
    /// and unmapped ends, libraries, cell barcodes and MIs, many ties on the packed key.
    #[test]
    fn template_order_equals_a_stable_sort() {
        let header = "@RG\tID:a\tLB:L2\n@RG\tID:b\tLB:L1\n";
        let order = SortOrder::TemplateCoordinate(crate::TemplateOrder::new(header, 3));
        let mut rng = Rng(99);
        let recs: Vec<Vec<u8>> = (0..3000)
            .map(|i| {
                let tid = rng.below(4) as i32 - 1;
                let pos = if tid < 0 { -1 } else { rng.below(20) as i32 };
                let flag = [0u16, 16, 65, 97, 145, 129, 73, 133, 77, 2113][rng.below(10) as usize];
                let mut aux = [
                    &b"MCZ"[..],
                    [&b"5S"[..], b"", b"3H", b"99999999999S"][rng.below(4) as usize],
                    // Mate ends beyond the tie word's 36 bits take the full comparison.
                    [&b"10M\0"[..], b"10M99999999999S\0"][usize::from(rng.below(8) == 0)],
                ]
                .concat();
                if rng.below(2) == 0 {
                    let groups: [&[u8]; 3] = [b"RGZa\0", b"RGZb\0", b"RGZc\0"];
                    aux.extend_from_slice(groups[rng.below(3) as usize]);
                }
                if rng.below(3) == 0 {
                    aux.extend_from_slice(
                        format!("MIZ{}/{}\0", rng.below(2), rng.below(2)).as_bytes(),
                    );
                }
                if rng.below(3) == 0 {
                    aux.extend_from_slice(format!("CBZc{}\0", rng.below(2)).as_bytes());
                }
                // Neighbours of one name (mates in query-grouped input) and names met anywhere.
                let name = match rng.below(2) {
                    0 => format!("t{}", i / 2),
                    _ => format!("t{}", rng.below(40)),
                };
                let mut r = record(tid, pos, flag, &name, &aux);
                r[24..28].copy_from_slice(&(rng.below(3) as i32 - 1).to_le_bytes()); // mate refID
                r[28..32].copy_from_slice(&(rng.below(20) as i32).to_le_bytes()); // mate pos
                r
            })
            .collect();
        // Neighbours whose keys tie up to the name, names descending: only the names order them.
        let mut recs = recs;
        recs.extend((0..50).map(|i| record(1, 7, 0, &format!("z{:02}", 50 - i), b"")));
        assert_sorts_as_reference(order, &recs, &[(1 << 30, 64), (1, 64), (2000, 3)]);
    }

    /// A paired record with a mapped mate and no MC tag is refused, naming the record.
    #[test]
    fn template_order_refuses_a_record_without_mc() {
        let order = SortOrder::TemplateCoordinate(crate::TemplateOrder::new("", 1));
        let dir = tempfile::tempdir().unwrap();
        let mut sorter = Sorter::new(SortOptions {
            order,
            memory: 1 << 20,
            temp_dir: dir.path().to_path_buf(),
            max_fan_in: 4,
            ranges: RangePlan::default(),
        });
        let mut r = record(0, 5, 65, "pair1", &[]);
        r[24..28].copy_from_slice(&0i32.to_le_bytes());
        let end = r.len();
        let err = sorter
            .push(RecordBatch::from_parts(r, vec![0], end, 0))
            .unwrap_err();
        assert!(err.to_string().contains("record pair1: no MC tag"), "{err}");
    }

    /// Issue 3: equal keys are split across ranges by input order, so a long tie group (the
    /// unmapped tail) does not fall to one worker, in memory and out of core.
    #[test]
    fn issue_3_ties_spread_over_ranges() {
        let recs: Vec<Vec<u8>> = (0..5000)
            .map(|i| record(-1, -1, 4, &format!("u{i}"), &[]))
            .collect();
        let plan = RangePlan {
            sample_every: 10,
            range_bytes: 20_000,
            min_ranges: 1,
            min_range_bytes: 20_000,
        };
        for memory in [1 << 30, 30_000] {
            let dir = tempfile::tempdir().unwrap();
            let mut sorter = Sorter::new(SortOptions {
                order: SortOrder::Coordinate,
                memory,
                temp_dir: dir.path().to_path_buf(),
                max_fan_in: 4,
                ranges: plan,
            });
            for chunk in recs.chunks(100) {
                sorter.push(batch(chunk)).unwrap();
            }
            let mut counts = Vec::new();
            let mut all = Vec::new();
            let stats = sorter
                .finish_ranges(
                    3,
                    |_| {},
                    |range| {
                        let mut v = Vec::new();
                        range.for_each(|r| {
                            v.push(r.to_vec());
                            Ok(())
                        })?;
                        Ok(v)
                    },
                    |v| {
                        counts.push(v.len());
                        all.extend(v);
                        Ok(())
                    },
                )
                .unwrap();
            assert_eq!(all, recs, "memory {memory}: ties must keep input order");
            let share = recs.len() / counts.len();
            assert!(counts.len() > 5, "{stats:?}");
            assert!(
                counts.iter().all(|&c| c <= 2 * share),
                "memory {memory}: unbalanced ranges {counts:?}"
            );
        }
    }
}
