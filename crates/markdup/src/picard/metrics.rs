//! Picard's `DuplicationMetrics` per library and the metrics file (htsjdk `MetricsFile` layout:
//! the metrics table, then the histogram block; doubles with at most 6 decimals).

use super::chunks::Found;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Counts for one library (Picard's fields before `finalizeAndWriteMetrics`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibraryCounts {
    /// Primary mapped records without a mapped mate.
    pub unpaired_examined: u64,
    /// Primary mapped records with a mapped mate (ends, halved on output).
    pub pair_ends_examined: u64,
    /// Secondary or supplementary mapped records.
    pub secondary_or_supplementary: u64,
    /// Unmapped records.
    pub unmapped: u64,
    /// Duplicate records without a mapped mate.
    pub unpaired_duplicates: u64,
    /// Duplicate pair ends (halved on output).
    pub pair_end_duplicates: u64,
}

impl LibraryCounts {
    /// Picard `addReadToLibraryMetrics`.
    pub fn add_read(&mut self, flag: u16) {
        use sortase_bam::flags::*;
        if flag & UNMAPPED != 0 {
            self.unmapped += 1;
        } else if flag & (SECONDARY | SUPPLEMENTARY) != 0 {
            self.secondary_or_supplementary += 1;
        } else if super::ends::has_mapped_mate(flag) {
            self.pair_ends_examined += 1;
        } else {
            self.unpaired_examined += 1;
        }
    }

    /// Picard `addDuplicateReadToMetrics`.
    pub fn add_duplicate(&mut self, flag: u16) {
        if super::ends::is_examined(flag) {
            if super::ends::has_mapped_mate(flag) {
                self.pair_end_duplicates += 1;
            } else {
                self.unpaired_duplicates += 1;
            }
        }
    }

    /// Adds `o`'s counts.
    pub fn merge(&mut self, o: &LibraryCounts) {
        self.unpaired_examined += o.unpaired_examined;
        self.pair_ends_examined += o.pair_ends_examined;
        self.secondary_or_supplementary += o.secondary_or_supplementary;
        self.unmapped += o.unmapped;
        self.unpaired_duplicates += o.unpaired_duplicates;
        self.pair_end_duplicates += o.pair_end_duplicates;
    }
}

/// Picard `DuplicationMetrics.estimateLibrarySize` (bisection on the Lander-Waterman equation).
pub fn estimate_library_size(pairs: i64, unique: i64) -> Option<i64> {
    let dups = pairs - unique;
    if pairs <= 0 || dups <= 0 {
        return None;
    }
    let f = |x: f64, c: f64, n: f64| c / x - 1.0 + (-n / x).exp();
    let (c, n) = (unique as f64, pairs as f64);
    let (mut m, mut big_m) = (1.0f64, 100.0f64);
    if unique >= pairs || f(m * c, c, n) < 0.0 {
        return None; // Picard throws; its ROI histogram is then left out.
    }
    while f(big_m * c, c, n) > 0.0 {
        big_m *= 10.0;
    }
    for _ in 0..40 {
        let r = (m + big_m) / 2.0;
        let u = f(r * c, c, n);
        if u == 0.0 {
            break;
        } else if u > 0.0 {
            m = r;
        } else if u < 0.0 {
            big_m = r;
        }
    }
    Some((c * (m + big_m) / 2.0) as i64)
}

/// htsjdk `FormatUtil.format(double)`: at most 6 fraction digits, no trailing zeros, `?` for NaN/inf.
pub fn format_double(v: f64) -> String {
    if !v.is_finite() {
        return "?".into();
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// Java `Double.toString` for the whole-number histogram bins (`1.0`, `10.0`).
fn java_double_bin(k: u64) -> String {
    if k < 10_000_000 {
        format!("{k}.0")
    } else {
        let e = (k as f64).log10().floor() as i32;
        let m = k as f64 / 10f64.powi(e);
        let mut s = format!("{m}");
        if !s.contains('.') {
            s.push_str(".0");
        }
        format!("{s}E{e}")
    }
}

/// Writes the metrics table and histograms (after the `## htsjdk.samtools.metrics.StringHeader`
/// lines `header` gives) as Picard does. `libraries`: name -> (library id, counts), in name order.
pub fn write_file(
    header: &[String],
    libraries: &BTreeMap<String, (u16, LibraryCounts)>,
    found: &Found,
) -> String {
    let mut out = String::new();
    for h in header {
        let _ = writeln!(out, "## htsjdk.samtools.metrics.StringHeader\n# {h}");
    }
    out.push('\n');
    out.push_str("## METRICS CLASS\tpicard.sam.DuplicationMetrics\n");
    out.push_str("LIBRARY\tUNPAIRED_READS_EXAMINED\tREAD_PAIRS_EXAMINED\tSECONDARY_OR_SUPPLEMENTARY_RDS\tUNMAPPED_READS\tUNPAIRED_READ_DUPLICATES\tREAD_PAIR_DUPLICATES\tREAD_PAIR_OPTICAL_DUPLICATES\tPERCENT_DUPLICATION\tESTIMATED_LIBRARY_SIZE\n");
    let mut roi = None;
    for (name, (id, c)) in libraries {
        let pairs = (c.pair_ends_examined / 2) as i64;
        let pair_dups = (c.pair_end_duplicates / 2) as i64;
        let optical = found.optical_by_library.get(id).copied().unwrap_or(0) as i64;
        let els = estimate_library_size(pairs - optical, pairs - pair_dups);
        let examined = c.unpaired_examined as i64 + pairs;
        let pct = if examined != 0 {
            (c.unpaired_duplicates as i64 + pair_dups * 2) as f64
                / (c.unpaired_examined as i64 + pairs * 2) as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "{name}\t{}\t{pairs}\t{}\t{}\t{}\t{pair_dups}\t{optical}\t{}\t{}",
            c.unpaired_examined,
            c.secondary_or_supplementary,
            c.unmapped,
            c.unpaired_duplicates,
            format_double(pct),
            els.map(|v| v.to_string()).unwrap_or_default()
        );
        if libraries.len() == 1 {
            roi = els.map(|e| (e, pairs, pairs - pair_dups));
        }
    }
    out.push('\n');
    write_histograms(&mut out, roi, found);
    out.push('\n');
    out
}

/// The histograms (CoverageMult with `roi`, one library's size estimate, pairs and unique pairs;
/// all_sets, optical_sets, non_optical_sets) as Picard writes them.
fn write_histograms(out: &mut String, roi: Option<(i64, i64, i64)>, found: &Found) {
    // Histograms: CoverageMult (one library with a size estimate), all_sets, optical_sets,
    // non_optical_sets; empty ones left out; rows are the union of their bins.
    let roi_hist: Option<BTreeMap<u64, f64>> = roi.map(|(els, pairs, unique)| {
        (1..=100u64)
            .map(|x| {
                let e = els as f64;
                let v = e * (1.0 - (-(x as f64 * pairs as f64) / e).exp()) / unique as f64;
                (x, v)
            })
            .collect()
    });
    let to_f = |m: &BTreeMap<u64, u64>| -> BTreeMap<u64, f64> {
        m.iter().map(|(&k, &v)| (k, v as f64)).collect()
    };
    let mut hists: Vec<(&str, BTreeMap<u64, f64>)> = Vec::new();
    if let Some(h) = roi_hist {
        hists.push(("CoverageMult", h));
    }
    hists.push(("all_sets", to_f(&found.all_sets)));
    hists.push(("optical_sets", to_f(&found.optical_sets)));
    hists.push(("non_optical_sets", to_f(&found.non_optical_sets)));
    hists.retain(|(_, h)| !h.is_empty());
    if !hists.is_empty() {
        let bin_label = if hists[0].0 == "CoverageMult" {
            "BIN"
        } else {
            "set_size"
        };
        out.push_str("## HISTOGRAM\tjava.lang.Double\n");
        out.push_str(bin_label);
        for (label, _) in &hists {
            let _ = write!(out, "\t{label}");
        }
        out.push('\n');
        let keys: std::collections::BTreeSet<u64> =
            hists.iter().flat_map(|(_, h)| h.keys().copied()).collect();
        for k in keys {
            out.push_str(&java_double_bin(k));
            for (_, h) in &hists {
                let _ = write!(
                    out,
                    "\t{}",
                    format_double(h.get(&k).copied().unwrap_or(0.0))
                );
            }
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_size_and_format() {
        // Picard on the tiny bench BAM: 25777 pairs, 2036 duplicates, 502 optical -> 199709.
        assert_eq!(
            estimate_library_size(25777 - 502, 25777 - 2036),
            Some(199709)
        );
        assert_eq!(format_double(0.078946123), "0.078946");
        assert_eq!(format_double(4.53437), "4.53437");
        assert_eq!(format_double(22035.0), "22035");
        assert_eq!(java_double_bin(3), "3.0");
    }

    #[test]
    fn library_size_of_two_libraries_as_picard() {
        // Picard MarkDuplicates 2.27.5 on a coordinate-sorted copy of a simulated 2x150 BAM with
        // two libraries (200000 records): READ_PAIRS_EXAMINED, READ_PAIR_DUPLICATES,
        // READ_PAIR_OPTICAL_DUPLICATES -> ESTIMATED_LIBRARY_SIZE, with optical detection and with
        // READ_NAME_REGEX=null (optical 0, the counts samblaster mode reports on the same input).
        for (pairs, dups, optical, picard) in [
            (62943, 1350, 312, 1868584),
            (32391, 720, 152, 904145),
            (62943, 1350, 0, 1446284),
            (32391, 720, 0, 717757),
        ] {
            assert_eq!(
                estimate_library_size(pairs - optical, pairs - dups),
                Some(picard),
                "{pairs} pairs, {dups} duplicates, {optical} optical"
            );
        }
        // No duplicates (or only optical ones): Picard leaves the field empty.
        assert_eq!(estimate_library_size(100, 100), None);
        assert_eq!(estimate_library_size(0, 0), None);
    }
}
