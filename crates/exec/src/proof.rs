//! Proof that nothing was lost: the order-independent sums of `samtools checksum` (crates/bam
//! `checksum`) over the records a job read and over the records it wrote, compared before the output
//! is renamed into place. A job whose sums differ fails and leaves no output.
//!
//! The sums are computed where records are already touched: input batches are summed on the
//! runtime's pool as they arrive ([`batch_sums`]), output ranges on the workers that encode them
//! ([`SumsCell`]). Jobs that keep every record and field (sort, merge, markdup, AGD import/export)
//! use [`ChecksumOptions::every_record`] (`samtools checksum -F 0 -P -C -M`); markdup's duplicate
//! flag is outside samtools' flag mask (PAIRED,READ1,READ2), so it is left out by construction.

use crate::error::{Error, ErrorKind};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::{ChecksumOptions, Checksummer, Sums};
#[cfg(test)]
use sortase_bam::checksum::{Fault, Tally};
use sortase_bam::RecordBatch;
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

/// The sums of a batch's records on the calling thread (for workers that are already parallel).
pub fn batch_sums_here(opts: &ChecksumOptions, batch: &RecordBatch) -> Sums {
    let mut c = Checksummer::new(opts.clone());
    batch.iter_raw().for_each(|r| c.add(r));
    c.sums
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

/// The sums a job checked: of what it read and of what it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksums {
    /// The samtools command line that prints the same sums for the input and the output.
    pub command: String,
    /// Over the records read.
    pub read: Sums,
    /// Over the records written.
    pub written: Sums,
    /// Over the records the job left out on purpose (markdup `-r`'s duplicates), summed as they
    /// were dropped: `read` = `written` + `left_out`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<Sums>,
    /// samtools' "combined" column of `read`.
    pub combined: u64,
}

impl Checksums {
    /// Compares `read` with `written` (what = the job, for the message): equal sums give the
    /// report's value, different ones an error naming the first column that differs.
    pub fn check(
        what: &str,
        opts: &ChecksumOptions,
        read: &Sums,
        written: &Sums,
    ) -> crate::Result<Checksums> {
        Self::check_left_out(what, opts, read, written, None)
    }

    /// [`Checksums::check`] for a job that leaves records out on purpose: `read` must equal
    /// `written` and `left_out` together.
    pub fn check_left_out(
        what: &str,
        opts: &ChecksumOptions,
        read: &Sums,
        written: &Sums,
        left_out: Option<&Sums>,
    ) -> crate::Result<Checksums> {
        let mut out = *written;
        if let Some(l) = left_out {
            out.merge(l);
        }
        if let Some(col) = read.first_difference(&out, opts) {
            let left = left_out.map_or(String::new(), |l| {
                format!(" (and left out {} records)", l.count)
            });
            return Err(Error::new(
                ErrorKind::Internal,
                format!(
                    "{what}: the records written do not match the records read ({} column \
                     differs: read {} records {}, wrote {} records {}{left}); the output was \
                     removed",
                    col,
                    read.count,
                    read.columns(opts).trim(),
                    out.count,
                    out.columns(opts).trim()
                ),
            ));
        }
        Ok(Checksums {
            command: opts.command_line(),
            read: *read,
            written: *written,
            left_out: left_out.copied(),
            combined: read.combined(opts),
        })
    }

    /// The line `-v` prints.
    pub fn to_text(&self) -> String {
        let r = &self.read;
        let left = self
            .left_out
            .map_or(String::new(), |l| format!(" and left out {}", l.count));
        format!(
            "checksums ({}): read {} records, wrote {}{left}; flag+seq {:08x} +name {:08x} \
             +qual {:08x} +aux {:08x} combined {:08x}: equal\n",
            self.command, r.count, self.written.count, r.seq, r.name, r.qual, r.aux, self.combined
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &[u8] = b"corrupt-me-in-flight";

    fn sam(records: usize) -> String {
        let mut s = String::from("@SQ\tSN:chr1\tLN:100000\n");
        for i in 0..records {
            let name = if i == 123 {
                String::from_utf8(NAME.to_vec()).unwrap()
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
    fn the_fault_changes_one_base_of_the_named_record_and_the_check_fails() {
        let text = sam(300);
        let header =
            sortase_bam::Header::from_sam_text(String::from("@SQ\tSN:chr1\tLN:100000\n")).unwrap();
        let records: Vec<Vec<u8>> = text
            .lines()
            .skip(1)
            .map(|l| {
                let mut r = Vec::new();
                sortase_bam::sam_parse::parse_record(l.as_bytes(), &header, &mut r).unwrap();
                r
            })
            .collect();
        let opts = ChecksumOptions::every_record();
        let mut read = Checksummer::new(opts.clone());
        let mut clean = Tally::new(&opts, &Fault::default());
        let mut faulty = Tally::new(&opts, &Fault::named(NAME));
        let mut changed = 0;
        for r in &records {
            read.add(r);
            clean.pass(r);
            changed += usize::from(faulty.pass(r) != &r[..]);
        }
        assert_eq!(changed, 1);
        assert!(Checksums::check("t", &opts, &read.sums, &clean.sums()).is_ok());
        let e = Checksums::check("t", &opts, &read.sums, &faulty.sums()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("flag+seq column differs"), "{msg}");
        // Records left out on purpose are accounted for.
        let mut kept = Tally::new(&opts, &Fault::default());
        let mut dropped = Tally::new(&opts, &Fault::default());
        for (i, r) in records.iter().enumerate() {
            if i % 3 == 0 {
                dropped.pass(r);
            } else {
                kept.pass(r);
            }
        }
        let (k, d) = (kept.sums(), dropped.sums());
        let c = Checksums::check_left_out("t", &opts, &read.sums, &k, Some(&d)).unwrap();
        assert!(c
            .to_text()
            .contains("read 300 records, wrote 200 and left out 100;"));
        assert!(Checksums::check("t", &opts, &read.sums, &k).is_err());
    }
}
