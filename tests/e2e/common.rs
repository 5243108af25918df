//! Shared helpers: running sortase (and any program), skipping when a
//! prerequisite is absent, normalising and diffing SAM text, small utilities.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Longest a single child process may run before it is killed.
const TIMEOUT: Duration = Duration::from_secs(600);

/// Outcome of one child process.
pub struct Run {
    /// Human-readable command line, for messages.
    pub cmd: String,
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.status.success()
    }

    /// stdout as (lossy) UTF-8 text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Panic with full context unless the process succeeded.
    pub fn expect_ok(self) -> Run {
        assert!(
            self.ok(),
            "`{}` failed ({}):\n{}",
            self.cmd,
            self.status,
            self.stderr
        );
        self
    }

    /// One-line summary of a failed run (first two non-empty stderr lines,
    /// which for a panic are its location and message).
    pub fn failure(&self) -> String {
        let msg: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(2)
            .collect();
        format!("`{}` exited {}: {}", self.cmd, self.status, msg.join(" / "))
    }
}

/// Path as &str (all paths in these tests are UTF-8).
pub fn p(path: &Path) -> &str {
    path.to_str().expect("non-UTF-8 path")
}

/// The binary under test; `SORTASE_E2E_BIN` may point at another build.
pub fn sortase_bin() -> PathBuf {
    match std::env::var_os("SORTASE_E2E_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(env!("CARGO_BIN_EXE_sortase")),
    }
}

/// Run sortase with `args`.
pub fn sortase(args: &[&str]) -> Run {
    run(&sortase_bin(), &[], args)
}

/// Run a program, capturing stdout and stderr, with a timeout.
pub fn run(program: &Path, prefix: &[OsString], args: &[&str]) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(prefix).args(args).stdin(Stdio::null());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let shown = format!("{} {}", program.display(), args.join(" "));
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn `{shown}`: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = thread::spawn(move || read_all(&mut out));
    let err_t = thread::spawn(move || read_all(&mut err));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait failed") {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("`{shown}` timed out after {TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let stdout = out_t.join().unwrap();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
    Run {
        cmd: shown,
        status,
        stdout,
        stderr,
    }
}

fn read_all(r: &mut impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = r.read_to_end(&mut buf);
    buf
}

/// True when a missing oracle/corpus must fail the test instead of skipping.
pub fn required() -> bool {
    std::env::var("SORTASE_REQUIRE_SAMTOOLS").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Report a missing prerequisite: panic if required, else print SKIP.
pub fn skip(reason: &str) {
    let test = thread::current().name().unwrap_or("?").to_string();
    if required() {
        panic!("{test}: {reason} (required by SORTASE_REQUIRE_SAMTOOLS=1 / CI=true)");
    }
    eprintln!("SKIP {test}: {reason}");
}

/// Report a missing speed peer (a benchmark tool such as dupblaster, not a correctness oracle):
/// SKIP even where oracles are required, since CI does not build the peers
/// (`bash bench/setup-peer.sh --tools` does; the test runs wherever the tool is installed).
pub fn skip_peer(reason: &str) {
    let test = thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIP {test}: {reason} (a speed peer, not required)");
}

/// Drop `@PG` header lines; everything else is kept byte for byte.
pub fn strip_pg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if !line.starts_with("@PG\t") {
            out.push_str(line);
        }
    }
    out
}

/// Only the alignment lines (no header).
pub fn records(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|l| !l.starts_with('@'))
        .collect()
}

/// Describe the first difference between two texts, or `None` if equal.
pub fn first_diff(ours: &str, theirs: &str) -> Option<String> {
    if ours == theirs {
        return None;
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.split('\n').collect(), theirs.split('\n').collect());
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i).copied(), b.get(i).copied());
        if x != y {
            return Some(format!(
                "line {} (ours {} lines, samtools {}): ours {} | samtools {}",
                i + 1,
                a.len() - 1,
                b.len() - 1,
                excerpt(x, y),
                excerpt(y, x)
            ));
        }
    }
    Some("texts differ (line endings?)".into())
}

/// A short view of `line` around its first difference from `other`.
fn excerpt(line: Option<&str>, other: Option<&str>) -> String {
    let Some(line) = line else {
        return "<missing>".into();
    };
    let other = other.unwrap_or("");
    let at = line
        .bytes()
        .zip(other.bytes())
        .take_while(|(x, y)| x == y)
        .count();
    let start = floor_char(line, at.saturating_sub(60));
    let end = floor_char(line, (at + 100).min(line.len()));
    let pre = if start > 0 { "…" } else { "" };
    let post = if end < line.len() { "…" } else { "" };
    format!(
        "`{pre}{}{post}` (col {})",
        &line[start..end].replace('\t', "→"),
        at + 1
    )
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Compare and push a labelled failure message when different.
pub fn check_same(failures: &mut Vec<String>, label: &str, ours: &str, theirs: &str) {
    if let Some(d) = first_diff(ours, theirs) {
        failures.push(format!("{label}: {d}"));
    }
}

/// Fail with every collected message at once.
pub fn assert_no_failures(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{what}: {} failure(s):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// Fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sortase-e2e")
        .tempdir()
        .expect("tempdir")
}

/// The Python the tests run (the samtools oracle, gzip, DuckDB): `$SORTASE_PYTHON`, else the clone's
/// `.venv/bin/python` (made by scripts/setup.sh, which installs pysam there), else `python3`.
pub fn python() -> std::ffi::OsString {
    if let Some(py) = std::env::var_os("SORTASE_PYTHON") {
        return py;
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        venv.into_os_string()
    } else {
        "python3".into()
    }
}

/// Decompress a BGZF/gzip file (via python3's gzip module).
pub fn gunzip(path: &Path) -> Vec<u8> {
    let py = python();
    let code =
        "import gzip,sys;sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1],'rb').read()))";
    run(Path::new(&py), &["-c".into(), code.into()], &[p(path)])
        .expect_ok()
        .stdout
}

/// Names of the entries of a directory, sorted.
pub fn dir_listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[path = "rng.rs"]
mod rng;
pub use rng::Rng;

/// Join SAM fields with tabs and end the line.
pub fn line(fields: &[&str]) -> String {
    let mut s = fields.join("\t");
    s.push('\n');
    s
}

/// A SAM line of an unplaced unmapped read (flag 4, no qualities).
pub fn unmapped(name: &str, seq: &str) -> String {
    line(&[name, "4", "*", "0", "0", "*", "*", "0", "0", seq, "*"])
}

/// Query length (bases of M, I, S, =, X) of a CIGAR string.
pub fn query_len(cigar: &str) -> usize {
    let (mut n, mut len) = (0usize, 0usize);
    for c in cigar.bytes() {
        if c.is_ascii_digit() {
            n = n * 10 + usize::from(c - b'0');
        } else {
            if b"MIS=X".contains(&c) {
                len += n;
            }
            n = 0;
        }
    }
    len
}

/// An external tool: `$VAR` if set, else `default`; `None` when it is not a file.
pub fn tool(var: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    path.is_file().then_some(path)
}
