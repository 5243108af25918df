//! Naming the reference a failed CRAM decode was missing. htslib only logs which reference it could
//! not load (and its log is off), so after a failure the `@SQ` lines are checked against the FASTA's
//! sequence names: the first unavailable one from the last decoded record's reference on (records are
//! read in file order, so the failing slice is at or after it) is the one reported.

use sortase_bam::Header;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// The sequence names of a FASTA: from its `.fai` if there is one, else from its `>` lines. `None`
/// if neither can be read.
fn fasta_names(fasta: &Path) -> Option<HashSet<Vec<u8>>> {
    let mut fai = fasta.as_os_str().to_owned();
    fai.push(".fai");
    if let Ok(f) = std::fs::File::open(&fai) {
        return BufReader::new(f)
            .split(b'\n')
            .map(|l| l.map(|l| l.split(|&c| c == b'\t').next().unwrap_or_default().to_vec()))
            .collect::<Result<_, _>>()
            .ok();
    }
    let f = std::fs::File::open(fasta).ok()?;
    let mut names = HashSet::new();
    for line in BufReader::new(f).split(b'\n') {
        let line = line.ok()?;
        if let Some(rest) = line.strip_prefix(b">") {
            let end = rest
                .iter()
                .position(|c| c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            names.insert(rest[..end].to_vec());
        }
    }
    Some(names)
}

/// `(SN, M5)` of each `@SQ` line, in header order.
fn sq_lines(header: &Header) -> Vec<(String, Option<String>)> {
    header
        .text()
        .lines()
        .filter(|l| l.starts_with("@SQ\t"))
        .filter_map(|l| {
            let field = |key: &str| {
                l.split('\t')
                    .find_map(|f| f.strip_prefix(key))
                    .map(str::to_string)
            };
            Some((field("SN:")?, field("M5:")))
        })
        .collect()
}

/// The message for a decode (or, `writing`, encode) failure that a missing reference explains, or
/// `None`.
pub fn diagnose(
    header: &Header,
    reference: Option<&Path>,
    last_tid: i32,
    writing: bool,
) -> Option<String> {
    let sqs = sq_lines(header);
    let available = match reference {
        Some(fasta) => fasta_names(fasta).unwrap_or_default(),
        None => HashSet::new(),
    };
    let from = usize::try_from(last_tid).unwrap_or(0);
    let missing = |(sn, _): &&(String, Option<String>)| !available.contains(sn.as_bytes());
    let (sn, m5) = sqs
        .iter()
        .skip(from)
        .find(missing)
        .or_else(|| sqs.iter().find(missing))?;
    let m5 = m5.as_deref().unwrap_or("none");
    Some(match reference {
        Some(fasta) if writing => format!(
            "reference sequence for @SQ SN:{sn} (M5:{m5}) is not in {}: give the FASTA the \
             records were aligned to",
            fasta.display()
        ),
        Some(fasta) => format!(
            "reference sequence for @SQ SN:{sn} (M5:{m5}) is not in {}: give the FASTA the CRAM \
             was written against",
            fasta.display()
        ),
        None => format!(
            "no reference for @SQ SN:{sn} (M5:{m5}): give -T/--reference FILE, or make it \
             available by MD5 through REF_PATH/REF_CACHE"
        ),
    })
}
