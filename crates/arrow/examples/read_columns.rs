//! Reads a BAM into Arrow record batches without Python, for profiling and A/B timing of
//! `read_bam`'s Rust side:
//!
//! ```text
//! cargo run --release -p sortase-arrow --example read_columns -- FILE.bam [THREADS] [COLUMNS|all] [keep]
//! ```
//!
//! `COLUMNS` is comma-separated (default `qname,flag,rname,pos,mapq`, issue 17's projection). `keep`
//! holds every batch until the end, as `sortase.read_bam` does (its page faults are part of the
//! cost); without it each batch is dropped when counted, as `scan_bam` allows. Prints the rows,
//! batches and seconds.

use sortase_arrow::ReadJob;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: read_columns FILE.bam [THREADS] [COLUMNS|all]")?;
    let threads: usize = args.next().map_or(Ok(2), |t| t.parse())?;
    let columns = args
        .next()
        .unwrap_or_else(|| "qname,flag,rname,pos,mapq".to_string());
    let keep = args.next().is_some_and(|k| k == "keep");
    let mut job = ReadJob::new(path);
    if columns != "all" {
        job.columns = Some(columns.split(',').map(str::to_string).collect());
    }
    let rt = sortase::Runtime::with_threads(threads)?;
    let clock = std::time::Instant::now();
    let mut stream = job.stream(&rt)?;
    let (mut rows, mut batches, mut kept) = (0usize, 0usize, Vec::new());
    for b in stream.by_ref() {
        let b = b?;
        rows += b.num_rows();
        batches += 1;
        if keep {
            kept.push(b);
        }
    }
    println!(
        "rows {rows} batches {batches} seconds {:.3}",
        clock.elapsed().as_secs_f64()
    );
    drop(kept);
    Ok(())
}
