//! Region retrieval with samtools faidx's output: `>region` (or `@region` ... `+` ... for FASTQ),
//! bases wrapped at `-n` (default: the input's line length), `-i` reverse complement with a strand
//! mark, warnings for truncated and empty results, and its handling of unknown names (the header is
//! still written; with `-c` the run continues).
//!
//! All regions are resolved first; the bytes they need are then read through [`RandomAccess`], so each
//! BGZF block is inflated once (per window) however many regions fall in it.

use crate::access::{RandomAccess, DEFAULT_WINDOW};
use crate::fai::{Fai, FaiRecord, Format};
use crate::hash::FastMap;
use crate::lines::count_graph;
use crate::region::{parse_region, POS_MAX};
use crate::FastaError;
use std::io::Write;

/// How regions are written.
#[derive(Debug, Clone)]
pub struct FaidxOptions {
    /// Bases per output line; `None`: the input's; `Some(0)`: no wrapping.
    pub line_len: Option<u64>,
    /// Reverse complement (qualities reversed).
    pub reverse: bool,
    /// Appended to the name on the forward strand.
    pub pos_mark: String,
    /// Appended to the name when reverse complemented.
    pub neg_mark: String,
    /// Keep going after a region whose sequence is not in the index (`-c`).
    pub keep_going: bool,
    /// FASTA or FASTQ output.
    pub format: Format,
}

/// samtools faidx `comp_base`: IUPAC complements, case kept, everything else unchanged.
fn complement(b: u8) -> u8 {
    match b {
        b'A' => b'T',
        b'B' => b'V',
        b'C' => b'G',
        b'D' => b'H',
        b'G' => b'C',
        b'H' => b'D',
        b'K' => b'M',
        b'M' => b'K',
        b'R' => b'Y',
        b'T' | b'U' => b'A',
        b'V' => b'B',
        b'Y' => b'R',
        b'a' => b't',
        b'b' => b'v',
        b'c' => b'g',
        b'd' => b'h',
        b'g' => b'c',
        b'h' => b'd',
        b'k' => b'm',
        b'm' => b'k',
        b'r' => b'y',
        b't' | b'u' => b'a',
        b'v' => b'b',
        b'y' => b'r',
        other => other,
    }
}

enum Plan<'a> {
    Missing,
    Found {
        rec: &'a FaiRecord,
        beg: u64,
        end: u64,
        /// Parsed end (for the "Truncated sequence" warning) and parsed length.
        asked: Option<i64>,
        seq: usize,
        qual: Option<usize>,
    },
}

/// Byte span holding bases `beg..end` of a record laid out with regular lines.
fn span(offset: u64, rec: &FaiRecord, beg: u64, end: u64) -> (u64, u64) {
    if end <= beg || rec.line_bases == 0 {
        return (offset, 0);
    }
    let at = |i: u64| offset + i / rec.line_bases * rec.line_width + i % rec.line_bases;
    let start = at(beg);
    (start, at(end - 1) + 1 - start)
}

/// Each region's plan (a region not in the index ends the plans unless `keep_going`) and the byte
/// spans to fetch: the bases of each region found, then its qualities (FASTQ).
fn plan_regions<'a>(
    fai: &'a Fai,
    regions: &[String],
    opts: &FaidxOptions,
) -> (Vec<(u64, u64)>, Vec<Plan<'a>>) {
    let ids: FastMap<&[u8], usize> = fai
        .records
        .iter()
        .enumerate()
        .rev()
        .map(|(i, r)| (&r.name[..], i))
        .collect();
    let lookup = |n: &str| ids.get(n.as_bytes()).copied();
    let mut ranges = Vec::new();
    let mut plans = Vec::new();
    for region in regions {
        let Some(r) = parse_region(region, lookup) else {
            plans.push(Plan::Missing);
            if !opts.keep_going {
                break;
            }
            continue;
        };
        let rec = &fai.records[r.id];
        let len = rec.length as i64;
        let (mut beg, mut end) = (r.beg, r.end.min(len));
        if beg < 0 {
            // htslib 1.24 returns nothing for `name:0-N` (checked against samtools 1.24).
            beg = 0;
            end = 0;
        }
        beg = beg.min(len);
        if beg > end {
            beg = end;
        }
        let (beg, end) = (beg as u64, end as u64);
        let asked = (r.end < POS_MAX).then_some(r.end - r.beg);
        ranges.push(span(rec.offset, rec, beg, end));
        let seq = ranges.len() - 1;
        let qual = rec
            .qual_offset
            .filter(|_| opts.format == Format::Fastq)
            .map(|q| {
                ranges.push(span(q, rec, beg, end));
                ranges.len() - 1
            });
        plans.push(Plan::Found {
            rec,
            beg,
            end,
            asked,
            seq,
            qual,
        });
    }
    (ranges, plans)
}

/// Writes every region to `out` (warnings go to `warn`). Stops with an error at an unknown name
/// unless `keep_going`, after writing that region's header as samtools does.
pub fn write_regions(
    fai: &Fai,
    access: &RandomAccess,
    regions: &[String],
    opts: &FaidxOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(String),
) -> Result<(), FastaError> {
    let (ranges, plans) = plan_regions(fai, regions, opts);
    let mut fetched: Vec<Vec<u8>> = vec![Vec::new(); ranges.len()];
    // Regions are written after all their bytes are read; the window bounds that memory.
    let mut done = 0;
    let mut next_range = 0;
    let mut write_ready = |fetched: &mut Vec<Vec<u8>>, upto: usize| -> Result<(), FastaError> {
        while done < plans.len() {
            let need = match &plans[done] {
                Plan::Missing => next_range,
                Plan::Found { seq, qual, .. } => qual.unwrap_or(*seq) + 1,
            };
            if need > upto {
                break;
            }
            write_one(
                fai,
                access,
                &regions[done],
                &plans[done],
                fetched,
                opts,
                out,
                warn,
            )?;
            if let Plan::Found { seq, qual, .. } = &plans[done] {
                fetched[*seq] = Vec::new();
                if let Some(q) = qual {
                    fetched[*q] = Vec::new();
                }
                next_range = qual.unwrap_or(*seq) + 1;
            }
            done += 1;
        }
        Ok(())
    };
    let window = DEFAULT_WINDOW;
    let mut at = 0;
    while at < ranges.len() {
        let mut end = at;
        let mut bytes = 0;
        while end < ranges.len() && (end == at || bytes + ranges[end].1 <= window) {
            bytes += ranges[end].1;
            end += 1;
        }
        access.fetch(&ranges[at..end], window, |i, b| {
            fetched[at + i] = b.to_vec();
            Ok(())
        })?;
        write_ready(&mut fetched, end)?;
        at = end;
    }
    write_ready(&mut fetched, ranges.len())
}

/// Bases (or qualities) of one range: its printable bytes, read further if irregular lines left
/// fewer than `want` in the computed span (htslib keeps reading until it has them).
fn printable(
    access: &RandomAccess,
    raw: &[u8],
    start: u64,
    want: u64,
) -> Result<Vec<u8>, FastaError> {
    let mut seq: Vec<u8> = raw
        .iter()
        .copied()
        .filter(|b| b.wrapping_sub(0x21) < 0x5e)
        .collect();
    let mut at = start + raw.len() as u64;
    while (seq.len() as u64) < want {
        let missing = want - seq.len() as u64;
        let mut more = Vec::new();
        let mut len = missing * 2 + 64;
        loop {
            match access.fetch(&[(at, len)], len, |_, b| {
                more = b.to_vec();
                Ok(())
            }) {
                Ok(()) => break,
                Err(FastaError::PastEnd {
                    offset, len: end, ..
                }) if end > offset => len = end - offset,
                Err(FastaError::PastEnd { .. }) => {
                    return Err(FastaError::Incomplete(
                        "failed to retrieve block: unexpected end of file".into(),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        for &b in &more {
            if seq.len() as u64 == want {
                break;
            }
            if count_graph(&[b]) == 1 {
                seq.push(b);
            }
        }
        at += more.len() as u64;
    }
    seq.truncate(want as usize);
    Ok(seq)
}

fn write_wrapped(out: &mut dyn Write, s: &[u8], wrap: u64) -> std::io::Result<()> {
    let wrap = if wrap == 0 { usize::MAX } else { wrap as usize };
    for line in s.chunks(wrap) {
        out.write_all(line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A region not in the index: samtools' warnings, and an error unless `keep_going` (its header is
/// written already).
fn write_missing(
    region: &str,
    opts: &FaidxOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(String),
) -> Result<(), FastaError> {
    warn(format!(
        "[W::fai_get_val] Reference {region} not found in FASTA file, returning empty sequence"
    ));
    warn(format!("[faidx] Failed to fetch sequence in {region}"));
    if !opts.keep_going {
        return Err(FastaError::BadIndex(format!(
            "sequence '{region}' not found in the index (use -c to continue past missing regions)"
        )));
    }
    if opts.format == Format::Fastq {
        out.write_all(b"+\n")?;
        warn(format!("[faidx] Failed to fetch sequence in {region}"));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn write_one(
    fai: &Fai,
    access: &RandomAccess,
    region: &str,
    plan: &Plan,
    fetched: &[Vec<u8>],
    opts: &FaidxOptions,
    out: &mut dyn Write,
    warn: &mut dyn FnMut(String),
) -> Result<(), FastaError> {
    let marker = if opts.format == Format::Fasta {
        '>'
    } else {
        '@'
    };
    let mark = if opts.reverse {
        &opts.neg_mark
    } else {
        &opts.pos_mark
    };
    writeln!(out, "{marker}{region}{mark}")?;
    let Plan::Found {
        rec,
        beg,
        end,
        asked,
        seq,
        qual,
    } = plan
    else {
        return write_missing(region, opts, out, warn);
    };
    let _ = fai;
    let want = end - beg;
    let wrap = opts.line_len.unwrap_or(rec.line_bases);
    let note = |warn: &mut dyn FnMut(String)| {
        if want == 0 {
            warn(format!("[faidx] Zero length sequence: {region}"));
        } else if asked.is_some_and(|a| a != want as i64) {
            warn(format!("[faidx] Truncated sequence: {region}"));
        }
    };
    let start = span(rec.offset, rec, *beg, *end).0;
    let mut bases = printable(access, &fetched[*seq], start, want)?;
    if opts.reverse {
        bases.reverse();
        for b in &mut bases {
            *b = complement(*b);
        }
    }
    note(warn);
    write_wrapped(out, &bases, wrap)?;
    if let (Some(q), Some(qoff)) = (qual, rec.qual_offset) {
        let start = span(qoff, rec, *beg, *end).0;
        let mut quals = printable(access, &fetched[*q], start, want)?;
        if opts.reverse {
            quals.reverse();
        }
        out.write_all(b"+\n")?;
        note(warn);
        write_wrapped(out, &quals, wrap)?;
    }
    Ok(())
}
