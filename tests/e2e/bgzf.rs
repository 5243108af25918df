//! Minimal BGZF tooling for crafting broken inputs without extra crates:
//! block scanning, CRC-32, and a writer using stored (uncompressed) deflate
//! blocks, which every inflater accepts.

/// Largest payload per block: 65536 - 18 (header) - 5 (stored header) - 8.
const MAX_PAYLOAD: usize = 0xff00;

/// The standard 28-byte BGZF end-of-file block.
pub const EOF_BLOCK: [u8; 28] = [
    0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 0x06, 0, 0x42, 0x43, 0x02, 0, 0x1b, 0, 0x03, 0, 0,
    0, 0, 0, 0, 0, 0, 0,
];

/// CRC-32 (IEEE, as gzip uses).
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One BGZF block holding `data` (at most `MAX_PAYLOAD` bytes) uncompressed.
fn stored_block(data: &[u8]) -> Vec<u8> {
    assert!(data.len() <= MAX_PAYLOAD);
    let len = data.len() as u16;
    let bsize = (18 + 5 + data.len() + 8 - 1) as u16;
    let mut b = vec![
        0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 0x06, 0, 0x42, 0x43, 0x02, 0,
    ];
    b.extend_from_slice(&bsize.to_le_bytes());
    b.push(0x01); // BFINAL=1, BTYPE=00 (stored)
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&(!len).to_le_bytes());
    b.extend_from_slice(data);
    b.extend_from_slice(&crc32(data).to_le_bytes());
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b
}

/// `data` as a complete BGZF file (with EOF block).
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = data.chunks(MAX_PAYLOAD).flat_map(stored_block).collect();
    out.extend_from_slice(&EOF_BLOCK);
    out
}

/// `(offset, length)` of each BGZF block, read from the BSIZE fields.
pub fn blocks(file: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 18 <= file.len() {
        assert_eq!(
            &file[at..at + 4],
            &[0x1f, 0x8b, 0x08, 0x04],
            "not a BGZF block at {at}"
        );
        let len = usize::from(u16::from_le_bytes([file[at + 16], file[at + 17]])) + 1;
        out.push((at, len));
        at += len;
    }
    out
}

/// Byte length of the BAM header (magic through the reference list).
pub fn bam_header_len(raw: &[u8]) -> usize {
    let u32_at = |at: usize| u32::from_le_bytes(raw[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 8 + u32_at(4);
    let n_ref = u32_at(at);
    at += 4;
    for _ in 0..n_ref {
        at += 4 + u32_at(at) + 4;
    }
    at
}

#[test]
fn crc32_known_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}
