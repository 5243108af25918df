//! Cutting the genome into batches that threads pile up independently.
//!
//! Each contig of the BAMs is tiled, in BAM order, by consecutive regions whose compressed size
//! (summed over all BAMs, read from their indexes) is about `target_bytes`, so threads get equal work
//! whatever the site density. The tiling runs up to the contig's last wanted site; after it (and on
//! contigs without sites) only the first covered position matters to snp-pileup's loop, so a
//! [`Batch::probe`] looks for that one position instead of piling up the rest of the contig.

use super::PileupError;
use sortase_bam::query::IndexedBam;

/// One unit of work: a region of one contig and the site positions inside it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    /// Reference index.
    pub tid: usize,
    /// 0-based start.
    pub beg: i64,
    /// Exclusive end (`i64::MAX` for a probe).
    pub end: i64,
    /// Sorted, distinct site positions in `[beg, end)`.
    pub sites: Vec<i64>,
    /// Only the first covered position at or after `beg` is wanted.
    pub probe: bool,
    /// Estimated compressed bytes the batch reads (for progress).
    pub bytes: u64,
}

/// Compressed offsets of the BAMs, for sizing regions.
struct Sizer<'a> {
    bams: &'a [IndexedBam],
    spans: Vec<Option<(u64, u64)>>,
}

impl Sizer<'_> {
    /// Bytes from the start of the contig to `pos`, summed over the BAMs.
    fn bytes_before(&self, tid: usize, pos: i64) -> Result<u64, PileupError> {
        let mut sum = 0;
        for (bam, span) in self.bams.iter().zip(&self.spans) {
            if let Some((start, end)) = *span {
                let at = bam.compressed_offset_at(tid, pos)?.unwrap_or(end);
                sum += at.clamp(start, end) - start;
            }
        }
        Ok(sum)
    }
}

/// Plans the batches of every contig, in BAM order, for the wanted `sites` (one sorted, distinct list
/// per contig); no batch spans more than `max_span` bases when given.
pub fn plan_batches(
    bams: &[IndexedBam],
    sites: &[Vec<i64>],
    target_bytes: u64,
    max_span: Option<i64>,
) -> Result<Vec<Batch>, PileupError> {
    let target = target_bytes.max(1);
    let mut out = Vec::new();
    for (tid, contig_sites) in sites.iter().enumerate() {
        let sizer = Sizer {
            bams,
            spans: bams
                .iter()
                .map(|b| b.compressed_span(tid))
                .collect::<Result<_, _>>()?,
        };
        let Some(&last) = contig_sites.last() else {
            out.push(probe(tid, 0));
            continue;
        };
        // Tile [0, last + 1): a region may end anywhere; the probe takes over after the last site.
        let stop = last + 1;
        let total = sizer.bytes_before(tid, stop)?;
        let pieces = total.div_ceil(target).max(1);
        let mut cuts = even_cuts(&sizer, tid, total, pieces, stop)?;
        if let Some(span) = max_span.filter(|&s| s > 0) {
            cuts = split_long(&cuts, span);
        }
        let mut before = 0;
        for w in cuts.windows(2) {
            let (beg, end) = (w[0], w[1]);
            let lo = contig_sites.partition_point(|&p| p < beg);
            let hi = contig_sites.partition_point(|&p| p < end);
            let upto = sizer.bytes_before(tid, end)?;
            out.push(Batch {
                tid,
                beg,
                end,
                sites: contig_sites[lo..hi].to_vec(),
                probe: false,
                bytes: upto.saturating_sub(before),
            });
            before = upto;
        }
        out.push(probe(tid, stop));
    }
    Ok(out)
}

/// Cuts `[0, stop)` of contig `tid` into `pieces` of about equal compressed bytes (`total` in
/// all): the positions, 0 and `stop` included.
fn even_cuts(
    sizer: &Sizer<'_>,
    tid: usize,
    total: u64,
    pieces: u64,
    stop: i64,
) -> Result<Vec<i64>, PileupError> {
    let mut cuts = vec![0i64];
    for i in 1..pieces {
        let want = total * i / pieces;
        // First position whose preceding bytes reach `want` (bytes_before is non-decreasing).
        let (mut lo, mut hi) = (*cuts.last().unwrap_or(&0) + 1, stop);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if sizer.bytes_before(tid, mid)? >= want {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo < stop {
            cuts.push(lo);
        }
    }
    cuts.push(stop);
    Ok(cuts)
}

/// `cuts` with more cuts added so that no piece spans more than `span` bases.
fn split_long(cuts: &[i64], span: i64) -> Vec<i64> {
    let mut fine = vec![0i64];
    for w in cuts.windows(2) {
        let mut at = w[0];
        while w[1] - at > span {
            at += span;
            fine.push(at);
        }
        fine.push(w[1]);
    }
    fine
}

fn probe(tid: usize, beg: i64) -> Batch {
    Batch {
        tid,
        beg,
        end: i64::MAX,
        sites: Vec::new(),
        probe: true,
        bytes: 0,
    }
}
