//! Writing BAI (raw) and CSI (BGZF with zlib, as htslib's `hts_idx_save`) files.

use crate::IndexFormat;
use flate2::{Compress, Compression, FlushCompress};

/// One bin: number, linear offset (CSI), chunks.
pub type BinParts<'a> = (u32, u64, &'a [(u64, u64)]);

/// One reference's bins (in table order) and linear index.
pub struct ReferenceParts<'a> {
    /// `(bin, loff, chunks)`.
    pub bins: Vec<BinParts<'a>>,
    /// Linear index (BAI only).
    pub linear: &'a [u64],
}

/// Everything that is written.
pub struct IndexParts<'a> {
    /// BAI or CSI.
    pub format: IndexFormat,
    /// Bits of the smallest bin.
    pub min_shift: u32,
    /// Depth.
    pub n_lvls: u32,
    /// Per reference.
    pub references: Vec<ReferenceParts<'a>>,
    /// Unplaced records.
    pub n_no_coor: u64,
}

/// The bytes of the index file.
pub fn serialise(parts: &IndexParts<'_>) -> Vec<u8> {
    let csi = matches!(parts.format, IndexFormat::Csi { .. });
    let mut out = Vec::new();
    if csi {
        out.extend_from_slice(b"CSI\x01");
        out.extend_from_slice(&(parts.min_shift as i32).to_le_bytes());
        out.extend_from_slice(&(parts.n_lvls as i32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // l_aux
    } else {
        out.extend_from_slice(b"BAI\x01");
    }
    out.extend_from_slice(&(parts.references.len() as i32).to_le_bytes());
    for r in &parts.references {
        out.extend_from_slice(&(r.bins.len() as i32).to_le_bytes());
        for &(bin, loff, chunks) in &r.bins {
            out.extend_from_slice(&bin.to_le_bytes());
            if csi {
                out.extend_from_slice(&loff.to_le_bytes());
            }
            out.extend_from_slice(&(chunks.len() as i32).to_le_bytes());
            for &(u, v) in chunks {
                out.extend_from_slice(&u.to_le_bytes());
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        if !csi {
            out.extend_from_slice(&(r.linear.len() as i32).to_le_bytes());
            for o in r.linear {
                out.extend_from_slice(&o.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&parts.n_no_coor.to_le_bytes());
    if csi {
        bgzf_zlib(&out)
    } else {
        out
    }
}

/// BGZF with zlib's default level in 0xff00-byte blocks, as htslib writes a CSI (pysam's htslib links
/// zlib, so libdeflate would give other bytes).
fn bgzf_zlib(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    for block in data.chunks(sortase_bgzf::BLOCK_DATA_MAX) {
        let payload = system_zlib::deflate_raw(block).unwrap_or_else(|| {
            let mut z = Compress::new(Compression::new(6), false);
            let mut payload = Vec::with_capacity(block.len() + 64);
            z.compress_vec(block, &mut payload, FlushCompress::Finish)
                .expect("zlib deflate into a large enough buffer");
            payload
        });
        let start = out.len();
        out.extend_from_slice(&sortase_bgzf::EOF_MARKER[..sortase_bgzf::BLOCK_HEADER_LEN]);
        out.extend_from_slice(&payload);
        let mut crc = flate2::Crc::new();
        crc.update(block);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(block.len() as u32).to_le_bytes());
        let bsize = (out.len() - start - 1) as u16;
        out[start + 16..start + 18].copy_from_slice(&bsize.to_le_bytes());
    }
    out.extend_from_slice(&sortase_bgzf::EOF_MARKER);
    out
}

/// Raw deflate (level 6, window 15, memLevel 8: flate2's `Compress::new(6, false)`) by the system's
/// zlib, loaded with `dlopen`. The static zlib the process links is zlib-ng: sortase-htslib (crates/htslib)
/// requires libz-sys with its `zlib-ng` feature, which Cargo unifies for flate2 too, and zlib-ng's
/// deflate gives other bytes than zlib's (the sort/merge `--write-index` e2e tests compare CSI bytes
/// with pysam's samtools, whose htslib uses zlib). `RTLD_LOCAL` keeps the library's symbols apart
/// from the static ones (the executable exports none). `None` if there is no system zlib: the
/// caller falls back to flate2 (a valid index, not byte-identical to samtools').
mod system_zlib {
    use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};
    use std::sync::OnceLock;

    /// zlib's `z_stream` (zlib.h).
    #[repr(C)]
    struct ZStream {
        next_in: *const u8,
        avail_in: c_uint,
        total_in: c_ulong,
        next_out: *mut u8,
        avail_out: c_uint,
        total_out: c_ulong,
        msg: *const c_char,
        state: *mut c_void,
        zalloc: *const c_void,
        zfree: *const c_void,
        opaque: *mut c_void,
        data_type: c_int,
        adler: c_ulong,
        reserved: c_ulong,
    }

    type Init = unsafe extern "C" fn(
        *mut ZStream,
        c_int,
        c_int,
        c_int,
        c_int,
        c_int,
        *const c_char,
        c_int,
    ) -> c_int;
    type Deflate = unsafe extern "C" fn(*mut ZStream, c_int) -> c_int;
    type End = unsafe extern "C" fn(*mut ZStream) -> c_int;
    type Version = unsafe extern "C" fn() -> *const c_char;

    struct Zlib {
        init: Init,
        deflate: Deflate,
        end: End,
        version: Version,
    }

    fn zlib() -> Option<&'static Zlib> {
        static ZLIB: OnceLock<Option<Zlib>> = OnceLock::new();
        ZLIB.get_or_init(|| {
            // SAFETY: dlopen/dlsym with NUL-terminated names; the handle is never closed, so the
            // function pointers stay valid; their types are zlib.h's prototypes.
            unsafe {
                let h = libc::dlopen(c"libz.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
                if h.is_null() {
                    return None;
                }
                let sym = |name: &CStr| {
                    let p = libc::dlsym(h, name.as_ptr());
                    (!p.is_null()).then_some(p)
                };
                Some(Zlib {
                    init: std::mem::transmute::<*mut c_void, Init>(sym(c"deflateInit2_")?),
                    deflate: std::mem::transmute::<*mut c_void, Deflate>(sym(c"deflate")?),
                    end: std::mem::transmute::<*mut c_void, End>(sym(c"deflateEnd")?),
                    version: std::mem::transmute::<*mut c_void, Version>(sym(c"zlibVersion")?),
                })
            }
        })
        .as_ref()
    }

    /// `data` deflated (raw, no header), or `None` without a usable system zlib.
    pub fn deflate_raw(data: &[u8]) -> Option<Vec<u8>> {
        const Z_FINISH: c_int = 4;
        const Z_STREAM_END: c_int = 1;
        let z = zlib()?;
        let mut out = vec![0u8; data.len() + data.len() / 1000 + 64];
        // SAFETY: a zeroed z_stream is zlib's documented initial state (zalloc/zfree NULL); the
        // buffers outlive the calls; deflateEnd frees the state.
        unsafe {
            let mut s: ZStream = std::mem::zeroed();
            let size = std::mem::size_of::<ZStream>() as c_int;
            if (z.init)(&mut s, 6, 8, -15, 8, 0, (z.version)(), size) != 0 {
                return None;
            }
            s.next_in = data.as_ptr();
            s.avail_in = data.len() as c_uint;
            s.next_out = out.as_mut_ptr();
            s.avail_out = out.len() as c_uint;
            let r = (z.deflate)(&mut s, Z_FINISH);
            let n = s.total_out as usize;
            (z.end)(&mut s);
            if r != Z_STREAM_END {
                return None;
            }
            out.truncate(n);
        }
        Some(out)
    }
}
