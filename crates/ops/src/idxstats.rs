//! `samtools idxstats` counts by scanning records (its `slow_idxstats`), per range and summed.

use sortase_bam::{flags::UNMAPPED, RecordRef};

/// Mapped and unmapped record counts per reference, plus the unplaced ones (`*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdxStats {
    /// `[mapped, unmapped]` per reference.
    pub per_reference: Vec<[u64; 2]>,
    /// `[mapped, unmapped]` for records without a reference.
    pub unplaced: [u64; 2],
    /// Reference ids in the order first seen (to detect unsorted input).
    pub order: Vec<i32>,
}

impl IdxStats {
    /// Counters for `n_ref` references.
    pub fn new(n_ref: usize) -> Self {
        Self {
            per_reference: vec![[0; 2]; n_ref],
            ..Self::default()
        }
    }

    /// Counts one record (its refID was validated against the header by the splitter).
    #[inline]
    pub fn add(&mut self, r: &RecordRef<'_>) {
        self.add_fields(r.reference_sequence_id(), r.flag());
    }

    /// Counts one record from its refID and FLAG (the fields a CRAM reader decodes for idxstats, or
    /// an AGD dataset's columns): `false`, with nothing counted, when `tid` names no reference of
    /// the header.
    #[inline]
    pub fn add_fields(&mut self, tid: i32, flag: u16) -> bool {
        if self.order.last() != Some(&tid) {
            self.order.push(tid);
        }
        let slot = usize::from(flag & UNMAPPED != 0);
        match usize::try_from(tid) {
            Ok(t) => match self.per_reference.get_mut(t) {
                Some(c) => c[slot] += 1,
                None => return false,
            },
            Err(_) if tid == -1 => self.unplaced[slot] += 1,
            Err(_) => return false,
        }
        true
    }

    /// Adds the next range's counts (ranges merged in file order).
    pub fn merge(&mut self, o: &IdxStats) {
        for (a, b) in self.per_reference.iter_mut().zip(&o.per_reference) {
            a[0] += b[0];
            a[1] += b[1];
        }
        self.unplaced[0] += o.unplaced[0];
        self.unplaced[1] += o.unplaced[1];
        for &t in &o.order {
            if self.order.last() != Some(&t) {
                self.order.push(t);
            }
        }
    }

    /// Whether a reference's records came in more than one run (samtools: "file is not position sorted").
    pub fn is_position_sorted(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.order.iter().all(|t| seen.insert(*t))
    }
}
