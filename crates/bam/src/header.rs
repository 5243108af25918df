//! SAM/BAM headers. The text is kept byte for byte as read (noodles would normalise it), the reference
//! list is parsed from the binary BAM header or from `@SQ` lines.

use crate::BamError;
use std::collections::HashMap;
use std::io::Read;

/// One reference sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Name (`@SQ SN`).
    pub name: Vec<u8>,
    /// Length (`@SQ LN`).
    pub length: u32,
}

/// A SAM/BAM header: text plus the reference list used by refIDs.
#[derive(Debug, Clone, Default)]
pub struct Header {
    text: String,
    references: Vec<Reference>,
    by_name: HashMap<Vec<u8>, usize>,
}

/// The largest header text sortase reads (`l_text`): 256 MiB, some thousand times a human
/// reference's header; checked before the text is read, so a hostile claim allocates nothing.
pub const MAX_HEADER_TEXT: usize = 256 << 20;

/// The most references a BAM header may list (`n_ref`): 2^24, far above the scaffolds of any
/// assembly in use, and a bound on the memory the reference list can take (a truncated file claiming
/// more is an error before anything is allocated for them).
pub const MAX_REFERENCES: usize = 1 << 24;

fn header_error(msg: impl Into<String>) -> BamError {
    BamError::Header(msg.into())
}

fn read_u32<R: Read>(r: &mut R, what: &str) -> Result<u32, BamError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)
        .map_err(|_| header_error(format!("truncated while reading {what}")))?;
    Ok(u32::from_le_bytes(b))
}

/// Checks header lines as htslib's `sam_hrecs_parse_lines` does and normalises what it rewrites: a bare
/// `@CO` becomes `@CO<TAB>` (htslib regenerates the text from its parsed records).
fn normalise_text(text: String) -> Result<String, BamError> {
    let mut out = String::with_capacity(text.len() + 8);
    let mut changed = false;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let body = line.trim_end_matches('\n');
        let bad = |what: &str| header_error(format!("{what} at header line {}: {body:?}", n + 1));
        if body.is_empty() {
            continue;
        }
        let bytes = body.as_bytes();
        if bytes[0] != b'@' {
            return Err(bad("header line does not start with '@'"));
        }
        if bytes.len() < 3 || !bytes[1].is_ascii_alphabetic() || !bytes[2].is_ascii_alphanumeric() {
            return Err(bad("header line does not have a two-character key"));
        }
        if &bytes[1..3] == b"CO" {
            if bytes.len() == 3 {
                out.push_str("@CO\t\n");
                changed = true;
                continue;
            }
            if bytes[3] != b'\t' {
                return Err(bad("missing tab"));
            }
        } else {
            let mut fields = body[3..].split('\t');
            if fields.next() != Some("") {
                return Err(bad("missing tab"));
            }
            for f in fields {
                if f.len() < 3 || f.as_bytes()[2] != b':' {
                    return Err(bad("malformed key:value pair"));
                }
            }
        }
        out.push_str(line);
    }
    Ok(if changed { out } else { text })
}

/// `@SQ` lines of a header text as references (SN and LN tags).
fn parse_sq_lines(text: &str) -> Result<Vec<Reference>, BamError> {
    let mut refs = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("@SQ\t")) {
        let mut name = None;
        let mut length = None;
        for field in line.split('\t').skip(1) {
            if let Some(v) = field.strip_prefix("SN:") {
                // A BAM reference name ends at its NUL (l_name counts it): a NUL inside SN would
                // write a name that reads back shorter (found by the bam_header fuzz target).
                if v.contains('\0') {
                    return Err(header_error(format!(
                        "@SQ SN contains a NUL byte: {}",
                        line.replace('\0', "\\0")
                    )));
                }
                name = Some(v.as_bytes().to_vec());
            } else if let Some(v) = field.strip_prefix("LN:") {
                length = v.trim().parse::<u64>().ok();
            }
        }
        let name = name.ok_or_else(|| header_error(format!("@SQ line without SN: {line}")))?;
        let length =
            length.ok_or_else(|| header_error(format!("@SQ line without a valid LN: {line}")))?;
        let length = u32::try_from(length)
            .ok()
            .filter(|&l| l <= i32::MAX as u32)
            .ok_or_else(|| header_error(format!("@SQ LN out of range: {line}")))?;
        refs.push(Reference { name, length });
    }
    Ok(refs)
}

impl Header {
    /// A header from text and references.
    pub fn new(text: String, references: Vec<Reference>) -> Self {
        let by_name = references
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .rev()
            .collect();
        Self {
            text,
            references,
            by_name,
        }
    }

    /// Parses a SAM header text (lines starting with `@`); references come from its `@SQ` lines.
    /// Lines are checked as htslib's header parser checks them.
    pub fn from_sam_text(text: String) -> Result<Self, BamError> {
        let text = normalise_text(text)?;
        let refs = parse_sq_lines(&text)?;
        Ok(Self::new(text, refs))
    }

    /// Reads a BAM header (magic, text, reference list) from a decompressed stream.
    pub fn read_bam<R: Read>(r: &mut R) -> Result<Self, BamError> {
        let mut magic = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match r.read(&mut magic[got..])? {
                0 => break,
                n => got += n,
            }
        }
        if &magic[..got] != b"BAM\x01" {
            return Err(BamError::BadMagic {
                found: magic[..got].to_vec(),
            });
        }
        let l_text = read_u32(r, "l_text")? as usize;
        if l_text > MAX_HEADER_TEXT {
            return Err(header_error(format!(
                "l_text {l_text} is larger than the 256 MiB a header text may have"
            )));
        }
        // Grows with the bytes really there: a truncated file claiming a large text allocates little.
        let mut text = Vec::with_capacity(l_text.min(1 << 20));
        r.by_ref().take(l_text as u64).read_to_end(&mut text)?;
        if text.len() != l_text {
            return Err(header_error(format!(
                "truncated header text ({} of l_text {l_text} bytes)",
                text.len()
            )));
        }
        while text.last() == Some(&0) {
            text.pop();
        }
        let text = String::from_utf8(text).map_err(|_| header_error("header text is not UTF-8"))?;
        let text = normalise_text(text)?;
        let n_ref = read_u32(r, "n_ref")?;
        if n_ref as usize > MAX_REFERENCES {
            return Err(header_error(format!(
                "n_ref {n_ref} is more than the {MAX_REFERENCES} references a header may have"
            )));
        }
        let mut references = Vec::with_capacity((n_ref as usize).min(1 << 20));
        for i in 0..n_ref {
            let l_name = read_u32(r, "l_name")? as usize;
            if l_name == 0 || l_name > 1 << 20 {
                return Err(header_error(format!("reference {i}: bad l_name {l_name}")));
            }
            let mut name = vec![0u8; l_name];
            r.read_exact(&mut name)
                .map_err(|_| header_error("truncated reference name"))?;
            while name.last() == Some(&0) {
                name.pop();
            }
            // A name SAM text cannot carry (its @SQ line, regenerated when the text has none, would
            // not parse back): found by the bam_header fuzz target.
            if name.iter().any(|&b| matches!(b, 0 | b'\t' | b'\n')) {
                return Err(header_error(format!(
                    "reference {i}: name {:?} contains a NUL, tab or newline",
                    String::from_utf8_lossy(&name)
                )));
            }
            let length = read_u32(r, "l_ref")?;
            references.push(Reference { name, length });
        }
        let mut header = Self::new(text, references);
        header.add_missing_sq_lines();
        Ok(header)
    }

    /// htslib regenerates `@SQ` lines from the binary list when the text has none.
    fn add_missing_sq_lines(&mut self) {
        if self.references.is_empty() || self.text.lines().any(|l| l.starts_with("@SQ\t")) {
            return;
        }
        let mut text = std::mem::take(&mut self.text);
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        for r in &self.references {
            text.push_str(&format!(
                "@SQ\tSN:{}\tLN:{}\n",
                String::from_utf8_lossy(&r.name),
                r.length
            ));
        }
        self.text = text;
    }

    /// The header text (SAM header lines, each ending in a newline unless the input lacked it).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The reference sequences, indexed by refID.
    pub fn references(&self) -> &[Reference] {
        &self.references
    }

    /// The refID of a reference name.
    pub fn reference_id(&self, name: &[u8]) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The whole BAM header: magic, `l_text`, text, `n_ref`, references (SAM spec §4.2).
    pub fn to_bam_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len() + 64 * self.references.len() + 16);
        out.extend_from_slice(b"BAM\x01");
        out.extend_from_slice(&(self.text.len() as u32).to_le_bytes());
        out.extend_from_slice(self.text.as_bytes());
        out.extend_from_slice(&(self.references.len() as u32).to_le_bytes());
        for r in &self.references {
            out.extend_from_slice(&(r.name.len() as u32 + 1).to_le_bytes());
            out.extend_from_slice(&r.name);
            out.push(0);
            out.extend_from_slice(&r.length.to_le_bytes());
        }
        out
    }

    /// Appends a `@PG` line as samtools does: a unique ID (`name`, then `name.1`, …), `PN`, `PP` linking
    /// to the last `@PG` of the header, `VN` and `CL`.
    pub fn add_program(&mut self, name: &str, version: &str, command_line: &str) {
        let ids: Vec<&str> = self
            .text
            .lines()
            .filter(|l| l.starts_with("@PG\t"))
            .filter_map(|l| l.split('\t').find_map(|f| f.strip_prefix("ID:")))
            .collect();
        let mut id = name.to_string();
        let mut n = 0;
        while ids.contains(&id.as_str()) {
            n += 1;
            id = format!("{name}.{n}");
        }
        let mut line = format!("@PG\tID:{id}\tPN:{name}");
        if let Some(prev) = ids.last() {
            line.push_str(&format!("\tPP:{prev}"));
        }
        line.push_str(&format!("\tVN:{version}\tCL:{command_line}\n"));
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
        self.text.push_str(&line);
    }

    /// Sets `@HD` `SO` (and `SS`, or removes it) and removes `GO`, as samtools sort's
    /// `set_sort_order`: tags already on the `@HD` line keep their place, new ones are appended; a
    /// header without `@HD` gets `@HD VN:1.6 SO:… [SS:…]` as its first line.
    pub fn set_sort_order(&mut self, so: &str, ss: Option<&str>) {
        self.set_sort_and_group_order(so, None, ss);
    }

    /// [`Header::set_sort_order`] with a group order too (`GO`, written between `SO` and `SS` when
    /// added; removed when `go` is `None`), as samtools' `set_sort_order` for
    /// `--template-coordinate` (`SO:unsorted GO:query SS:unsorted:template-coordinate`).
    pub fn set_sort_and_group_order(&mut self, so: &str, go: Option<&str>, ss: Option<&str>) {
        let mut wanted: Vec<(&str, &str)> = vec![("SO", so)];
        if let Some(go) = go {
            wanted.push(("GO", go));
        }
        if let Some(ss) = ss {
            wanted.push(("SS", ss));
        }
        let mut out = String::with_capacity(self.text.len() + 64);
        let mut seen_hd = false;
        for line in self.text.split_inclusive('\n') {
            let body = line.trim_end_matches('\n');
            if seen_hd || !body.starts_with("@HD\t") {
                out.push_str(line);
                continue;
            }
            seen_hd = true;
            let mut fields: Vec<String> = body[4..].split('\t').map(str::to_string).collect();
            for (tag, value) in &wanted {
                match fields
                    .iter_mut()
                    .find(|f| f.starts_with(&format!("{tag}:")))
                {
                    Some(f) => *f = format!("{tag}:{value}"),
                    None => fields.push(format!("{tag}:{value}")),
                }
            }
            fields.retain(|f| {
                (go.is_some() || !f.starts_with("GO:")) && (ss.is_some() || !f.starts_with("SS:"))
            });
            out.push_str("@HD");
            for f in &fields {
                out.push('\t');
                out.push_str(f);
            }
            out.push('\n');
        }
        if !seen_hd {
            let mut hd = format!("@HD\tVN:1.6\tSO:{so}");
            if let Some(go) = go {
                hd.push_str(&format!("\tGO:{go}"));
            }
            if let Some(ss) = ss {
                hd.push_str(&format!("\tSS:{ss}"));
            }
            hd.push('\n');
            out.insert_str(0, &hd);
        }
        self.text = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bam_bytes_roundtrip_and_pg_chain() {
        let text = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:100\n@PG\tID:bwa\tPN:bwa\n".to_string();
        let mut h = Header::from_sam_text(text).unwrap();
        assert_eq!(h.reference_id(b"chr1"), Some(0));
        h.add_program("sortase", "0.1", "sortase view x");
        h.add_program("sortase", "0.1", "sortase view y");
        assert!(h
            .text()
            .contains("@PG\tID:sortase\tPN:sortase\tPP:bwa\tVN:0.1\tCL:sortase view x\n"));
        assert!(h.text().contains("ID:sortase.1\tPN:sortase\tPP:sortase\t"));
        let bytes = h.to_bam_bytes();
        let back = Header::read_bam(&mut &bytes[..]).unwrap();
        assert_eq!(back.text(), h.text());
        assert_eq!(back.references(), h.references());
    }

    #[test]
    fn sq_lines_are_added_when_the_text_has_none() {
        let h = Header::new(
            String::new(),
            vec![Reference {
                name: b"c".to_vec(),
                length: 5,
            }],
        );
        let back = Header::read_bam(&mut &h.to_bam_bytes()[..]).unwrap();
        assert_eq!(back.text(), "@SQ\tSN:c\tLN:5\n");
    }

    #[test]
    fn bad_magic_is_reported() {
        assert!(matches!(
            Header::read_bam(&mut &b"BAM\x02"[..]),
            Err(BamError::BadMagic { .. })
        ));
    }

    /// Fuzz finding (bam_header): an SN with NUL bytes wrote a BAM name that read back shorter.
    #[test]
    fn sam_header_name_with_nul_is_refused() {
        let text = "@SQ\tSN:chrc0\0\0\tLN:300\n".to_string();
        let e = Header::from_sam_text(text).unwrap_err().to_string();
        assert!(e.contains("NUL"), "{e}");
    }

    /// Fuzz finding (bam_header): a binary reference name with a tab made an @SQ line that did not
    /// parse back.
    #[test]
    fn bam_reference_name_with_tab_is_refused() {
        let mut bam = b"BAM\x01".to_vec();
        bam.extend_from_slice(&0u32.to_le_bytes()); // l_text = 0
        bam.extend_from_slice(&1u32.to_le_bytes()); // n_ref = 1
        bam.extend_from_slice(&6u32.to_le_bytes()); // l_name = 6
        bam.extend_from_slice(b"chr\tS\0"); // name
        bam.extend_from_slice(&100u32.to_le_bytes()); // l_ref
        let e = Header::read_bam(&mut &bam[..]).unwrap_err().to_string();
        assert!(e.contains("tab"), "{e}");
    }
}
