//! The ordered part of query-grouped marking: per batch of whole read-name groups, signatures
//! computed in parallel, then inserted in input order, and the records written with their flags,
//! mate tags and side outputs; and the carry of a group that straddles two batches.

use super::side_out;
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use sortase_bam::{flags, RecordBatch};
use sortase_markdup::samblaster::side::{self, SideOptions, DISCORDANT};
use sortase_markdup::samblaster::{self, mate_tags, Layout, Options, SigSet, Verdict};

/// The marking state: signatures seen, options, side outputs, reused buffers.
pub(super) struct State {
    pub(super) layout: Layout,
    pub(super) opts: Options,
    pub(super) sigs: SigSet,
    pub(super) remove: bool,
    pub(super) mate_tags: bool,
    pub(super) scratch: Vec<u8>,
    pub(super) side: side_out::Side,
    pub(super) side_opts: SideOptions,
    pub(super) marks: Vec<u8>,
    pub(super) extents: Vec<side::Extent>,
    pub(super) groups: u64,
    pub(super) dups: u64,
    /// The input's and the output's names, for messages.
    pub(super) names: (String, String),
}

impl State {
    /// Marks and writes `group`, all of whose records have one name.
    pub(super) fn process_whole(
        &mut self,
        group: &RecordBatch,
        sink: &mut crate::record_sink::RecordSink,
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        self.process(group, std::slice::from_ref(&(0..group.len())), sink, pool)
    }

    /// Marks and writes the groups `bounds` of `batch`, in order.
    pub(super) fn process(
        &mut self,
        batch: &RecordBatch,
        bounds: &[std::ops::Range<usize>],
        sink: &mut crate::record_sink::RecordSink,
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        let (layout, opts) = (&self.layout, &self.opts);
        let verdicts: Vec<samblaster::Group> = pool.install(|| {
            bounds
                .par_iter()
                .with_min_len(256)
                .map(|r| samblaster::analyze(batch, r.clone(), layout, opts))
                .collect()
        });
        for (range, group) in bounds.iter().zip(&verdicts) {
            self.groups += 1;
            let dup = match group.verdict {
                Verdict::Pass => false,
                Verdict::Sig(s) => !self.sigs.insert(s),
                Verdict::Broken => {
                    let r = batch.record(range.start);
                    bail!(
                        "{}: read {}: no usable primary pair in the group of its name (a mapped \
                         mate's primary is missing, or the read is unmapped and alone); is the \
                         input grouped by read name (aligner output, `sortase sort -n`)? \
                         Coordinate-sorted input needs --mode coordinate; --ignoreUnmated \
                         passes such groups through",
                        self.names.0,
                        String::from_utf8_lossy(r.read_name())
                    )
                }
                Verdict::UnknownReference => bail!(
                    "{}: read {}: mapped to a reference missing from the header",
                    self.names.0,
                    String::from_utf8_lossy(batch.record(range.start).read_name())
                ),
            };
            self.dups += u64::from(dup);
            let pair = group.pair.filter(|_| self.mate_tags).map(|(a, b)| {
                (
                    batch.record(range.start + a as usize),
                    batch.record(range.start + b as usize),
                )
            });
            let side = self.side.any();
            if side {
                self.marks.clear();
                self.marks.resize(range.len(), 0);
                side::mark(
                    batch,
                    range.clone(),
                    &self.side_opts,
                    &mut self.marks,
                    &mut self.extents,
                );
                if group.discordant {
                    if let Some((a, b)) = group.pair {
                        self.marks[a as usize] |= DISCORDANT;
                        self.marks[b as usize] |= DISCORDANT;
                    }
                }
            }
            for i in range.clone() {
                let raw = batch.raw(i);
                let flag = batch.record(i).flag();
                let flag = if dup { flag | flags::DUPLICATE } else { flag };
                let rec = if !dup && pair.is_none() {
                    raw
                } else {
                    self.scratch.clear();
                    match &pair {
                        Some((a, b)) => {
                            let sources = mate_tags::mate_of(&batch.record(i), a, b);
                            mate_tags::append_with_tags(raw, &sources, &mut self.scratch);
                        }
                        None => self.scratch.extend_from_slice(raw),
                    }
                    self.scratch[18..20].copy_from_slice(&flag.to_le_bytes());
                    &self.scratch
                };
                if !(self.remove && flag & flags::DUPLICATE != 0) {
                    sink.write(rec).with_context(|| self.names.1.clone())?;
                }
                if side && self.marks[i - range.start] != 0 {
                    self.side.write(rec, self.marks[i - range.start])?;
                }
            }
        }
        Ok(())
    }
}

/// Records of a group that continues past the end of a batch.
#[derive(Default)]
pub(super) struct Carry {
    buf: Vec<u8>,
    offsets: Vec<u32>,
    name: Vec<u8>,
}

impl Carry {
    pub(super) fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
    pub(super) fn continues(&self, name: &[u8]) -> bool {
        self.name == name
    }
    pub(super) fn push(&mut self, raw: &[u8]) {
        if self.offsets.is_empty() {
            self.name.clear();
            let r = sortase_bam::RecordRef::new_unchecked(&raw[4..]);
            self.name.extend_from_slice(r.read_name());
        }
        self.offsets.push(self.buf.len() as u32);
        self.buf.extend_from_slice(raw);
    }
    pub(super) fn take(&mut self) -> RecordBatch {
        let buf = std::mem::take(&mut self.buf);
        let end = buf.len();
        RecordBatch::from_parts(buf, std::mem::take(&mut self.offsets), end, 0)
    }
}
