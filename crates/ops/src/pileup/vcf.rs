//! The sites of a VCF (plain or BGZF-compressed) as snp-pileup reads them: every data line in file
//! order, of which only biallelic SNVs (one REF base, one ALT base) are kept.
//!
//! Only CHROM, POS, REF and ALT are needed, so lines are split by hand rather than parsed into noodles
//! records (whose INFO/FORMAT handling this job never uses): the whole command on the 1.2 M-line bench
//! VCF with a near-empty BAM takes 0.56 s, so VCF reading is a few percent of a real run; sites are kept
//! in 12 bytes each, which matters for VCFs of tens of millions of sites. htslib's rules decide what a
//! "biallelic SNV" is: `n_allele == 2` (an ALT of `.` is no allele, a comma separates alleles) and
//! both alleles one character long.

use super::PileupError;
use sortase_bgzf::SeekReader;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// One biallelic SNV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    /// Index into [`Sites::contigs`].
    pub contig: u32,
    /// 0-based position.
    pub pos: i32,
    /// REF character as written.
    pub reference: u8,
    /// ALT character as written.
    pub alternate: u8,
}

/// The SNVs of a VCF, in file order, with the contig names they use.
#[derive(Debug, Default)]
pub struct Sites {
    /// Contig names in order of first appearance.
    pub contigs: Vec<String>,
    /// The biallelic SNVs.
    pub sites: Vec<Site>,
    /// Data lines read (all variants, SNVs or not).
    pub lines: u64,
}

fn open(path: &Path) -> Result<Box<dyn BufRead>, PileupError> {
    let io = |e: std::io::Error| PileupError::Input(format!("{}: {e}", path.display()));
    let mut file = File::open(path).map_err(io)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(io)?;
    drop(file);
    if n == 2 && magic == [0x1f, 0x8b] {
        let mut head = vec![0u8; 18];
        let mut f = File::open(path).map_err(io)?;
        let got = f.read(&mut head).map_err(io)?;
        if !sortase_bgzf::is_bgzf(&head[..got]) {
            return Err(PileupError::Input(format!(
                "{}: gzip but not BGZF; recompress it with `bgzip`",
                path.display()
            )));
        }
        let reader = SeekReader::new(BufReader::new(File::open(path).map_err(io)?));
        return Ok(Box::new(BufReader::with_capacity(1 << 20, reader)));
    }
    Ok(Box::new(BufReader::with_capacity(
        1 << 20,
        File::open(path).map_err(io)?,
    )))
}

/// Reads the SNVs of `path`.
pub fn read_sites(path: &Path) -> Result<Sites, PileupError> {
    read_sites_from(open(path)?, path)
}

/// Reads the SNVs of the decompressed VCF text `reader` (`path` names it in errors).
pub fn read_sites_from(mut reader: impl BufRead, path: &Path) -> Result<Sites, PileupError> {
    let mut out = Sites::default();
    let mut ids: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut line = Vec::with_capacity(1024);
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| PileupError::Input(format!("{}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() || text[0] == b'#' {
            continue;
        }
        out.lines += 1;
        let bad =
            |what: &str| PileupError::Input(format!("{}: line {number}: {what}", path.display()));
        let mut fields = text.split(|&c| c == b'\t');
        let (Some(chrom), Some(pos), Some(_id), Some(reference), Some(alt)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err(bad("fewer than 5 tab-separated columns"));
        };
        let pos: i64 = std::str::from_utf8(pos)
            .ok()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad("POS is not a number"))?;
        // n_allele == 2 and both alleles one character: "." is no ALT allele, "A,C" is two.
        if reference.len() != 1 || alt.len() != 1 || alt == b"." {
            continue;
        }
        if !(1..=i64::from(i32::MAX)).contains(&pos) {
            return Err(bad("POS out of range"));
        }
        let contig = match ids.get(chrom) {
            Some(&id) => id,
            None => {
                let id = out.contigs.len() as u32;
                out.contigs
                    .push(String::from_utf8_lossy(chrom).into_owned());
                ids.insert(chrom.to_vec(), id);
                id
            }
        };
        out.sites.push(Site {
            contig,
            pos: (pos - 1) as i32,
            reference: reference[0],
            alternate: alt[0],
        });
    }
    Ok(out)
}

/// snp-pileup's `vcf_chr_to_bam`: the BAM reference a VCF contig name maps to. A `chr` prefix on the
/// VCF name is ignored; when the first BAM reference starts with `chr`, every BAM name is compared
/// without its first three characters. The first match wins.
pub fn vcf_contig_to_bam(vcf_name: &str, bam_names: &[&[u8]]) -> Option<usize> {
    let name = vcf_name.strip_prefix("chr").unwrap_or(vcf_name).as_bytes();
    let bam_prefixed = bam_names.first().is_some_and(|n| n.starts_with(b"chr"));
    bam_names.iter().position(|b| {
        if bam_prefixed {
            b.get(3..) == Some(name)
        } else {
            *b == name
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chr_prefix_rules() {
        let chr: Vec<&[u8]> = vec![b"chr1", b"chr2", b"chrX"];
        let plain: Vec<&[u8]> = vec![b"1", b"2", b"X"];
        assert_eq!(vcf_contig_to_bam("1", &chr), Some(0));
        assert_eq!(vcf_contig_to_bam("chr2", &chr), Some(1));
        assert_eq!(vcf_contig_to_bam("chrX", &plain), Some(2));
        assert_eq!(vcf_contig_to_bam("X", &plain), Some(2));
        assert_eq!(vcf_contig_to_bam("chrchr1", &chr), None);
        assert_eq!(vcf_contig_to_bam("3", &chr), None);
        // The prefix is decided by the first BAM name only.
        let mixed: Vec<&[u8]> = vec![b"1", b"chr2"];
        assert_eq!(vcf_contig_to_bam("2", &mixed), None);
    }

    #[test]
    fn keeps_only_biallelic_snvs() {
        let dir = std::env::temp_dir().join(format!("sortase-vcf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.vcf");
        std::fs::write(
            &path,
            "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\n\
             1\t10\t.\tA\tG\n1\t11\t.\tA\tG,T\n1\t12\t.\tAC\tA\n1\t13\t.\tA\t.\n2\t5\trs1\tc\tt\n",
        )
        .unwrap();
        let s = read_sites(&path).unwrap();
        assert_eq!(s.lines, 5);
        assert_eq!(s.contigs, vec!["1", "2"]);
        assert_eq!(
            s.sites,
            vec![
                Site {
                    contig: 0,
                    pos: 9,
                    reference: b'A',
                    alternate: b'G'
                },
                Site {
                    contig: 1,
                    pos: 4,
                    reference: b'c',
                    alternate: b't'
                }
            ]
        );
        std::fs::write(&path, "1\tx\t.\tA\tG\n").unwrap();
        assert!(read_sites(&path)
            .unwrap_err()
            .to_string()
            .contains("line 1: POS is not a number"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
