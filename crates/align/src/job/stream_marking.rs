//! samblaster's duplicate marking on the aligner's stream: signatures are computed on the mapping
//! threads (one read-name group per fragment), then inserted in input order here (first seen wins)
//! and 0x400 set on every record of a later copy.

use crate::AlignedBatch;
use sortase_bam::flags;
use sortase_exec::error::{Error, ErrorKind};
use sortase_markdup::samblaster::{self, Layout, SigSet, Verdict};

/// The signature of each fragment of `batch` (none without a layout: no marking).
pub(crate) fn verdicts(batch: &AlignedBatch, layout: Option<&Layout>) -> Vec<Verdict> {
    let opts = samblaster::Options {
        // samblaster refuses unmapped single-end reads without it; pairs never need it.
        ignore_unmated: true,
        accept_dups: false,
    };
    layout.map_or_else(Vec::new, |layout| {
        (0..batch.fragments.len())
            .map(|f| samblaster::analyze(&batch.records, batch.fragment(f), layout, &opts).verdict)
            .collect()
    })
}

/// Duplicate marking in the consumer: samblaster's signatures in input order.
#[derive(Default)]
pub(crate) struct Marker {
    sigs: SigSet,
    /// Templates marked.
    pub templates: u64,
    /// Records marked.
    pub records: u64,
}

impl Marker {
    /// Inserts the signatures of `batch`'s fragments; later copies get 0x400 on all records.
    pub fn mark(&mut self, batch: &mut AlignedBatch, verdicts: &[Verdict]) -> anyhow::Result<()> {
        for (f, v) in verdicts.iter().enumerate() {
            let dup = signature(v)?.is_some_and(|s| !self.sigs.insert(s));
            if dup {
                self.templates += 1;
                for i in batch.fragment(f) {
                    set_duplicate(batch.records.raw_mut(i));
                    self.records += 1;
                }
            }
        }
        Ok(())
    }
}

/// A fragment's signature (`None`: samblaster passes it unmarked); a fragment samblaster cannot
/// mark is an internal error (the aligner writes every read's primary record).
pub(crate) fn signature(v: &Verdict) -> anyhow::Result<Option<u128>> {
    match v {
        Verdict::Pass => Ok(None),
        Verdict::Sig(s) => Ok(Some(*s)),
        Verdict::Broken | Verdict::UnknownReference => Err(Error::new(
            ErrorKind::Internal,
            "samblaster: a template without its primary records in the aligner's output",
        )
        .into_anyhow()),
    }
}

/// Sets 0x400 on a raw record (with its `block_size` prefix).
pub(crate) fn set_duplicate(raw: &mut [u8]) {
    let flag = u16::from_le_bytes([raw[18], raw[19]]) | flags::DUPLICATE;
    raw[18..20].copy_from_slice(&flag.to_le_bytes());
}
