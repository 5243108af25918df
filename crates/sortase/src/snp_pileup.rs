//! [`SnpPileupJob`]: FACETS' snp-pileup (same options, same CSV) on all cores. crates/ops cuts the
//! genome into batches of about equal compressed size, piles each up at the VCF's sites, and replays
//! snp-pileup's loop over the results in order; this module checks the files and writes the output.
//!
//! As range tasks ([`SnpPileupPlan`]): each task piles up a run of consecutive batches (a region of
//! the genome) and returns its counts; `finish` replays snp-pileup's loop over all of them and writes
//! the CSV. The loop carries a cursor from one site to the next (a site before the last consumed
//! position is skipped), so the CSV of a region depends on the regions before it: tasks return counts,
//! not CSV text, and the lines are written once, in order, from the whole VCF. A task lists the byte
//! spans of the BAMs it reads ([`SnpPileupTask::input_spans`]), so that a driver on object storage
//! fetches those alone; the VCF is read by the planner and `finish` only.
//!
//! ```no_run
//! use sortase::{Runtime, SnpPileupJob};
//! let job = SnpPileupJob::new("sites.vcf.gz", "out.csv", vec!["tumor.bam".into(), "normal.bam".into()]);
//! let report = job.run(&Runtime::with_threads(4)?)?;
//! println!("{} SNP lines", report.snp_lines);
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::query::{find_index, IndexedBam};
use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
use sortase_exec::bam_ranges::InputSpan;
use sortase_exec::error::{Error, ErrorKind, Result};
use sortase_exec::files::OutputFile;
use sortase_exec::indexed_bams::IndexedBams;
use sortase_exec::runtime::Runtime;
use sortase_ops::pileup::driver::{BatchResult, DriverSummary};
use sortase_ops::pileup::engine::PileupOptions;
use sortase_ops::pileup::plan::Batch;
use sortase_ops::pileup::{self, PileupError, SiteList, SnpPileupOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// snp-pileup as a job: the VCF, the output CSV and the BAMs, with FACETS' options.
///
/// With the `clap` feature it is also FACETS snp-pileup's flags (`clap::Args`, flattened by
/// `sortase snp-pileup`): a field's `arg(...)` is its flag and `--help` text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SnpPileupJob {
    /// VCF (plain or bgzipped) with the SNP positions.
    pub vcf: PathBuf,
    /// Output CSV (never overwritten; ".gz" is appended with -g if missing).
    pub output: PathBuf,
    /// Coordinate-sorted, indexed BAMs, or coordinate-sorted CRAMs.
    #[cfg_attr(feature = "clap", arg(required = true))]
    pub bams: Vec<PathBuf>,
    /// Reference FASTA for CRAM inputs [REF_PATH/REF_CACHE, @SQ UR].
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long = "reference", value_name = "FILE"))]
    pub reference: Option<PathBuf>,
    /// Do not discard anomalous read pairs.
    #[cfg_attr(feature = "clap", arg(short = 'A', long = "count-orphans"))]
    pub count_orphans: bool,
    /// Compress the output with BGZF (".gz" is appended to the name if missing).
    #[cfg_attr(feature = "clap", arg(short = 'g', long = "gzip"))]
    pub gzip: bool,
    /// Disable read-pair overlap detection.
    #[cfg_attr(feature = "clap", arg(short = 'x', long = "ignore-overlaps"))]
    pub ignore_overlaps: bool,
    /// Minimum base quality.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'Q', long = "min-base-quality", value_name = "QUALITY",
            default_value_t = PileupOptions::default().min_base_quality)
    )]
    pub min_base_quality: i32,
    /// Minimum mapping quality (MAPQ 0 is always skipped).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'q', long = "min-map-quality", value_name = "QUALITY",
            default_value_t = PileupOptions::default().min_map_quality)
    )]
    pub min_map_quality: i32,
    /// Comma-separated minimum read counts per file for a position to be written.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'r', long = "min-read-counts", value_name = "READS", value_delimiter = ',')
    )]
    pub min_read_counts: Vec<i32>,
    /// Maximum depth per file (htslib pileup maxcnt).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'd', long = "max-depth", value_name = "DEPTH",
            default_value_t = PileupOptions::default().max_depth)
    )]
    pub max_depth: i32,
    /// Every MULTIPLE positions, if there is no SNP, write a record with the total count there.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'P', long = "pseudo-snps", value_name = "MULTIPLE", default_value_t = 0)
    )]
    pub pseudo_snps: i64,
    /// Compressed bytes per batch (for tests; default from input size and threads).
    #[cfg_attr(feature = "clap", arg(long = "batch-bytes", hide = true))]
    pub batch_bytes: Option<u64>,
}

/// What snp-pileup did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnpPileupReport {
    /// VCF data lines read.
    pub vcf_lines: u64,
    /// Biallelic SNVs among them.
    pub snvs: u64,
    /// SNP lines written.
    pub snp_lines: u64,
    /// Pseudo-SNP lines written.
    pub pseudo_lines: u64,
    /// Batches piled up.
    pub batches: usize,
    /// Threads.
    pub threads: usize,
    /// Files written.
    pub outputs: Vec<PathBuf>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// snp-pileup's range tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnpPileupPlan {
    /// The job.
    pub job: SnpPileupJob,
    /// The tasks, in genome (BAM) order.
    pub tasks: Vec<SnpPileupTask>,
}

/// Piling up a run of consecutive batches (one region of the genome) in every BAM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnpPileupTask {
    /// The task's number in genome order.
    pub part: usize,
    /// The BAMs.
    pub bams: Vec<PathBuf>,
    /// Read and base filters.
    pub pileup: PileupOptions,
    /// `-P`.
    pub pseudo_snps: i64,
    /// The batches (regions and the site positions in them).
    pub batches: Vec<Batch>,
    /// What the task reads of the BAMs, from their indexes when planned
    /// ([`SnpPileupTask::input_spans`]).
    #[serde(default)]
    pub input_spans: Vec<InputSpan>,
}

/// The counts of one task's batches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnpPileupPart {
    /// The task's number.
    pub part: usize,
    /// Per batch: covered positions and counts at sites and pseudo-SNP grid points.
    pub results: Vec<BatchResult>,
}

impl SnpPileupJob {
    /// snp-pileup of `bams` at the SNVs of `vcf` into `output`, with FACETS' default options.
    pub fn new(vcf: impl Into<PathBuf>, output: impl Into<PathBuf>, bams: Vec<PathBuf>) -> Self {
        let pileup = PileupOptions::default();
        Self {
            vcf: vcf.into(),
            output: output.into(),
            bams,
            count_orphans: pileup.count_orphans,
            gzip: false,
            ignore_overlaps: pileup.ignore_overlaps,
            min_base_quality: pileup.min_base_quality,
            min_map_quality: pileup.min_map_quality,
            min_read_counts: Vec::new(),
            max_depth: pileup.max_depth,
            pseudo_snps: 0,
            batch_bytes: None,
            reference: None,
        }
    }

    /// The file written: `output`, with `.gz` appended under `gzip` if missing.
    pub fn target(&self) -> PathBuf {
        let mut target = self.output.clone();
        if self.gzip && !target.as_os_str().to_string_lossy().ends_with(".gz") {
            let mut s = target.into_os_string();
            s.push(".gz");
            target = PathBuf::from(s);
        }
        target
    }

    fn options(&self, rt: &Runtime) -> SnpPileupOptions {
        SnpPileupOptions {
            pileup: PileupOptions {
                min_map_quality: self.min_map_quality,
                min_base_quality: self.min_base_quality,
                max_depth: self.max_depth,
                count_orphans: self.count_orphans,
                ignore_overlaps: self.ignore_overlaps,
            },
            min_read_counts: self.min_read_counts.clone(),
            pseudo_snps: self.pseudo_snps,
            threads: rt.threads(),
            batch_bytes: self.batch_bytes,
            cancel: Some(rt.cancel_flag().shared()),
        }
    }

    /// Checks the options and files before any work: the output must not exist, the VCF must.
    fn check(&self) -> Result<PathBuf> {
        let target = self.target();
        if std::fs::symlink_metadata(&target).is_ok() {
            return Err(Error::new(
                ErrorKind::Output,
                format!(
                    "{}: output file already exists; snp-pileup does not overwrite it",
                    target.display()
                ),
            ));
        }
        if let Err(e) = std::fs::metadata(&self.vcf) {
            return Err(Error::new(
                ErrorKind::Input,
                format!("{}: {e}", self.vcf.display()),
            ));
        }
        if self.pseudo_snps < 0 {
            return Err(Error::argument(format!(
                "-P {} is negative; use 0 (none) or a positive multiple",
                self.pseudo_snps
            )));
        }
        Ok(target)
    }

    /// Runs on all of `rt`'s threads.
    pub fn run(&self, rt: &Runtime) -> Result<SnpPileupReport> {
        let target = self.check()?;
        let decoded = IndexedBams::decode(&self.bams, self.reference.as_deref(), rt)?;
        decoded.run(|bams| self.pile_up(bams, &target, rt))
    }

    /// [`SnpPileupJob::run`] on `bams` (BAMs only).
    fn pile_up(&self, bams: &[PathBuf], target: &Path, rt: &Runtime) -> Result<SnpPileupReport> {
        let inputs = pileup::open_bams(bams).map_err(|e| pileup_error(e, None, rt))?;
        let opts = self.options(rt);
        let total: u64 = bams
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let progress = rt.progress("snp-pileup", total);
        let context = format!("snp-pileup {}", self.vcf.display());
        let summary = write_output(target, self.gzip, rt, |out| {
            pileup::snp_pileup(&self.vcf, inputs, &opts, out, &|n| progress.add(n))
                .map_err(|e| pileup_error(e, Some(&context), rt))
        })?;
        progress.finish();
        Ok(SnpPileupReport {
            vcf_lines: summary.vcf_lines,
            snvs: summary.snvs,
            snp_lines: summary.lines.snp_lines,
            pseudo_lines: summary.lines.pseudo_lines,
            batches: summary.batches,
            threads: rt.threads(),
            outputs: vec![target.to_path_buf()],
            warnings: Vec::new(),
        })
    }

    /// Range tasks: the batches [`SnpPileupJob::run`] would pile up on `rt`, grouped into about
    /// `rt.threads() * 4` tasks.
    pub fn plan(&self, rt: &Runtime) -> Result<SnpPileupPlan> {
        self.plan_tasks(rt, rt.threads() * 4)
    }

    /// Range tasks: the batches grouped into about `n` tasks of equal compressed size.
    pub fn plan_tasks(&self, rt: &Runtime, n: usize) -> Result<SnpPileupPlan> {
        self.check()?;
        if let Some(cram) = self.bams.iter().find(|p| sortase_exec::input::is_cram(p)) {
            return Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{}: snp-pileup tasks read indexed BAMs by byte range, not CRAM; run the job \
                     whole (it decodes CRAM first) or convert it (sortase view -b --write-index)",
                    cram.display()
                ),
            ));
        }
        let inputs = pileup::open_bams(&self.bams).map_err(|e| pileup_error(e, None, rt))?;
        let opts = self.options(rt);
        let context = format!("snp-pileup {}", self.vcf.display());
        let (batches, total) = SiteList::read(&self.vcf, &inputs)
            .and_then(|sites| pileup::plan_run(&inputs, &sites, &opts))
            .map_err(|e| pileup_error(e, Some(&context), rt))?;
        // Consecutive batches, cut when a group reaches its share of the bytes or of the batches
        // (the bytes come from the indexes' linear offsets and may be coarse for small files).
        let n = n.max(1);
        let (bytes_each, batches_each) =
            (total.div_ceil(n as u64).max(1), batches.len().div_ceil(n));
        let mut groups: Vec<Vec<Batch>> = vec![Vec::new()];
        let mut bytes = 0;
        for b in batches {
            let current = groups.last().expect("one group at least");
            if bytes >= bytes_each || current.len() >= batches_each {
                groups.push(Vec::new());
                bytes = 0;
            }
            bytes += b.bytes;
            groups.last_mut().expect("one group at least").push(b);
        }
        let spans = BamSpans::open(&self.bams).map_err(|e| pileup_error(e, None, rt))?;
        let tasks = groups
            .into_iter()
            .enumerate()
            .map(|(part, batches)| {
                let input_spans = spans
                    .of(&batches)
                    .map_err(|e| pileup_error(e, Some("snp-pileup"), rt))?;
                Ok(SnpPileupTask {
                    part,
                    bams: self.bams.clone(),
                    pileup: opts.pileup.clone(),
                    pseudo_snps: self.pseudo_snps,
                    batches,
                    input_spans,
                })
            })
            .collect::<Result<_>>()?;
        Ok(SnpPileupPlan {
            job: self.clone(),
            tasks,
        })
    }
}

/// The BAMs' indexes and header ends, for the byte spans of tasks.
struct BamSpans {
    bams: Vec<(PathBuf, PathBuf, IndexedBam, u64)>,
}

impl BamSpans {
    fn open(paths: &[PathBuf]) -> std::result::Result<Self, PileupError> {
        let mut bams = Vec::with_capacity(paths.len());
        for path in paths {
            let in_bam = |e| PileupError::Bam {
                path: path.clone(),
                source: e,
            };
            let index = find_index(path)
                .ok_or_else(|| PileupError::Input(format!("{}: no index", path.display())))?;
            let mut bam = IndexedBam::open(path).map_err(in_bam)?;
            let header_end = bam.header_end().map_err(in_bam)?;
            bams.push((path.clone(), index, bam, header_end));
        }
        Ok(Self { bams })
    }

    /// Per BAM: its header, the chunks of the regions `batches` read first (overlapping chunks
    /// merged) and its index, whole.
    fn of(&self, batches: &[Batch]) -> std::result::Result<Vec<InputSpan>, PileupError> {
        let mut out = Vec::new();
        for (path, index, bam, header_end) in &self.bams {
            let mut chunks = vec![(0, *header_end)];
            for batch in batches {
                let (tid, beg, end) = pileup::first_read_region(batch);
                chunks.extend(
                    bam.chunk_spans(tid, beg, end)
                        .map_err(|e| PileupError::Bam {
                            path: path.clone(),
                            source: e,
                        })?,
                );
            }
            chunks.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(chunks.len());
            for (start, end) in chunks {
                match merged.last_mut() {
                    Some(last) if start <= last.1 => last.1 = last.1.max(end),
                    _ => merged.push((start, end)),
                }
            }
            out.extend(merged.into_iter().map(|(start, end)| InputSpan {
                path: path.clone(),
                start,
                end: Some(end),
            }));
            out.push(InputSpan {
                path: index.clone(),
                start: 0,
                end: None,
            });
        }
        Ok(out)
    }
}

impl SnpPileupTask {
    /// The byte spans the task reads, computed from the BAMs' indexes when it was planned (empty
    /// for a task planned without them), for drivers that fetch remote inputs by byte range: per
    /// BAM, its header (to the block it ends in), the index chunks of the region each batch reads
    /// first (a span's `end` is the block where reading stops, at the latest: the block of the
    /// first record past the region), and its index file, whole (`end` `None`). A batch whose
    /// warm-up or probe must read further ([`pileup::first_read_region`]) reads outside them.
    pub fn input_spans(&self) -> &[InputSpan] {
        &self.input_spans
    }

    /// Piles up the task's batches (one after the other, on the calling thread).
    pub fn run(&self, rt: &Runtime) -> Result<SnpPileupPart> {
        let opts = SnpPileupOptions {
            pileup: self.pileup.clone(),
            min_read_counts: Vec::new(),
            pseudo_snps: self.pseudo_snps,
            threads: 1,
            batch_bytes: None,
            cancel: Some(rt.cancel_flag().shared()),
        };
        let results = pileup::pile_batches(&self.bams, &self.batches, &opts)
            .map_err(|e| pileup_error(e, Some("snp-pileup"), rt))?;
        Ok(SnpPileupPart {
            part: self.part,
            results,
        })
    }
}

impl SnpPileupPlan {
    /// Writes the CSV from the parts of every task (any order): snp-pileup's loop over the VCF's
    /// sites and the tasks' counts.
    pub fn finish(&self, parts: Vec<SnpPileupPart>, rt: &Runtime) -> Result<SnpPileupReport> {
        let job = &self.job;
        let target = job.check()?;
        let parts = sortase_exec::bam_ranges::in_order(parts, self.tasks.len(), |p| p.part)?;
        let inputs = pileup::open_bams(&job.bams).map_err(|e| pileup_error(e, None, rt))?;
        let context = format!("snp-pileup {}", job.vcf.display());
        let sites =
            SiteList::read(&job.vcf, &inputs).map_err(|e| pileup_error(e, Some(&context), rt))?;
        let opts = job.options(rt);
        let batches = parts.iter().map(|p| p.results.len()).sum();
        let results = parts.into_iter().flat_map(|p| p.results).map(Ok);
        let lines: DriverSummary = write_output(&target, job.gzip, rt, |out| {
            pileup::write_csv(&sites, job.bams.len(), &opts, results, out, &|_| {})
                .map_err(|e| pileup_error(e, Some(&context), rt))
        })?;
        Ok(SnpPileupReport {
            vcf_lines: sites.vcf_lines(),
            snvs: sites.snvs(),
            snp_lines: lines.snp_lines,
            pseudo_lines: lines.pseudo_lines,
            batches,
            threads: rt.threads(),
            outputs: vec![target],
            warnings: Vec::new(),
        })
    }
}

/// Writes `target` (BGZF with `gzip`) under a temporary name through `write`, and renames it into
/// place unless the target appeared meanwhile (snp-pileup never overwrites).
fn write_output<T>(
    target: &std::path::Path,
    gzip: bool,
    rt: &Runtime,
    write: impl FnOnce(&mut dyn Write) -> Result<T>,
) -> Result<T> {
    let (output, file) = OutputFile::create(target)?;
    let cannot_write = || format!("{}: cannot write", target.display());
    let result = if gzip {
        let mut w = ParallelWriter::new(file, WriterOptions::new(1, CompressionLevel::default()));
        let r = write(&mut w)?;
        w.finish().with_context(cannot_write)?;
        r
    } else {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let r = write(&mut w)?;
        w.flush().with_context(cannot_write)?;
        r
    };
    rt.check_cancelled()?;
    if std::fs::symlink_metadata(target).is_ok() {
        return Err(Error::new(
            ErrorKind::Output,
            format!(
                "{}: output file appeared while running; not overwriting it",
                target.display()
            ),
        ));
    }
    output.commit()?;
    Ok(result)
}

/// The library's error for a pileup error, with `context` in front.
fn pileup_error(e: PileupError, context: Option<&str>, rt: &Runtime) -> Error {
    let kind = match &e {
        _ if rt.cancel_flag().is_cancelled() => return Error::cancelled(),
        PileupError::Cancelled => return Error::cancelled(),
        PileupError::Input(_) => ErrorKind::Input,
        PileupError::Bam { .. } | PileupError::Unsorted { .. } | PileupError::BadCigar(_) => {
            ErrorKind::Format
        }
        PileupError::InFile { .. } => ErrorKind::Format,
        PileupError::Internal(_) => ErrorKind::Internal,
        PileupError::Io(_) => ErrorKind::Output,
    };
    // The whole chain, as the CLI has always printed it (anyhow's "{:#}").
    let chain = anyhow::Error::new(e);
    let message = match context {
        Some(c) => format!("{:#}", chain.context(c.to_string())),
        None => format!("{chain:#}"),
    };
    Error::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_data;
    use std::fmt::Write as _;

    #[test]
    fn snp_pileup_tasks_in_any_order_give_run_s_csv() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 3000);
        let rt = Runtime::with_threads(2).unwrap();
        crate::index::IndexJob::new(&bam).run(&rt).unwrap();
        let vcf = dir.path().join("sites.vcf");
        let mut text =
            String::from("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n");
        for (name, len) in test_data::REFERENCES {
            for pos in (1000..len).step_by(997) {
                let _ = writeln!(text, "{name}\t{pos}\t.\tA\tC\t.\t.\t.");
            }
        }
        std::fs::write(&vcf, text).unwrap();
        let job = SnpPileupJob {
            pseudo_snps: 500,
            batch_bytes: Some(20_000),
            ..SnpPileupJob::new(&vcf, dir.path().join("run.csv"), vec![bam.clone(), bam])
        };
        let report = job.run(&rt).unwrap();
        let expected = std::fs::read(&report.outputs[0]).unwrap();
        assert!(
            report.snp_lines > 10 && report.pseudo_lines > 10,
            "{report:?}"
        );
        let plan = SnpPileupJob {
            output: dir.path().join("tasks.csv"),
            ..job.clone()
        }
        .plan_tasks(&rt, 6)
        .unwrap();
        assert!(plan.tasks.len() > 2, "{} tasks", plan.tasks.len());
        let plan: SnpPileupPlan = test_data::through_json(&plan);
        let parts: Vec<SnpPileupPart> = test_data::run_last_first(&plan.tasks, |t| {
            test_data::through_json(&t.run(&rt).unwrap())
        });
        let done = plan.finish(parts, &rt).unwrap();
        assert_eq!(std::fs::read(&done.outputs[0]).unwrap(), expected);
        assert_eq!(
            (done.snp_lines, done.pseudo_lines, done.batches),
            (report.snp_lines, report.pseudo_lines, report.batches)
        );
    }

    /// A copy of the BAM `data` holding only the spans (through the block where reading stops and
    /// the one after it, for a record that spans them), zeros elsewhere.
    fn sparse_copy(data: &[u8], spans: &[&InputSpan]) -> Vec<u8> {
        // A BGZF block's total size (SAM spec 4.1: BSIZE + 1, at bytes 16-17 of its header).
        let block_len =
            |at: usize| usize::from(u16::from_le_bytes([data[at + 16], data[at + 17]])) + 1;
        let mut sparse = vec![0u8; data.len()];
        for span in spans {
            let mut end = span.end.map_or(data.len(), |e| e as usize);
            for _ in 0..2 {
                if end < data.len() {
                    end += block_len(end);
                }
            }
            let range = span.start as usize..end.min(data.len());
            sparse[range.clone()].copy_from_slice(&data[range]);
        }
        sparse
    }

    #[test]
    fn a_task_runs_on_its_input_spans_alone() {
        let dir = tempfile::tempdir().unwrap();
        let bam = test_data::sorted_bam(dir.path(), 60_000);
        let rt = Runtime::with_threads(1).unwrap();
        crate::index::IndexJob::new(&bam).run(&rt).unwrap();
        let vcf = dir.path().join("sites.vcf");
        let mut text =
            String::from("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n");
        for (name, len) in test_data::REFERENCES {
            for pos in (1000..len).step_by(1499) {
                let _ = writeln!(text, "{name}\t{pos}\t.\tA\tC\t.\t.\t.");
            }
        }
        std::fs::write(&vcf, text).unwrap();
        let job = SnpPileupJob {
            pseudo_snps: 500,
            ..SnpPileupJob::new(
                &vcf,
                dir.path().join("out.csv"),
                vec![bam.clone(), bam.clone()],
            )
        };
        let plan = job.plan_tasks(&rt, 6).unwrap();
        assert!(plan.tasks.len() > 2, "{} tasks", plan.tasks.len());
        let data = std::fs::read(&bam).unwrap();
        let index = find_index(&bam).unwrap();
        for task in &plan.tasks {
            let spans = task.input_spans();
            assert!(spans.iter().any(|s| s.path == index && s.end.is_none()));
            let copy_spans = |spans: &[&InputSpan]| sparse_copy(&data, spans);
            let of_bam: Vec<&InputSpan> = spans.iter().filter(|s| s.path == bam).collect();
            let sparse = copy_spans(&of_bam);
            let kept = sparse
                .iter()
                .zip(&data)
                .filter(|(a, b)| a == b && **b != 0)
                .count();
            let nonzero = data.iter().filter(|b| **b != 0).count();
            assert!(kept < nonzero, "task {} reads part of the BAM", task.part);
            let copy = tempfile::tempdir().unwrap();
            let sparse_bam = copy.path().join("in.bam");
            std::fs::copy(&index, copy.path().join(index.file_name().unwrap())).unwrap();
            let on = |sparse: &[u8]| {
                std::fs::write(&sparse_bam, sparse).unwrap();
                SnpPileupTask {
                    bams: vec![sparse_bam.clone(), sparse_bam.clone()],
                    ..task.clone()
                }
                .run(&rt)
            };
            assert_eq!(on(&sparse).unwrap(), task.run(&rt).unwrap());
            // Reading a hole is an error (a zeroed block is no BGZF block), not wrong counts: a
            // driver re-runs such a task on whole files.
            let header = InputSpan {
                path: bam.clone(),
                start: 0,
                end: Some(0),
            };
            assert!(on(&copy_spans(&[&header])).is_err(), "task {}", task.part);
        }
    }

    #[test]
    fn an_existing_output_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.csv");
        std::fs::write(&out, "keep").unwrap();
        let rt = Runtime::with_threads(1).unwrap();
        let e = SnpPileupJob::new("x.vcf", &out, vec![])
            .run(&rt)
            .unwrap_err();
        assert!(e.to_string().contains("already exists"));
        assert_eq!(std::fs::read(&out).unwrap(), b"keep");
    }
}
