//! samtools merge's engine on all cores, for BAM files that are already sorted: the output is cut
//! into key ranges (as the sort's final merge, docs/architecture.md, applied to inputs that are
//! already sorted), and worker threads merge, encode and compress one range each
//! from every input while the calling thread writes finished ranges in order.
//!
//! Sampling: each input is cut at equal compressed distances by the range planner (BGZF block scanner
//! plus record-boundary finder, crates/index `range`), and the record at each cut, translated to the
//! output header, is a sample. Output order is a strict order on (key, input number, virtual offset):
//! samtools' heap merge breaks ties by input number, and within one input keeps file order. Split
//! points are chosen among the sorted samples, so ranges (and the output's block boundaries) depend
//! only on the inputs: the bytes are identical for any `-@`.
//!
//! A range task opens each input at its last sample before the range, skips records before the range
//! and stops at the first record at or after its end. It checks, as it reads, that every sample it
//! passes is a record start (the planner is never trusted blindly) and that the input is sorted; an
//! input that is not sorted sends the caller back to the one-thread merge, whose interleaving of
//! unsorted inputs is samtools' own.
//!
//! Sampling runs on the caller's rayon pool (the sortase facade's merge job runs it inside its
//! runtime's pool); range tasks stop between batches once the plan's cancellation flag is set.

use crate::merge::{merge, Source};
use crate::order::{find_tag, key_prefix};
use crate::ranges::{cmp_split, SplitPoint};
use crate::{RangeSource, SortError, SortOrder};
use sortase_bam::header_merge::Translation;
use sortase_bam::{check_record, BamError, RecordBatch};
use sortase_bgzf::SeekReader;
use sortase_index::range::{find_first_record, plan_ranges};
use sortase_io::Source as Input;
use std::cmp::Ordering;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Compressed bytes a range aims at (about 16 MiB of records at level 6).
const RANGE_COMPRESSED: u64 = 4 << 20;
/// Small outputs still get up to this many ranges...
const MIN_RANGES: u64 = 64;
/// ... each at least this many compressed bytes.
const MIN_RANGE_COMPRESSED: u64 = 256 << 10;
/// Compressed bytes between an input's samples. Each sample costs a seek and a `SAMPLE_WINDOW`
/// inflate; a range task reads on average half a cut of every input before its first record.
const CUT: u64 = 512 << 10;
/// The largest range (many inputs): bounds the memory of the ranges in flight.
const MAX_RANGE: u64 = 32 << 20;
/// Decompressed bytes of records the boundary finder checks per sample. Smaller than the range
/// planner's 256 KiB because readers verify every sample they pass (a false one falls back to the
/// one-thread merge).
const SAMPLE_WINDOW: usize = 32 << 10;
/// File bytes a range task's reader asks for at a time.
const READ_BUFFER: usize = 128 << 10;
/// Translated record bytes handed to the heap merge at a time.
const FEED_BYTES: usize = 256 << 10;

/// How the key-range merge samples its inputs and sizes its ranges (the defaults are the CLI's;
/// smaller values cut small inputs into many ranges, for tests of the merge tasks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RangeOptions {
    /// Compressed bytes between an input's samples.
    pub sample_every: u64,
    /// Small outputs get up to 64 ranges of at least this many compressed bytes.
    pub min_range_bytes: u64,
}

impl Default for RangeOptions {
    fn default() -> Self {
        Self {
            sample_every: CUT,
            min_range_bytes: MIN_RANGE_COMPRESSED,
        }
    }
}

/// A sample as plain data: its virtual offset and the translated record's key bytes.
pub type SampleParts = (u64, Vec<u8>);

/// Samples named by `(input, sample)`.
pub type SampleRefs = Vec<(usize, usize)>;

/// One sorted BAM input of the merge.
pub struct MergeInput {
    /// Its path (also its name in messages).
    pub path: PathBuf,
    /// References in its header.
    pub n_ref: usize,
    /// How its records are translated into the output header.
    pub translation: Arc<Translation>,
}

/// A sample: the record at a planned cut of one input.
struct Sample {
    voffset: u64,
    point: SplitPoint,
    /// A range task started reading here.
    used: AtomicBool,
    /// A reader that started at an earlier sample reached exactly this offset: a record start.
    confirmed: AtomicBool,
}

/// A split point of the output: a sample and the input it came from.
#[derive(Clone, Copy)]
struct Split<'a> {
    input: usize,
    sample: &'a Sample,
}

/// Compares a translated record (no `block_size` prefix) of `input` at `voffset` with `split`.
fn cmp_at(order: &SortOrder, rec: &[u8], input: usize, voffset: u64, split: Split<'_>) -> Ordering {
    cmp_split(order, rec, 0, &split.sample.point)
        .then((input, voffset).cmp(&(split.input, split.sample.voffset)))
}

/// Compares two translated records (no prefixes) in `order`.
fn cmp_records(order: &SortOrder, a: &[u8], b: &[u8]) -> Ordering {
    match order {
        SortOrder::Tag { tag, .. } => order.compare(a, b, find_tag(a, *tag), find_tag(b, *tag)),
        _ => order.compare(a, b, None, None),
    }
}

/// Reads one input's records from a virtual offset, validated and translated.
struct Cursor<'a> {
    input: &'a MergeInput,
    index: usize,
    reader: SeekReader<BufReader<Input>>,
    raw: Vec<u8>,
    /// The key bytes of the previous record, translated, for the sortedness check.
    prev: Vec<u8>,
    /// Virtual offset of the current record.
    voffset: u64,
    identity: bool,
    /// Samples of this input after the one reading started at, not yet passed (their offsets must
    /// be record starts).
    samples: &'a [Sample],
}

impl<'a> Cursor<'a> {
    /// Opens `input` (`file`, if already open) at `voffset`, reading `buffer` bytes at a time.
    fn open(
        input: &'a MergeInput,
        file: Option<Input>,
        index: usize,
        voffset: u64,
        samples: &'a [Sample],
        buffer: usize,
    ) -> Result<Self, SortError> {
        let file = match file {
            Some(f) => f,
            None => Input::open_path(&input.path).map_err(|e| input_error(input, e))?,
        };
        let mut reader = SeekReader::new(BufReader::with_capacity(buffer, file));
        reader
            .seek_virtual(voffset)
            .map_err(|e| input_error(input, e))?;
        Ok(Self {
            input,
            index,
            reader,
            raw: Vec::new(),
            prev: Vec::new(),
            voffset,
            identity: input.translation.tids_identity(),
            samples,
        })
    }

    /// Reads the next record and appends it, translated (with `block_size`), to `out`; returns where
    /// it starts in `out`, or `None` at the end of the input. Checks that the input is sorted.
    fn next_into(
        &mut self,
        order: &SortOrder,
        out: &mut Vec<u8>,
    ) -> Result<Option<usize>, SortError> {
        if !self.read_raw()? {
            return Ok(None);
        }
        let start = out.len();
        self.input
            .translation
            .translate_into(&self.raw, out, self.identity);
        let rec = &out[start + 4..];
        if !self.prev.is_empty() && cmp_records(order, rec, &self.prev) == Ordering::Less {
            return Err(SortError::Unordered(format!(
                "{}: not sorted in the merge order (record at virtual offset {})",
                self.input.path.display(),
                self.voffset
            )));
        }
        self.prev.clear();
        self.prev.extend_from_slice(key_prefix(order, rec));
        Ok(Some(start))
    }

    /// Reads the next record into `raw` (validated, not translated); false at the end of the input.
    fn read_raw(&mut self) -> Result<bool, SortError> {
        let position = self
            .reader
            .next_byte_position()
            .map_err(|e| input_error(self.input, e))?;
        self.voffset = position.unwrap_or(u64::MAX);
        while let Some(s) = self.samples.first() {
            match s.voffset.cmp(&self.voffset) {
                Ordering::Less => {
                    return Err(SortError::Unordered(format!(
                        "{}: planned record boundary at virtual offset {} is not a record start",
                        self.input.path.display(),
                        s.voffset
                    )))
                }
                Ordering::Equal => {
                    s.confirmed.store(true, AtomicOrdering::Relaxed);
                    self.samples = &self.samples[1..];
                }
                Ordering::Greater => break,
            }
        }
        if position.is_none() {
            return Ok(false);
        }
        let at = self.voffset;
        let truncated = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => input_error(
                self.input,
                format!("truncated record at virtual offset {at}"),
            ),
            _ => input_error(self.input, e),
        };
        let mut size = [0u8; 4];
        self.reader.read_exact(&mut size).map_err(truncated)?;
        let len = u32::from_le_bytes(size) as usize;
        self.raw.clear();
        self.raw.extend_from_slice(&size);
        // Grows with the data read, so a corrupt block_size cannot allocate gigabytes up front.
        (&mut self.reader)
            .take(len as u64)
            .read_to_end(&mut self.raw)
            .map_err(truncated)?;
        if self.raw.len() < 4 + len {
            return Err(truncated(std::io::ErrorKind::UnexpectedEof.into()));
        }
        check_record(&self.raw[4..], self.input.n_ref as i32, at).map_err(|e| match e {
            BamError::Record { reason, .. } => input_error(
                self.input,
                format!("record at virtual offset {at}: {reason}"),
            ),
            e => input_error(self.input, e),
        })?;
        Ok(true)
    }
}

fn input_error(input: &MergeInput, e: impl std::fmt::Display) -> SortError {
    SortError::Input(format!("{}: {e}", input.path.display()))
}

/// The inputs, their samples and the split points: everything range tasks share.
pub struct MergePlan {
    order: SortOrder,
    inputs: Vec<MergeInput>,
    /// Samples of each input, in file order (the first is the input's first record).
    samples: Vec<Vec<Sample>>,
    /// `(input, sample index)` of each split point, in output order.
    splits: Vec<(usize, usize)>,
    /// Compressed bytes of all inputs.
    compressed: u64,
    /// Set when the job is cancelled: range readers stop between batches.
    cancel: Option<Arc<AtomicBool>>,
    /// Sees every batch of translated input records a range reads ([`MergePlan::with_batch_hook`]).
    batch_hook: Option<BatchHook>,
}

/// A function that sees every batch of records the ranges read from the inputs (translated into
/// the output header, before `-r` attaches its RG tags), on the worker reading it.
pub type BatchHook = Arc<dyn Fn(&RecordBatch) + Send + Sync>;

/// The records of one range: a heap merge of the inputs' cursors, trimmed to the range.
pub struct MergeRange<'a> {
    order: SortOrder,
    sources: Vec<Source<'a>>,
    /// Input number of each source.
    inputs: Vec<usize>,
    attach: &'a [Arc<Translation>],
    scratch: Vec<u8>,
}

impl RangeSource for MergeRange<'_> {
    fn for_each<F: FnMut(&[u8]) -> Result<(), SortError>>(
        &mut self,
        mut f: F,
    ) -> Result<u64, SortError> {
        let (inputs, attach, scratch) = (&self.inputs, self.attach, &mut self.scratch);
        merge(self.order, &mut self.sources, |i, _, r| {
            if attach[inputs[i]].attach_rg_into(r, scratch) {
                f(scratch)
            } else {
                f(r)
            }
        })
    }
}

impl MergePlan {
    /// Samples every input (on the current rayon pool) and chooses the split points.
    pub fn new(
        order: SortOrder,
        inputs: Vec<MergeInput>,
        options: &RangeOptions,
    ) -> Result<Self, SortError> {
        let cut = options.sample_every.max(1);
        let sizes: Vec<u64> = inputs
            .iter()
            .map(|i| std::fs::metadata(&i.path).map(|m| m.len()))
            .collect::<Result<_, _>>()
            .map_err(|e| SortError::Input(e.to_string()))?;
        let total: u64 = sizes.iter().sum();
        let samples: Vec<Vec<Sample>> = {
            use rayon::prelude::*;
            let cuts: Vec<Vec<u64>> = inputs
                .par_iter()
                .zip(&sizes)
                .map(|(input, &size)| sample_cuts(input, size, cut))
                .collect::<Result<_, SortError>>()?;
            let tasks: Vec<(usize, usize)> = cuts
                .iter()
                .enumerate()
                .flat_map(|(i, c)| (0..c.len()).map(move |k| (i, k)))
                .collect();
            let found: Vec<(usize, Option<Sample>)> = tasks
                .par_iter()
                .map(|&(i, k)| Ok((i, sample_at(&order, &inputs[i], cuts[i][k], k == 0)?)))
                .collect::<Result<_, SortError>>()?;
            let mut per_input: Vec<Vec<Sample>> = inputs.iter().map(|_| Vec::new()).collect();
            for (i, s) in found {
                per_input[i].extend(s);
            }
            per_input
                .into_par_iter()
                .zip(&inputs)
                .map(|(s, input)| input_samples(&order, input, s))
                .collect::<Result<_, SortError>>()?
        };
        let mut all: Vec<(usize, usize)> = samples
            .iter()
            .enumerate()
            .flat_map(|(i, s)| (0..s.len()).map(move |k| (i, k)))
            .collect();
        let split_of = |&(i, k): &(usize, usize)| Split {
            input: i,
            sample: &samples[i][k],
        };
        all.sort_unstable_by(|a, b| {
            let (sa, sb) = (split_of(a), split_of(b));
            cmp_split(&order, sa.sample.point.key(), 0, &sb.sample.point)
                .then((sa.input, sa.sample.voffset).cmp(&(sb.input, sb.sample.voffset)))
        });
        // A range reads on average half a cut of every input before its first record: ranges of
        // four cuts per input keep that to an eighth of the work (up to `MAX_RANGE`).
        let range_bytes = (inputs.len() as u64 * (8 * cut / 2)).clamp(RANGE_COMPRESSED, MAX_RANGE);
        let by_size = total.div_ceil(range_bytes);
        let small = (total / options.min_range_bytes.max(1)).min(MIN_RANGES);
        let ranges = by_size.max(small).min(all.len() as u64).max(1) as usize;
        let n = all.len();
        let splits = (1..ranges).map(|j| all[j * n / ranges]).collect();
        Ok(Self {
            order,
            inputs,
            samples,
            splits,
            compressed: total,
            cancel: None,
            batch_hook: None,
        })
    }

    /// The plan as plain data: each input's samples and the split points (`(input, sample)`).
    pub fn to_parts(&self) -> (Vec<Vec<SampleParts>>, Vec<(usize, usize)>) {
        let samples = self
            .samples
            .iter()
            .map(|s| {
                s.iter()
                    .map(|s| (s.voffset, s.point.key().to_vec()))
                    .collect()
            })
            .collect();
        (samples, self.splits.clone())
    }

    /// The plan again from [`MergePlan::to_parts`] (a sample's key is its own key prefix, so the
    /// split points are exactly the original ones).
    pub fn from_parts(
        order: SortOrder,
        inputs: Vec<MergeInput>,
        samples: &[Vec<SampleParts>],
        splits: Vec<(usize, usize)>,
        compressed: u64,
    ) -> Result<Self, SortError> {
        let bad = || SortError::Input("merge plan: samples do not match the inputs".into());
        if samples.len() != inputs.len() {
            return Err(bad());
        }
        if splits
            .iter()
            .any(|&(i, k)| samples.get(i).is_none_or(|s| k >= s.len()))
        {
            return Err(bad());
        }
        let samples = samples
            .iter()
            .map(|s| {
                s.iter()
                    .map(|(voffset, key)| Sample {
                        voffset: *voffset,
                        point: SplitPoint::new(&order, key, 0),
                        used: AtomicBool::new(false),
                        confirmed: AtomicBool::new(false),
                    })
                    .collect()
            })
            .collect();
        Ok(Self {
            order,
            inputs,
            samples,
            splits,
            compressed,
            cancel: None,
            batch_hook: None,
        })
    }

    /// The samples ranges started reading at (`used`) and those readers reached exactly
    /// (`confirmed`), as `(input, sample)`: what [`MergePlan::check_samples`] checks.
    pub fn sample_marks(&self) -> (SampleRefs, SampleRefs) {
        let (mut used, mut confirmed) = (Vec::new(), Vec::new());
        for (i, samples) in self.samples.iter().enumerate() {
            for (k, s) in samples.iter().enumerate() {
                if s.used.load(AtomicOrdering::Relaxed) {
                    used.push((i, k));
                }
                if s.confirmed.load(AtomicOrdering::Relaxed) {
                    confirmed.push((i, k));
                }
            }
        }
        (used, confirmed)
    }

    /// Adds marks from [`MergePlan::sample_marks`] of other processes' ranges.
    pub fn add_marks(&self, used: &[(usize, usize)], confirmed: &[(usize, usize)]) {
        let at = |&(i, k): &(usize, usize)| self.samples.get(i).and_then(|s| s.get(k));
        used.iter()
            .filter_map(at)
            .for_each(|s| s.used.store(true, AtomicOrdering::Relaxed));
        confirmed
            .iter()
            .filter_map(at)
            .for_each(|s| s.confirmed.store(true, AtomicOrdering::Relaxed));
    }

    /// Range readers stop with [`SortError::Cancelled`] between batches once `flag` is set.
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// Calls `hook` with every batch of input records the ranges read (each input record is in
    /// exactly one range, so in exactly one batch): the records read, e.g. for their checksums.
    pub fn with_batch_hook(mut self, hook: BatchHook) -> Self {
        self.batch_hook = Some(hook);
        self
    }

    /// After every range: checks that each sample a range started reading at is a record start,
    /// confirmed by a reader that started at an earlier sample and reached it exactly (by induction
    /// from the first record, which the header gives). The boundary finder may in theory be fooled
    /// by data that looks like records; then this fails and the caller merges on one thread.
    pub fn check_samples(&self) -> Result<(), SortError> {
        for (input, samples) in self.inputs.iter().zip(&self.samples) {
            for s in samples.iter().skip(1) {
                if s.used.load(AtomicOrdering::Relaxed)
                    && !s.confirmed.load(AtomicOrdering::Relaxed)
                {
                    return Err(SortError::Unordered(format!(
                        "{}: planned record boundary at virtual offset {} not confirmed",
                        input.path.display(),
                        s.voffset
                    )));
                }
            }
        }
        Ok(())
    }

    /// Compressed bytes of all inputs.
    pub fn compressed_bytes(&self) -> u64 {
        self.compressed
    }

    /// Number of ranges.
    pub fn ranges(&self) -> usize {
        self.splits.len() + 1
    }

    fn split(&self, j: usize) -> Split<'_> {
        let (i, k) = self.splits[j];
        Split {
            input: i,
            sample: &self.samples[i][k],
        }
    }

    /// The virtual offset of the sample range `r`'s reader of input `i` starts at (as
    /// [`MergePlan::open`] chooses it), with its number.
    fn start_sample(&self, r: usize, i: usize) -> Option<(usize, &Sample)> {
        let samples = &self.samples[i];
        let k = match r.checked_sub(1).map(|j| self.split(j)) {
            None => 0,
            Some(lo) => samples
                .partition_point(|s| {
                    cmp_at(&self.order, s.point.key(), i, s.voffset, lo) == Ordering::Less
                })
                .saturating_sub(1),
        };
        samples.get(k).map(|s| (k, s))
    }

    /// Where the readers of `ranges` (consecutive) read each input, as virtual offsets: from the
    /// sample the first range's reader starts at to the first sample at or after the last range's
    /// end (`None`: the end of the input; every reader stops at or before it). `None` for an input
    /// none of them reads. For drivers that fetch only these bytes of remote inputs.
    pub fn spans(&self, ranges: std::ops::Range<usize>) -> Vec<Option<(u64, Option<u64>)>> {
        let hi = (ranges.end <= self.splits.len() && !ranges.is_empty())
            .then(|| self.split(ranges.end - 1));
        (0..self.inputs.len())
            .map(|i| {
                if ranges.is_empty() {
                    return None;
                }
                let (k, start) = self.start_sample(ranges.start, i)?;
                let samples = &self.samples[i];
                let end = match hi {
                    None => samples.len(),
                    Some(hi) => samples.partition_point(|s| {
                        cmp_at(&self.order, s.point.key(), i, s.voffset, hi) == Ordering::Less
                    }),
                };
                (k < end).then(|| (start.voffset, samples.get(end).map(|s| s.voffset)))
            })
            .collect()
    }

    /// Opens range `r`: every input with records in it, positioned on its first record there.
    pub fn open<'a>(
        &'a self,
        r: usize,
        attach: &'a [Arc<Translation>],
    ) -> Result<MergeRange<'a>, SortError> {
        let order = self.order;
        let lo = r.checked_sub(1).map(|j| self.split(j));
        let hi = (r < self.splits.len()).then(|| self.split(r));
        let mut sources = Vec::new();
        let mut inputs = Vec::new();
        for (i, input) in self.inputs.iter().enumerate() {
            let samples = &self.samples[i];
            // The last sample before the range (or the first record): reading starts there.
            let Some((k, start)) = self.start_sample(r, i) else {
                continue;
            };
            if let Some(hi) = hi {
                if cmp_at(&order, start.point.key(), i, start.voffset, hi) != Ordering::Less {
                    continue;
                }
            }
            start.used.store(true, AtomicOrdering::Relaxed);
            let mut cursor = Cursor::open(
                input,
                None,
                i,
                start.voffset,
                &samples[k + 1..],
                READ_BUFFER,
            )?;
            // Skip to the range's first record; it starts the first batch.
            let mut first = Vec::new();
            loop {
                first.clear();
                if cursor.next_into(&order, &mut first)?.is_none() {
                    break;
                }
                match lo {
                    Some(lo)
                        if cmp_at(&order, &first[4..], i, cursor.voffset, lo) == Ordering::Less => {
                    }
                    _ => break,
                }
            }
            if first.is_empty() {
                continue;
            }
            let cancel = self.cancel.clone();
            let hook = self.batch_hook.clone();
            sources.push(Source::feed(Box::new(feed(
                order, cursor, first, hi, cancel, hook,
            )))?);
            inputs.push(i);
        }
        Ok(MergeRange {
            order,
            sources,
            inputs,
            attach,
            scratch: Vec::new(),
        })
    }
}

/// Batches of a cursor's records (starting with `first`, already read) that sort before `hi`;
/// stops with [`SortError::Cancelled`] once `cancel` is set.
fn feed<'a>(
    order: SortOrder,
    mut cursor: Cursor<'a>,
    first: Vec<u8>,
    hi: Option<Split<'a>>,
    cancel: Option<Arc<AtomicBool>>,
    hook: Option<BatchHook>,
) -> impl FnMut() -> Result<Option<RecordBatch>, SortError> + 'a {
    let mut done = false;
    let mut first = Some((first, cursor.voffset));
    move || {
        if done {
            return Ok(None);
        }
        if cancel
            .as_ref()
            .is_some_and(|c| c.load(AtomicOrdering::Relaxed))
        {
            return Err(SortError::Cancelled);
        }
        let (mut buf, mut offsets) = (Vec::with_capacity(FEED_BYTES + (64 << 10)), Vec::new());
        let mut pending = first.take();
        // HOT: once per record of a merge: read, translate into the batch, check order and range.
        while buf.len() < FEED_BYTES {
            let (start, voffset) = match pending.take() {
                Some((rec, voffset)) => {
                    buf.extend_from_slice(&rec);
                    (0, voffset)
                }
                None => match cursor.next_into(&order, &mut buf)? {
                    Some(start) => (start, cursor.voffset),
                    None => {
                        done = true;
                        break;
                    }
                },
            };
            if let Some(hi) = hi {
                if cmp_at(&order, &buf[start + 4..], cursor.index, voffset, hi) != Ordering::Less {
                    buf.truncate(start);
                    done = true;
                    break;
                }
            }
            offsets.push(start as u32);
        }
        let end = buf.len();
        let batch = RecordBatch::from_parts(buf, offsets, end, 0);
        if let Some(h) = &hook {
            h(&batch);
        }
        Ok(Some(batch))
    }
}

/// Samples `input`: its first record, and the first record after every `cut` compressed bytes.
/// Each sample is one task, so a single big input is sampled on all threads too.
fn sample_cuts(input: &MergeInput, size: u64, cut: u64) -> Result<Vec<u64>, SortError> {
    let path: &Path = &input.path;
    let first = plan_ranges(path, 1)
        .map_err(|e| input_error(input, e))?
        .ranges[0]
        .start;
    // Cuts in the header's blocks would only find the first record again (or, fooled by header
    // bytes, a false one): cuts start after the first record's block.
    Ok(std::iter::once(first)
        .chain((1..size.div_ceil(cut)).map(|k| k * cut))
        .filter(|&c| c == first || c > first >> 16)
        .collect())
}

/// The sample at compressed offset `at` (or, with `first`, the record at virtual offset `at`, the
/// input's first): `None` if no record starts after `at`.
fn sample_at(
    order: &SortOrder,
    input: &MergeInput,
    at: u64,
    first: bool,
) -> Result<Option<Sample>, SortError> {
    let mut file = Input::open_path(&input.path).map_err(|e| input_error(input, e))?;
    let (voffset, raw) = if first {
        let mut cursor = Cursor::open(input, Some(file), 0, at, &[], 16 << 10)?;
        if !cursor.read_raw()? {
            return Ok(None); // a header-only input
        }
        (cursor.voffset, std::mem::take(&mut cursor.raw))
    } else {
        match find_first_record(&mut file, at, input.n_ref, SAMPLE_WINDOW)
            .map_err(|e| input_error(input, e))?
        {
            Some(found) => found,
            None => return Ok(None),
        }
    };
    // The boundary finder checked the record's layout; translation needs nothing more.
    let mut rec = Vec::with_capacity(raw.len() + 16);
    let t = &input.translation;
    t.translate_into(&raw, &mut rec, t.tids_identity());
    Ok(Some(Sample {
        voffset,
        point: SplitPoint::new(order, &rec[4..], 0),
        used: AtomicBool::new(false),
        confirmed: AtomicBool::new(false),
    }))
}

/// The samples of one input in file order, checked to be in key order.
fn input_samples(
    order: &SortOrder,
    input: &MergeInput,
    mut samples: Vec<Sample>,
) -> Result<Vec<Sample>, SortError> {
    samples.sort_unstable_by_key(|s| s.voffset);
    samples.dedup_by_key(|s| s.voffset);
    for w in samples.windows(2) {
        if cmp_split(order, w[0].point.key(), 0, &w[1].point) == Ordering::Greater {
            return Err(SortError::Unordered(format!(
                "{}: not sorted in the merge order (at virtual offset {})",
                input.path.display(),
                w[1].voffset
            )));
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sortase_bam::sam_parse::parse_record;
    use sortase_bam::{Header, Reference};
    use sortase_bgzf::{BlockEncoder, CompressionLevel, EOF_MARKER};
    use std::io::Write;

    /// A coordinate-sorted BAM of `n` records with 150 random bases (a few MB: several samples).
    fn write_bam(path: &Path, n: usize) -> Vec<Vec<u8>> {
        let header = Header::new(
            "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:10000000\n".into(),
            vec![Reference {
                name: b"chr1".to_vec(),
                length: 10_000_000,
            }],
        );
        let mut enc = BlockEncoder::new(CompressionLevel::samtools(1));
        enc.write_all(&header.to_bam_bytes()).unwrap();
        let mut state = 7u64;
        let mut rand = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let mut records = Vec::new();
        for i in 0..n {
            let seq: String = (0..150).map(|_| b"ACGT"[rand() % 4] as char).collect();
            let qual: String = (0..150)
                .map(|_| (b'!' + (rand() % 40) as u8) as char)
                .collect();
            // Ties: positions repeat ten times.
            let line = format!(
                "r{i}\t0\tchr1\t{}\t60\t150M\t*\t0\t0\t{seq}\t{qual}",
                1 + i / 10
            );
            let mut rec = Vec::new();
            parse_record(line.as_bytes(), &header, &mut rec).unwrap();
            enc.write_all(&rec).unwrap();
            records.push(rec);
        }
        let blocks = enc.finish().unwrap();
        let mut f = std::fs::File::create(path).unwrap();
        f.write_all(&blocks.bytes).unwrap();
        f.write_all(&EOF_MARKER).unwrap();
        records
    }

    fn input(path: &Path) -> MergeInput {
        MergeInput {
            path: path.to_path_buf(),
            n_ref: 1,
            translation: Arc::new(Translation {
                tids: vec![0],
                ..Default::default()
            }),
        }
    }

    /// Every range in order, concatenated (the first error stops).
    fn run_all(plan: &MergePlan) -> Result<Vec<Vec<u8>>, SortError> {
        let attach = [Arc::new(Translation::default())];
        let mut out = Vec::new();
        for r in 0..plan.ranges() {
            plan.open(r, &attach)?.for_each(|rec| {
                out.push(rec.to_vec());
                Ok(())
            })?;
        }
        plan.check_samples()?;
        Ok(out)
    }

    #[test]
    fn ranges_tile_one_input_and_false_boundaries_are_caught() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.bam");
        let records = write_bam(&path, 40_000);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let plan_one = || {
            pool.install(|| {
                MergePlan::new(
                    SortOrder::Coordinate,
                    vec![input(&path)],
                    &RangeOptions::default(),
                )
            })
        };
        let plan = plan_one().unwrap();
        assert!(
            plan.samples[0].len() >= 4,
            "{} samples",
            plan.samples[0].len()
        );
        assert!(plan.ranges() >= 4, "{} ranges", plan.ranges());
        assert!(
            run_all(&plan).unwrap() == records,
            "ranges do not tile the input"
        );
        // Every sample a range started at was confirmed by an earlier reader.
        assert!(plan.samples[0]
            .iter()
            .skip(1)
            .all(|s| !s.used.load(AtomicOrdering::Relaxed)
                || s.confirmed.load(AtomicOrdering::Relaxed)));

        // A planned boundary one byte into a record (as if the boundary finder had been fooled):
        // the reader that passes it reports it, before any range reads from it.
        let mut bad = plan_one().unwrap();
        let k = bad.samples[0].len() / 2;
        bad.samples[0][k].voffset += 1;
        match run_all(&bad) {
            Err(SortError::Unordered(m)) => assert!(m.contains("not a record start"), "{m}"),
            other => panic!("false boundary not caught: {:?}", other.map(|r| r.len())),
        }
    }
}
