#!/usr/bin/env python3
"""AGD operations against the same sortase and samtools commands on BAM (issue 19).

    python3 bench/agd.py [--data /work/bench-data] [--size small] [--threads 2] [--rounds 3]
                         [--sortase PATH] [--samtools PATH] [--samblaster PATH] [--cases a,b]

Setup (not timed): the input BAM (DATA/SIZE.bam, query-grouped aligner output) and its
coordinate-sorted copy (DATA/SIZE.sorted.bam) are imported into datasets in a scratch directory;
for `samtools markdup` the sorted BAM is also run through `samtools fixmate -m` (its required MC/ms
tags) once.

Each case runs its variants in alternation, --rounds times, with an untimed `sync` before each run;
per run: wall time and the children's user+sys CPU (os.wait4). Prints one markdown table per case:
median wall, median user+sys, ratio to the AGD variant (>1: AGD is faster). The machine may be
shared: CPU time is the comparable figure there; walls must be retaken on a quiet machine.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_timed(cmd):
    """Runs `cmd` (bash) and returns (wall seconds, user+sys seconds)."""
    subprocess.run(["sync"], check=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd],
                            stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed ({status}): {cmd}")
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/bench-data")
    ap.add_argument("--size", default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sortase", default="target/release/sortase")
    ap.add_argument("--samtools", default="/work/main/bench/samtools-1.24-libdeflate")
    ap.add_argument("--samblaster", default="/usr/bin/samblaster")
    ap.add_argument("--cases", default="flagstat,sort,sort-n,markdup-query,markdup-coord")
    ap.add_argument("--scratch", default=None)
    a = ap.parse_args()
    bam = os.path.join(a.data, f"{a.size}.bam")
    sorted_bam = os.path.join(a.data, f"{a.size}.sorted.bam")
    scratch = a.scratch or tempfile.mkdtemp(prefix="agd-bench-", dir=a.data)
    os.makedirs(scratch, exist_ok=True)
    s, st, t = a.sortase, a.samtools, a.threads
    ds, ds_sorted = f"{scratch}/ds", f"{scratch}/ds_sorted"
    fixmate = f"{scratch}/fixmate.sorted.bam"
    out = f"{scratch}/out"
    setup = [
        f"{s} agd import -@{t} {bam} -o {ds}",
        f"{s} agd import -@{t} {sorted_bam} -o {ds_sorted}",
        f"{st} sort -n -@{t} -u {sorted_bam} | {st} fixmate -m -u - - "
        f"| {st} sort -@{t} -o {fixmate} -",
    ]
    for cmd in setup:
        subprocess.run(["bash", "-o", "pipefail", "-c", cmd], check=True)
    clean = f"rm -rf {out} {out}.bam"
    cases = {
        "flagstat": [
            ("agd flagstat", f"{s} agd flagstat -@{t} {ds}"),
            ("sortase flagstat", f"{s} flagstat -@{t} {bam}"),
            ("samtools flagstat", f"{st} flagstat -@{t} {bam}"),
        ],
        "sort": [
            ("agd sort", f"{clean}; {s} agd sort -@{t} {ds} -o {out}"),
            ("sortase sort", f"{clean}; {s} sort -@{t} -o {out}.bam {bam}"),
            ("samtools sort", f"{clean}; {st} sort -@{t} -o {out}.bam {bam}"),
        ],
        "sort-n": [
            ("agd sort -n", f"{clean}; {s} agd sort -n -@{t} {ds_sorted} -o {out}"),
            ("sortase sort -n", f"{clean}; {s} sort -n -@{t} -o {out}.bam {sorted_bam}"),
            ("samtools sort -n", f"{clean}; {st} sort -n -@{t} -o {out}.bam {sorted_bam}"),
        ],
        "markdup-query": [
            ("agd markdup (samblaster)", f"{s} agd markdup -q -@{t} {ds}"),
            ("sortase markdup (samblaster)", f"{clean}; {s} markdup -q -@{t} -o {out}.bam {bam}"),
            ("samblaster (samtools view | samblaster | samtools view -b)",
             f"{clean}; {st} view -h -@1 {bam} | {a.samblaster} -q "
             f"| {st} view -b -@1 -o {out}.bam -"),
        ],
        "markdup-coord": [
            ("agd markdup (Picard)", f"{s} agd markdup -@{t} {ds_sorted}"),
            ("sortase markdup (Picard)", f"{clean}; {s} markdup -@{t} -o {out}.bam {sorted_bam}"),
            ("samtools markdup (fixmate'd input)",
             f"{clean}; {st} markdup -@{t} {fixmate} {out}.bam"),
        ],
    }
    for name in a.cases.split(","):
        variants = cases[name]
        walls = {v: [] for v, _ in variants}
        cpus = {v: [] for v, _ in variants}
        for _ in range(a.rounds):
            for label, cmd in variants:
                w, c = run_timed(cmd)
                walls[label].append(w)
                cpus[label].append(c)
        subprocess.run(["bash", "-c", clean], check=True)
        base = variants[0][0]
        bw, bc = statistics.median(walls[base]), statistics.median(cpus[base])
        print(f"\n### {name} ({a.size}, -@{t}, {a.rounds} rounds)\n")
        print("| variant | wall s (median) | user+sys s (median) | wall / AGD | CPU / AGD |")
        print("|---|---:|---:|---:|---:|")
        for label, _ in variants:
            w, c = statistics.median(walls[label]), statistics.median(cpus[label])
            print(f"| {label} | {w:.2f} | {c:.2f} | {w / bw:.2f} | {c / bc:.2f} |")
        sys.stdout.flush()
    if not a.scratch:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
