//! A/B of the two ways to decode a whole CRAM file into raw BAM records on `N` threads, for
//! choosing how `view`/`sort` read CRAM: `pool` is one htslib reader with htslib's pool of `N`
//! threads (what `Input::open` does); `runs` is `N` threads each decoding runs of whole containers
//! with its own reader (`CramReader::open_range`), as the counting commands do. Both convert every
//! record to raw BAM and hand batches of about 4 MiB to a consumer that only counts them, so the
//! figures are the decode cost alone (the records are not put back in order). It prints the CPU
//! seconds of the thread that reads the records (`pool`) or of each reader thread (`runs`): on
//! `N` otherwise idle cores the wall time is at least the largest of them.
//!
//! ```text
//! cargo run --release -p sortase-cram --example decode_ab -- pool|runs N in.cram ref.fa
//! ```

use sortase_cram::{plan_container_ranges, CramReader, Fields, ReadOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

const BATCH_BYTES: usize = 4 << 20;

/// CPU seconds (user + system) of the calling thread so far, from `/proc/thread-self/stat`.
fn thread_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // Fields after the command name (which ends at the last ')'): utime and stime are the 12th
    // and 13th (proc(5) fields 14 and 15), in clock ticks.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    f.iter().sum::<f64>() / hz
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, n, path, reference] = &args[..] else {
        return Err("usage: decode_ab pool|runs N in.cram ref.fa".into());
    };
    let n: usize = n.parse()?;
    let path = PathBuf::from(path);
    let mut options = ReadOptions {
        reference: Some(PathBuf::from(reference)),
        threads: n,
        fields: Fields::All,
    };
    let (records, bytes) = match mode.as_str() {
        "pool" => {
            let file = std::fs::File::open(&path)?;
            let (_, mut reader) = CramReader::new(Box::new(file), &options)?;
            let (mut records, mut bytes) = (0usize, 0usize);
            reader.for_each_batch(BATCH_BYTES, |b| {
                records += b.len();
                bytes += b.bytes().len();
                Ok(())
            })?;
            println!("reading thread: {:.2} s CPU", thread_cpu());
            (records, bytes)
        }
        "runs" => {
            options.threads = 0;
            let ranges = plan_container_ranges(&path, n * 4)?;
            let next = AtomicUsize::new(0);
            let totals = std::thread::scope(|s| {
                let workers: Vec<_> = (0..n)
                    .map(|_| {
                        s.spawn(|| -> Result<(usize, usize), String> {
                            let (mut records, mut bytes) = (0usize, 0usize);
                            while let Some(r) = ranges.get(next.fetch_add(1, Ordering::Relaxed)) {
                                let (_, mut reader) = CramReader::open_range(&path, &options, r)
                                    .map_err(|e| e.to_string())?;
                                reader
                                    .for_each_batch(BATCH_BYTES, |b| {
                                        records += b.len();
                                        bytes += b.bytes().len();
                                        Ok(())
                                    })
                                    .map_err(|e| e.to_string())?;
                            }
                            println!("reader thread: {:.2} s CPU", thread_cpu());
                            Ok((records, bytes))
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().expect("worker panicked"))
                    .collect::<Result<Vec<_>, String>>()
            })?;
            totals
                .into_iter()
                .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
        }
        other => return Err(format!("unknown mode {other:?}").into()),
    };
    println!("{mode} {n}: {records} records, {bytes} bytes of BAM records");
    Ok(())
}
