//! samblaster's side outputs: discordant pairs (`-d`) and split reads (`-s`, read names suffixed
//! `_1`/`_2`) as SAM (BAM if the name ends in .bam), unmapped/clipped reads (`--unmappedFile`) as
//! FASTQ (FASTA when the first one written has no qualities). With `-e` (implied by `-r`),
//! duplicates are left out of them. Each is written under a temporary name and renamed by
//! [`Side::finish`].

use super::SamblasterOptions;
use crate::samblaster::side::{DISCORDANT, SPLITTER, UNMAPPED_CLIPPED};
use anyhow::{Context, Result};
use sortase_bam::{flags, sam_format::SEQ_CHARS, Header, RecordBuf, RecordRef};
use sortase_bgzf::CompressionLevel;
use sortase_exec::files::Destination;
use sortase_exec::output::{resolve_format, OutFormat, ResolvedOutput};
use sortase_exec::writer::SortedOutput;
use std::io::Write;
use std::path::{Path, PathBuf};

/// FASTQ/FASTA writer for `--unmappedFile`.
struct Unmapped {
    dest: Destination,
    out: std::io::BufWriter<Box<dyn Write + Send>>,
    fastq: Option<bool>,
}

/// The open side outputs.
pub(super) struct Side {
    discordant: Option<SortedOutput>,
    splitter: Option<SortedOutput>,
    unmapped: Option<Unmapped>,
    exclude_dups: bool,
    renamed: RecordBuf,
    name: Vec<u8>,
    paths: Vec<PathBuf>,
}

fn open_sam(path: &Path, header: &Header, threads: usize) -> Result<SortedOutput> {
    let level = CompressionLevel::samtools(-1);
    let format = resolve_format(None, Some(path), level, OutFormat::Sam)?;
    let out = ResolvedOutput::unindexed(Some(path), format);
    SortedOutput::open(&out, header, threads, &Default::default())
}

impl Side {
    /// Opens the side outputs `q` asks for.
    pub(super) fn open(
        q: &SamblasterOptions,
        exclude_dups: bool,
        header: &Header,
        threads: usize,
    ) -> Result<Self> {
        let unmapped = match q.unmapped_file.as_deref() {
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
        let sam = |p: &Option<PathBuf>| p.as_deref().map(|p| open_sam(p, header, threads));
        Ok(Self {
            discordant: sam(&q.discordant_file).transpose()?,
            splitter: sam(&q.splitter_file).transpose()?,
            unmapped,
            exclude_dups,
            renamed: RecordBuf::default(),
            name: Vec::new(),
            paths: [&q.discordant_file, &q.splitter_file, &q.unmapped_file]
                .into_iter()
                .flatten()
                .filter(|p| p.as_path() != Path::new("-"))
                .cloned()
                .collect(),
        })
    }

    /// Whether any side output is open.
    pub(super) fn any(&self) -> bool {
        self.discordant.is_some() || self.splitter.is_some() || self.unmapped.is_some()
    }

    /// Writes record `raw` (final flags and tags) to the side outputs its `marks` select.
    pub(super) fn write(&mut self, raw: &[u8], marks: u8) -> Result<()> {
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
                self.renamed.copy_from(raw);
                split_read_name(&mut self.renamed, &mut self.name);
                s.sink
                    .write(self.renamed.as_raw())
                    .with_context(|| s.name.clone())?;
            }
        }
        Ok(())
    }

    /// Flushes and renames the side outputs into place; returns their paths.
    pub(super) fn finish(self) -> Result<Vec<PathBuf>> {
        for out in [self.discordant, self.splitter].into_iter().flatten() {
            out.finish()?;
        }
        if let Some(mut u) = self.unmapped {
            u.out.flush().with_context(|| u.dest.name.clone())?;
            drop(u.out);
            u.dest.commit()?;
        }
        Ok(self.paths)
    }
}

/// Appends `_1`/`_2` to the read name of a paired record (samblaster's split-read file); a name
/// that would not fit in BAM's 255 bytes stays as it is. `name` is scratch space.
fn split_read_name(rec: &mut RecordBuf, name: &mut Vec<u8>) {
    let r = rec.record();
    let f = r.flag();
    if f & flags::PAIRED == 0 {
        return;
    }
    name.clear();
    name.extend_from_slice(r.read_name());
    name.extend_from_slice(if f & flags::READ1 != 0 { b"_1" } else { b"_2" });
    rec.set_read_name(name);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Record `name` with `flag`, no sequence, with its block_size.
    fn raw(name: &[u8], flag: u16) -> Vec<u8> {
        let mut rec = vec![0xff; 8]; // refID, pos = -1
        rec.extend_from_slice(&[name.len() as u8 + 1, 0, 0x48, 0x12]); // l_read_name, mapq, bin
        rec.extend_from_slice(&[0, 0]); // n_cigar_op
        rec.extend_from_slice(&flag.to_le_bytes());
        rec.extend_from_slice(&[0; 4]); // l_seq
        rec.extend_from_slice(&[0xff; 8]); // next_refID, next_pos
        rec.extend_from_slice(&[0; 4]); // tlen
        rec.extend_from_slice(name);
        rec.push(0);
        let mut out = (rec.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&rec);
        out
    }

    #[test]
    fn split_reads_get_their_segment_suffix() {
        let (mut rec, mut name) = (RecordBuf::default(), Vec::new());
        for (flag, want) in [(0x41, &b"r_1"[..]), (0x81, b"r_2"), (0x0, b"r")] {
            rec.copy_from(&raw(b"r", flag));
            split_read_name(&mut rec, &mut name);
            assert_eq!(rec.record().read_name(), want);
        }
        let long = vec![b'x'; 253];
        rec.copy_from(&raw(&long, 0x41));
        split_read_name(&mut rec, &mut name);
        assert_eq!(rec.record().read_name(), &long[..]);
    }
}
