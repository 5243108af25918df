//! The oracle samtools: `$SORTASE_ORACLE` (any samtools-compatible
//! executable, run once per command) or, by default, pysam's bundled samtools
//! through `tests/samtools`. The latter runs as a small pool of persistent
//! `tests/samtools --serve` processes, which saves Python's and pysam's
//! start-up (~0.2 s) on each of the thousand-odd commands of the suite; a
//! command whose server dies is re-run as a one-shot `tests/samtools`.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};

use crate::common::{run, skip, Run};

/// How to invoke the oracle.
pub enum Oracle {
    /// `PYTHON tests/samtools ...` (PYTHON: `crate::common::python()`).
    Pysam { python: OsString, script: PathBuf },
    /// A samtools executable.
    Binary(PathBuf),
}

impl Oracle {
    /// Run `samtools <args>`.
    pub fn run(&self, args: &[&str]) -> Run {
        match self {
            Oracle::Binary(bin) => run(bin, &[], args),
            // `samtools sort -N` and `merge -N` set a process-wide flag (`natural_sort = 0`) that no
            // later command resets, so they must not run in a shared server process.
            Oracle::Pysam { python, script }
                if matches!(args.first(), Some(&"sort") | Some(&"merge"))
                    && args.contains(&"-N") =>
            {
                run(Path::new(python), &[script.into()], args)
            }
            Oracle::Pysam { python, script } => served(python, script, args)
                .unwrap_or_else(|| run(Path::new(python), &[script.into()], args)),
        }
    }
}

/// The oracle, or `None` after printing SKIP (panics instead when required).
pub fn oracle() -> Option<&'static Oracle> {
    static ORACLE: OnceLock<Result<Oracle, String>> = OnceLock::new();
    match ORACLE.get_or_init(find_oracle) {
        Ok(o) => Some(o),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

fn find_oracle() -> Result<Oracle, String> {
    let oracle = match std::env::var_os("SORTASE_ORACLE") {
        Some(bin) => Oracle::Binary(bin.into()),
        None => Oracle::Pysam {
            python: crate::common::python(),
            script: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/samtools"),
        },
    };
    let mut probe = match &oracle {
        Oracle::Binary(bin) => Command::new(bin),
        Oracle::Pysam { python, script } => {
            let mut c = Command::new(python);
            c.arg(script);
            c
        }
    };
    match probe.arg("version").stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => Ok(oracle),
        Ok(o) => Err(format!(
            "oracle samtools unusable: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("oracle samtools not runnable: {e}")),
    }
}

/// One `tests/samtools --serve` process.
struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

/// Idle servers; a caller takes one (or starts one) and puts it back.
static POOL: Mutex<Vec<Server>> = Mutex::new(Vec::new());

fn served(python: &OsString, script: &Path, args: &[&str]) -> Option<Run> {
    let idle = POOL.lock().unwrap().pop();
    let mut server = idle.or_else(|| Server::start(python, script))?;
    match server.request(args) {
        Some(run) => {
            POOL.lock().unwrap().push(server);
            Some(run)
        }
        None => {
            let _ = server.child.kill();
            let _ = server.child.wait();
            None
        }
    }
}

impl Server {
    fn start(python: &OsString, script: &Path) -> Option<Server> {
        let mut child = Command::new(python)
            .arg(script)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let input = child.stdin.take()?;
        let output = BufReader::new(child.stdout.take()?);
        Some(Server {
            child,
            input,
            output,
        })
    }

    /// Send one command; `None` if the server broke down.
    fn request(&mut self, args: &[&str]) -> Option<Run> {
        let json: Vec<String> = args.iter().map(|a| json_string(a)).collect();
        writeln!(self.input, "[{}]", json.join(",")).ok()?;
        self.input.flush().ok()?;
        let mut head = String::new();
        self.output.read_line(&mut head).ok()?;
        let nums: Vec<i64> = head
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        let [rc, err_len, out_len] = nums[..] else {
            return None;
        };
        let mut stderr = vec![0; err_len as usize];
        let mut stdout = vec![0; out_len as usize];
        self.output.read_exact(&mut stderr).ok()?;
        self.output.read_exact(&mut stdout).ok()?;
        Some(Run {
            cmd: format!("samtools {}", args.join(" ")),
            status: ExitStatus::from_raw(((rc & 0xff) as i32) << 8),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
