//! CPU cost and size of each DEFLATE choice on the blocks of a BGZF file, one thread:
//!
//! ```text
//! cargo run --release -p sortase-bgzf --example deflate_levels -- IN.bam [MiB, default 256]
//! ```
//!
//! Inflates the first MiB of IN's data, then deflates it in BGZF-sized blocks with libdeflate levels
//! 1-3 and with what sortase's levels 1-2 use (ISA-L), three alternating rounds, and prints each
//! choice's median CPU seconds (user+system, so other load on the machine matters little), MB/s per
//! core and output bytes. bench/RESULTS.md ("DEFLATE at the fast levels") records its output.

use sortase_bgzf::{CompressionLevel, Deflater, ReaderOptions, BLOCK_DATA_MAX};

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: deflate_levels IN.bam [MiB]")?;
    let mib: usize = args.next().map(|m| m.parse()).transpose()?.unwrap_or(256);
    let file = std::fs::File::open(&path)?;
    let mut data = Vec::new();
    for chunk in sortase_bgzf::ParallelReader::new(file, ReaderOptions::with_threads(2)) {
        data.extend_from_slice(chunk?.data());
        if data.len() >= mib << 20 {
            break;
        }
    }
    data.truncate(mib << 20);
    type Make = Box<dyn Fn() -> Deflater>;
    let raw = |l: i32| -> Make {
        Box::new(move || {
            Deflater::Libdeflate(libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(l).unwrap(),
            ))
        })
    };
    let level = |l: i32| -> Make {
        Box::new(move || Deflater::for_level(CompressionLevel::samtools(l)).unwrap())
    };
    let choices: Vec<(&str, Make)> = vec![
        ("libdeflate 1 (htslib -l 1)", raw(1)),
        ("libdeflate 2 (htslib -l 2)", raw(2)),
        ("libdeflate 3 (htslib -l 3)", raw(3)),
        ("sortase -l 1 (ISA-L 1)", level(1)),
        ("sortase -l 2 (ISA-L 3)", level(2)),
    ];
    let mut seconds = vec![Vec::new(); choices.len()];
    let mut bytes = vec![0usize; choices.len()];
    let mut out = vec![0u8; sortase_bgzf::BLOCK_MAX];
    for _round in 0..3 {
        for (i, (_, make)) in choices.iter().enumerate() {
            let mut d = make();
            let t = cpu_seconds();
            let mut total = 0;
            for block in data.chunks(BLOCK_DATA_MAX) {
                total += d.compress(block, &mut out).ok_or("block did not fit")?;
            }
            seconds[i].push(cpu_seconds() - t);
            bytes[i] = total;
        }
    }
    println!(
        "{} MiB of {path}'s data in {} blocks; median of 3 rounds, one thread",
        data.len() >> 20,
        data.len().div_ceil(BLOCK_DATA_MAX)
    );
    println!("| deflate | CPU s | MB/s per core | bytes | vs libdeflate 1 |");
    println!("|---|---:|---:|---:|---:|");
    for (i, (name, _)) in choices.iter().enumerate() {
        seconds[i].sort_by(f64::total_cmp);
        let s = seconds[i][1];
        println!(
            "| {name} | {s:.3} | {:.0} | {} | {:+.2}% size, {:.2}x speed |",
            data.len() as f64 / s / 1e6,
            bytes[i],
            (bytes[i] as f64 / bytes[0] as f64 - 1.0) * 100.0,
            seconds[0][1] / s
        );
    }
    Ok(())
}
