//! Duplicate marking on coordinate-sorted input: Picard MarkDuplicates' algorithm
//! (crates/markdup/src/picard.rs) in two passes over the input. Pass 1 collects read ends (and
//! refuses input out of coordinate order) within a reservation of the runtime's memory pool,
//! spilling them to sorted runs when the pool refuses more; the duplicate sets are found on the
//! runtime's pool; pass 2 streams the input again with 0x400 set on exactly the duplicates (and
//! cleared elsewhere, as Picard), through the parallel BGZF writer. Standard input is copied to a
//! temporary BAM during pass 1. Both passes stop between batches once the job is cancelled; the
//! output, index and metrics file are renamed into place only at the end.

use super::{MarkdupJob, MarkdupReport};
use crate::picard::{name::NameParser, Collector, Libraries, Options, OrderError, Outcome};
use anyhow::{bail, Context, Result};
use sortase_bam::checksum::{ChecksumOptions, Fault, Sums, Tally};
use sortase_bam::{flags, Header, RecordBuf, RecordRef};
use sortase_bgzf::CompressionLevel;
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::files::{OutputFile, TempDir};
use sortase_exec::input::Input;
use sortase_exec::memory::Reservation;
use sortase_exec::options::add_program;
use sortase_exec::output::{temp_prefix, OutFormat, ResolvedOutput};
use sortase_exec::progress::Progress;
use sortase_exec::proof::{self, Checksums};
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::{CramOut, RecordSink, SortedOutput};
use std::io::Write;
use std::path::Path;

/// The first line of the metrics file's header, before the command line.
pub const METRICS_TITLE: &str = "sortase markdup (Picard MarkDuplicates 2.27.5 metrics)";

/// The error for a record out of coordinate order, naming both positions.
pub fn order_error(header: &Header, file: &str, e: &OrderError) -> anyhow::Error {
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
pub fn hold_or_spill(
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

/// Where and how the output goes: the format `-O`/`-o` give, its data path and, with
/// `--write-index`, its index, as samtools view resolves them ([`OutputSpec::resolve_as`]).
fn resolve_target(job: &MarkdupJob) -> anyhow::Result<ResolvedOutput> {
    let format = job
        .output
        .format_or_bam(sortase_exec::options::DEFAULT_LEVEL)?;
    job.output.resolve_as(format)
}

/// The sink of the temporary BAM (libdeflate 1) that keeps standard input for pass 2.
fn open_copy(path: &Path, header: &Header, threads: usize) -> Result<RecordSink> {
    let f =
        sortase_exec::files::create_private(path).with_context(|| path.display().to_string())?;
    let out: Box<dyn Write + Send> = Box::new(std::io::BufWriter::new(f));
    let level = OutFormat::Bam(CompressionLevel::from_libdeflate(1));
    RecordSink::new(level, header, threads, &CramOut::default(), None, out)
}

/// Pass 1: the read ends of every record into `collector` (held within `ends`, spilled under
/// `temp`), standard input copied to `copy_path`; the sums of the records read (with
/// `--checksums`).
fn collect(
    job: &MarkdupJob,
    rt: &Runtime,
    input: &mut Input,
    collector: &mut Collector,
    ends: &mut Reservation,
    temp: &Path,
    copy_path: Option<&Path>,
) -> Result<Sums> {
    let input_name = job.input.as_str();
    let mut copy = match copy_path {
        Some(p) => Some(open_copy(p, &input.header, rt.threads())?),
        None => None,
    };
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
                hold_or_spill(collector, ends, temp)
            })?;
            if let Some(s) = copy.as_mut() {
                s.write_batch(b)
                    .context("temporary copy of standard input")?;
            }
            Ok(())
        })
        .with_context(|| input_name.to_string())
        .map_err(|e| flatten(e, input_name))?;
    if let Some(s) = copy {
        s.finish()?;
    }
    Ok(read)
}

/// What pass 2 wrote: the records read, and the sums of those written and left out (`-r`), with
/// `--checksums`.
struct Marked {
    records: u64,
    tallies: Option<(Tally, Tally)>,
}

/// Pass 2: `input` again into `out`, 0x400 set on exactly the duplicates (`dups`, record indexes
/// in file order) and cleared elsewhere; with `-r` the duplicates are left out. Counts the
/// duplicates per library into `outcome`.
fn mark(
    job: &MarkdupJob,
    input: &mut Input,
    out: &mut SortedOutput,
    dups: &[u64],
    outcome: &mut Outcome,
) -> Result<Marked> {
    let sums = ChecksumOptions::every_record();
    let (mut next, mut index_in_file) = (0usize, 0u64);
    let mut rec = RecordBuf::default();
    // With --checksums: the records written, and the duplicates -r leaves out.
    let mut tallies = job.checksums.then(|| {
        (
            Tally::new(&sums, &Fault::from_env()),
            Tally::new(&sums, &Fault::default()),
        )
    });
    input
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
                let bytes = with_flag(raw, &mut rec, is_dup, flag);
                match tallies.as_mut() {
                    Some((written, _)) => out.sink.write(written.pass(bytes))?,
                    None => out.sink.write(bytes)?,
                }
            }
            Ok(())
        })
        .with_context(|| out.name.clone())?;
    Ok(Marked {
        records: index_in_file,
        tallies,
    })
}

/// `raw` with 0x400 set if `is_dup`, cleared if not (copied into `rec` only when that changes it).
fn with_flag<'a>(raw: &'a [u8], rec: &'a mut RecordBuf, is_dup: bool, flag: u16) -> &'a [u8] {
    let want = if is_dup {
        flag | flags::DUPLICATE
    } else {
        flag & !flags::DUPLICATE
    };
    if want == flag {
        raw
    } else {
        rec.copy_from(raw);
        rec.set_flag(want);
        rec.as_raw()
    }
}

/// What pass 1 found: the duplicate sets and counts, the sums of the records read (with
/// `--checksums`), and the runs and bytes of read ends spilled.
struct Found {
    outcome: Outcome,
    read: Sums,
    spilled: (usize, u64),
}

/// Pass 1 over `input` (copied to `copy_path` when it is standard input), then the duplicate sets
/// found on the runtime's pool; read ends beyond the memory pool are spilled under `temp`.
fn find_duplicates(
    job: &MarkdupJob,
    rt: &Runtime,
    input: &mut Input,
    names: NameParser,
    temp: &Path,
    copy_path: Option<&Path>,
    progress: Progress,
) -> Result<Found> {
    let c = &job.picard;
    let opts = Options {
        names,
        optical_distance: c.optical_distance,
        max_optical_set: c.max_optical_set,
    };
    let mut collector = Collector::new(Libraries::from_header(input.header.text()), opts);
    let mut ends = rt.memory().reservation("markdup: read ends");
    let read = collect(job, rt, input, &mut collector, &mut ends, temp, copy_path)?;
    progress.finish();
    rt.check_cancelled()?;
    let spilled = collector.spill_stats();
    let outcome = rt
        .install(|| collector.finish(rt.threads()))
        .with_context(|| format!("{}: reading read ends back", temp.display()))?;
    drop(ends);
    rt.check_cancelled()?;
    Ok(Found {
        outcome,
        read,
        spilled,
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
    let names = NameParser::new(c.read_name_regex.as_deref())
        .map_err(|e| Error::argument(format!("--read-name-regex {:?}: {e}", c.read_name_regex)))?;
    let target = resolve_target(job)?;

    // Under -T: read ends spilled beyond the memory pool, and standard input kept as a BAM
    // (libdeflate 1) for pass 2.
    let temp = TempDir::create(&temp_prefix(
        job.temp_prefix.as_deref(),
        target.data.as_deref(),
        rt.temp_dir(),
    ))?;
    let copy_path = (input_name == "-").then(|| temp.path().join("stdin.bam"));
    let mut found = find_duplicates(
        job,
        rt,
        &mut input,
        names,
        temp.path(),
        copy_path.as_deref(),
        progress,
    )?;

    let pass2_name = copy_path
        .as_ref()
        .map_or(input_name.to_string(), |p| p.display().to_string());
    let dups = std::mem::take(&mut found.outcome.found.duplicates);
    let (out, marked) = pass2(
        job,
        rt,
        &pass2_name,
        input.header.clone(),
        &target,
        &dups,
        &mut found.outcome,
    )?;
    if marked.records != found.outcome.records {
        bail!(
            "{input_name}: changed between the two passes ({} records, then {})",
            found.outcome.records,
            marked.records
        );
    }
    rt.check_cancelled()?;
    let report = MarkdupReport {
        duplicate_records: dups.len() as u64,
        ..MarkdupReport::default()
    };
    finish(job, target, out, temp, found, marked, report)
}

/// The checksums checked, the metrics file, output and index renamed into place (the temporary
/// directory removed first), and the report.
fn finish(
    job: &MarkdupJob,
    target: ResolvedOutput,
    out: SortedOutput,
    temp: TempDir,
    found: Found,
    marked: Marked,
    mut report: MarkdupReport,
) -> Result<MarkdupReport> {
    let c = &job.picard;
    if let Some((written, left)) = marked.tallies {
        let left = job.remove_duplicates.then(|| left.sums());
        report.checksums = Some(Checksums::check_left_out(
            "markdup",
            &ChecksumOptions::every_record(),
            &found.read,
            &written.sums(),
            left.as_ref(),
        )?);
    }
    let outcome = found.outcome;
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
    (report.runs_spilled, report.spilled_bytes) = found.spilled;
    report.records = outcome.records;
    report.pairs = outcome.pairs;
    report.outputs = target.files();
    report.outputs.extend(c.metrics.clone());
    Ok(report)
}

/// Pass 2 over `name` (the input, or its copy of standard input): the output opened (under its
/// temporary name, with `header` and the `@PG` line) and written with the duplicates marked.
fn pass2(
    job: &MarkdupJob,
    rt: &Runtime,
    name: &str,
    header: Header,
    target: &ResolvedOutput,
    dups: &[u64],
    outcome: &mut Outcome,
) -> Result<(SortedOutput, Marked)> {
    let threads = rt.threads();
    let size = std::fs::metadata(name).map(|m| m.len()).unwrap_or(0);
    let progress = rt.progress("markdup (write)", size);
    let mut second = Input::open(name, threads, job.output.reference.as_deref(), &progress)
        .with_context(|| job.input.clone())?;
    second.set_cancel(rt.cancel_flag().clone());
    let mut out_header = header;
    add_program(&mut out_header, job.program.as_ref());
    let mut out = SortedOutput::open(target, &out_header, threads, &job.output.cram())?;
    let marked = mark(job, &mut second, &mut out, dups, outcome)?;
    progress.finish();
    Ok((out, marked))
}

/// The metrics file's first header line: `title`, then the command line (the options' or the
/// `@PG` line's).
pub fn metrics_title(job: &MarkdupJob, title: &str) -> String {
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
