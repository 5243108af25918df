//! samblaster's side outputs: discordant pairs (`-d`) and split reads (`-s`, read names suffixed
//! `_1`/`_2`) as SAM (BAM if the name ends in .bam), unmapped/clipped reads (`--unmappedFile`) as
//! FASTQ (FASTA when the first one written has no qualities). With `-e` (implied by `-r`),
//! duplicates are left out of them.

use crate::output::Destination;
use crate::record_sink::{resolve_format, OutFormat, SortedOutput};
use anyhow::{Context, Result};
use sortase_bam::{flags, sam_format::SEQ_CHARS, Header, RecordRef};
use sortase_bgzf::CompressionLevel;
use sortase_markdup::samblaster::side::{DISCORDANT, SPLITTER, UNMAPPED_CLIPPED};
use std::io::Write;
use std::path::Path;

/// FASTQ/FASTA writer for `--unmappedFile`.
struct Unmapped {
    dest: Destination,
    out: std::io::BufWriter<Box<dyn Write + Send>>,
    fastq: Option<bool>,
}

/// The open side outputs.
pub struct Side {
    discordant: Option<SortedOutput>,
    splitter: Option<SortedOutput>,
    unmapped: Option<Unmapped>,
    exclude_dups: bool,
    renamed: Vec<u8>,
}

fn open_sam(path: &Path, header: &Header, threads: usize) -> Result<SortedOutput> {
    let level = CompressionLevel::samtools(-1);
    let format = resolve_format(None, Some(path), level, OutFormat::Sam)?;
    SortedOutput::open(Some(path), None, format, header, threads, None)
}

impl Side {
    /// Opens the side outputs that were asked for.
    pub fn open(
        discordant: Option<&Path>,
        splitter: Option<&Path>,
        unmapped: Option<&Path>,
        exclude_dups: bool,
        header: &Header,
        threads: usize,
    ) -> Result<Self> {
        let unmapped = match unmapped {
            Some(p) => {
                let (dest, out) = Destination::open(Some(p))?;
                Some(Unmapped {
                    dest,
                    out: std::io::BufWriter::with_capacity(1 << 20, out),
                    fastq: None,
                })
            }
            None => None,
        };
        Ok(Self {
            discordant: discordant
                .map(|p| open_sam(p, header, threads))
                .transpose()?,
            splitter: splitter.map(|p| open_sam(p, header, threads)).transpose()?,
            unmapped,
            exclude_dups,
            renamed: Vec::new(),
        })
    }

    /// Whether any side output is open.
    pub fn any(&self) -> bool {
        self.discordant.is_some() || self.splitter.is_some() || self.unmapped.is_some()
    }

    /// Writes record `raw` (final flags and tags) to the side outputs its `marks` select.
    pub fn write(&mut self, raw: &[u8], marks: u8) -> Result<()> {
        let r = RecordRef::new_unchecked(&raw[4..]);
        if self.exclude_dups && r.flag() & flags::DUPLICATE != 0 {
            return Ok(());
        }
        if marks & UNMAPPED_CLIPPED != 0 {
            if let Some(u) = &mut self.unmapped {
                write_fastx(u, &r).with_context(|| u.dest.name.clone())?;
            }
        }
        if marks & DISCORDANT != 0 {
            if let Some(d) = &mut self.discordant {
                d.sink.write(raw).with_context(|| d.name.clone())?;
            }
        }
        if marks & SPLITTER != 0 {
            if let Some(s) = &mut self.splitter {
                rename(raw, &mut self.renamed);
                s.sink
                    .write(&self.renamed)
                    .with_context(|| s.name.clone())?;
            }
        }
        Ok(())
    }

    /// Flushes and renames the side outputs into place.
    pub fn finish(self) -> Result<()> {
        for out in [self.discordant, self.splitter].into_iter().flatten() {
            out.finish()?;
        }
        if let Some(mut u) = self.unmapped {
            u.out.flush().with_context(|| u.dest.name.clone())?;
            drop(u.out);
            u.dest.commit()?;
        }
        Ok(())
    }
}

/// `raw` with `_1`/`_2` appended to the read name of a paired record (samblaster's split-read
/// file), into `out`.
fn rename(raw: &[u8], out: &mut Vec<u8>) {
    let r = RecordRef::new_unchecked(&raw[4..]);
    out.clear();
    out.extend_from_slice(raw);
    let f = r.flag();
    if f & flags::PAIRED == 0 {
        return;
    }
    let suffix: &[u8] = if f & flags::READ1 != 0 { b"_1" } else { b"_2" };
    let name = r.read_name();
    let l_old = usize::from(raw[4 + 8]);
    let l_new = name.len() + 3;
    if l_new > 255 {
        return;
    }
    out.truncate(4 + 32);
    out.extend_from_slice(name);
    out.extend_from_slice(suffix);
    out.push(0);
    out.extend_from_slice(&raw[4 + 32 + l_old..]);
    out[4 + 8] = l_new as u8;
    let size = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&size.to_le_bytes());
}

fn write_fastx(u: &mut Unmapped, r: &RecordRef<'_>) -> std::io::Result<()> {
    let qual = r.quality_scores();
    let has_qual = !(qual.is_empty() || qual[0] == 0xff);
    let fastq = *u.fastq.get_or_insert(has_qual);
    let out = &mut u.out;
    out.write_all(if fastq { b"@" } else { b">" })?;
    out.write_all(r.read_name())?;
    let f = r.flag();
    if f & flags::PAIRED != 0 {
        out.write_all(if f & flags::READ1 != 0 { b"_1" } else { b"_2" })?;
    }
    out.write_all(b"\n")?;
    let n = r.l_seq() as usize;
    if n == 0 {
        out.write_all(b"*")?;
    }
    let packed = r.sequence_packed();
    for i in 0..n {
        let code = (packed[i / 2] >> (4 * (1 - i % 2))) & 15;
        out.write_all(&[SEQ_CHARS[usize::from(code)]])?;
    }
    if fastq {
        out.write_all(b"\n+\n")?;
        if has_qual {
            for &q in qual {
                out.write_all(&[q.saturating_add(33)])?;
            }
        } else {
            out.write_all(b"*")?;
        }
    }
    out.write_all(b"\n")
}
