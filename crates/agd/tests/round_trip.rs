//! Property test of the dataset's column encoding, the path of `agd import` and `agd export`: random
//! records → [`ChunkBuilder`] → one Parquet file per group per chunk ([`write_group`]) plus the
//! manifest → [`read_chunk_records`] gives back the records byte for byte, in one chunk or several.
//!
//! The records are the bam tests' random valid records (`crates/bam/tests/support/records.rs`), some
//! of them then made what SAM text cannot say but BAM can hold, so that both ways of storing a record
//! are covered: a `bin` that is not the computed one (kept in the typed columns), and a read name that
//! is not UTF-8 or holds a NUL, a CIGAR op code above 8, a non-zero padding nibble, or a quality above
//! 93 (kept whole in `raw_record`), and arbitrary aux bytes (kept as they are).
//!
//! `PROPTEST_CASES` sets the number of cases (default here: 64, about a second).

#[path = "../../bam/tests/support/records.rs"]
mod records;

use proptest::prelude::*;
use records::{encode, rec, Rec};
use sortase_agd::{
    chunk_path, read_chunk_records, write_group, ChunkBuilder, Group, Manifest, Provenance,
    WriteOptions,
};

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 64;
    }
    config
}

/// Changes to a record that a SAM line cannot say; `None` leaves a field as written.
#[derive(Clone, Debug)]
struct Wild {
    bin: Option<u16>,
    name: Option<Vec<u8>>,
    /// (which stored CIGAR op, new op code 9-15)
    op_code: Option<(usize, u8)>,
    /// Low nibble of the last sequence byte when `l_seq` is odd.
    padding: Option<u8>,
    /// (which base, quality 94-254)
    quality: Option<(usize, u8)>,
    aux: Option<Vec<u8>>,
}

fn wild() -> impl Strategy<Value = Wild> {
    (
        prop::option::weighted(0.3, any::<u16>()),
        prop::option::weighted(0.2, prop::collection::vec(any::<u8>(), 1..20)),
        prop::option::weighted(0.2, (any::<usize>(), 9u8..16)),
        prop::option::weighted(0.2, 1u8..16),
        prop::option::weighted(0.2, (any::<usize>(), 94u8..255)),
        prop::option::weighted(0.2, prop::collection::vec(any::<u8>(), 0..24)),
    )
        .prop_map(|(bin, name, op_code, padding, quality, aux)| Wild {
            bin,
            name,
            op_code,
            padding,
            quality,
            aux,
        })
}

/// The record's BAM bytes with `w` applied, and whether the typed columns cannot rebuild them (so
/// the dataset must keep the record whole).
fn wild_record(r: &Rec, w: &Wild) -> (Vec<u8>, bool) {
    let mut r = r.clone();
    let mut raw = false;
    if let Some(name) = &w.name {
        raw |= name.contains(&0) || std::str::from_utf8(name).is_err();
        r.name = name.clone();
    }
    let mut b = encode(&r);
    if let Some(bin) = w.bin {
        b[10..12].copy_from_slice(&bin.to_le_bytes());
    }
    let cigar_at = 32 + r.name.len() + 1;
    let n_cigar = usize::from(u16::from_le_bytes([b[12], b[13]]));
    if let (Some((i, code)), true) = (w.op_code, n_cigar > 0) {
        let at = cigar_at + 4 * (i % n_cigar);
        b[at] = (b[at] & 0xf0) | code;
        raw = true;
    }
    let seq_at = cigar_at + 4 * n_cigar;
    let l_seq = r.seq.len();
    if let (Some(nibble), true) = (w.padding, l_seq % 2 == 1) {
        b[seq_at + l_seq / 2] |= nibble;
        raw = true;
    }
    let qual_at = seq_at + l_seq.div_ceil(2);
    if let (Some((i, q)), true) = (w.quality, l_seq > 0) {
        b[qual_at + i % l_seq] = q;
        raw = true;
    }
    if let Some(aux) = &w.aux {
        b.truncate(qual_at + l_seq);
        b.extend_from_slice(aux);
    }
    (b, raw)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn records_come_back_from_the_columns_byte_for_byte(
        rs in prop::collection::vec((rec(), prop::option::weighted(0.4, wild())), 1..16),
        chunk_size in 1usize..10,
        bases_dictionary in any::<bool>(),
    ) {
        let records: Vec<(Vec<u8>, bool)> = rs
            .iter()
            .map(|(r, w)| match w {
                Some(w) => wild_record(r, w),
                None => (encode(r), false),
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let options = WriteOptions { bases_dictionary, ..WriteOptions::default() };
        let mut chunk = ChunkBuilder::default();
        let mut counts = Vec::new();
        for (index, part) in records.chunks(chunk_size).enumerate() {
            for (bytes, _) in part {
                prop_assert!(sortase_bam::check_record(bytes, 3, 0).is_ok());
                chunk.push(bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            let raw = part.iter().filter(|(_, raw)| *raw).count();
            prop_assert_eq!(chunk.raw_records(), raw);
            let unplaced = part.iter().filter(|(b, _)| b[..4] == (-1i32).to_le_bytes()).count();
            prop_assert_eq!(chunk.take_positions().unplaced, unplaced as u64);
            for (group, batch) in chunk.finish().map_err(|e| TestCaseError::fail(e.to_string()))? {
                let path = chunk_path(dir.path(), group, index);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                let file = std::fs::File::create(&path).unwrap();
                write_group(group, &batch, file, &options).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            counts.push(part.len() as u64);
        }
        let by = Provenance { command_line: "test".into(), version: "0".into() };
        let mut manifest = Manifest::new(&Group::ALL, String::new(), vec![], chunk_size as u64, by);
        manifest.set_chunks(&counts);
        let manifest = Manifest::from_json(&manifest.to_json()).map_err(TestCaseError::fail)?;
        prop_assert_eq!(manifest.chunks.len(), records.len().div_ceil(chunk_size));

        let (mut out, mut offsets) = (Vec::new(), Vec::new());
        for c in &manifest.chunks {
            let n = read_chunk_records(dir.path(), c, &mut out, &mut offsets)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(n as u64, c.records);
        }
        let mut expected = Vec::new();
        let mut expected_offsets = Vec::new();
        for (bytes, _) in &records {
            expected_offsets.push(expected.len() as u32);
            expected.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            expected.extend_from_slice(bytes);
        }
        prop_assert_eq!(&offsets, &expected_offsets);
        for (i, &start) in offsets.iter().enumerate() {
            let end = offsets.get(i + 1).map_or(out.len(), |&o| o as usize);
            let want = expected_offsets.get(i + 1).map_or(expected.len(), |&o| o as usize);
            prop_assert_eq!(&out[start as usize..end], &expected[start as usize..want], "record {}", i);
        }
        prop_assert_eq!(out.len(), expected.len());
    }
}
