//! Small inputs for unit tests, built with the library itself (also a module of the integration
//! tests, tests/tasks/main.rs, so it names its crates, not `crate::`).

use sortase_exec::options::OutputSpec;
use sortase_exec::runtime::Runtime;
use sortase_sortjobs::sort::SortJob;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// References of the test BAMs: (name, length).
pub const REFERENCES: [(&str, u32); 3] = [("chr1", 200_000), ("chr2", 150_000), ("chr3", 1_000)];

/// A coordinate-sorted BAM of `n` records (paired, some unmapped, duplicates, QC-failed, on three
/// references, with unplaced reads at the end) in `dir`, several BGZF blocks long.
pub fn sorted_bam(dir: &Path, n: usize) -> PathBuf {
    let sam = dir.join("in.sam");
    let mut text = String::from("@HD\tVN:1.6\tSO:unsorted\n");
    for (name, len) in REFERENCES {
        let _ = writeln!(text, "@SQ\tSN:{name}\tLN:{len}");
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..n {
        let r = next();
        let (rname, len) = REFERENCES[(r % 2) as usize];
        let pos = 1 + (r >> 8) % u64::from(len - 200);
        let seq: String = (0..100)
            .map(|k| b"ACGT"[((r >> (k % 60)) & 3) as usize] as char)
            .collect();
        let mut flag = 1 | if r & 0x10000 != 0 { 64 } else { 128 };
        flag |= [0, 2, 16, 1024, 512, 8, 2, 0][((r >> 20) % 8) as usize];
        let unplaced = i + 20 >= n;
        if unplaced {
            let _ = writeln!(text, "u{i}\t{}\t*\t0\t0\t*\t*\t0\t0\t{seq}\t*", flag | 4);
        } else {
            let mapq = (r >> 40) % 61;
            let _ = writeln!(
                text,
                "r{i}\t{flag}\t{rname}\t{pos}\t{mapq}\t100M\t=\t{pos}\t0\t{seq}\t*"
            );
        }
    }
    std::fs::write(&sam, text).unwrap();
    let bam = dir.join("in.bam");
    let rt = Runtime::with_threads(2).unwrap();
    SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&bam))
        .run(&rt)
        .unwrap();
    bam
}

/// `value` through its JSON text, as a driver sends a plan to a worker and a task's output back.
pub fn through_json<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
    serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

/// Each of `tasks` run by `run`, last first (the order of a plan's tasks does not matter); their
/// outputs in that order.
pub fn run_last_first<T, O>(tasks: &[T], run: impl Fn(&T) -> O) -> Vec<O> {
    tasks.iter().rev().map(run).collect()
}
