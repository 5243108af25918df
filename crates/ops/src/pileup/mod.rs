//! `snp-pileup`: reference/alternate/error/deletion counts of several BAMs at the SNVs of a VCF, with
//! the output of FACETS' `snp-pileup` (htslib 1.16 pileup semantics), computed on all cores.
//!
//! Shape (issue 7, after quickBAM): the genome is cut into batches of about equal compressed size
//! ([`plan`]); each batch reads the records of every BAM in its region through the index and piles them
//! up at its sites and pseudo-SNP grid points only ([`engine`]); the batches come back in order and one
//! thread replays snp-pileup's loop over them ([`driver`]), which is cheap and writes the lines.

pub mod driver;
pub mod engine;
mod overlap;
pub mod plan;
pub mod vcf;

use driver::{BatchResult, Driver, DriverOptions, DriverSite, DriverSummary};
use engine::{pileup_window, Counts, PileupOptions, Window};
use plan::{plan_batches, Batch};
use sortase_bam::query::{find_index, IndexedBam, Region};
use sortase_bam::{BamError, Header};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An error of `snp-pileup`.
#[derive(Debug, thiserror::Error)]
pub enum PileupError {
    /// Bad or unreadable input, with the file named in the message.
    #[error("{0}")]
    Input(String),
    /// A BAM could not be read.
    #[error("{path}: {source}")]
    Bam {
        /// The BAM.
        path: PathBuf,
        /// What went wrong.
        source: BamError,
    },
    /// Records out of coordinate order.
    #[error("not sorted by coordinate: read {name} at position {pos} comes after a later one; sort it with `samtools sort` and index it")]
    Unsorted {
        /// Read name.
        name: String,
        /// 1-based position.
        pos: i64,
    },
    /// htslib's overlap detection rejects the CIGAR.
    #[error("{0}: CIGAR runs past the sequence")]
    BadCigar(String),
    /// An error in one BAM.
    #[error("{path}: {source}")]
    InFile {
        /// The BAM.
        path: PathBuf,
        /// The error.
        source: Box<PileupError>,
    },
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
    /// The caller's cancellation flag was set.
    #[error("interrupted")]
    Cancelled,
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<BamError> for PileupError {
    fn from(e: BamError) -> Self {
        PileupError::Bam {
            path: PathBuf::new(),
            source: e,
        }
    }
}

/// Options of `snp-pileup`.
#[derive(Debug, Clone)]
pub struct SnpPileupOptions {
    /// Read/base filters and depth limit.
    pub pileup: PileupOptions,
    /// `-r`: minimum depth per file (missing entries are 0).
    pub min_read_counts: Vec<i32>,
    /// `-P`: pseudo-SNP every this many positions (0: none).
    pub pseudo_snps: i64,
    /// Worker threads.
    pub threads: usize,
    /// Compressed bytes per batch (`None`: from the input size and thread count).
    pub batch_bytes: Option<u64>,
    /// Stops the run between batches once set.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// What a run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    /// Lines written, by kind.
    pub lines: DriverSummary,
    /// VCF data lines read.
    pub vcf_lines: u64,
    /// Biallelic SNVs among them.
    pub snvs: u64,
    /// Batches piled up.
    pub batches: usize,
    /// Compressed bytes of the BAMs' placed records.
    pub bytes: u64,
}

/// Bases read before a batch's region so its pileup starts in htslib's state (checked, see
/// [`engine::FilePileup::exact`]; a batch that fails the check is redone from its contig's start).
const WARM_UP: i64 = 10_000;

/// The first window a probe batch looks through for a covered position (it grows fourfold).
const PROBE_STEP: i64 = 1 << 16;

/// The region `[beg, end)` of reference `batch.tid` that piling up `batch` reads first in every
/// BAM: its region after a warm-up ([`WARM_UP`] bases), a probe's first window. A batch reads more
/// only when the warm-up does not reach an exact pileup state or a probe finds nothing covered in
/// its first window (it then reads further back, or on).
pub fn first_read_region(batch: &Batch) -> (usize, i64, i64) {
    let beg = (batch.beg - WARM_UP).max(0);
    let end = if batch.probe {
        batch.beg.saturating_add(PROBE_STEP)
    } else {
        batch.end
    };
    (batch.tid, beg, end)
}

/// Most pseudo-SNP grid points in one batch.
const MAX_GRID_POINTS: i64 = 100_000;

/// Opened, checked inputs.
pub struct Inputs {
    bams: Vec<PathBuf>,
    handles: Vec<IndexedBam>,
    header: Header,
}

fn bam_error(path: &Path, e: BamError) -> PileupError {
    PileupError::Bam {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Opens the BAMs: each must exist, be indexed, not be declared unsorted, and have the first BAM's
/// reference names (snp-pileup matches references across files by index).
pub fn open_bams(bams: &[PathBuf]) -> Result<Inputs, PileupError> {
    let mut handles = Vec::new();
    let mut first: Option<Header> = None;
    for path in bams {
        if let Err(e) = std::fs::metadata(path) {
            return Err(PileupError::Input(format!("{}: {e}", path.display())));
        }
        if find_index(path).is_none() {
            return Err(PileupError::Input(format!(
                "{}: no index (.bai or .csi) found; sort it with `samtools sort` and index it with `samtools index`",
                path.display()
            )));
        }
        let mut bam = IndexedBam::open(path).map_err(|e| bam_error(path, e))?;
        let header = bam.read_header().map_err(|e| bam_error(path, e))?;
        if let Some(order) = sort_order(&header) {
            if order != "coordinate" && order != "unknown" {
                return Err(PileupError::Input(format!(
                    "{}: not sorted by coordinate (@HD SO:{order}); sort it with `samtools sort` and index it",
                    path.display()
                )));
            }
        }
        if header.references().is_empty() {
            return Err(PileupError::Input(format!(
                "{}: the header has no reference sequences",
                path.display()
            )));
        }
        match &first {
            None => first = Some(header),
            Some(h) => {
                let names = |h: &Header| {
                    h.references()
                        .iter()
                        .map(|r| r.name.clone())
                        .collect::<Vec<_>>()
                };
                if names(h) != names(&header) {
                    return Err(PileupError::Input(format!(
                        "{}: reference sequences differ from those of {} (snp-pileup matches them by index)",
                        path.display(),
                        bams[0].display()
                    )));
                }
            }
        }
        handles.push(bam);
    }
    let header = first.ok_or_else(|| PileupError::Input("no BAM given".into()))?;
    Ok(Inputs {
        bams: bams.to_vec(),
        handles,
        header,
    })
}

fn sort_order(h: &Header) -> Option<&str> {
    let hd = h.text().lines().find(|l| l.starts_with("@HD\t"))?;
    hd.split('\t').find_map(|f| f.strip_prefix("SO:"))
}

/// The VCF's SNVs placed on the BAMs' references: what both the planner and the output loop need.
pub struct SiteList {
    sites: vcf::Sites,
    names: Vec<String>,
    contig_tid: Vec<i64>,
}

impl SiteList {
    /// Reads the SNVs of `vcf` and matches its contigs to the references of `inputs` (by name,
    /// ignoring a `chr` prefix, as snp-pileup does).
    pub fn read(vcf: &Path, inputs: &Inputs) -> Result<Self, PileupError> {
        let sites = vcf::read_sites(vcf)?;
        let names: Vec<String> = inputs
            .header
            .references()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.name).into_owned())
            .collect();
        let name_bytes: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
        let contig_tid: Vec<i64> = sites
            .contigs
            .iter()
            .map(|c| vcf::vcf_contig_to_bam(c, &name_bytes).map_or(-1, |t| t as i64))
            .collect();
        if !sites.contigs.is_empty() && contig_tid.iter().all(|&t| t < 0) {
            return Err(PileupError::Input(format!(
                "{}: no VCF contig ({}) matches a reference of {} ({}), even ignoring a `chr` prefix",
                vcf.display(),
                abbreviate(&sites.contigs),
                inputs.bams[0].display(),
                abbreviate(&names)
            )));
        }
        Ok(Self {
            sites,
            names,
            contig_tid,
        })
    }

    /// VCF data lines read (all variants).
    pub fn vcf_lines(&self) -> u64 {
        self.sites.lines
    }

    /// Biallelic SNVs among them.
    pub fn snvs(&self) -> u64 {
        self.sites.sites.len() as u64
    }

    fn driver_sites(&self) -> impl Iterator<Item = DriverSite> + '_ {
        self.sites.sites.iter().map(|s| DriverSite {
            tid: self.contig_tid[s.contig as usize],
            pos: i64::from(s.pos),
            reference: s.reference,
            alternate: s.alternate,
        })
    }

    /// Per reference, the sorted distinct positions the output loop can reach: only sites at or after
    /// every earlier site (in BAM order).
    fn wanted(&self) -> Vec<Vec<i64>> {
        let mut wanted: Vec<Vec<i64>> = vec![Vec::new(); self.names.len()];
        let mut high = (i64::MIN, i64::MIN);
        for s in self.driver_sites() {
            let key = (s.tid, s.pos);
            if key >= high {
                high = key;
                if s.tid >= 0 {
                    let v = &mut wanted[s.tid as usize];
                    if v.last() != Some(&s.pos) {
                        v.push(s.pos);
                    }
                }
            }
        }
        wanted
    }
}

/// The batches of a run, in BAM order, and the compressed bytes of the BAMs' placed records.
pub fn plan_run(
    inputs: &Inputs,
    sites: &SiteList,
    opts: &SnpPileupOptions,
) -> Result<(Vec<Batch>, u64), PileupError> {
    let total: u64 = (0..sites.names.len())
        .map(|t| {
            inputs
                .handles
                .iter()
                .filter_map(|b| b.compressed_span(t).ok().flatten())
                .map(|(s, e)| e - s)
                .sum::<u64>()
        })
        .sum();
    let threads = opts.threads.max(1);
    let target = opts
        .batch_bytes
        .unwrap_or_else(|| (total / (threads as u64 * 16)).clamp(1 << 20, 16 << 20));
    // With a fine pseudo-SNP grid, a batch's counts (72 bytes per grid point and file) bound its span.
    let max_span = (opts.pseudo_snps > 0).then(|| opts.pseudo_snps.saturating_mul(MAX_GRID_POINTS));
    let batches = plan_batches(&inputs.handles, &sites.wanted(), target, max_span)?;
    Ok((batches, total))
}

/// Piles up batches one after the other in `bams` (a range task; [`snp_pileup`] spreads batches over
/// threads instead). Stops with [`PileupError::Cancelled`] between batches once `cancel` is set.
pub fn pile_batches(
    bams: &[PathBuf],
    batches: &[Batch],
    opts: &SnpPileupOptions,
) -> Result<Vec<BatchResult>, PileupError> {
    let mut worker = Worker::new(bams.to_vec(), opts);
    batches.iter().map(|b| worker.run(b.clone())).collect()
}

/// Writes the CSV (header line included) to `out` from the batch results of a whole run in BAM
/// order: snp-pileup's loop over the VCF's sites. `progress` receives each result's compressed bytes.
pub fn write_csv(
    sites: &SiteList,
    n_files: usize,
    opts: &SnpPileupOptions,
    results: impl Iterator<Item = Result<BatchResult, PileupError>>,
    out: &mut dyn Write,
    progress: &dyn Fn(u64),
) -> Result<DriverSummary, PileupError> {
    let mut header_line = String::from("Chromosome,Position,Ref,Alt");
    for i in 1..=n_files {
        header_line.push_str(&format!(",File{i}R,File{i}A,File{i}E,File{i}D"));
    }
    header_line.push('\n');
    out.write_all(header_line.as_bytes())?;
    let mut min_read_counts = opts.min_read_counts.clone();
    min_read_counts.resize(min_read_counts.len().max(n_files), 0);
    let driver_opts = DriverOptions {
        min_read_counts,
        pseudo_snps: opts.pseudo_snps,
    };
    let mut driver = Driver::new(results, &sites.names, n_files, &driver_opts, progress);
    driver.run(sites.driver_sites(), out)?;
    Ok(driver.summary)
}

/// One thread's open BAMs and reusable record buffers, opened at its first batch.
struct Worker {
    bams: Vec<PathBuf>,
    pileup: PileupOptions,
    grid: i64,
    cancel: Option<Arc<AtomicBool>>,
    handles: Option<Vec<IndexedBam>>,
    buffers: Vec<Vec<u8>>,
}

impl Worker {
    fn new(bams: Vec<PathBuf>, opts: &SnpPileupOptions) -> Self {
        let buffers = vec![Vec::new(); bams.len()];
        Self {
            bams,
            pileup: opts.pileup.clone(),
            grid: opts.pseudo_snps,
            cancel: opts.cancel.clone(),
            handles: None,
            buffers,
        }
    }

    fn run(&mut self, batch: Batch) -> Result<BatchResult, PileupError> {
        if self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(PileupError::Cancelled);
        }
        if self.handles.is_none() {
            let mut opened = Vec::new();
            for p in &self.bams {
                opened.push(IndexedBam::open(p).map_err(|e| bam_error(p, e))?);
            }
            self.handles = Some(opened);
        }
        // INVARIANT: set just above.
        let h = self.handles.as_mut().expect("opened");
        let mut files = Files {
            handles: h,
            paths: &self.bams,
            buffers: &mut self.buffers,
        };
        run_batch(&mut files, &batch, &self.pileup, self.grid)
    }
}

/// Runs snp-pileup: reads `vcf`, piles up `inputs` and writes the CSV (header line included) to `out`.
/// `progress` receives compressed bytes as batches complete.
pub fn snp_pileup(
    vcf: &Path,
    inputs: Inputs,
    opts: &SnpPileupOptions,
    out: &mut dyn Write,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary, PileupError> {
    let sites = SiteList::read(vcf, &inputs)?;
    let (batches, total) = plan_run(&inputs, &sites, opts)?;
    let n_batches = batches.len();
    let threads = opts.threads.max(1);
    let bams = inputs.bams.clone();
    drop(inputs.handles);
    let (submitter, collector) = sortase_bgzf::pool::ordered_pool(threads, threads * 4, || {
        let mut worker = Worker::new(bams.clone(), opts);
        move |batch: Batch| worker.run(batch)
    });
    let feeder = std::thread::spawn(move || {
        for b in batches {
            if submitter.submit(b).is_err() {
                break;
            }
        }
    });
    let result = write_csv(&sites, bams.len(), opts, collector, out, &|b| progress(b));
    let _ = feeder.join();
    Ok(Summary {
        lines: result?,
        vcf_lines: sites.vcf_lines(),
        snvs: sites.snvs(),
        batches: n_batches,
        bytes: total,
    })
}

fn abbreviate(names: &[String]) -> String {
    let mut s = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        s.push_str(&format!(", … {} in all", names.len()));
    }
    s
}

/// A worker's open BAMs and its reusable record buffers (one per BAM).
struct Files<'a> {
    handles: &'a mut [IndexedBam],
    paths: &'a [PathBuf],
    buffers: &'a mut [Vec<u8>],
}

/// Piles up one batch in every BAM.
fn run_batch(
    files: &mut Files<'_>,
    batch: &Batch,
    opts: &PileupOptions,
    grid: i64,
) -> Result<BatchResult, PileupError> {
    if batch.probe {
        return run_probe(files, batch, opts, grid);
    }
    let queries = with_grid(&batch.sites, batch.beg, batch.end, grid);
    let (covered, counts) = pile(files, batch.tid, batch.beg, batch.end, &queries, opts)?;
    Ok(BatchResult {
        tid: batch.tid,
        beg: batch.beg,
        end: batch.end,
        covered,
        queries,
        counts,
        bytes: batch.bytes,
    })
}

/// Sites merged with the pseudo-SNP grid points (`(pos + 1) % grid == 0`) of `[beg, end)`.
fn with_grid(sites: &[i64], beg: i64, end: i64, grid: i64) -> Vec<i64> {
    if grid <= 0 {
        return sites.to_vec();
    }
    let mut out = Vec::with_capacity(sites.len() + ((end - beg) / grid) as usize + 1);
    let mut g = driver::first_grid_point(beg, grid);
    let mut i = 0;
    while g < end || i < sites.len() {
        if i < sites.len() && (g >= end || sites[i] <= g) {
            if sites[i] == g {
                g += grid;
            }
            out.push(sites[i]);
            i += 1;
        } else {
            out.push(g);
            g += grid;
        }
    }
    out
}

type Piled = (Vec<(i64, i64)>, Vec<Vec<Counts>>);

/// Piles up `[beg, end)` of `tid` in every BAM; covered positions are the union over the BAMs.
fn pile(
    files: &mut Files<'_>,
    tid: usize,
    beg: i64,
    end: i64,
    queries: &[i64],
    opts: &PileupOptions,
) -> Result<Piled, PileupError> {
    let mut covered: Vec<(i64, i64)> = Vec::new();
    let mut counts = Vec::with_capacity(files.handles.len());
    let paths = files.paths;
    for ((bam, path), buffer) in files
        .handles
        .iter_mut()
        .zip(paths)
        .zip(files.buffers.iter_mut())
    {
        let in_file = |e: PileupError| PileupError::InFile {
            path: path.clone(),
            source: Box::new(e),
        };
        let mut warm_from = (beg - WARM_UP).max(0);
        let result = loop {
            let region = Region {
                tid,
                beg: warm_from,
                end,
            };
            let records = bam
                .query_into(region, std::mem::take(buffer))
                .map_err(|e| bam_error(path, e))?;
            let window = Window {
                tid,
                beg,
                end,
                warm_from,
            };
            let r = pileup_window(&records, window, queries, opts).map_err(in_file);
            *buffer = records.into_buffer();
            let r = r?;
            if r.exact || warm_from == 0 {
                break r;
            }
            // Look further back for a gap or a stretch below the depth limit; the contig start is exact.
            let back = beg - warm_from;
            warm_from = if back >= WARM_UP << 8 {
                0
            } else {
                (beg - back * 16).max(0)
            };
        };
        covered = union(&covered, &result.covered);
        counts.push(result.counts);
    }
    Ok((covered, counts))
}

fn union(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut all: Vec<(i64, i64)> = a.iter().chain(b).copied().collect();
    all.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(all.len());
    for (s, e) in all {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Finds the first covered position at or after `batch.beg`, looking through growing windows.
fn run_probe(
    files: &mut Files<'_>,
    batch: &Batch,
    opts: &PileupOptions,
    grid: i64,
) -> Result<BatchResult, PileupError> {
    let mut result = BatchResult {
        tid: batch.tid,
        beg: batch.beg,
        end: batch.end,
        ..BatchResult::default()
    };
    let mut from = batch.beg;
    let mut step = PROBE_STEP;
    loop {
        let mut any_left = false;
        for bam in files.handles.iter() {
            any_left |= bam.compressed_offset_at(batch.tid, from)?.is_some();
        }
        if !any_left {
            return Ok(result);
        }
        let to = from.saturating_add(step);
        let (covered, _) = pile(files, batch.tid, from, to, &[], opts)?;
        if let Some(&(first, _)) = covered.first() {
            let queries = vec![first];
            let counts = if grid > 0 && (first + 1) % grid == 0 {
                pile(files, batch.tid, from, to, &queries, opts)?.1
            } else {
                vec![vec![Counts::default()]; files.handles.len()]
            };
            result.covered = vec![(first, first + 1)];
            result.queries = queries;
            result.counts = counts;
            return Ok(result);
        }
        from = to;
        step = step.saturating_mul(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_merges_with_sites() {
        assert_eq!(with_grid(&[5, 9, 12], 0, 25, 10), vec![5, 9, 12, 19]);
        assert_eq!(with_grid(&[], 10, 40, 10), vec![19, 29, 39]);
        assert_eq!(with_grid(&[3], 0, 10, 0), vec![3]);
        assert_eq!(with_grid(&[30], 0, 31, 10), vec![9, 19, 29, 30]);
    }

    #[test]
    fn union_merges_overlaps() {
        assert_eq!(
            union(&[(0, 5), (10, 12)], &[(4, 8), (12, 13), (20, 21)]),
            vec![(0, 8), (10, 13), (20, 21)]
        );
    }
}
