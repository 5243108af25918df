//! `sortase sort --verify`: files sorted by samtools 1.24 in each order pass the check for that
//! order; a file with two records swapped fails naming the first record out of order; nothing is
//! written.

use crate::common::{dir_listing, p, sortase, tempdir};
use crate::oracle::oracle;

/// samtools' flags for each order, and the name `--verify` reports it by.
const ORDERS: &[(&[&str], &str)] = &[
    (&[], "coordinate"),
    (&["-n"], "queryname:natural"),
    (&["-N"], "queryname:lexicographical"),
    (&["-t", "RG"], "unsorted:RG:coordinate"),
    (&["--template-coordinate"], "unsorted:template-coordinate"),
];

/// A sorted SAM's records with records `i` and `i + 1` (0-based, among the records) swapped.
fn swapped(sam: &str, i: usize) -> String {
    let (header, records): (Vec<&str>, Vec<&str>) = sam.lines().partition(|l| l.starts_with('@'));
    let mut records = records;
    records.swap(i, i + 1);
    header
        .into_iter()
        .chain(records)
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn sort_verify_accepts_samtools_orders_and_names_the_first_unsorted_record() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let raw = d.join("raw.bam");
    std::fs::write(d.join("raw.sam"), crate::sort_template::templates(300, 17)).unwrap();
    let by_name = d.join("by_name.bam");
    st.run(&["sort", "-n", "-o", p(&by_name), p(&d.join("raw.sam"))])
        .expect_ok();
    st.run(&["fixmate", "-m", p(&by_name), p(&raw)]).expect_ok();
    for (k, (flags, name)) in ORDERS.iter().enumerate() {
        let sorted = d.join(format!("sorted{k}.sam"));
        let mut args = vec!["sort", "-O", "sam", "-o", p(&sorted)];
        args.extend_from_slice(flags);
        args.push(p(&raw));
        st.run(&args).expect_ok();
        let before = dir_listing(d);
        let mut check = vec!["sort", "--verify"];
        check.extend_from_slice(flags);
        let run = |file: &std::path::Path| {
            let mut a = check.clone();
            a.push(p(file));
            sortase(&a)
        };
        let text = std::fs::read_to_string(&sorted).unwrap();
        let records: Vec<&str> = text.lines().filter(|l| !l.starts_with('@')).collect();
        let r = run(&sorted);
        assert!(r.ok(), "{flags:?}: {}", r.failure());
        assert!(
            r.text()
                .contains(&format!("sorted by {name} ({} records)", records.len())),
            "{flags:?}: {}",
            r.text()
        );
        // Two records swapped where they differ: the second of them is reported.
        let i = (records.len() / 2..records.len() - 1)
            .find(|&i| {
                let bad = d.join("probe.sam");
                std::fs::write(&bad, swapped(&text, i)).unwrap();
                !run(&bad).ok()
            })
            .expect("some swap breaks the order");
        let bad = d.join("probe.sam");
        std::fs::write(&bad, swapped(&text, i)).unwrap();
        let r = run(&bad);
        let msg = r.stderr.trim();
        assert_eq!(msg.lines().count(), 1, "{msg}");
        let name_of = |l: &str| l.split('\t').next().unwrap().to_string();
        let want = format!(
            "not sorted by {name}: record {} ({} at",
            i + 2,
            name_of(records[i])
        );
        assert!(msg.contains(&want), "{flags:?}: {msg}\nwanted: {want}");
        std::fs::remove_file(&bad).unwrap();
        assert_eq!(dir_listing(d), before, "--verify wrote files");
    }
    // A coordinate-sorted file is not sorted by name.
    let r = sortase(&["sort", "--verify", "-n", p(&d.join("sorted0.sam"))]);
    assert!(!r.ok());
    let r = sortase(&["sort", "--verify", "-o", p(&d.join("x.bam")), p(&raw)]);
    assert!(!r.ok(), "--verify with -o accepted");
}
