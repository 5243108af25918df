//! Compression levels with samtools' meaning.

/// A compression level as samtools `-l` understands it: 0 (stored, uncompressed) to 9, -1 the default.
///
/// htslib built with libdeflate maps zlib-style levels onto libdeflate's 1-12 scale
/// (`bgzf_compress`: `{0,1,2,3,5,6,7,8,10,12}`), and -1 means zlib's default 6, i.e. libdeflate 7.
/// We use the same map so `-l N` costs and compresses like samtools at `-l N`.
///
/// ```
/// use sortase_bgzf::CompressionLevel;
/// assert_eq!(CompressionLevel::samtools(-1).libdeflate(), 7);
/// assert_eq!(CompressionLevel::samtools(0).libdeflate(), 0);
/// assert_eq!(CompressionLevel::samtools(9).libdeflate(), 12);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressionLevel(u8);

/// htslib `bgzf_compress` level map (zlib level → libdeflate level).
const HTSLIB_LIBDEFLATE_MAP: [u8; 10] = [0, 1, 2, 3, 5, 6, 7, 8, 10, 12];

impl CompressionLevel {
    /// No compression: stored DEFLATE blocks (samtools `-u` / `-l 0`).
    pub const STORED: Self = Self(0);

    /// The level samtools uses for `-l level` (negative: the default, 6; above 9: clamped to 9).
    pub fn samtools(level: i32) -> Self {
        let zlib = if level < 0 { 6 } else { level.min(9) as usize };
        Self(HTSLIB_LIBDEFLATE_MAP[zlib])
    }

    /// A raw libdeflate level, 0 to 12.
    pub fn from_libdeflate(level: u8) -> Self {
        Self(level.min(12))
    }

    /// The libdeflate level (0 = stored).
    pub fn libdeflate(self) -> u8 {
        self.0
    }
}

impl Default for CompressionLevel {
    fn default() -> Self {
        Self::samtools(-1)
    }
}
