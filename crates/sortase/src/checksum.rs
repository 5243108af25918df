//! [`ChecksumJob`]: `samtools checksum` (order-independent sums of flag, sequence, name, qualities,
//! selected aux tags, and optionally position, CIGAR and mate, per read group), with the same text.
//! The sums are those every job that writes records checks (sortase_exec::proof); batches are summed on
//! the runtime's threads.
//!
//! ```
//! use sortase::{ChecksumJob, Runtime};
//! # let dir = tempfile::tempdir().unwrap();
//! # let input = dir.path().join("in.sam");
//! # std::fs::write(&input, "@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n").unwrap();
//! let report = ChecksumJob::new(input.to_str().unwrap()).run(&Runtime::with_threads(2)?)?;
//! assert_eq!(report.all.count, 1);
//! assert!(report.to_text().starts_with("# Checksum 1.0 for file: "));
//! # Ok::<(), sortase::Error>(())
//! ```

use anyhow::Context;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_bam::checksum::{ChecksumOptions, Checksummer, Sums};
use sortase_bam::{flags, RecordBatch};
use sortase_exec::error::{Error, Result};
use sortase_exec::input::Input;
use sortase_exec::runtime::Runtime;
use std::collections::HashMap;

/// samtools checksum on one input.
///
/// With the `clap` feature it is also samtools checksum's flags (`clap::Args`, flattened by
/// `sortase checksum`): a field's `arg(...)` is its flag and `--help` text; `input` (one job per
/// input) is the CLI's to fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ChecksumJob {
    /// The input path (`-`: standard input).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub input: String,
    /// Leave out records with any of these flags.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'F', long = "exclude-flags", value_name = "FLAG", default_value = "0x900",
            value_parser = sortase_bam::flags::parse)
    )]
    pub exclude_flags: u16,
    /// Leave out records without all of these flags.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'f', long = "require-flags", value_name = "FLAG", default_value = "0",
            value_parser = sortase_bam::flags::parse)
    )]
    pub require_flags: u16,
    /// BAM flags to use in checksums.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'b', long = "flag-mask", value_name = "FLAG", default_value = "0x0c1",
            value_parser = sortase_bam::flags::parse)
    )]
    pub flag_mask: u16,
    /// Do not reverse-complement sequences.
    #[cfg_attr(feature = "clap", arg(short = 'c', long = "no-rev-comp"))]
    pub no_rev_comp: bool,
    /// Select tags to checksum.
    #[cfg_attr(
        feature = "clap",
        arg(
            short = 't',
            long = "tags",
            value_name = "STR[,STR]",
            default_value = "BC,FI,QT,RT,TC"
        )
    )]
    pub tags: String,
    /// Also checksum CHR / POS.
    #[cfg_attr(feature = "clap", arg(short = 'P', long = "check-pos"))]
    pub check_pos: bool,
    /// Also checksum MAPQ / CIGAR.
    #[cfg_attr(feature = "clap", arg(short = 'C', long = "check-cigar"))]
    pub check_cigar: bool,
    /// Also checksum PNEXT / RNEXT / TLEN.
    #[cfg_attr(feature = "clap", arg(short = 'M', long = "check-mate"))]
    pub check_mate: bool,
    /// Also show QC pass/fail lines.
    #[cfg_attr(feature = "clap", arg(short = 'q', long = "show-qc"))]
    pub show_qc: bool,
    /// Show lines with 0 counts.
    #[cfg_attr(feature = "clap", arg(short = 'v', long = "verbose"))]
    pub verbose: bool,
    /// Format output as tab delimited text.
    #[cfg_attr(feature = "clap", arg(short = 'T', long = "tabs"))]
    pub tabs: bool,
    /// Reference FASTA (CRAM input).
    #[cfg_attr(feature = "clap", arg(long = "reference", value_name = "FILE"))]
    pub reference: Option<std::path::PathBuf>,
}

/// One group's rows: all, QC pass, QC fail.
pub type Rows = [Sums; 3];

/// What samtools checksum prints.
#[derive(Debug, Clone)]
pub struct ChecksumReport {
    /// The file name as given.
    pub input: String,
    /// The options summed under.
    pub options: ChecksumOptions,
    /// All selected records.
    pub all: Sums,
    rows: Groups,
    show_qc: bool,
    verbose: bool,
    tabs: bool,
}

#[derive(Debug, Clone, Default)]
struct Groups {
    all: Rows,
    no_rg: Rows,
    by_rg: HashMap<Vec<u8>, Rows>,
}

fn merge_rows(a: &mut Rows, b: &Rows) {
    for (x, y) in a.iter_mut().zip(b) {
        x.merge(y);
    }
}

impl Groups {
    fn merge(mut self, other: Groups) -> Groups {
        merge_rows(&mut self.all, &other.all);
        merge_rows(&mut self.no_rg, &other.no_rg);
        for (rg, rows) in other.by_rg {
            merge_rows(self.by_rg.entry(rg).or_default(), &rows);
        }
        self
    }
}

/// The value of the last `RG:Z` tag (samtools keeps the last one it sees).
fn read_group(rec: &[u8]) -> Option<&[u8]> {
    let r = sortase_bam::RecordRef::new_unchecked(rec);
    r.aux()
        .filter(|f| f.tag() == *b"RG" && f.value_type() == b'Z')
        .last()
        .map(|f| f.value())
}

fn add(rows: &mut Rows, qc_fail: bool, c: &sortase_bam::checksum::Crcs) {
    rows[0].add(c);
    rows[if qc_fail { 2 } else { 1 }].add(c);
}

fn batch_groups(opts: &ChecksumOptions, batch: &RecordBatch) -> Groups {
    (0..batch.len())
        .into_par_iter()
        .with_min_len(2048)
        .fold(
            || (Checksummer::new(opts.clone()), Groups::default()),
            |(mut c, mut g), i| {
                let rec = &batch.raw(i)[4..];
                if let Some(crcs) = c.crcs(rec) {
                    let fail = u16::from_le_bytes([rec[14], rec[15]]) & flags::QC_FAIL != 0;
                    let group = match read_group(rec) {
                        Some(rg) => match g.by_rg.get_mut(rg) {
                            Some(rows) => rows,
                            None => g.by_rg.entry(rg.to_vec()).or_default(),
                        },
                        None => &mut g.no_rg,
                    };
                    add(group, fail, &crcs);
                    add(&mut g.all, fail, &crcs);
                }
                (c, g)
            },
        )
        .map(|(_, g)| g)
        .reduce(Groups::default, Groups::merge)
}

impl ChecksumJob {
    /// samtools checksum's defaults on `input`.
    pub fn new(input: impl Into<String>) -> Self {
        let d = ChecksumOptions::default();
        Self {
            input: input.into(),
            exclude_flags: d.exclude_flags,
            require_flags: d.require_flags,
            flag_mask: d.flag_mask,
            no_rev_comp: false,
            tags: d.tag_string(),
            check_pos: false,
            check_cigar: false,
            check_mate: false,
            show_qc: false,
            verbose: false,
            tabs: false,
            reference: None,
        }
    }

    /// The options the sums are computed under.
    pub fn options(&self) -> Result<ChecksumOptions> {
        let mut tags = Vec::new();
        for t in self.tags.split(',').filter(|t| !t.is_empty()) {
            let b = t.as_bytes();
            if b.len() != 2 || !b.iter().all(|c| (b'0'..=b'z').contains(c)) {
                return Err(Error::argument(format!(
                    "-t {}: tags are two characters each, comma-separated (e.g. BC,RT); \
                     '*' is not supported",
                    self.tags
                )));
            }
            tags.push([b[0], b[1]]);
        }
        Ok(ChecksumOptions {
            exclude_flags: self.exclude_flags,
            require_flags: self.require_flags,
            flag_mask: self.flag_mask,
            rev_comp: !self.no_rev_comp,
            tags,
            check_pos: self.check_pos,
            check_cigar: self.check_cigar,
            check_mate: self.check_mate,
        })
    }

    /// Sums the input on `rt`.
    pub fn run(&self, rt: &Runtime) -> Result<ChecksumReport> {
        let opts = self.options()?;
        let size = std::fs::metadata(&self.input).map(|m| m.len()).unwrap_or(0);
        let progress = rt.progress("checksum", size);
        let mut input = Input::open(
            &self.input,
            rt.threads(),
            self.reference.as_deref(),
            &progress,
        )
        .with_context(|| self.input.clone())?;
        input.set_cancel(rt.cancel_flag().clone());
        let mut groups = Groups::default();
        input
            .for_each_batch(|b| {
                let g = rt.install(|| batch_groups(&opts, &b));
                groups = std::mem::take(&mut groups).merge(g);
                Ok(())
            })
            .with_context(|| self.input.clone())?;
        progress.finish();
        Ok(ChecksumReport {
            input: self.input.clone(),
            all: groups.all[0],
            options: opts,
            rows: groups,
            show_qc: self.show_qc,
            verbose: self.verbose,
            tabs: self.tabs,
        })
    }
}

/// htslib's `bam_flag2str`: the names of the set bits, comma-separated.
fn flag_names(flag: u16) -> String {
    const NAMES: [&str; 12] = [
        "PAIRED",
        "PROPER_PAIR",
        "UNMAP",
        "MUNMAP",
        "REVERSE",
        "MREVERSE",
        "READ1",
        "READ2",
        "SECONDARY",
        "QCFAIL",
        "DUP",
        "SUPPLEMENTARY",
    ];
    let set: Vec<&str> = (0..12)
        .filter(|b| flag & (1 << b) != 0)
        .map(|b| NAMES[b])
        .collect();
    set.join(",")
}

impl ChecksumReport {
    /// The text samtools checksum prints (its default layout, or `-T`).
    pub fn to_text(&self) -> String {
        let o = &self.options;
        let pad = |n: usize| {
            if self.tabs {
                "\t".to_string()
            } else {
                " ".repeat(n)
            }
        };
        let mut s = format!("# Checksum 1.0 for file:{}{}\n", pad(1), self.input);
        s += &format!("# Aux tags:{}{}\n", pad(10), o.tag_string());
        s += &format!("# BAM flags:{}{}\n", pad(9), flag_names(o.flag_mask));
        if self.tabs {
            s += "\n# Group\tQC\tcount\tflag+seq\t+name\t+qual\t+aux";
        } else {
            s += "\n# Group    QC          count  flag+seq  +name     +qual     +aux    ";
        }
        for (on, tab, text) in [
            (o.check_pos, "\t+chr/pos", "  +chr/pos"),
            (o.check_cigar, "\t+cigar", "  +cigar  "),
            (o.check_mate, "\t+mate", "  +mate   "),
        ] {
            if on {
                s += if self.tabs { tab } else { text };
            }
        }
        s += if self.tabs {
            "\tcombined\n"
        } else {
            "  combined\n"
        };
        self.rows_text(&mut s, "all", &self.rows.all);
        let n = &self.rows.no_rg;
        if self.verbose || n[0].count + n[1].count > 0 {
            self.rows_text(&mut s, "-", n);
        }
        let mut rgs: Vec<_> = self.rows.by_rg.iter().collect();
        rgs.sort_by(|a, b| a.0.cmp(b.0));
        for (rg, rows) in rgs {
            self.rows_text(&mut s, &String::from_utf8_lossy(rg), rows);
        }
        s
    }

    fn rows_text(&self, s: &mut String, group: &str, rows: &Rows) {
        let o = &self.options;
        for (r, qc) in ["all", "pass", "fail"].iter().enumerate() {
            if r > 0 && !self.show_qc {
                continue;
            }
            let sums = &rows[r];
            if !self.verbose && sums.count == 0 {
                continue;
            }
            if self.tabs {
                *s += &format!(
                    "{group}\t{qc}\t{}\t{:x}\t{:x}\t{:x}\t{:x}",
                    sums.count, sums.seq, sums.name, sums.qual, sums.aux
                );
                for v in sums.optional(o) {
                    *s += &format!("\t{v:x}");
                }
                *s += &format!("\t{:x}\n", sums.combined(o));
            } else {
                *s += &format!("{group:<10} {qc:<4} {}\n", sums.columns(o));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_as_htslib() {
        assert_eq!(flag_names(0xc1), "PAIRED,READ1,READ2");
        assert_eq!(flag_names(0), "");
    }
}
