//! snp-pileup's main loop (FACETS `inst/extcode/snp-pileup.cpp`, `program_main`), replayed over batch
//! results instead of a live `bam_mplp_auto` iterator.
//!
//! The C loop keeps one cursor: the last pileup position it consumed. For each VCF SNV in file order:
//! it is skipped when it lies before the cursor (a contig earlier in BAM order, or an earlier
//! position); otherwise positions are consumed one by one: those on contigs before the SNV's are passed
//! silently, the SNV's own position prints the SNV line, and any other consumed position on a grid point
//! (`(pos + 1) % P == 0`) prints a pseudo-SNP; consuming stops at the SNV or at the first position past
//! it. Everything printed therefore depends only on the covered positions (where any BAM has a read)
//! and on the counts at sites and grid points, which is what the batches deliver, in BAM order. The
//! quirks follow: a second SNV at a position already consumed is missed, the first position past a
//! contig's last SNV can print a pseudo-SNP, and SNVs on contigs the BAMs do not have are skipped except
//! before the first covered position.

use super::engine::Counts;
use super::PileupError;
use std::collections::VecDeque;
use std::io::Write;

/// Piled-up results of one batch for all BAMs.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchResult {
    /// Reference index.
    pub tid: usize,
    /// Region start.
    pub beg: i64,
    /// Region end (exclusive; `i64::MAX` for a probe).
    pub end: i64,
    /// Positions covered by any BAM, sorted disjoint half-open intervals (a probe: only the first).
    pub covered: Vec<(i64, i64)>,
    /// Positions with counts, sorted.
    pub queries: Vec<i64>,
    /// `counts[file][query]`.
    pub counts: Vec<Vec<Counts>>,
    /// Compressed bytes the batch stood for (progress).
    pub bytes: u64,
}

impl BatchResult {
    fn counts_at(&self, pos: i64) -> Option<usize> {
        self.queries.binary_search(&pos).ok()
    }
}

/// What the loop needs about each site.
#[derive(Debug, Clone, Copy)]
pub struct DriverSite {
    /// BAM reference index, or -1 when the VCF contig matches none.
    pub tid: i64,
    /// 0-based position.
    pub pos: i64,
    /// REF character.
    pub reference: u8,
    /// ALT character.
    pub alternate: u8,
}

/// Output options of the loop.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// `-r`: minimum `n_plp` per file (one entry per file at least).
    pub min_read_counts: Vec<i32>,
    /// `-P`: pseudo-SNP grid (0: none).
    pub pseudo_snps: i64,
}

/// Lines written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DriverSummary {
    /// SNV lines.
    pub snp_lines: u64,
    /// Pseudo-SNP lines.
    pub pseudo_lines: u64,
}

type Pos = (i64, i64);

const NT16: &[u8; 16] = b"=ACMGRSVTWYHKDBN";

/// Runs the loop: `sites` in VCF order, `results` in BAM order, lines to `out`.
pub struct Driver<'a, I> {
    results: I,
    window: VecDeque<BatchResult>,
    exhausted: bool,
    names: &'a [String],
    opts: &'a DriverOptions,
    n_files: usize,
    line: Vec<u8>,
    progress: &'a dyn Fn(u64),
    /// Counts written.
    pub summary: DriverSummary,
}

impl<'a, I: Iterator<Item = Result<BatchResult, PileupError>>> Driver<'a, I> {
    /// A loop over `results`; `names` are the BAM reference names.
    pub fn new(
        results: I,
        names: &'a [String],
        n_files: usize,
        opts: &'a DriverOptions,
        progress: &'a dyn Fn(u64),
    ) -> Self {
        Self {
            results,
            window: VecDeque::new(),
            exhausted: false,
            names,
            opts,
            n_files,
            line: Vec::with_capacity(256),
            progress,
            summary: DriverSummary::default(),
        }
    }

    /// Ensures batch `i` of the window is loaded; false at the end of the results.
    fn load(&mut self, i: usize) -> Result<bool, PileupError> {
        while self.window.len() <= i {
            if self.exhausted {
                return Ok(false);
            }
            match self.results.next() {
                Some(r) => {
                    let r = r?;
                    (self.progress)(r.bytes);
                    self.window.push_back(r);
                }
                None => {
                    self.exhausted = true;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Drops batches that end at or before `at`.
    fn forget_before(&mut self, at: Pos) {
        while let Some(f) = self.window.front() {
            if (f.tid as i64) < at.0 || (f.tid as i64 == at.0 && f.end <= at.1) {
                self.window.pop_front();
            } else {
                break;
            }
        }
    }

    /// The first covered position at or after `at`.
    fn succ(&mut self, at: Pos) -> Result<Option<Pos>, PileupError> {
        let mut i = 0;
        while self.load(i)? {
            let b = &self.window[i];
            let tid = b.tid as i64;
            if tid > at.0 || (tid == at.0 && b.end > at.1) {
                let from = if tid == at.0 { at.1 } else { i64::MIN };
                let k = b.covered.partition_point(|&(_, e)| e <= from);
                if let Some(&(s, _)) = b.covered.get(k) {
                    return Ok(Some((tid, s.max(from))));
                }
            }
            i += 1;
        }
        Ok(None)
    }

    /// The batch and query index holding counts at `at`.
    fn find(&mut self, at: Pos) -> Result<Option<(usize, usize)>, PileupError> {
        let mut i = 0;
        while self.load(i)? {
            let b = &self.window[i];
            if b.tid as i64 == at.0 && b.beg <= at.1 && at.1 < b.end {
                return Ok(b.counts_at(at.1).map(|q| (i, q)));
            }
            if (b.tid as i64) > at.0 || (b.tid as i64 == at.0 && b.beg > at.1) {
                return Ok(None);
            }
            i += 1;
        }
        Ok(None)
    }

    fn missing(at: Pos) -> PileupError {
        PileupError::Internal(format!(
            "no counts at reference {} position {}",
            at.0,
            at.1 + 1
        ))
    }

    /// Runs the loop over `sites`.
    pub fn run(
        &mut self,
        sites: impl Iterator<Item = DriverSite>,
        out: &mut dyn Write,
    ) -> Result<(), PileupError> {
        let mut cursor: Option<Pos> = None;
        for site in sites {
            let s = (site.tid, site.pos);
            if cursor.is_some_and(|c| s < c) {
                continue;
            }
            let from = cursor.map_or((i64::MIN, i64::MIN), |c| (c.0, c.1 + 1));
            let Some(mut next) = self.succ(from)? else {
                break; // bam_mplp_auto is done: nothing more can be printed
            };
            if next.0 < s.0 {
                // Positions on contigs before the site's are consumed without any output.
                match self.succ((s.0, i64::MIN))? {
                    Some(n) => next = n,
                    None => break,
                }
            }
            if next.0 == s.0 && next.1 < s.1 {
                self.pseudo_range(s.0, next.1, s.1, out)?;
                match self.succ(s)? {
                    Some(n) => next = n,
                    None => break,
                }
            }
            if next == s {
                self.snp_line(&site, out)?;
            } else if self.on_grid(next.1) {
                self.pseudo_line(next, out)?;
            }
            cursor = Some(next);
            self.forget_before(next);
        }
        Ok(())
    }

    fn on_grid(&self, pos: i64) -> bool {
        self.opts.pseudo_snps > 0 && (pos + 1) % self.opts.pseudo_snps == 0
    }

    /// Pseudo-SNPs at covered grid points in `[from, to)` of `tid`.
    fn pseudo_range(
        &mut self,
        tid: i64,
        from: i64,
        to: i64,
        out: &mut dyn Write,
    ) -> Result<(), PileupError> {
        let p = self.opts.pseudo_snps;
        if p <= 0 {
            return Ok(());
        }
        let mut g = first_grid_point(from, p);
        while g < to {
            if let Some((b, q)) = self.find((tid, g))? {
                let covered = self.window[b].counts.iter().any(|c| c[q].depth > 0);
                if covered {
                    self.pseudo_line((tid, g), out)?;
                }
            }
            g += p;
        }
        Ok(())
    }

    fn fails_min(&self, b: usize, q: usize) -> bool {
        let counts = &self.window[b].counts;
        (0..self.n_files)
            .any(|f| (counts[f][q].depth as i64) < i64::from(self.opts.min_read_counts[f]))
    }

    /// Starts the line of `at`: its reference name and 1-based position.
    fn start_line(&mut self, at: Pos) {
        self.line.clear();
        self.line
            .extend_from_slice(self.names[at.0 as usize].as_bytes());
        self.line.push(b',');
        push_int(&mut self.line, at.1 + 1);
    }

    fn pseudo_line(&mut self, at: Pos, out: &mut dyn Write) -> Result<(), PileupError> {
        let (b, q) = self.find(at)?.ok_or_else(|| Self::missing(at))?;
        if self.fails_min(b, q) {
            return Ok(());
        }
        let refs: Vec<u32> = self.window[b]
            .counts
            .iter()
            .map(|c| c[q].passing())
            .collect();
        if refs.iter().all(|&r| r == 0) {
            return Ok(());
        }
        self.start_line(at);
        self.line.extend_from_slice(b",.,.");
        for r in refs {
            self.line.push(b',');
            push_int(&mut self.line, i64::from(r));
            self.line.extend_from_slice(b",0,0,0");
        }
        self.line.push(b'\n');
        out.write_all(&self.line)?;
        self.summary.pseudo_lines += 1;
        Ok(())
    }

    fn snp_line(&mut self, site: &DriverSite, out: &mut dyn Write) -> Result<(), PileupError> {
        let at = (site.tid, site.pos);
        let (b, q) = self.find(at)?.ok_or_else(|| Self::missing(at))?;
        if self.fails_min(b, q) {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(self.n_files);
        for c in &self.window[b].counts {
            let c = &c[q];
            let (mut r, mut a, mut e) = (0u32, 0u32, 0u32);
            for (code, &n) in c.bases.iter().enumerate() {
                let ch = NT16[code];
                if ch == site.reference {
                    r += n;
                } else if ch == site.alternate {
                    a += n;
                } else {
                    e += n;
                }
            }
            rows.push([r, a, e, c.deletions]);
        }
        if rows.iter().all(|x| x[0] == 0 && x[1] == 0 && x[2] == 0) {
            return Ok(());
        }
        self.start_line(at);
        self.line.push(b',');
        self.line.push(site.reference);
        self.line.push(b',');
        self.line.push(site.alternate);
        for row in rows {
            for v in row {
                self.line.push(b',');
                push_int(&mut self.line, i64::from(v));
            }
        }
        self.line.push(b'\n');
        out.write_all(&self.line)?;
        self.summary.snp_lines += 1;
        Ok(())
    }
}

/// The first `g >= from` (from >= 0) with `(g + 1) % grid == 0`.
pub(crate) fn first_grid_point(from: i64, grid: i64) -> i64 {
    (from + grid) / grid * grid - 1
}

fn push_int(buf: &mut Vec<u8>, v: i64) {
    let mut tmp = [0u8; 24];
    let mut i = tmp.len();
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        tmp[i] = b'-';
    }
    buf.extend_from_slice(&tmp[i..]);
}
