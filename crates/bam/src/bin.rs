//! The UCSC binning scheme of BAI (SAM spec §5.3).

/// Bin of the 0-based half-open interval `[beg, end)` with 14-bit minimum and 5 levels (htslib
/// `hts_reg2bin(beg, end, 14, 5)`).
///
/// ```
/// assert_eq!(sortase_bam::bin::reg2bin(-1, 0), 4680);
/// assert_eq!(sortase_bam::bin::reg2bin(0, 1), 4681);
/// ```
pub fn reg2bin(beg: i64, end: i64) -> u16 {
    reg2bin_generic(beg, end, 14, 5) as u16
}

/// htslib `hts_reg2bin` for any `min_shift` and `n_lvls` (CSI).
pub fn reg2bin_generic(beg: i64, end: i64, min_shift: u32, n_lvls: u32) -> u32 {
    let end = end - 1;
    let mut l = n_lvls as i64;
    let mut s = min_shift;
    let mut t = ((1i64 << ((n_lvls * 3) as i64)) - 1) / 7;
    while l > 0 {
        if beg >> s == end >> s {
            return (t + (beg >> s)) as u32;
        }
        l -= 1;
        s += 3;
        t -= 1 << (l * 3);
    }
    0
}
