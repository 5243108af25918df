//! SEQ and QUAL as minimap2 writes them (`sam_write_sq`) and htslib stores them: reverse
//! complemented on the reverse strand with minimap2's complement table, 4-bit codes by htslib's
//! `seq_nt16_table`, qualities less 33 (`0xff` when the read has none).

/// htslib `seq_nt16_table`: base → 4-bit code.
pub(crate) static NT16: [u8; 256] = sortase_bam::sam_parse::nt16_table(false);

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
pub(crate) static RC_NT16: [u8; 256] = {
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

/// Appends `seq` and `qual` (the same range of the read), reverse complemented if `rev`.
pub(crate) fn push_seq_qual(out: &mut Vec<u8>, seq: &[u8], qual: Option<&[u8]>, rev: bool) {
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
    match qual {
        Some(q) if rev => out.extend(q.iter().rev().map(|&c| c.wrapping_sub(33))),
        Some(q) => out.extend(q.iter().map(|&c| c.wrapping_sub(33))),
        None => out.resize(out.len() + seq.len(), 0xff),
    }
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
    fn reverse_strand_is_reverse_complemented() {
        let mut out = Vec::new();
        push_seq_qual(&mut out, b"ACG", Some(b"!#%"), true);
        // CGT: C=2 G=4, T=8 (pad 0); qualities 4 2 0.
        assert_eq!(out, [0x24, 0x80, 4, 2, 0]);
        out.clear();
        push_seq_qual(&mut out, b"AN", None, false);
        assert_eq!(out, [0x1f, 0xff, 0xff]);
    }
}
