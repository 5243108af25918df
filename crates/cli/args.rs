//! The argument groups that several commands flatten (`#[command(flatten)]`): each flag is declared
//! once here, with its help, and each group has one conversion into the library's spec. The flags
//! that set one field of a job spec are declared on that field instead (the `clap` feature of the
//! library: [`OutputSpec`], `SortJob`, `MergeJob`); these are the CLI's own (threads, memory) and
//! those built from several flags or from the process (the order, `--no-PG`'s `@PG` line). A command
//! whose copy of a flag says something more (markdup's `--write-index`, fq2bam's `-m`) keeps the
//! group and changes that help with `#[command(mut_arg(...))]` (`mut_args`, as merge's -n/-N/-t,
//! leaves the flags in their places in the completion scripts).

use anyhow::{bail, Result};
use sortase::options::parse_size;
pub use sortase::options::{NoPg, OrderFlags, TemplateCoordinateFlag};
use sortase::{OutputSpec, Runtime};
use std::path::{Path, PathBuf};

/// samtools' minimum `-m` (`SORT_MIN_MEGS_PER_THREAD`).
const MIN_MEM_PER_THREAD: usize = 1 << 20;

/// What `sort` and `markdup` say in `--help` about their default level.
pub const PIPE_LEVEL_HELP: &str = "Into a pipe (no -o, or -o -, and standard output a pipe) BAM is written uncompressed (level 0, as -u) unless -l, -u or --output-fmt-option level= says otherwise: the next command decompresses what this one would compress (dupblaster's default). Into a file or a terminal the default level stays samtools'. Give -l 6 (or any level) to compress into a pipe.";

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
        self.threads
            .unwrap_or_else(crate::common::default_threads)
            .max(1)
    }

    /// The runtime on these threads with `memory` bytes of budget ([`crate::common::runtime`]).
    pub fn runtime(&self, memory: Option<usize>) -> Result<Runtime> {
        crate::common::runtime(self.count(), memory)
    }
}

/// samtools sort's memory flags, declared once for `sort`, `agd sort` and `fq2bam`.
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
    /// The total budget for `threads` threads from `-m` (per thread) or `--max-memory`, as samtools
    /// computes it (`None`: neither given, the runtime's default).
    pub fn budget(&self, threads: usize) -> Result<Option<usize>> {
        if let Some(m) = &self.mem_per_thread {
            if parse_size(m, "-m")? < MIN_MEM_PER_THREAD {
                bail!("-m {m} per thread is below the 1M minimum; use e.g. -m 768M");
            }
        }
        Ok(match (&self.max_memory, &self.mem_per_thread) {
            (Some(t), _) => Some(parse_size(t, "--max-memory")?),
            (None, Some(m)) => Some(parse_size(m, "-m")?.saturating_mul(threads)),
            (None, None) => None,
        })
    }

    /// The runtime on `threads` with this budget.
    pub fn runtime(&self, threads: &Threads) -> Result<Runtime> {
        threads.runtime(self.budget(threads.count())?)
    }
}

/// The output flags (`-o -O -l -u --write-index ...`) are [`OutputSpec`]'s fields (`clap::Args`,
/// flattened by every command that writes records, directly or inside its job); this is the spec
/// they give, with samtools' `-O FORMAT,OPT=VAL` spelling applied.
pub fn output(flags: &OutputSpec) -> sortase::Result<OutputSpec> {
    flags.clone().with_format_options()
}

/// [`output`] with `sort`'s and `markdup`'s default into a pipe ([`PIPE_LEVEL_HELP`]): BAM to
/// standard output, standard output a pipe and no level given is written uncompressed.
pub fn output_for_pipe(flags: &OutputSpec) -> sortase::Result<OutputSpec> {
    let mut spec = output(flags)?;
    let to_stdout = spec.path.as_deref().is_none_or(|p| p == Path::new("-"));
    let bam = spec
        .format
        .as_deref()
        .is_none_or(|f| f.eq_ignore_ascii_case("bam"));
    if to_stdout && bam && spec.level.is_none() && !spec.uncompressed && stdout_is_pipe() {
        spec.uncompressed = true;
    }
    Ok(spec)
}

/// Whether standard output is a pipe (a FIFO: `cmd | next`, `>(next)`), not a file or terminal.
fn stdout_is_pipe() -> bool {
    // SAFETY: fstat writes into the zeroed struct it is given; fd 1 needs no ownership.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(1, &mut st) }) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

/// `-T PREFIX` of the commands that spill next to their output.
#[derive(clap::Args, Debug, Clone)]
pub struct TempPrefix {
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ (a directory: inside it) [OUT.tmp or TMPDIR].
    #[arg(short = 'T', value_name = "PREFIX")]
    pub temp_prefix: Option<PathBuf>,
}
