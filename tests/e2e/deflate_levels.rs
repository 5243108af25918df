//! The fast levels (`-l 1`, `-l 2`) deflate with ISA-L (crates/bgzf `deflate`): the output reads back
//! as samtools' records, is the same bytes for any thread count and on a second run, and is not
//! libdeflate's (its blocks differ from the level-3 file's; samtools itself cannot serve as the
//! libdeflate reference here, pysam's htslib deflates with zlib).

use crate::common::{p, sortase, tempdir};
use crate::oracle::oracle;

#[test]
fn isal_levels_round_trip_and_are_deterministic() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let input = d.join("in.sam");
    std::fs::write(&input, crate::markdup_query::grouped(3000, 4)).unwrap();
    let want = st.run(&["sort", "-O", "sam", p(&input)]).expect_ok().text();
    let out = |name: &str| d.join(name);
    let read = |name: &str| std::fs::read(out(name)).unwrap();
    let mut sizes = Vec::new();
    for level in ["1", "2", "3"] {
        for threads in ["1", "3"] {
            for round in 0..2 {
                let name = format!("l{level}-t{threads}-r{round}.bam");
                // --no-PG: the @PG line would hold each run's own command line.
                sortase(&[
                    "sort",
                    "--no-PG",
                    "-l",
                    level,
                    "-@",
                    threads,
                    "-o",
                    p(&out(&name)),
                    p(&input),
                ])
                .expect_ok();
            }
        }
        let first = format!("l{level}-t1-r0.bam");
        for other in ["l-t1-r1", "l-t3-r0", "l-t3-r1"] {
            let other = other.replacen("l-", &format!("l{level}-"), 1) + ".bam";
            assert!(
                read(&first) == read(&other),
                "-l {level}: {first} and {other} differ"
            );
        }
        let back = st.run(&["view", "-h", p(&out(&first))]).expect_ok().text();
        let body = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with('@'))
                .map(String::from)
                .collect()
        };
        assert!(
            body(&back) == body(&want),
            "-l {level}: records differ from samtools sort"
        );
        assert!(body(&want).len() > 5_000);
        sizes.push(read(&first).len());
    }
    // ISA-L at 1 and 2, libdeflate at 3: three different encodings of the same blocks.
    assert!(read("l1-t1-r0.bam") != read("l2-t1-r0.bam"));
    assert!(
        sizes[2] < sizes[0],
        "level 3 ({}) not smaller than level 1 ({})",
        sizes[2],
        sizes[0]
    );
}
