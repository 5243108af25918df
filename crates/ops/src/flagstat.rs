//! `samtools flagstat` counters (samtools `bam_stat.c`: `flagstat_loop`) and its three output formats.

use sortase_bam::{flags::*, RecordRef};
use std::fmt::Write;

/// Counters, each for QC-passed `[0]` and QC-failed `[1]` records (samtools `bam_flagstat_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlagStat {
    /// All records.
    pub reads: [u64; 2],
    /// Mapped (flag 0x4 clear).
    pub mapped: [u64; 2],
    /// Primary records paired in sequencing.
    pub pair_all: [u64; 2],
    /// Primary pairs with itself and mate mapped.
    pub pair_map: [u64; 2],
    /// Primary properly paired and mapped.
    pub pair_good: [u64; 2],
    /// Primary mapped with the mate unmapped.
    pub singletons: [u64; 2],
    /// Primary READ1.
    pub read1: [u64; 2],
    /// Primary READ2.
    pub read2: [u64; 2],
    /// Duplicates.
    pub dup: [u64; 2],
    /// Primary pairs with the mate mapped to a different reference.
    pub diff_chr: [u64; 2],
    /// The same with MAPQ >= 5.
    pub diff_high: [u64; 2],
    /// Secondary.
    pub secondary: [u64; 2],
    /// Supplementary.
    pub supplementary: [u64; 2],
    /// Primary (neither secondary nor supplementary).
    pub primary: [u64; 2],
    /// Primary mapped.
    pub primary_mapped: [u64; 2],
    /// Primary duplicates.
    pub primary_dup: [u64; 2],
}

impl FlagStat {
    /// Counts one record.
    #[inline]
    pub fn add(&mut self, r: &RecordRef<'_>) {
        self.add_fields(
            r.flag(),
            r.reference_sequence_id(),
            r.mate_reference_sequence_id(),
            r.mapping_quality(),
        );
    }

    /// Counts one record from the four fields flagstat reads (a columnar dataset's columns).
    #[inline]
    pub fn add_fields(&mut self, flag: u16, ref_id: i32, next_ref_id: i32, mapq: u8) {
        // HOT: once per record; flag, refIDs and mapq only.
        let w = usize::from(flag & QC_FAIL != 0);
        self.reads[w] += 1;
        if flag & SECONDARY != 0 {
            self.secondary[w] += 1;
        } else if flag & SUPPLEMENTARY != 0 {
            self.supplementary[w] += 1;
        } else {
            self.primary[w] += 1;
            if flag & PAIRED != 0 {
                self.pair_all[w] += 1;
                if flag & PROPER_PAIR != 0 && flag & UNMAPPED == 0 {
                    self.pair_good[w] += 1;
                }
                if flag & READ1 != 0 {
                    self.read1[w] += 1;
                }
                if flag & READ2 != 0 {
                    self.read2[w] += 1;
                }
                if flag & MATE_UNMAPPED != 0 && flag & UNMAPPED == 0 {
                    self.singletons[w] += 1;
                }
                if flag & UNMAPPED == 0 && flag & MATE_UNMAPPED == 0 {
                    self.pair_map[w] += 1;
                    if next_ref_id != ref_id {
                        self.diff_chr[w] += 1;
                        if mapq >= 5 {
                            self.diff_high[w] += 1;
                        }
                    }
                }
            }
            if flag & UNMAPPED == 0 {
                self.primary_mapped[w] += 1;
            }
            if flag & DUPLICATE != 0 {
                self.primary_dup[w] += 1;
            }
        }
        if flag & UNMAPPED == 0 {
            self.mapped[w] += 1;
        }
        if flag & DUPLICATE != 0 {
            self.dup[w] += 1;
        }
    }

    /// Adds another range's counters.
    pub fn merge(&mut self, o: &FlagStat) {
        let pairs = [
            (&mut self.reads, o.reads),
            (&mut self.mapped, o.mapped),
            (&mut self.pair_all, o.pair_all),
            (&mut self.pair_map, o.pair_map),
            (&mut self.pair_good, o.pair_good),
            (&mut self.singletons, o.singletons),
            (&mut self.read1, o.read1),
            (&mut self.read2, o.read2),
            (&mut self.dup, o.dup),
            (&mut self.diff_chr, o.diff_chr),
            (&mut self.diff_high, o.diff_high),
            (&mut self.secondary, o.secondary),
            (&mut self.supplementary, o.supplementary),
            (&mut self.primary, o.primary),
            (&mut self.primary_mapped, o.primary_mapped),
            (&mut self.primary_dup, o.primary_dup),
        ];
        for (a, b) in pairs {
            a[0] += b[0];
            a[1] += b[1];
        }
    }

    /// samtools' default text.
    pub fn to_default(&self) -> String {
        let mut s = String::new();
        let p = |n, t| percent(n, t, "N/A", "%");
        let mut line = |label: &str, v: [u64; 2]| {
            let _ = writeln!(s, "{} + {} {label}", v[0], v[1]);
        };
        line("in total (QC-passed reads + QC-failed reads)", self.reads);
        line("primary", self.primary);
        line("secondary", self.secondary);
        line("supplementary", self.supplementary);
        line("duplicates", self.dup);
        line("primary duplicates", self.primary_dup);
        let with = |v: [u64; 2], t: [u64; 2]| format!("({} : {})", p(v[0], t[0]), p(v[1], t[1]));
        line(
            &format!("mapped {}", with(self.mapped, self.reads)),
            self.mapped,
        );
        line(
            &format!("primary mapped {}", with(self.primary_mapped, self.primary)),
            self.primary_mapped,
        );
        line("paired in sequencing", self.pair_all);
        line("read1", self.read1);
        line("read2", self.read2);
        line(
            &format!("properly paired {}", with(self.pair_good, self.pair_all)),
            self.pair_good,
        );
        line("with itself and mate mapped", self.pair_map);
        line(
            &format!("singletons {}", with(self.singletons, self.pair_all)),
            self.singletons,
        );
        line("with mate mapped to a different chr", self.diff_chr);
        line(
            "with mate mapped to a different chr (mapQ>=5)",
            self.diff_high,
        );
        s
    }

    /// samtools' `-O tsv`.
    pub fn to_tsv(&self) -> String {
        let mut s = String::new();
        let p = |n, t| percent(n, t, "N/A", "%");
        let mut count = |label: &str, v: [u64; 2]| {
            let _ = writeln!(s, "{}\t{}\t{label}", v[0], v[1]);
        };
        count("total (QC-passed reads + QC-failed reads)", self.reads);
        count("primary", self.primary);
        count("secondary", self.secondary);
        count("supplementary", self.supplementary);
        count("duplicates", self.dup);
        count("primary duplicates", self.primary_dup);
        count("mapped", self.mapped);
        let _ = writeln!(
            s,
            "{}\t{}\tmapped %",
            p(self.mapped[0], self.reads[0]),
            p(self.mapped[1], self.reads[1])
        );
        let mut count = |label: &str, v: [u64; 2]| {
            let _ = writeln!(s, "{}\t{}\t{label}", v[0], v[1]);
        };
        count("primary mapped", self.primary_mapped);
        let _ = writeln!(
            s,
            "{}\t{}\tprimary mapped %",
            p(self.primary_mapped[0], self.primary[0]),
            p(self.primary_mapped[1], self.primary[1])
        );
        for (label, v) in [
            ("paired in sequencing", self.pair_all),
            ("read1", self.read1),
            ("read2", self.read2),
            ("properly paired", self.pair_good),
        ] {
            let _ = writeln!(s, "{}\t{}\t{label}", v[0], v[1]);
        }
        let _ = writeln!(
            s,
            "{}\t{}\tproperly paired %",
            p(self.pair_good[0], self.pair_all[0]),
            p(self.pair_good[1], self.pair_all[1])
        );
        for (label, v) in [
            ("with itself and mate mapped", self.pair_map),
            ("singletons", self.singletons),
        ] {
            let _ = writeln!(s, "{}\t{}\t{label}", v[0], v[1]);
        }
        let _ = writeln!(
            s,
            "{}\t{}\tsingletons %",
            p(self.singletons[0], self.pair_all[0]),
            p(self.singletons[1], self.pair_all[1])
        );
        for (label, v) in [
            ("with mate mapped to a different chr", self.diff_chr),
            (
                "with mate mapped to a different chr (mapQ>=5)",
                self.diff_high,
            ),
        ] {
            let _ = writeln!(s, "{}\t{}\t{label}", v[0], v[1]);
        }
        s
    }

    /// samtools' `-O json` (its exact spacing).
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\n");
        for (w, name) in [(0, "QC-passed reads"), (1, "QC-failed reads")] {
            let p = |n: [u64; 2], t: [u64; 2]| percent(n[w], t[w], "null", "");
            let fields: [(&str, String); 20] = [
                ("total", self.reads[w].to_string()),
                ("primary", self.primary[w].to_string()),
                ("secondary", self.secondary[w].to_string()),
                ("supplementary", self.supplementary[w].to_string()),
                ("duplicates", self.dup[w].to_string()),
                ("primary duplicates", self.primary_dup[w].to_string()),
                ("mapped", self.mapped[w].to_string()),
                ("mapped %", p(self.mapped, self.reads)),
                ("primary mapped", self.primary_mapped[w].to_string()),
                ("primary mapped %", p(self.primary_mapped, self.primary)),
                ("paired in sequencing", self.pair_all[w].to_string()),
                ("read1", self.read1[w].to_string()),
                ("read2", self.read2[w].to_string()),
                ("properly paired", self.pair_good[w].to_string()),
                ("properly paired %", p(self.pair_good, self.pair_all)),
                ("with itself and mate mapped", self.pair_map[w].to_string()),
                ("singletons", self.singletons[w].to_string()),
                ("singletons %", p(self.singletons, self.pair_all)),
                (
                    "with mate mapped to a different chr",
                    self.diff_chr[w].to_string(),
                ),
                (
                    "with mate mapped to a different chr (mapQ >= 5)",
                    self.diff_high[w].to_string(),
                ),
            ];
            let _ = writeln!(s, " \"{name}\": {{ ");
            for (i, (k, v)) in fields.iter().enumerate() {
                let sep = if i + 1 < fields.len() { "," } else { "" };
                let _ = writeln!(s, "  \"{k}\": {v}{sep} ");
            }
            s.push_str(if w == 0 { " },\n" } else { " }\n" });
        }
        s.push_str("}\n");
        s
    }
}

/// samtools `percent`: `(float)n / total * 100.0` printed with `%.2f`.
fn percent(n: u64, total: u64, none: &str, suffix: &str) -> String {
    if total == 0 {
        return none.to_string();
    }
    let v = f64::from(n as f32 / total as f32) * 100.0;
    format!("{v:.2}{suffix}")
}
