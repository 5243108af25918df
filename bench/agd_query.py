#!/usr/bin/env python3
"""AGD dataset benchmarks (issue 19), side by side with samtools 1.24 (libdeflate):

    python3 bench/agd_query.py [--data /work/bench-data] [--size small] [--threads 2] [--pairs 3]
                         [--sortase target/release/sortase] [--record]

1. sizes: `sortase agd import` of SIZE.sorted.bam; the dataset's bytes per column group next to
   the BAM and the CRAM (SIZE.sorted.cram); import CPU time;
2. counting `-q 30`: DuckDB `SELECT count(*) FROM 'ds/results/*.parquet' WHERE mapq >= 30`,
   `samtools view -c -q 30 -@T` on the BAM, `sortase view -c -q 30` on the BAM, `sortase agd view -c
   -q 30` on the dataset: the counts must be equal;
3. regions: `samtools view -@T BAM REGION` vs `sortase agd view -@T DS REGION` (SAM to a file;
   outputs compared), one small region inside a chunk and one of a whole reference.

Each command runs --pairs times in alternation under `/usr/bin/time` (wall, user+sys CPU). The
machine may be shared: CPU time is the figure to compare; wall must be re-taken on a quiet machine.
With --record the markdown section is appended to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMTOOLS = "/work/main/bench/samtools-1.24-libdeflate"


def timed(cmd: list, out: Path | None = None) -> tuple:
    """Runs `cmd` (stdout to `out` or captured); returns (wall s, user+sys s, stdout bytes)."""
    with tempfile.NamedTemporaryFile("r") as t:
        full = ["/usr/bin/time", "-f", "%U %S", "-o", t.name, *cmd]
        start = time.perf_counter()
        if out is not None:
            with open(out, "wb") as f:
                subprocess.run(full, check=True, stdout=f)
            stdout = b""
        else:
            stdout = subprocess.run(full, check=True, capture_output=True).stdout
        wall = time.perf_counter() - start
        user, sys_ = (float(x) for x in t.read().split()[-2:])
    return wall, user + sys_, stdout


def rounds(variants: list, pairs: int) -> list:
    """Runs each (label, cmd, out) `pairs` times in alternation; per variant: label, median wall,
    median CPU, last stdout, out."""
    runs: dict = {label: [] for label, _, _ in variants}
    last: dict = {}
    for _ in range(pairs):
        for label, cmd, out in variants:
            wall, cpu, stdout = timed(cmd, out)
            runs[label].append((wall, cpu))
            last[label] = stdout
    return [(label, statistics.median(w for w, _ in runs[label]),
             statistics.median(c for _, c in runs[label]), last[label], out)
            for label, _, out in variants]


def md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/work/bench-data")
    ap.add_argument("--size", default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--sortase", default=str(ROOT / "target" / "release" / "sortase"))
    ap.add_argument("--regions", nargs="*", default=["chr5:1000000-1010000", "chr2"])
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    data, t = Path(args.data), str(args.threads)
    bam, cram = data / f"{args.size}.sorted.bam", data / f"{args.size}.sorted.cram"
    scratch = Path(tempfile.mkdtemp(prefix="agd-bench-", dir=data))
    lines = []
    try:
        ds = scratch / "ds"
        wall, cpu, _ = timed([args.sortase, "agd", "import", "-@", t, str(bam), "-o", str(ds)])
        groups = {g: sum(f.stat().st_size for f in (ds / g).iterdir())
                  for g in ("names", "bases", "qual", "results")}
        total = sum(groups.values()) + (ds / "manifest.json").stat().st_size
        mb = lambda n: f"{n / 1e6:.2f} MB"  # noqa: E731
        lines += [
            f"## AGD view, counts and sizes ({args.size}.sorted.bam; {time.strftime('%Y-%m-%d')}, "
            f"-@{t}, {args.pairs} alternating rounds, medians)",
            "",
            f"`{Path(args.sortase).relative_to(ROOT) if args.sortase.startswith(str(ROOT)) else args.sortase}`"
            f" vs samtools 1.24 (libdeflate). The machine was shared: compare CPU (user+sys); wall "
            "must be re-taken on a quiet machine.",
            "",
            "| | bytes | of which |",
            "|---|---:|---|",
            f"| AGD dataset | {mb(total)} | " + ", ".join(f"{g} {mb(b)}" for g, b in groups.items())
            + f"; manifest {(ds / 'manifest.json').stat().st_size} B |",
            f"| BAM | {mb(bam.stat().st_size)} | |",
        ]
        if cram.exists():
            lines.append(f"| CRAM (samtools 1.24, ref.fa) | {mb(cram.stat().st_size)} | |")
        lines += ["", f"Import: {wall:.2f} s wall, {cpu:.2f} s user+sys.", ""]

        duck = ("import duckdb,sys; print(duckdb.sql(\"SELECT count(*) FROM '\" + sys.argv[1] + "
                "\"/results/*.parquet' WHERE mapq >= 30\").fetchall()[0][0])")
        variants = [
            ("sortase agd view -c -q 30 DS", [args.sortase, "agd", "view", "-@", t, "-c", "-q", "30", str(ds)], None),
            ("DuckDB count(*) WHERE mapq >= 30 (python3, incl. import)", [sys.executable, "-c", duck, str(ds)], None),
            ("samtools view -c -q 30 BAM", [SAMTOOLS, "view", "-@", t, "-c", "-q", "30", str(bam)], None),
            ("sortase view -c -q 30 BAM", [args.sortase, "view", "-@", t, "-c", "-q", "30", str(bam)], None),
        ]
        res = rounds(variants, args.pairs)
        counts = {r[3].strip() for r in res}
        lines += ["| count -q 30 | wall | user+sys | count |", "|---|---:|---:|---:|"]
        lines += [f"| {label} | {w:.2f} s | {c:.2f} s | {o.decode().strip()} |" for label, w, c, o, _ in res]
        lines += ["", f"Counts equal: {len(counts) == 1}.", ""]
        if len(counts) != 1:
            print("\n".join(lines))
            return 1

        lines += ["| region | command | wall | user+sys | records | same output |",
                  "|---|---|---:|---:|---:|---|"]
        for region in args.regions:
            ours, theirs = scratch / "ours.sam", scratch / "theirs.sam"
            variants = [
                ("sortase agd view", [args.sortase, "agd", "view", "-@", t, str(ds), region], ours),
                ("samtools view", [SAMTOOLS, "view", "-@", t, str(bam), region], theirs),
            ]
            res = rounds(variants, args.pairs)
            same = md5(ours) == md5(theirs)
            n = sum(1 for _ in open(theirs, "rb"))
            lines += [f"| `{region}` | {label} | {w:.3f} s | {c:.3f} s | {n} | {same} |"
                      for label, w, c, _, _ in res]
            if not same:
                print("\n".join(lines))
                return 1
        lines.append("")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        with open(ROOT / "bench" / "RESULTS.md", "a") as f:
            f.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
