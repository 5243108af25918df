//! `manifest.json`: what a dataset holds (groups and columns, chunks with their ordinals and record
//! counts, the references, the header text, the sort order, who wrote each group). It is written last
//! and read first: a dataset is whatever its manifest says, and [`Manifest::read`] checks that the
//! manifest agrees with itself (ordinals contiguous, counts summing up) before any chunk is opened.

use crate::{AgdError, Group};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The manifest's file name inside a dataset.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The format version this crate writes and reads. Version 1: the groups and columns of
/// [`Group`], one row group per chunk file.
pub const FORMAT_VERSION: u32 = 1;

/// The `format` field: what kind of file the manifest is.
const FORMAT_NAME: &str = "sortase-agd";

/// A column group as listed in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupEntry {
    /// The group's name (its directory).
    pub name: String,
    /// Its columns, in file order.
    pub columns: Vec<String>,
}

/// One chunk: records `first..=last` (ordinals in the dataset, from 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkEntry {
    /// The chunk's index (its file name).
    pub index: usize,
    /// Ordinal of its first record.
    pub first: u64,
    /// Ordinal of its last record (`first - 1` for an empty chunk never occurs: chunks hold records).
    pub last: u64,
    /// Records in the chunk.
    pub records: u64,
    /// Where the chunk's records lie on the references (absent in datasets written before it was
    /// recorded: then a region query computes it from the `results` group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<ChunkPositions>,
}

/// Where one chunk's records lie, recorded at import so that a region query opens only the chunks
/// that overlap it (no chunk file is read to choose them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkPositions {
    /// Whether the chunk's records are in coordinate order: placed records by `(ref_id, pos)`, then
    /// the unplaced ones (`ref_id` -1), as samtools sort writes them and samtools index requires.
    pub sorted: bool,
    /// Per reference with placed records, in record order (empty when not `sorted`).
    pub spans: Vec<RefSpan>,
    /// Records with `ref_id` -1 (unplaced; the region `*`).
    pub unplaced: u64,
}

/// The placed records of one reference in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefSpan {
    /// The reference.
    pub ref_id: i32,
    /// `pos` of the first record (0-based).
    pub first_pos: i32,
    /// `pos` of the last record.
    pub last_pos: i32,
    /// The largest alignment end (htslib `bam_endpos`: 0-based exclusive, `pos + 1` for an unmapped
    /// record or one without reference-consuming CIGAR operations).
    pub max_end: i64,
    /// Records in the span.
    pub records: u64,
}

/// Accumulates a chunk's [`ChunkPositions`] record by record.
#[derive(Debug, Clone)]
pub struct PositionsBuilder {
    positions: ChunkPositions,
}

impl Default for PositionsBuilder {
    fn default() -> Self {
        Self {
            positions: ChunkPositions {
                sorted: true,
                spans: Vec::new(),
                unplaced: 0,
            },
        }
    }
}

impl PositionsBuilder {
    /// Adds the next record: its `ref_id`, `pos` and alignment end (`bam_endpos`).
    #[inline]
    pub fn push(&mut self, ref_id: i32, pos: i32, end: i64) {
        let p = &mut self.positions;
        if ref_id < 0 {
            p.unplaced += 1;
            return;
        }
        if !p.sorted {
            return;
        }
        let in_order = p.unplaced == 0
            && p.spans
                .last()
                .is_none_or(|s| (s.ref_id, s.last_pos) <= (ref_id, pos));
        if !in_order {
            p.sorted = false;
            p.spans.clear();
            return;
        }
        match p.spans.last_mut() {
            Some(s) if s.ref_id == ref_id => {
                s.last_pos = pos;
                s.max_end = s.max_end.max(end);
                s.records += 1;
            }
            _ => p.spans.push(RefSpan {
                ref_id,
                first_pos: pos,
                last_pos: pos,
                max_end: end,
                records: 1,
            }),
        }
    }

    /// The positions so far; the builder starts again.
    pub fn finish(&mut self) -> ChunkPositions {
        std::mem::take(self).positions
    }
}

impl ChunkPositions {
    /// `(ref_id as unsigned, pos)` of the first record: unplaced records sort last.
    fn first_key(&self) -> (u32, i32) {
        self.spans
            .first()
            .map_or((u32::MAX, 0), |s| (s.ref_id as u32, s.first_pos))
    }

    /// The key of the last record.
    fn last_key(&self) -> (u32, i32) {
        match self.spans.last() {
            Some(s) if self.unplaced == 0 => (s.ref_id as u32, s.last_pos),
            _ => (u32::MAX, 0),
        }
    }
}

/// A reference sequence (BAM's binary reference list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceEntry {
    /// Name.
    pub name: String,
    /// Length.
    pub length: u32,
}

/// Who wrote a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The command line.
    pub command_line: String,
    /// The sortase version.
    pub version: String,
}

/// A dataset's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `sortase-agd`.
    pub format: String,
    /// [`FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// Records in the dataset.
    pub records: u64,
    /// Most records per chunk when written.
    pub chunk_size: u64,
    /// The column groups.
    pub groups: Vec<GroupEntry>,
    /// The chunks, in record order.
    pub chunks: Vec<ChunkEntry>,
    /// The references, indexed by the `ref_id` and `next_ref_id` columns.
    pub references: Vec<ReferenceEntry>,
    /// The SAM header text, byte for byte.
    pub header: String,
    /// The sort order (`@HD SO`; `unknown` when absent).
    pub sort_order: String,
    /// Who wrote each group, by group name.
    pub provenance: BTreeMap<String, Provenance>,
    /// Extra column groups added after import ([`crate::extra`]), each aligned with the chunks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<ExtraGroup>,
}

/// An extra column group: one Parquet file per chunk in directory `dir`, row `i` of chunk `c`
/// belonging to record `c.first + i`. Replacing a group writes a new directory and switches the
/// manifest to it, so the old files stay valid until the manifest is renamed into place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraGroup {
    /// The group's name (unique in the dataset, not a core group's).
    pub name: String,
    /// The directory of its chunk files, relative to the dataset.
    pub dir: String,
    /// Its columns, in file order.
    pub columns: Vec<String>,
    /// Who wrote it.
    pub provenance: Provenance,
}

impl Manifest {
    /// A manifest of `groups` written by `provenance`, with no chunks yet.
    pub fn new(
        groups: &[Group],
        header: String,
        references: Vec<ReferenceEntry>,
        chunk_size: u64,
        provenance: Provenance,
    ) -> Self {
        let sort_order = sort_order_of(&header);
        Self {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            records: 0,
            chunk_size,
            groups: groups
                .iter()
                .map(|g| GroupEntry {
                    name: g.name().into(),
                    columns: g.columns(),
                })
                .collect(),
            chunks: Vec::new(),
            references,
            header,
            sort_order,
            provenance: groups
                .iter()
                .map(|g| (g.name().to_string(), provenance.clone()))
                .collect(),
            extra: Vec::new(),
        }
    }

    /// Appends chunks of `counts` records each, in order.
    pub fn set_chunks(&mut self, counts: &[u64]) {
        self.chunks.clear();
        let mut first = 0;
        for (index, &records) in counts.iter().enumerate() {
            self.chunks.push(ChunkEntry {
                index,
                first,
                last: first + records - 1,
                records,
                positions: None,
            });
            first += records;
        }
        self.records = first;
    }

    /// Records each chunk's positions (`positions[i]` of chunk `i`; as many as chunks).
    pub fn set_positions(&mut self, positions: Vec<ChunkPositions>) {
        for (c, p) in self.chunks.iter_mut().zip(positions) {
            c.positions = Some(p);
        }
    }

    /// Whether the records are in coordinate order across the whole dataset (every chunk sorted,
    /// each chunk's first record not before the previous chunk's last); `None` when a chunk's
    /// positions are not recorded.
    pub fn coordinate_sorted(&self) -> Option<bool> {
        let mut previous: Option<(u32, i32)> = None;
        for c in &self.chunks {
            let p = c.positions.as_ref()?;
            if !p.sorted || previous.is_some_and(|last| p.first_key() < last) {
                return Some(false);
            }
            previous = Some(p.last_key());
        }
        Some(true)
    }

    /// Whether the dataset has `group`.
    pub fn has_group(&self, group: Group) -> bool {
        self.groups.iter().any(|g| g.name == group.name())
    }

    /// The extra group named `name`.
    pub fn extra_group(&self, name: &str) -> Option<&ExtraGroup> {
        self.extra.iter().find(|g| g.name == name)
    }

    /// The manifest as pretty JSON.
    pub fn to_json(&self) -> String {
        // INVARIANT: every field serialises (strings, numbers, maps with string keys).
        serde_json::to_string_pretty(self).expect("manifest serialises") + "\n"
    }

    /// Reads and checks `DIR/manifest.json`.
    pub fn read(dir: &Path) -> Result<Self, AgdError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| AgdError::Io {
            path: path.clone(),
            source,
        })?;
        Self::from_json(&text).map_err(|message| AgdError::BadManifest { path, message })
    }

    /// Parses and checks a manifest's JSON text (what [`Manifest::read`] does with the file).
    pub fn from_json(text: &str) -> Result<Self, String> {
        let m: Manifest = serde_json::from_str(text).map_err(|e| e.to_string())?;
        m.check()?;
        Ok(m)
    }

    /// Checks the manifest against itself and this crate's format.
    fn check(&self) -> Result<(), String> {
        if self.format != FORMAT_NAME {
            return Err(format!("format {:?} is not {FORMAT_NAME:?}", self.format));
        }
        if self.format_version != FORMAT_VERSION {
            return Err(format!(
                "format version {} is not supported (this sortase reads version {FORMAT_VERSION})",
                self.format_version
            ));
        }
        for g in &self.groups {
            let group = Group::from_name(&g.name)
                .ok_or_else(|| format!("unknown column group {:?}", g.name))?;
            if g.columns != group.columns() {
                return Err(format!(
                    "group {:?} lists columns {:?}, version {FORMAT_VERSION} has {:?}",
                    g.name,
                    g.columns,
                    group.columns()
                ));
            }
        }
        for (i, g) in self.extra.iter().enumerate() {
            check_extra_name(&g.name)?;
            check_extra_name(&g.dir)?;
            if g.columns.is_empty() {
                return Err(format!("extra group {:?} has no columns", g.name));
            }
            for other in &self.extra[..i] {
                if other.name == g.name || other.dir == g.dir {
                    return Err(format!(
                        "extra groups {:?} and {:?} share a name or directory",
                        other.name, g.name
                    ));
                }
            }
        }
        let mut next = 0u64;
        for (i, c) in self.chunks.iter().enumerate() {
            if c.index != i
                || c.first != next
                || c.records == 0
                || c.last + 1 != c.first + c.records
            {
                return Err(format!(
                    "chunk {i} (index {}, records {}..={}, count {}) does not follow record {next}",
                    c.index, c.first, c.last, c.records
                ));
            }
            if let Some(p) = c.positions.as_ref().filter(|p| p.sorted) {
                let placed: u64 = p.spans.iter().map(|s| s.records).sum();
                if placed + p.unplaced != c.records {
                    return Err(format!(
                        "chunk {i}: its positions count {} records, the chunk holds {}",
                        placed + p.unplaced,
                        c.records
                    ));
                }
            }
            next += c.records;
        }
        if next != self.records {
            return Err(format!(
                "chunks hold {next} records, the manifest says {}",
                self.records
            ));
        }
        Ok(())
    }
}

/// Checks an extra group's name or directory: a plain file name (letters, digits, `_`, `-`, `.`,
/// not starting with `.`), not a core group's directory.
pub fn check_extra_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if !plain {
        return Err(format!(
            "extra group {name:?}: names are letters, digits, '_', '-' and '.', not starting with '.'"
        ));
    }
    if Group::from_name(name).is_some() {
        return Err(format!("extra group {name:?}: the name of a core group"));
    }
    Ok(())
}

/// `SO` of the `@HD` line, `unknown` when absent.
fn sort_order_of(header: &str) -> String {
    header
        .lines()
        .find(|l| l.starts_with("@HD\t"))
        .and_then(|l| l.split('\t').find_map(|f| f.strip_prefix("SO:")))
        .unwrap_or("unknown")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let p = Provenance {
            command_line: "sortase agd import x.bam -o ds".into(),
            version: "0.1.0".into(),
        };
        let mut m = Manifest::new(
            &Group::ALL,
            "@HD\tVN:1.6\tSO:coordinate\n".into(),
            vec![],
            2,
            p,
        );
        m.set_chunks(&[2, 1]);
        m
    }

    #[test]
    fn round_trips_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let m = manifest();
        assert_eq!(m.sort_order, "coordinate");
        assert_eq!(m.chunks[1].first, 2);
        std::fs::write(dir.path().join(MANIFEST_FILE), m.to_json()).unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap(), m);
    }

    #[test]
    fn rejects_counts_that_disagree() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = manifest();
        m.records = 4;
        std::fs::write(dir.path().join(MANIFEST_FILE), m.to_json()).unwrap();
        let e = Manifest::read(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("chunks hold 3 records, the manifest says 4"),
            "{e}"
        );
        m.records = 3;
        m.chunks[1].first = 3;
        std::fs::write(dir.path().join(MANIFEST_FILE), m.to_json()).unwrap();
        let e = Manifest::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("does not follow record 2"), "{e}");
    }

    /// A manifest from a shared bucket must not send readers or writers outside the dataset: an
    /// extra group's directory (or name) that climbs out, is absolute, nests, or hides is refused.
    #[test]
    fn extra_group_directories_stay_inside_the_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let good = ExtraGroup {
            name: "scores".into(),
            dir: "scores".into(),
            columns: vec!["score".into()],
            provenance: Provenance {
                command_line: "sortase agd add-column".into(),
                version: "0.1.0".into(),
            },
        };
        let mut m = manifest();
        m.extra = vec![good.clone()];
        std::fs::write(dir.path().join(MANIFEST_FILE), m.to_json()).unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap(), m);
        for bad in [
            "..",
            "../victim",
            "/etc",
            "a/b",
            ".hidden",
            "",
            "x\\..\\y",
            Group::ALL[0].name(),
        ] {
            for field in ["dir", "name"] {
                let mut g = good.clone();
                match field {
                    "dir" => g.dir = bad.into(),
                    _ => g.name = bad.into(),
                }
                m.extra = vec![g];
                std::fs::write(dir.path().join(MANIFEST_FILE), m.to_json()).unwrap();
                let e = Manifest::read(dir.path()).unwrap_err().to_string();
                assert!(e.contains("extra group"), "{field} {bad:?}: {e}");
            }
        }
    }
}
