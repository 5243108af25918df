#![no_main]
//! Arbitrary bytes as a CRAM file, decoded by htslib's codec through `sortase_cram::CramReader`
//! (the path `sortase view`, `sort`, `flagstat` take for CRAM input), without a reference: htslib
//! may only look one up in `REF_PATH`/`REF_CACHE`, which are unset here, and has no network access
//! (crates/htslib is built without libcurl).
//!
//! Must hold: errors, never a crash (ASan: no out-of-bounds read or write in htslib's C code either)
//! or hang; every record htslib gives back is a valid raw BAM record (`RecordRef::new`) and formats
//! as SAM.

use libfuzzer_sys::fuzz_target;
use sortase_bam::{sam_format::format_record, RecordRef};
use sortase_cram::{CramReader, ReadOptions};
use std::io::Cursor;
use std::sync::Once;

fn no_reference_lookup() {
    static ONCE: Once = Once::new();
    // SAFETY (of set_var): called once, before the first htslib call starts any thread.
    ONCE.call_once(|| unsafe {
        std::env::remove_var("REF_PATH");
        std::env::set_var("REF_CACHE", "/nonexistent/sortase-fuzz");
    });
}

fuzz_target!(|data: &[u8]| {
    no_reference_lookup();
    let options = ReadOptions::default();
    let Ok((header, mut reader)) = CramReader::new(Box::new(Cursor::new(data.to_vec())), &options)
    else {
        return;
    };
    let mut sam = Vec::new();
    let _ = reader.for_each_batch(1 << 16, |batch| {
        for (i, raw) in batch.iter_raw().enumerate() {
            // `raw` starts with block_size.
            let r = RecordRef::new(&raw[4..])
                .unwrap_or_else(|e| panic!("record {i} from htslib is not valid BAM: {e}"));
            sam.clear();
            format_record(&r, &header, &mut sam);
        }
        Ok(())
    });
});
