//! The range planner: split a BAM into byte ranges that threads (or machines) process independently.
//!
//! A range is a pair of record-start virtual offsets `[start, end)`: it owns exactly the records
//! whose first byte lies in it and reads past `end` only to finish its last record. Ranges come
//! from the BAI/CSI linear index when there is one, otherwise from the BGZF block scanner plus the
//! record boundary finder (docs/architecture.md): cut points at equal compressed distances, moved
//! to the next verified block start, then to the first offset in that block where a chain of valid
//! records begins and runs to the end of the inspected data. When no boundary can be proved, the
//! cut is dropped (its neighbour range grows); the planner never guesses.
//!
//! ```no_run
//! use sortase_index::range::{plan_ranges, RangeStream};
//! let path = std::path::Path::new("in.bam");
//! let plan = plan_ranges(path, 8).unwrap();
//! for r in &plan.ranges {
//!     let mut stream = RangeStream::open(path, r, plan.header.references().len()).unwrap();
//!     while let Some(batch) = stream.next_batch().unwrap() {
//!         let _ = batch.len();
//!     }
//! }
//! ```

use sortase_bam::{BamError, BlockEntry, ChunkStream, Header, RecordBatch, RecordRef};
use sortase_bgzf::{scanner, ChunkBuffers, ParallelReader, ReaderOptions, SeekReader};
use sortase_io::Source;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// Records whose first byte's virtual offset is in `[start, end)`; `end == u64::MAX` for the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordRange {
    /// Virtual offset of the first record.
    pub start: u64,
    /// Virtual offset of the next range's first record.
    pub end: u64,
}

/// The header and the ranges of a BAM.
#[derive(Debug, Clone)]
pub struct RangePlan {
    /// The BAM header.
    pub header: Header,
    /// Ranges in file order, covering every record exactly once.
    pub ranges: Vec<RecordRange>,
}

/// Bytes of decompressed data a boundary candidate's record chain is checked over.
const CHAIN_WINDOW: usize = 256 * 1024;

/// Plans about `n` ranges of equal compressed size (at least one; fewer for small files).
pub fn plan_ranges(path: &Path, n: usize) -> Result<RangePlan, BamError> {
    let mut file = Source::open_path(path)?;
    let file_len = file.len()?;
    let (header, first) = read_header_and_first_record(&mut file)?;
    let n_ref = header.references().len();
    let mut starts = vec![first];
    let n = n.max(1) as u64;
    for i in 1..n {
        let cut = first.max((file_len * i / n) << 16) >> 16;
        if let Some(v) = find_record_start(&mut file, cut, n_ref)? {
            if v > *starts.last().expect("non-empty") {
                starts.push(v);
            }
        }
    }
    let mut ranges: Vec<RecordRange> = starts
        .windows(2)
        .map(|w| RecordRange {
            start: w[0],
            end: w[1],
        })
        .collect();
    ranges.push(RecordRange {
        start: *starts.last().expect("non-empty"),
        end: u64::MAX,
    });
    Ok(RangePlan { header, ranges })
}

fn read_header_and_first_record(file: &mut Source) -> Result<(Header, u64), BamError> {
    let mut reader = SeekReader::new(BufReader::new(file.reopen()?));
    let mut counted = Counted {
        inner: &mut reader,
        bytes: 0,
    };
    let header = Header::read_bam(&mut counted)?;
    let at = counted.bytes;
    // At the end of a block this is the next block's start, as the first record's first byte.
    let first = reader.virtual_position();
    // The first record's block_size is refused here, as the readers refuse it, when no record may be
    // that large: otherwise every cut's boundary search would inflate the rest of the file past the
    // claimed record before the ranges' readers said so (a record claiming 3 GiB in front of 2.2 GB
    // of filler took flagstat and index minutes).
    // A file that ends, or whose next block is damaged, here is left to the readers, which say so
    // as they always have.
    let mut block_size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match reader.read(&mut block_size[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    if got == 4 {
        sortase_bam::check_block_size(u32::from_le_bytes(block_size) as usize, at)?;
    }
    Ok((header, first))
}

/// Counts the bytes read through it (the uncompressed offset of what follows the header).
struct Counted<'a, R> {
    inner: &'a mut R,
    bytes: u64,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

/// The virtual offset of the first record starting in or after the first verified block at or after
/// compressed offset `cut`, or `None` if no boundary can be proved before the end of the file.
pub fn find_record_start(
    file: &mut Source,
    cut: u64,
    n_ref: usize,
) -> Result<Option<u64>, BamError> {
    Ok(find_first_record(file, cut, n_ref, CHAIN_WINDOW)?.map(|(v, _)| v))
}

/// [`find_record_start`] with the chain of records checked over `window` decompressed bytes (smaller
/// is cheaper and less certain: for callers that verify the boundary again while reading), also
/// returning the record found (with its `block_size` prefix), already decompressed by the check.
pub fn find_first_record(
    file: &mut Source,
    cut: u64,
    n_ref: usize,
    window: usize,
) -> Result<Option<(u64, Vec<u8>)>, BamError> {
    let mut at = cut;
    loop {
        let Some(block) = scanner::find_block_start_in(file, at)? else {
            return Ok(None);
        };
        file.seek(SeekFrom::Start(block))?;
        let mut reader = SeekReader::new(BufReader::new(file.reopen()?));
        reader.seek_virtual(block << 16)?;
        let mut data = Vec::with_capacity(window);
        reader.by_ref().take(window as u64).read_to_end(&mut data)?;
        let at_eof = data.len() < window;
        // Only offsets inside the first non-empty block are candidates: later ones belong to later blocks.
        let first_block_len = first_block_data_len(file, block)?;
        for o in 0..first_block_len.min(data.len()) {
            if chain_is_valid(&data[o..], n_ref, at_eof) {
                // A valid chain holds at least one whole record.
                let bs = u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
                let record = data[o..o + 4 + bs as usize].to_vec();
                return Ok(Some(((block << 16) | o as u64, record)));
            }
        }
        at = block + 1;
    }
}

/// ISIZE of the (verified) block at `block`.
fn first_block_data_len(file: &mut Source, block: u64) -> Result<usize, BamError> {
    let mut header = [0u8; 18];
    file.seek(SeekFrom::Start(block))?;
    file.read_exact(&mut header)?;
    let h = sortase_bgzf::parse_header(&header).map_err(|reason| {
        sortase_bgzf::BgzfError::BadHeader {
            offset: block,
            reason,
        }
    })?;
    let mut isize = [0u8; 4];
    file.seek(SeekFrom::Start(block + h.block_size as u64 - 4))?;
    file.read_exact(&mut isize)?;
    Ok(u32::from_le_bytes(isize) as usize)
}

/// Whether `data` starts with a chain of valid records that reaches the end of `data` (or, at the end
/// of the file, ends exactly there). At least two whole records are required unless the file ends.
fn chain_is_valid(data: &[u8], n_ref: usize, at_eof: bool) -> bool {
    let mut i = 0;
    let mut whole = 0;
    while i + 4 <= data.len() {
        let bs = u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]) as usize;
        if !(32..=(1 << 28)).contains(&bs) {
            return false;
        }
        if i + 4 + bs > data.len() {
            // A record cut by the window: check what fits of its fixed part.
            return !at_eof && whole >= 2 && plausible_prefix(&data[i + 4..], n_ref);
        }
        let Ok(r) = RecordRef::new(&data[i + 4..i + 4 + bs]) else {
            return false;
        };
        if !plausible(&r, n_ref) {
            return false;
        }
        whole += 1;
        i += 4 + bs;
    }
    if at_eof {
        i == data.len() && whole >= 1
    } else {
        whole >= 2 && plausible_prefix(&data[i.min(data.len())..], n_ref)
    }
}

fn plausible(r: &RecordRef<'_>, n_ref: usize) -> bool {
    let ok_ref = |id: i32| id >= -1 && (id as i64) < n_ref as i64;
    ok_ref(r.reference_sequence_id())
        && ok_ref(r.mate_reference_sequence_id())
        && r.position() >= -1
        && r.mate_position() >= -1
        && r.read_name().iter().all(|&c| (b'!'..=b'~').contains(&c))
        && r.raw_cigar().iter().all(|op| op & 0xf <= 8)
        && {
            let mut aux = r.aux();
            aux.by_ref().for_each(drop);
            !aux.error()
        }
}

fn plausible_prefix(rest: &[u8], n_ref: usize) -> bool {
    if rest.len() < 8 {
        return true;
    }
    let tid = i32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let pos = i32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    tid >= -1 && (tid as i64) < n_ref as i64 && pos >= -1
}

/// The virtual offset of the block holding uncompressed stream byte `u` (empty blocks skipped), so a
/// record's start compares consistently with range bounds.
fn first_byte_voffset(table: &[BlockEntry], cursor: &mut usize, u: u64) -> u64 {
    while *cursor < table.len() {
        let b = table[*cursor];
        if b.ustart + u64::from(b.usize) > u {
            return (b.coffset << 16) | (u - b.ustart);
        }
        *cursor += 1;
    }
    u64::MAX
}

/// Reads the records of one range: starts at its first record, stops before `end`.
///
/// Only the blocks up to the one holding `end` are inflated: the range's last record ends exactly at
/// `end`, so nothing after that block is needed unless `end` is not a record start. (Reading on to the
/// file's end and dropping the read-ahead inflated ~25% more than the records of a 4 MiB range: up to
/// four 256 KiB batches in flight; issue 17's `read_bam` profile.) When the range does need more, the
/// rest of the file is read then, so a false `end` is still found at the next record start after it.
pub struct RangeStream {
    stream: ChunkStream,
    range: RecordRange,
    cursor: usize,
    done: bool,
}

impl RangeStream {
    /// Opens `path` at `range.start` (one inflate thread: ranges are the unit of parallelism).
    pub fn open(path: &Path, range: &RecordRange, n_ref: usize) -> Result<Self, BamError> {
        Self::open_with_buffers(path, range, n_ref, None)
    }

    /// As [`RangeStream::open`], inflating into `buffers` when it has some (a caller reading many
    /// ranges gives its batches' buffers back with [`RecordBatch::into_buffer`]).
    pub fn open_with_buffers(
        path: &Path,
        range: &RecordRange,
        n_ref: usize,
        buffers: Option<Arc<ChunkBuffers>>,
    ) -> Result<Self, BamError> {
        let block = range.start >> 16;
        // Stop before the first block after the one where the next range starts.
        let limit = (range.end != u64::MAX).then_some((range.end >> 16) + 1);
        let chunks = RangeChunks {
            path: path.to_path_buf(),
            reader: range_reader(path, block, limit, buffers.clone())?,
            buffers,
            next_block: block,
            limited: limit.is_some(),
        };
        let mut stream = ChunkStream::new(Box::new(chunks));
        stream.enable_block_table();
        stream.set_reference_count(n_ref);
        let skip = range.start & 0xffff;
        std::io::copy(&mut (&mut stream).take(skip), &mut std::io::sink())?;
        Ok(Self {
            stream,
            range: *range,
            cursor: 0,
            done: false,
        })
    }

    /// Whether the next unread record starts exactly at the range's end: then the range is read
    /// whole (its last record ended there) without looking at that record.
    fn at_end(&mut self) -> Result<bool, BamError> {
        let u = self.stream.position();
        let mut v = first_byte_voffset(self.stream.block_table(), &mut self.cursor, u);
        if v == u64::MAX {
            // The next record starts in a chunk not taken yet.
            self.stream.peek()?;
            v = first_byte_voffset(self.stream.block_table(), &mut self.cursor, u);
        }
        Ok(v == self.range.end)
    }

    /// The next batch of records of this range (trimmed at the range's end).
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, BamError> {
        if self.done {
            return Ok(None);
        }
        if self.range.end != u64::MAX && self.at_end()? {
            self.done = true;
            return Ok(None);
        }
        let Some(batch) = self.stream.next_batch()? else {
            self.done = true;
            if self.range.end != u64::MAX {
                return Err(BamError::RangeBoundary {
                    expected: self.range.end,
                    found: u64::MAX,
                });
            }
            return Ok(None);
        };
        let table = self.stream.block_table();
        let mut u = batch.stream_offset();
        let mut keep = batch.len();
        for (i, raw) in batch.iter_raw().enumerate() {
            let v = first_byte_voffset(table, &mut self.cursor, u);
            if v >= self.range.end {
                // The next range must start exactly here, or the planned boundary was not a record start.
                if v != self.range.end {
                    return Err(BamError::RangeBoundary {
                        expected: self.range.end,
                        found: v,
                    });
                }
                keep = i;
                self.done = true;
                break;
            }
            u += raw.len() as u64;
        }
        Ok(Some(batch.truncated(keep)))
    }

    /// The blocks read so far (for virtual offsets of records, see [`sortase_bam::virtual_offset`]).
    pub fn block_table(&self) -> &[BlockEntry] {
        self.stream.block_table()
    }
}

/// A BGZF reader from the block at `block` to the first block starting at or after `limit`.
fn range_reader(
    path: &Path,
    block: u64,
    limit: Option<u64>,
    buffers: Option<Arc<ChunkBuffers>>,
) -> std::io::Result<ParallelReader> {
    let mut file = Source::open_path(path)?;
    file.seek(SeekFrom::Start(block))?;
    if let Some(limit) = limit {
        // The reader stops at the block starting at `limit`: a remote object is fetched to a
        // little past it (that block and the next), not to its end.
        file.expect_end(limit.saturating_add(2 << 16));
    }
    let mut options = ReaderOptions::with_threads(1);
    options.start = block;
    options.end = limit;
    options.batch_bytes = 256 * 1024;
    options.buffers = buffers;
    Ok(ParallelReader::new(file, options))
}

/// The chunks of a range: its blocks up to the limit, then (only if the stream asks for more) the
/// rest of the file.
struct RangeChunks {
    path: std::path::PathBuf,
    reader: ParallelReader,
    buffers: Option<Arc<ChunkBuffers>>,
    /// Compressed offset after the last block delivered.
    next_block: u64,
    limited: bool,
}

impl Iterator for RangeChunks {
    type Item = Result<sortase_bgzf::Chunk, sortase_bgzf::BgzfError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.reader.next() {
                Some(Ok(chunk)) => {
                    if let Some(b) = chunk.blocks.last() {
                        self.next_block = b.coffset + u64::from(b.csize);
                    }
                    return Some(Ok(chunk));
                }
                None if self.limited => {
                    self.limited = false;
                    match range_reader(&self.path, self.next_block, None, self.buffers.clone()) {
                        Ok(reader) => self.reader = reader,
                        Err(e) => return Some(Err(e.into())),
                    }
                }
                other => return other,
            }
        }
    }
}

/// Runs `work` on every range of `plan` with `threads` worker threads and returns the results in range
/// order. The first error stops the remaining ranges.
///
/// Every range checks that it ends exactly where the next one starts. If any range fails (a boundary
/// that was not a record start, or an error that may come from one), the whole file is processed again
/// as one range, whose answer (or error) is then exact: the planner may be fooled, the result never is.
pub fn map_ranges<T: Send, E: From<BamError> + Send>(
    path: &Path,
    plan: &RangePlan,
    threads: usize,
    work: impl Fn(RangeStream) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    match map_ranges_once(path, plan, threads, &work) {
        Err(_) if plan.ranges.len() > 1 => {
            let whole = RangePlan {
                header: plan.header.clone(),
                ranges: vec![RecordRange {
                    start: plan.ranges[0].start,
                    end: u64::MAX,
                }],
            };
            map_ranges_once(path, &whole, 1, &work)
        }
        other => other,
    }
}

fn map_ranges_once<T: Send, E: From<BamError> + Send>(
    path: &Path,
    plan: &RangePlan,
    threads: usize,
    work: &(impl Fn(RangeStream) -> Result<T, E> + Sync),
) -> Result<Vec<T>, E> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Mutex<Option<Result<T, E>>>> =
        plan.ranges.iter().map(|_| Mutex::new(None)).collect();
    let n_ref = plan.header.references().len();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(plan.ranges.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= plan.ranges.len() || failed.load(Ordering::Relaxed) {
                    break;
                }
                let r = RangeStream::open(path, &plan.ranges[i], n_ref)
                    .map_err(E::from)
                    .and_then(work);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    let mut out = Vec::with_capacity(results.len());
    for m in results {
        if let Some(r) = m.into_inner().unwrap_or_else(|p| p.into_inner()) {
            out.push(r?);
        }
    }
    Ok(out)
}
