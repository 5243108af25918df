//! Proof that nothing was lost: the order-independent sums of `samtools checksum` (crates/bam
//! `checksum`) over the records a job read and over the records it wrote, compared before the output
//! is renamed into place. A job whose sums differ fails and leaves no output.
//!
//! The sums are computed where records are already touched: input batches are summed on the
//! runtime's pool as they arrive ([`batch_sums`]), output ranges on the workers that encode them
//! ([`SumsCell`]). Jobs that keep every record and field (sort, merge, markdup, AGD import/export)
//! use [`ChecksumOptions::every_record`] (`samtools checksum -F 0 -P -C -M`); markdup's duplicate
//! flag is outside samtools' flag mask (PAIRED,READ1,READ2), so it is left out by construction.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::{ChecksumOptions, Checksummer, Sums};
use sortase_bam::RecordBatch;
use sortase_exec::error::{Error, ErrorKind};
use std::sync::Mutex;

/// Records per parallel piece of a batch: enough to make the piece's checksummer (a few small
/// buffers) negligible.
const PIECE_RECORDS: usize = 2048;

/// The sums of a batch's records, computed on the current rayon pool (install the runtime's).
pub fn batch_sums(opts: &ChecksumOptions, batch: &RecordBatch) -> Sums {
    if batch.len() <= PIECE_RECORDS {
        let mut c = Checksummer::new(opts.clone());
        batch.iter_raw().for_each(|r| c.add(r));
        return c.sums;
    }
    (0..batch.len())
        .into_par_iter()
        .with_min_len(PIECE_RECORDS)
        .fold(
            || Checksummer::new(opts.clone()),
            |mut c, i| {
                c.add(batch.raw(i));
                c
            },
        )
        .map(|c| c.sums)
        .reduce(
            || Sums::EMPTY,
            |mut a, b| {
                a.merge(&b);
                a
            },
        )
}

/// Sums that many threads add to (once per batch or range, never per record).
#[derive(Debug, Default)]
pub struct SumsCell(Mutex<Sums>);

impl SumsCell {
    /// Adds `sums`.
    pub fn merge(&self, sums: &Sums) {
        // INVARIANT: the lock is never held across a panic-prone call.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).merge(sums);
    }

    /// The sums so far.
    pub fn get(&self) -> Sums {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One set of sums as reports carry them (hex columns as samtools prints them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSums {
    /// Records summed.
    pub count: u64,
    /// flag+seq.
    pub seq: u64,
    /// +name.
    pub name: u64,
    /// +qual.
    pub qual: u64,
    /// +aux.
    pub aux: u64,
    /// +chr/pos (0 when not computed).
    pub pos: u64,
    /// +cigar (0 when not computed).
    pub cigar: u64,
    /// +mate (0 when not computed).
    pub mate: u64,
    /// samtools' combined column.
    pub combined: u64,
}

impl RecordSums {
    fn new(s: &Sums, opts: &ChecksumOptions) -> Self {
        let on = |b: bool, v: u64| if b { v } else { 0 };
        Self {
            count: s.count,
            seq: s.seq,
            name: s.name,
            qual: s.qual,
            aux: s.aux,
            pos: on(opts.check_pos, s.pos),
            cigar: on(opts.check_cigar, s.cigar),
            mate: on(opts.check_mate, s.mate),
            combined: s.combined(opts),
        }
    }
}

/// The sums a job checked: of what it read and of what it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksums {
    /// The samtools command line that prints the same sums for the input and the output.
    pub command: String,
    /// Over the records read.
    pub read: RecordSums,
    /// Over the records written.
    pub written: RecordSums,
}

impl Checksums {
    /// Compares `read` with `written` (what = the job, for the message): equal sums give the
    /// report's value, different ones an error naming the first column that differs.
    pub fn check(
        what: &str,
        opts: &ChecksumOptions,
        read: &Sums,
        written: &Sums,
    ) -> sortase_exec::Result<Checksums> {
        if let Some(col) = read.first_difference(written, opts) {
            return Err(Error::new(
                ErrorKind::Internal,
                format!(
                    "{what}: the records written do not match the records read ({} column \
                     differs: read {} records {}, wrote {} records {}); the output was removed",
                    col,
                    read.count,
                    read.columns(opts).trim(),
                    written.count,
                    written.columns(opts).trim()
                ),
            ));
        }
        Ok(Checksums {
            command: opts.command_line(),
            read: RecordSums::new(read, opts),
            written: RecordSums::new(written, opts),
        })
    }

    /// The lines `-v` prints.
    pub fn to_text(&self) -> String {
        let r = &self.read;
        format!(
            "checksums ({}): read {} records, wrote {}; flag+seq {:08x} +name {:08x} +qual {:08x} \
             +aux {:08x} combined {:08x}: equal\n",
            self.command, r.count, self.written.count, r.seq, r.name, r.qual, r.aux, r.combined
        )
    }
}

/// A test-only fault in the sink: while set, every record named [`CORRUPT_NAME`] that a range
/// encoder writes gets its first base changed (after it was summed as read, before it is summed and
/// encoded as written). By name, so that tests running at the same time are not touched. Compiled
/// into this crate's tests only: release code has no hook.
#[cfg(test)]
pub(crate) static CORRUPT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The read name [`CORRUPT`] corrupts.
#[cfg(test)]
pub(crate) const CORRUPT_NAME: &[u8] = b"corrupt-me-in-flight";

/// `raw`, or a copy in `scratch` with one base changed when [`CORRUPT`] is set and the record is
/// named [`CORRUPT_NAME`].
#[cfg(test)]
pub(crate) fn corrupt_in_flight<'a>(raw: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    let r = sortase_bam::RecordRef::new_unchecked(&raw[4..]);
    if !CORRUPT.load(std::sync::atomic::Ordering::SeqCst)
        || r.read_name() != CORRUPT_NAME
        || r.l_seq() == 0
    {
        return raw;
    }
    scratch.clear();
    scratch.extend_from_slice(raw);
    let l_seq = r.l_seq() as usize;
    let at = raw.len() - r.aux_bytes().len() - l_seq - l_seq.div_ceil(2);
    scratch[at] ^= 0x30; // the first base's 4-bit code, changed
    scratch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OutputSpec, Runtime, SortJob};
    use std::sync::atomic::Ordering;

    fn sam(records: usize) -> String {
        let mut s = String::from("@SQ\tSN:chr1\tLN:100000\n");
        for i in 0..records {
            let name = if i == 123 {
                String::from_utf8(CORRUPT_NAME.to_vec()).unwrap()
            } else {
                format!("r{i}")
            };
            s += &format!(
                "{name}\t0\tchr1\t{}\t60\t8M\t*\t0\t0\tACGTACGT\tIIIIIIII\n",
                (i * 7919) % 90000 + 1
            );
        }
        s
    }

    #[test]
    fn a_sort_proves_its_sums_and_fails_on_a_record_corrupted_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.sam");
        std::fs::write(&input, sam(500)).unwrap();
        let out = dir.path().join("out.bam");
        let rt = Runtime::with_threads(2).unwrap();
        let job = SortJob {
            checksums: true,
            ..SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(&out))
        };
        let report = job.run(&rt).unwrap();
        let sums = report.checksums.expect("sort reports its sums");
        assert_eq!(sums.read, sums.written);
        assert_eq!(sums.read.count, 500);
        std::fs::remove_file(&out).unwrap();

        CORRUPT.store(true, Ordering::SeqCst);
        let e = job.run(&rt);
        CORRUPT.store(false, Ordering::SeqCst);
        let e = e.unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("do not match the records read"), "{msg}");
        assert!(msg.contains("flag+seq column differs"), "{msg}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            vec![std::ffi::OsString::from("in.sam")],
            "output left behind"
        );
    }
}
