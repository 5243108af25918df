#!/usr/bin/env python3
"""Issue 33's frontier table and plot: sortase against mako, dupblaster and polars-bio (and samtools
with libdeflate where it does the job), from the rows compare.py and python_read.py --record stored
in bench/results.csv. Runs nothing: it reads the newest run of each case on each input.

    python3 bench/frontier.py [--csv bench/results.csv] [--input SUBSTRING] [--png bench/report/frontier.png]

Prints a markdown table (job, data, sortase s, peer, peer s, ratio) and draws the ratios as bars (one
bar per job and peer; > 1: sortase is faster). A job whose newest run lacks a peer row is left out of
both, so the plot and the table always hold the same rows (tests/test_bench_report checks it).
"""
import argparse
import csv
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))

# (case, the job's name in the table, sortase's label, [(peer label, shown as)])
JOBS = [
    ("sort-mako", "sort in memory -l 6", "sortase", [("mako", "mako"), ("samtools-1.24", "samtools")]),
    ("sort-mako-ooc", "sort 1/20 memory -l 6", "sortase", [("mako", "mako"), ("samtools-1.24", "samtools")]),
    ("sort-mako-l1", "sort in memory -l 1", "sortase", [("mako", "mako"), ("samtools-1.24", "samtools")]),
    ("sort-n-mako", "sort -n in memory -l 6", "sortase", [("mako", "mako"), ("samtools-1.24", "samtools")]),
    ("sort-tc-mako", "sort --template-coordinate in memory -l 6", "sortase",
     [("mako", "mako"), ("samtools-1.24", "samtools")]),
    ("markdup-dupblaster-u", "markdup query-grouped -u", "sortase", [("dupblaster", "dupblaster")]),
    ("markdup-dupblaster", "markdup query-grouped -l 6", "sortase", [("dupblaster", "dupblaster")]),
    ("python-read", "read_bam 5 columns", "sortase-proj", [("pb-proj", "polars-bio")]),
    ("python-read", "read_bam all columns", "sortase-all", [("pb-all", "polars-bio")]),
    ("python-read-region", "region + mapq filter", "sortase-region", [("pb-region", "polars-bio")]),
]


def newest_runs(rows, input_filter):
    """case -> the rows of its newest run (same date_utc) whose input contains input_filter."""
    out = {}
    for r in rows:
        if input_filter and input_filter not in r["input"]:
            continue
        case = r["case"]
        if case not in out or r["date_utc"] > out[case][0]["date_utc"]:
            out[case] = [r]
        elif r["date_utc"] == out[case][0]["date_utc"]:
            out[case].append(r)
    return out


def table(rows, input_filter):
    runs = newest_runs(rows, input_filter)
    lines = []
    for case, job, own, peers in JOBS:
        run = {r["label"]: r for r in runs.get(case, [])}
        if own not in run:
            continue
        for peer, shown in peers:
            if peer not in run:
                continue
            s, p = float(run[own]["wall_median_s"]), float(run[peer]["wall_median_s"])
            recs = run[own]["records"]
            name = os.path.join(*run[own]["input"].split(os.sep)[-2:])
            lines.append(dict(job=job, data=f"{name}, {int(recs):,} records" if recs else name,
                              sortase=s, peer=shown, peer_s=p, ratio=p / s,
                              date=run[own]["date_utc"], commit=run[own]["commit"],
                              cpu=(float(run[own]["cpu_s_median"]), float(run[peer]["cpu_s_median"])),
                              rss=(float(run[own]["rss_max_mib"]), float(run[peer]["rss_max_mib"]))))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default=os.path.join(BENCH, "results.csv"))
    ap.add_argument("--input", default="", help="only runs whose input path contains this")
    ap.add_argument("--png", default=os.path.join(BENCH, "report", "frontier.png"))
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    lines = table(rows, a.input)
    if not lines:
        sys.exit(f"{a.csv}: no frontier runs (compare.py sort-mako ..., python_read.py --record)")
    print("| job | data | sortase (s) | peer | peer (s) | ratio | CPU s sortase / peer | RSS MiB sortase / peer | run |")
    print("|---|---|---:|---|---:|---:|---:|---:|---|")
    for l in lines:
        print(f"| {l['job']} | {l['data']} | {l['sortase']:.2f} | {l['peer']} | {l['peer_s']:.2f} | "
              f"{l['ratio']:.2f}x | {l['cpu'][0]:.1f} / {l['cpu'][1]:.1f} | "
              f"{l['rss'][0]:.0f} / {l['rss'][1]:.0f} | {l['date']} {l['commit']} |")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colours = {"mako": "#3b7dd8", "samtools": "#999999", "dupblaster": "#d8823b", "polars-bio": "#7b3bd8"}
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(lines) + 1.4))
    labels = [f"{l['job']} vs {l['peer']}" for l in lines][::-1]
    ratios = [l["ratio"] for l in lines][::-1]
    ax.barh(labels, ratios, color=[colours.get(l["peer"], "#555555") for l in lines][::-1])
    for y, r in enumerate(ratios):
        ax.text(r, y, f" {r:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("peer wall time / sortase wall time (>1: sortase faster)")
    ax.set_title(f"sortase against the 2026 frontier; 2 threads; {lines[0]['data']}", fontsize=10)
    ax.set_xlim(0, max(ratios) * 1.15)
    fig.tight_layout()
    os.makedirs(os.path.dirname(a.png), exist_ok=True)
    # The rows it draws, for python/tests/test_bench_report.py to compare with RESULTS.md's table.
    jobs = ",".join(f"{l['job']} vs {l['peer']}" for l in lines)
    fig.savefig(a.png, dpi=100, metadata={"Description": f"jobs: {jobs}"})
    print(f"\nplot: {a.png} ({len(lines)} bars)")


if __name__ == "__main__":
    main()
