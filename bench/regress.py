#!/usr/bin/env python3
"""Regression guard (issue 31): the same jobs with the sortase of a stored baseline commit and with
this checkout's, in alternating rounds, reporting NEW/OLD wall-time ratios and checking that both
write the same output.

    python3 bench/regress.py BASE [--size small|large] [--threads 2] [--rounds 5] [--jobs a,b]
    python3 bench/compare.py --regress BASE [...]            # the same

BASE is any commit (e.g. 93a6c37, the end of wave 1). Its binary is built once, in its own worktree
and target directory under DATA/regress/ (`cargo build --release --bin sortase`), and reused; the new
binary is --new (default target/release/sortase of this checkout, built if missing). Give --old to
time an already built baseline binary instead.

The jobs are the ones issue 31 found slower: flagstat, view -c, sort in memory at -l 6 and at the
default level, markdup -u on query-grouped input. Each round runs OLD then NEW (alternating which goes
first), an untimed `sync` before each run; the reported ratio is the median of the per-round NEW/OLD
ratios, so a drift of the machine's speed between rounds cancels. Outputs (stdout for the counting
jobs, the output file's bytes for the others, written with --no-PG) must be equal, or the job is
reported as DIFFER and the exit status is 1. A ratio above --fail-above (default 1.05) also exits 1:
a timing is only a verdict on a quiet machine, so run it on one, never as a test.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

JOBS = {
    "flagstat": ("stdout", "{bin} flagstat -@{threads} {sorted}"),
    "view-c": ("stdout", "{bin} view -c -@{threads} {sorted}"),
    "sort-l6": ("file", "{bin} sort --no-PG -l 6 -m 2G -@{threads} -o {out} {input}"),
    "sort": ("file", "{bin} sort --no-PG -m 2G -@{threads} -o {out} {input}"),
    "sort-n": ("file", "{bin} sort --no-PG -n -m 2G -@{threads} -o {out} {input}"),
    "markdup-u": ("file", "{bin} markdup --no-PG -q -u -@{threads} -o {out} {input}"),
}


def build_baseline(base: str, data: Path) -> Path:
    """The sortase binary of commit `base`, built once in its own worktree and target directory."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", base], check=True,
                            capture_output=True, text=True).stdout.strip()
    tree = data / "regress" / commit
    binary = tree / "target" / "release" / "sortase"
    if binary.exists():
        return binary
    if not tree.exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
                       check=True)
    print(f"regress: building sortase at {commit} in {tree}", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "--bin", "sortase"], cwd=tree, check=True)
    return binary


def digest_of(kind: str, stdout: bytes, out: Path) -> str:
    data = stdout if kind == "stdout" else out.read_bytes()
    return hashlib.sha256(data).hexdigest()[:16]


def run_once(cmd: list[str], kind: str, out: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds of one run, and a digest of what it wrote."""
    subprocess.run(["sync"], check=False)
    out.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"regress: {' '.join(cmd)} failed ({run.returncode}): "
                         f"{run.stderr.decode(errors='replace').strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, digest_of(kind, run.stdout, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="baseline commit (e.g. 93a6c37)")
    ap.add_argument("--data", default="/work/bench-data", help="data dir of bench/generate.py")
    ap.add_argument("--size", default="small", help="tiny|small|large (default small)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    ap.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {','.join(JOBS)}")
    ap.add_argument("--old", help="a baseline binary (skips building BASE)")
    ap.add_argument("--new", default=str(ROOT / "target" / "release" / "sortase"))
    ap.add_argument("--fail-above", type=float, default=1.05,
                    help="exit 1 if a median NEW/OLD ratio is above this (default 1.05)")
    ap.add_argument("--step", action="append", default=[], metavar="LABEL=BINARY",
                    help="bisect mode: time these binaries too (repeatable), each round in a "
                         "rotated order, and print each one's median ratio to OLD per job")
    args = ap.parse_args(argv)

    data = Path(args.data)
    fields = {"threads": args.threads, "input": data / f"{args.size}.bam",
              "sorted": data / f"{args.size}.sorted.bam"}
    for name in ("input", "sorted"):
        if not Path(fields[name]).exists():
            raise SystemExit(f"regress: {fields[name]} is missing; make it with "
                             f"`python3 bench/generate.py --size {args.size}`")
    old = Path(args.old) if args.old else build_baseline(args.base, data)
    new = Path(args.new)
    if not new.exists():
        subprocess.run(["cargo", "build", "--release", "--bin", "sortase"], cwd=ROOT, check=True)
    scratch = data / "regress" / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    jobs = [j for j in args.jobs.split(",") if j]
    unknown = [j for j in jobs if j not in JOBS]
    if unknown:
        raise SystemExit(f"regress: unknown job(s) {unknown}; known: {', '.join(JOBS)}")

    if args.step:
        steps = [("OLD", old)] + [tuple(s.split("=", 1)) for s in args.step] + [("NEW", new)]
        return bisect(steps, jobs, fields, scratch, args.rounds)

    print(f"| job | OLD wall (median) | NEW wall (median) | NEW/OLD (median of {args.rounds} "
          f"rounds) | OLD CPU-s | NEW CPU-s | outputs |")
    print("|---|---|---|---|---|---|---|")
    status = 0
    for job in jobs:
        kind, template = JOBS[job]
        times: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
        digests: dict[str, set[str]] = {"old": set(), "new": set()}
        ratios = []
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            got = {}
            for who in order:
                binary = old if who == "old" else new
                out = scratch / f"{job}.{who}.bam"
                cmd = template.format(bin=binary, out=out, **fields).split()
                wall, cpu, digest = run_once(cmd, kind, out)
                out.unlink(missing_ok=True)
                times[who].append((wall, cpu))
                digests[who].add(digest)
                got[who] = wall
            ratios.append(got["new"] / got["old"])
        same = len(digests["old"] | digests["new"]) == 1
        ratio = statistics.median(ratios)
        med = {w: statistics.median(t[0] for t in times[w]) for w in times}
        cpu = {w: statistics.median(t[1] for t in times[w]) for w in times}
        print(f"| {job} | {med['old']:.3f} s | {med['new']:.3f} s | {ratio:.3f} | "
              f"{cpu['old']:.2f} | {cpu['new']:.2f} | {'same' if same else 'DIFFER'} |", flush=True)
        if not same or ratio > args.fail_above:
            status = 1
    print(f"\nOLD {old} ({args.base}); NEW {new}; data {fields['input']} ({args.size}); "
          f"{args.threads} threads; {os.cpu_count()} cores")
    return status


def bisect(steps: list[tuple[str, str]], jobs: list[str], fields: dict, scratch: Path,
           rounds: int) -> int:
    """Every binary of `steps` (OLD first, NEW last) on every job, each round in a rotated order;
    prints a table of each step's median per-round ratio to OLD. Exit 1 if outputs differ."""
    labels = [label for label, _ in steps]
    print(f"| job | OLD wall (median) | " + " | ".join(f"{l}/OLD" for l in labels[1:]) +
          f" | outputs |  (median of {rounds} rounds)")
    print("|---|---|" + "---|" * (len(steps) - 1) + "---|")
    status = 0
    for job in jobs:
        kind, template = JOBS[job]
        walls: dict[str, list[float]] = {label: [] for label in labels}
        digests = set()
        for r in range(rounds):
            k = r % len(steps)
            for label, binary in steps[k:] + steps[:k]:
                out = scratch / f"{job}.step.bam"
                cmd = template.format(bin=binary, out=out, **fields).split()
                wall, _cpu, digest = run_once(cmd, kind, out)
                out.unlink(missing_ok=True)
                walls[label].append(wall)
                digests.add(digest)
        base = walls["OLD"]
        ratios = [statistics.median(w / b for w, b in zip(walls[l], base)) for l in labels[1:]]
        same = len(digests) == 1
        status |= not same
        print(f"| {job} | {statistics.median(base):.3f} s | " +
              " | ".join(f"{x:.3f}" for x in ratios) + f" | {'same' if same else 'DIFFER'} |",
              flush=True)
    for label, binary in steps:
        print(f"{label}: {binary}")
    return status


if __name__ == "__main__":
    sys.exit(main())
