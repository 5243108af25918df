//! [`ViewJob`]: samtools view's conversions, filters (`-f -F -q -r -R -l -L -d -D -N -e`, from
//! [`sortase_ops::filter`]), region queries and counting (`-c`).
//!
//! Records go through the library's one output writer ([`sortase_exec::writer::SortedOutput`]): BAM → BAM
//! copies raw records into the parallel BGZF writer (no decode/encode), SAM is formatted in parallel
//! batches, CRAM goes through htslib (crates/cram). Counting a BAM file runs over byte ranges on all cores.
//!
//! ```
//! use sortase::{OutputSpec, Runtime, ViewJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! let rt = Runtime::with_threads(2)?;
//! let bam = dir.path().join("out.bam");
//! ViewJob::new(input.to_str().unwrap(), OutputSpec::to_path(&bam)).run(&rt)?;
//! let count = ViewJob {
//!     count: true,
//!     filter: sortase::view::FilterSpec {
//!         exclude_flags: sortase::view::parse_flags("UNMAP")?,
//!         ..Default::default()
//!     },
//!     ..ViewJob::new(bam.to_str().unwrap(), OutputSpec::default())
//! };
//! assert_eq!(count.run(&rt)?.count, Some(1));
//! # Ok::<(), sortase::Error>(())
//! ```
//!
//! An AGD dataset is viewed through its columns (crates/exec `agd/query.rs`): `-f/-F/-q`, regions
//! (from the manifest's per-chunk positions; a coordinate-sorted dataset) and `-M`, as samtools
//! view prints the BAM the dataset came from:
//!
//! ```
//! use sortase::{AgdImportJob, OutputSpec, Runtime, ViewJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\nr2\t0\tchr1\t50\t20\t4M\t*\t0\t0\tACGT\tIIII\nr3\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\t*\n").unwrap();
//! let rt = Runtime::with_threads(2)?;
//! let ds = dir.path().join("ds");
//! AgdImportJob::new(sam.to_str().unwrap(), &ds).run(&rt)?;
//! let count = |regions: &[&str], min_mapq: u8| {
//!     let mut job = ViewJob::new(ds.to_str().unwrap(), OutputSpec::default());
//!     job.count = true;
//!     job.filter.min_mapq = min_mapq;
//!     job.regions = regions.iter().map(|r| r.to_string()).collect();
//!     job.run(&rt).map(|r| r.count)
//! };
//! assert_eq!(count(&[], 0)?, Some(3));
//! assert_eq!(count(&[], 30)?, Some(1));
//! assert_eq!(count(&["chr1:12-50"], 0)?, Some(2));
//! assert_eq!(count(&["chr1:14-49"], 0)?, Some(0));
//! assert_eq!(count(&["*"], 0)?, Some(1));
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bam::{query, Header, RecordBatch};
use sortase_bgzf::CompressionLevel;
use sortase_exec::agd::columns::duplicate_group;
use sortase_exec::agd::dataset_header;
use sortase_exec::agd::query::{self as dataset, Filter};
use sortase_exec::bam_ranges;
use sortase_exec::error::{Error, Result};
use sortase_exec::input::{Format, Input};
use sortase_exec::options::{add_program, OutputSpec, Program};
use sortase_exec::output::{resolve_format, OutFormat};
use sortase_exec::progress::Progress;
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::SortedOutput;
use sortase_ops::filter::expr::Scratch;
pub use sortase_ops::filter::FilterSpec;
use sortase_ops::filter::{FilterError, RecordFilter};
use std::io::Write;
use std::path::{Path, PathBuf};

/// samtools view as a job: one input (SAM, BAM, CRAM; `-` for standard input; or an AGD dataset
/// directory, read through crates/exec `agd/query.rs`) converted, filtered and/or counted.
///
/// The output format: `output.format` (`-O`) if given, else BAM when `output.uncompressed` (`-u`) or
/// `output.level` (`-1`, `--output-fmt-option level=N`) is set and the output file's name does not
/// end in `.sam` or `.cram`, else from the output file's extension, else SAM.
///
/// With the `clap` feature it is also samtools view's flags (`clap::Args`, flattened by `sortase
/// view`): a field's `arg(...)` is its flag and `--help` text; `output` (view's own spelling of the
/// output flags: -b, -C, -1, -T, ...), `filter`'s -f/-F and `program` (--no-PG) are the CLI's to
/// fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ViewJob {
    /// Input SAM/BAM/CRAM file, `-` for stdin, or an AGD dataset directory.
    pub input: String,
    /// Where records (or, with `count`, the count) go. With `count` and no file, the count is only in
    /// the report.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub output: OutputSpec,
    /// Include the header in SAM output.
    #[cfg_attr(feature = "clap", arg(short = 'h', long = "with-header"))]
    pub with_header: bool,
    /// Print the header only.
    #[cfg_attr(feature = "clap", arg(short = 'H', long = "header-only"))]
    pub header_only: bool,
    /// Print only the count of matching records.
    #[cfg_attr(feature = "clap", arg(short = 'c', long = "count"))]
    pub count: bool,
    /// Which records pass: samtools view's `-f -F -q -r -R -n -l -L -d -D -N -e`
    /// ([`sortase_ops::filter`]); its fields sit at the top level of the job's JSON.
    #[serde(flatten)]
    #[cfg_attr(feature = "clap", command(flatten))]
    pub filter: FilterSpec,
    /// Regions (`chr`, `chr:beg-end`, `*`) of an indexed BAM or CRAM or a coordinate-sorted
    /// dataset.
    pub regions: Vec<String>,
    /// The regions as one union: each record once, in file order (AGD datasets).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = 'M', long = "use-index"))]
    pub multi_region: bool,
    /// The `@PG` line to add (`None`: `--no-PG`).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub program: Option<Program>,
}

/// What a view did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewReport {
    /// Records that passed the filters (written, or counted).
    pub records: u64,
    /// With `count`: the count.
    pub count: Option<u64>,
    /// Files written.
    pub outputs: Vec<PathBuf>,
    /// Warnings (regions that could not be parsed), as samtools prints them.
    pub warnings: Vec<String>,
}

/// Parses a flag as samtools does ([`sortase_bam::flags::parse`]): decimal, 0x hex, 0 octal, or
/// comma-separated names (`UNMAP`, ...); a bad one is an argument error.
pub fn parse_flags(s: &str) -> Result<u16> {
    sortase_bam::flags::parse(s).map_err(Error::argument)
}

impl ViewJob {
    /// `input` converted to `output` with every other option at samtools' default.
    pub fn new(input: impl Into<String>, output: OutputSpec) -> Self {
        Self {
            input: input.into(),
            output,
            with_header: false,
            header_only: false,
            count: false,
            filter: FilterSpec::default(),
            regions: Vec::new(),
            multi_region: false,
            program: None,
        }
    }

    /// The output format (see [`ViewJob`]).
    pub fn format(&self) -> Result<OutFormat> {
        let o = &self.output;
        let level = if o.uncompressed {
            CompressionLevel::STORED
        } else {
            CompressionLevel::samtools(o.level.unwrap_or(-1))
        };
        if o.format.is_none() && (o.uncompressed || o.level.is_some()) {
            // samtools view `-u`/`-1`: BAM unless the output's name says SAM or CRAM.
            let ext = o.path.as_deref().and_then(Path::extension);
            let ext = ext.map(|e| e.to_string_lossy().to_ascii_lowercase());
            if !matches!(ext.as_deref(), Some("sam" | "cram")) {
                return Ok(OutFormat::Bam(level));
            }
        }
        resolve_format(
            o.format.as_deref(),
            o.path.as_deref(),
            level,
            OutFormat::Sam,
        )
        .map_err(|e| Error::argument(e.to_string()))
    }

    /// Runs the view on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<ViewReport> {
        run(self, rt).map_err(Error::from)
    }

    /// The filter compiled for `header` (files read, expression parsed).
    fn record_filter(&self, header: &Header) -> anyhow::Result<RecordFilter> {
        Ok(RecordFilter::new(&self.filter, header)?)
    }
}

fn run(job: &ViewJob, rt: &Runtime) -> anyhow::Result<ViewReport> {
    let format = job.format()?;
    if sortase_exec::agd::is_dataset(Path::new(&job.input)) {
        return view_dataset(job, format, rt);
    }
    if job.multi_region {
        return Err(Error::argument(format!(
            "{}: -M (the regions as one union) is implemented for AGD datasets only",
            job.input
        ))
        .into());
    }
    if job.count && job.regions.is_empty() && job.input != "-" && is_bam_file(&job.input) {
        return count_bam_ranges(job, rt);
    }
    if job.count
        && job.regions.is_empty()
        && job.input != "-"
        && job.filter.only_flags_and_mapq()
        && sortase_exec::input::is_cram(Path::new(&job.input))
    {
        if let Some(report) = count_cram_ranges(job, rt)? {
            return Ok(report);
        }
    }
    let size = sortase_exec::input::input_size(&job.input);
    let progress = rt.progress("view", size);
    let mut input = open_input(job, rt, &progress)?;
    let filter = job.record_filter(&input.header)?;
    let mut scratch = Scratch::default();
    let mut report = ViewReport::default();
    if job.count {
        let mut n = 0u64;
        if !job.header_only {
            for_each_batch(
                job,
                rt.threads(),
                &mut input,
                &mut report.warnings,
                &mut |batch| {
                    for r in batch.iter() {
                        n += u64::from(filter.passes(&r, &mut scratch)?);
                    }
                    Ok(())
                },
            )?;
        }
        progress.finish();
        return counted(job, n, std::mem::take(&mut report.warnings));
    }
    let (mut out, outputs) =
        open_output(job, format, input.header.clone(), rt, &mut report.warnings)?;
    if !job.header_only {
        report.records =
            write_records(job, rt, &mut input, &filter, &mut out, &mut report.warnings)?;
    }
    rt.check_cancelled()?;
    out.finish()?;
    progress.finish();
    report.outputs = outputs;
    Ok(report)
}

/// Counting a BAM file: byte ranges on all cores, per-range counts summed; each range keeps its
/// own scratch buffers and the first error of the expression.
fn count_bam_ranges(job: &ViewJob, rt: &Runtime) -> anyhow::Result<ViewReport> {
    let header =
        sortase_exec::input::read_bam_header(&job.input).with_context(|| job.input.clone())?;
    let filter = job.record_filter(&header)?;
    let (_, parts) = bam_ranges::scan(
        job.input.as_ref(),
        rt,
        |_| (0u64, Scratch::default(), None),
        |(n, scratch, failed): &mut (u64, Scratch, Option<FilterError>), r| {
            if failed.is_none() {
                match filter.passes(r, scratch) {
                    Ok(pass) => *n += u64::from(pass),
                    Err(e) => *failed = Some(e),
                }
            }
        },
    )
    .with_context(|| job.input.clone())?;
    let mut total = 0;
    for (n, _, failed) in parts {
        if let Some(e) = failed {
            return Err(anyhow::Error::new(e).context(job.input.clone()));
        }
        total += n;
    }
    counted(job, total, Vec::new())
}

/// Counting a CRAM file: runs of containers on all cores, decoding flags and MAPQ only (what the
/// filter reads); `None`: no records, to be read as a stream.
fn count_cram_ranges(job: &ViewJob, rt: &Runtime) -> anyhow::Result<Option<ViewReport>> {
    let filter = job.record_filter(&Header::new(String::new(), Vec::new()))?;
    let ranges = sortase_exec::cram_ranges::scan(
        job.input.as_ref(),
        rt,
        sortase_cram::Fields::FlagMapq,
        |_| 0u64,
        |n, c| {
            *n += u64::from(filter.passes_fields(c.flag, c.mapq));
            Ok(())
        },
    )
    .with_context(|| job.input.clone())?;
    match ranges {
        Some((_, parts)) => counted(job, parts.iter().sum(), Vec::new()).map(Some),
        None => Ok(None),
    }
}

/// The view's input as a stream: region queries on a BAM file read the header only (their records
/// come through the index); counting reads flags, MAPQ and positions only (CRAM skips decoding the
/// rest, as samtools).
fn open_input(job: &ViewJob, rt: &Runtime, progress: &Progress) -> anyhow::Result<Input> {
    let fields = if job.count && job.filter.only_flags_and_mapq() {
        sortase_cram::Fields::Counting
    } else {
        sortase_cram::Fields::All
    };
    let mut input = if !job.regions.is_empty() && job.input != "-" && is_bam_file(&job.input) {
        Input::bam_header_only(&job.input)
    } else {
        Input::open_fields(
            &job.input,
            rt.threads(),
            job.output.reference.as_deref(),
            fields,
            progress,
        )
    }
    .with_context(|| job.input.clone())?;
    input.set_cancel(rt.cancel_flag().clone());
    Ok(input)
}

/// Writes the records of `input` that `filter` passes to `out`; returns how many.
fn write_records(
    job: &ViewJob,
    rt: &Runtime,
    input: &mut Input,
    filter: &RecordFilter,
    out: &mut SortedOutput,
    warnings: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let mut scratch = Scratch::default();
    let mut records = 0u64;
    for_each_batch(job, rt.threads(), input, warnings, &mut |batch| {
        if filter.passes_all() {
            records += batch.len() as u64;
            out.sink.write_batch(batch)?;
        } else {
            for (i, r) in batch.iter().enumerate() {
                if filter.passes(&r, &mut scratch)? {
                    records += 1;
                    out.sink.write(batch.raw(i))?;
                }
            }
        }
        Ok(())
    })?;
    Ok(records)
}

/// The view's one output site, whatever the source: the header as written (`@PG` added; no header
/// lines in SAM without `-h`/`-H`), the data file and its index, opened under temporary names; with
/// the files it will leave. A CRAM output without a reference adds samtools' warning.
pub(crate) fn open_output(
    job: &ViewJob,
    format: OutFormat,
    mut header: Header,
    rt: &Runtime,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(SortedOutput, Vec<PathBuf>)> {
    add_program(&mut header, job.program.as_ref());
    if format == OutFormat::Cram {
        warnings.extend(job.output.cram_reference_warning());
    }
    let shown = match format {
        OutFormat::Sam if !(job.with_header || job.header_only) => {
            Header::new(String::new(), header.references().to_vec())
        }
        _ => header,
    };
    SortedOutput::for_spec(&job.output, format, &shown, rt.threads())
}

/// The report of a count (with the source's `warnings`), written to the output file if there is
/// one.
pub(crate) fn counted(job: &ViewJob, n: u64, warnings: Vec<String>) -> anyhow::Result<ViewReport> {
    let mut report = ViewReport {
        records: n,
        count: Some(n),
        warnings,
        ..ViewReport::default()
    };
    if let Some(path) = job.output.data_path()? {
        let (dest, mut out) = sortase_exec::files::Destination::open(Some(&path))?;
        writeln!(out, "{n}").with_context(|| dest.name.clone())?;
        out.flush().with_context(|| dest.name.clone())?;
        drop(out);
        dest.commit()?;
        report.outputs.push(path);
    }
    Ok(report)
}

/// Whether `path` is a BGZF file holding BAM (checked from its first block).
fn is_bam_file(path: &str) -> bool {
    let Ok(file) = sortase_io::Source::open(path) else {
        return false;
    };
    let mut reader = sortase_bgzf::SeekReader::new(std::io::BufReader::new(file));
    let mut magic = [0u8; 4];
    std::io::Read::read_exact(&mut reader, &mut magic).is_ok() && &magic == b"BAM\x01"
}

/// Calls `each` on the records of each of the job's regions of a CRAM file, through its `.crai`
/// (htslib's iterator, decoding on `threads`).
fn cram_regions(
    job: &ViewJob,
    threads: usize,
    input: &Input,
    warnings: &mut Vec<String>,
    each: &mut dyn FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let name = || job.input.clone();
    let options = sortase_cram::ReadOptions {
        reference: job.output.reference.clone(),
        threads,
        fields: sortase_cram::Fields::All,
    };
    let mut indexed =
        sortase_cram::IndexedCram::open(Path::new(&job.input), &options).with_context(name)?;
    for r in &job.regions {
        let batch = if r == "*" {
            indexed.query(None, 0, 0)
        } else {
            match query::parse_region(r, &input.header) {
                Ok(region) => indexed.query(Some(region.tid), region.beg, region.end),
                Err(why) => {
                    warnings.push(format!("sortase: region \"{r}\" {why}; continuing"));
                    continue;
                }
            }
        };
        each(batch.with_context(name)?).with_context(name)?;
    }
    Ok(())
}

/// Calls `each` on the input's batches: all of them, or those of the job's regions.
fn for_each_batch(
    job: &ViewJob,
    threads: usize,
    input: &mut Input,
    warnings: &mut Vec<String>,
    each: &mut dyn FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let name = || job.input.clone();
    if job.regions.is_empty() {
        return input.for_each_batch(each).with_context(name);
    }
    if input.format == Format::Cram && job.input != "-" {
        return cram_regions(job, threads, input, warnings, each);
    }
    if input.format != Format::Bam || job.input == "-" {
        bail!(
            "{}: region queries need an indexed BAM or CRAM file (not SAM or stdin)",
            name()
        );
    }
    let mut indexed = query::IndexedBam::open(Path::new(&job.input)).with_context(name)?;
    for r in &job.regions {
        if r == "*" {
            each(indexed.query_unplaced().with_context(name)?).with_context(name)?;
            continue;
        }
        match query::parse_region(r, &input.header) {
            Ok(region) => each(indexed.query(region).with_context(name)?).with_context(name)?,
            Err(why) => warnings.push(format!("sortase: region \"{r}\" {why}; continuing")),
        }
    }
    Ok(())
}

/// The `-f/-F/-q` filter of `job`, refused in one line when it asks for more (the other filters
/// read fields a dataset's `results` group does not decide on).
pub(crate) fn dataset_filter(job: &ViewJob) -> anyhow::Result<Filter> {
    let f = &job.filter;
    if !f.only_flags_and_mapq() {
        return Err(Error::argument(format!(
            "{}: an AGD dataset is filtered with -f, -F and -q only (export it to filter by read \
             group, library, tags, names, a BED file or an expression)",
            job.input
        ))
        .into());
    }
    Ok(Filter::new(f.require_flags, f.exclude_flags, f.min_mapq))
}

/// [`ViewJob::run`] of a dataset: its output already resolved to `format`.
fn view_dataset(job: &ViewJob, format: OutFormat, rt: &Runtime) -> anyhow::Result<ViewReport> {
    let filter = dataset_filter(job)?;
    let dir = Path::new(&job.input);
    let (manifest, pieces, warnings) = dataset::pieces(dir, &job.regions, job.multi_region, rt)?;
    if job.count {
        let n = if job.header_only {
            0
        } else {
            dataset::count_pieces(dir, duplicate_group(&manifest), &pieces, filter, rt)?
        };
        rt.check_cancelled()?;
        return counted(job, n, warnings);
    }
    let mut warnings = warnings;
    let (out, outputs) = open_output(job, format, dataset_header(&manifest), rt, &mut warnings)?;
    let pieces = if job.header_only { Vec::new() } else { pieces };
    let records = dataset::write_pieces(dir, &manifest, &pieces, filter, out, rt)?;
    Ok(ViewReport {
        records,
        count: None,
        outputs,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_data;

    #[test]
    fn formats_resolve_as_samtools_view() {
        let job = |path: &str, format: Option<&str>, level: Option<i32>| {
            let output = OutputSpec {
                format: format.map(str::to_string),
                level,
                ..OutputSpec::to_path(path)
            };
            ViewJob::new("in.bam", output).format().unwrap()
        };
        assert_eq!(job("o.sam", None, None), OutFormat::Sam);
        assert_eq!(job("o.out", None, None), OutFormat::Sam);
        assert_eq!(job("o.cram", None, None), OutFormat::Cram);
        let bam = OutFormat::Bam(CompressionLevel::samtools(1));
        assert_eq!(job("o.out", None, Some(1)), bam);
        assert_eq!(job("-", None, Some(1)), bam);
        // As samtools: `-1`/`-u` mean BAM unless the name says SAM or CRAM.
        assert_eq!(job("o.sam", None, Some(1)), OutFormat::Sam);
        assert_eq!(job("o.cram", None, Some(1)), OutFormat::Cram);
        assert_eq!(job("o.bam", Some("sam"), Some(1)), OutFormat::Sam);
    }

    #[test]
    fn counts_and_conversions_agree() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 2000);
        let bam = bam.to_str().unwrap();
        let rt = Runtime::with_threads(2).unwrap();
        let count = |input: &str, exclude: u16| {
            let job = ViewJob {
                count: true,
                filter: FilterSpec {
                    exclude_flags: exclude,
                    ..FilterSpec::default()
                },
                ..ViewJob::new(input, OutputSpec::default())
            };
            job.run(&rt).unwrap().count.unwrap()
        };
        assert_eq!(count(bam, 0), 2000);
        let mapped = count(bam, sortase_bam::flags::UNMAPPED);
        let sam = dir.path().join("mapped.sam");
        let job = ViewJob {
            with_header: true,
            filter: FilterSpec {
                exclude_flags: sortase_bam::flags::UNMAPPED,
                ..FilterSpec::default()
            },
            ..ViewJob::new(bam, OutputSpec::to_path(&sam))
        };
        let report = job.run(&rt).unwrap();
        assert_eq!(
            (report.records, report.outputs),
            (mapped, vec![sam.clone()])
        );
        assert_eq!(count(sam.to_str().unwrap(), 0), mapped);
        let file = dir.path().join("count.txt");
        let job = ViewJob {
            count: true,
            ..ViewJob::new(bam, OutputSpec::to_path(&file))
        };
        job.run(&rt).unwrap();
        assert_eq!(std::fs::read_to_string(file).unwrap(), "2000\n");
    }

    #[test]
    fn cram_without_reference_is_written_with_samtools_warning() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 10);
        let rt = Runtime::with_threads(1).unwrap();
        let out = dir.path().join("o.cram");
        let report = ViewJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&out))
            .run(&rt)
            .unwrap();
        assert!(
            report.warnings.iter().any(|w| w.contains("without -T")),
            "{:?}",
            report.warnings
        );
        let back = dir.path().join("back.sam");
        ViewJob::new(out.to_str().unwrap(), OutputSpec::to_path(&back))
            .run(&rt)
            .unwrap();
        let records = std::fs::read_to_string(&back).unwrap();
        assert_eq!(records.lines().filter(|l| !l.starts_with('@')).count(), 10);
        // `no_ref` is a choice, not an omission: no warning.
        let spec = OutputSpec {
            format_options: vec!["no_ref".into()],
            ..OutputSpec::to_path(dir.path().join("n.cram"))
        };
        let report = ViewJob::new(bam.to_str().unwrap(), spec).run(&rt).unwrap();
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    }
}
