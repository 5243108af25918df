#![no_main]
//! Arbitrary bytes as a VCF, read as `sortase snp-pileup` reads it (`vcf::read_sites_from`: CHROM,
//! POS, REF, ALT of every data line; biallelic SNVs kept), then each contig mapped to a BAM reference
//! (`vcf_contig_to_bam`, FACETS' `chr`-prefix rule) against a few BAM naming styles.
//!
//! Must hold: errors, never panics; every kept site is a 1-character REF/ALT at a position in
//! 0..2^31-1 whose contig index is valid; contigs are distinct.

use libfuzzer_sys::fuzz_target;
use sortase_ops::pileup::vcf::{read_sites_from, vcf_contig_to_bam};
use std::io::Cursor;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(sites) = read_sites_from(Cursor::new(data), Path::new("fuzz.vcf")) else {
        return;
    };
    assert!(sites.sites.len() as u64 <= sites.lines);
    for s in &sites.sites {
        assert!((s.contig as usize) < sites.contigs.len());
        assert!(s.pos >= 0);
    }
    // Contigs are told apart by their bytes; the names kept are lossy UTF-8, so two distinct
    // non-UTF-8 CHROMs may print alike (fuzz finding): check distinctness where the text is exact.
    let mut seen = std::collections::HashSet::new();
    for c in sites.contigs.iter().filter(|c| !c.contains('\u{FFFD}')) {
        assert!(seen.insert(c), "contig {c:?} twice");
    }
    let styles: [&[&[u8]]; 3] = [
        &[b"chr1", b"chr2", b"chrX"],
        &[b"1", b"2", b"X"],
        &[b"c", b"chr"],
    ];
    for names in styles {
        for c in &sites.contigs {
            if let Some(i) = vcf_contig_to_bam(c, names) {
                assert!(i < names.len());
            }
        }
    }
});
