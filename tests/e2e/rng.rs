//! A seeded pseudo-random stream for synthetic test data, shared by the e2e tests and the library's
//! task tests (crates/sortase/tests/tasks/fixtures.rs).

/// Deterministic xorshift64* generator for synthetic data.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bases(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| b"ACGT"[self.below(4) as usize] as char)
            .collect()
    }

    pub fn quals(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| (b'!' + self.below(41) as u8) as char)
            .collect()
    }
}
