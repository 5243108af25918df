//! FASTQ as a source of unmapped records (the FASTQ input of `sortase agd import`), as
//! `samtools import` reads it (samtools 1.24 `bam_import.c`, htslib `fastq_parse1`): every read
//! becomes one unmapped BAM record, the records of the files interleaved in samtools' file order
//! (`-0`, then `-1`, `-2`, then `-s`), one from each file per round.
//!
//! A record's name is the header up to the first white space, less a final `/<digit>`; that suffix
//! sets the flags (htslib): `/1` READ1, `/2` READ2, any other digit both, each with PAIRED, UNMAP and
//! MUNMAP. A read of `-1` is then PAIRED and READ1 (unless the suffix set READ1 or READ2), MUNMAP
//! when `-2` is given; a read of `-2` is PAIRED and READ2; `-0` and `-s` add nothing. So R1/R2 give
//! flags 77 and 141, a single file 4, an interleaved file with `/1` `/2` names 77 and 141. The header
//! is `samtools import --no-PG`'s: `@HD VN:1.6 SO:unsorted GO:query`, its `@CO Reverse with:` line
//! and `@RG` of `-R`/`-r` (each record then carries `RG:Z:<ID>`).
//!
//! Files are read with fq2bam's reader (`sortase_fasta::fastq`: plain, gzip or BGZF), which refuses a
//! truncated record, where samtools import stops with "truncated file". Unlike samtools import, R1
//! and R2 of one round must have the same name (after the suffix is dropped) and the files the same
//! number of records, else the import fails naming the file. Not read (refused by the CLI): `-i`
//! (CASAVA comments), `-T` (SAM tags in comments), `-N`, `--i1`/`--i2` and `--order`.

use crate::error::{Error, ErrorKind};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sortase_bam::flags::{MATE_UNMAPPED, PAIRED, READ1, READ2, UNMAPPED};
pub use sortase_fasta::fastq::looks_like_fastq;
use sortase_fasta::fastq::{base_name, FastqReader, Record};
use std::io::Read;
use std::path::Path;

/// The FASTQ files of an import, with `samtools import`'s options.
///
/// With the `clap` feature it is also those flags (`clap::Args`, flattened by `sortase agd
/// import`): each `help` is the text of `--help`, the doc comment the library's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FastqInput {
    /// FASTQ: single-ended reads (samtools import -0).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = '0', value_name = "FILE"))]
    pub unpaired: Option<String>,
    /// FASTQ: read 1 of pairs (samtools import -1).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = '1', long = "r1", value_name = "FILE"))]
    pub read1: Option<String>,
    /// FASTQ: read 2 of pairs (samtools import -2).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = '2', long = "r2", value_name = "FILE"))]
    pub read2: Option<String>,
    /// FASTQ: pairs and single reads in one file, told apart by /1 /2 name suffixes (samtools import -s).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = 's', value_name = "FILE"))]
    pub interleaved: Option<String>,
    /// FASTQ: add a read group line "@RG ID:STRING" and RG:Z:STRING to every record.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = 'R', long = "rg", value_name = "STRING"))]
    pub read_group: Option<String>,
    /// FASTQ: build up a complete @RG line (repeatable; fields joined by tabs).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(short = 'r', long = "rg-line", value_name = "STRING"))]
    pub read_group_line: Vec<String>,
}

/// Which option a file came from (samtools import's `enum fileno`, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unpaired,
    Read1,
    Read2,
    Interleaved,
}

impl FastqInput {
    /// The files in samtools' reading order.
    fn files(&self) -> Vec<(Kind, &str)> {
        [
            (Kind::Unpaired, &self.unpaired),
            (Kind::Read1, &self.read1),
            (Kind::Read2, &self.read2),
            (Kind::Interleaved, &self.interleaved),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.as_deref().map(|p| (k, p)))
        .collect()
    }

    /// The input files.
    pub fn paths(&self) -> Vec<&str> {
        self.files().into_iter().map(|(_, p)| p).collect()
    }

    /// The `@RG` line and the ID records get, as samtools import builds them.
    fn read_group(&self) -> anyhow::Result<Option<(String, String)>> {
        let line = match (self.read_group_line.join("\t"), &self.read_group) {
            (l, _) if l.starts_with('@') => l,
            (l, _) if !l.is_empty() => format!("@RG\t{l}"),
            (_, Some(id)) => format!("@RG\tID:{id}"),
            (_, None) => return Ok(None),
        };
        let Some(start) = line.find("\tID:") else {
            bail!(Error::argument(format!(
                "-r {line:?}: the read group line has no ID field"
            )));
        };
        let id = line[start + 4..]
            .split('\t')
            .next()
            .unwrap_or_default()
            .to_string();
        Ok(Some((line, id)))
    }

    /// samtools import's header (without `@PG`).
    pub fn header_text(&self) -> anyhow::Result<String> {
        let files = self.files();
        let mut reverse = String::new();
        for (kind, _) in &files {
            reverse.push_str(match kind {
                Kind::Unpaired => " -0 unpaired.fastq",
                Kind::Read1 => " -1 R1.fastq",
                Kind::Read2 => " -2 R2.fastq",
                Kind::Interleaved => " -n -o paired.fastq",
            });
        }
        let mut text = String::from("@HD\tVN:1.6\tSO:unsorted\tGO:query\n");
        text.push_str(&format!("@CO\tReverse with: samtools fastq{reverse}\n"));
        if let Some((line, _)) = self.read_group()? {
            text.push_str(&line);
            text.push('\n');
        }
        Ok(text)
    }
}

/// One open file and its record buffer.
struct Source {
    kind: Kind,
    reader: FastqReader,
    record: Record,
}

/// The reads of an import's FASTQ files as BAM records, in samtools import's order.
pub struct FastqRecords {
    sources: Vec<Source>,
    has_read2: bool,
    read_group: Option<String>,
    /// The record being built (BAM bytes without `block_size`).
    raw: Vec<u8>,
}

/// BAM's bin of an unmapped record at position -1 (htslib `hts_reg2bin(-1, 0, 14, 5)`).
const UNMAPPED_BIN: u16 = 4680;

/// htslib `seq_nt16_table`: base → 4-bit code (`U` is `T`, other letters `N`).
static NT16: [u8; 256] = sortase_bam::sam_parse::nt16_table(false);

impl FastqRecords {
    /// Opens the files of `input`; every byte read is counted by `progress`.
    pub fn open(input: &FastqInput, progress: &crate::progress::Progress) -> anyhow::Result<Self> {
        let files = input.files();
        if files.is_empty() {
            bail!(Error::argument("no FASTQ file given"));
        }
        let mut sources = Vec::with_capacity(files.len());
        for (kind, path) in &files {
            let raw: Box<dyn Read + Send> = if *path == "-" {
                Box::new(std::io::stdin())
            } else {
                Box::new(std::fs::File::open(path).with_context(|| format!("{path}: cannot open"))?)
            };
            let reader = FastqReader::from_reader(Box::new(progress.wrap(raw)), Path::new(path))?;
            sources.push(Source {
                kind: *kind,
                reader,
                record: Record::default(),
            });
        }
        Ok(Self {
            has_read2: input.read2.is_some(),
            read_group: input.read_group()?.map(|(_, id)| id),
            sources,
            raw: Vec::new(),
        })
    }

    /// Total size of the files (0 when unknown), for progress.
    pub fn size(input: &FastqInput) -> u64 {
        input
            .paths()
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Calls `f` on every record (BAM bytes without `block_size`), in samtools import's order,
    /// checking `cancel` every 64k rounds.
    pub fn for_each_record(
        &mut self,
        cancel: &crate::runtime::CancelFlag,
        mut f: impl FnMut(&[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut rounds = 0u64;
        loop {
            if rounds.is_multiple_of(65_536) {
                cancel.check()?;
            }
            let mut ended = 0;
            for s in &mut self.sources {
                if !s.reader.read(&mut s.record)? {
                    ended += 1;
                }
            }
            if ended == self.sources.len() {
                return Ok(());
            }
            if ended > 0 {
                return Err(self.unequal(rounds));
            }
            self.check_pair(rounds)?;
            for i in 0..self.sources.len() {
                self.encode(i)?;
                f(&self.raw)?;
            }
            rounds += 1;
        }
    }

    /// The error for files that end at different records (after `rounds` whole rounds).
    fn unequal(&self, rounds: u64) -> anyhow::Error {
        let ended: Vec<String> = self
            .sources
            .iter()
            .filter(|s| s.reader.records() == rounds)
            .map(|s| s.reader.path().display().to_string())
            .collect();
        let more: Vec<String> = self
            .sources
            .iter()
            .filter(|s| s.reader.records() > rounds)
            .map(|s| s.reader.path().display().to_string())
            .collect();
        anyhow::anyhow!(
            "{} ends after {rounds} records but {} {} more: the files must hold the same number of reads",
            ended.join(", "),
            more.join(", "),
            if more.len() == 1 { "has" } else { "have" }
        )
    }

    /// R1 and R2 of one round must be the same read.
    fn check_pair(&self, rounds: u64) -> anyhow::Result<()> {
        let find = |k| self.sources.iter().find(|s| s.kind == k);
        if let (Some(a), Some(b)) = (find(Kind::Read1), find(Kind::Read2)) {
            let (na, nb) = (a.record.name(), b.record.name());
            if stripped(na).0 != stripped(nb).0 {
                bail!(Error::new(
                    ErrorKind::Format,
                    format!(
                        "{}: record {}: read {} differs in name from read {} of {}: R1 and R2 \
                         must hold the same reads in the same order",
                        b.reader.path().display(),
                        rounds + 1,
                        String::from_utf8_lossy(nb),
                        String::from_utf8_lossy(na),
                        a.reader.path().display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Builds source `i`'s current read as a BAM record in `self.raw` (htslib `bam_set1`, SAM spec
    /// §4.2: unmapped, no CIGAR, mate `*`).
    fn encode(&mut self, i: usize) -> anyhow::Result<()> {
        let s = &self.sources[i];
        let rec = &s.record;
        let Some(qual) = rec.quality() else {
            bail!(Error::new(
                ErrorKind::Format,
                format!(
                    "{}: record {}: a FASTA record ('>'), not FASTQ",
                    s.reader.path().display(),
                    s.reader.records()
                ),
            ));
        };
        let (name, mut flag) = stripped(rec.name());
        match s.kind {
            Kind::Unpaired | Kind::Interleaved => {}
            Kind::Read1 => {
                if flag & (READ1 | READ2) == 0 {
                    flag |= READ1;
                }
                flag |= PAIRED;
                if self.has_read2 {
                    flag |= MATE_UNMAPPED;
                }
            }
            Kind::Read2 => flag |= PAIRED | READ2 | MATE_UNMAPPED,
        }
        if name.len() > 254 {
            bail!(Error::new(
                ErrorKind::Format,
                format!(
                    "{}: record {}: the name is {} bytes long, BAM allows 254",
                    s.reader.path().display(),
                    s.reader.records(),
                    name.len()
                ),
            ));
        }
        let seq = rec.sequence();
        let raw = &mut self.raw;
        raw.clear();
        raw.extend_from_slice(&(-1i32).to_le_bytes()); // refID
        raw.extend_from_slice(&(-1i32).to_le_bytes()); // pos
        raw.push(name.len() as u8 + 1); // l_read_name incl. NUL
        raw.push(0); // mapq
        raw.extend_from_slice(&UNMAPPED_BIN.to_le_bytes());
        raw.extend_from_slice(&0u16.to_le_bytes()); // n_cigar_op
        raw.extend_from_slice(&flag.to_le_bytes());
        raw.extend_from_slice(&(seq.len() as u32).to_le_bytes()); // l_seq
        raw.extend_from_slice(&(-1i32).to_le_bytes()); // next refID
        raw.extend_from_slice(&(-1i32).to_le_bytes()); // next pos
        raw.extend_from_slice(&0i32.to_le_bytes()); // tlen
        raw.extend_from_slice(name);
        raw.push(0);
        // HOT: once per base pair; two bases per byte, high nibble first (SAM spec §4.2.3).
        let mut pairs = seq.chunks_exact(2);
        for p in &mut pairs {
            raw.push(NT16[p[0] as usize] << 4 | NT16[p[1] as usize]);
        }
        if let [last] = pairs.remainder() {
            raw.push(NT16[*last as usize] << 4);
        }
        // htslib subtracts '!' from each quality character (wrapping, as C `char` arithmetic).
        raw.extend(qual.iter().map(|q| q.wrapping_sub(b'!')));
        if let Some(id) = &self.read_group {
            raw.extend_from_slice(b"RGZ");
            raw.extend_from_slice(id.as_bytes());
            raw.push(0);
        }
        Ok(())
    }
}

/// A name less a final `/<digit>` and the flags that suffix sets (htslib `fastq_parse1`: only for
/// names longer than 2 bytes).
fn stripped(name: &[u8]) -> (&[u8], u16) {
    let base = base_name(name); // the same suffix rule as minimap2's
    if base.len() == name.len() {
        return (name, UNMAPPED);
    }
    let read = match name[name.len() - 1] {
        b'1' => READ1,
        b'2' => READ2,
        _ => READ1 | READ2,
    };
    (base, PAIRED | UNMAPPED | MATE_UNMAPPED | read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_set_flags_as_htslib() {
        assert_eq!(stripped(b"a/1"), (&b"a"[..], 77));
        assert_eq!(stripped(b"a/2"), (&b"a"[..], 141));
        assert_eq!(stripped(b"a/3"), (&b"a"[..], 205));
        assert_eq!(stripped(b"/1"), (&b"/1"[..], 4));
        assert_eq!(stripped(b"a/x"), (&b"a/x"[..], 4));
    }

    #[test]
    fn headers_follow_samtools_import() {
        let input = FastqInput {
            read1: Some("a.fq".into()),
            read2: Some("b.fq".into()),
            unpaired: Some("c.fq".into()),
            read_group: Some("grp".into()),
            ..FastqInput::default()
        };
        assert_eq!(
            input.header_text().unwrap(),
            "@HD\tVN:1.6\tSO:unsorted\tGO:query\n\
             @CO\tReverse with: samtools fastq -0 unpaired.fastq -1 R1.fastq -2 R2.fastq\n\
             @RG\tID:grp\n"
        );
        let bad = FastqInput {
            interleaved: Some("a.fq".into()),
            read_group_line: vec!["SM:x".into()],
            ..FastqInput::default()
        };
        assert!(bad.header_text().unwrap_err().to_string().contains("no ID"));
    }
}
