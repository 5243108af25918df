#![no_main]
//! Arbitrary bytes as the start of a decompressed BAM stream, through `Header::read_bam` (magic,
//! `l_text`, text, `n_ref`, references), and the same bytes as SAM header text through
//! `Header::from_sam_text`.
//!
//! Must hold: no panic, and no allocation driven by a size field (libFuzzer's `-rss_limit_mb` and
//! `-malloc_limit_mb` catch one: `l_text`, `n_ref` and `l_name` claim up to 4 GiB here). A header
//! that parses writes back (`to_bam_bytes`) to bytes that parse to the same header, and its records
//! are found by name.

use libfuzzer_sys::fuzz_target;
use sortase_bam::Header;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let mut cursor = Cursor::new(data);
    if let Ok(header) = Header::read_bam(&mut cursor) {
        let bytes = header.to_bam_bytes();
        let again =
            Header::read_bam(&mut Cursor::new(&bytes)).expect("a written header reads back");
        assert_eq!(again.text(), header.text());
        assert_eq!(again.references(), header.references());
        for (i, r) in header.references().iter().enumerate() {
            let found = header
                .reference_id(&r.name)
                .expect("every reference has an id");
            // Duplicate names: the id of one of them.
            assert_eq!(header.references()[found].name, r.name, "reference {i}");
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(header) = Header::from_sam_text(text.to_string()) {
            let bytes = header.to_bam_bytes();
            let again =
                Header::read_bam(&mut Cursor::new(&bytes)).expect("SAM header as BAM reads back");
            assert_eq!(again.references(), header.references());
        }
    }
});
