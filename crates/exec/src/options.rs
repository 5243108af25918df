//! Plain, serialisable pieces that job specs share: the sort order, where and how output is written,
//! the `@PG` line, and samtools' parsing of sizes ([`crate::output`] resolves an [`OutputSpec`]).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use sortase_bgzf::CompressionLevel;
use sortase_sort::SortOrder;
use std::path::PathBuf;

/// The version written in `@PG VN:` (the facade's, which is the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Output level without `-l`: libdeflate 6 (samtools `-l 5`). Measured on the bench BAM (see
/// bench/RESULTS.md, the levels table: `view -O bam,level=5` against `level=6`, 2 threads): 1.45x
/// the speed of libdeflate 7 (samtools' default `-l 6`) for 0.9% larger output. An older, loaded
/// run had measured 1.78x.
pub const DEFAULT_LEVEL: u8 = 6;

/// A sort order as samtools names it (`-n`, `-N`, `-t TAG`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// By reference and position (samtools' default).
    #[default]
    Coordinate,
    /// By read name, natural order (`-n`).
    Name,
    /// By read name, strcmp order (`-N`).
    NameLex,
    /// By the value of a tag, then by position (`-t TAG`), or by name (`-t TAG -n/-N`).
    Tag {
        /// The two-character tag.
        tag: String,
        /// `None`: then by position; `Some(true)`: by natural name; `Some(false)`: strcmp name.
        by_name: Option<bool>,
    },
    /// samtools' `--template-coordinate`: the records of a template together, by its unclipped 5'
    /// ends (needs `MC` tags on paired records: `samtools fixmate -m`).
    TemplateCoordinate,
}

impl Order {
    /// The order samtools sort and merge take from `-n`, `-N` and `-t TAG`.
    pub fn from_flags(by_name: bool, by_name_lex: bool, tag: Option<&str>) -> Self {
        let names = (by_name || by_name_lex).then_some(!by_name_lex);
        match (tag, names) {
            (Some(t), by_name) => Order::Tag {
                tag: t.to_string(),
                by_name,
            },
            (None, Some(true)) => Order::Name,
            (None, Some(false)) => Order::NameLex,
            (None, None) => Order::Coordinate,
        }
    }

    /// `self` with samtools sort's `--template-coordinate` applied: the coordinate order becomes the
    /// template-coordinate order; `-t TAG` wins over it, as in samtools; with `-n`/`-N` samtools
    /// takes whichever flag comes last, so the combination is refused.
    pub fn with_template_coordinate(self, template_coordinate: bool) -> Result<Self> {
        match (template_coordinate, self) {
            (true, Order::Coordinate) => Ok(Order::TemplateCoordinate),
            (true, Order::Name | Order::NameLex) => Err(Error::argument(
                "--template-coordinate with -n/-N: choose one order",
            )),
            (_, order) => Ok(order),
        }
    }

    /// The sort crate's order for input with `header` (the template-coordinate order reads the
    /// header's read groups and reference count).
    pub fn resolve_with(&self, header: &sortase_bam::Header) -> Result<SortOrder> {
        match self {
            Order::TemplateCoordinate => Ok(SortOrder::TemplateCoordinate(
                sortase_sort::TemplateOrder::new(header.text(), header.references().len()),
            )),
            _ => self.resolve(),
        }
    }

    /// The sort crate's order, for orders that do not depend on the input's header (all but the
    /// template-coordinate order, which [`Order::resolve_with`] resolves).
    pub fn resolve(&self) -> Result<SortOrder> {
        Ok(match self {
            Order::TemplateCoordinate => {
                return Err(Error::argument(
                    "--template-coordinate: not supported here yet (sort tasks and AGD datasets); \
                     use `sortase sort` on the file",
                ))
            }
            Order::Coordinate => SortOrder::Coordinate,
            Order::Name => SortOrder::Name { natural: true },
            Order::NameLex => SortOrder::Name { natural: false },
            Order::Tag { tag, by_name } if tag.len() == 2 => SortOrder::Tag {
                tag: [tag.as_bytes()[0], tag.as_bytes()[1]],
                by_name: *by_name,
            },
            Order::Tag { tag, .. } => {
                return Err(Error::argument(format!(
                    "-t {tag}: a tag is two characters, e.g. -t RG"
                )))
            }
        })
    }
}

/// The `--help` text of `-T PREFIX` on the specs that spill (sort, markdup, fq2bam).
pub const TEMP_PREFIX_HELP: &str =
    "Temporary files go to PREFIX.sortase-PID-N.tmp/ (a directory: inside it) [OUT.tmp or TMPDIR]";

/// Where and how a job writes its main output (samtools' `-o -O -l -u --write-index --reference`).
///
/// With the `clap` feature it is also those flags (`clap::Args`, flattened by the CLI's commands):
/// each `help` is the text of `--help`, the doc comment the library's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct OutputSpec {
    /// Write the final output to FILE [stdout].
    #[cfg_attr(feature = "clap", arg(id = "output", short = 'o', value_name = "FILE"))]
    pub path: Option<PathBuf>,
    /// Output format: sam, bam or cram [bam, or from the -o extension]; sort also takes agd (a new
    /// dataset directory), agd export fastq (as samtools fastq).
    #[cfg_attr(
        feature = "clap",
        arg(id = "output_fmt", short = 'O', long = "output-fmt", value_name = "FORMAT")
    )]
    pub format: Option<String>,
    /// Compression level 0-9 with samtools' meaning.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'l', value_name = "INT", allow_negative_numbers = true)
    )]
    pub level: Option<i32>,
    /// Uncompressed BAM output.
    #[cfg_attr(feature = "clap", arg(short = 'u'))]
    pub uncompressed: bool,
    /// Write an index with the output (BAM: CSI, `out.bam##idx##out.bam.bai` for BAI; CRAM:
    /// `.crai`).
    #[cfg_attr(feature = "clap", arg(long = "write-index"))]
    pub write_index: bool,
    /// Index format for --write-index: csi or bai [csi, or from the ##idx## name].
    #[cfg_attr(feature = "clap", arg(long = "index-format", value_name = "bai|csi"))]
    pub index_format: Option<String>,
    /// Reference FASTA (CRAM input or output).
    #[cfg_attr(feature = "clap", arg(long = "reference", value_name = "FILE"))]
    pub reference: Option<PathBuf>,
    /// CRAM output option, samtools' `--output-fmt-option`: version=3.0|3.1, seqs_per_slice=N,
    /// embed_ref, no_ref, ... (repeatable).
    #[serde(default)]
    #[cfg_attr(
        feature = "clap",
        arg(id = "output_fmt_options", long = "output-fmt-option", value_name = "OPT=VAL")
    )]
    pub format_options: Vec<String>,
}

impl OutputSpec {
    /// For CRAM output with no reference (`-T`) and no `no_ref`/`embed_ref` option: what samtools
    /// (htslib) warns. The output is still written, as samtools writes it: each `@SQ` is looked up
    /// by its M5 tag (REF_PATH, REF_CACHE), and one not found is embedded or its bases stored as
    /// they are.
    pub fn cram_reference_warning(&self) -> Option<String> {
        let chosen = self.format_options.iter().any(|o| {
            let key = o.split('=').next().unwrap_or_default();
            key == "no_ref" || key == "embed_ref"
        });
        (self.reference.is_none() && !chosen).then(|| {
            "CRAM output without -T/--reference: references are looked up by their @SQ M5 tags \
             (REF_PATH, REF_CACHE); one not found is embedded or its bases stored as they are, \
             and the file is bigger (as samtools does)"
                .to_string()
        })
    }

    /// Output to `path` with every other option at its default.
    pub fn to_path(path: impl Into<PathBuf>) -> Self {
        Self {
            path: Some(path.into()),
            ..Self::default()
        }
    }

    /// The BGZF level: `-u` wins, then `-l` (samtools' meaning), then `default_libdeflate`.
    pub fn compression_level(&self, default_libdeflate: u8) -> CompressionLevel {
        match (self.uncompressed, self.level) {
            (true, _) => CompressionLevel::STORED,
            (false, Some(l)) => CompressionLevel::samtools(l),
            (false, None) => CompressionLevel::from_libdeflate(default_libdeflate),
        }
    }

    /// Applies samtools' spelling of format options: `-O FORMAT,OPT=VAL,...` moves the options after
    /// the format name into `format_options`, and for BAM and SAM output `level=N` (from `-O` or
    /// `--output-fmt-option`) becomes `level`, as htslib's `hts_opt_add` reads it. CRAM keeps every
    /// option for htslib. Any other option on BAM/SAM output is an argument error naming it (htslib
    /// rejects unknown options too).
    pub fn with_format_options(mut self) -> Result<Self> {
        if let Some((name, rest)) = self
            .format
            .clone()
            .as_deref()
            .and_then(|f| f.split_once(','))
        {
            let mut opts: Vec<String> = rest
                .split(',')
                .filter(|o| !o.is_empty())
                .map(str::to_string)
                .collect();
            opts.append(&mut self.format_options);
            self.format_options = opts;
            self.format = Some(name.to_string());
        }
        let cram = match self.format.as_deref() {
            Some(f) => f.eq_ignore_ascii_case("cram"),
            None => self
                .path
                .as_deref()
                .and_then(|p| p.to_str())
                .map(|p| p.split("##idx##").next().unwrap_or(p))
                .is_some_and(|p| p.ends_with(".cram")),
        };
        if cram {
            return Ok(self);
        }
        for opt in std::mem::take(&mut self.format_options) {
            let (key, value) = opt.split_once('=').unwrap_or((opt.as_str(), ""));
            match (key, value.trim().parse::<i32>()) {
                ("level", Ok(l)) if (0..=9).contains(&l) => self.level = Some(l),
                _ => {
                    return Err(Error::argument(format!(
                        "output option {opt:?}: BAM and SAM output take level=0..9 (other options are for CRAM)"
                    )))
                }
            }
        }
        Ok(self)
    }
}

/// samtools sort's and merge's order flags (`-n`, `-N`, `-t TAG`), the face group that gives a
/// job's [`Order`]: with the `clap` feature they are the flags themselves, which the CLI flattens
/// and the Python package reads its keywords' help from (sortase-py's `spec_schema`).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct OrderFlags {
    /// Sort by read name (natural order, samtools -n).
    #[cfg_attr(feature = "clap", arg(short = 'n'))]
    pub by_name: bool,
    /// Sort by read name in lexicographic (strcmp) order (samtools -N).
    #[cfg_attr(feature = "clap", arg(short = 'N'))]
    pub by_name_lex: bool,
    /// Sort by the value of TAG, then by position (or name with -n/-N).
    #[cfg_attr(feature = "clap", arg(short = 't', value_name = "TAG"))]
    pub tag: Option<String>,
}

impl OrderFlags {
    /// The order the flags give.
    pub fn order(&self) -> Order {
        Order::from_flags(self.by_name, self.by_name_lex, self.tag.as_deref())
    }
}

/// samtools sort's `--template-coordinate` (sort's alone: samtools merge has no such flag).
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TemplateCoordinateFlag {
    /// Sort by template-coordinate (samtools --template-coordinate): the records of a template
    /// together, by its unclipped 5' ends; paired records need MC tags (samtools fixmate -m).
    #[cfg_attr(feature = "clap", arg(long = "template-coordinate"))]
    pub template_coordinate: bool,
}

/// `--no-PG`, the flag of every job that writes a header: whether the job's [`Program`] is `None`.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct NoPg {
    /// Do not add a @PG line to the header.
    #[cfg_attr(feature = "clap", arg(long = "no-PG"))]
    pub no_pg: bool,
}

impl NoPg {
    /// The `@PG` line with `command_line`, or none with `--no-PG`.
    pub fn program(&self, command_line: impl FnOnce() -> String) -> Option<Program> {
        (!self.no_pg).then(|| Program::new(command_line()))
    }
}

/// The `@PG` line a job adds to the header it writes (`None` in a job spec: `--no-PG`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The command line for `CL:` (samtools joins its arguments with spaces).
    pub command_line: String,
}

impl Program {
    /// A `@PG` with this command line.
    pub fn new(command_line: impl Into<String>) -> Self {
        Self {
            command_line: command_line.into(),
        }
    }

    /// Adds the line to `header` (`ID:sortase`, `PN:sortase`, `VN:`, `CL:`, chained with `PP:`).
    pub fn add_to(&self, header: &mut sortase_bam::Header) {
        header.add_program("sortase", VERSION, &self.command_line);
    }
}

/// Adds `program`'s `@PG` line to `header` if there is one.
pub fn add_program(header: &mut sortase_bam::Header, program: Option<&Program>) {
    if let Some(p) = program {
        p.add_to(header);
    }
}

/// Parses samtools' `-m` syntax: an integer (`strtol` base 0) with an optional K/M/G suffix; `flag`
/// names the option in the error.
pub fn parse_size(s: &str, flag: &str) -> Result<usize> {
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
        None => Err(Error::argument(format!(
            "{flag} {s}: not a whole number of bytes with an optional K/M/G suffix (e.g. 768M)"
        ))),
    }
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

/// One phase of a job: its name, wall time and the process's CPU use over it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// The phase's name (`read`, `merge`, ...).
    pub name: String,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Process CPU time over the phase / wall time, in percent.
    pub cpu_percent: f64,
}

/// Times the phases of a job.
pub struct PhaseClock {
    name: String,
    wall: std::time::Instant,
    cpu: f64,
    done: Vec<Phase>,
}

impl PhaseClock {
    /// Starts the first phase.
    pub fn new(first: &str) -> Self {
        Self {
            name: first.into(),
            wall: std::time::Instant::now(),
            cpu: cpu_seconds(),
            done: Vec::new(),
        }
    }

    /// Ends the current phase and starts `next`.
    pub fn next(&mut self, next: &str) {
        let (wall, cpu) = (self.wall.elapsed().as_secs_f64(), cpu_seconds());
        let cpu_percent = if wall > 0.0 {
            100.0 * (cpu - self.cpu) / wall
        } else {
            0.0
        };
        self.done.push(Phase {
            name: std::mem::replace(&mut self.name, next.into()),
            seconds: wall,
            cpu_percent,
        });
        self.wall = std::time::Instant::now();
        self.cpu = cpu;
    }

    /// Ends the current phase; returns every phase.
    pub fn finish(mut self) -> Vec<Phase> {
        self.next("");
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_options_follow_samtools_spelling() {
        let spec = |format: &str, opts: &[&str], path: &str| OutputSpec {
            path: Some(path.into()),
            format: (!format.is_empty()).then(|| format.to_string()),
            format_options: opts.iter().map(|o| o.to_string()).collect(),
            ..OutputSpec::default()
        };
        let bam = spec("bam,level=1", &[], "o.bam")
            .with_format_options()
            .unwrap();
        assert_eq!((bam.format.as_deref(), bam.level), (Some("bam"), Some(1)));
        assert!(bam.format_options.is_empty());
        let by_option = spec("", &["level=9"], "o.bam")
            .with_format_options()
            .unwrap();
        assert_eq!(by_option.level, Some(9));
        let cram = spec("cram,version=3.0", &["level=7"], "o.bam")
            .with_format_options()
            .unwrap();
        assert_eq!(cram.format_options, ["version=3.0", "level=7"]);
        assert_eq!(cram.level, None);
        let by_extension = spec("", &["no_ref"], "o.cram##idx##o.crai");
        assert_eq!(
            by_extension.clone().with_format_options().unwrap(),
            by_extension
        );
        assert!(spec("bam,no_ref", &[], "o.bam")
            .with_format_options()
            .is_err());
        assert!(spec("", &["level=10"], "o.sam")
            .with_format_options()
            .is_err());
    }

    #[test]
    fn sizes_and_orders_parse_as_samtools() {
        assert_eq!(parse_size("768M", "-m").unwrap(), 768 << 20);
        assert_eq!(parse_size("0x10k", "-m").unwrap(), 16 << 10);
        assert!(parse_size("1.5G", "-m").is_err());
        assert_eq!(Order::from_flags(true, false, None), Order::Name);
        assert_eq!(
            Order::from_flags(false, true, Some("RG"))
                .resolve()
                .unwrap(),
            SortOrder::Tag {
                tag: *b"RG",
                by_name: Some(false)
            }
        );
        assert!(Order::from_flags(false, false, Some("RGX"))
            .resolve()
            .is_err());
    }
}
