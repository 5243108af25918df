//! `bam1_t` ⇄ raw BAM record bytes, as htslib's `bam_write1` and `bam_read1` do it: `bam1_t::data`
//! is the BAM record's variable part except that the read name is padded with extra NULs
//! (`l_extranul`) to keep the CIGAR 4-byte aligned, and a CIGAR of more than 65535 operations is
//! held in place rather than in the `CG:B:I` tag (SAM spec §4.2.2).

use sortase_bam::{cigar, BamError, RecordRef, FIXED_LEN};
use sortase_htslib as hts;

fn bad(reason: &str) -> BamError {
    BamError::Cram(reason.to_string())
}

/// Appends `b` as a raw BAM record (with its `block_size`) to `out`, as `bam_write1` writes it.
pub fn bam1_to_raw(b: &hts::bam1_t, out: &mut Vec<u8>) -> Result<(), BamError> {
    let c = &b.core;
    let l_qname = usize::from(c.l_qname);
    let name_len = l_qname - usize::from(c.l_extranul);
    if name_len > 255 {
        return Err(bad("read name longer than 254 characters"));
    }
    if c.pos > i64::from(i32::MAX) || c.mpos > i64::from(i32::MAX) || c.mpos < i64::from(i32::MIN) {
        return Err(bad("position beyond the BAM range"));
    }
    let l_data = usize::try_from(b.l_data).map_err(|_| bad("negative record length"))?;
    // SAFETY: htslib keeps `l_data` valid bytes at `data`.
    let data = unsafe { std::slice::from_raw_parts(b.data, l_data) };
    let long = c.n_cigar > 0xffff;
    let block = FIXED_LEN + name_len + (l_data - l_qname) + if long { 16 } else { 0 };
    out.reserve(4 + block);
    out.extend_from_slice(&(block as u32).to_le_bytes());
    out.extend_from_slice(&c.tid.to_le_bytes());
    out.extend_from_slice(&(c.pos as i32).to_le_bytes());
    out.push(name_len as u8);
    out.push(c.qual);
    out.extend_from_slice(&c.bin.to_le_bytes());
    let n_cigar = if long { 2 } else { c.n_cigar as u16 };
    out.extend_from_slice(&n_cigar.to_le_bytes());
    out.extend_from_slice(&c.flag.to_le_bytes());
    out.extend_from_slice(&c.l_qseq.to_le_bytes());
    out.extend_from_slice(&c.mtid.to_le_bytes());
    out.extend_from_slice(&(c.mpos as i32).to_le_bytes());
    out.extend_from_slice(&(c.isize_ as i32).to_le_bytes());
    out.extend_from_slice(&data[..name_len]);
    if !long {
        out.extend_from_slice(&data[l_qname..]);
        return Ok(());
    }
    // bam_write1: the placeholder `<l_qseq>S<rlen>N`, the rest, then CG:B:I with the real CIGAR.
    let cigar_end = l_qname + 4 * c.n_cigar as usize;
    let ops = &data[l_qname..cigar_end];
    let rlen = cigar::CigarOps::new(ops).reference_length();
    if rlen >= 1 << 28 {
        return Err(bad(
            "CIGAR reference length too long for the CG placeholder",
        ));
    }
    out.extend_from_slice(&((c.l_qseq as u32) << 4 | cigar::SOFT_CLIP).to_le_bytes());
    out.extend_from_slice(&((rlen as u32) << 4 | cigar::SKIP).to_le_bytes());
    out.extend_from_slice(&data[cigar_end..]);
    out.extend_from_slice(b"CGBI");
    out.extend_from_slice(&c.n_cigar.to_le_bytes());
    out.extend_from_slice(ops);
    Ok(())
}

/// Fills `b` from a raw BAM record (without `block_size`), as `bam_read1` does: the read name padded
/// to a multiple of 4, a `CG:B:I` long CIGAR moved into place.
///
/// # Safety
/// `b` must point to a valid `bam1_t` whose data htslib owns (allocated with `malloc`).
pub unsafe fn raw_to_bam1(raw: &[u8], b: *mut hts::bam1_t) -> Result<(), BamError> {
    let r = RecordRef::new(raw).map_err(|e| BamError::Cram(format!("invalid record: {e}")))?;
    record_to_bam1(r, b)
}

/// [`raw_to_bam1`] for a record already validated (a [`RecordRef`], e.g. from a
/// [`sortase_bam::RecordBatch`]).
///
/// # Safety
/// As [`raw_to_bam1`].
pub unsafe fn record_to_bam1(r: RecordRef<'_>, b: *mut hts::bam1_t) -> Result<(), BamError> {
    let raw = r.as_bytes();
    let name_len = usize::from(raw[8]);
    let extranul = (4 - name_len % 4) % 4;
    let body = &raw[FIXED_LEN + name_len..];
    let cigar_bytes = 4 * r.n_cigar_op();
    // The real CIGAR and the CG field to drop, when the stored CIGAR is the placeholder.
    let long = r
        .long_cigar()
        .filter(|ops| ops.len() >= r.n_cigar_op())
        .and_then(|_| r.aux().find(|t| t.tag() == *b"CG"))
        .and_then(|field| {
            let start = field.raw.as_ptr() as usize - raw.as_ptr() as usize;
            Some((field.u32_array_bytes()?, start..start + field.raw.len()))
        });
    let (n_cigar, l_data) = match &long {
        Some((ops, cg)) => (
            ops.len() / 4,
            name_len + extranul + body.len() - cigar_bytes + ops.len() - cg.len(),
        ),
        _ => (r.n_cigar_op(), name_len + extranul + body.len()),
    };
    let b = &mut *b;
    if (b.m_data as usize) < l_data {
        let want = l_data.next_power_of_two().max(64);
        let p = libc::realloc(b.data.cast(), want);
        if p.is_null() {
            return Err(bad("out of memory"));
        }
        b.data = p.cast();
        b.m_data = u32::try_from(want).map_err(|_| bad("record too large"))?;
    }
    let data = std::slice::from_raw_parts_mut(b.data, l_data);
    data[..name_len].copy_from_slice(&raw[FIXED_LEN..FIXED_LEN + name_len]);
    data[name_len..name_len + extranul].fill(0);
    let at = name_len + extranul;
    match &long {
        Some((ops, cg)) => {
            let after_cigar = FIXED_LEN + name_len + cigar_bytes;
            let mut w = at;
            data[w..w + ops.len()].copy_from_slice(ops);
            w += ops.len();
            let before_cg = &raw[after_cigar..cg.start];
            data[w..w + before_cg.len()].copy_from_slice(before_cg);
            w += before_cg.len();
            let after_cg = &raw[cg.end..];
            data[w..w + after_cg.len()].copy_from_slice(after_cg);
        }
        _ => data[at..].copy_from_slice(body),
    }
    b.l_data = l_data as i32;
    let c = &mut b.core;
    c.tid = r.reference_sequence_id();
    c.pos = i64::from(r.position());
    c.qual = r.mapping_quality();
    c.bin = r.bin();
    c.l_qname = (name_len + extranul) as u16;
    c.l_extranul = extranul as u8;
    c.flag = r.flag();
    c.n_cigar = n_cigar as u32;
    c.l_qseq = r.l_seq() as i32;
    c.mtid = r.mate_reference_sequence_id();
    c.mpos = i64::from(r.mate_position());
    c.isize_ = i64::from(r.template_length());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw record (without `block_size`): name `r1`, the given CIGAR ops, 4 bases, aux bytes.
    fn record(cigar: &[u32], l_seq: u32, aux: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&0i32.to_le_bytes()); // refID
        r.extend_from_slice(&99i32.to_le_bytes()); // pos
        r.extend_from_slice(&[3, 60]); // l_read_name, mapq
        r.extend_from_slice(&4681u16.to_le_bytes()); // bin
        r.extend_from_slice(&(cigar.len() as u16).to_le_bytes());
        r.extend_from_slice(&0x63u16.to_le_bytes()); // flag
        r.extend_from_slice(&l_seq.to_le_bytes());
        r.extend_from_slice(&0i32.to_le_bytes());
        r.extend_from_slice(&199i32.to_le_bytes());
        r.extend_from_slice(&150i32.to_le_bytes());
        r.extend_from_slice(b"r1\0");
        for op in cigar {
            r.extend_from_slice(&op.to_le_bytes());
        }
        r.extend(std::iter::repeat_n(0x12, (l_seq as usize).div_ceil(2)));
        r.extend(std::iter::repeat_n(30, l_seq as usize));
        r.extend_from_slice(aux);
        r
    }

    fn round_trip(raw: &[u8]) -> (Vec<u8>, u32, u8) {
        let b = Bam1::new();
        // SAFETY: a fresh bam1_t.
        unsafe { raw_to_bam1(raw, b.0).unwrap() };
        // SAFETY: filled above.
        let core = unsafe { (*b.0).core };
        let mut out = Vec::new();
        // SAFETY: filled above.
        bam1_to_raw(unsafe { &*b.0 }, &mut out).unwrap();
        (out, core.n_cigar, core.l_extranul)
    }

    struct Bam1(*mut hts::bam1_t);
    impl Bam1 {
        fn new() -> Self {
            // SAFETY: allocation.
            Self(unsafe { hts::bam_init1() })
        }
    }
    impl Drop for Bam1 {
        fn drop(&mut self) {
            // SAFETY: owned.
            unsafe { hts::bam_destroy1(self.0) };
        }
    }

    #[test]
    fn records_round_trip_through_bam1() {
        let raw = record(&[4 << 4], 4, b"NMC\x01RGZx\0");
        let (out, n_cigar, extranul) = round_trip(&raw);
        assert_eq!((n_cigar, extranul), (1, 1));
        assert_eq!(
            u32::from_le_bytes(out[..4].try_into().unwrap()) as usize,
            raw.len()
        );
        assert_eq!(&out[4..], &raw[..]);
    }

    #[test]
    fn long_cigars_move_between_cg_and_the_cigar_field() {
        // 70000 operations `1M` (the placeholder is `4S70000N`) over 4 bases would be invalid as a
        // read, but only the layout matters here.
        let n = 70_000u32;
        let ops: Vec<u32> = (0..n).map(|_| 1 << 4).collect();
        let mut aux = b"NMC\x01CGBI".to_vec();
        aux.extend_from_slice(&n.to_le_bytes());
        ops.iter()
            .for_each(|o| aux.extend_from_slice(&o.to_le_bytes()));
        let raw = record(&[4 << 4 | 4, n << 4 | 3], 4, &aux);
        let (out, n_cigar, _) = round_trip(&raw);
        assert_eq!(n_cigar, n);
        assert_eq!(&out[4..], &raw[..]);
    }
}
