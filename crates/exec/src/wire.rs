//! The serialised forms of what tasks exchange (sort crate types stay free of serde): split-point
//! samples, run indexes, the header; byte strings as hex; and [`WorkFile`], a task's output file
//! written under a temporary name and renamed when complete.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sortase_bam::{Header, Reference};
use sortase_sort::ranges::SplitPoint;
use sortase_sort::run::{RunBlock, RunFile};
use sortase_sort::SortOrder;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Byte strings as lowercase hex in JSON (a number array costs about twice as much).
pub mod hex {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    /// Serialises bytes as hex.
    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            out.push(DIGITS[usize::from(b >> 4)] as char);
            out.push(DIGITS[usize::from(b & 15)] as char);
        }
        s.serialize_str(&out)
    }

    /// Deserialises hex into bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(D::Error::custom(format!(
                "not a hex digit: {:?}",
                c as char
            ))),
        };
        if s.len() % 2 != 0 {
            return Err(D::Error::custom("hex string of odd length"));
        }
        s.as_bytes()
            .chunks(2)
            .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
            .collect()
    }
}

/// A candidate split point: a sampled record's key bytes ([`sortase_sort::order::key_prefix`]) and
/// its input sequence number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// The key bytes.
    #[serde(with = "hex")]
    pub key: Vec<u8>,
    /// The record's place in the input (0-based).
    pub seq: u64,
}

impl Sample {
    /// The serialised form of `split`.
    pub fn of(split: &SplitPoint) -> Self {
        Self {
            key: split.key().to_vec(),
            seq: split.seq(),
        }
    }

    /// The split point again (a key prefix is its own key prefix, so this is exactly the original).
    pub fn to_split(&self, order: &SortOrder) -> SplitPoint {
        SplitPoint::new(order, &self.key, self.seq)
    }
}

/// A run file's path and sparse index ([`RunFile`]), serialised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIndex {
    /// The run file.
    pub path: PathBuf,
    /// Records in the run.
    pub records: u64,
    /// Bytes on disk.
    pub bytes: u64,
    /// Per block: file offset, first record's sequence number, end of its key in `keys`.
    pub blocks: Vec<(u64, u64, usize)>,
    /// The blocks' first keys, back to back.
    #[serde(with = "hex")]
    pub keys: Vec<u8>,
}

impl From<&RunFile> for RunIndex {
    fn from(f: &RunFile) -> Self {
        Self {
            path: f.path.clone(),
            records: f.records,
            bytes: f.bytes,
            blocks: f
                .blocks
                .iter()
                .map(|b| (b.offset, b.first_seq, b.key_end))
                .collect(),
            keys: f.keys.clone(),
        }
    }
}

impl RunIndex {
    /// The run file's index as the sort crate holds it.
    pub fn to_run_file(&self) -> RunFile {
        RunFile {
            path: self.path.clone(),
            records: self.records,
            bytes: self.bytes,
            blocks: self
                .blocks
                .iter()
                .map(|&(offset, first_seq, key_end)| RunBlock {
                    offset,
                    first_seq,
                    key_end,
                })
                .collect(),
            keys: self.keys.clone(),
        }
    }
}

/// A reference of the header: name bytes and length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceData {
    #[serde(with = "hex")]
    name: Vec<u8>,
    length: u32,
}

/// A header kept exactly: its text and its binary reference list (rebuilt without reparsing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderData {
    text: String,
    references: Vec<ReferenceData>,
}

impl HeaderData {
    /// `header`'s text and references.
    pub fn of(header: &Header) -> Self {
        Self {
            text: header.text().to_string(),
            references: header
                .references()
                .iter()
                .map(|r| ReferenceData {
                    name: r.name.clone(),
                    length: r.length,
                })
                .collect(),
        }
    }

    /// The header again, exactly as it was.
    pub fn to_header(&self) -> Header {
        let refs = self
            .references
            .iter()
            .map(|r| Reference {
                name: r.name.clone(),
                length: r.length,
            })
            .collect();
        Header::new(self.text.clone(), refs)
    }
}

/// A task's output file, written under `.NAME.PID-N.tmp` next to its final name and renamed by
/// [`WorkFile::commit`]; removed if dropped uncommitted (error, cancellation). The name is unique
/// per attempt, so two attempts of one task (a retry, a speculative copy) never write one file.
pub struct WorkFile {
    target: PathBuf,
    temp: PathBuf,
    committed: bool,
}

impl WorkFile {
    /// A work file for `target` (not created yet: write to [`WorkFile::path`]).
    pub fn new(target: &Path) -> anyhow::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = target
            .file_name()
            .with_context(|| format!("{}: not a file name", target.display()))?;
        let mut temp = std::ffi::OsString::from(".");
        temp.push(name);
        temp.push(format!(
            ".{}-{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        Ok(Self {
            target: target.to_path_buf(),
            temp: target.with_file_name(temp),
            committed: false,
        })
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.temp
    }

    /// Renames the file to its final name (replacing an earlier attempt's).
    pub fn commit(mut self) -> anyhow::Result<()> {
        std::fs::rename(&self.temp, &self.target).with_context(|| {
            format!(
                "{}: cannot rename from {}",
                self.target.display(),
                self.temp.display()
            )
        })?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for WorkFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_run_indexes_round_trip_through_json() {
        let order = SortOrder::Name { natural: true };
        let mut rec = vec![0u8; 32];
        rec[8] = 3; // l_read_name
        rec.extend_from_slice(b"r1\0");
        rec.extend_from_slice(&[7; 10]); // the rest of the record is not part of the key
        let split = SplitPoint::new(&order, &rec, 2048);
        let sample = Sample::of(&split);
        assert_eq!(sample.key.len(), 35);
        let back: Sample = serde_json::from_str(&serde_json::to_string(&sample).unwrap()).unwrap();
        assert_eq!(back, sample);
        assert_eq!(Sample::of(&back.to_split(&order)), sample);
        let run = RunIndex {
            path: "r.run".into(),
            records: 3,
            bytes: 99,
            blocks: vec![(0, 5, 2), (50, 9, 3)],
            keys: vec![0xab, 0x01, 0xff],
        };
        let json = serde_json::to_string(&run).unwrap();
        assert!(json.contains("\"ab01ff\""), "{json}");
        let back: RunIndex = serde_json::from_str(&json).unwrap();
        assert_eq!(RunIndex::from(&back.to_run_file()), run);
        assert!(serde_json::from_str::<Sample>(r#"{"key":"abc","seq":1}"#).is_err());
    }
}
