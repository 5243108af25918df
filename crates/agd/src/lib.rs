//! AGD (Aggregate Genomic Data, after Persona) datasets on Parquet: a directory holding
//! `manifest.json` and one Parquet file per column group per chunk of records,
//! `DIR/<group>/<chunk:06>.parquet`. A step reads only the groups it needs (flagstat reads
//! `results`), chunks are units of parallel work, and every file is a plain Parquet table that DuckDB,
//! Polars or Spark read without sortase.
//!
//! Unlike ADAM, a dataset converts back to the BAM it came from exactly: the typed columns keep what
//! BAM keeps (tags as their raw aux bytes, the CIGAR as stored, `bin` when it is not the computed one)
//! and a record the columns cannot rebuild byte for byte (a read name that is not UTF-8, a CIGAR op
//! code above 8, a non-zero padding nibble, a quality above 93) is also kept whole in `raw_record`.
//!
//! ```
//! use sortase_agd::{chunk_path, read_chunk_records, write_group, ChunkBuilder, Manifest};
//! use sortase_agd::{Group, Provenance, WriteOptions};
//! # let dir = tempfile::tempdir().unwrap();
//! // One unmapped record "r1" with SEQ "ACG" and no qualities (BAM layout, SAM spec §4.2).
//! let mut raw = Vec::new();
//! for v in [-1i32, -1] { raw.extend_from_slice(&v.to_le_bytes()); } // refID, pos
//! raw.extend_from_slice(&[3, 0]);                                    // l_read_name, mapq
//! raw.extend_from_slice(&4680u16.to_le_bytes());                     // bin
//! raw.extend_from_slice(&0u16.to_le_bytes());                        // n_cigar_op
//! raw.extend_from_slice(&4u16.to_le_bytes());                        // flag
//! raw.extend_from_slice(&3u32.to_le_bytes());                        // l_seq
//! for v in [-1i32, -1, 0] { raw.extend_from_slice(&v.to_le_bytes()); } // next refID, pos, tlen
//! raw.extend_from_slice(b"r1\0");
//! raw.extend_from_slice(&[0x12, 0x40, 0xff, 0xff, 0xff]);          // A C G, qualities absent
//! let mut chunk = ChunkBuilder::default();
//! chunk.push(&raw)?;
//! for (group, batch) in chunk.finish()? {
//!     let path = chunk_path(dir.path(), group, 0);
//!     std::fs::create_dir_all(path.parent().unwrap()).unwrap();
//!     write_group(group, &batch, std::fs::File::create(&path).unwrap(), &WriteOptions::default())?;
//! }
//! let by = Provenance { command_line: "example".into(), version: "0".into() };
//! let mut manifest = Manifest::new(&Group::ALL, String::new(), vec![], 1, by);
//! manifest.set_chunks(&[1]);
//! let (mut out, mut offsets) = (Vec::new(), Vec::new());
//! assert_eq!(read_chunk_records(dir.path(), &manifest.chunks[0], &mut out, &mut offsets)?, 1);
//! assert_eq!(&out[4..], &raw[..]); // block_size, then the same bytes
//! # Ok::<(), sortase_agd::AgdError>(())
//! ```

mod decode;
mod encode;
mod error;
pub mod extra;
pub mod manifest;
mod schema;

pub use decode::{
    append_records, read_chunk_records, read_columns, read_group, read_group_rows, ChunkFile,
};
pub use encode::{write_group, ChunkBuilder, WriteOptions, CHUNK_BYTES_LIMIT};
pub use error::AgdError;
pub use manifest::{
    ChunkEntry, ChunkPositions, ExtraGroup, Manifest, PositionsBuilder, Provenance, RefSpan,
    ReferenceEntry, FORMAT_VERSION, MANIFEST_FILE,
};
pub use schema::Group;

/// The file of column group `group` of chunk `index` inside dataset `dir`.
pub fn chunk_path(dir: &std::path::Path, group: Group, index: usize) -> std::path::PathBuf {
    dir.join(group.name()).join(format!("{index:06}.parquet"))
}
