//! What every subcommand shares: the runtime it runs its job on (threads from `-@`, the memory
//! budget, the cancellation flag that SIGINT/SIGTERM set), the progress bar on a terminal, the `@PG`
//! command line, and the output flags samtools' commands have in common.

use indicatif::{HumanCount, ProgressBar, ProgressState, ProgressStyle};
use sortase::{CancelFlag, OutputSpec, Program, ProgressSink, Runtime};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The flag every job of this process watches; set by SIGINT/SIGTERM.
fn cancel_flag() -> &'static CancelFlag {
    static FLAG: OnceLock<CancelFlag> = OnceLock::new();
    FLAG.get_or_init(CancelFlag::new)
}

/// The signal that cancelled the process (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// How long a cancelled job has to stop its threads and remove its files before the process removes
/// what is left and exits anyway (a job blocked reading a pipe cannot see the flag).
const GRACE: Duration = Duration::from_secs(2);

/// On SIGINT/SIGTERM: cancels the running job, which stops its threads, removes its temporary files
/// and returns (main then exits with 128 + the signal). A second signal, or a job that has not
/// returned within [`GRACE`], removes the remaining temporary files and exits at once.
pub fn install_signal_handling() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        let Some(sig) = signals.forever().next() else {
            return;
        };
        SIGNAL.store(sig, Ordering::SeqCst);
        cancel_flag().cancel();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(());
            }
        });
        let _ = rx.recv_timeout(GRACE);
        sortase::files::remove_pending_files();
        std::process::exit(128 + sig);
    });
}

/// The exit code for a cancelled job: 128 + the signal.
pub fn cancelled_exit_code() -> Option<u8> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some((128 + s) as u8),
    }
}

/// An `indicatif` bar on stderr when it is a terminal.
struct Bar {
    bar: Mutex<Option<ProgressBar>>,
}

impl ProgressSink for Bar {
    fn update(&self, label: &str, done: u64, total: u64) {
        let mut slot = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        let bar = slot.get_or_insert_with(|| {
            // Units: a label ending in "records" or "reads" counts those, any other bytes; no
            // total: a spinner with the amount and rate so far.
            let counted = ["records", "reads"].into_iter().find_map(|unit| {
                let l = label.strip_suffix(unit)?.strip_suffix(' ')?;
                Some((l, unit))
            });
            let (bar, template, label) = match (counted, total) {
                (Some((l, unit)), t) if t > 0 => (
                    ProgressBar::new(t),
                    format!("{{msg}} {{bar:40}} {{human_pos}}/{{human_len}} {unit} ({{elapsed}}, eta {{eta}})"),
                    l,
                ),
                (Some((l, unit)), _) => (
                    ProgressBar::new_spinner(),
                    format!("{{spinner}} {{msg}} {{human_pos}} {unit} ({{rate}}/s, {{elapsed}})"),
                    l,
                ),
                (None, 0) => (
                    ProgressBar::new_spinner(),
                    "{spinner} {msg} {bytes} ({bytes_per_sec}, {elapsed})".to_string(),
                    label,
                ),
                (None, t) => (
                    ProgressBar::new(t),
                    "{msg} {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})".to_string(),
                    label,
                ),
            };
            // {rate}: whole units per second, with thousands separators.
            let rate = |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", HumanCount(s.per_sec() as u64));
            };
            bar.set_style(
                ProgressStyle::with_template(&template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .with_key("rate", rate),
            );
            bar.set_message(label.to_string());
            bar
        });
        bar.set_position(done);
    }

    fn finish(&self, _label: &str) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

fn progress_sink() -> Option<Arc<dyn ProgressSink>> {
    std::io::stderr().is_terminal().then(|| {
        Arc::new(Bar {
            bar: Mutex::new(None),
        }) as Arc<dyn ProgressSink>
    })
}

/// The number of threads `-@` means when not given: all cores.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The runtime for a command: `threads` from `-@` (default all cores), `memory` bytes of budget
/// (default samtools sort's 768 MiB per thread), the process's cancellation flag and progress bar.
pub fn runtime(threads: Option<usize>, memory: Option<usize>) -> anyhow::Result<Runtime> {
    let threads = threads.unwrap_or_else(default_threads).max(1);
    let mut b = Runtime::builder()
        .threads(threads)
        .cancel_flag(cancel_flag().clone());
    if let Some(m) = memory {
        b = b.memory(m);
    }
    if let Some(sink) = progress_sink() {
        b = b.progress(sink);
    }
    Ok(b.build()?)
}

/// The command line for `@PG CL:`, as samtools writes it (arguments joined by spaces).
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The `@PG` line of this run, or none with `--no-PG`.
pub fn program(no_pg: bool) -> Option<Program> {
    (!no_pg).then(|| Program::new(command_line()))
}

/// Prints a job's warnings as samtools prints its own.
pub fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("{w}");
    }
}

/// Whether standard output is a pipe (a FIFO: `cmd | next`, `>(next)`), not a file or terminal.
pub fn stdout_is_pipe() -> bool {
    // SAFETY: fstat writes into the zeroed struct it is given; fd 1 needs no ownership.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(1, &mut st) }) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

/// What `sort` and `markdup` say in `--help` about their default level.
pub const PIPE_LEVEL_HELP: &str = "Into a pipe (no -o, or -o -, and standard output a pipe) BAM is written uncompressed (level 0, as -u) unless -l, -u or --output-fmt-option level= says otherwise: the next command decompresses what this one would compress (dupblaster's default). Into a file or a terminal the default level stays samtools'. Give -l 6 (or any level) to compress into a pipe.";

/// The uncompressed-into-a-pipe default of `sort` and `markdup` ([`PIPE_LEVEL_HELP`]): with BAM
/// output to standard output, standard output a pipe and no level given, `spec` becomes
/// uncompressed.
pub fn uncompressed_into_pipe(spec: &mut OutputSpec) {
    let to_stdout = spec
        .path
        .as_deref()
        .is_none_or(|p| p == std::path::Path::new("-"));
    let bam = spec
        .format
        .as_deref()
        .is_none_or(|f| f.eq_ignore_ascii_case("bam"));
    if to_stdout && bam && spec.level.is_none() && !spec.uncompressed && stdout_is_pipe() {
        spec.uncompressed = true;
    }
}

/// `-@`, declared once for every command.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Threads {
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    pub threads: Option<usize>,
}

impl Threads {
    /// The threads `-@` asks for (default all cores), at least 1.
    pub fn count(&self) -> usize {
        self.threads.unwrap_or_else(default_threads).max(1)
    }

    /// The runtime on these threads with `memory` bytes of budget ([`runtime`]).
    pub fn runtime(&self, memory: Option<usize>) -> anyhow::Result<Runtime> {
        runtime(self.threads, memory)
    }
}

/// samtools sort's memory flags, declared once for `sort` and `agd sort`.
#[derive(clap::Args, Debug, Clone)]
pub struct Memory {
    /// Memory per thread, with K/M/G suffix, as samtools [768M].
    #[arg(short = 'm', value_name = "INT[KMG]")]
    pub mem_per_thread: Option<String>,
    /// Memory for all threads together (overrides -m).
    #[arg(long = "max-memory", value_name = "INT[KMG]")]
    pub max_memory: Option<String>,
}

impl Memory {
    /// The budget for `threads` threads ([`crate::sort::memory_budget`]; `None`: the default).
    pub fn budget(&self, threads: usize) -> anyhow::Result<Option<usize>> {
        crate::sort::memory_budget(
            threads,
            self.mem_per_thread.as_deref(),
            self.max_memory.as_deref(),
        )
    }
}

/// samtools sort's order flags, declared once for `sort` and `agd sort`.
#[derive(clap::Args, Debug, Clone)]
pub struct OrderFlags {
    /// Sort by read name (natural order, samtools -n).
    #[arg(short = 'n')]
    pub by_name: bool,
    /// Sort by read name in lexicographic (strcmp) order (samtools -N).
    #[arg(short = 'N')]
    pub by_name_lex: bool,
    /// Sort by the value of TAG, then by position (or name with -n/-N).
    #[arg(short = 't', value_name = "TAG")]
    pub tag: Option<String>,
}

impl OrderFlags {
    /// The order the flags give.
    pub fn order(&self) -> sortase::Order {
        sortase::Order::from_flags(self.by_name, self.by_name_lex, self.tag.as_deref())
    }
}

/// samtools' output flags, declared once for every command that writes records.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the final output to FILE [stdout].
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Output format: sam, bam or cram [bam, or from the -o extension].
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    pub output_fmt: Option<String>,
    /// Compression level 0-9 with samtools' meaning.
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Uncompressed BAM output.
    #[arg(short = 'u')]
    pub uncompressed: bool,
    /// Write an index with the output (BAM: CSI, `out.bam##idx##out.bam.bai` for BAI; CRAM:
    /// `.crai`).
    #[arg(long = "write-index")]
    pub write_index: bool,
    /// Index format for --write-index: csi or bai [csi, or from the ##idx## name].
    #[arg(long = "index-format", value_name = "bai|csi")]
    pub index_format: Option<String>,
    /// Reference FASTA (CRAM input or output).
    #[arg(long = "reference", value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// CRAM output option, samtools' `--output-fmt-option`: version=3.0|3.1, seqs_per_slice=N,
    /// embed_ref, no_ref, ... (repeatable).
    #[arg(long = "output-fmt-option", value_name = "OPT=VAL")]
    pub output_fmt_option: Vec<String>,
}

impl OutputArgs {
    /// The library's output spec.
    pub fn spec(&self) -> sortase::Result<OutputSpec> {
        OutputSpec {
            path: self.output.clone(),
            format: self.output_fmt.clone(),
            level: self.level,
            uncompressed: self.uncompressed,
            write_index: self.write_index,
            index_format: self.index_format.clone(),
            reference: self.reference.clone(),
            format_options: self.output_fmt_option.clone(),
        }
        .with_format_options()
    }
}
