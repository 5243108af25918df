//! Duplicate marking on query-grouped input: samblaster's algorithm ([`crate::samblaster`]).
//!
//! Each input batch is cut into read-name groups (a group straddling batches is carried into the
//! next one); the groups' signatures are computed in parallel on the runtime's pool, then inserted
//! into the signature set in input order (first seen wins), and the records written with their
//! 0x400 flags in input order ([`super::marking`]). The input stops between batches once the job is
//! cancelled, and nothing is renamed into place after that.

use super::marking::State;
use super::side_out::Side;
use super::{MarkdupJob, MarkdupReport, SamblasterOptions};
use crate::samblaster::side::SideOptions;
use crate::samblaster::{Carry, Layout, Options};
use anyhow::Result;
use sortase_bam::checksum::{ChecksumOptions, Sums};
use sortase_bam::{Header, RecordBatch};
use sortase_bgzf::CompressionLevel;
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::input::Input;
use sortase_exec::options::add_program;
use sortase_exec::output::{resolve_format, OutFormat, ResolvedOutput};
use sortase_exec::progress::Progress;
use sortase_exec::proof::{self, Checksums};
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::SortedOutput;

impl SamblasterOptions {
    /// The side-output options, checked as samblaster checks them.
    fn side_options(&self) -> sortase_exec::error::Result<SideOptions> {
        if self.splitter_file.is_some() && self.min_non_overlap < 1 {
            sortase_exec::error::bail_argument!(
                "--minNonOverlap {}: must be at least 1",
                self.min_non_overlap
            );
        }
        if self.splitter_file.is_some() && self.max_split_count < 2 {
            sortase_exec::error::bail_argument!(
                "--maxSplitCount {}: must be at least 2",
                self.max_split_count
            );
        }
        Ok(SideOptions {
            splitters: self.splitter_file.is_some(),
            unmapped_clipped: self.unmapped_file.is_some(),
            compat: self.compat,
            max_split_count: self.max_split_count.max(0) as usize,
            min_non_overlap: self.min_non_overlap,
            min_indel_size: self.min_indel_size,
            max_unmapped_bases: self.max_unmapped_bases,
            min_clip: self.min_clip,
        })
    }
}

/// The first line of the metrics file's header, before the command line.
const QUERY_METRICS_TITLE: &str =
    "sortase markdup (samblaster 0.1.26 duplicates; Picard MarkDuplicates 2.27.5 metrics, no optical)";

impl SamblasterOptions {
    /// samblaster's signature layout for `header`'s references (`--maxReadLength` of padding);
    /// `name`, the input's, heads the error.
    pub fn layout(&self, header: &Header, name: &str) -> sortase_exec::error::Result<Layout> {
        let lengths: Vec<u64> = header
            .references()
            .iter()
            .map(|r| u64::from(r.length))
            .collect();
        // samblaster needs @SQ lines only to mark (-a marks nothing).
        let lengths = if self.accept_dups && lengths.is_empty() {
            vec![0]
        } else {
            lengths
        };
        Layout::new(&lengths, self.max_read_length)
            .map_err(|e| Error::new(ErrorKind::Format, format!("{name}: {e}")))
    }
}

/// The output (under its temporary name), at samtools' level meaning.
fn open_output(job: &MarkdupJob, header: &Header, threads: usize) -> Result<SortedOutput> {
    let output = &job.output;
    // samtools' level meaning, also without -l (samblaster writes through htslib's defaults).
    let level = if output.uncompressed {
        CompressionLevel::STORED
    } else {
        CompressionLevel::samtools(output.level.unwrap_or(-1))
    };
    let format = resolve_format(
        output.format.as_deref(),
        output.path.as_deref(),
        level,
        OutFormat::Bam(level),
    )?;
    let out = ResolvedOutput::unindexed(output.path.as_deref(), format);
    SortedOutput::open(&out, header, threads, &output.cram())
}

/// The marking state of `job` writing to `out` (whose header is `header`), with its signature
/// layout and side-output options.
fn new_state(
    job: &MarkdupJob,
    input: &Input,
    header: &Header,
    out: &SortedOutput,
    threads: usize,
    (layout, side_opts): (Layout, SideOptions),
) -> Result<State> {
    let q = &job.samblaster;
    let opts = Options {
        ignore_unmated: q.ignore_unmated,
        accept_dups: q.accept_dups,
    };
    let side = Side::open(q, q.exclude_dups || job.remove_duplicates, header, threads)?;
    let mut state = State::new(
        layout,
        opts,
        job.remove_duplicates,
        q.add_mate_tags,
        side,
        side_opts,
        (job.input.clone(), out.name.clone()),
    );
    if job.checksums {
        state.sum_records(&ChecksumOptions::every_record());
    }
    if job.picard.metrics.is_some() {
        state.count_libraries(input.header.text());
    }
    Ok(state)
}

/// The read-name groups of `batch` from record `start` on, but the last (it may continue in the
/// next batch: its records go into `carry`).
fn groups(batch: &RecordBatch, start: usize, carry: &mut Carry) -> Vec<std::ops::Range<usize>> {
    let mut bounds = Vec::with_capacity(batch.len() / 2);
    let mut g = start;
    let mut prev = batch.record(start).read_name();
    for i in start + 1..batch.len() {
        let name = batch.record(i).read_name();
        if name != prev {
            bounds.push(g..i);
            g = i;
            prev = name;
        }
    }
    for i in g..batch.len() {
        carry.push(batch.raw(i));
    }
    bounds
}

/// Every batch of `input` marked into `out`, group by group; the sums of the records read (with
/// `--checksums`).
fn feed(
    job: &MarkdupJob,
    rt: &Runtime,
    input: &mut Input,
    state: &mut State,
    out: &mut SortedOutput,
) -> Result<Sums> {
    let sums = ChecksumOptions::every_record();
    let mut read_sums = Sums::EMPTY;
    let pool = rt.pool();
    let mut carry = Carry::default();
    let mut failed: Option<anyhow::Error> = None;
    let read = input.for_each_batch(|batch| {
        if job.checksums {
            read_sums.merge(&pool.install(|| proof::batch_sums(&sums, &batch)));
        }
        let sink = &mut out.sink;
        // Records continuing the carried group come first.
        let Some((start, group)) = carry.continue_from(&batch, 0) else {
            return Ok(());
        };
        if let Some(group) = group {
            if let Err(e) = state.process_whole(&group, sink, pool) {
                return Err(anyhow::Error::msg(failed.insert(e).to_string()));
            }
        }
        let bounds = groups(&batch, start, &mut carry);
        if let Err(e) = state.process(&batch, &bounds, sink, pool) {
            return Err(anyhow::Error::msg(failed.insert(e).to_string()));
        }
        Ok(())
    });
    // Errors of the marking and writing name their file already; reading errors (cancellation
    // included) get the input's.
    if let Err(e) = read {
        return Err(failed
            .take()
            .unwrap_or_else(|| e.context(job.input.clone())));
    }
    if !carry.is_empty() {
        let group = carry.take();
        state.process_whole(&group, &mut out.sink, pool)?;
    }
    Ok(read_sums)
}

/// Marks duplicates in query-grouped `input`.
pub(super) fn run(
    job: &MarkdupJob,
    rt: &Runtime,
    mut input: Input,
    progress: Progress,
) -> Result<MarkdupReport> {
    let layout = job.samblaster.layout(&input.header, &job.input)?;
    let side_opts = job.samblaster.side_options()?;
    let mut header = input.header.clone();
    add_program(&mut header, job.program.as_ref());
    let threads = rt.threads();
    let mut out = open_output(job, &header, threads)?;
    let mut state = new_state(job, &input, &header, &out, threads, (layout, side_opts))?;
    let read_sums = feed(job, rt, &mut input, &mut state, &mut out)?;
    progress.finish();
    rt.check_cancelled()?;
    finish(job, state, out, &read_sums)
}

/// The checksums checked, the metrics file, output and side outputs renamed into place, and the
/// report.
fn finish(
    job: &MarkdupJob,
    state: State,
    out: SortedOutput,
    read_sums: &Sums,
) -> Result<MarkdupReport> {
    let mut report = MarkdupReport {
        outputs: job
            .output
            .path
            .iter()
            .filter(|p| p.as_path() != std::path::Path::new("-"))
            .cloned()
            .collect(),
        ..MarkdupReport::default()
    };
    if let Some((written, left)) = state.sums() {
        let left = job.remove_duplicates.then_some(left);
        report.checksums = Some(Checksums::check_left_out(
            "markdup",
            &ChecksumOptions::every_record(),
            read_sums,
            &written,
            left.as_ref(),
        )?);
    }
    let metrics = match (&job.picard.metrics, state.libraries()) {
        (Some(path), Some(t)) => {
            let title = super::coordinate::metrics_title(job, QUERY_METRICS_TITLE);
            Some(super::coordinate::create_metrics(
                path,
                &t.metrics_file(&[title]),
            )?)
        }
        _ => None,
    };
    out.finish()?;
    if let Some(m) = metrics {
        m.commit()?;
        report.outputs.extend(job.picard.metrics.clone());
    }
    let side = state.finish(&mut report)?;
    report.outputs.extend(side);
    report.summary.push(format!(
        "sortase markdup: {} {} duplicate groups of {} read names",
        if job.remove_duplicates {
            "removed"
        } else {
            "marked"
        },
        report.duplicate_groups,
        report.read_names
    ));
    Ok(report)
}
