//! `sortase stats --plot`: the page names every reference, its counts are samtools idxstats', its
//! depth sums are samtools depth's, and its MAPQ histogram covers every record exactly once.

use std::collections::BTreeMap;

use crate::common::{assert_no_failures, p, sortase};
use crate::oracle::oracle;
use crate::view_filters::data;

#[test]
fn stats_plot_agrees_with_samtools() {
    let Some(st) = oracle() else { return };
    let d = data(st);
    let mut failures = Vec::new();
    let idxstats: Vec<Vec<String>> = st
        .run(&["idxstats", p(&d.bam)])
        .expect_ok()
        .text()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    let records: u64 = st
        .run(&["view", "-c", p(&d.bam)])
        .expect_ok()
        .text()
        .trim()
        .parse()
        .unwrap();
    let mut mapq = vec![0u64; 256];
    for line in st
        .run(&["view", "-F", "4", p(&d.bam)])
        .expect_ok()
        .text()
        .lines()
    {
        mapq[line.split('\t').nth(4).unwrap().parse::<usize>().unwrap()] += 1;
    }
    let mut depth: BTreeMap<String, u64> = BTreeMap::new();
    for line in st.run(&["depth", p(&d.bam)]).expect_ok().text().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        *depth.entry(f[0].to_string()).or_default() += f[2].parse::<u64>().unwrap();
    }
    for (input, threads) in [(&d.bam, "1"), (&d.bam, "4"), (&d.sam, "2")] {
        let page = d.sam.with_file_name(format!("stats{threads}.html"));
        let run = sortase(&["stats", "-@", threads, "--plot", p(&page), p(input)]);
        if !run.ok() {
            failures.push(run.failure());
            continue;
        }
        let label = format!("stats -@ {threads} {}", input.display());
        // The table on stdout: idxstats' four columns, then the mean depth.
        let table: Vec<Vec<String>> = run
            .text()
            .lines()
            .map(|l| l.split('\t').take(4).map(str::to_string).collect())
            .collect();
        if table != idxstats {
            failures.push(format!("{label}: table {table:?} != idxstats {idxstats:?}"));
        }
        let html = std::fs::read_to_string(&page).unwrap_or_default();
        for row in &idxstats {
            if !html.contains(&format!("<td>{}</td>", row[0])) {
                failures.push(format!("{label}: page lacks reference {}", row[0]));
            }
        }
        let json = html
            .split("<script type=\"application/json\" id=\"sortase-summary\">")
            .nth(1)
            .and_then(|rest| rest.split("</script>").next())
            .unwrap_or("{}");
        let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        let refs = v["references"].as_array().cloned().unwrap_or_default();
        for (row, r) in idxstats.iter().zip(&refs) {
            let got = [
                r["name"].as_str().unwrap_or("").to_string(),
                r["length"].to_string(),
                r["mapped"].to_string(),
                r["unmapped"].to_string(),
            ];
            if got[..] != row[..] {
                failures.push(format!("{label}: {got:?} != idxstats {row:?}"));
            }
            let bases = r["aligned_bases"].as_u64().unwrap_or(u64::MAX);
            let want = depth.get(&row[0]).copied().unwrap_or(0);
            if bases != want {
                failures.push(format!(
                    "{label}: {} aligned bases {bases} != samtools depth's sum {want}",
                    row[0]
                ));
            }
        }
        let hist: Vec<u64> = v["mapq"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
            .unwrap_or_default();
        let total = hist.iter().sum::<u64>() + v["unmapped"].as_u64().unwrap_or(0);
        if total != records || hist != mapq {
            failures.push(format!(
                "{label}: histogram total {total} (samtools view -c: {records}), \
                 per MAPQ equal to samtools' MAPQ column: {}",
                hist == mapq
            ));
        }
        if html.matches("<svg").count() != 3 {
            failures.push(format!("{label}: expected three charts"));
        }
    }
    let bad = sortase(&["stats", "--plot", "x.png", p(&d.bam)]);
    if bad.ok() || !bad.stderr.contains(".html") {
        failures.push(format!(
            "--plot x.png: expected an error naming .html: {}",
            bad.stderr
        ));
    }
    assert_no_failures("stats --plot", &failures);
}
