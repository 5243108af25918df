//! [`SummaryJob`]: `sortase stats` — reads per reference, mean depth and the MAPQ histogram of a
//! SAM/BAM/CRAM file in one pass ([`sortase_ops::summary`]), optionally drawn as an HTML page.
//!
//! A BAM file is counted over byte ranges on all cores; SAM and CRAM are read as one stream.
//!
//! ```
//! use sortase::{Runtime, SummaryJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! let plot = dir.path().join("summary.html");
//! let job = SummaryJob { plot: Some(plot.clone()), ..SummaryJob::new(&input) };
//! let report = job.run(&Runtime::with_threads(2)?)?;
//! assert_eq!((report.summary.records(), report.summary.mapq[60]), (1, 1));
//! assert!(std::fs::read_to_string(plot).unwrap().contains("chr1"));
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::Header;
use sortase_exec::bam_ranges;
use sortase_exec::error::{Error, Result};
use sortase_exec::input::Input;
use sortase_exec::runtime::Runtime;
use sortase_ops::summary::{html, Summary};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One pass of counting over `input`, and the page to draw.
///
/// With the `clap` feature it is also `sortase stats`'s flags (`clap::Args`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SummaryJob {
    /// Input SAM/BAM/CRAM.
    pub input: PathBuf,
    /// Also draw the counts as an HTML page (inline SVG: reads and mean depth per reference, the
    /// MAPQ histogram; a table of every reference).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "plot", value_name = "FILE.html"))]
    pub plot: Option<PathBuf>,
    /// Reference FASTA (CRAM input).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "reference", value_name = "FILE"))]
    pub reference: Option<PathBuf>,
}

/// What [`SummaryJob`] counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryReport {
    /// `(name, length)` of the header's references.
    pub references: Vec<(String, u64)>,
    /// The counters.
    pub summary: Summary,
    /// Files written.
    pub outputs: Vec<PathBuf>,
}

impl SummaryReport {
    /// Tab-separated lines: reference, length, mapped, unmapped, mean depth; then `*` (idxstats'
    /// columns plus the depth).
    pub fn to_tsv(&self) -> String {
        let mut s = String::new();
        for ((name, len), c) in self.references.iter().zip(&self.summary.references) {
            let depth = c.aligned_bases as f64 / (*len).max(1) as f64;
            s += &format!("{name}\t{len}\t{}\t{}\t{depth:.2}\n", c.mapped, c.unmapped);
        }
        let [m, u] = self.summary.unplaced;
        s += &format!("*\t0\t{m}\t{u}\t0.00\n");
        s
    }
}

impl SummaryJob {
    /// Counts `input` without a page.
    pub fn new(input: impl AsRef<Path>) -> Self {
        Self {
            input: input.as_ref().to_path_buf(),
            plot: None,
            reference: None,
        }
    }

    /// Counts on `rt` and writes the page if asked.
    pub fn run(&self, rt: &Runtime) -> Result<SummaryReport> {
        self.run_inner(rt).map_err(Error::from)
    }

    fn run_inner(&self, rt: &Runtime) -> anyhow::Result<SummaryReport> {
        let name = || self.input.display().to_string();
        if let Some(plot) = &self.plot {
            let ext = plot.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !matches!(ext.to_ascii_lowercase().as_str(), "html" | "htm") {
                return Err(Error::argument(format!(
                    "--plot {}: sortase draws HTML pages with inline SVG; name the file .html",
                    plot.display()
                ))
                .into());
            }
        }
        let (header, summary) = if is_bam(&self.input) {
            let (header, parts) =
                bam_ranges::scan(&self.input, rt, Summary::new, Summary::add).with_context(name)?;
            let mut total = Summary::new(header.references().len());
            for p in &parts {
                total.merge(p);
            }
            (header, total)
        } else {
            self.stream(rt).with_context(name)?
        };
        let references: Vec<(String, u64)> = header
            .references()
            .iter()
            .map(|r| {
                (
                    String::from_utf8_lossy(&r.name).into_owned(),
                    u64::from(r.length),
                )
            })
            .collect();
        let mut outputs = Vec::new();
        if let Some(plot) = &self.plot {
            let title = self
                .input
                .file_name()
                .map_or_else(name, |f| f.to_string_lossy().into_owned());
            let page = html::render(&title, &references, &summary);
            let (dest, mut out) = sortase_exec::files::Destination::open(Some(plot.as_path()))?;
            out.write_all(page.as_bytes())
                .and_then(|()| out.flush())
                .with_context(|| dest.name.clone())?;
            drop(out);
            dest.commit()?;
            outputs.push(plot.clone());
        }
        Ok(SummaryReport {
            references,
            summary,
            outputs,
        })
    }

    /// SAM or CRAM: one stream.
    fn stream(&self, rt: &Runtime) -> anyhow::Result<(Header, Summary)> {
        let size = std::fs::metadata(&self.input).map(|m| m.len()).unwrap_or(0);
        let progress = rt.progress("stats", size);
        let path = self.input.to_string_lossy();
        let mut input = Input::open(&path, rt.threads(), self.reference.as_deref(), &progress)?;
        input.set_cancel(rt.cancel_flag().clone());
        let mut summary = Summary::new(input.header.references().len());
        input.for_each_batch(|batch| {
            batch.iter().for_each(|r| summary.add(&r));
            Ok(())
        })?;
        progress.finish();
        Ok((input.header.clone(), summary))
    }
}

/// Whether `path` starts with a BGZF block holding BAM.
fn is_bam(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut reader = sortase_bgzf::SeekReader::new(std::io::BufReader::new(file));
    let mut magic = [0u8; 4];
    std::io::Read::read_exact(&mut reader, &mut magic).is_ok() && &magic == b"BAM\x01"
}
