//! Helpers the test modules share: seeded pseudo-random streams and BAMs sorted by `SortJob`.

#[allow(dead_code)] // `quals`: the e2e tests'
#[path = "../../../../tests/e2e/rng.rs"]
mod rng;

pub use rng::Rng;
use sortase::{Order, OutputSpec, Runtime, SortJob};
use std::path::{Path, PathBuf};

/// The next number of a linear congruential generator at `seed`.
pub fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Sorts `input` in `order` into the uncompressed BAM `bam` on one thread.
pub fn sort_to_bam(input: &Path, order: Order, bam: &Path) {
    let mut out = OutputSpec::to_path(bam);
    out.uncompressed = true;
    let job = SortJob {
        order,
        ..SortJob::new(input.to_str().unwrap(), out)
    };
    job.run(&Runtime::with_threads(1).unwrap()).unwrap();
}

/// Writes the SAM text `sam` to `dir/in.sam` and sorts it in `order` into `dir/in.bam`; that BAM.
pub fn sam_to_bam(dir: &Path, sam: String, order: Order) -> PathBuf {
    let sam_path = dir.join("in.sam");
    std::fs::write(&sam_path, sam).unwrap();
    let bam = dir.join("in.bam");
    sort_to_bam(&sam_path, order, &bam);
    bam
}
