//! Bgzipped (or plain) FASTA/FASTQ at full speed: `.fai` and `.loc` index builders fed by a parallel
//! scan over BGZF blocks, htslib's region syntax, and batch retrieval of byte ranges that inflates
//! each needed block once.
//!
//! ```text
//! file ─▶ ParallelReader (inflate, N threads) ─▶ scan_chunk (lines, N threads) ─▶ Stitcher ─▶ FaiBuilder / LocBuilder
//!                                                   block metadata ─────────────────────────▶ .gzi entries
//! regions / names ─▶ byte ranges ─▶ RandomAccess (blocks from .gzi, inflated once, in parallel) ─▶ output
//! ```
//!
//! noodles' FASTA indexer reads plain text only, and one byte at a time; this crate reuses the BGZF
//! engine of `sortase-bgzf` instead. [`fastq`] reads FASTQ/FASTA records one by one (plain, gzip or
//! BGZF), as minimap2 does, for the aligner and the dataset import. Nothing here prints or exits:
//! warnings are returned to the caller.

pub mod access;
mod error;
pub mod fai;
pub mod faidx;
pub mod fastq;
pub mod fastq_cut;
pub mod hash;
pub mod lines;
pub mod loc;
pub mod region;
pub mod scan;

pub use error::FastaError;
