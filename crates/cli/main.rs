//! `sortase`: samtools-compatible BAM/SAM/CRAM processing on all cores.
//!
//! This binary only turns flags into library calls; the work lives in the `sortase-*` crates.

mod agd;
mod agd_ops;
mod args;
mod bgzip;
mod checksum;
mod common;
mod faidx;
mod fetch;
mod fq2bam;
mod help;
mod index;
mod markdup;
mod markdup_coord;
mod markdup_query;
mod merge;
mod snp_pileup;
mod sort;
mod stats;
mod view;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// Fast, samtools-compatible sequencing-data processing.
#[derive(Parser)]
#[command(name = "sortase", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// SAM/BAM/CRAM conversion, filtering, region queries and counting (samtools view).
    View(view::ViewArgs),
    /// Build a BAI or CSI index identical to samtools index, on all cores.
    Index(index::IndexArgs),
    /// Sort by coordinate, read name or tag, identical to samtools sort, on all cores.
    Sort(sort::SortArgs),
    /// Merge sorted files, identical to samtools merge.
    Merge(merge::MergeArgs),
    /// Flag statistics identical to samtools flagstat, on all cores.
    Flagstat(stats::FlagstatArgs),
    /// Per-reference mapped/unmapped counts identical to samtools idxstats.
    Idxstats(stats::IdxstatsArgs),
    /// Order-independent checksums of the records, identical to samtools checksum.
    Checksum(checksum::ChecksumArgs),
    /// Reads and mean depth per reference and the MAPQ histogram in one pass; `--plot` draws them
    /// as an HTML page.
    Stats(stats::StatsArgs),
    /// Ref/alt/error/deletion counts of BAMs at VCF SNVs, identical to FACETS snp-pileup, on all cores.
    SnpPileup(snp_pileup::SnpPileupArgs),
    /// Compress, decompress, index and cut BGZF files (htslib bgzip), on all cores.
    Bgzip(bgzip::BgzipArgs),
    /// Index FASTA/FASTQ (.fai identical to samtools faidx) and retrieve regions.
    Faidx(faidx::FaidxArgs),
    /// Build the .loc record index (name, offset, size) of a FASTA/FASTQ file.
    Loc(fetch::LocArgs),
    /// Retrieve many whole records by name or byte range in one pass.
    Fetch(fetch::FetchArgs),
    /// Mark duplicates: samblaster's algorithm on query-grouped input, Picard's on coordinate-sorted.
    Markdup(Box<markdup::MarkdupArgs>),
    /// FASTQ to sorted, duplicate-marked, indexed BAM: minimap2, samblaster's marking, sort, index.
    Fq2bam(Box<fq2bam::Fq2BamArgs>),
    /// AGD columnar datasets on Parquet: import, export, flagstat, idxstats, sort, markdup, view,
    /// add-column.
    #[command(subcommand)]
    Agd(agd::AgdCommand),
    /// Shell completions: `sortase completions bash|zsh|fish` writes the script to stdout.
    Completions(help::CompletionsArgs),
    /// Writes man pages (sortase.1 and one per command) into a directory.
    Man(help::ManArgs),
}

/// The command line definition with the examples of [`help::EXAMPLES`].
fn command() -> clap::Command {
    help::with_examples(Cli::command().long_version(long_version()))
}

/// Keeps freed multi-megabyte buffers (inflated chunks, deflate jobs) in the heap for reuse instead of
/// returning them to the kernel and faulting fresh pages in again: `view -u` on the small bench BAM
/// went from 0.68-0.76 s (sys 0.16-0.27 s) to 0.61-0.69 s (sys 0.09-0.14 s) on 2 threads.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc allocator thresholds; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

fn main() -> ExitCode {
    tune_allocator();
    // Output files bypass the page cache past 64 MiB unless SORTASE_DIRECT_IO=0 (README).
    if std::env::var_os("SORTASE_DIRECT_IO").is_some_and(|v| v == "0") {
        sortase_bgzf::direct_io::set_direct_writes(false);
    }
    common::install_signal_handling();
    let cli = parse_cli();
    // A panic (a bug, or one in a dependency such as the CRAM codec) becomes a one-line error; output
    // files are still removed by their destructors during unwinding.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("sortase: internal error: {msg}{at}");
    }));
    let result = match cli.command {
        Command::View(args) => view::run(args),
        Command::Sort(args) => sort::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Index(args) => index::run(args),
        Command::Flagstat(args) => stats::flagstat(args),
        Command::Idxstats(args) => stats::idxstats(args),
        Command::Checksum(args) => checksum::run(args),
        Command::SnpPileup(args) => snp_pileup::run(args),
        Command::Bgzip(args) => bgzip::run(args),
        Command::Faidx(args) => faidx::run(args),
        Command::Loc(args) => fetch::loc(args),
        Command::Fetch(args) => fetch::fetch(args),
        Command::Markdup(args) => markdup::run(*args),
        Command::Fq2bam(args) => fq2bam::run(*args),
        Command::Agd(command) => agd::run(command),
        Command::Stats(args) => stats::stats(args),
        Command::Completions(args) => help::completions(args, command()),
        Command::Man(args) => help::man(args, command()),
    };
    // SORTASE_REMOTE_STATS=1: what reading s3:// and http(s):// inputs fetched (README).
    if std::env::var_os("SORTASE_REMOTE_STATS").is_some_and(|v| v == "1") {
        let (bytes, requests) = sortase::remote::fetched();
        eprintln!("sortase: remote: fetched {bytes} bytes in {requests} requests");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS, // `sortase view | head` is not an error
        Err(e) => match common::cancelled_exit_code() {
            // Cancelled by a signal: whatever the job ran into while stopping is not the news.
            Some(code) => {
                eprintln!("sortase: interrupted");
                ExitCode::from(code)
            }
            None => {
                eprintln!("sortase: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `--version`: this version and the libraries compiled in, one `Using` line each, as
/// `samtools --version` names its htslib (`-V` prints the short form).
fn long_version() -> &'static str {
    let mut long = env!("CARGO_PKG_VERSION").to_string();
    for c in sortase::versions::components() {
        long.push_str(&format!("\nUsing {} {} ({})", c.name, c.version, c.note));
    }
    // clap keeps a `&'static str`; this string is built once per process.
    Box::leak(long.into_boxed_str())
}

fn parse_cli() -> Cli {
    Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<sortase::Error>()
                .is_some_and(sortase::Error::is_broken_pipe)
    })
}

#[cfg(test)]
mod tests {
    /// clap's own consistency checks (duplicate short flags, bad defaults) over every subcommand;
    /// in release builds clap skips them, so a clash would only show as a wrong parse.
    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
