//! Duplicate marking on coordinate-sorted input: Picard MarkDuplicates' algorithm
//! (crates/markdup/src/picard.rs) in two passes over the input. Pass 1 collects read ends (and
//! refuses input out of coordinate order) within a reservation of the runtime's memory pool,
//! spilling them to sorted runs when the pool refuses more; the duplicate sets are found on the
//! runtime's pool; pass 2 streams the input again with 0x400 set on exactly the duplicates (and
//! cleared elsewhere, as Picard), through the parallel BGZF writer. Standard input is copied to a
//! temporary BAM during pass 1. Both passes stop between batches once the job is cancelled; the
//! output, index and metrics file are renamed into place only at the end.

use super::{MarkdupJob, MarkdupReport};
use anyhow::{bail, Context, Result};
use sortase_bam::checksum::{ChecksumOptions, Fault, Sums, Tally};
use sortase_bam::{flags, Header, RecordBuf, RecordRef};
use sortase_bgzf::CompressionLevel;
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::files::{OutputFile, TempDir};
use sortase_exec::input::Input;
use sortase_exec::memory::Reservation;
use sortase_exec::options::add_program;
use sortase_exec::output::{
    index_target, resolve_format, split_index_name, temp_prefix, OutFormat,
};
use sortase_exec::progress::Progress;
use sortase_exec::proof::{self, Checksums};
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::{CramOut, RecordSink, SortedOutput};
use sortase_markdup::picard::{name::NameParser, Collector, Libraries, Options, OrderError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first line of the metrics file's header, before the command line.
pub(crate) const METRICS_TITLE: &str = "sortase markdup (Picard MarkDuplicates 2.27.5 metrics)";

pub(crate) fn order_error(header: &Header, file: &str, e: &OrderError) -> anyhow::Error {
    let at = |(r, p): (i32, i32)| match header.references().get(r as usize) {
        Some(rf) if r >= 0 => format!("{}:{}", String::from_utf8_lossy(rf.name.as_ref()), p + 1),
        _ => "unmapped (*)".to_string(),
    };
    Error::new(
        ErrorKind::Format,
        format!(
            "{file}: not coordinate-sorted: record {} ({}) at {} comes after {}; sort it first \
             (sortase sort)",
            e.record,
            e.name,
            at(e.at),
            at(e.after)
        ),
    )
    .into()
}

/// "file: message" on one line, whatever the context chain, when the message names the file.
fn flatten(e: anyhow::Error, file: &str) -> anyhow::Error {
    let msg = e.root_cause().to_string();
    if msg.starts_with(file) {
        Error::new(Error::from(e).kind(), msg).into()
    } else {
        e
    }
}

/// Keeps the read ends within the memory pool: `reservation` grows with them, and when the pool
/// refuses they are spilled to sorted runs in `dir` (the budget for merging them back is what the
/// pool could give). With the pool to itself this spills exactly when the ends exceed the pool.
pub(crate) fn hold_or_spill(
    collector: &mut Collector,
    reservation: &mut Reservation,
    dir: &Path,
) -> Result<()> {
    let held = collector.held();
    if held <= reservation.size() || reservation.try_grow(held - reservation.size()).is_ok() {
        return Ok(());
    }
    let budget = reservation.size() + reservation.pool().available();
    collector
        .spill(budget, dir)
        .with_context(|| format!("{}: writing read ends", dir.display()))?;
    reservation.free();
    Ok(())
}

/// The output's data path and index (path, BAI?), as `-o` and `--write-index` name them.
type Targets = (Option<PathBuf>, Option<(PathBuf, bool)>);

fn targets(job: &MarkdupJob, format: OutFormat) -> sortase_exec::error::Result<Targets> {
    let o = &job.output;
    Ok(match &o.path {
        Some(p) if o.write_index => {
            let (d, i, bai) = index_target(p, o.index_format.as_deref(), format)?;
            (Some(d), Some((i, bai)))
        }
        Some(p) => (Some(split_index_name(p, None)?.0), None),
        None => (None, None),
    })
}

/// Marks duplicates in coordinate-sorted `input`.
pub(super) fn run(
    job: &MarkdupJob,
    rt: &Runtime,
    mut input: Input,
    progress: Progress,
) -> Result<MarkdupReport> {
    let c = &job.picard;
    let input_name = job.input.as_str();
    let threads = rt.threads();
    let names = NameParser::new(c.read_name_regex.as_deref())
        .map_err(|e| Error::argument(format!("--read-name-regex {:?}: {e}", c.read_name_regex)))?;
    let level = job.output.compression_level(crate::sort::DEFAULT_LEVEL);
    let format = resolve_format(
        job.output.format.as_deref(),
        job.output.data_path()?.as_deref(),
        level,
        OutFormat::Bam(level),
    )?;
    let (data_path, index_path) = targets(job, format)?;
    if job.output.write_index && (data_path.is_none() || format == OutFormat::Sam) {
        sortase_exec::error::bail_argument!(
            "--write-index needs BAM or CRAM output to a file (-o)"
        );
    }

    // Under -T: read ends spilled beyond the memory pool, and standard input kept as a BAM
    // (libdeflate 1) for pass 2.
    let temp = TempDir::create(&temp_prefix(
        job.temp_prefix.as_deref(),
        data_path.as_deref(),
        rt.temp_dir(),
    ))?;
    let copy_path = (input_name == "-").then(|| temp.path().join("stdin.bam"));
    let mut copy = match &copy_path {
        Some(p) => {
            let f =
                sortase_exec::files::create_private(p).with_context(|| p.display().to_string())?;
            let out: Box<dyn Write + Send> = Box::new(std::io::BufWriter::new(f));
            let level = OutFormat::Bam(CompressionLevel::from_libdeflate(1));
            Some(RecordSink::new(
                level,
                &input.header,
                threads,
                &CramOut::default(),
                None,
                out,
            )?)
        }
        None => None,
    };

    let opts = Options {
        names,
        optical_distance: c.optical_distance,
        max_optical_set: c.max_optical_set,
    };
    let mut collector = Collector::new(Libraries::from_header(input.header.text()), opts);
    let mut ends = rt.memory().reservation("markdup: read ends");
    let header = input.header.clone();
    let sums = ChecksumOptions::every_record();
    let mut read = Sums::EMPTY;
    input
        .for_each_batch(|b| {
            rt.install(|| -> Result<()> {
                if job.checksums {
                    read.merge(&proof::batch_sums(&sums, &b));
                }
                collector
                    .push(&b)
                    .map_err(|e| order_error(&header, input_name, &e))?;
                hold_or_spill(&mut collector, &mut ends, temp.path())
            })?;
            if let Some(s) = copy.as_mut() {
                s.write_batch(b)
                    .context("temporary copy of standard input")?;
            }
            Ok(())
        })
        .with_context(|| input_name.to_string())
        .map_err(|e| flatten(e, input_name))?;
    progress.finish();
    if let Some(s) = copy {
        s.finish()?;
    }
    rt.check_cancelled()?;
    let mut report = MarkdupReport::default();
    (report.runs_spilled, report.spilled_bytes) = collector.spill_stats();
    let mut outcome = rt
        .install(|| collector.finish(threads))
        .with_context(|| format!("{}: reading read ends back", temp.path().display()))?;
    drop(ends);
    rt.check_cancelled()?;

    // Pass 2.
    let pass2_name = copy_path
        .as_ref()
        .map_or(input_name.to_string(), |p| p.display().to_string());
    let size = std::fs::metadata(&pass2_name).map(|m| m.len()).unwrap_or(0);
    let progress = rt.progress("markdup (write)", size);
    let mut second = Input::open(
        &pass2_name,
        threads,
        job.output.reference.as_deref(),
        &progress,
    )
    .with_context(|| input_name.to_string())?;
    second.set_cancel(rt.cancel_flag().clone());
    let mut out_header = header;
    add_program(&mut out_header, job.program.as_ref());
    let index = index_path.as_ref().map(|(p, bai)| (p.as_path(), *bai));
    let mut out = SortedOutput::open(
        data_path.as_deref(),
        index,
        format,
        &out_header,
        threads,
        &job.output.cram(),
    )?;
    let dups = std::mem::take(&mut outcome.found.duplicates);
    let (mut next, mut index_in_file) = (0usize, 0u64);
    let mut rec = RecordBuf::default();
    // With --checksums: the records written, and the duplicates -r leaves out.
    let mut tallies = job.checksums.then(|| {
        (
            Tally::new(&sums, &Fault::from_env()),
            Tally::new(&sums, &Fault::default()),
        )
    });
    second
        .for_each_batch(|b| {
            for raw in b.iter_raw() {
                let is_dup = dups.get(next) == Some(&index_in_file);
                next += usize::from(is_dup);
                index_in_file += 1;
                let r = RecordRef::new_unchecked(&raw[4..]);
                let flag = r.flag();
                if is_dup {
                    let (lib, _) = outcome.libs.of(&r);
                    outcome.counts[lib as usize].1.add_duplicate(flag);
                    if job.remove_duplicates {
                        if let Some((_, left)) = tallies.as_mut() {
                            left.pass(raw);
                        }
                        continue;
                    }
                }
                let want = if is_dup {
                    flag | flags::DUPLICATE
                } else {
                    flag & !flags::DUPLICATE
                };
                let bytes = if want == flag {
                    raw
                } else {
                    rec.copy_from(raw);
                    rec.set_flag(want);
                    rec.as_raw()
                };
                match tallies.as_mut() {
                    Some((written, _)) => out.sink.write(written.pass(bytes))?,
                    None => out.sink.write(bytes)?,
                }
            }
            Ok(())
        })
        .with_context(|| out.name.clone())?;
    progress.finish();
    if index_in_file != outcome.records {
        bail!(
            "{input_name}: changed between the two passes ({} records, then {index_in_file})",
            outcome.records
        );
    }
    rt.check_cancelled()?;
    if let Some((written, left)) = tallies {
        let left = job.remove_duplicates.then(|| left.sums());
        report.checksums = Some(Checksums::check_left_out(
            "markdup",
            &sums,
            &read,
            &written.sums(),
            left.as_ref(),
        )?);
    }
    let metrics = c
        .metrics
        .as_deref()
        .map(|m| {
            let title = metrics_title(job, METRICS_TITLE);
            create_metrics(m, &outcome.metrics_file(&[title]))
        })
        .transpose()?;
    out.finish()?;
    drop(temp);
    if let Some(m) = metrics {
        m.commit()?;
    }
    report.records = outcome.records;
    report.duplicate_records = dups.len() as u64;
    report.pairs = outcome.pairs;
    report.outputs = data_path
        .into_iter()
        .filter(|p| p.as_path() != Path::new("-"))
        .collect();
    report.outputs.extend(index_path.map(|(p, _)| p));
    report.outputs.extend(c.metrics.clone());
    Ok(report)
}

/// The metrics file's first header line: `title`, then the command line (the options' or the
/// `@PG` line's).
pub(crate) fn metrics_title(job: &MarkdupJob, title: &str) -> String {
    let cl = job
        .picard
        .metrics_command_line
        .as_deref()
        .or(job.program.as_ref().map(|p| p.command_line.as_str()));
    match cl {
        Some(cl) => format!("{title} {cl}"),
        None => title.to_string(),
    }
}

/// Writes the metrics file `text` under its temporary name (renamed by the caller once the output
/// is in place).
pub(super) fn create_metrics(path: &Path, text: &str) -> Result<OutputFile> {
    let (pending, mut f) = OutputFile::create(path)?;
    f.write_all(text.as_bytes())
        .with_context(|| path.display().to_string())?;
    Ok(pending)
}
