//! What every subcommand shares: the runtime it runs its job on (threads, the memory budget, the
//! cancellation flag that SIGINT/SIGTERM set), the progress bar on a terminal, the `@PG` command line
//! and the printing of warnings, phases and checksums (the shared flags are in [`crate::args`]).

use indicatif::{HumanCount, ProgressBar, ProgressState, ProgressStyle};
use sortase::proof::Checksums;
use sortase::{CancelFlag, Phase, ProgressSink, Runtime};
use std::io::IsTerminal;
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

/// The runtime for a command: `threads` threads, `memory` bytes of budget (default samtools sort's
/// 768 MiB per thread), the process's cancellation flag and progress bar.
pub fn runtime(threads: usize, memory: Option<usize>) -> anyhow::Result<Runtime> {
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

/// Writes a job's text (a report, a count) to standard output.
pub fn print_stdout(text: impl AsRef<[u8]>) -> anyhow::Result<()> {
    std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_ref())?;
    Ok(())
}

/// Prints a job's warnings as samtools prints its own.
pub fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("{w}");
    }
}

/// Prints a job's phases on stderr, one `[sortase COMMAND] phase NAME  S s wall  C% CPU` line each.
pub fn print_phases(command: &str, phases: &[Phase]) {
    for p in phases {
        eprintln!(
            "[sortase {command}] phase {:<6} {:>8.2} s wall {:>5.0}% CPU",
            p.name, p.seconds, p.cpu_percent
        );
    }
}

/// Prints the sums of `--checksums`, if the job made them, after `[sortase COMMAND]` on stderr.
pub fn print_checksums(command: &str, checksums: Option<&Checksums>) {
    if let Some(c) = checksums {
        eprint!("[sortase {command}] {}", c.to_text());
    }
}
