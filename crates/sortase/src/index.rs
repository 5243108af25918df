//! [`IndexJob`]: samtools index (BAI, or CSI with `min_shift`), byte-identical, on all cores
//! (crates/index summarises byte ranges of the BAM and replays the summaries in order). Also as
//! serialisable range tasks ([`IndexPlan`]): each task summarises one range, the plan's `finish`
//! assembles and writes the index.
//!
//! ```
//! use sortase::{IndexJob, OutputSpec, Runtime, SortJob};
//! # let dir = tempfile::tempdir().unwrap();
//! # let sam = dir.path().join("in.sam");
//! # std::fs::write(&sam, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! # let bam = dir.path().join("in.bam");
//! let rt = Runtime::with_threads(2)?;
//! # SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&bam)).run(&rt)?;
//! let report = IndexJob::new(&bam).run(&rt)?;
//! assert_eq!(report.outputs, vec![dir.path().join("in.bam.bai")]);
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_exec::bam_ranges::{self, BamSlice, RANGES_PER_THREAD};
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::files::OutputFile;
use sortase_exec::runtime::Runtime;
use sortase_index::{IndexError, IndexFormat, RangeSummary};
use std::io::Write;
use std::path::{Path, PathBuf};

/// samtools index as a job.
///
/// With the `clap` feature it is also samtools index's flags (`clap::Args`, flattened by `sortase
/// index`, which adds `-b` and the old positional output name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct IndexJob {
    /// Input BAM (coordinate-sorted).
    pub input: PathBuf,
    /// Index file name [in.bam.bai or in.bam.csi].
    #[cfg_attr(feature = "clap", arg(short = 'o', long = "output", value_name = "FILE"))]
    pub output: Option<PathBuf>,
    /// Write a CSI index.
    #[cfg_attr(feature = "clap", arg(short = 'c', long = "csi"))]
    pub csi: bool,
    /// min_shift for CSI (implies -c) [14]; 0 writes a BAI, as samtools; at most 35.
    #[cfg_attr(feature = "clap", arg(short = 'm', long = "min-shift", value_name = "INT"))]
    pub min_shift: Option<u32>,
}

/// The largest `min_shift`: htslib's CSI has up to 9 levels below the root, and its bins must span
/// at most 2^62 bases (samtools 1.24 writes no index from 36 on, or a broken one: `-m 40` gives a
/// CSI with `min_shift` 62 and 9 levels).
pub const MAX_MIN_SHIFT: u32 = 35;

/// What an index job did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexReport {
    /// Bytes of the index file.
    pub bytes: u64,
    /// Files written (the index).
    pub outputs: Vec<PathBuf>,
    /// Warnings (samtools' text).
    pub warnings: Vec<String>,
}

/// The index's range tasks and what assembling their parts needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPlan {
    /// The BAM.
    pub input: PathBuf,
    /// The index file to write.
    pub output: PathBuf,
    /// BAI or CSI with its geometry (sized by the longest reference).
    pub format: IndexFormat,
    /// References in the header.
    pub n_ref: usize,
    /// The tasks, in file order.
    pub tasks: Vec<IndexTask>,
}

/// Summarising one byte range of the BAM for the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexTask {
    /// The range.
    pub slice: BamSlice,
    /// The index's format.
    pub format: IndexFormat,
}

/// One range's summary (runs of records of one reference and bin, partial linear index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPart {
    /// The task's range number.
    pub part: usize,
    /// The summary.
    pub summary: RangeSummary,
}

impl IndexJob {
    /// A BAI of `input` next to it.
    pub fn new(input: impl Into<PathBuf>) -> Self {
        Self {
            input: input.into(),
            output: None,
            csi: false,
            min_shift: None,
        }
    }

    /// Whether the index is a CSI: `csi`, or a `min_shift` given (samtools' `-m` implies `-c`),
    /// but for `min_shift` 0, which samtools indexes as a BAI.
    pub fn is_csi(&self) -> bool {
        (self.csi || self.min_shift.is_some()) && self.min_shift != Some(0)
    }

    /// A `min_shift` above [`MAX_MIN_SHIFT`] is an argument error.
    fn check_min_shift(&self) -> Result<()> {
        match self.min_shift {
            Some(m) if m > MAX_MIN_SHIFT => Err(Error::argument(format!(
                "-m {m}: min_shift must be at most {MAX_MIN_SHIFT} (a CSI's bins span at most \
                 2^62 bases)"
            ))),
            _ => Ok(()),
        }
    }

    /// The index file's name.
    pub fn target(&self) -> PathBuf {
        self.output.clone().unwrap_or_else(|| {
            let mut s = self.input.as_os_str().to_owned();
            s.push(if sortase_exec::input::is_cram(&self.input) {
                ".crai"
            } else if self.is_csi() {
                ".csi"
            } else {
                ".bai"
            });
            PathBuf::from(s)
        })
    }

    fn format(&self, longest_reference: u64) -> IndexFormat {
        if self.is_csi() {
            IndexFormat::csi_for(self.min_shift.unwrap_or(14), longest_reference)
        } else {
            IndexFormat::Bai
        }
    }

    /// Builds the index on all of `rt`'s threads and writes it.
    pub fn run(&self, rt: &Runtime) -> Result<IndexReport> {
        let name = self.input.display().to_string();
        self.check_min_shift()?;
        if sortase_exec::input::is_cram(&self.input) {
            return crai(&self.input, &self.target(), rt);
        }
        bam_ranges::check_readable(&self.input)?;
        let cancel = rt.cancel_flag().shared();
        let progress = rt.progress("index records", 0);
        let bytes = sortase_index::index_file_with_progress(
            &self.input,
            rt.threads(),
            |longest| self.format(longest),
            Some(&cancel),
            Some(&|n| progress.add(n)),
        )
        .map_err(|e| index_error(e, &name))?;
        progress.finish();
        write_index(&self.target(), &bytes, rt)
    }

    /// Range tasks: about `rt.threads() * 4` ranges, as [`IndexJob::run`] cuts them.
    pub fn plan(&self, rt: &Runtime) -> Result<IndexPlan> {
        self.plan_ranges(rt.threads() * RANGES_PER_THREAD)
    }

    /// Range tasks: about `n` ranges of equal compressed size (fewer for small files).
    pub fn plan_ranges(&self, n: usize) -> Result<IndexPlan> {
        self.check_min_shift()?;
        bam_ranges::check_readable(&self.input)?;
        let (header, slices) = bam_ranges::plan_slices(&self.input, n)
            .with_context(|| self.input.display().to_string())?;
        let format = self.format(sortase_index::longest_reference(&header));
        Ok(IndexPlan {
            input: self.input.clone(),
            output: self.target(),
            format,
            n_ref: header.references().len(),
            tasks: slices
                .into_iter()
                .map(|slice| IndexTask { slice, format })
                .collect(),
        })
    }
}

impl IndexTask {
    /// Summarises the range's records.
    pub fn run(&self, rt: &Runtime) -> Result<IndexPart> {
        let s = &self.slice;
        let cancel = rt.cancel_flag().shared();
        let summary =
            sortase_index::summarise_range(&s.input, &s.range, s.n_ref, self.format, Some(&cancel))
                .map_err(|e| index_error(e, &s.input.display().to_string()))?;
        Ok(IndexPart {
            part: s.part,
            summary,
        })
    }
}

impl IndexPlan {
    /// The index file's bytes from the parts of every task (any order).
    pub fn assemble(&self, parts: Vec<IndexPart>) -> Result<Vec<u8>> {
        let parts = bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let summaries: Vec<RangeSummary> = parts.into_iter().map(|p| p.summary).collect();
        let offset0 = self.tasks.first().map_or(0, |t| t.slice.range.start);
        sortase_index::assemble(&self.input, self.format, self.n_ref, offset0, &summaries)
            .map_err(|e| index_error(e, &self.input.display().to_string()))
    }

    /// Assembles the index from the parts of every task (any order) and writes it.
    pub fn finish(&self, parts: Vec<IndexPart>, rt: &Runtime) -> Result<IndexReport> {
        let bytes = self.assemble(parts)?;
        write_index(&self.output, &bytes, rt)
    }

    /// The plan to run instead when a task failed: the whole file as one task (see
    /// [`sortase_exec::bam_ranges`]).
    pub fn fallback(&self) -> IndexPlan {
        let slices: Vec<BamSlice> = self.tasks.iter().map(|t| t.slice.clone()).collect();
        IndexPlan {
            tasks: bam_ranges::whole(&slices)
                .into_iter()
                .map(|slice| IndexTask {
                    slice,
                    format: self.format,
                })
                .collect(),
            ..self.clone()
        }
    }
}

/// Writes the index under a temporary name and renames it into place.
/// The `.crai` of a CRAM file, built by htslib (`samtools index`'s code) under a temporary name
/// next to `target` and renamed into place.
fn crai(input: &Path, target: &Path, rt: &Runtime) -> Result<IndexReport> {
    // The temporary name is created here (O_EXCL, no symlink followed) and htslib rewrites that
    // file; dropping `pending` on an error removes it.
    let (pending, file) = OutputFile::create(target)?;
    drop(file);
    sortase_cram::build_index(input, Some(pending.written_path()), rt.threads())
        .with_context(|| input.display().to_string())?;
    rt.check_cancelled()?;
    pending.commit()?;
    Ok(IndexReport {
        bytes: std::fs::metadata(target).map_or(0, |m| m.len()),
        outputs: vec![target.to_path_buf()],
        warnings: Vec::new(),
    })
}

fn write_index(target: &Path, bytes: &[u8], rt: &Runtime) -> Result<IndexReport> {
    rt.check_cancelled()?;
    let (pending, mut f) = OutputFile::create(target)?;
    f.write_all(bytes)
        .with_context(|| format!("{}: cannot write", target.display()))?;
    f.sync_all().ok();
    pending.commit()?;
    Ok(IndexReport {
        bytes: bytes.len() as u64,
        outputs: vec![target.to_path_buf()],
        warnings: Vec::new(),
    })
}

/// The library's error for an index error of the BAM `name`.
fn index_error(e: IndexError, name: &str) -> Error {
    match e {
        IndexError::Cancelled => Error::cancelled(),
        IndexError::Bam(b) => Error::from(anyhow::Error::new(b).context(name.to_string())),
        push @ IndexError::Push { .. } => Error::new(ErrorKind::Format, format!("{name}: {push}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_data;

    #[test]
    fn index_tasks_in_any_order_give_run_s_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 3000);
        let rt = Runtime::with_threads(2).unwrap();
        for csi in [false, true] {
            let job = IndexJob {
                csi,
                ..IndexJob::new(&bam)
            };
            let report = job.run(&rt).unwrap();
            let expected = std::fs::read(&report.outputs[0]).unwrap();
            let plan = IndexJob {
                output: Some(dir.path().join("tasks.idx")),
                ..job.clone()
            }
            .plan_ranges(8)
            .unwrap();
            assert!(
                plan.tasks.len() > 1,
                "the test BAM should give several ranges"
            );
            let plan: IndexPlan = test_data::through_json(&plan);
            let parts: Vec<IndexPart> = test_data::run_last_first(&plan.tasks, |t| {
                test_data::through_json(&t.run(&rt).unwrap())
            });
            let done = plan.finish(parts, &rt).unwrap();
            assert_eq!(
                std::fs::read(&done.outputs[0]).unwrap(),
                expected,
                "csi {csi}"
            );
            let fallback = plan.fallback();
            let whole = fallback.tasks[0].run(&rt).unwrap();
            assert_eq!(fallback.assemble(vec![whole]).unwrap(), expected);
        }
    }

    #[test]
    fn missing_input_is_an_input_error() {
        let rt = Runtime::with_threads(1).unwrap();
        let e = IndexJob::new("/nonexistent/in.bam").run(&rt).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Input);
        assert!(e
            .to_string()
            .starts_with("/nonexistent/in.bam: cannot open"));
    }
}
