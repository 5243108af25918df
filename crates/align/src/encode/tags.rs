//! minimap2's optional fields (`write_tags`, the `SA:Z:` and MD/cs writers of format.c) as BAM
//! aux bytes, with the types htslib gives the text when it parses it (integers in the smallest
//! type that holds them, `f` as a float read back from minimap2's `%.4f`).

use super::{extra, Context};
use crate::reads::Read;
use minimap2_sys as ffi;
use std::io::Write;

/// Appends an integer tag in htslib's smallest type (`c C s S i I`).
pub(crate) fn push_int(out: &mut Vec<u8>, tag: &[u8; 2], x: i64) {
    out.extend_from_slice(tag);
    if sortase_bam::sam_parse::push_smallest_int(x, out).is_err() {
        // Past 32 bits (minimap2 writes none): its low 32 bits, as `i` or `I`.
        if x < 0 {
            out.push(b'i');
            out.extend_from_slice(&(x as i32).to_le_bytes());
        } else {
            out.push(b'I');
            out.extend_from_slice(&(x as u32).to_le_bytes());
        }
    }
}

fn push_char(out: &mut Vec<u8>, tag: &[u8; 2], c: u8) {
    out.extend_from_slice(tag);
    out.push(b'A');
    out.push(c);
}

/// A `f` tag as htslib stores minimap2's text: `%.4f` (`0` for zero), read back with `strtod`
/// and narrowed to a float.
fn push_divergence(out: &mut Vec<u8>, tag: &[u8; 2], x: f64) {
    let value = if x == 0.0 {
        0.0
    } else {
        let mut buf = [0u8; 48];
        let mut cur = std::io::Cursor::new(&mut buf[..]);
        // INVARIANT: a float in [0, 1] with 4 decimals fits in 48 bytes.
        let _ = write!(cur, "{x:.4}");
        let n = cur.position() as usize;
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(x)
    };
    out.extend_from_slice(tag);
    out.push(b'f');
    out.extend_from_slice(&(value as f32).to_le_bytes());
}

/// The per-thread state of the record writer: the buffer minimap2's MD/cs writers reallocate.
pub(crate) struct TagBuffer {
    buf: *mut std::os::raw::c_char,
    cap: std::os::raw::c_int,
}

impl Default for TagBuffer {
    fn default() -> Self {
        Self {
            buf: std::ptr::null_mut(),
            cap: 0,
        }
    }
}

impl Drop for TagBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by minimap2 with realloc (or NULL).
        unsafe { libc::free(self.buf.cast()) }
    }
}

/// minimap2's `write_tags`.
pub(crate) fn write_hit_tags(out: &mut Vec<u8>, r: &ffi::mm_reg1_t, p: Option<&ffi::mm_extra_t>) {
    let ty = match (r.id == r.parent, r.inv() != 0) {
        (true, true) => b'I',
        (true, false) => b'P',
        (false, true) => b'i',
        (false, false) => b'S',
    };
    if let Some(p) = p {
        let n_ambi = i64::from(p.n_ambi());
        push_int(out, b"NM", i64::from(r.blen - r.mlen) + n_ambi);
        push_int(out, b"ms", i64::from(p.dp_max0));
        push_int(out, b"AS", i64::from(p.dp_score));
        push_int(out, b"nn", n_ambi);
        if matches!(p.trans_strand(), 1 | 2) {
            push_char(out, b"ts", b"?+-?"[p.trans_strand() as usize]);
        }
    }
    push_char(out, b"tp", ty);
    push_int(out, b"cm", i64::from(r.cnt));
    push_int(out, b"s1", i64::from(r.score));
    if r.parent == r.id {
        push_int(out, b"s2", i64::from(r.subsc));
    }
    if p.is_some() {
        // SAFETY: `r` is a hit with its alignment.
        let identity = unsafe { ffi::mm_event_identity(r) };
        push_divergence(out, b"de", 1.0 - identity);
    } else if (0.0..=1.0).contains(&r.div) {
        push_divergence(out, b"dv", f64::from(r.div));
    }
    if r.split() != 0 {
        push_int(out, b"zd", i64::from(r.split()));
    }
}

/// minimap2's `SA:Z:` of a primary or supplementary hit: every other hit that is its own parent.
pub(crate) fn write_sa(
    out: &mut Vec<u8>,
    ctx: &Context<'_>,
    regs: &[ffi::mm_reg1_t],
    r: &ffi::mm_reg1_t,
    l_seq: i32,
) {
    if r.parent != r.id || r.p.is_null() || regs.len() < 2 {
        return;
    }
    let others = || {
        regs.iter()
            .filter(move |q| !std::ptr::eq(*q, r) && q.parent == q.id && !q.p.is_null())
    };
    if others().next().is_none() {
        return;
    }
    out.extend_from_slice(b"SAZ");
    for q in others() {
        let (ql, rl) = (q.qe - q.qs, q.re - q.rs);
        let (l_m, l_i, l_d) = if ql < rl {
            (ql, 0, rl - ql)
        } else {
            (rl, ql - rl, 0)
        };
        let rev = q.rev() != 0;
        let clip5 = if rev { l_seq - q.qe } else { q.qs };
        let clip3 = if rev { q.qs } else { l_seq - q.qe };
        out.extend_from_slice(&ctx.references[q.rid as usize].name);
        let _ = write!(out, ",{},{},", q.rs + 1, if rev { '-' } else { '+' });
        for (n, op) in [
            (clip5, 'S'),
            (l_m, 'M'),
            (l_i, 'I'),
            (l_d, 'D'),
            (clip3, 'S'),
        ] {
            if n != 0 {
                let _ = write!(out, "{n}{op}");
            }
        }
        let nm = q.blen - q.mlen + extra(q).map_or(0, |p| p.n_ambi() as i32);
        let _ = write!(out, ",{},{nm};", q.mapq());
    }
    out.push(0);
}

/// minimap2's MD or cs tag (`write_cs_ds_or_MD`, through `mm_gen_MD` / `mm_gen_cs`).
pub(crate) fn write_md_cs(
    out: &mut Vec<u8>,
    ctx: &Context<'_>,
    r: &ffi::mm_reg1_t,
    t: &Read<'_>,
    km: *mut std::os::raw::c_void,
    tags: &mut TagBuffer,
) {
    let md = ctx.has(ffi::MM_F_OUT_MD);
    if !md && !ctx.has(ffi::MM_F_OUT_CS) {
        return;
    }
    let seq = t.seq_nul.as_ptr().cast();
    // SAFETY: a valid index and hit; `seq` is the read's NUL-terminated sequence in its own
    // orientation; minimap2 reallocates `tags.buf` as needed and returns the text's length.
    let n = unsafe {
        if md {
            ffi::mm_gen_MD(km, &mut tags.buf, &mut tags.cap, ctx.index, r, seq)
        } else {
            let no_iden = i32::from(!ctx.has(ffi::MM_F_OUT_CS_LONG));
            ffi::mm_gen_cs(km, &mut tags.buf, &mut tags.cap, ctx.index, r, seq, no_iden)
        }
    };
    out.extend_from_slice(if md { b"MDZ" } else { b"csZ" });
    if n > 0 {
        // SAFETY: minimap2 wrote `n` bytes to `tags.buf`.
        out.extend_from_slice(unsafe {
            std::slice::from_raw_parts(tags.buf.cast::<u8>(), n as usize)
        });
    }
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_take_htslibs_smallest_type() {
        for (x, t) in [
            (-1, b'c'),
            (200, b'C'),
            (-200, b's'),
            (70000, b'I'),
            (-70000, b'i'),
        ] {
            let mut out = Vec::new();
            push_int(&mut out, b"XX", x);
            assert_eq!(out[2], t, "{x}");
        }
    }

    #[test]
    fn divergence_is_rounded_to_four_decimals_as_text() {
        let mut out = Vec::new();
        push_divergence(&mut out, b"de", 0.012_345_678);
        assert_eq!(
            f32::from_le_bytes(out[3..7].try_into().unwrap()),
            0.0123f64 as f32
        );
    }
}
