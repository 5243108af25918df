//! Raw BAM records for the sort crate's tests (the unit tests of `sorter.rs` and the property
//! tests include this file).

use sortase_bam::RecordBatch;

/// A minimal raw BAM record (with `block_size`): no CIGAR, no sequence, the given aux bytes.
pub fn record(tid: i32, pos: i32, flag: u16, name: &str, aux: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&tid.to_le_bytes());
    body.extend_from_slice(&pos.to_le_bytes());
    body.push(name.len() as u8 + 1); // l_read_name
    body.push(30); // mapq
    body.extend_from_slice(&4680u16.to_le_bytes()); // bin
    body.extend_from_slice(&0u16.to_le_bytes()); // n_cigar_op
    body.extend_from_slice(&flag.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes()); // l_seq
    body.extend_from_slice(&(-1i32).to_le_bytes()); // next refID
    body.extend_from_slice(&(-1i32).to_le_bytes()); // next pos
    body.extend_from_slice(&0i32.to_le_bytes()); // tlen
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    body.extend_from_slice(aux);
    let mut r = (body.len() as u32).to_le_bytes().to_vec();
    r.extend_from_slice(&body);
    r
}

/// `records` (raw, each with its `block_size`) as one batch.
pub fn batch(records: &[Vec<u8>]) -> RecordBatch {
    let mut buf = Vec::new();
    let mut offsets = Vec::new();
    for r in records {
        offsets.push(buf.len() as u32);
        buf.extend_from_slice(r);
    }
    let end = buf.len();
    RecordBatch::from_parts(buf, offsets, end, 0)
}
