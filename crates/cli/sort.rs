//! `sortase sort`: samtools sort's options and output, on all cores (see crates/sort).

use crate::input::Input;
use crate::output::TempDir;
use crate::progress::Progress;
use crate::range_output;
use crate::record_sink::{resolve_format, OutFormat};
use anyhow::{bail, Context, Result};
use sortase_bgzf::CompressionLevel;
use sortase_sort::{SortOptions, SortOrder, Sorter};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// samtools' default `-m` per thread (`SORT_DEFAULT_MEGS_PER_THREAD`).
const DEFAULT_MEM_PER_THREAD: usize = 768 << 20;
/// Output level without `-l`: libdeflate 6 (samtools `-l 5`). Measured on the bench BAM (see
/// bench/RESULTS.md, "level curve"): 1.78x the speed of libdeflate 7 (samtools' default `-l 6`) for
/// 0.9% larger output; libdeflate 5 is 2.1x faster but 2.1% larger.
const DEFAULT_LEVEL: u8 = 6;
/// samtools' minimum `-m` (`SORT_MIN_MEGS_PER_THREAD`).
const MIN_MEM_PER_THREAD: usize = 1 << 20;

/// Arguments of `sortase sort` (samtools sort's flags and meanings).
#[derive(clap::Args, Debug)]
pub struct SortArgs {
    /// Write the final output to FILE [stdout].
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format: sam, bam or cram [bam, or from the -o extension].
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    output_fmt: Option<String>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Memory per thread, with K/M/G suffix, as samtools [768M].
    #[arg(short = 'm', value_name = "INT[KMG]")]
    mem_per_thread: Option<String>,
    /// Memory for all threads together (overrides -m).
    #[arg(long = "max-memory", value_name = "INT[KMG]")]
    max_memory: Option<String>,
    /// Compression level 0-9 with samtools' meaning [sortase's default: libdeflate 6 = samtools -l 5].
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    level: Option<i32>,
    /// Uncompressed BAM output.
    #[arg(short = 'u')]
    uncompressed: bool,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ (a directory: inside it) [OUT.tmp or TMPDIR].
    #[arg(short = 'T', value_name = "PREFIX")]
    temp_prefix: Option<PathBuf>,
    /// Sort by read name (natural order, samtools -n).
    #[arg(short = 'n')]
    by_name: bool,
    /// Sort by read name in lexicographic (strcmp) order (samtools -N).
    #[arg(short = 'N')]
    by_name_lex: bool,
    /// Sort by the value of TAG, then by position (or name with -n/-N).
    #[arg(short = 't', value_name = "TAG")]
    tag: Option<String>,
    /// Write an index with the output (CSI; `out.bam##idx##out.bam.bai` for BAI).
    #[arg(long = "write-index")]
    write_index: bool,
    /// Index format for --write-index: csi or bai [csi, or from the ##idx## name].
    #[arg(long = "index-format", value_name = "bai|csi")]
    index_format: Option<String>,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    no_pg: bool,
    /// Reference FASTA (CRAM input or output).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Most runs the final merge may open (background compaction keeps it so).
    #[arg(long = "max-fan-in", value_name = "INT", default_value_t = 64)]
    max_fan_in: usize,
    /// Report phases (wall time, CPU%), runs, compactions and temporary bytes on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Input SAM/BAM/CRAM file [stdin].
    input: Option<String>,
}

/// Where temporary files go: `-T PREFIX`, else next to the output (`OUT.tmp`), else TMPDIR.
pub fn temp_prefix(given: Option<&Path>, output: Option<&Path>) -> PathBuf {
    match (given, output) {
        (Some(t), _) => t.to_path_buf(),
        (None, Some(d)) => {
            let mut p = d.as_os_str().to_owned();
            p.push(".tmp");
            PathBuf::from(p)
        }
        (None, None) => std::env::temp_dir(),
    }
}

/// Parses samtools' `-m` syntax: an integer (`strtol` base 0) with an optional K/M/G suffix.
pub fn parse_memory(s: &str, flag: &str) -> Result<usize> {
    let t = s.trim();
    let (digits, shift) = match t.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&t[..t.len() - 1], 10),
        Some(b'M') => (&t[..t.len() - 1], 20),
        Some(b'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        usize::from_str_radix(hex, 16).ok()
    } else {
        digits.parse::<usize>().ok()
    };
    match n.and_then(|n| n.checked_mul(1 << shift)) {
        Some(v) => Ok(v),
        None => bail!(
            "{flag} {s}: not a whole number of bytes with an optional K/M/G suffix (e.g. 768M)"
        ),
    }
}

fn order(args: &SortArgs) -> Result<SortOrder> {
    order_from_flags(args.by_name, args.by_name_lex, args.tag.as_deref())
}

/// The order samtools sort and merge take from `-n`, `-N` and `-t TAG`.
pub(crate) fn order_from_flags(n: bool, lex: bool, tag: Option<&str>) -> Result<SortOrder> {
    let by_name = (n || lex).then_some(!lex);
    Ok(match (tag, by_name) {
        (Some(t), by_name) if t.len() == 2 => SortOrder::Tag {
            tag: [t.as_bytes()[0], t.as_bytes()[1]],
            by_name,
        },
        (Some(t), _) => bail!("-t {t}: a tag is two characters, e.g. -t RG"),
        (None, Some(natural)) => SortOrder::Name { natural },
        (None, None) => SortOrder::Coordinate,
    })
}

/// Index path and format for `--write-index`, as samtools' `auto_index`.
pub(crate) fn index_target(
    output: &Path,
    format: Option<&str>,
) -> Result<(PathBuf, PathBuf, bool)> {
    let s = output.to_string_lossy();
    let (data, idx) = match s.split_once("##idx##") {
        Some((d, i)) => (PathBuf::from(d), Some(PathBuf::from(i))),
        None => (output.to_path_buf(), None),
    };
    let bai = match format.map(str::to_ascii_lowercase).as_deref() {
        Some("bai") => true,
        Some("csi") => false,
        Some(other) => bail!("--index-format {other}: use bai or csi"),
        None => idx
            .as_ref()
            .is_some_and(|i| i.to_string_lossy().ends_with(".bai")),
    };
    let idx = idx.unwrap_or_else(|| {
        let mut n = data.as_os_str().to_owned();
        n.push(if bai { ".bai" } else { ".csi" });
        PathBuf::from(n)
    });
    Ok((data, idx, bai))
}

/// Process CPU time (user + system) in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    }
}

/// Reports phases on stderr with `-v`.
pub struct PhaseReport {
    on: bool,
    name: String,
    wall: Instant,
    cpu: f64,
}

impl PhaseReport {
    /// Starts the first phase.
    pub fn new(on: bool, first: &str) -> Self {
        Self {
            on,
            name: first.into(),
            wall: Instant::now(),
            cpu: cpu_seconds(),
        }
    }

    /// Ends the current phase (printing it) and starts `next`.
    pub fn next(&mut self, next: &str) {
        let (wall, cpu) = (self.wall.elapsed().as_secs_f64(), cpu_seconds());
        if self.on {
            let pct = if wall > 0.0 {
                100.0 * (cpu - self.cpu) / wall
            } else {
                0.0
            };
            eprintln!(
                "[sortase sort] phase {:<6} {:>8.2} s wall {:>5.0}% CPU",
                self.name, wall, pct
            );
        }
        self.name = next.into();
        self.wall = Instant::now();
        self.cpu = cpu;
    }
}

/// Memory the final phase holds besides the records: up to `threads + 1` encoded ranges (being
/// encoded, done and waiting, being written; see `Sorter::finish_ranges`) and the output writer's
/// buffers. It is taken out of the records' budget so that the whole sort stays within `-m`/
/// `--max-memory` (out of core with `-u`, 16 MiB ranges took peak RSS ~45 MiB past the bound of the
/// issue at a 228 MiB budget); at most a quarter of the budget.
fn final_phase_reserve(memory: usize, threads: usize, format: OutFormat) -> usize {
    let range = sortase_sort::ranges::RANGE_BYTES as usize;
    let encoded = match format {
        OutFormat::Bam(level) if level == CompressionLevel::STORED => range,
        OutFormat::Bam(_) => range / 2,
        OutFormat::Sam => range * 2,
        OutFormat::Cram => range,
    };
    ((threads + 1) * encoded + sortase_bgzf::direct_io::BUFFER_BYTES).min(memory / 4)
}

/// Returns the heap's free pages to the kernel (glibc `malloc_trim`). Called when an out-of-core
/// sort starts its final merge: the read phase's batches were freed into the arenas of the threads
/// that allocated them, where the final phase's new threads cannot reuse them (each thread has its
/// own arena, and `main`'s `tune_allocator` keeps up to 256 MiB of free memory per arena). On the
/// large bench BAM with `-u --max-memory 228M` peak RSS was 308-350 MiB without it and 262-280 MiB
/// with it (3 and 2 runs); the sort's speed did not change (12.2-12.4 s both ways).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it takes the allocator's locks itself.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Runs `sortase sort`.
pub fn run(args: SortArgs) -> Result<()> {
    let threads = args.threads.unwrap_or_else(crate::default_threads).max(1);
    let order = order(&args)?;
    let memory = match (&args.max_memory, &args.mem_per_thread) {
        (Some(total), _) => parse_memory(total, "--max-memory")?,
        (None, Some(m)) => parse_memory(m, "-m")?.saturating_mul(threads),
        (None, None) => DEFAULT_MEM_PER_THREAD * threads,
    };
    if let Some(m) = &args.mem_per_thread {
        if parse_memory(m, "-m")? < MIN_MEM_PER_THREAD {
            bail!("-m {m} per thread is below the 1M minimum; use e.g. -m 768M");
        }
    }
    if args.max_fan_in < 2 {
        bail!("--max-fan-in {}: must be at least 2", args.max_fan_in);
    }
    let level = match (args.uncompressed, args.level) {
        (true, _) => CompressionLevel::STORED,
        (false, Some(l)) => CompressionLevel::samtools(l),
        (false, None) => CompressionLevel::from_libdeflate(DEFAULT_LEVEL),
    };
    let (data_path, index_path) = match &args.output {
        Some(o) if args.write_index => {
            let (d, i, bai) = index_target(o, args.index_format.as_deref())?;
            (Some(d), Some((i, bai)))
        }
        Some(o) => (Some(index_target(o, None)?.0), None),
        None => (None, None),
    };
    let format = resolve_format(
        args.output_fmt.as_deref(),
        data_path.as_deref(),
        level,
        OutFormat::Bam(level),
    )?;
    let write_index = match (&index_path, order, format) {
        (Some(_), SortOrder::Coordinate, OutFormat::Bam(_)) => true,
        (Some(_), SortOrder::Coordinate, _) => {
            bail!("--write-index: sortase writes indexes for BAM output only")
        }
        (Some(_), _, _) => {
            eprintln!(
                "[W::bam_sort] Ignoring --write-index as it only works for position sorted files."
            );
            false
        }
        (None, _, _) => false,
    };
    if args.write_index && data_path.is_none() {
        bail!("--write-index needs an output file (-o)");
    }

    let input_name = args.input.clone().unwrap_or_else(|| "-".into());
    let size = std::fs::metadata(&input_name).map(|m| m.len()).unwrap_or(0);
    let progress = Progress::new("sort", size);
    let mut report = PhaseReport::new(args.verbose, "read");
    let mut input = Input::open(&input_name, threads, args.reference.as_deref(), &progress)
        .with_context(|| input_name.clone())?;

    let temp = TempDir::create(&temp_prefix(
        args.temp_prefix.as_deref(),
        data_path.as_deref(),
    ))?;
    // The sort's parallel steps (sorting, run compression) use rayon's global pool, sized to -@.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    let record_memory = memory - final_phase_reserve(memory, threads, format);
    let mut sorter = Sorter::new(SortOptions {
        order,
        memory: record_memory,
        temp_dir: temp.path().to_path_buf(),
        max_fan_in: args.max_fan_in,
        ranges: Default::default(),
    });
    input
        .for_each_batch(|b| Ok(sorter.push(b)?))
        .with_context(|| input_name.clone())?;
    progress.finish();

    let mut header = input.header.clone();
    let (so, ss) = order.header_values();
    header.set_sort_order(so, ss.as_deref());
    if !args.no_pg {
        header.add_program("sortase", env!("CARGO_PKG_VERSION"), &crate::command_line());
    }
    let index = match (&index_path, write_index) {
        (Some((p, bai)), true) => Some((p.as_path(), *bai)),
        _ => None,
    };
    let (encoder, mut writer) = range_output::open(
        data_path.as_deref(),
        index,
        format,
        &header,
        args.reference.as_deref(),
    )?;
    let name = writer.name.clone();
    let stats = sorter
        .finish_ranges(
            threads,
            |p| {
                if p == "merge" {
                    release_free_memory();
                }
                report.next(p)
            },
            |records| encoder.encode(records),
            |range| writer.write(range),
        )
        .with_context(|| name.clone())?;
    writer.finish(matches!(format, OutFormat::Bam(_)))?;
    report.next("done");
    drop(temp);
    if args.verbose {
        let amp = if stats.spilled_bytes > 0 {
            stats.temp_bytes as f64 / stats.spilled_bytes as f64
        } else {
            0.0
        };
        eprintln!(
            "[sortase sort] {} records ({} MiB uncompressed); budget {} MiB ({} MiB for records); {} runs spilled, {} compactions, final merge of {} sources in {} key ranges; {} temporary bytes written (write amplification {:.2})",
            stats.records,
            stats.record_bytes >> 20,
            memory >> 20,
            record_memory >> 20,
            stats.runs_spilled,
            stats.compactions,
            stats.final_fan_in,
            stats.ranges,
            stats.temp_bytes,
            amp
        );
        eprintln!(
            "[sortase sort] spilling (sort + write runs) {:.2} s of the read phase; waited {:.2} s for compactions",
            stats.spill_time.as_secs_f64(),
            stats.compaction_wait.as_secs_f64()
        );
    }
    Ok(())
}
