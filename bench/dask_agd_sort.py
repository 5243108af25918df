#!/usr/bin/env python3
"""Distributed sort of an AGD dataset against distributed sort of the BAM it was imported from
(issue 19): `sortase.distributed.sort` on a LocalCluster of 2 worker processes x 1 thread, the
two inputs in alternation, with the outputs checked byte-identical in every round.

    python3 bench/dask_agd_sort.py [--bam /work/bench-data/small.sorted.bam] [--dataset DIR]
                                   [--rounds 3] [--orders coordinate,name] [--task-memory 64M]

The dataset is imported (`sortase agd import`, default chunks) into --dataset unless it exists.
Printed per run (JSON lines): wall seconds (noise on a shared machine), the tasks' CPU seconds
(user+sys of the worker process during each task, summed: the report's `task_cpu_seconds`), the
driver's CPU seconds (plan and finish), and per phase its task count and CPU seconds. A BAM has a
count stage (records and bytes per byte range); a dataset has none (its manifest counts; a map
task measures its record bytes itself).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time


def cpu(report: dict) -> tuple:
    """(tasks' CPU seconds, driver CPU seconds, {phase: [tasks, CPU seconds]})."""
    phases = report["distributed"]["phases"]
    tasks = sum(p.get("task_cpu_seconds", 0.0) for p in phases)
    driver = sum(p.get("cpu_seconds", 0.0) for p in phases if "task_cpu_seconds" not in p)
    per = {p["name"]: [p.get("tasks"), round(p.get("task_cpu_seconds", p.get("cpu_seconds", 0.0)), 2)]
           for p in phases}
    return tasks, driver, per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bam", default="/work/bench-data/small.sorted.bam")
    ap.add_argument("--dataset", default=None, help="default: a temporary import of --bam")
    ap.add_argument("--sortase", default="sortase", help="the CLI that imports the dataset")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--orders", default="coordinate,name")
    ap.add_argument("--task-memory", default="64M")
    args = ap.parse_args()

    from dask.distributed import Client, LocalCluster

    from sortase import distributed

    scratch = tempfile.mkdtemp(prefix="dask-agd-sort-")
    try:
        ds = args.dataset or os.path.join(scratch, "ds")
        if not os.path.exists(ds):
            subprocess.run([args.sortase, "agd", "import", args.bam, "-o", ds], check=True)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            for r in range(args.rounds):
                for order in args.orders.split(","):
                    inputs = [("bam", args.bam), ("dataset", ds)]
                    digests = {}
                    for name, src in (inputs if r % 2 == 0 else inputs[::-1]):
                        out = os.path.join(scratch, f"{name}.bam")
                        start = time.perf_counter()
                        report = distributed.sort(src, out, client=client, no_pg=True,
                                                  task_memory=args.task_memory,
                                                  by_name=order == "name", progress=False)
                        wall = time.perf_counter() - start
                        tasks, driver, per = cpu(report)
                        with open(out, "rb") as f:
                            digests[name] = hashlib.sha256(f.read()).hexdigest()
                        os.unlink(out)
                        print(json.dumps({"round": r, "order": order, "input": name,
                                          "wall": round(wall, 1), "task_cpu": round(tasks, 2),
                                          "driver_cpu": round(driver, 2),
                                          "records": report["records"], "phases": per}), flush=True)
                    if digests["bam"] != digests["dataset"]:
                        raise SystemExit(f"round {r} {order}: the outputs differ")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
