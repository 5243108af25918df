//! Hostile inputs, built byte by byte: BAM headers and records whose size fields claim gigabytes,
//! BGZF blocks whose ISIZE lies, and a gzip bomb FASTQ. Each must end in a one-line error naming the
//! file (and the offset where there is one), exit status 1, no output, and never an allocation of
//! the claimed size: sortase runs under `ulimit -v` (1.5 GB of address space: `view` and `sort` on a
//! small valid file need about 1 GB of it for their buffers and thread stacks), where an allocation
//! of the 2 GiB claimed would abort the process instead of giving the message.
//!
//! Most of these files also carry the bytes they claim, compressed (a "bomb": BGZF blocks of 65280
//! equal bytes deflate to about 100 bytes each), so a reader that trusts the field and reads on
//! would really fill its memory.

use crate::bgzf::{compress, crc32, EOF_BLOCK};
use crate::common::{dir_listing, p, run, sortase_bin, tempdir};
use std::io::Write;
use std::path::Path;

/// Address-space limit of the runs, in KiB (`ulimit -v`).
const ULIMIT_KB: u64 = 1_500_000;

/// One BGZF block of `data`, deflated (flate2), with a correct CRC32 and `isize` as its ISIZE.
fn deflated_block(data: &[u8], isize: u32) -> Vec<u8> {
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).unwrap();
    let cdata = enc.finish().unwrap();
    let bsize = (18 + cdata.len() + 8 - 1) as u16;
    let mut b = vec![
        0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 0x06, 0, 0x42, 0x43, 0x02, 0,
    ];
    b.extend_from_slice(&bsize.to_le_bytes());
    b.extend_from_slice(&cdata);
    b.extend_from_slice(&crc32(data).to_le_bytes());
    b.extend_from_slice(&isize.to_le_bytes());
    b
}

/// `bytes` of `fill`, as repeated deflated BGZF blocks of 65280 bytes (ending with the EOF block).
fn bomb(fill: u8, bytes: u64) -> Vec<u8> {
    let block = deflated_block(&[fill; 0xff00], 0xff00);
    let n = bytes.div_ceil(0xff00) as usize;
    let mut out = Vec::with_capacity(block.len() * n + 28);
    for _ in 0..n {
        out.extend_from_slice(&block);
    }
    out.extend_from_slice(&EOF_BLOCK);
    out
}

/// The BGZF file `prefix` (uncompressed, in stored blocks, without EOF block) followed by `tail`.
fn bgzf_then(prefix: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut out = compress(prefix);
    out.truncate(out.len() - EOF_BLOCK.len());
    out.extend_from_slice(tail);
    out
}

/// A BAM header: `BAM\1`, l_text, text, n_ref, then (name, length) references.
fn header(text: &[u8], refs: &[(&[u8], u32)]) -> Vec<u8> {
    let mut h = b"BAM\x01".to_vec();
    h.extend_from_slice(&(text.len() as u32).to_le_bytes());
    h.extend_from_slice(text);
    h.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    for (name, len) in refs {
        h.extend_from_slice(&(name.len() as u32 + 1).to_le_bytes());
        h.extend_from_slice(name);
        h.push(0);
        h.extend_from_slice(&len.to_le_bytes());
    }
    h
}

/// A well-formed unmapped record named `r1` with `l_seq` 4 (block_size included).
fn record() -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&(-1i32).to_le_bytes()); // refID
    r.extend_from_slice(&(-1i32).to_le_bytes()); // pos
    r.push(3); // l_read_name
    r.push(0); // mapq
    r.extend_from_slice(&4680u16.to_le_bytes()); // bin
    r.extend_from_slice(&0u16.to_le_bytes()); // n_cigar_op
    r.extend_from_slice(&4u16.to_le_bytes()); // flag: unmapped
    r.extend_from_slice(&4u32.to_le_bytes()); // l_seq
    r.extend_from_slice(&(-1i32).to_le_bytes()); // next_refID
    r.extend_from_slice(&(-1i32).to_le_bytes()); // next_pos
    r.extend_from_slice(&0i32.to_le_bytes()); // tlen
    r.extend_from_slice(b"r1\0");
    r.extend_from_slice(&[0x12, 0x48]); // ACGT
    r.extend_from_slice(&[30; 4]);
    let mut out = (r.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&r);
    out
}

/// Runs sortase with `args` under `ulimit -v`. `SORTASE_E2E_NO_ULIMIT=1` leaves the limit out:
/// for a build under AddressSanitizer, which reserves terabytes of address space for its shadow
/// memory and cannot start under `ulimit -v`; give it `ASAN_OPTIONS=max_allocation_size_mb=1536:
/// allocator_may_return_null=1` instead (docs/security.md).
fn limited(args: &[&str]) -> crate::common::Run {
    let script = match std::env::var_os("SORTASE_E2E_NO_ULIMIT").is_some_and(|v| v == "1") {
        true => "exec \"$0\" \"$@\"".to_string(),
        false => format!("ulimit -v {ULIMIT_KB} && exec \"$0\" \"$@\""),
    };
    let bin = sortase_bin();
    let mut all = vec!["-c", &script, p(&bin)];
    all.extend_from_slice(args);
    run(Path::new("/bin/sh"), &[], &all)
}

/// Runs each command on `bytes` saved as `name`, and checks the failure: exit status 1, one line
/// naming the file and containing every string of `expect`, no output or temporary file left.
fn refused(name: &str, bytes: &[u8], commands: &[&str], expect: &[&str]) {
    let dir = tempdir();
    let input = dir.path().join(name);
    std::fs::write(&input, bytes).unwrap();
    let before = dir_listing(dir.path());
    let mut failures = Vec::new();
    for command in commands {
        let out = dir.path().join("out.bam");
        let dataset = dir.path().join("ds");
        let args: Vec<&str> = match *command {
            "view" => vec!["view", "-b", "-o", p(&out), p(&input)],
            "sort" => vec!["sort", "-o", p(&out), p(&input)],
            "flagstat" => vec!["flagstat", p(&input)],
            "index" => vec!["index", p(&input)],
            "agd-import" => vec!["agd", "import", "-0", p(&input), "-o", p(&dataset)],
            other => panic!("no command {other}"),
        };
        let r = limited(&args);
        let stderr = r.stderr.trim_end();
        let ok = r.status.code() == Some(1)
            && stderr.lines().count() == 1
            && stderr.starts_with("sortase: ")
            && stderr.contains(name)
            && expect.iter().all(|e| stderr.contains(e))
            && dir_listing(dir.path()) == before;
        if !ok {
            failures.push(format!(
                "{command}: exit {:?} (signal {:?}), stderr {stderr:?}, files {:?}",
                r.status.code(),
                std::os::unix::process::ExitStatusExt::signal(&r.status),
                dir_listing(dir.path())
            ));
        }
    }
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

const BAM_COMMANDS: &[&str] = &["view", "sort", "flagstat", "index"];

#[test]
fn header_text_claiming_2_gib_is_refused_before_reading_it() {
    // l_text = 2^31, and 2 GiB of '@' really follow (compressed to ~3 MB).
    let mut prefix = b"BAM\x01".to_vec();
    prefix.extend_from_slice(&(1u32 << 31).to_le_bytes());
    let file = bgzf_then(&prefix, &bomb(b'@', 1 << 31));
    refused("l_text.bam", &file, BAM_COMMANDS, &["l_text 2147483648"]);
}

#[test]
fn a_billion_references_are_refused_before_reading_them() {
    // n_ref = 10^9, followed by 1.5 GB of zero bytes (each 4 of them an l_name of 0).
    let mut prefix = header(b"@HD\tVN:1.6\n", &[]);
    let n = prefix.len();
    prefix[n - 4..].copy_from_slice(&1_000_000_000u32.to_le_bytes());
    let file = bgzf_then(&prefix, &bomb(1, 1_500_000_000));
    refused("n_ref.bam", &file, BAM_COMMANDS, &["n_ref 1000000000"]);
}

#[test]
fn a_reference_name_of_2_gib_is_refused() {
    let mut prefix = header(b"", &[]);
    let n = prefix.len();
    prefix[n - 4..].copy_from_slice(&1u32.to_le_bytes());
    prefix.extend_from_slice(&(1u32 << 31).to_le_bytes()); // l_name
    let file = bgzf_then(&prefix, &bomb(b'a', 1 << 31));
    refused("l_name.bam", &file, BAM_COMMANDS, &["l_name 2147483648"]);
}

#[test]
fn a_record_claiming_2_gib_is_refused_before_reading_it() {
    // A record with n_cigar_op 65535 and l_seq 2^31 whose block_size is as large as they need:
    // what follows is 2.2 GB of record bytes.
    let h = header(b"@HD\tVN:1.6\n", &[(b"chr1", 1000)]);
    let mut rec = record();
    rec[4 + 12..4 + 14].copy_from_slice(&65535u16.to_le_bytes());
    rec[4 + 16..4 + 20].copy_from_slice(&(1u32 << 31).to_le_bytes());
    let block_size: u64 = 32 + 3 + 65535 * 4 + (1 << 30) + (1 << 31);
    let block_size = block_size.min(u64::from(u32::MAX)) as u32;
    rec[..4].copy_from_slice(&block_size.to_le_bytes());
    rec.truncate(4 + 32 + 3);
    let mut prefix = h.clone();
    prefix.extend_from_slice(&rec);
    let file = bgzf_then(&prefix, &bomb(0x11, 2_200_000_000));
    refused(
        "block_size.bam",
        &file,
        BAM_COMMANDS,
        &["offset", &format!("block_size {block_size}")],
    );

    // The same fields in a record whose block_size is small: its layout does not add up.
    let mut rec = record();
    rec[4 + 12..4 + 14].copy_from_slice(&65535u16.to_le_bytes());
    rec[4 + 16..4 + 20].copy_from_slice(&(1u32 << 31).to_le_bytes());
    let mut raw = h;
    raw.extend_from_slice(&rec);
    raw.extend_from_slice(&record());
    refused("l_seq.bam", &compress(&raw), BAM_COMMANDS, &["offset"]);
}

#[test]
fn bgzf_blocks_whose_isize_lies_are_refused() {
    let mut raw = header(b"@HD\tVN:1.6\n", &[(b"chr1", 1000)]);
    for _ in 0..100 {
        raw.extend_from_slice(&record());
    }
    // ISIZE larger than a block may hold.
    let mut file = deflated_block(&raw, 70_000);
    file.extend_from_slice(&EOF_BLOCK);
    refused("isize_large.bam", &file, BAM_COMMANDS, &["ISIZE"]);
    // ISIZE smaller, and larger, than what the block inflates to.
    for (name, isize) in [
        ("isize_short.bam", raw.len() as u32 - 7),
        ("isize_long.bam", raw.len() as u32 + 7),
    ] {
        let mut file = deflated_block(&raw, isize);
        file.extend_from_slice(&EOF_BLOCK);
        refused(name, &file, BAM_COMMANDS, &[]);
    }
}

#[test]
fn a_gzip_bomb_fastq_is_refused() {
    // One read whose sequence line never ends: 4 GiB of 'A' in gzip members of 1 MiB (~1 KB each).
    let member = |data: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    };
    let mut file = member(b"@r1\n");
    let block = member(&vec![b'A'; 1 << 20]);
    for _ in 0..4096 {
        file.extend_from_slice(&block);
    }
    refused(
        "bomb.fq.gz",
        &file,
        &["agd-import"],
        &["longer than 256 MiB"],
    );
}

#[test]
fn a_cram_huffman_table_of_100_million_codes_fails_cleanly_within_the_limit() {
    // The open cram_decode fuzz finding (fuzz/findings/): a compression header whose HUFFMAN codec
    // claims on the order of 10^8 codes. htslib (1.19.1 and 1.24 alike, samtools 1.24 too) mallocs and fills 24
    // bytes per code before it finds the stream short: about 3.3 GB of RSS with no limit. Under
    // `ulimit -v` the malloc fails and htslib reports a decoding error; view and sort hand the
    // stream to htslib, flagstat and index stop earlier (container scan, index builder).
    let file = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/findings/cram_decode-oom-6abe0725.cram"
    ))
    .unwrap();
    refused(
        "cram_decode-oom-6abe0725.cram",
        &file,
        &["view", "sort", "flagstat", "index"],
        &["CRAM"],
    );
}
