//! [`ReadJob`]: a BAM/SAM/CRAM file (or an indexed region of a BAM or CRAM) read into Arrow record batches,
//! as a stream ([`ReadJob::stream`]) or whole ([`ReadJob::run`]).

use crate::columns::{reference_names, BatchBuilder};
use crate::pipeline::{feed, format_error, keep, End, RangeWork, Workers, BATCH_ROWS};
use crate::plan::{region_span, Plan};
use crate::schema::{Field, Layout, TagColumn, TagKind};
use anyhow::Context;
use arrow_array::{ArrayRef, RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use serde::{Deserialize, Serialize};
use sortase::input::Input;
use sortase::{Error, Progress, Result, Runtime};
use sortase_bam::query::parse_region;
use sortase_bam::{Header, RecordBatch as RawBatch};
use sortase_index::range::RecordRange;
use sortase_ops::filter::expr::Scratch;
use sortase_ops::filter::{FilterSpec, RecordFilter};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Reads alignment records into Arrow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadJob {
    /// The input: BAM (read on all cores by byte ranges), SAM, bgzipped SAM or CRAM (one stream);
    /// `-` for standard input.
    pub input: String,
    /// Only records overlapping this region (`chr1`, `chr1:100-200`, 1-based inclusive, as samtools),
    /// found through the BAM's index (`.bai`/`.csi`) or the CRAM's (`.crai`); `None`: every record.
    pub region: Option<String>,
    /// Fixed columns by name, in this order ([`Field::name`]); `None`: all of them.
    pub columns: Option<Vec<String>>,
    /// Tags to give columns of their own (after the fixed columns).
    pub tags: Vec<TagColumn>,
    /// Reference FASTA for CRAM.
    pub reference: Option<PathBuf>,
    /// Rows per record batch (at most; batches end with their range).
    pub batch_rows: usize,
    /// samtools view's record filters (`-f -F -q -e` ...), checked on the raw records in the
    /// decode workers: a record that fails costs no Arrow column. Records are those of `sortase
    /// view` with the same options (and region).
    #[serde(default)]
    pub filter: FilterSpec,
}

/// What a read did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadReport {
    /// Records read.
    pub records: u64,
    /// Byte ranges planned (1 for SAM/CRAM).
    pub ranges: usize,
    /// Wall time in seconds.
    pub seconds: f64,
}

impl ReadJob {
    /// Reads every record of `input`, all columns.
    pub fn new(input: impl Into<String>) -> Self {
        Self {
            input: input.into(),
            region: None,
            columns: None,
            tags: Vec::new(),
            reference: None,
            batch_rows: BATCH_ROWS,
            filter: FilterSpec::default(),
        }
    }

    /// Starts reading on `rt`'s threads; the batches come in file order.
    pub fn stream(&self, rt: &Runtime) -> Result<BatchStream> {
        // Error::context, not anyhow's: a kinded error would lose anyhow's context in Error::from.
        self.start(rt)
            .map_err(|e| Error::from(e).context(self.input.clone()))
    }

    /// Reads everything: the schema and every batch.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let sam = dir.path().join("in.sam");
    /// # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\tNM:i:1\n").unwrap();
    /// use sortase_arrow::{ReadJob, TagColumn};
    /// let mut job = ReadJob::new(sam.to_str().unwrap());
    /// job.columns = Some(vec!["qname".into(), "pos".into()]);
    /// job.tags = vec![TagColumn { tag: "NM".into(), kind: None }];
    /// let (schema, batches, report) = job.run(&sortase::Runtime::with_threads(2)?)?;
    /// assert_eq!(schema.field(2).name(), "NM");
    /// assert_eq!((report.records, batches[0].num_columns()), (1, 3));
    /// # Ok::<(), sortase::Error>(())
    /// ```
    pub fn run(&self, rt: &Runtime) -> Result<(SchemaRef, Vec<RecordBatch>, ReadReport)> {
        let clock = std::time::Instant::now();
        let mut stream = self.stream(rt)?;
        let mut batches = Vec::new();
        for b in stream.by_ref() {
            batches.push(b?);
        }
        let report = ReadReport {
            records: stream.records(),
            ranges: stream.ranges,
            seconds: clock.elapsed().as_secs_f64(),
        };
        Ok((stream.schema(), batches, report))
    }

    fn fields(&self) -> Result<Vec<Field>> {
        let Some(names) = &self.columns else {
            return Ok(Field::ALL.to_vec());
        };
        names
            .iter()
            .map(|n| {
                Field::from_name(n).ok_or_else(|| {
                    let all: Vec<&str> = Field::ALL.iter().map(|f| f.name()).collect();
                    Error::argument(format!(
                        "columns: no column {n:?}; the columns are {} (select tags with tags=)",
                        all.join(", ")
                    ))
                })
            })
            .collect()
    }

    /// The layout, with tag kinds not given taken from `sample`'s first occurrence.
    fn layout(&self, sample: Option<&RawBatch>) -> Result<Layout> {
        let mut tags = Vec::with_capacity(self.tags.len());
        for t in &self.tags {
            let tag: [u8; 2] = t.tag.as_bytes().try_into().map_err(|_| {
                Error::argument(format!("tags: {:?} is not a two-character tag", t.tag))
            })?;
            if tags.iter().any(|(x, _)| *x == tag) {
                return Err(Error::argument(format!("tags: {} is named twice", t.tag)));
            }
            let seen = || {
                sample?.iter().find_map(|r| {
                    let f = r.aux().find(|f| f.tag() == tag)?;
                    Some(TagKind::of_value(
                        f.value_type(),
                        f.raw.get(3).copied().unwrap_or(0),
                    ))
                })
            };
            let kind = t
                .kind
                .or_else(seen)
                .or_else(|| TagKind::standard(tag))
                .unwrap_or(TagKind::String);
            tags.push((tag, kind));
        }
        Ok(Layout::new(self.fields()?, tags))
    }

    /// The filter compiled for `header` (files read, expression parsed); `None`: every record
    /// passes.
    fn record_filter(&self, header: &Header) -> Result<Option<Arc<RecordFilter>>> {
        let filter = RecordFilter::new(&self.filter, header)
            .map_err(|e| Error::from(anyhow::Error::new(e)))?;
        Ok((!filter.passes_all()).then(|| Arc::new(filter)))
    }

    fn needs_sample(&self) -> bool {
        self.tags.iter().any(|t| t.kind.is_none())
    }

    fn start(&self, rt: &Runtime) -> anyhow::Result<BatchStream> {
        if self.batch_rows == 0 {
            return Err(Error::argument("batch_rows must be at least 1").into());
        }
        self.fields()?;
        if self.input != "-" && sortase_io::size(&self.input).is_ok_and(|n| n == 0) {
            return Err(Error::new(
                sortase::ErrorKind::Input,
                "file is empty (not SAM, BAM or CRAM)",
            )
            .into());
        }
        if self.input != "-" && is_bam(Path::new(&self.input))? {
            return self.start_bam(rt);
        }
        let cram = self.input != "-" && sortase::input::is_cram(Path::new(&self.input));
        if self.region.is_some() && !cram {
            return Err(Error::argument(
                "region: only an indexed BAM or CRAM can be read by region (this input is SAM or \
                 standard input)",
            )
            .into());
        }
        self.start_input(rt)
    }

    fn start_bam(&self, rt: &Runtime) -> anyhow::Result<BatchStream> {
        let path = PathBuf::from(&self.input);
        let whole = sortase_index::range::plan_ranges(&path, 1)?;
        let (header, first) = (whole.header, whole.ranges[0].start);
        let n_ref = header.references().len();
        let filter = self.record_filter(&header)?;
        let file_len = sortase_io::Source::open_path(&path)?.len()?;
        let (region, first, span_end) = match &self.region {
            None => (None, Some(first), file_len),
            Some(text) => {
                let region = parse_region(text, &header)
                    .map_err(|e| Error::argument(format!("region {text:?} {e}")))?;
                match region_span(&path, &region)? {
                    Some((start, end)) => (Some(region), Some(start), end.min(file_len)),
                    None => (Some(region), None, 0),
                }
            }
        };
        let sample = match (first, self.needs_sample()) {
            (Some(first), true) => sample_batch(&path, first, n_ref)?,
            _ => None,
        };
        let layout = Arc::new(self.layout(sample.as_ref())?);
        let Some(first) = first else {
            return Ok(BatchStream::empty(layout));
        };
        let threads = rt.threads();
        let work = Arc::new(RangeWork {
            path,
            plan: Plan::new(first, span_end, threads, n_ref),
            n_ref,
            layout: layout.clone(),
            names: reference_names(&header),
            region,
            filter,
            cancel: rt.cancel_flag().clone(),
            batch_rows: self.batch_rows,
            records: AtomicU64::new(0),
            past: AtomicBool::new(false),
            progress: Arc::new(rt.progress("read_bam", span_end.saturating_sub(first >> 16))),
            file_len,
        });
        let ranges = work.plan.len();
        Ok(BatchStream {
            schema: layout.schema.clone(),
            workers: Some(Workers::ranges(work.clone(), threads)),
            source: Source::Ranges { work, threads },
            ranges,
            failed: false,
        })
    }

    /// The records of a SAM or CRAM input: all of them (one stream), or those of the region of a
    /// CRAM, through its `.crai` (htslib's iterator).
    fn open_source(&self, rt: &Runtime) -> anyhow::Result<(Header, InputRecords)> {
        if let Some(text) = &self.region {
            let options = sortase_cram::ReadOptions {
                reference: self.reference.clone(),
                threads: rt.threads(),
                fields: sortase_cram::Fields::All,
            };
            let indexed = sortase_cram::IndexedCram::open(Path::new(&self.input), &options)?;
            let header = indexed.header()?;
            let region = parse_region(text, &header)
                .map_err(|e| Error::argument(format!("region {text:?} {e}")))?;
            return Ok((header, InputRecords::Region(Box::new(indexed), region)));
        }
        let mut input = Input::open(
            &self.input,
            rt.threads(),
            self.reference.as_deref(),
            &Progress::hidden(),
        )?;
        input.set_cancel(rt.cancel_flag().clone());
        Ok((input.header.clone(), InputRecords::Whole(Box::new(input))))
    }

    fn start_input(&self, rt: &Runtime) -> anyhow::Result<BatchStream> {
        let (header, input) = self.open_source(rt)?;
        let filter = self.record_filter(&header)?;
        let names = reference_names(&header);
        let records = Arc::new(AtomicU64::new(0));
        // The tag kinds may need the first records: the input thread reads them and sends the
        // layout back before going on.
        let (layout_tx, layout_rx) = std::sync::mpsc::sync_channel::<Result<Arc<Layout>>>(1);
        let job = self.clone();
        let counted = records.clone();
        let workers = Workers::single(move |shared| {
            read_input(&job, input, filter, names, shared, &counted, layout_tx)
        });
        let layout = match layout_rx.recv() {
            Ok(layout) => layout?,
            Err(_) => match workers.next() {
                Some(Err(End::Failed(e))) => return Err(e.into()),
                _ => return Err(anyhow::anyhow!("internal: the input thread ended early")),
            },
        };
        Ok(BatchStream {
            schema: layout.schema.clone(),
            workers: Some(workers),
            source: Source::Input { records },
            ranges: 1,
            failed: false,
        })
    }
}

/// Whether `path` is BGZF-compressed BAM (else SAM/CRAM, left to [`Input`]).
fn is_bam(path: &Path) -> anyhow::Result<bool> {
    let mut head = Vec::new();
    sortase_io::Source::open_path(path)
        .context("cannot open")?
        .take(18)
        .read_to_end(&mut head)
        .context("cannot read")?;
    if !sortase_bgzf::is_bgzf(&head) {
        return Ok(false);
    }
    let mut reader = sortase_bgzf::SeekReader::new(std::io::BufReader::new(
        sortase_io::Source::open_path(path)?,
    ));
    let mut magic = Vec::new();
    (&mut reader).take(4).read_to_end(&mut magic)?;
    Ok(magic == b"BAM\x01")
}

/// The first chunk of records from `first`, for tag kinds.
fn sample_batch(path: &Path, first: u64, n_ref: usize) -> anyhow::Result<Option<RawBatch>> {
    let range = RecordRange {
        start: first,
        end: u64::MAX,
    };
    let mut stream = sortase_index::range::RangeStream::open(path, &range, n_ref)?;
    Ok(stream.next_batch()?)
}

/// What the input thread of a SAM/CRAM read reads.
enum InputRecords {
    /// Every record.
    Whole(Box<Input>),
    /// The records of a region of an indexed CRAM.
    Region(Box<sortase_cram::IndexedCram>, sortase_bam::query::Region),
}

impl InputRecords {
    /// Calls `each` on the batches, in file order.
    fn for_each_batch(
        self,
        each: impl FnMut(RawBatch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut each = each;
        match self {
            InputRecords::Whole(mut input) => input.for_each_batch(each),
            InputRecords::Region(mut indexed, region) => {
                each(indexed.query(Some(region.tid), region.beg, region.end)?)
            }
        }
    }
}

/// The layout of the read (from `sample` when the job needs one), sent once on `layout_tx` (an
/// error too); a builder of batches in it.
fn begin_batches(
    job: &ReadJob,
    sample: Option<&RawBatch>,
    names: &ArrayRef,
    layout_tx: &mut Option<std::sync::mpsc::SyncSender<Result<Arc<Layout>>>>,
) -> Result<BatchBuilder> {
    let layout = job.layout(if job.needs_sample() { sample } else { None });
    let tx = layout_tx.take();
    match layout {
        Ok(l) => {
            let l = Arc::new(l);
            if let Some(tx) = tx {
                let _ = tx.send(Ok(l.clone()));
            }
            Ok(BatchBuilder::new(l, names.clone()))
        }
        Err(e) => {
            if let Some(tx) = tx {
                let _ = tx.send(Err(Error::new(e.kind(), e.to_string())));
            }
            Err(e)
        }
    }
}

/// The input thread of a SAM/CRAM read.
fn read_input(
    job: &ReadJob,
    input: InputRecords,
    filter: Option<Arc<RecordFilter>>,
    names: ArrayRef,
    shared: &crate::pipeline::Shared,
    records: &AtomicU64,
    layout_tx: std::sync::mpsc::SyncSender<Result<Arc<Layout>>>,
) -> End {
    let mut layout_tx = Some(layout_tx);
    let mut begin = |sample: Option<&RawBatch>| begin_batches(job, sample, &names, &mut layout_tx);
    let emit = |b: RecordBatch| {
        records.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
        shared.push(0, b)
    };
    let mut builder: Option<BatchBuilder> = None;
    let mut scratch = Scratch::default();
    let mut stopped = false;
    let result = input.for_each_batch(|batch| {
        if builder.is_none() {
            builder = Some(begin(Some(&batch))?);
        }
        let b = builder.as_mut().expect("set above");
        let mut views = Vec::with_capacity(batch.len());
        for r in batch.iter() {
            if keep(filter.as_deref(), &r, &mut scratch)? {
                views.push(r);
            }
        }
        if !feed(b, &views, job.batch_rows, emit)? {
            stopped = true;
            return Err(Error::cancelled().into());
        }
        Ok(())
    });
    if stopped {
        return End::Done;
    }
    let end = result.map_err(Error::from).and_then(|()| {
        let mut b = match builder {
            Some(b) => b,
            None => begin(None)?,
        };
        if b.rows() > 0 {
            emit(b.finish().map_err(format_error)?);
        }
        Ok(())
    });
    match end {
        Ok(()) => End::Done,
        Err(e) => End::Failed(e.context(job.input.clone())),
    }
}

enum Source {
    Ranges {
        work: Arc<RangeWork>,
        threads: usize,
    },
    Input {
        records: Arc<AtomicU64>,
    },
    Empty,
}

/// Record batches of a [`ReadJob`] in file order. Dropping it stops the workers.
pub struct BatchStream {
    schema: SchemaRef,
    workers: Option<Workers>,
    source: Source,
    ranges: usize,
    failed: bool,
}

impl BatchStream {
    fn empty(layout: Arc<Layout>) -> Self {
        Self {
            schema: layout.schema.clone(),
            workers: None,
            source: Source::Empty,
            ranges: 0,
            failed: false,
        }
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Records delivered so far.
    pub fn records(&self) -> u64 {
        match &self.source {
            Source::Ranges { work, .. } => work.records.load(Ordering::Relaxed),
            Source::Input { records } => records.load(Ordering::Relaxed),
            Source::Empty => 0,
        }
    }

    /// As an Arrow [`RecordBatchReader`] (errors become `ArrowError::ExternalError`).
    pub fn into_reader(self) -> impl RecordBatchReader + Send {
        Reader(self)
    }

    fn fail(&mut self, e: Error) -> Option<Result<RecordBatch>> {
        self.failed = true;
        self.workers = None;
        Some(Err(e))
    }

    /// Goes on from `resume` with one range, after the boundary finder was fooled.
    fn restart(&mut self, resume: u64) {
        let Source::Ranges { work, threads } = &self.source else {
            return;
        };
        self.workers = None;
        let work = Arc::new(RangeWork {
            path: work.path.clone(),
            plan: Plan::single(resume, work.n_ref),
            n_ref: work.n_ref,
            layout: work.layout.clone(),
            names: work.names.clone(),
            region: work.region,
            filter: work.filter.clone(),
            cancel: work.cancel.clone(),
            batch_rows: work.batch_rows,
            records: AtomicU64::new(work.records.load(Ordering::Relaxed)),
            past: AtomicBool::new(false),
            progress: work.progress.clone(),
            file_len: work.file_len,
        });
        self.workers = Some(Workers::ranges(work.clone(), 1));
        self.source = Source::Ranges {
            work,
            threads: *threads,
        };
    }
}

impl Iterator for BatchStream {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if self.failed {
                return None;
            }
            let item = self.workers.as_ref()?.next();
            match item {
                None => {
                    self.workers = None;
                    return None;
                }
                Some(Ok(batch)) => return Some(Ok(batch)),
                Some(Err(End::Done)) => {}
                Some(Err(End::Past)) => {
                    self.workers = None;
                    return None;
                }
                Some(Err(End::Boundary { resume })) => self.restart(resume),
                Some(Err(End::Failed(e))) => {
                    let path = match &self.source {
                        Source::Ranges { work, .. } => work.path.display().to_string(),
                        _ => String::new(),
                    };
                    let e = match path.is_empty() || e.kind() == sortase::ErrorKind::Cancelled {
                        true => e,
                        false => e.context(path),
                    };
                    return self.fail(e);
                }
            }
        }
    }
}

struct Reader(BatchStream);

impl Iterator for Reader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0
            .next()
            .map(|r| r.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Reader {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }
}

/// The header of `input` (for callers that show reference names or lengths beside the records).
pub fn read_header(input: &str, reference: Option<&Path>) -> Result<Header> {
    Input::open(input, 1, reference, &Progress::hidden())
        .map(|i| i.header)
        .with_context(|| input.to_string())
        .map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;

    /// The records of `sam` that `filter` keeps, by name.
    fn kept(sam: &str, filter: FilterSpec) -> Result<Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.sam");
        std::fs::write(&path, sam).unwrap();
        let mut job = ReadJob::new(path.to_str().unwrap());
        job.columns = Some(vec!["qname".into()]);
        job.filter = filter;
        let (_, batches, report) = job.run(&Runtime::with_threads(2)?)?;
        let names: Vec<String> = batches
            .iter()
            .flat_map(|b| {
                let c = b.column(0).as_string::<i32>();
                (0..c.len())
                    .map(|i| c.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(report.records, names.len() as u64);
        Ok(names)
    }

    const SAM: &str = "@SQ\tSN:chr1\tLN:100\n\
        a\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\tNM:i:0\n\
        b\t16\tchr1\t20\t10\t4M\t*\t0\t0\tACGT\tIIII\tNM:i:3\n\
        c\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n\
        d\t1040\tchr1\t30\t40\t4M\t*\t0\t0\tACGT\tIIII\tNM:i:1\n";

    #[test]
    fn filters_keep_what_samtools_view_keeps() {
        let spec = |f: fn(&mut FilterSpec)| {
            let mut s = FilterSpec::default();
            f(&mut s);
            s
        };
        assert_eq!(kept(SAM, spec(|s| s.min_mapq = 30)).unwrap(), ["a", "d"]);
        assert_eq!(
            kept(SAM, spec(|s| s.require_flags = 16)).unwrap(),
            ["b", "d"]
        );
        assert_eq!(
            kept(SAM, spec(|s| s.exclude_flags = 0x404)).unwrap(),
            ["a", "b"]
        );
        let e = |s: &mut FilterSpec| s.expression = Some("[NM] >= 1 && pos > 15".into());
        assert_eq!(kept(SAM, spec(e)).unwrap(), ["b", "d"]);
        assert_eq!(
            kept(SAM, FilterSpec::default()).unwrap(),
            ["a", "b", "c", "d"]
        );
    }

    #[test]
    fn a_bad_expression_is_an_argument_error_before_reading() {
        let e = |s: &mut FilterSpec| s.expression = Some("mapq >".into());
        let mut spec = FilterSpec::default();
        e(&mut spec);
        let err = kept(SAM, spec).unwrap_err();
        assert!(err.to_string().contains("filter expression"), "{err}");
    }
}
