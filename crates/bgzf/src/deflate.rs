//! The DEFLATE compressors behind BGZF blocks: ISA-L's igzip at the two fastest levels, libdeflate
//! above.
//!
//! At samtools' `-l 1` and `-l 2` the time of a BAM-writing job is mostly compression. ISA-L's level
//! 1 deflates BAM records about 2x as fast as libdeflate's level 1 on one core, for output about 3%
//! larger (bench/RESULTS.md, "DEFLATE at low levels"), so those two levels use it; libdeflate keeps
//! every higher level, where it compresses better than ISA-L can at any level.
//!
//! Bytes: for a given level, library version and CPU the output is deterministic (the same input
//! block always gives the same bytes, whatever the thread count, so distributed and one-machine runs
//! on one machine type agree byte for byte). At levels 1 and 2 the bytes differ from samtools'
//! (htslib calls libdeflate there); above, they are htslib's with the same libdeflate. ISA-L chooses
//! its SIMD code at run time, and its output is known to change between the SSE4.2-and-above code
//! and the plain C fallback of older CPUs.

use crate::level::CompressionLevel;
use libdeflater::Compressor;

/// The ISA-L release that isal-sys (pinned in Cargo.toml) builds (its `configure.ac`).
pub const ISAL_VERSION: &str = "2.31.0";

/// A reusable compressor for one level: keep one per thread, never one per block.
pub enum Deflater {
    /// libdeflate at the given level (3-12).
    Libdeflate(Compressor),
    /// ISA-L's stateless igzip (levels 1-2).
    Isal(IsalDeflater),
}

impl Deflater {
    /// The compressor for `level`, or `None` for stored blocks (level 0).
    pub fn for_level(level: CompressionLevel) -> Option<Self> {
        match level.libdeflate() {
            0 => None,
            1 => Some(Self::Isal(IsalDeflater::new(1))),
            2 => Some(Self::Isal(IsalDeflater::new(3))),
            l => Some(Self::Libdeflate(Compressor::new(
                libdeflater::CompressionLvl::new(i32::from(l)).expect("levels 1-12 are valid"),
            ))),
        }
    }

    /// Deflates `data` into `out` as one raw DEFLATE stream; `None` if it does not fit in `out`.
    pub fn compress(&mut self, data: &[u8], out: &mut [u8]) -> Option<usize> {
        match self {
            Self::Libdeflate(c) => c.deflate_compress(data, out).ok(),
            Self::Isal(d) => d.compress(data, out),
        }
    }
}

/// ISA-L's stateless deflate with its stream and level buffer allocated once.
pub struct IsalDeflater {
    // Boxed: the stream holds ISA-L's internal state (several KiB) and must not move while in use.
    stream: Box<isal_sys::igzip_lib::isal_zstream>,
    level_buf: Vec<u8>,
    level: u32,
}

// SAFETY: the stream's pointers are set from the owned level buffer and the caller's slices for the
// duration of one `compress` call only; nothing is shared between threads.
unsafe impl Send for IsalDeflater {}

impl IsalDeflater {
    /// ISA-L level 1, 2 or 3.
    fn new(level: u32) -> Self {
        use isal_sys::igzip_lib as isal;
        let size = match level {
            1 => isal::ISAL_DEF_LVL1_DEFAULT,
            2 => isal::ISAL_DEF_LVL2_DEFAULT,
            _ => isal::ISAL_DEF_LVL3_DEFAULT,
        };
        // SAFETY: isal_zstream is a plain C struct; all-zero is a valid value that
        // isal_deflate_stateless_init overwrites before every use.
        let stream = Box::new(unsafe { std::mem::zeroed::<isal::isal_zstream>() });
        Self {
            stream,
            level_buf: vec![0; size as usize],
            level,
        }
    }

    fn compress(&mut self, data: &[u8], out: &mut [u8]) -> Option<usize> {
        use isal_sys::igzip_lib as isal;
        let (Ok(avail_in), Ok(avail_out)) = (u32::try_from(data.len()), u32::try_from(out.len()))
        else {
            return None;
        };
        let s = &mut *self.stream;
        // SAFETY: `s` is a valid stream; init resets it (and sets the default Huffman tables).
        unsafe { isal::isal_deflate_stateless_init(s) };
        s.level = self.level;
        s.level_buf = self.level_buf.as_mut_ptr();
        s.level_buf_size = self.level_buf.len() as u32;
        s.end_of_stream = 1;
        s.flush = isal::NO_FLUSH as u16;
        s.gzip_flag = isal::IGZIP_DEFLATE as u16;
        s.next_in = data.as_ptr().cast_mut();
        s.avail_in = avail_in;
        s.next_out = out.as_mut_ptr();
        s.avail_out = avail_out;
        // SAFETY: ISA-L reads `avail_in` bytes at `next_in` (it never writes there), writes at most
        // `avail_out` bytes at `next_out` and uses `level_buf_size` bytes of the level buffer; all three
        // outlive the call.
        let ret = unsafe { isal::isal_deflate_stateless(s) };
        (ret == isal::COMP_OK as i32).then_some(s.total_out as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        // Record-like bytes: repeats at short and long distances, some noise.
        let mut v = Vec::new();
        let mut x = 12345u32;
        while v.len() < 65_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            v.extend_from_slice(b"HWI-D00360:250:HSIMFCXX:1:1101:");
            v.extend_from_slice(&(x >> 16).to_le_bytes());
            v.extend(std::iter::repeat_n(
                b"ACGT"[(x >> 8) as usize % 4],
                (x % 17) as usize,
            ));
        }
        v.truncate(65_000);
        v
    }

    #[test]
    fn every_level_round_trips_and_repeats_its_bytes() {
        let data = sample();
        for level in 1..=9 {
            let l = CompressionLevel::samtools(level);
            let mut a = Deflater::for_level(l).unwrap();
            let mut out = vec![0; 70_000];
            let n = a.compress(&data, &mut out).unwrap();
            let mut back = vec![0; data.len()];
            let m = libdeflater::Decompressor::new()
                .deflate_decompress(&out[..n], &mut back)
                .unwrap();
            assert_eq!((m, &back[..]), (data.len(), &data[..]), "level {level}");
            // The same compressor again, and a fresh one: the same bytes.
            let mut again = vec![0; 70_000];
            assert_eq!(a.compress(&data, &mut again), Some(n));
            assert_eq!(out[..n], again[..n], "level {level}: reused compressor");
            let mut fresh = Deflater::for_level(l).unwrap();
            assert_eq!(fresh.compress(&data, &mut again), Some(n));
            assert_eq!(out[..n], again[..n], "level {level}: fresh compressor");
        }
    }

    #[test]
    fn the_fast_levels_use_isal_and_a_full_output_is_refused() {
        let lib = |l| Deflater::for_level(CompressionLevel::samtools(l)).unwrap();
        assert!(matches!(
            lib(1),
            Deflater::Isal(IsalDeflater { level: 1, .. })
        ));
        assert!(matches!(
            lib(2),
            Deflater::Isal(IsalDeflater { level: 3, .. })
        ));
        assert!(matches!(lib(3), Deflater::Libdeflate(_)));
        assert!(Deflater::for_level(CompressionLevel::STORED).is_none());
        let mut d = Deflater::for_level(CompressionLevel::samtools(1)).unwrap();
        let mut tiny = [0u8; 16];
        assert_eq!(d.compress(&sample(), &mut tiny), None);
    }
}
