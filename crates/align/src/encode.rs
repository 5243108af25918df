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

mod seq;
mod tags;

pub(crate) use seq::COMPLEMENT;
pub(crate) use tags::TagBuffer;

use crate::error::AlignError;
use crate::fastq::base_name;
use crate::index::Reference;
use crate::reads::Read;
use minimap2_sys as ffi;

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

/// The SAM primaries of the segments next to this one (`r_prev`, `r_next` in `mm_write_sam3`):
/// the next segment's, and the previous mapped segment's (the next's for a pair).
fn neighbours<'a>(
    segs: &'a [Segment<'_>],
    seg: usize,
) -> (Option<&'a ffi::mm_reg1_t>, Option<&'a ffi::mm_reg1_t>) {
    let n_seg = segs.len();
    if n_seg < 2 {
        return (None, None);
    }
    let next = sam_primary(segs[(seg + 1) % n_seg].regs);
    let prev = if n_seg > 2 {
        (1..n_seg)
            .map(|i| segs[(seg + n_seg - i) % n_seg].regs)
            .find(|regs| !regs.is_empty())
            .and_then(sam_primary)
    } else {
        next
    };
    (prev, next)
}

/// FLAG as `mm_write_sam3` sets it.
fn flag(
    r: Option<&ffi::mm_reg1_t>,
    next: Option<&ffi::mm_reg1_t>,
    seg: usize,
    n_seg: usize,
) -> u16 {
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
        match next {
            None => flag |= 0x8,
            Some(n) if n.rev() != 0 => flag |= 0x20,
            _ => {}
        }
    }
    flag
}

/// The CIGAR: minimap2's operations between the query's clips (hard for supplementary records).
struct Cigar<'a> {
    ops: &'a [u32],
    clips: (u32, u32),
    clip_op: u32,
}

impl Cigar<'_> {
    fn n_ops(&self) -> usize {
        self.ops.len() + usize::from(self.clips.0 > 0) + usize::from(self.clips.1 > 0)
    }

    /// Reference length (htslib's `bam_cigar2rlen`).
    fn reference_length(&self) -> i64 {
        self.ops
            .iter()
            .filter(|&&op| matches!(op & 0xf, 0 | 2 | 3 | 7 | 8))
            .map(|&op| i64::from(op >> 4))
            .sum()
    }

    fn push(&self, out: &mut Vec<u8>) {
        if self.clips.0 > 0 {
            out.extend_from_slice(&(self.clips.0 << 4 | self.clip_op).to_le_bytes());
        }
        for op in self.ops {
            out.extend_from_slice(&op.to_le_bytes());
        }
        if self.clips.1 > 0 {
            out.extend_from_slice(&(self.clips.1 << 4 | self.clip_op).to_le_bytes());
        }
    }
}

/// `write_sam_cigar`: clips from the hit's query range, `H` for supplementary records (and
/// secondary ones with `--secondary-seq`) unless `-Y`.
fn cigar_of<'a>(
    ctx: &Context<'_>,
    r: Option<&'a ffi::mm_reg1_t>,
    flag: u16,
    l_seq: i32,
) -> Cigar<'a> {
    let p = r.and_then(extra);
    let (Some(r), Some(p)) = (r, p) else {
        return Cigar {
            ops: &[],
            clips: (0, 0),
            clip_op: SOFT_CLIP,
        };
    };
    let rev = r.rev() != 0;
    let c0 = if rev { l_seq - r.qe } else { r.qs };
    let c1 = if rev { r.qs } else { l_seq - r.qe };
    let hard = (flag & 0x800 != 0 || (flag & 0x100 != 0 && ctx.has64(ffi::MM_F_SECONDARY_SEQ)))
        && !ctx.has(ffi::MM_F_SOFTCLIP);
    Cigar {
        ops: cigar(p),
        clips: (c0 as u32, c1 as u32),
        clip_op: if hard { HARD_CLIP } else { SOFT_CLIP },
    }
}

/// RNEXT, PNEXT and TLEN (5' end to 5' end, one more in magnitude) of a fragment's segment at
/// `tid:pos`.
fn mate(
    r: Option<&ffi::mm_reg1_t>,
    next: Option<&ffi::mm_reg1_t>,
    (tid, pos): (i32, i32),
) -> (i32, i32, i32) {
    let mut tlen = 0i32;
    let (mtid, mpos) = match next {
        Some(n) if tid >= 0 => {
            if let (Some(r), true) = (r, tid == n.rid) {
                let this5 = if r.rev() != 0 { r.re - 1 } else { pos };
                let next5 = if n.rev() != 0 { n.re - 1 } else { n.rs };
                tlen = next5 - this5;
            }
            (n.rid, n.rs)
        }
        Some(n) => (n.rid, n.rs),
        None if tid >= 0 => (tid, pos),
        None => (-1, -1),
    };
    (mtid, mpos, tlen + tlen.signum())
}

/// The part of the read SEQ/QUAL hold: all of it, the aligned part (hard clips), or none
/// (secondary); and whether it is reverse complemented.
fn seq_range(
    ctx: &Context<'_>,
    r: Option<&ffi::mm_reg1_t>,
    flag: u16,
    l_seq: usize,
) -> (Option<(usize, usize)>, bool) {
    let Some(r) = r else {
        return (Some((0, l_seq)), false);
    };
    let rev = r.rev() != 0;
    if flag & 0x900 == 0 || ctx.has(ffi::MM_F_SOFTCLIP) {
        (Some((0, l_seq)), rev)
    } else if flag & 0x100 != 0 && !ctx.has64(ffi::MM_F_SECONDARY_SEQ) {
        (None, false)
    } else {
        (Some((r.qs as usize, r.qe as usize)), rev)
    }
}

/// The fields of the record of hit `r` (`None`: the unmapped record) of segment `seg`.
struct Fields<'a> {
    qname: &'a [u8],
    flag: u16,
    tid: i32,
    pos: i32,
    mapq: u8,
    p: Option<&'a ffi::mm_extra_t>,
    cigar: Cigar<'a>,
    mtid: i32,
    mpos: i32,
    tlen: i32,
    /// The bases written (`None`: no sequence) and whether reverse complemented.
    range: Option<(usize, usize)>,
    rev: bool,
    /// The CIGAR's reference length (1 unmapped).
    rlen: i64,
}

impl<'a> Fields<'a> {
    fn of(
        ctx: &Context<'_>,
        segs: &'a [Segment<'a>],
        seg: usize,
        r: Option<&'a ffi::mm_reg1_t>,
    ) -> Result<Self, AlignError> {
        let n_seg = segs.len();
        let t = &segs[seg].read;
        let (prev, next) = neighbours(segs, seg);
        let qname = if n_seg > 1 { base_name(t.name) } else { t.name };
        if qname.len() > 254 {
            return Err(AlignError::Record {
                name: String::from_utf8_lossy(qname).into_owned(),
                what: "the name is longer than BAM's 254 bytes".into(),
            });
        }
        let mut flag = flag(r, next, seg, n_seg);
        // An unmapped segment sits at the previous segment's primary.
        let (tid, pos, mapq) = match (r, prev) {
            (Some(r), _) => (r.rid, r.rs, r.mapq() as u8),
            (None, Some(p)) => (p.rid, p.rs, 0),
            (None, None) => (-1, -1, 0),
        };
        let p = r.and_then(extra);
        if r.is_some() && p.is_none() {
            // A `*` CIGAR: htslib marks the record unmapped.
            flag |= 0x4;
        }
        let cigar = cigar_of(ctx, r, flag, t.seq.len() as i32);
        let (mtid, mpos, tlen) = if n_seg > 1 {
            mate(r, next, (tid, pos))
        } else {
            (-1, -1, 0)
        };
        let (range, rev) = seq_range(ctx, r, flag, t.seq.len());
        // bin: htslib takes the CIGAR's reference length, or 1 for an unmapped record.
        let rlen = if flag & 0x4 == 0 {
            cigar.reference_length()
        } else {
            1
        };
        Ok(Fields {
            qname,
            flag,
            tid,
            pos,
            mapq,
            p,
            cigar,
            mtid,
            mpos,
            tlen,
            range,
            rev,
            rlen,
        })
    }

    /// The fixed part (SAM spec §4.2.1) with a zero `block_size`, the name and the CIGAR (htslib
    /// `bam_write1`'s `<l_seq>S<rlen>N` for a long one, the real CIGAR in a trailing CG:B:I).
    fn write_head(&self, out: &mut Vec<u8>) {
        let l_seq = self.range.map_or(0, |(b, e)| e - b);
        let (pos, rlen) = (self.pos, self.rlen);
        let bin = sortase_bam::bin::reg2bin(i64::from(pos), i64::from(pos) + rlen.max(1));
        let n_cigar = self.cigar.n_ops();
        let long_cigar = n_cigar > MAX_CIGAR_OPS;
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.tid.to_le_bytes());
        out.extend_from_slice(&pos.to_le_bytes());
        out.push(self.qname.len() as u8 + 1);
        out.push(self.mapq);
        out.extend_from_slice(&bin.to_le_bytes());
        out.extend_from_slice(&(if long_cigar { 2 } else { n_cigar as u16 }).to_le_bytes());
        out.extend_from_slice(&self.flag.to_le_bytes());
        out.extend_from_slice(&(l_seq as u32).to_le_bytes());
        out.extend_from_slice(&self.mtid.to_le_bytes());
        out.extend_from_slice(&self.mpos.to_le_bytes());
        out.extend_from_slice(&self.tlen.to_le_bytes());
        out.extend_from_slice(self.qname);
        out.push(0);
        if long_cigar {
            out.extend_from_slice(&((l_seq as u32) << 4 | SOFT_CLIP).to_le_bytes());
            out.extend_from_slice(&((rlen as u32) << 4 | 3).to_le_bytes());
        } else {
            self.cigar.push(out);
        }
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
    tag_buf: &mut TagBuffer,
    out: &mut Vec<u8>,
) -> Result<(), AlignError> {
    let n_seg = segs.len();
    let t = &segs[seg].read;
    let regs = segs[seg].regs;
    let r = reg.map(|j| &regs[j]);
    let fields = Fields::of(ctx, segs, seg, r)?;
    let (p, cigar) = (fields.p, &fields.cigar);
    let n_cigar = cigar.n_ops();
    let long_cigar = n_cigar > MAX_CIGAR_OPS;
    // block_size is patched in at the end.
    let start = out.len();
    fields.write_head(out);
    if let Some((b, e)) = fields.range {
        seq::push_seq_qual(out, &t.seq[b..e], t.qual.map(|q| &q[b..e]), fields.rev);
    }

    // Tags, in minimap2's order.
    if let Some(id) = ctx.read_group {
        out.extend_from_slice(b"RGZ");
        out.extend_from_slice(id);
        out.push(0);
    }
    if n_seg > 2 {
        tags::push_int(out, b"FI", seg as i64);
    }
    if let Some(r) = r {
        tags::write_hit_tags(out, r, p);
        tags::write_sa(out, ctx, regs, r, t.seq.len() as i32);
        if p.is_some() {
            tags::write_md_cs(out, ctx, r, t, km, tag_buf);
        }
    }
    if rep_len >= 0 {
        tags::push_int(out, b"rl", i64::from(rep_len));
    }
    if long_cigar {
        out.extend_from_slice(b"CGBI");
        out.extend_from_slice(&(n_cigar as u32).to_le_bytes());
        cigar.push(out);
    }
    let block_size = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&block_size.to_le_bytes());
    Ok(())
}
