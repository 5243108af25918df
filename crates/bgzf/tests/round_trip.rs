//! Property tests of the BGZF engine: whatever is written through [`ParallelWriter`] (any data, any
//! level, any thread count, written in any pieces, with blocks ended anywhere) reads back byte for
//! byte through [`ParallelReader`], the [`BlockLog`] describes the blocks the reader finds, and the
//! `.gzi` built from it points at those blocks.
//!
//! `PROPTEST_CASES` sets the number of cases (default here: 24, a few seconds).

use proptest::prelude::*;
use sortase_bgzf::gzi::{self, GziIndex};
use sortase_bgzf::{
    CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions, BLOCK_DATA_MAX,
    EOF_MARKER,
};
use std::io::Write;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 24;
    }
    config
}

/// `len` bytes from `seed`: runs of one byte (compressible) mixed with noise (incompressible).
fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let r = next();
        let run = (r % 300) as usize + 1;
        if r & (1 << 40) == 0 {
            out.extend(std::iter::repeat_n((r >> 8) as u8, run));
        } else {
            out.extend((0..run).map(|_| next() as u8));
        }
    }
    out.truncate(len);
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn write_then_read_gives_the_same_bytes(
        seed in any::<u64>(),
        len in 0usize..400_000,
        level in -1i32..=9,
        writers in 1usize..=4,
        readers in 1usize..=4,
        pieces in proptest::collection::vec(1usize..100_000, 1..8),
        ends in proptest::collection::vec(0usize..400_000, 0..4),
    ) {
        let bytes = data(seed, len);
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(writers, CompressionLevel::samtools(level)),
        );
        // Write in pieces of the given sizes (cycled), ending blocks early at `ends`.
        let (mut at, mut k) = (0, 0);
        while at < bytes.len() {
            let n = pieces[k % pieces.len()].min(bytes.len() - at);
            let cut = ends.iter().copied().filter(|&e| e > at && e < at + n).min();
            let n = cut.map_or(n, |c| c - at);
            w.write_all(&bytes[at..at + n]).unwrap();
            if cut.is_some() {
                w.end_block().unwrap();
            }
            at += n;
            k += 1;
        }
        let (file, log) = w.finish().unwrap();
        prop_assert!(file.ends_with(&EOF_MARKER));
        prop_assert_eq!(
            log.blocks.iter().map(|&(c, _)| u64::from(c)).sum::<u64>(),
            (file.len() - EOF_MARKER.len()) as u64
        );
        prop_assert!(log.blocks.iter().all(|&(_, u)| u as usize <= BLOCK_DATA_MAX));

        let mut back = Vec::with_capacity(bytes.len());
        let mut blocks = Vec::new();
        for chunk in ParallelReader::new(std::io::Cursor::new(file), ReaderOptions::with_threads(readers)) {
            let chunk = chunk.unwrap();
            back.extend_from_slice(chunk.data());
            blocks.extend(chunk.blocks.iter().filter(|b| b.usize > 0).map(|b| (b.coffset, b.usize)));
        }
        prop_assert!(back == bytes, "{} bytes read back, {} written", back.len(), bytes.len());

        // The .gzi lists every data block but the first, where the reader found it.
        let index = GziIndex::from_block_log(&log);
        let mut gzi_bytes = Vec::new();
        index.write(&mut gzi_bytes).unwrap();
        let entries = gzi::read(&gzi_bytes[..]).unwrap();
        prop_assert_eq!(entries.len(), blocks.len().saturating_sub(1));
        let mut uncompressed = 0u64;
        for (i, &(coffset, usize)) in blocks.iter().enumerate() {
            if i > 0 {
                prop_assert_eq!(entries[i - 1].compressed, coffset);
                prop_assert_eq!(entries[i - 1].uncompressed, uncompressed);
            }
            uncompressed += u64::from(usize);
        }
    }
}
