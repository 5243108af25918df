//! The set of signatures seen so far: exact 96-bit keys (samblaster's table number and 64-bit
//! signature) in one open-addressing hash set.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// A signature: samblaster's table offset (high 64 bits) and in-table signature (low 64 bits).
pub type Signature = u128;

/// Multiply-xorshift hasher for the already well-spread signature bits (SipHash, std's default,
/// costs several times more per insert on this path).
#[derive(Default)]
pub struct SigHasher(u64);

impl Hasher for SigHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u128(&mut self, v: u128) {
        let x = (v as u64) ^ ((v >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        self.0 = x ^ (x >> 32);
    }
    fn write_u64(&mut self, v: u64) {
        self.write_u128(u128::from(v) ^ (u128::from(self.0) << 64));
    }
}

/// Signatures seen so far (first seen wins).
#[derive(Default)]
pub struct SigSet {
    set: HashSet<Signature, BuildHasherDefault<SigHasher>>,
}

impl SigSet {
    /// Inserts `sig`; `true` if it was new.
    #[inline]
    pub fn insert(&mut self, sig: Signature) -> bool {
        self.set.insert(sig)
    }
    /// Signatures held.
    pub fn len(&self) -> usize {
        self.set.len()
    }
    /// Whether no signature is held.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}
