#![no_main]
//! Arbitrary bytes split into lines, each parsed as a SAM record against a fixed 3-reference header.
//!
//! On success the appended record must be a valid raw BAM record (`RecordRef::new`) whose
//! `block_size` matches, whose aux fields all iterate back (when the line has no NUL byte), and that
//! formats as SAM without panicking. On error the output buffer must be left as it was.

use libfuzzer_sys::fuzz_target;
use sortase_bam::{sam_format::format_record, sam_parse::parse_record, Header, RecordRef};
use std::sync::OnceLock;

const HEADER_TEXT: &str = "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:chr2\tLN:500\n@SQ\tSN:big\tLN:2147483647\n";

fn header() -> &'static Header {
    static HEADER: OnceLock<Header> = OnceLock::new();
    HEADER.get_or_init(|| Header::from_sam_text(HEADER_TEXT.to_string()).expect("valid header"))
}

fuzz_target!(|data: &[u8]| {
    let header = header();
    // Records are appended to one buffer, as a SAM → BAM converter does.
    let mut buf = Vec::new();
    let mut sam = Vec::new();
    for line in data.split(|&c| c == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let before = buf.len();
        match parse_record(line, header, &mut buf) {
            Err(_) => assert_eq!(
                buf.len(),
                before,
                "parse_record changed the buffer on error"
            ),
            Ok(()) => {
                let raw = &buf[before..];
                assert!(raw.len() >= 4);
                let block_size = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
                assert_eq!(block_size, raw.len() - 4, "block_size");
                let record = match RecordRef::new(&raw[4..]) {
                    Ok(r) => r,
                    Err(e) => panic!("parse_record produced an invalid record: {e}"),
                };
                let mut aux = record.aux();
                let n_aux = aux.by_ref().count();
                if !line.contains(&0) {
                    assert!(
                        !aux.error(),
                        "aux fields written by parse_record do not iterate"
                    );
                    let mut columns = line.split(|&c| c == b'\t');
                    let cigar_ops = columns
                        .nth(5)
                        .map_or(0, |c| c.iter().filter(|b| !b.is_ascii_digit()).count());
                    // More than 65535 ops: the real CIGAR goes to an extra CG:B:I tag.
                    let cg = usize::from(cigar_ops > 0xffff);
                    let n_fields = columns.skip(5).count();
                    assert_eq!(n_aux, n_fields + cg, "aux field count");
                }
                let _ = record.end_position();
                let _ = record.cigar().query_length();
                sam.clear();
                format_record(&record, header, &mut sam);
                assert_eq!(sam.last(), Some(&b'\n'));
            }
        }
    }
});
