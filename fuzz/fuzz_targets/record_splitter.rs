#![no_main]
//! Arbitrary bytes as a *decompressed* BAM stream, through the record splitter and the zero-copy view.
//!
//! The first input byte is a control byte:
//! - bit 0: prepend a valid BAM header (3 references) so the fuzzer reaches record parsing; otherwise
//!   the bytes must start with their own header;
//! - bit 1: feed `ChunkStream` synthetic chunks cut every `len` bytes (bits 3-7 choose `len`) instead
//!   of compressing with `ParallelWriter` and reading back with `ParallelReader` — this exercises
//!   records that straddle chunk boundaries without megabyte inputs;
//! - bit 2 (synthetic chunks only): give chunks little headroom, forcing the carry-copy path.
//!
//! Every record of every batch is formatted as SAM and its accessors are called. When the whole stream
//! is good, the batches' bytes must be exactly the stream after the header.

use libfuzzer_sys::fuzz_target;
use sortase_bam::{sam_format::format_record, ChunkSource, ChunkStream, Header, RecordRef};
use sortase_bgzf::{
    BlockMeta, Chunk, CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions,
    WriterOptions, CHUNK_HEADROOM,
};
use std::io::{Cursor, Write};
use std::sync::OnceLock;

const HEADER_TEXT: &str = "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:chr2\tLN:500\n@SQ\tSN:big\tLN:2147483647\n";

fn header_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        Header::from_sam_text(HEADER_TEXT.to_string())
            .expect("valid header")
            .to_bam_bytes()
    })
}

fn bgzf_source(stream: &[u8]) -> ChunkSource {
    let mut w = ParallelWriter::new(
        Vec::new(),
        WriterOptions::new(1, CompressionLevel::samtools(1)),
    );
    w.write_all(stream).expect("write to Vec");
    let (bgzf, _) = w.finish().expect("finish");
    let options = ReaderOptions {
        threads: 2,
        start: 0,
        end: None,
        batch_bytes: 1,
        buffers: None,
    };
    Box::new(ParallelReader::new(Cursor::new(bgzf), options))
}

/// Chunks of `len` bytes; with `small_head`, headroom cycles through 0-4 bytes.
fn synthetic_source(stream: &[u8], len: usize, small_head: bool) -> ChunkSource {
    let chunks: Vec<_> = stream
        .chunks(len)
        .enumerate()
        .map(|(i, piece)| {
            let head = if small_head { i % 5 } else { CHUNK_HEADROOM };
            let mut buf = vec![0u8; head];
            buf.extend_from_slice(piece);
            Ok(Chunk {
                buf,
                head,
                blocks: vec![BlockMeta {
                    coffset: 0,
                    csize: 0,
                    ustart: 0,
                    usize: piece.len() as u32,
                }],
            })
        })
        .collect();
    Box::new(chunks.into_iter())
}

/// Length of the BAM header at the start of `s`, computed independently of the library.
fn bam_header_len(s: &[u8]) -> Option<usize> {
    let u32_at = |i: usize| -> Option<usize> {
        let b = s.get(i..i + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut i = 8 + u32_at(4)?;
    let n_ref = u32_at(i)?;
    i += 4;
    for _ in 0..n_ref {
        i += 4 + u32_at(i)? + 4;
    }
    (i <= s.len()).then_some(i)
}

fn exercise(record: &RecordRef<'_>, header: &Header) {
    let mut line = Vec::new();
    format_record(record, header, &mut line);
    assert_eq!(line.last(), Some(&b'\n'));
    let cigar = record.cigar();
    let _ = cigar.iter().count();
    let _ = cigar.query_length();
    let _ = record.raw_cigar().reference_length();
    let _ = record.long_cigar();
    let _ = record.end_position();
    let _ = record.read_name();
    let _ = record.sequence_packed();
    let _ = record.quality_scores();
    let _ = (record.bin(), record.n_cigar_op(), record.mapping_quality());
    let mut aux = record.aux();
    for field in &mut aux {
        let _ = (field.tag(), field.value_type(), field.value());
        let _ = field.integer();
        let _ = field.u32_array_bytes();
    }
    let _ = aux.error();
    let _ = format!("{record:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, body)) = data.split_first() else {
        return;
    };
    let mut stream = Vec::with_capacity(body.len() + 200);
    if control & 1 != 0 {
        stream.extend_from_slice(header_bytes());
    }
    stream.extend_from_slice(body);

    let source = if control & 2 != 0 {
        let len = match control >> 3 {
            0 => 1,
            n @ 1..=15 => usize::from(n) * 3,
            n => (usize::from(n) - 15) * 97,
        };
        synthetic_source(&stream, len, control & 4 != 0)
    } else {
        bgzf_source(&stream)
    };

    let mut chunks = ChunkStream::new(source);
    let Ok(header) = chunks.read_header() else {
        return;
    };
    let mut records = Vec::new();
    let mut first_offset = None;
    let mut next_offset = None;
    let complete = loop {
        match chunks.next_batch() {
            Ok(Some(batch)) => {
                assert!(!batch.is_empty(), "empty batch");
                if let Some(expected) = next_offset {
                    assert_eq!(batch.stream_offset(), expected, "batch stream offsets");
                }
                first_offset.get_or_insert(batch.stream_offset());
                next_offset = Some(batch.stream_offset() + batch.bytes().len() as u64);
                let mut joined = Vec::new();
                for (i, record) in batch.iter().enumerate() {
                    let raw = batch.raw(i);
                    assert_eq!(&raw[4..], record.as_bytes());
                    assert_eq!(
                        u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize,
                        raw.len() - 4
                    );
                    assert!(RecordRef::new(record.as_bytes()).is_ok());
                    exercise(&record, &header);
                    joined.extend_from_slice(raw);
                }
                assert_eq!(joined, batch.bytes(), "raw records do not tile the batch");
                records.extend_from_slice(batch.bytes());
            }
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    if complete {
        let header_len = bam_header_len(&stream).expect("read_header accepted a malformed header");
        if let Some(offset) = first_offset {
            assert_eq!(
                offset, header_len as u64,
                "first batch offset != header length"
            );
        }
        assert!(
            stream[header_len..] == records[..],
            "records are not the stream after the header"
        );
    }
});
