#![no_main]
//! Arbitrary bytes as a FASTQ/FASTA file (plain; gzip and BGZF when they start with the gzip magic)
//! through `sortase_align::fastq::FastqReader`, the reader of `sortase fq2bam` and `agd import`.
//!
//! Must hold: errors, never panics; each record has a name without white space, a quality string
//! exactly as long as its sequence (FASTQ), and no more than `MAX_RECORD_BYTES`.

use libfuzzer_sys::fuzz_target;
use sortase_align::fastq::{FastqReader, Record, MAX_RECORD_BYTES};
use std::io::Cursor;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) =
        FastqReader::from_reader(Box::new(Cursor::new(data.to_vec())), Path::new("fuzz.fq"))
    else {
        return;
    };
    let mut rec = Record::default();
    let mut n = 0u64;
    while let Ok(true) = reader.read(&mut rec) {
        n += 1;
        assert!(!rec.name().iter().any(|c| b" \t\n\r\x0b\x0c".contains(c)));
        if let Some(q) = rec.quality() {
            assert_eq!(q.len(), rec.sequence().len());
        }
        assert!(rec.name().len() + rec.sequence().len() <= MAX_RECORD_BYTES);
        assert_eq!(reader.records(), n);
    }
});
