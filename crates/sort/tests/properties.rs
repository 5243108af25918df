//! Property tests of the sorter and the merge: for random records, orders, memory budgets, fan-ins,
//! batch sizes and range plans,
//! - [`Sorter`] gives exactly a stable sort of its input by the order's key (samtools' sorts are
//!   stable), whether everything fits in memory or goes through runs, compactions and key ranges;
//! - merging sorted runs gives exactly a stable sort of their concatenation (ties go to the earlier
//!   run, as in samtools' heap merge).
//!
//! `PROPTEST_CASES` sets the number of cases (default here: 24, a few seconds).

use proptest::prelude::*;
use sortase_sort::merge::{merge, Source};
use sortase_sort::order::{coordinate_key, find_tag};
use sortase_sort::ranges::RangePlan;
use sortase_sort::run::{write_run, RunReader};
use sortase_sort::{SortOptions, SortOrder, Sorter};

#[path = "support/raw_record.rs"]
mod raw_record;
use raw_record::batch;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 24;
    }
    config
}

/// A raw BAM record with its `block_size` prefix: no CIGAR, no sequence, an optional `RG:Z` tag
/// (`g0`, `g1`, ...).
fn record(tid: i32, pos: i32, flag: u16, name: &str, rg: Option<u8>) -> Vec<u8> {
    let aux = rg.map_or(Vec::new(), |g| vec![b'R', b'G', b'Z', b'g', b'0' + g, 0]);
    raw_record::record(tid, pos, flag, name, &aux)
}

/// Records with many ties (few references, positions and names), so stability is tested.
fn records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let one = (
        -1i32..3,
        0i32..40,
        prop::sample::select(vec![0u16, 16, 64, 128, 256, 2048, 4, 83]),
        0u32..25,
        0u32..9,
        prop::option::of(0u8..3),
    );
    prop::collection::vec(one, 0..1500).prop_map(|v| {
        v.into_iter()
            .map(|(tid, pos, flag, n, m, rg)| {
                let pos = if tid < 0 { -1 } else { pos };
                record(tid, pos, flag, &format!("r{n}x{m}"), rg)
            })
            .collect()
    })
}

fn orders() -> impl Strategy<Value = SortOrder> {
    prop_oneof![
        Just(SortOrder::Coordinate),
        any::<bool>().prop_map(|natural| SortOrder::Name { natural }),
        prop::option::of(any::<bool>()).prop_map(|by_name| SortOrder::Tag {
            tag: *b"RG",
            by_name
        }),
    ]
}

/// The reference: a stable sort (`sort_by` keeps equal records in input order).
fn stable_sort(order: SortOrder, records: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v = records.to_vec();
    if order == SortOrder::Coordinate {
        v.sort_by_key(|r| coordinate_key(&r[4..]));
        return v;
    }
    let tag = |r: &[u8]| match order {
        SortOrder::Tag { tag, .. } => find_tag(&r[4..], tag).map(<[u8]>::to_vec),
        _ => None,
    };
    v.sort_by(|a, b| order.compare(&a[4..], &b[4..], tag(a).as_deref(), tag(b).as_deref()));
    v
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sorting_equals_a_stable_sort(
        recs in records(),
        order in orders(),
        memory in prop::sample::select(vec![2_000usize, 8_000, 40_000, 1 << 24]),
        fan_in in 2usize..6,
        batch_records in 1usize..200,
        small_ranges in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let ranges = if small_ranges {
            RangePlan { sample_every: 7, range_bytes: 500, min_ranges: 64, min_range_bytes: 100 }
        } else {
            RangePlan::default()
        };
        let mut sorter = Sorter::new(SortOptions {
            order,
            memory,
            temp_dir: dir.path().to_path_buf(),
            max_fan_in: fan_in,
            ranges,
        });
        for chunk in recs.chunks(batch_records) {
            sorter.push(batch(chunk)).unwrap();
        }
        let mut out = Vec::with_capacity(recs.len());
        let stats = sorter
            .finish(|_| {}, |r| {
                out.push(r.to_vec());
                Ok(())
            })
            .unwrap();
        prop_assert_eq!(stats.records, recs.len() as u64);
        prop_assert!(out == stable_sort(order, &recs), "output is not the stable sort");
        prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "runs left behind");
    }

    #[test]
    fn merging_runs_equals_sorting_their_concatenation(
        recs in records(),
        order in orders(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c.index(recs.len() + 1)).collect();
        bounds.extend([0, recs.len()]);
        bounds.sort_unstable();
        let mut sources = Vec::new();
        for (i, w) in bounds.windows(2).enumerate() {
            let sorted = stable_sort(order, &recs[w[0]..w[1]]);
            let path = dir.path().join(format!("{i}.run"));
            let seq = w[0] as u64;
            let run = write_run(
                &path,
                order,
                sorted.iter().enumerate().map(|(k, r)| (seq + k as u64, r.as_slice())),
            )
            .unwrap();
            prop_assert_eq!(run.records, sorted.len() as u64);
            sources.push(Source::Run(RunReader::open(&path).unwrap()));
        }
        let mut out = Vec::with_capacity(recs.len());
        let n = merge(order, &mut sources, |_, _, r| {
            out.push(r.to_vec());
            Ok(())
        })
        .unwrap();
        prop_assert_eq!(n, recs.len() as u64);
        prop_assert!(out == stable_sort(order, &recs), "merge is not the sort of the concatenation");
    }
}
