#!/usr/bin/env python3
"""The Dask engine's overhead (issue 18): distributed sort on a LocalCluster of 2 worker processes
x 1 thread against single-process `sortase sort -@2` of the same input with the same options,
side by side, plus a model that projects the distributed sort onto 8, 32 and 64 machines.

    python3 bench/dask_overhead.py [--input /work/bench-data/small.bam] [--rounds 2]
                                   [--task-memory 128M] [--no-record] ...

The large data (the lead's run, on a quiet machine; about 2 x 2 x 1 min):

    python3 bench/dask_overhead.py --input /work/bench-data/large.bam --rounds 2 \\
        --task-memory 512M --note "quiet machine"

Procedure: one standing LocalCluster(n_workers=2, threads_per_worker=1, processes=True) is
started first (its start-up is reported, not charged to the sort: a cluster is up before jobs
arrive); one untimed `cat` of the input warms the page cache; then --rounds rounds, each running
both variants in alternating order (A B, then B A, ...) with an untimed `sync` before each run:

  - distributed: `sortase.distributed.sort(input, out, client=..., write_index=True, no_pg=True,
    task_memory=...)`; wall time around the call; CPU = user+sys of the worker processes
    (`Client.run(getrusage)`) plus the driver process (which also hosts the scheduler);
    the report's per-phase wall seconds, task wall and CPU seconds and bytes read/written;
  - single: `sortase sort -@2 --no-PG --write-index -o out input` under `/usr/bin/time`.

Both outputs and indexes must be byte-identical (SHA-256) in every round, else the script fails.
The medians go to a markdown section appended to bench/RESULTS-archive.md (unless --no-record), with the
MODEL: from the measured per-phase CPU seconds and bytes moved per input byte, the wall time of a
--model-gb BAM (default 100 GB: a 30x genome) on N machines of --cores cores, each with a
--node-gbit NIC, on shared storage of --storage-gbs GB/s aggregate, with --sched-ms of scheduler
time per task. Each distributed phase takes max(CPU / usable cores, bytes / (N x NIC),
bytes / storage) + scheduler time + one task (the last wave); usable cores are at most the
phase's tasks at --model-task-memory. The driver's phases (plan, finish: concatenating the parts
into the output) run on one machine: max(CPU, 2 x output / NIC, 2 x output / storage).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
from compare import RESULTS_MD, git_commit, human_bytes, machine_info  # noqa: E402



def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def size_bytes(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def rusage_seconds() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def workers_cpu(client) -> float:
    return sum(client.run(rusage_seconds).values())


#: The jobs: what the distributed call and the single-process command are, and the index file
#: each writes next to its output (markdup's distributed job writes none).
JOBS = ("sort", "markdup-query", "markdup-coordinate", "fq2bam", "fq2bam-picard")


def index_of(args, out: str):
    return None if args.job.startswith("markdup") else out + ".csi"


def run_distributed(client, args, out: str) -> dict:
    from sortase import distributed

    subprocess.run(["sync"], check=True)
    cpu0 = workers_cpu(client) + rusage_seconds()
    start = time.perf_counter()
    common = dict(client=client, no_pg=True, task_memory=args.task_memory, progress=False)
    if args.job == "sort":
        report = distributed.sort(args.input, out, write_index=True, **common)
    elif args.job.startswith("markdup"):
        report = distributed.markdup(args.input, out, mode=args.job.split("-")[1], **common)
    else:
        report = distributed.fq2bam(args.index, *args.reads, out, write_index=True,
                                    threads=args.threads, scan_bytes=args.scan_bytes,
                                    markdup="picard" if args.job == "fq2bam-picard" else "samblaster",
                                    **common)
    wall = time.perf_counter() - start
    cpu = workers_cpu(client) + rusage_seconds() - cpu0
    idx = index_of(args, out)
    return {"wall": wall, "cpu": cpu, "report": report,
            "sha": [sha256(out)] + ([sha256(idx)] if idx else []), "out_bytes": os.path.getsize(out)}


def single_command(args, out: str, scratch: str) -> list:
    temp = ["-T", os.path.join(scratch, "single-tmp")]
    if args.job == "sort":
        return [args.sortase, "sort", f"-@{args.threads}", "--no-PG", "--write-index", *temp,
                "-o", out, args.input]
    if args.job.startswith("markdup"):
        return [args.sortase, "markdup", "--mode", args.job.split("-")[1], f"-@{args.threads}",
                "--no-PG", *temp, "-o", out, args.input]
    marking = "picard" if args.job == "fq2bam-picard" else "samblaster"
    return [args.sortase, "fq2bam", f"-@{args.threads}", "-x", args.index, "--markdup", marking,
            "--write-index", "--no-PG", *temp, "-o", out, *args.reads]


def run_single(args, out: str, scratch: str) -> dict:
    subprocess.run(["sync"], check=True)
    timing = os.path.join(scratch, "time.txt")
    cmd = single_command(args, out, scratch)
    start = time.perf_counter()
    subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", timing, *cmd], check=True)
    wall = time.perf_counter() - start
    user, sys_, rss = open(timing).read().split()[-3:]
    idx = index_of(args, out)
    return {"wall": wall, "cpu": float(user) + float(sys_), "rss_mib": int(rss) / 1024,
            "sha": [sha256(out)] + ([sha256(idx)] if idx else []), "cmd": " ".join(cmd)}


def phase_medians(runs: list) -> list:
    """Per phase (in report order): medians over rounds of each numeric field."""
    names = [p["name"] for p in runs[0]["report"]["distributed"]["phases"]]
    table = []
    for i, name in enumerate(names):
        rows = [r["report"]["distributed"]["phases"][i] for r in runs]
        keys = sorted({k for row in rows for k in row if k != "name"})
        table.append({"name": name, **{k: statistics.median(row.get(k, 0) for row in rows)
                                       for k in keys}})
    return table


def is_distributed(p: dict) -> bool:
    """A phase of tasks on the workers, even with no tasks this time (an fq2bam's `split` on
    BGZF reads); the rest (plan, layout, finish, ...) run on the driver."""
    return "tasks" in p


def affine(x1: float, y1: float, x2: float, y2: float) -> tuple:
    """(fixed, per unit) of the line through two measurements, neither negative: a smaller
    measurement at the larger size (noise) gives the larger one as a fixed cost only; a line
    through zero and the larger point when the fixed part would be negative."""
    if x1 > x2:
        x1, y1, x2, y2 = x2, y2, x1, y1
    slope = max(0.0, (y2 - y1) / (x2 - x1)) if x2 > x1 else 0.0
    if slope == 0.0:
        return max(y1, y2), 0.0  # the larger of the two as a fixed cost
    fixed = y2 - slope * x2
    if fixed < 0:
        return 0.0, y2 / x2
    return fixed, slope


def least_squares(rows: list, ys: list) -> list:
    """Coefficients c (one per column of `rows`) minimising |rows c - ys|, by the normal
    equations (a handful of runs and at most three terms)."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * y for r, y in zip(rows, ys))]
         for i in range(n)]
    for i in range(n):  # Gauss-Jordan with partial pivoting
        p = max(range(i, n), key=lambda r: abs(a[r][i]))
        a[i], a[p] = a[p], a[i]
        if a[i][i] == 0:
            return [0.0] * n
        for r in range(n):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * y for x, y in zip(a[r], a[i])]
    return [a[i][n] / a[i][i] for i in range(n)]


def segment_fit(runs: list) -> tuple:
    """(fixed, per input byte, per index segment) of a layout's CPU seconds over `runs`
    ((input bytes, segments, CPU s)), none negative: a term whose fitted cost is negative (noise)
    is dropped and the rest refitted."""
    terms = [0, 1, 2]
    while True:
        rows = [[(1.0, b, s)[t] for t in terms] for b, s, _ in runs]
        coef = least_squares(rows, [c for _, _, c in runs])
        if all(c >= 0 for c in coef) or len(terms) == 1:
            full = [0.0, 0.0, 0.0]
            for t, c in zip(terms, coef):
                full[t] = max(0.0, c)
            return tuple(full)
        terms.pop(min(range(len(terms)), key=lambda i: coef[i]))


def driver_fits(phases: list, input_bytes: int, others: list) -> dict:
    """Per driver phase found in every run: (fixed, per input byte) of its CPU seconds and of
    its bytes, from this run and `others` (the same job's phases at other input sizes). A phase
    that reports `index_segments` in three runs or more (the sort's layout) also gets a cost per
    segment (`segments`: fixed, per byte, per segment), as its index work grows with the
    segments (runs of one bin: with the genome's length and the coverage's depth, not the
    bytes)."""
    if not others:
        return {}
    fits = {}
    for p in phases:
        qs = [next((q for q in o["phases"] if q["name"] == p["name"]), None) for o in others]
        if is_distributed(p) or None in qs:
            continue
        cpu = lambda x: x.get("cpu_seconds", x["seconds"])  # noqa: E731
        moved = lambda x: x.get("bytes_read", 0) + x.get("bytes_written", 0)  # noqa: E731
        # The two runs furthest apart in size for the affine fits.
        pairs = [(input_bytes, p)] + [(o["input_bytes"], q) for o, q in zip(others, qs)]
        (b1, x1), (b2, x2) = min(pairs, key=lambda t: t[0]), max(pairs, key=lambda t: t[0])
        fits[p["name"]] = {"cpu": affine(b1, cpu(x1), b2, cpu(x2)),
                           "bytes": affine(b1, moved(x1), b2, moved(x2))}
        if len(pairs) >= 2 and all("index_segments" in x for _, x in pairs):
            # Three runs or more: fixed + per byte + per segment; two: fixed + per segment.
            runs = [(b, x["index_segments"], cpu(x)) for b, x in pairs]
            if len(runs) >= 3:
                fits[p["name"]]["segments"] = segment_fit(runs)
            else:
                fixed, per_segment = affine(runs[0][1], runs[0][2], runs[1][1], runs[1][2])
                fits[p["name"]]["segments"] = (fixed, 0.0, per_segment)
    return fits


def model(phases: list, input_bytes: int, out_bytes: int, args, fits: Optional[dict] = None
          ) -> tuple:
    """Projected wall seconds per machine count, and what bounds each phase.

    Assumptions (each named in the report): every figure scales linearly with the input (CPU
    seconds, bytes, the number of tasks at --model-task-memory); a task phase takes
    max(CPU / usable cores, bytes / (machines x NIC), bytes / storage) + scheduler time per task
    + one task (its last wave); a driver phase takes its measured CPU and its measured bytes
    over one NIC (the finish's layout reads the parts' sidecars and writes the index: no part's
    bytes pass through the driver since the parallel finish). With `fits` (two input sizes,
    `driver_fits`) a driver phase is fixed + per-byte cost at the projected size instead of
    linear in the input."""
    fits = fits or {}
    k = args.model_gb * 1e9 / input_bytes
    model_bytes = args.model_gb * 1e9
    node_bw = args.node_gbit * 1e9 / 8
    storage_bw = args.storage_gbs * 1e9
    task_scale = k * size_bytes(args.task_memory) / size_bytes(args.model_task_memory)
    rows = []
    for n in [1] + args.machines:
        total, parts = 0.0, []
        for p in phases:
            moved = k * (p.get("bytes_read", 0) + p.get("bytes_written", 0))
            if is_distributed(p) and p["tasks"] == 0:
                parts.append((p["name"], 0.0, "no tasks"))
                continue
            if is_distributed(p):
                tasks = max(1, math.ceil(p["tasks"] * task_scale))
                cpu = k * p.get("task_cpu_seconds", p.get("task_seconds", 0))
                terms = {
                    "CPU": cpu / min(n * args.cores, tasks),
                    "NIC": moved / (n * node_bw),
                    "storage": moved / storage_bw,
                }
                bound = max(terms, key=terms.get)
                t = terms[bound] + tasks * args.sched_ms / 1e3 + cpu / tasks
            else:
                cpu = k * p.get("cpu_seconds", p["seconds"])
                fit = fits.get(p["name"])
                if fit is not None:
                    cpu = fit["cpu"][0] + fit["cpu"][1] * model_bytes
                    moved = fit["bytes"][0] + fit["bytes"][1] * model_bytes
                    if "segments" in fit:
                        segments = (args.model_segments if args.model_segments is not None
                                    else k * p.get("index_segments", 0))
                        a, b, c = fit["segments"]
                        cpu = a + b * model_bytes + c * segments
                terms = {"driver CPU": cpu, "driver NIC": moved / node_bw,
                         "storage": moved / storage_bw}
                bound = max(terms, key=terms.get)
                t = terms[bound]
                bound = f"driver: {bound}"
            total += t
            parts.append((p["name"], t, bound))
        rows.append((n, total, parts))
    return rows, k


def reading(rows: list, phases: list, input_bytes: int, args) -> str:
    """The model's conclusions in words, from its numbers."""
    driver = {p["name"] for p in phases if not is_distributed(p)}
    last, total, parts = rows[-1]
    base = rows[0][1]
    worst = max((x for x in parts if x[0] in driver), key=lambda x: x[1], default=None)
    cpu = sum(p.get("task_cpu_seconds", 0) for p in phases if is_distributed(p))
    moved = sum(p.get("bytes_read", 0) + p.get("bytes_written", 0)
                for p in phases if is_distributed(p))
    text = (f"Reading: the stages are barriers, so the projection is their sum. The tasks move "
            f"{moved / input_bytes:.1f}x the input through shared storage and burn "
            f"{cpu / (input_bytes / 1e9):.0f} CPU s per input GB. On {last} machines the "
            f"projection is {total:.0f} s, {base / total:.1f}x one machine.")
    if worst is not None:
        share = worst[1] / total
        text += (f" The largest single-node phase is `{worst[0]}` ({worst[1]:.1f} s, "
                 f"{share:.1%} of the wall on {last} machines; goal: at most 10%: "
                 f"{'met' if share <= 0.10 else 'NOT met'}).")
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", choices=JOBS, default="sort",
                    help="the job: sort (aligner-order input), markdup-query (query-grouped "
                    "input), markdup-coordinate (coordinate-sorted input), fq2bam and "
                    "fq2bam-picard (--index and --reads) [%(default)s]")
    ap.add_argument("--input", default="/work/bench-data/small.bam", help="the BAM [%(default)s]")
    ap.add_argument("--index", default="/work/bench-data/ref.sr.mmi",
                    help="fq2bam: minimap2 index [%(default)s]")
    ap.add_argument("--reads", nargs=2, default=["/work/bench-data/work-small/R1.fq",
                                                  "/work/bench-data/work-small/R2.fq"],
                    help="fq2bam: R1 and R2 [%(default)s]")
    ap.add_argument("--scan-bytes", default=None,
                    help="fq2bam on BGZF reads: compressed bytes per scan task [64M]")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds [%(default)s]")
    ap.add_argument("--task-memory", default="128M",
                    help="distributed map task memory: sets the number of map tasks [%(default)s]")
    ap.add_argument("--threads", type=int, default=2, help="single-process -@ and the cluster's "
                    "worker processes (1 thread each) [%(default)s]")
    ap.add_argument("--sortase", default=os.path.join(REPO, "target", "release", "sortase"),
                    help="the CLI [%(default)s]")
    ap.add_argument("--scratch", default=None, help="scratch directory [next to the input]")
    ap.add_argument("--note", default=None, help="a note for the results section")
    ap.add_argument("--no-record", action="store_true", help="do not append to bench/RESULTS-archive.md")
    ap.add_argument("--save-phases", default=None, metavar="JSON",
                    help="write the input size and the per-phase medians here (for --fit-with)")
    ap.add_argument("--fit-with", action="append", default=[], metavar="JSON",
                    help="--save-phases of the same job at another input size (repeatable): the "
                    "model's driver phases become fixed + per-byte costs fitted from the sizes; "
                    "a layout that reports its index segments is fitted per segment too (with a "
                    "third run, per byte as well)")
    m = ap.add_argument_group("model")
    m.add_argument("--machines", type=int, nargs="+", default=[8, 32, 64])
    m.add_argument("--cores", type=int, default=32, help="cores per machine [%(default)s]")
    m.add_argument("--node-gbit", type=float, default=10, help="NIC per machine, Gb/s [%(default)s]")
    m.add_argument("--storage-gbs", type=float, default=20,
                   help="shared storage aggregate bandwidth, GB/s [%(default)s]")
    m.add_argument("--sched-ms", type=float, default=1.0,
                   help="Dask scheduler time per task, ms [%(default)s]")
    m.add_argument("--model-gb", type=float, default=100, help="BAM size to project, GB [%(default)s]")
    m.add_argument("--model-segments", type=float, default=None,
                   help="index segments (runs of one bin) of the projected BAM, for a layout "
                   "fitted per segment [scaled with the input, as the bytes]")
    m.add_argument("--model-task-memory", default="768M",
                   help="map task memory at the projected size [%(default)s]")
    args = ap.parse_args()
    args.input = os.path.abspath(args.input)
    if args.job.startswith("fq2bam"):
        args.index, args.reads = os.path.abspath(args.index), [os.path.abspath(r) for r in args.reads]
        args.input = args.reads[0]

    from dask.distributed import Client, LocalCluster

    scratch = tempfile.mkdtemp(prefix="dask-overhead-",
                               dir=args.scratch or os.path.dirname(args.input))
    try:
        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=args.threads, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
        startup = time.perf_counter() - t0
        warm = [args.index, *args.reads] if args.job.startswith("fq2bam") else [args.input]
        subprocess.run(["sh", "-c", 'cat "$@" > /dev/null', "cat", *warm], check=True)
        load_before = os.getloadavg()
        started = datetime.datetime.now(datetime.timezone.utc)
        dist_runs, single_runs = [], []
        for r in range(args.rounds):
            order = ("dist", "single") if r % 2 == 0 else ("single", "dist")
            for variant in order:
                out = os.path.join(scratch, f"{variant}.bam")
                if variant == "dist":
                    res = run_distributed(client, args, out)
                    dist_runs.append(res)
                else:
                    res = run_single(args, out, scratch)
                    single_runs.append(res)
                print(f"round {r + 1} {variant}: wall {res['wall']:.2f} s, cpu {res['cpu']:.2f} s",
                      file=sys.stderr)
                for f in (out, index_of(args, out)):
                    if f:
                        os.remove(f)
            if dist_runs[-1]["sha"] != single_runs[-1]["sha"]:
                print("outputs DIFFER", dist_runs[-1]["sha"], single_runs[-1]["sha"], file=sys.stderr)
                return 3
        load_after = os.getloadavg()
        client.close()
        cluster.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    med = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
    d_wall, s_wall = med(dist_runs, "wall"), med(single_runs, "wall")
    d_cpu, s_cpu = med(dist_runs, "cpu"), med(single_runs, "cpu")
    phases = phase_medians(dist_runs)
    inputs = args.reads if args.job.startswith("fq2bam") else [args.input]
    input_bytes = sum(os.path.getsize(f) for f in inputs)
    out_bytes = dist_runs[0]["out_bytes"]
    records = dist_runs[0]["report"].get("records")
    moved = statistics.median(r["report"]["distributed"]["bytes_moved"] for r in dist_runs)
    others = []
    for path in args.fit_with:
        with open(path) as f:
            others.append(json.load(f))
        if others[-1].get("job") != args.job:
            sys.exit(f"--fit-with {path}: a {others[-1].get('job')} run, not {args.job}")
    fits = driver_fits(phases, input_bytes, others)
    rows, k = model(phases, input_bytes, out_bytes, args, fits)
    if args.save_phases:
        with open(args.save_phases, "w") as f:
            json.dump({"job": args.job, "inputs": inputs, "input_bytes": input_bytes,
                       "phases": phases}, f, indent=1)

    print(f"distributed {d_wall:.2f} s (cpu {d_cpu:.2f}), single {s_wall:.2f} s (cpu {s_cpu:.2f}); "
          f"ratio {d_wall / s_wall:.2f}x", file=sys.stderr)
    mi = machine_info()
    lines = [
        "", f"## dask-overhead {args.job} -- {os.path.basename(args.input)} -- "
        f"{started.strftime('%Y-%m-%d %H:%M UTC')}", "",
        f"- What: distributed {args.job} (`sortase.distributed`, `--no-PG`, task memory "
        f"{args.task_memory}) on a standing LocalCluster({args.threads} worker processes x 1 "
        "thread) vs the single-process command below with the same options (goal: within "
        "1.3x). Outputs (and indexes) byte-identical (SHA-256) in every round."
        + (f" fq2bam's tasks run {args.threads} threads each, as minimap2's `-t` in the "
           "header must equal the single run's `-@`." if args.job.startswith("fq2bam") else ""),
        f"- Commit: {git_commit()}; script: `bench/dask_overhead.py`",
        f"- Machine: {mi['nproc']} CPUs ({mi['cpu']}), {mi['ram']} RAM, Linux {mi['kernel']}; "
        f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}",
        f"- Data: {', '.join(f'`{f}`' for f in inputs)}, {input_bytes:,} bytes ({human_bytes(input_bytes)})"
        + (f", {records:,} records" if records else ""),
        f"- {args.rounds} alternating rounds (distributed/single, then single/distributed); "
        f"warm page cache; cluster start-up {startup:.1f} s (not charged)",
        f"- single: `{single_runs[0]['cmd']}`",
        "",
        "| variant | runs | wall median (s) | wall min-max (s) | user+sys median (s) | ratio vs single |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, runs in ((f"single `sortase {args.job.split('-')[0]}`", single_runs),
                        ("distributed (Dask)", dist_runs)):
        walls = [r["wall"] for r in runs]
        lines.append(f"| {label} | {len(runs)} | {med(runs, 'wall'):.3f} | {min(walls):.3f}-"
                     f"{max(walls):.3f} | {med(runs, 'cpu'):.2f} | "
                     f"{med(runs, 'wall') / s_wall:.2f}x |")
    lines += [
        "",
        f"Per phase of the distributed {args.job} (medians; task CPU = the worker processes' user+sys "
        "during each task; driver phases: the driver process's):",
        "",
        "| phase | wall (s) | tasks | task wall sum (s) | CPU (s) | bytes read | bytes written |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in phases:
        cpu = p.get("task_cpu_seconds", p.get("cpu_seconds", 0))
        lines.append(
            f"| {p['name']} | {p['seconds']:.3f} | {int(p.get('tasks', 0)) or '-'} | "
            f"{p.get('task_seconds', 0):.2f} | {cpu:.2f} | "
            f"{human_bytes(int(p.get('bytes_read', 0)))} | {human_bytes(int(p.get('bytes_written', 0)))} |")
    lines += [
        "",
        f"Bytes moved by tasks (read + written, shared storage): {human_bytes(int(moved))} "
        f"({moved / input_bytes:.1f}x the input); output {human_bytes(out_bytes)}, written in "
        "place by the finish's tasks (the driver writes only the index).",
        "",
        f"MODEL (a {args.model_gb:g} GB input, {k:.0f}x this input; {args.cores} cores per machine; "
        f"{args.node_gbit:g} Gb/s NIC per machine; shared storage {args.storage_gbs:g} GB/s "
        f"aggregate; {args.sched_ms:g} ms scheduler time per task; map tasks of "
        f"{args.model_task_memory}; per-phase CPU, bytes and tasks scaled linearly from the "
        "table above; a driver phase's measured CPU and bytes on one machine"
        + (", as fixed + per-byte costs fitted from this run and the same job on "
           + "; ".join(f"{human_bytes(o['input_bytes'])} "
                       f"({', '.join(os.path.basename(i) for i in o['inputs'])})" for o in others)
           + (f"; the layout per index segment too, {args.model_segments:,.0f} segments "
              "projected" if args.model_segments is not None else "")
           if fits else ", scaled linearly (an upper bound: no second size to fit a fixed part)")
        + "; see `model`):",
        "",
        "| machines | projected wall | speedup vs 1 | efficiency | phases (s, bound) |",
        "|---:|---:|---:|---:|---|",
    ]
    base = rows[0][1]
    for n, total, parts in rows:
        detail = "; ".join(f"{name} {t:.1f} ({bound})" for name, t, bound in parts)
        lines.append(f"| {n} | {total:.0f} s | {base / total:.1f}x | {base / total / n:.0%} | {detail} |")
    if fits:
        lines += ["", "Driver phases fitted from the two sizes (fixed + per input GB; CPU s, bytes):",
                  ""]
        lines += [f"- `{name}`: CPU {f['cpu'][0]:.3f} s + {f['cpu'][1] * 1e9:.3f} s/GB; bytes "
                  f"{human_bytes(int(f['bytes'][0]))} + {human_bytes(int(f['bytes'][1] * 1e9))}/GB"
                  + (f"; per segment: CPU {f['segments'][0]:.3f} s + {f['segments'][1] * 1e9:.3f} "
                     f"s/GB + {f['segments'][2] * 1e6:.3f} µs/segment" if "segments" in f else "")
                  for name, f in fits.items()]
    lines += ["", reading(rows, phases, input_bytes, args), ""]
    if max(load_before[0], load_after[0]) >= 1.0:
        lines.append(
            f"Caveat: the machine was busy (load average {load_before[0]:.1f} before, "
            f"{load_after[0]:.1f} after, on {mi['nproc']} CPUs): wall times and the ratio are "
            "noisy and must be re-taken on a quiet machine; the model's inputs (CPU seconds, "
            "bytes) suffer less from load than wall times.")
    if args.note:
        lines.append(f"Note: {args.note}  ")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_record:
        with open(RESULTS_MD, "a") as f:
            f.write(text)
        print(f"recorded: {RESULTS_MD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
