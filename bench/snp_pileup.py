#!/usr/bin/env python3
"""Side-by-side benchmark: `sortase snp-pileup` vs FACETS' snp-pileup (issue 7).

    python3 bench/snp_pileup.py --facets /work/facets-build/snp-pileup
        [--vcf /work/bench-data/snps.vcf] [--tumour /work/bench-data/large.sorted.bam]
        [--normal /work/bench-data/normal.sorted.bam] [--threads 1,2] [--rounds 3]
        [--options "-q15 -Q20"] [--sortase PATH] [--no-record] [--note TEXT]

FACETS is not packaged and its code is not part of this repository: build it yourself from
mskcc/facets `inst/extcode/snp-pileup.cpp` (+ `snp-pileup.h`) against htslib, e.g.
`g++ -O2 -std=c++11 snp-pileup.cpp -lhts -o snp-pileup` with Debian's libhts-dev (htslib 1.16),
and pass its path with --facets (or $FACETS_SNP_PILEUP). Data: bench/generate.py --size large
(the "tumour") and --size normal, and bench/make_snp_vcf.py (the VCF), all outside the repo.

Procedure (as bench/compare.py): one untimed `cat` of every input first (warm page cache); then
--rounds rounds of FACETS and sortase at each --threads value, alternating within a round, each under
`/usr/bin/time -v`; medians, min-max, CPU %, peak RSS, and the ratio of FACETS' median wall time to
sortase's (> 1: sortase is faster); throughput in VCF sites per second; every output must be
byte-identical to FACETS' (checked with md5). `uptime` load averages are recorded before and after,
since the machine may be shared with compiles. Unless --no-record, a section is appended to
bench/RESULTS-archive.md and rows to bench/results.csv.
"""
import argparse
import csv
import datetime
import hashlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import compare  # noqa: E402  (shared helpers: timing, machine info, formatting)


def md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def count_sites(vcf):
    n = 0
    with open(vcf, "rb") as f:
        for line in f:
            if not line.startswith(b"#"):
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--facets", default=os.environ.get("FACETS_SNP_PILEUP"),
                    help="FACETS snp-pileup binary (built outside the repo)")
    ap.add_argument("--vcf", default="/work/bench-data/snps.vcf")
    ap.add_argument("--tumour", default="/work/bench-data/large.sorted.bam")
    ap.add_argument("--normal", default="/work/bench-data/normal.sorted.bam")
    ap.add_argument("--threads", default="1,2", help="sortase thread counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--options", default="", help="snp-pileup options given to both")
    ap.add_argument("--sortase", default=compare.DEFAULT_SORTASE)
    ap.add_argument("--scratch", default="/work/bench-data/compare-tmp")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    if not args.facets or not os.path.exists(args.facets):
        sys.exit("FACETS snp-pileup not found: pass --facets PATH or set FACETS_SNP_PILEUP")
    for p in (args.vcf, args.tumour, args.normal, args.sortase):
        if not os.path.exists(p):
            sys.exit(f"missing: {p}")
    threads = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.scratch, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="snp-pileup.", dir=args.scratch)
    inputs = [args.vcf, args.tumour, args.normal]
    for p in inputs:
        subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)
    opts = shlex.split(args.options)
    variants = [("facets", [args.facets] + opts)]
    for t in threads:
        variants.append((f"sortase-@{t}", [args.sortase, "snp-pileup", f"-@{t}"] + opts))
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {label: [] for label, _ in variants}
    digests = {}
    commands = {}
    for rnd in range(args.rounds):
        for label, argv in variants:
            out = os.path.join(scratch, f"{label}.{rnd}.csv")
            cmd = argv + [args.vcf, out, args.tumour, args.normal]
            commands[label] = " ".join(shlex.quote(c) for c in argv + [args.vcf, "OUT.csv",
                                                                       args.tumour, args.normal])
            base = os.path.join(scratch, f"{label}.{rnd}")
            r = compare.run_timed(" ".join(shlex.quote(c) for c in cmd), scratch,
                                  base + ".stdout", base + ".stderr", base + ".time")
            if r["rc"] != 0:
                sys.exit(f"{label} failed (exit {r['rc']}):\n{compare.tail(base + '.stderr')}")
            digests.setdefault(label, set()).add(md5(out))
            os.remove(out)
            results[label].append(r)
            print(f"round {rnd + 1} {label}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU", flush=True)
    load_after = os.getloadavg()
    shutil.rmtree(scratch, ignore_errors=True)
    all_digests = set().union(*digests.values())
    identical = len(all_digests) == 1
    sites = count_sites(args.vcf)
    sums = []
    facets_median = statistics.median(r["wall"] for r in results["facets"])
    for label, argv in variants:
        s = compare.summarise(label, "variant", commands[label], results[label])
        s["ratio"] = facets_median / s["wall_median"]
        s["sites_per_s"] = sites / s["wall_median"]
        sums.append(s)
    table = ["| variant | runs | wall median (s) | wall min-max (s) | CPU % (median) | "
             "user+sys median (s) | peak RSS max (MiB) | sites/s | FACETS / variant |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sums:
        table.append(f"| {s['label']} | {s['runs']} | {s['wall_median']:.2f} | "
                     f"{s['wall_min']:.2f}-{s['wall_max']:.2f} | {s['cpu_pct_median']:.0f} | "
                     f"{s['cpu_s_median']:.2f} | {s['rss_max_mb']:.1f} | {s['sites_per_s']:,.0f} | "
                     f"{s['ratio']:.2f}x |")
    text = "\n".join(table)
    print(text)
    check = ("outputs byte-identical in every run (md5 " + next(iter(all_digests)) + ")"
             if identical else f"OUTPUTS DIFFER: {digests}")
    print(check)
    if args.no_record:
        return 0 if identical else 3
    mi = compare.machine_info()
    sizes = {p: os.path.getsize(p) for p in inputs}
    lines = [
        "", f"## snp-pileup -- {os.path.basename(args.tumour)} + {os.path.basename(args.normal)} "
        f"-- {started.strftime('%Y-%m-%d %H:%M UTC')}", "",
        "- What: `sortase snp-pileup` vs FACETS snp-pileup (mskcc/facets inst/extcode, built with "
        "g++ -O2 against Debian's htslib 1.16 with libdeflate) on a tumour/normal pair; "
        f"options: `{args.options or '(defaults)'}`. FACETS is single-threaded and piles up every "
        "covered position; sortase piles up batches of sites on -@ threads.",
        f"- Commit: {compare.git_commit()}; machine: {mi['nproc']} CPUs ({mi['cpu']}), {mi['ram']} RAM; "
        f"load average (1/5/15 min) before: {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
        f"after: {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f} (machine shared with "
        "other compiles; the benchmark itself ran under `flock /work/bench.lock`)",
        f"- Data: VCF `{args.vcf}` ({sites:,} data lines, {compare.human_bytes(sizes[args.vcf])}); "
        f"tumour `{args.tumour}` ({compare.human_bytes(sizes[args.tumour])}); normal "
        f"`{args.normal}` ({compare.human_bytes(sizes[args.normal])})",
        f"- Rounds: {args.rounds}, alternating ({' / '.join(l for l, _ in variants)}); warm page cache",
        "- Commands:",
    ] + [f"  - {label}: `{commands[label]}`" for label, _ in variants] + [
        "", text, "",
        "FACETS / variant = median wall(FACETS) / median wall(variant); sites/s = VCF data lines / "
        "median wall.  ",
        f"Check: {check}  ",
    ]
    if args.note:
        lines.append(f"Note: {args.note}  ")
    with open(compare.RESULTS_MD, "a") as f:
        f.write("\n".join(lines) + "\n")
    base = sums[-1]["wall_median"]  # ratio_vs_sortase: against sortase at the most threads
    with open(compare.RESULTS_CSV, "a", newline="") as f:
        w = csv.writer(f)
        for s in sums:
            th = s["label"].split("@")[1] if "@" in s["label"] else "1"
            w.writerow([started.strftime("%Y-%m-%dT%H:%M:%SZ"), compare.git_commit(),
                        "snp-pileup " + args.options, args.tumour + "+" + args.normal,
                        sizes[args.tumour] + sizes[args.normal], "", th, s["label"], "variant",
                        s["runs"], f"{s['wall_median']:.4f}", f"{s['wall_min']:.4f}",
                        f"{s['wall_max']:.4f}", f"{s['cpu_pct_median']:.1f}",
                        f"{s['cpu_s_median']:.3f}", f"{s['rss_max_mb']:.1f}",
                        f"{s['wall_median'] / base:.4f}",
                        "", "agree" if identical else "DIFFER", s["command"]])
    print(f"recorded: {compare.RESULTS_MD}, {compare.RESULTS_CSV}")
    return 0 if identical else 3


if __name__ == "__main__":
    sys.exit(main())
