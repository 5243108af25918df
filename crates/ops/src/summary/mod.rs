//! One pass, three pictures: reads per reference (idxstats' counts), mean depth per reference and
//! the MAPQ histogram, counted per byte range and summed, then drawn as an HTML page with inline SVG
//! ([`html::render`]) that needs nothing but a browser.
//!
//! ```
//! use sortase_ops::summary::Summary;
//! # let mut rec = vec![0, 0, 0, 0, 9, 0, 0, 0];          // refID 0, pos 9
//! # rec.extend_from_slice(&[2, 40, 0, 0, 1, 0, 0, 0]);  // l_read_name 2, mapq 40, 1 op, flag 0
//! # rec.extend_from_slice(&[0; 4]);                      // l_seq 0
//! # rec.extend_from_slice(&[0xff; 8]);                   // no mate
//! # rec.extend_from_slice(&[0; 4]);                      // tlen
//! # rec.extend_from_slice(b"r\0");
//! # rec.extend_from_slice(&(50u32 << 4).to_le_bytes());  // 50M
//! let record = sortase_bam::RecordRef::new(&rec).unwrap();
//! let mut s = Summary::new(2);
//! s.add(&record);
//! assert_eq!((s.references[0].mapped, s.references[0].aligned_bases, s.mapq[40]), (1, 50, 1));
//! ```

pub mod html;

use serde::{Deserialize, Serialize};
use sortase_bam::{cigar, flags, RecordRef};

/// Counts of one reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceCounts {
    /// Records placed on it and mapped (idxstats' third column).
    pub mapped: u64,
    /// Records placed on it but unmapped (idxstats' fourth column).
    pub unmapped: u64,
    /// Bases aligned to it (M, =, X operations) by mapped, non-secondary, non-duplicate, QC-passed
    /// records (samtools depth's default filter), summed: divided by the length, the mean depth.
    pub aligned_bases: u64,
}

/// The counters of a file or of a byte range of it; ranges combine with [`Summary::merge`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Per reference, in header order.
    pub references: Vec<ReferenceCounts>,
    /// Records without a reference: `[mapped, unmapped]` (idxstats' `*` line).
    pub unplaced: [u64; 2],
    /// Mapped records by MAPQ (index 0-255).
    pub mapq: Vec<u64>,
    /// Unmapped records (not in `mapq`): `mapq` plus this is every record.
    pub unmapped: u64,
}

/// Flags whose records do not count towards depth (samtools depth's default filter).
const NOT_DEPTH: u16 = flags::UNMAPPED | flags::SECONDARY | flags::QC_FAIL | flags::DUPLICATE;

impl Summary {
    /// Zero counters for `n_ref` references.
    pub fn new(n_ref: usize) -> Self {
        Self {
            references: vec![ReferenceCounts::default(); n_ref],
            unplaced: [0; 2],
            mapq: vec![0; 256],
            unmapped: 0,
        }
    }

    /// Counts one record.
    // HOT: once per record; no allocation.
    #[inline]
    pub fn add(&mut self, r: &RecordRef<'_>) {
        let flag = r.flag();
        let unmapped = flag & flags::UNMAPPED != 0;
        if unmapped {
            self.unmapped += 1;
        } else {
            self.mapq[usize::from(r.mapping_quality())] += 1;
        }
        let slot = usize::from(unmapped);
        let counts = usize::try_from(r.reference_sequence_id())
            .ok()
            .and_then(|t| self.references.get_mut(t));
        let Some(counts) = counts else {
            self.unplaced[slot] += 1;
            return;
        };
        if unmapped {
            counts.unmapped += 1;
        } else {
            counts.mapped += 1;
        }
        if flag & NOT_DEPTH == 0 {
            counts.aligned_bases += r
                .cigar()
                .iter()
                .filter(|&op| matches!(cigar::op_code(op), 0 | 7 | 8))
                .map(|op| u64::from(cigar::op_len(op)))
                .sum::<u64>();
        }
    }

    /// Adds another range's counters.
    pub fn merge(&mut self, other: &Summary) {
        for (a, b) in self.references.iter_mut().zip(&other.references) {
            a.mapped += b.mapped;
            a.unmapped += b.unmapped;
            a.aligned_bases += b.aligned_bases;
        }
        for (a, b) in self.mapq.iter_mut().zip(&other.mapq) {
            *a += b;
        }
        self.unplaced[0] += other.unplaced[0];
        self.unplaced[1] += other.unplaced[1];
        self.unmapped += other.unmapped;
    }

    /// Every record counted.
    pub fn records(&self) -> u64 {
        self.mapq.iter().sum::<u64>() + self.unmapped
    }
}
