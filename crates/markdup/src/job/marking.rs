//! The ordered part of query-grouped marking: per batch of whole read-name groups, signatures
//! computed in parallel, then inserted in input order, and the records written with their flags,
//! mate tags and side outputs; and the carry of a group that straddles two batches.

use super::side_out::Side;
use super::MarkdupReport;
use crate::picard::LibraryTally;
use crate::samblaster::side::{self, SideOptions, DISCORDANT};
use crate::samblaster::{self, mate_tags, Layout, Options, SigSet, Verdict};
use anyhow::{Context, Result};
use sortase_bam::checksum::{ChecksumOptions, Fault, Sums, Tally};
use sortase_bam::{flags, RecordBatch, RecordBuf};
use sortase_exec::error::{Error, ErrorKind};
use sortase_exec::writer::RecordSink;
use std::path::PathBuf;

pub use crate::samblaster::Carry;

/// The marking state: signatures seen, options, side outputs, reused buffers, counts.
pub(super) struct State {
    layout: Layout,
    opts: Options,
    sigs: SigSet,
    remove: bool,
    mate_tags: bool,
    scratch: RecordBuf,
    side: Side,
    side_opts: SideOptions,
    marks: Vec<u8>,
    extents: Vec<side::Extent>,
    groups: u64,
    dups: u64,
    records: u64,
    dup_records: u64,
    /// The input's and the output's names, for messages.
    names: (String, String),
    /// With `--checksums`: the sums of the records written and of those left out (`-r`).
    tallies: Option<(Tally, Tally)>,
    /// With a metrics file: Picard's counts per library of the records with their final flags.
    libraries: Option<LibraryTally>,
}

/// A "read R: …" error of the input `file` (malformed for samblaster).
fn bad_group(file: &str, batch: &RecordBatch, i: usize, what: &str) -> anyhow::Error {
    let name = String::from_utf8_lossy(batch.record(i).read_name()).into_owned();
    Error::new(ErrorKind::Format, format!("{file}: read {name}: {what}")).into()
}

/// Whether the read-name group starting at record `start` of `batch` (analysed as `group`) is a
/// duplicate: its signature was seen before (then it is added to `sigs`). A group samblaster cannot
/// mark is an error of the input `file`.
pub fn is_duplicate(
    sigs: &mut SigSet,
    group: &samblaster::Group,
    file: &str,
    batch: &RecordBatch,
    start: usize,
) -> Result<bool> {
    Ok(match group.verdict {
        Verdict::Pass => false,
        Verdict::Sig(s) => !sigs.insert(s),
        Verdict::Broken => {
            return Err(bad_group(
                file,
                batch,
                start,
                "no usable primary pair in the group of its name (a mapped mate's primary is \
                 missing, or the read is unmapped and alone); is the input grouped by read name \
                 (aligner output, `sortase sort -n`)? Coordinate-sorted input needs --mode \
                 coordinate; --ignoreUnmated passes such groups through",
            ))
        }
        Verdict::UnknownReference => {
            return Err(bad_group(
                file,
                batch,
                start,
                "mapped to a reference missing from the header",
            ))
        }
    })
}

impl State {
    /// A state with nothing seen yet.
    pub(super) fn new(
        layout: Layout,
        opts: Options,
        remove: bool,
        mate_tags: bool,
        side: Side,
        side_opts: SideOptions,
        names: (String, String),
    ) -> Self {
        Self {
            layout,
            opts,
            sigs: SigSet::default(),
            remove,
            mate_tags,
            scratch: RecordBuf::default(),
            side,
            side_opts,
            marks: Vec::new(),
            extents: Vec::new(),
            groups: 0,
            dups: 0,
            records: 0,
            dup_records: 0,
            names,
            tallies: None,
            libraries: None,
        }
    }

    /// Counts the records per library (of the header text's `@RG` lines) from now on, for the
    /// metrics file.
    pub(super) fn count_libraries(&mut self, header_text: &str) {
        self.libraries = Some(LibraryTally::from_header(header_text));
    }

    /// The per-library counts, with [`State::count_libraries`].
    pub(super) fn libraries(&self) -> Option<&LibraryTally> {
        self.libraries.as_ref()
    }

    /// Sums the records written and left out from now on (`--checksums`).
    pub(super) fn sum_records(&mut self, opts: &ChecksumOptions) {
        self.tallies = Some((
            Tally::new(opts, &Fault::from_env()),
            Tally::new(opts, &Fault::default()),
        ));
    }

    /// The sums of the records written and left out, with [`State::sum_records`].
    pub(super) fn sums(&self) -> Option<(Sums, Sums)> {
        self.tallies.as_ref().map(|(w, l)| (w.sums(), l.sums()))
    }

    /// Marks and writes `group`, all of whose records have one name.
    pub(super) fn process_whole(
        &mut self,
        group: &RecordBatch,
        sink: &mut RecordSink,
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        self.process(group, std::slice::from_ref(&(0..group.len())), sink, pool)
    }

    /// Marks and writes the groups `bounds` of `batch`, in order; the signatures are computed on
    /// `pool`.
    pub(super) fn process(
        &mut self,
        batch: &RecordBatch,
        bounds: &[std::ops::Range<usize>],
        sink: &mut RecordSink,
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        let verdicts = samblaster::analyze_all(batch, bounds, &self.layout, &self.opts, pool);
        for (range, group) in bounds.iter().zip(&verdicts) {
            self.groups += 1;
            let dup = is_duplicate(&mut self.sigs, group, &self.names.0, batch, range.start)?;
            self.dups += u64::from(dup);
            self.records += range.len() as u64;
            if dup {
                self.dup_records += range.len() as u64;
            }
            self.write_group(batch, range.clone(), group, dup, sink)?;
        }
        Ok(())
    }

    /// Writes the records of one group with their final flags and tags, and to the side outputs.
    fn write_group(
        &mut self,
        batch: &RecordBatch,
        range: std::ops::Range<usize>,
        group: &samblaster::Group,
        dup: bool,
        sink: &mut RecordSink,
    ) -> Result<()> {
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
            if let Some(t) = self.libraries.as_mut() {
                t.add(&batch.record(i), flag);
            }
            let rec = if !dup && pair.is_none() {
                raw
            } else {
                self.scratch.copy_from(raw);
                if let Some((a, b)) = &pair {
                    let sources = mate_tags::mate_of(&batch.record(i), a, b);
                    mate_tags::add_tags(&mut self.scratch, &sources);
                }
                self.scratch.set_flag(flag);
                self.scratch.as_raw()
            };
            if !(self.remove && flag & flags::DUPLICATE != 0) {
                let out = match self.tallies.as_mut() {
                    Some((written, _)) => written.pass(rec),
                    None => rec,
                };
                sink.write(out).with_context(|| self.names.1.clone())?;
            } else if let Some((_, left)) = self.tallies.as_mut() {
                left.pass(rec);
            }
            if side && self.marks[i - range.start] != 0 {
                self.side.write(rec, self.marks[i - range.start])?;
            }
        }
        Ok(())
    }

    /// Renames the side outputs into place, adds the counts to `report`; returns the side outputs'
    /// paths.
    pub(super) fn finish(self, report: &mut MarkdupReport) -> Result<Vec<PathBuf>> {
        report.records = self.records;
        report.duplicate_records = self.dup_records;
        report.read_names = self.groups;
        report.duplicate_groups = self.dups;
        self.side.finish()
    }
}
