//! minimap2's SAM records (`mm_write_sam3` in format.c), written straight as raw BAM records: the
//! bytes samtools gets when it parses minimap2's SAM line (htslib `sam_parse1`), so that
//! `minimap2 -a | samtools sort` and `sortase fq2bam` hold the same records.
//!
//! Per record: FLAG from the hit (0x10 reverse, 0x100 secondary = not its own parent, 0x800
//! supplementary = a parent that is not the SAM primary) and, for fragments, from the segment index
//! and the next segment's SAM primary (0x1 0x2 0x8 0x20 0x40 0x80); an unmapped segment takes the
//! position of the previous segment's primary; TLEN is the distance of the two 5' ends; SEQ/QUAL
//! are reverse complemented on the reverse strand and cut to the aligned part (hard clips) for
//! supplementary records; tags `RG FI NM ms AS nn ts tp cm s1 s2 de dv zd SA MD/cs rl` in
//! minimap2's order, integers in the smallest BAM type that holds them (htslib's rule).

use crate::error::AlignError;
use crate::fastq::base_name;
use crate::index::Reference;
use crate::reads::Read;
use minimap2_sys as ffi;
use std::io::Write;

/// htslib `seq_nt16_table`: base → 4-bit code.
static NT16: [u8; 256] = {
    let mut t = [15u8; 256];
    let codes: &[u8; 16] = b"=ACMGRSVTWYHKDBN";
    let mut i = 0;
    while i < 16 {
        t[codes[i] as usize] = i as u8;
        t[codes[i].to_ascii_lowercase() as usize] = i as u8;
        i += 1;
    }
    t[b'U' as usize] = 8;
    t[b'u' as usize] = 8;
    t
};

/// minimap2's `seq_comp_table` (bseq.c): IUPAC complement, other bytes unchanged.
pub(crate) static COMPLEMENT: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as u8;
        i += 1;
    }
    let pairs: &[(u8, u8)] = &[
        (b'A', b'T'),
        (b'B', b'V'),
        (b'C', b'G'),
        (b'D', b'H'),
        (b'K', b'M'),
        (b'R', b'Y'),
        (b'U', b'A'),
    ];
    let mut k = 0;
    while k < pairs.len() {
        let (a, b) = pairs[k];
        t[a as usize] = b;
        t[a.to_ascii_lowercase() as usize] = b.to_ascii_lowercase();
        if a != b'U' {
            t[b as usize] = a;
            t[b.to_ascii_lowercase() as usize] = a.to_ascii_lowercase();
        }
        k += 1;
    }
    t
};

/// 4-bit code of the complement of a base (`sam_write_sq` complements bytes below 128 only).
static RC_NT16: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 128 {
            NT16[COMPLEMENT[i] as usize]
        } else {
            NT16[i]
        };
        i += 1;
    }
    t
};

const SOFT_CLIP: u32 = 4;
const HARD_CLIP: u32 = 5;
/// BAM's limit of CIGAR operations in the fixed part (htslib moves longer ones to `CG:B:I`).
const MAX_CIGAR_OPS: usize = 0xffff;

/// One segment of a fragment: its read and minimap2's hits.
pub(crate) struct Segment<'a> {
    pub read: Read<'a>,
    pub regs: &'a [ffi::mm_reg1_t],
}

impl Segment<'_> {
    /// A placeholder.
    pub const EMPTY: Segment<'static> = Segment {
        read: Read::EMPTY,
        regs: &[],
    };
}

/// minimap2's `get_sam_pri`: the segment's SAM primary hit.
fn sam_primary(regs: &[ffi::mm_reg1_t]) -> Option<&ffi::mm_reg1_t> {
    regs.iter().find(|r| r.sam_pri() != 0)
}

fn extra(r: &ffi::mm_reg1_t) -> Option<&ffi::mm_extra_t> {
    // SAFETY: `p` is NULL or points to minimap2's alignment of this hit, alive with the hit.
    unsafe { r.p.as_ref() }
}

fn cigar(p: &ffi::mm_extra_t) -> &[u32] {
    // SAFETY: `cigar` holds `n_cigar` operations.
    unsafe { p.cigar.as_slice(p.n_cigar as usize) }
}

/// Appends an integer tag in htslib's smallest type (`c C s S i I`).
fn push_int(out: &mut Vec<u8>, tag: &[u8; 2], x: i64) {
    out.extend_from_slice(tag);
    if x < 0 {
        if x >= i64::from(i8::MIN) {
            out.push(b'c');
            out.push(x as i8 as u8);
        } else if x >= i64::from(i16::MIN) {
            out.push(b's');
            out.extend_from_slice(&(x as i16).to_le_bytes());
        } else {
            out.push(b'i');
            out.extend_from_slice(&(x as i32).to_le_bytes());
        }
    } else if x <= i64::from(u8::MAX) {
        out.push(b'C');
        out.push(x as u8);
    } else if x <= i64::from(u16::MAX) {
        out.push(b'S');
        out.extend_from_slice(&(x as u16).to_le_bytes());
    } else {
        out.push(b'I');
        out.extend_from_slice(&(x as u32).to_le_bytes());
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

/// What every record of a run shares.
pub(crate) struct Context<'a> {
    pub references: &'a [Reference],
    pub read_group: Option<&'a [u8]>,
    pub opt_flag: i64,
    pub index: *const ffi::mm_idx_t,
}

impl Context<'_> {
    fn has(&self, flag: u32) -> bool {
        self.opt_flag & i64::from(flag) != 0
    }

    fn has64(&self, flag: u64) -> bool {
        self.opt_flag as u64 & flag != 0
    }
}

/// Writes the record of hit `reg` (`None`: the unmapped record) of segment `seg` of a fragment,
/// with its `block_size` prefix, to `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_record(
    ctx: &Context<'_>,
    segs: &[Segment<'_>],
    seg: usize,
    reg: Option<usize>,
    rep_len: i32,
    km: *mut std::os::raw::c_void,
    tags: &mut TagBuffer,
    out: &mut Vec<u8>,
) -> Result<(), AlignError> {
    let n_seg = segs.len();
    let t = &segs[seg].read;
    let regs = segs[seg].regs;
    let r = reg.map(|j| &regs[j]);
    let (r_prev, r_next) = if n_seg > 1 {
        let r_next = sam_primary(segs[(seg + 1) % n_seg].regs);
        let r_prev = if n_seg > 2 {
            (1..n_seg)
                .map(|i| segs[(seg + n_seg - i) % n_seg].regs)
                .find(|regs| !regs.is_empty())
                .and_then(sam_primary)
        } else {
            r_next
        };
        (r_prev, r_next)
    } else {
        (None, None)
    };
    let qname = if n_seg > 1 { base_name(t.name) } else { t.name };
    if qname.len() > 254 {
        return Err(AlignError::Record {
            name: String::from_utf8_lossy(qname).into_owned(),
            what: "the name is longer than BAM's 254 bytes".into(),
        });
    }

    // FLAG
    let mut flag: u16 = u16::from(n_seg > 1);
    match r {
        None => flag |= 0x4,
        Some(r) => {
            if r.rev() != 0 {
                flag |= 0x10;
            }
            if r.parent != r.id {
                flag |= 0x100;
            } else if r.sam_pri() == 0 {
                flag |= 0x800;
            }
        }
    }
    if n_seg > 1 {
        if r.is_some_and(|r| r.proper_frag() != 0) {
            flag |= 0x2;
        }
        if seg == 0 {
            flag |= 0x40;
        } else if seg == n_seg - 1 {
            flag |= 0x80;
        }
        match r_next {
            None => flag |= 0x8,
            Some(n) if n.rev() != 0 => flag |= 0x20,
            _ => {}
        }
    }

    // RNAME POS MAPQ CIGAR
    let (tid, pos, mapq) = match (r, r_prev) {
        (Some(r), _) => (r.rid, r.rs, r.mapq() as u8),
        (None, Some(p)) => (p.rid, p.rs, 0),
        (None, None) => (-1, -1, 0),
    };
    let l_seq_full = t.seq.len() as i32;
    let p = r.and_then(extra);
    let (clips, clip_op) = match (r, p) {
        (Some(r), Some(_)) => {
            let c0 = if r.rev() != 0 {
                l_seq_full - r.qe
            } else {
                r.qs
            };
            let c1 = if r.rev() != 0 {
                r.qs
            } else {
                l_seq_full - r.qe
            };
            let hard = (flag & 0x800 != 0
                || (flag & 0x100 != 0 && ctx.has64(ffi::MM_F_SECONDARY_SEQ)))
                && !ctx.has(ffi::MM_F_SOFTCLIP);
            (
                (c0 as u32, c1 as u32),
                if hard { HARD_CLIP } else { SOFT_CLIP },
            )
        }
        _ => ((0, 0), SOFT_CLIP),
    };
    if r.is_some() && p.is_none() {
        // A `*` CIGAR: htslib marks the record unmapped.
        flag |= 0x4;
    }
    let ops: &[u32] = p.map_or(&[], cigar);
    let n_cigar = ops.len() + usize::from(clips.0 > 0) + usize::from(clips.1 > 0);

    // RNEXT PNEXT TLEN
    let (mtid, mpos, tlen) = if n_seg > 1 {
        let mut tlen = 0i32;
        let (mt, mp) = match r_next {
            Some(n) if tid >= 0 => {
                if tid == n.rid {
                    if let Some(r) = r {
                        let this5 = if r.rev() != 0 { r.re - 1 } else { pos };
                        let next5 = if n.rev() != 0 { n.re - 1 } else { n.rs };
                        tlen = next5 - this5;
                    }
                }
                (n.rid, n.rs)
            }
            Some(n) => (n.rid, n.rs),
            None if tid >= 0 => (tid, pos),
            None => (-1, -1),
        };
        tlen += tlen.signum();
        (mt, mp, tlen)
    } else {
        (-1, -1, 0)
    };

    // SEQ QUAL: the whole read, the aligned part (hard clips), or none (secondary).
    let (range, rev) = match r {
        None => (Some((0, t.seq.len())), false),
        Some(r) => {
            let rev = r.rev() != 0;
            if flag & 0x900 == 0 || ctx.has(ffi::MM_F_SOFTCLIP) {
                (Some((0, t.seq.len())), rev)
            } else if flag & 0x100 != 0 && !ctx.has64(ffi::MM_F_SECONDARY_SEQ) {
                (None, false)
            } else {
                (Some((r.qs as usize, r.qe as usize)), rev)
            }
        }
    };
    let l_seq = range.map_or(0, |(b, e)| e - b);

    // bin: htslib takes the CIGAR's reference length, or 1 for an unmapped record.
    let rlen: i64 = if flag & 0x4 == 0 {
        ops.iter()
            .filter(|&&op| matches!(op & 0xf, 0 | 2 | 3 | 7 | 8))
            .map(|&op| i64::from(op >> 4))
            .sum()
    } else {
        1
    };
    let bin = sortase_bam::bin::reg2bin(i64::from(pos), i64::from(pos) + rlen.max(1));
    let long_cigar = n_cigar > MAX_CIGAR_OPS;

    // Fixed part (SAM spec §4.2.1); block_size is patched in at the end.
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&tid.to_le_bytes());
    out.extend_from_slice(&pos.to_le_bytes());
    out.push(qname.len() as u8 + 1);
    out.push(mapq);
    out.extend_from_slice(&bin.to_le_bytes());
    out.extend_from_slice(&(if long_cigar { 2 } else { n_cigar as u16 }).to_le_bytes());
    out.extend_from_slice(&flag.to_le_bytes());
    out.extend_from_slice(&(l_seq as u32).to_le_bytes());
    out.extend_from_slice(&mtid.to_le_bytes());
    out.extend_from_slice(&mpos.to_le_bytes());
    out.extend_from_slice(&tlen.to_le_bytes());
    out.extend_from_slice(qname);
    out.push(0);
    let push_cigar = |out: &mut Vec<u8>| {
        if clips.0 > 0 {
            out.extend_from_slice(&(clips.0 << 4 | clip_op).to_le_bytes());
        }
        for op in ops {
            out.extend_from_slice(&op.to_le_bytes());
        }
        if clips.1 > 0 {
            out.extend_from_slice(&(clips.1 << 4 | clip_op).to_le_bytes());
        }
    };
    if long_cigar {
        // htslib `bam_write1`: `<l_seq>S<rlen>N` here, the real CIGAR in a trailing CG:B:I.
        out.extend_from_slice(&((l_seq as u32) << 4 | SOFT_CLIP).to_le_bytes());
        out.extend_from_slice(&((rlen as u32) << 4 | 3).to_le_bytes());
    } else {
        push_cigar(out);
    }
    if let Some((b, e)) = range {
        let seq = &t.seq[b..e];
        if rev {
            let mut it = seq.iter().rev();
            while let Some(&hi) = it.next() {
                let lo = it.next().map_or(0, |&c| RC_NT16[c as usize]);
                out.push(RC_NT16[hi as usize] << 4 | lo);
            }
        } else {
            for pair in seq.chunks(2) {
                let lo = pair.get(1).map_or(0, |&c| NT16[c as usize]);
                out.push(NT16[pair[0] as usize] << 4 | lo);
            }
        }
        match t.qual {
            Some(q) if rev => out.extend(q[b..e].iter().rev().map(|&c| c.wrapping_sub(33))),
            Some(q) => out.extend(q[b..e].iter().map(|&c| c.wrapping_sub(33))),
            None => out.resize(out.len() + l_seq, 0xff),
        }
    }

    // Tags, in minimap2's order.
    if let Some(id) = ctx.read_group {
        out.extend_from_slice(b"RGZ");
        out.extend_from_slice(id);
        out.push(0);
    }
    if n_seg > 2 {
        push_int(out, b"FI", seg as i64);
    }
    if let Some(r) = r {
        write_hit_tags(out, r, p);
        write_sa(out, ctx, regs, r, t.seq.len() as i32);
        if let Some(p) = p {
            write_md_cs(out, ctx, r, p, t, km, tags);
        }
    }
    if rep_len >= 0 {
        push_int(out, b"rl", i64::from(rep_len));
    }
    if long_cigar {
        out.extend_from_slice(b"CGBI");
        out.extend_from_slice(&(n_cigar as u32).to_le_bytes());
        push_cigar(out);
    }
    let block_size = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&block_size.to_le_bytes());
    Ok(())
}

/// minimap2's `write_tags`.
fn write_hit_tags(out: &mut Vec<u8>, r: &ffi::mm_reg1_t, p: Option<&ffi::mm_extra_t>) {
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
fn write_sa(
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
fn write_md_cs(
    out: &mut Vec<u8>,
    ctx: &Context<'_>,
    r: &ffi::mm_reg1_t,
    _p: &ffi::mm_extra_t,
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
    fn complement_table_is_minimap2s() {
        assert_eq!(COMPLEMENT[b'A' as usize], b'T');
        assert_eq!(COMPLEMENT[b'u' as usize], b'a');
        assert_eq!(COMPLEMENT[b'T' as usize], b'A');
        assert_eq!(COMPLEMENT[b'N' as usize], b'N');
        assert_eq!(COMPLEMENT[b'B' as usize], b'V');
        assert_eq!(RC_NT16[b'A' as usize], 8);
        assert_eq!(RC_NT16[b'n' as usize], 15);
    }

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
