//! Size/speed curve of libdeflate levels on real BGZF payload, one thread, 0xff00-byte blocks as
//! htslib cuts them. Used to choose sortase's default output level (bench/RESULTS.md, "level curve").
//!
//! `cargo run --release -p sortase-bgzf --example level_curve -- FILE.bam [MiB]`

use sortase_bgzf::{ParallelReader, ReaderOptions, BLOCK_DATA_MAX};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: level_curve FILE.bam [MiB]");
    let mib: usize = args.next().map_or(256, |s| s.parse().expect("MiB"));
    let file = std::fs::File::open(&path).expect("open input");
    let mut data = Vec::with_capacity(mib << 20);
    for chunk in ParallelReader::new(file, ReaderOptions::with_threads(2)) {
        data.extend_from_slice(chunk.expect("inflate").data());
        if data.len() >= mib << 20 {
            break;
        }
    }
    data.truncate(mib << 20);
    println!("input {path}: {} MiB uncompressed sample", data.len() >> 20);
    println!("libdeflate_level,samtools_l,MB_per_s,compressed_bytes,ratio_vs_level7");
    let mut at7 = 0usize;
    let mut rows = Vec::new();
    for level in 1..=12 {
        let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level).unwrap());
        let mut out = vec![0u8; 0x10000 + 1024];
        let start = Instant::now();
        let mut total = 0usize;
        for block in data.chunks(BLOCK_DATA_MAX) {
            total += c.deflate_compress(block, &mut out).expect("deflate") + 26;
        }
        let secs = start.elapsed().as_secs_f64();
        if level == 7 {
            at7 = total;
        }
        rows.push((level, total, data.len() as f64 / secs / 1e6));
    }
    let samtools = [0, 1, 2, 3, 5, 6, 7, 8, 10, 12];
    for (level, total, speed) in rows {
        let l = samtools
            .iter()
            .position(|&x| x == level)
            .map_or("-".to_string(), |i| i.to_string());
        println!(
            "{level},{l},{speed:.1},{total},{:.4}",
            total as f64 / at7 as f64
        );
    }
}
