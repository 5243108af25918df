//! Property test of `agd import` and `agd export` as jobs (issue 28): a BAM file of random valid
//! records (the bam tests' `crates/bam/tests/support/records.rs`) imported with a random chunk size,
//! with or without `--checksums`, then exported to BAM, gives back the same records byte for byte,
//! and the import reports the records and chunks it wrote.
//!
//! `PROPTEST_CASES` sets the number of cases (default here: 24, about a second).

#[path = "../../../bam/tests/support/records.rs"]
mod records;

use proptest::prelude::*;
use records::{encode, header_text, rec};
use sortase::{AgdExportJob, AgdImportJob, OutputSpec, Runtime};
use sortase_bam::{ChunkStream, Header};
use sortase_bgzf::{
    CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions,
};
use std::io::Write;
use std::path::Path;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 24;
    }
    config
}

/// `records` (without `block_size`) as a BAM file at `path`.
fn write_bam(path: &Path, records: &[Vec<u8>]) {
    let header = Header::from_sam_text(header_text()).unwrap();
    let mut w = ParallelWriter::new(
        Vec::new(),
        WriterOptions::new(2, CompressionLevel::samtools(1)),
    );
    w.write_all(&header.to_bam_bytes()).unwrap();
    for r in records {
        w.write_all(&(r.len() as u32).to_le_bytes()).unwrap();
        w.write_all(r).unwrap();
    }
    std::fs::write(path, w.finish().unwrap().0).unwrap();
}

/// The records of the BAM file at `path`, each with its `block_size`.
fn read_bam(path: &Path) -> Vec<Vec<u8>> {
    let file = std::fs::File::open(path).unwrap();
    let mut s = ChunkStream::new(Box::new(ParallelReader::new(
        file,
        ReaderOptions::with_threads(2),
    )));
    s.read_header().unwrap();
    let mut out = Vec::new();
    while let Some(batch) = s.next_batch().unwrap() {
        out.extend(batch.iter_raw().map(<[u8]>::to_vec));
    }
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn import_then_export_gives_back_the_records(
        rs in prop::collection::vec(rec(), 1..20),
        chunk_size in 1u64..6,
        checksums in any::<bool>(),
    ) {
        let records: Vec<Vec<u8>> = rs.iter().map(encode).collect();
        let dir = tempfile::tempdir().unwrap();
        let (input, dataset, output) =
            (dir.path().join("in.bam"), dir.path().join("ds"), dir.path().join("out.bam"));
        write_bam(&input, &records);
        let rt = Runtime::with_threads(2).unwrap();

        let mut import = AgdImportJob::new(input.to_str().unwrap(), &dataset);
        import.chunk_size = chunk_size;
        import.checksums = checksums;
        let report = import.run(&rt).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        prop_assert_eq!(report.records, records.len() as u64);
        prop_assert_eq!(report.chunks as u64, (records.len() as u64).div_ceil(chunk_size));
        prop_assert_eq!(report.raw_records, 0);

        let mut export = AgdExportJob::new(&dataset, OutputSpec::to_path(&output));
        export.checksums = checksums;
        let report = export.run(&rt).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        prop_assert_eq!(report.records, records.len() as u64);

        let got = read_bam(&output);
        prop_assert_eq!(got.len(), records.len());
        for (i, (got, want)) in got.iter().zip(&records).enumerate() {
            prop_assert_eq!(&got[4..], &want[..], "record {}", i);
        }
    }
}
