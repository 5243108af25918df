//! An AGD dataset as fq2bam's reads (Persona's pipeline: `agd import` of FASTQ, then alignment of
//! the dataset): the primary records of its chunks, in order, as the reads samtools fastq would
//! print of them (secondary and supplementary records skipped, reverse-strand reads
//! reverse-complemented). A READ1 followed by the READ2 of the same name is a pair (one fragment of
//! two reads, as R1 and R2 files give it), any other record a read of its own. A dataset imported
//! from R1 and R2 thus gives the aligner the reads of the two files, in their order, pair by pair.
//!
//! A distributed fq2bam's align task maps the fragments whose first read lies in its chunks
//! ([`DatasetReads::part`]): it skips a leading READ2 whose READ1 ends the chunks before, and reads
//! on past its last chunk for the READ2 of a final READ1, so every fragment is mapped once, as
//! on one machine.
//!
//! Names are the dataset's: `agd import` drops a final `/1` or `/2`, and minimap2 breaks ties
//! between equally good hits by a hash of the read name, so for reads named with such suffixes the
//! records can differ from those of the FASTQ files where minimap2 breaks a tie; Illumina names
//! (the read number in the comment) are the same either way.

use crate::reads::{ChunkSource, ReadChunk};
use crate::AlignError;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt16Type;
use arrow_array::{Array, StringArray, UInt16Array};
use sortase_agd::{self as agd, ChunkEntry, Group};
use sortase_bam::flags::{PAIRED, READ1, READ2, REVERSE, SECONDARY, SUPPLEMENTARY};
use sortase_exec::agd::complement;
use sortase_exec::agd::open_manifest;
use std::path::{Path, PathBuf};

/// One chunk's columns that make reads.
struct Columns {
    names: StringArray,
    bases: StringArray,
    quals: StringArray,
    flags: UInt16Array,
}

/// The last primary record of a chunk: its name and flag (the names and flags only are read).
fn last_primary(dir: &Path, chunk: &ChunkEntry) -> Result<Option<(Vec<u8>, u16)>, agd::AgdError> {
    let names = agd::read_group(dir, Group::Names, chunk, None)?;
    let results = agd::read_group(dir, Group::Results, chunk, Some(&["flag"]))?;
    let (names, flags) = (
        names.batch.column(0).as_string::<i32>(),
        results.batch.column(0).as_primitive::<UInt16Type>(),
    );
    Ok((0..flags.len())
        .rev()
        .find(|&i| flags.value(i) & (SECONDARY | SUPPLEMENTARY) == 0)
        .map(|i| (names.value(i).as_bytes().to_vec(), flags.value(i))))
}

impl Columns {
    fn read(dir: &Path, chunk: &ChunkEntry) -> Result<Self, agd::AgdError> {
        let col = |g: Group, cols: Option<&[&str]>| agd::read_group(dir, g, chunk, cols);
        let (names, bases, quals) = (
            col(Group::Names, None)?,
            col(Group::Bases, None)?,
            col(Group::Qual, None)?,
        );
        let results = col(Group::Results, Some(&["flag"]))?;
        Ok(Self {
            names: names.batch.column(0).as_string::<i32>().clone(),
            bases: bases.batch.column(0).as_string::<i32>().clone(),
            quals: quals.batch.column(0).as_string::<i32>().clone(),
            flags: results.batch.column(0).as_primitive::<UInt16Type>().clone(),
        })
    }
}

/// The reads of a dataset, fragment after fragment ([`ChunkSource`]).
pub(crate) struct DatasetReads {
    dir: PathBuf,
    chunks: Vec<ChunkEntry>,
    /// The next chunk to read.
    next: usize,
    /// The first chunk where no fragment may start (a part's end; `usize::MAX`: none).
    stop: usize,
    /// The name of a READ1 that ends the chunks before a part: its READ2, if it comes first,
    /// is that fragment's and skipped.
    continued: Option<Vec<u8>>,
    current: Option<Columns>,
    /// The ordinal of the current chunk's first record.
    first: u64,
    /// The next row of `current`.
    row: usize,
    fragments: u64,
    /// Whether the aligner maps a fragment's reads together (pairs need it).
    fragment_mode: bool,
    preset: String,
    /// The name of a READ1 whose mate is looked for; reverse-complement buffers.
    name: Vec<u8>,
    seq: Vec<u8>,
    qual: Vec<u8>,
}

/// A primary record: its row in the current chunk, flag and 1-based number in the dataset.
type Row = (usize, u16, u64);

impl DatasetReads {
    /// The reads of dataset `dir`; pairs need an aligner in fragment mode (a paired preset, as
    /// two FASTQ files do: `preset` names it in the message; [`DatasetReads::fragment_mode`]).
    pub fn open(dir: &Path, preset: &str) -> anyhow::Result<Self> {
        let manifest = open_manifest(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            chunks: manifest.chunks,
            next: 0,
            stop: usize::MAX,
            continued: None,
            current: None,
            first: 0,
            row: 0,
            fragments: 0,
            fragment_mode: true,
            preset: preset.to_string(),
            name: Vec::new(),
            seq: Vec::new(),
            qual: Vec::new(),
        })
    }

    /// Only the fragments whose first read lies in chunks `chunks` (of the manifest's list).
    pub fn part(mut self, chunks: std::ops::Range<usize>) -> anyhow::Result<Self> {
        self.next = chunks.start.min(self.chunks.len());
        self.stop = chunks.end;
        // The last primary record before the part: a READ1 there may own the part's first read.
        for k in (0..self.next).rev() {
            let last = last_primary(&self.dir, &self.chunks[k]).map_err(|e| self.error(e))?;
            if let Some((name, flag)) = last {
                if flag & (PAIRED | READ1 | READ2) == PAIRED | READ1 {
                    self.continued = Some(name);
                }
                break;
            }
        }
        Ok(self)
    }

    /// Whether the aligner maps a fragment's reads together.
    pub fn fragment_mode(mut self, on: bool) -> Self {
        self.fragment_mode = on;
        self
    }

    fn error(&self, what: impl std::fmt::Display) -> AlignError {
        AlignError::Source(format!("{}: {what}", self.dir.display()))
    }

    /// The next primary record (`None`: the dataset ends), reading chunks as needed.
    fn next_primary(&mut self) -> Result<Option<Row>, AlignError> {
        loop {
            if let Some(c) = &self.current {
                while self.row < c.flags.len() {
                    let (row, flag) = (self.row, c.flags.value(self.row));
                    self.row += 1;
                    if flag & (SECONDARY | SUPPLEMENTARY) == 0 {
                        return Ok(Some((row, flag, self.first + row as u64 + 1)));
                    }
                }
            }
            let Some(chunk) = self.chunks.get(self.next) else {
                return Ok(None);
            };
            let columns = Columns::read(&self.dir, chunk).map_err(|e| self.error(e))?;
            if columns.flags.len() as u64 != chunk.records {
                return Err(self.error(format!(
                    "chunk {} holds {} records, the manifest says {}",
                    chunk.index,
                    columns.flags.len(),
                    chunk.records
                )));
            }
            self.first = chunk.first;
            self.next += 1;
            self.current = Some(columns);
            self.row = 0;
        }
    }

    /// Takes the next primary record if it is the READ2 named `self.name`; else leaves it for
    /// the next fragment (a chunk read to find it stays current, scanned again from its start).
    fn take_mate(&mut self) -> Result<Option<Row>, AlignError> {
        let (next, row) = (self.next, self.row);
        let found = self.next_primary()?;
        if let (Some((r, f, _)), Some(c)) = (found, &self.current) {
            let read2 = f & (PAIRED | READ1 | READ2) == PAIRED | READ2;
            if read2 && c.names.value(r).as_bytes() == self.name.as_slice() {
                return Ok(found);
            }
        }
        self.row = if self.next == next { row } else { 0 };
        Ok(None)
    }

    fn name_is(&self, row: usize, name: &[u8]) -> bool {
        self.current
            .as_ref()
            .is_some_and(|c| c.names.value(row).as_bytes() == name)
    }

    /// Adds the read of `row` to the current fragment.
    fn push(&mut self, chunk: &mut ReadChunk, row: usize, flag: u16) {
        let Some(c) = &self.current else { return };
        let name = c.names.value(row).as_bytes();
        let seq = if c.bases.is_valid(row) {
            c.bases.value(row).as_bytes()
        } else {
            b""
        };
        let qual = c.quals.is_valid(row).then(|| c.quals.value(row).as_bytes());
        if flag & REVERSE == 0 {
            chunk.push_parts(name, seq, qual);
            return;
        }
        self.seq.clear();
        self.seq.extend(seq.iter().rev().map(|&b| complement(b)));
        self.qual.clear();
        if let Some(q) = qual {
            self.qual.extend(q.iter().rev());
        }
        chunk.push_parts(name, &self.seq, qual.map(|_| self.qual.as_slice()));
    }
}

impl ChunkSource for DatasetReads {
    fn fill(&mut self, chunk: &mut ReadChunk, target_bases: usize) -> Result<(), AlignError> {
        chunk.clear();
        while chunk.bases() < target_bases {
            let Some((row, flag, _)) = self.next_primary()? else {
                break;
            };
            if self.next > self.stop {
                break; // past the part: the fragment is the next part's
            }
            if let Some(name) = self.continued.take() {
                let read2 = flag & (PAIRED | READ1 | READ2) == PAIRED | READ2;
                if read2 && self.name_is(row, &name) {
                    continue; // the mate of the READ1 that ends the part before
                }
            }
            chunk.start_fragment();
            self.push(chunk, row, flag);
            if flag & (PAIRED | READ1 | READ2) == PAIRED | READ1 {
                self.name.clear();
                if let Some(c) = &self.current {
                    self.name.extend_from_slice(c.names.value(row).as_bytes());
                }
                if let Some((r2, f2, number)) = self.take_mate()? {
                    if !self.fragment_mode {
                        return Err(AlignError::Option(format!(
                            "{}: record {number} is a pair's second read, and --preset {} maps \
                             reads one by one: use a paired preset such as sr",
                            self.dir.display(),
                            self.preset
                        )));
                    }
                    self.push(chunk, r2, f2);
                }
            }
            self.fragments += 1;
        }
        Ok(())
    }

    fn fragments(&self) -> u64 {
        self.fragments
    }
}
