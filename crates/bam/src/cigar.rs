//! CIGAR operations packed as BAM stores them: `len << 4 | op` (SAM spec §4.2).

/// `MIDNSHP=X` by op code.
pub const OP_CHARS: &[u8; 9] = b"MIDNSHP=X";
/// Op code of `S`.
pub const SOFT_CLIP: u32 = 4;
/// Op code of `N`.
pub const SKIP: u32 = 3;

/// Op code (0-8) of a packed op.
#[inline]
pub fn op_code(op: u32) -> u32 {
    op & 0xf
}
/// Length of a packed op.
#[inline]
pub fn op_len(op: u32) -> u32 {
    op >> 4
}
/// Whether an op code consumes reference bases (M, D, N, =, X).
#[inline]
pub fn consumes_reference(code: u32) -> bool {
    matches!(code, 0 | 2 | 3 | 7 | 8)
}
/// Whether an op code consumes query bases (M, I, S, =, X).
#[inline]
pub fn consumes_query(code: u32) -> bool {
    matches!(code, 0 | 1 | 4 | 7 | 8)
}
/// The packed code for a CIGAR character, if valid.
pub fn code_of(c: u8) -> Option<u32> {
    OP_CHARS.iter().position(|&x| x == c).map(|i| i as u32)
}

/// A borrowed run of packed little-endian CIGAR ops.
#[derive(Clone, Copy, Debug)]
pub struct CigarOps<'a> {
    bytes: &'a [u8],
}

impl<'a> CigarOps<'a> {
    /// Wraps `4 × n` bytes.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }
    /// Number of ops.
    pub fn len(&self) -> usize {
        self.bytes.len() / 4
    }
    /// Whether there are no ops.
    pub fn is_empty(&self) -> bool {
        self.bytes.len() < 4
    }
    /// The `i`-th packed op.
    pub fn get(&self, i: usize) -> u32 {
        let b = &self.bytes[4 * i..4 * i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Iterates the packed ops.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Sum of reference-consuming op lengths (in 64 bits: 2^16 ops of 2^28 overflow 32).
    pub fn reference_length(&self) -> u64 {
        self.iter()
            .filter(|&op| consumes_reference(op_code(op)))
            .map(|op| u64::from(op_len(op)))
            .sum()
    }
    /// Sum of query-consuming op lengths.
    pub fn query_length(&self) -> u64 {
        self.iter()
            .filter(|&op| consumes_query(op_code(op)))
            .map(|op| u64::from(op_len(op)))
            .sum()
    }
}
