//! The range planner (block scanner + record-boundary finder) and range reading on arbitrary files:
//! a valid small BAM header followed by fuzzer bytes compressed as BGZF (or raw fuzzer bytes), split into
//! ranges at fuzzer-chosen counts. Errors are fine; panics and hangs are bugs. When every range reads
//! without error, the ranges together must yield exactly the records of a sequential read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sortase_bam::{ChunkStream, Header};
use sortase_bgzf::{
    CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions,
};
use sortase_index::range::{find_record_start, map_ranges, plan_ranges};
use std::io::Write;

fn sequential(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let reader = ParallelReader::new(
        std::io::Cursor::new(bytes.to_vec()),
        ReaderOptions::with_threads(1),
    );
    let mut s = ChunkStream::new(Box::new(reader));
    s.read_header().ok()?;
    let mut out = Vec::new();
    while let Some(b) = s.next_batch().ok()? {
        out.extend(b.iter_raw().map(<[u8]>::to_vec));
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (control, rest) = (data[0], &data[1..]);
    let bytes = if control & 1 == 0 {
        let header =
            Header::from_sam_text("@SQ\tSN:a\tLN:1000\n@SQ\tSN:b\tLN:500\n".into()).unwrap();
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(1, CompressionLevel::samtools(1)),
        );
        w.write_all(&header.to_bam_bytes()).unwrap();
        w.end_block().unwrap();
        // Small blocks so that ranges have blocks to cut at.
        for piece in rest.chunks(97) {
            w.write_all(piece).unwrap();
            w.end_block().unwrap();
        }
        w.finish().unwrap().0
    } else {
        rest.to_vec()
    };
    let dir = std::env::temp_dir().join(format!("sortase-fuzz-range-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("x.bam");
    std::fs::write(&path, &bytes).unwrap();
    if let Ok(mut f) = sortase_io::Source::open_path(&path) {
        let _ = find_record_start(&mut f, u64::from(control) * 7 % (bytes.len() as u64 + 1), 2);
    }
    let n = usize::from(control >> 1) % 9 + 1;
    if let Ok(plan) = plan_ranges(&path, n) {
        let parts = map_ranges(&path, &plan, 2, |mut s| {
            let mut v = Vec::new();
            while let Some(b) = s.next_batch()? {
                v.extend(b.iter_raw().map(<[u8]>::to_vec));
            }
            Ok::<_, sortase_bam::BamError>(v)
        });
        if let (Ok(parts), Some(all)) = (parts, sequential(&bytes)) {
            assert_eq!(
                parts.concat(),
                all,
                "ranges must yield exactly the sequential records"
            );
        }
    }
    let _ = std::fs::remove_file(&path);
});
