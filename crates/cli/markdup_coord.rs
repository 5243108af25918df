//! `sortase markdup` on coordinate-sorted input: Picard MarkDuplicates' algorithm
//! (crates/markdup/src/picard.rs) in two passes over the input. Pass 1 collects read ends (and
//! refuses input out of coordinate order); the duplicate sets are found on all cores; pass 2 streams
//! the input again with 0x400 set on exactly the duplicates (and cleared elsewhere, as Picard),
//! through the parallel BGZF writer. Standard input is copied to a temporary BAM during pass 1.

use crate::input::Input;
use crate::markdup::MarkdupArgs;
use crate::output::{OutputFile, TempDir};
use crate::record_sink::{resolve_format, OutFormat, RecordSink, SortedOutput};
use anyhow::{bail, Context, Result};
use sortase::Progress;
use sortase_bam::{flags, Header, RecordRef};
use sortase_bgzf::CompressionLevel;
use sortase_markdup::picard::{name::NameParser, Collector, Libraries, Options, OrderError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Output level without `-l`: libdeflate 6 (samtools `-l 5`), as `sortase sort` (see sort.rs).
const DEFAULT_LEVEL: u8 = 6;

/// Picard MarkDuplicates' options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Coordinate-sorted input (Picard)")]
pub struct CoordArgs {
    /// Write Picard's duplication metrics to FILE (Picard M=).
    #[arg(long = "metrics", value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Largest x/y distance between optical duplicates (Picard OPTICAL_DUPLICATE_PIXEL_DISTANCE).
    #[arg(long = "optical-distance", value_name = "INT", default_value_t = 100)]
    pub optical_distance: i32,
    /// Regex with 3 groups (tile, x, y) matched against read names; `null` turns optical detection
    /// off (Picard READ_NAME_REGEX) [the last three ':'-separated fields].
    #[arg(long = "read-name-regex", value_name = "REGEX")]
    pub read_name_regex: Option<String>,
    /// Largest duplicate set searched for optical duplicates; -1: no limit
    /// (Picard MAX_OPTICAL_DUPLICATE_SET_SIZE).
    #[arg(
        long = "max-optical-set",
        value_name = "INT",
        default_value_t = 300000,
        allow_negative_numbers = true
    )]
    pub max_optical_set: i64,
    /// Memory for the read ends (K/M/G suffix); beyond it they are sorted into runs under -T and
    /// merged back at the end (about 58 MB per million records are kept otherwise).
    #[arg(long = "max-memory", value_name = "SIZE", default_value = "2G")]
    pub max_memory: String,
}

fn order_error(header: &Header, file: &str, e: &OrderError) -> anyhow::Error {
    let at = |(r, p): (i32, i32)| match header.references().get(r as usize) {
        Some(rf) if r >= 0 => format!("{}:{}", String::from_utf8_lossy(rf.name.as_ref()), p + 1),
        _ => "unmapped (*)".to_string(),
    };
    anyhow::anyhow!(
        "{file}: not coordinate-sorted: record {} ({}) at {} comes after {}; sort it first (sortase sort)",
        e.record,
        e.name,
        at(e.at),
        at(e.after)
    )
}

/// Marks duplicates in coordinate-sorted `input`.
pub fn run(
    args: &MarkdupArgs,
    mut input: Input,
    input_name: &str,
    threads: usize,
    _progress: &Progress,
) -> Result<()> {
    let c = &args.coord;
    let names = NameParser::new(c.read_name_regex.as_deref())
        .with_context(|| format!("--read-name-regex {:?}", c.read_name_regex))?;
    let level = match (args.uncompressed, args.level) {
        (true, _) => CompressionLevel::STORED,
        (false, Some(l)) => CompressionLevel::samtools(l),
        (false, None) => CompressionLevel::from_libdeflate(DEFAULT_LEVEL),
    };
    let (data_path, index_path) = match &args.output {
        Some(o) if args.write_index => {
            let (d, i, bai) = sortase::options::index_target(o, args.index_format.as_deref())?;
            (Some(d), Some((i, bai)))
        }
        Some(o) => (Some(sortase::options::index_target(o, None)?.0), None),
        None => (None, None),
    };
    let format = resolve_format(
        args.output_fmt.as_deref(),
        data_path.as_deref(),
        level,
        OutFormat::Bam(level),
    )?;
    if args.write_index && (data_path.is_none() || !matches!(format, OutFormat::Bam(_))) {
        bail!("--write-index needs BAM output to a file (-o)");
    }
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();

    // Under -T: read ends spilled beyond --max-memory, and standard input kept as a BAM
    // (libdeflate 1) for pass 2.
    let budget = sortase::options::parse_size(&c.max_memory, "--max-memory")?;
    let temp = TempDir::create(&sortase::options::temp_prefix(
        args.temp_prefix.as_deref(),
        data_path.as_deref(),
        &std::env::temp_dir(),
    ))?;
    let copy_path = (input_name == "-").then(|| temp.path().join("stdin.bam"));
    let mut copy = match &copy_path {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| p.display().to_string())?;
            let out: Box<dyn Write + Send> = Box::new(std::io::BufWriter::new(f));
            let level = OutFormat::Bam(CompressionLevel::from_libdeflate(1));
            Some(RecordSink::new(
                level,
                &input.header,
                threads,
                None,
                None,
                out,
            )?)
        }
        None => None,
    };

    let libs = Libraries::from_header(input.header.text());
    let opts = Options {
        names,
        optical_distance: c.optical_distance,
        max_optical_set: c.max_optical_set,
    };
    let mut collector = Collector::new(libs, opts);
    let header = input.header.clone();
    input
        .for_each_batch(|b| {
            collector
                .push(&b)
                .map_err(|e| order_error(&header, input_name, &e))?;
            collector
                .spill_over(budget, temp.path())
                .with_context(|| format!("{}: writing read ends", temp.path().display()))?;
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
    let mut outcome = collector
        .finish(threads)
        .with_context(|| format!("{}: reading read ends back", temp.path().display()))?;

    // Pass 2.
    let pass2_name = copy_path
        .as_ref()
        .map_or(input_name.to_string(), |p| p.display().to_string());
    let size = std::fs::metadata(&pass2_name).map(|m| m.len()).unwrap_or(0);
    let progress = crate::common::progress("markdup (write)", size);
    let mut second = Input::open(&pass2_name, threads, args.reference.as_deref(), &progress)
        .with_context(|| input_name.to_string())?;
    let mut out_header = header.clone();
    if !args.no_pg {
        out_header.add_program(
            "sortase",
            env!("CARGO_PKG_VERSION"),
            &crate::common::command_line(),
        );
    }
    let index = index_path.as_ref().map(|(p, bai)| (p.as_path(), *bai));
    let mut out = SortedOutput::open(
        data_path.as_deref(),
        index,
        format,
        &out_header,
        threads,
        args.reference.as_deref(),
    )?;
    let dups = std::mem::take(&mut outcome.found.duplicates);
    let (mut next, mut index_in_file) = (0usize, 0u64);
    let mut scratch = Vec::new();
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
                    if args.remove {
                        continue;
                    }
                }
                let want = if is_dup {
                    flag | flags::DUPLICATE
                } else {
                    flag & !flags::DUPLICATE
                };
                if want == flag {
                    out.sink.write(raw)?;
                } else {
                    scratch.clear();
                    scratch.extend_from_slice(raw);
                    scratch[4 + 14..4 + 16].copy_from_slice(&want.to_le_bytes());
                    out.sink.write(&scratch)?;
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
    out.finish()?;
    drop(temp);
    if let Some(m) = &c.metrics {
        write_metrics(m, &outcome)?;
    }
    Ok(())
}

/// "file: message" on one line, whatever the context chain.
fn flatten(e: anyhow::Error, file: &str) -> anyhow::Error {
    let msg = e.root_cause().to_string();
    if msg.starts_with(file) {
        anyhow::anyhow!(msg)
    } else {
        e
    }
}

fn write_metrics(path: &Path, outcome: &sortase_markdup::picard::Outcome) -> Result<()> {
    let header = vec![format!(
        "sortase markdup (Picard MarkDuplicates 2.27.5 metrics) {}",
        crate::common::command_line()
    )];
    let text = outcome.metrics_file(&header);
    let (pending, mut f) = OutputFile::create(path)?;
    f.write_all(text.as_bytes())
        .with_context(|| path.display().to_string())?;
    drop(f);
    pending.commit()
}
