//! samtools view's record filters on raw records: `-f -F -q -r -R -n -l -L -d -D -N -e`.
//!
//! A [`FilterSpec`] is plain data (what the command line and the Python API fill in); a
//! [`RecordFilter`] is the spec compiled against one header (files read, read groups and BED names
//! resolved, the expression parsed), shared by every thread. Each check has samtools' meaning
//! (sam_view.c `process_aln`), in its order: the expression first, then flags and MAPQ, BED
//! regions, read groups, the tag, read names, the library.
//!
//! ```
//! use sortase_ops::filter::{FilterSpec, RecordFilter};
//! let header = sortase_bam::Header::from_sam_text("@SQ\tSN:chr1\tLN:100\n".into()).unwrap();
//! let spec = FilterSpec {
//!     min_mapq: 30,
//!     tags: vec!["NM".into()],
//!     expression: Some("pos > 5".into()),
//!     ..FilterSpec::default()
//! };
//! let filter = RecordFilter::new(&spec, &header).unwrap();
//! # let mut rec = vec![0, 0, 0, 0, 9, 0, 0, 0];          // refID 0, pos 9
//! # rec.extend_from_slice(&[2, 40, 0, 0, 0, 0, 0, 0]);  // l_read_name 2, mapq 40, 0 ops, flag 0
//! # rec.extend_from_slice(&[0; 4]);                      // l_seq 0
//! # rec.extend_from_slice(&[0xff; 8]);                   // no mate
//! # rec.extend_from_slice(&[0; 4]);                      // tlen
//! # rec.extend_from_slice(b"r\0NMC\x01");                // name, NM:C:1
//! let record = sortase_bam::RecordRef::new(&rec).unwrap();
//! assert!(filter.passes(&record, &mut Default::default()).unwrap());
//! ```

pub mod bed;
pub mod expr;

use bed::{BedFilter, BedRegions};
use expr::{Expr, ExprError, Scratch};
use serde::{Deserialize, Serialize};
use sortase_bam::{Header, RecordRef};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// samtools view's filter options, as plain data. With the `clap` feature also view's filter flags
/// (`clap::Args`: each `help` is the `--help` text); `-f`/`-F` take names as well as numbers
/// ([`sortase_bam::flags::parse`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct FilterSpec {
    /// Only records with all of these flag bits set (number or names).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'f', long = "require-flags", value_name = "FLAG", default_value = "0",
            value_parser = sortase_bam::flags::parse)
    )]
    pub require_flags: u16,
    /// Only records with none of these flag bits set.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'F', long = "exclude-flags", visible_alias = "excl-flags", value_name = "FLAG",
            default_value = "0", value_parser = sortase_bam::flags::parse)
    )]
    pub exclude_flags: u16,
    /// Only records with mapping quality ≥ INT.
    #[cfg_attr(
        feature = "clap",
        arg(
            short = 'q',
            long = "min-MQ",
            visible_alias = "min-mapq",
            value_name = "INT",
            default_value_t = 0
        )
    )]
    pub min_mapq: u8,
    /// Only records in read group STR.
    #[cfg_attr(feature = "clap", arg(short = 'r', long = "read-group", value_name = "STR"))]
    pub read_group: Option<String>,
    /// Only records in a read group listed in FILE, or in none; `^FILE`: in none listed there.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'R', long = "read-group-file", value_name = "[^]FILE")
    )]
    pub read_group_file: Option<String>,
    /// Only records that have a read group.
    #[cfg_attr(feature = "clap", arg(short = 'n', long = "exclude-no-read-group"))]
    pub exclude_no_read_group: bool,
    /// Only records in library STR (the `LB` of their read group's `@RG` line).
    #[cfg_attr(feature = "clap", arg(short = 'l', long = "library", value_name = "STR"))]
    pub library: Option<String>,
    /// Only records overlapping the regions of this BED file (0-based, end exclusive; gzip or
    /// plain). With regions, records in both.
    #[cfg_attr(
        feature = "clap",
        arg(
            short = 'L',
            long = "target-file",
            visible_alias = "targets-file",
            value_name = "FILE"
        )
    )]
    pub targets_file: Option<PathBuf>,
    /// Only records with tag TAG (with value VAL); repeat for more values of the same tag.
    #[cfg_attr(feature = "clap", arg(short = 'd', long = "tag", value_name = "TAG[:VAL]"))]
    pub tags: Vec<String>,
    /// Only records whose tag TAG has a value listed in FILE.
    #[cfg_attr(feature = "clap", arg(short = 'D', long = "tag-file", value_name = "TAG:FILE"))]
    pub tag_file: Option<String>,
    /// Only records whose name is listed in FILE; `^FILE`: whose name is not.
    #[cfg_attr(feature = "clap", arg(short = 'N', long = "qname-file", value_name = "[^]FILE"))]
    pub qname_file: Option<String>,
    /// Only records for which the htslib filter expression is true, e.g. 'mapq >= 30 && flag.paired
    /// && [NM] < 5' or 'qname =~ "^SRR"'.
    #[cfg_attr(
        feature = "clap",
        arg(
            short = 'e',
            long = "expr",
            visible_alias = "expression",
            value_name = "EXPR",
            allow_hyphen_values = true
        )
    )]
    pub expression: Option<String>,
}

impl FilterSpec {
    /// Whether only `-f -F -q` are set: the filter reads FLAG and MAPQ alone and needs no header.
    pub fn only_flags_and_mapq(&self) -> bool {
        self.read_group.is_none()
            && self.read_group_file.is_none()
            && !self.exclude_no_read_group
            && self.library.is_none()
            && self.targets_file.is_none()
            && self.tags.is_empty()
            && self.tag_file.is_none()
            && self.qname_file.is_none()
            && self.expression.is_none()
    }
}

/// Why a filter could not be built or applied.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// A file of the filter could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A BED line samtools would not read either.
    #[error("{path}: BED line {line}: {what}")]
    Bed {
        /// The file.
        path: String,
        /// The line (1-based, counting non-empty lines as samtools does).
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// An option's value is malformed.
    #[error("{0}")]
    Argument(String),
    /// The expression does not parse, or cannot be evaluated on a record.
    #[error(transparent)]
    Expr(#[from] ExprError),
}

/// A set of names (read groups, read names, tag values) and whether it includes or excludes.
#[derive(Debug, Clone)]
struct NameSet {
    names: HashSet<Vec<u8>>,
    exclude: bool,
}

impl NameSet {
    /// Whether `name` passes: listed (include) or not listed (exclude).
    #[inline]
    fn admits(&self, name: &[u8]) -> bool {
        self.names.contains(name) != self.exclude
    }
}

/// `-d`/`-D`: the tag, and the values it may have (`None`: any).
type TagFilter = ([u8; 2], Option<HashSet<Vec<u8>>>);

/// A [`FilterSpec`] compiled for one header.
#[derive(Debug, Clone)]
pub struct RecordFilter {
    require: u16,
    exclude: u16,
    min_mapq: u8,
    bed: Option<BedFilter>,
    read_groups: Option<NameSet>,
    exclude_no_read_group: bool,
    tag: Option<TagFilter>,
    names: Option<NameSet>,
    /// `-l`: the read group IDs whose `@RG LB` is the library.
    library_groups: Option<HashSet<Vec<u8>>>,
    expr: Option<Expr>,
}

impl RecordFilter {
    /// Reads the spec's files and parses its expression for records of `header`.
    pub fn new(spec: &FilterSpec, header: &Header) -> Result<Self, FilterError> {
        let bed = match &spec.targets_file {
            Some(path) => Some(BedRegions::read(path)?.for_header(header)),
            None => None,
        };
        let mut read_groups = None;
        if let Some(rg) = &spec.read_group {
            read_groups = Some(NameSet {
                names: HashSet::from([rg.as_bytes().to_vec()]),
                exclude: false,
            });
        }
        if let Some(file) = &spec.read_group_file {
            read_groups = Some(add_file(read_groups, file, "read-group")?);
        }
        let names = match &spec.qname_file {
            Some(file) => Some(add_file(None, file, "read-name")?),
            None => None,
        };
        Ok(Self {
            require: spec.require_flags,
            exclude: spec.exclude_flags,
            min_mapq: spec.min_mapq,
            bed,
            read_groups,
            exclude_no_read_group: spec.exclude_no_read_group,
            tag: tag_filter(&spec.tags, spec.tag_file.as_deref())?,
            names,
            library_groups: spec.library.as_deref().map(|lb| library_groups(header, lb)),
            expr: match &spec.expression {
                Some(text) => Some(Expr::new(text, header)?),
                None => None,
            },
        })
    }

    /// Whether every record passes (no option given): callers may skip the per-record checks.
    pub fn passes_all(&self) -> bool {
        self.only_flags_and_mapq() && self.require == 0 && self.exclude == 0 && self.min_mapq == 0
    }

    /// Whether the filter reads nothing but FLAG and MAPQ (what a CRAM reader may decode alone).
    pub fn only_flags_and_mapq(&self) -> bool {
        self.bed.is_none()
            && self.read_groups.is_none()
            && !self.exclude_no_read_group
            && self.tag.is_none()
            && self.names.is_none()
            && self.library_groups.is_none()
            && self.expr.is_none()
    }

    /// The FLAG and MAPQ checks alone (`-f -F -q`).
    #[inline]
    pub fn passes_fields(&self, flag: u16, mapq: u8) -> bool {
        flag & self.require == self.require && flag & self.exclude == 0 && mapq >= self.min_mapq
    }

    /// Whether `r` passes; an error when the expression cannot be evaluated on it (as samtools,
    /// which then stops).
    // HOT: once per record. Checks run in samtools' order and allocate nothing.
    #[inline]
    pub fn passes(&self, r: &RecordRef<'_>, scratch: &mut Scratch) -> Result<bool, FilterError> {
        if let Some(e) = &self.expr {
            if !e.passes(r, scratch)? {
                return Ok(false);
            }
        }
        if !self.passes_fields(r.flag(), r.mapping_quality()) {
            return Ok(false);
        }
        if self.only_flags_and_mapq() {
            return Ok(true);
        }
        Ok(self.passes_rest(r))
    }

    fn passes_rest(&self, r: &RecordRef<'_>) -> bool {
        if self.bed.as_ref().is_some_and(|b| !b.overlaps(r)) {
            return false;
        }
        if self.read_groups.is_some() || self.exclude_no_read_group {
            match aux_string(r, *b"RG") {
                Some(rg) if self.read_groups.as_ref().is_some_and(|s| !s.admits(rg)) => {
                    return false
                }
                None if self.exclude_no_read_group => return false,
                _ => {}
            }
        }
        if let Some((tag, values)) = &self.tag {
            let Some(field) = r.aux().find(|f| f.tag() == *tag) else {
                return false;
            };
            if let Some(values) = values {
                let mut digits = itoa::Buffer::new();
                let value: &[u8] = match (field.value_type(), field.integer()) {
                    (_, Some(i)) => digits.format(i).as_bytes(),
                    (b'A', _) => &field.raw[3..4],
                    _ => c_str(&field.raw[3..]),
                };
                if !values.contains(value) {
                    return false;
                }
            }
        }
        if self
            .names
            .as_ref()
            .is_some_and(|n| !n.admits(r.read_name()))
        {
            return false;
        }
        if let Some(groups) = &self.library_groups {
            match aux_string(r, *b"RG") {
                Some(rg) if groups.contains(rg) => {}
                _ => return false,
            }
        }
        true
    }
}

/// A `Z` tag's value up to its NUL (htslib reads `bam_aux_get(b, "RG") + 1` as a C string).
fn aux_string<'a>(r: &RecordRef<'a>, tag: [u8; 2]) -> Option<&'a [u8]> {
    r.aux().find(|f| f.tag() == tag).map(|f| c_str(&f.raw[3..]))
}

fn c_str(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// The read group IDs whose `@RG` line has `LB:library` (htslib's `bam_get_library` takes the
/// first `@RG` line with the record's ID).
fn library_groups(header: &Header, library: &str) -> HashSet<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut groups = HashSet::new();
    for line in header.text().lines().filter(|l| l.starts_with("@RG\t")) {
        let field = |k: &str| line.split('\t').find_map(|f| f.strip_prefix(k));
        let Some(id) = field("ID:") else { continue };
        if seen.insert(id) && field("LB:") == Some(library) {
            groups.insert(id.as_bytes().to_vec());
        }
    }
    groups
}

/// Adds the words of `[^]FILE` to `set` (samtools' `-R`/`-N`: `^` excludes; include and exclude
/// cannot be mixed).
fn add_file(set: Option<NameSet>, file: &str, what: &str) -> Result<NameSet, FilterError> {
    let (exclude, path) = match file.strip_prefix('^') {
        Some(p) => (true, p),
        None => (false, file),
    };
    let mut set = set.unwrap_or(NameSet {
        names: HashSet::new(),
        exclude,
    });
    if set.exclude != exclude {
        return Err(FilterError::Argument(format!(
            "cannot mix include and exclude {what} lists in the same command line"
        )));
    }
    set.names.extend(read_words(Path::new(path))?);
    Ok(set)
}

/// The whitespace-separated words of a file, as samtools' `fscanf("%1023s")` reads them (a longer
/// word is read as several).
pub fn read_words(path: &Path) -> Result<Vec<Vec<u8>>, FilterError> {
    let text = std::fs::read(path).map_err(|source| FilterError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(text
        .split(|c| c.is_ascii_whitespace() || *c == 0x0b)
        .filter(|w| !w.is_empty())
        .flat_map(|w| w.chunks(1023))
        .map(<[u8]>::to_vec)
        .collect())
}

/// `-d TAG[:VALUE]` (repeatable) and `-D TAG:FILE`: one tag, and the values it may have (`None`:
/// any value, the tag must only be there).
fn tag_filter(tags: &[String], file: Option<&str>) -> Result<Option<TagFilter>, FilterError> {
    let mut tag: Option<[u8; 2]> = None;
    let mut values: Option<HashSet<Vec<u8>>> = None;
    let mut same_tag = |t: &[u8], arg: &str| -> Result<(), FilterError> {
        let t = [t[0], t[1]];
        match tag {
            Some(prev) if prev != t => Err(FilterError::Argument(format!(
                "-d/-D: tag {} was given before {arg:?}; samtools filters on one tag",
                String::from_utf8_lossy(&prev)
            ))),
            _ => {
                tag = Some(t);
                Ok(())
            }
        }
    };
    for arg in tags {
        let b = arg.as_bytes();
        if b.len() < 2 || (b.len() > 2 && b[2] != b':') {
            return Err(FilterError::Argument(format!(
                "-d {arg:?}: expected TAG or TAG:VALUE"
            )));
        }
        same_tag(&b[..2], arg)?;
        if b.len() > 3 {
            values
                .get_or_insert_with(HashSet::new)
                .insert(b[3..].to_vec());
        }
    }
    if let Some(arg) = file {
        let b = arg.as_bytes();
        if b.len() < 4 || !matches!(b[2], b':' | b';') {
            return Err(FilterError::Argument(format!(
                "-D {arg:?}: expected TAG:FILE"
            )));
        }
        same_tag(&b[..2], arg)?;
        values
            .get_or_insert_with(HashSet::new)
            .extend(read_words(Path::new(&arg[3..]))?);
    }
    Ok(tag.map(|t| (t, values)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header::from_sam_text(
            "@SQ\tSN:chr1\tLN:1000\n@RG\tID:a\tLB:L1\n@RG\tID:b\tLB:L2\n".to_string(),
        )
        .unwrap()
    }

    /// name, flag, pos (0-based), mapq, aux
    fn record(name: &str, flag: u16, pos: i32, aux: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&0i32.to_le_bytes());
        r.extend_from_slice(&pos.to_le_bytes());
        r.extend_from_slice(&[name.len() as u8 + 1, 20, 0, 0]);
        r.extend_from_slice(&[1, 0]); // one CIGAR op
        r.extend_from_slice(&flag.to_le_bytes());
        r.extend_from_slice(&0u32.to_le_bytes());
        r.extend_from_slice(&[0xff; 8]);
        r.extend_from_slice(&[0; 4]);
        r.extend_from_slice(name.as_bytes());
        r.push(0);
        r.extend_from_slice(&(10u32 << 4).to_le_bytes()); // 10M
        r.extend_from_slice(aux);
        r
    }

    fn passes(spec: &FilterSpec, rec: &[u8]) -> bool {
        let f = RecordFilter::new(spec, &header()).unwrap();
        f.passes(&RecordRef::new(rec).unwrap(), &mut Scratch::default())
            .unwrap()
    }

    #[test]
    fn tags_read_groups_and_libraries() {
        let with = record("r1", 0, 100, b"RGZa\x00XIi\x07\x00\x00\x00XAAq");
        let without = record("r2", 0, 100, b"");
        let spec = |tags: &[&str]| FilterSpec {
            tags: tags.iter().map(|s| s.to_string()).collect(),
            ..FilterSpec::default()
        };
        assert!(passes(&spec(&["XI"]), &with));
        assert!(!passes(&spec(&["XI"]), &without));
        assert!(passes(&spec(&["XI:7"]), &with));
        assert!(passes(&spec(&["XI:8", "XI:7"]), &with));
        assert!(!passes(&spec(&["XI:8"]), &with));
        assert!(passes(&spec(&["XA:q"]), &with));
        assert!(passes(&spec(&["RG:a"]), &with));
        assert!(RecordFilter::new(&spec(&["XI", "XA"]), &header()).is_err());
        assert!(RecordFilter::new(&spec(&["XIQ"]), &header()).is_err());
        let rg = |rg: &str| FilterSpec {
            read_group: Some(rg.into()),
            ..FilterSpec::default()
        };
        assert!(passes(&rg("a"), &with));
        assert!(!passes(&rg("b"), &with));
        assert!(passes(&rg("b"), &without)); // samtools: "or in no read group"
        let no_rg = FilterSpec {
            exclude_no_read_group: true,
            ..FilterSpec::default()
        };
        assert!(passes(&no_rg, &with) && !passes(&no_rg, &without));
        let lib = |lb: &str| FilterSpec {
            library: Some(lb.into()),
            ..FilterSpec::default()
        };
        assert!(passes(&lib("L1"), &with));
        assert!(!passes(&lib("L2"), &with));
        assert!(!passes(&lib("L1"), &without));
    }

    #[test]
    fn files_of_names_bed_and_negation() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names.txt");
        std::fs::write(&names, "r1 other\nr3\n").unwrap();
        let bed = dir.path().join("t.bed");
        std::fs::write(&bed, "chr1\t105\t106\n").unwrap();
        let r1 = record("r1", 0, 100, b"");
        let r2 = record("r2", 0, 200, b"");
        let n = |file: String| FilterSpec {
            qname_file: Some(file),
            ..FilterSpec::default()
        };
        let file = names.display().to_string();
        assert!(passes(&n(file.clone()), &r1) && !passes(&n(file.clone()), &r2));
        let not = format!("^{file}");
        assert!(!passes(&n(not.clone()), &r1) && passes(&n(not), &r2));
        let l = FilterSpec {
            targets_file: Some(bed),
            ..FilterSpec::default()
        };
        assert!(passes(&l, &r1) && !passes(&l, &r2));
        let mixed = FilterSpec {
            read_group: Some("a".into()),
            read_group_file: Some(format!("^{file}")),
            ..FilterSpec::default()
        };
        assert!(RecordFilter::new(&mixed, &header()).is_err());
        let missing = n(dir.path().join("nope").display().to_string());
        let err = RecordFilter::new(&missing, &header())
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope"), "{err}");
    }
}
