//! The set of signatures seen so far, partitioned as samblaster's: one hash set of 64-bit
//! in-partition signatures per "table offset" (both ends' bins and strands), so a signature is
//! exact (no hashing that could merge two) and costs 8 bytes plus the table's slack, and a table
//! that grows rehashes only its own part (no whole-set doubling spike).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A signature: samblaster's table offset (high 64 bits) and in-table signature (low 64 bits).
pub type Signature = u128;

/// Multiply-xorshift hasher for the 64-bit signatures (SipHash, std's default, is several times
/// slower per insert and not needed: the input cannot choose colliding keys to any effect but
/// slowness).
#[derive(Default)]
pub struct SigHasher(u64);

impl Hasher for SigHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        let x = (v ^ (v >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        self.0 = x ^ (x >> 32);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

type Table = HashSet<u64, BuildHasherDefault<SigHasher>>;

/// Partitions addressed directly up to this many table offsets (human: 47^2 = 2209), by a map
/// beyond (assemblies with tens of thousands of bins).
const DENSE_TABLES: u32 = 1 << 16;

/// Signatures seen so far (first seen wins).
#[derive(Default)]
pub struct SigSet {
    dense: Vec<Table>,
    sparse: HashMap<u32, Table, BuildHasherDefault<SigHasher>>,
    len: usize,
}

impl SigSet {
    /// Inserts `sig`; `true` if it was new.
    #[inline]
    pub fn insert(&mut self, sig: Signature) -> bool {
        let (off, inner) = ((sig >> 64) as u32, sig as u64);
        let table = if off < DENSE_TABLES {
            let i = off as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, Table::default);
            }
            &mut self.dense[i]
        } else {
            self.sparse.entry(off).or_default()
        };
        let new = table.insert(inner);
        self.len += usize::from(new);
        new
    }
    /// Signatures held.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether no signature is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
