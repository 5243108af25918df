#!/usr/bin/env python3
"""How a distributed job's tasks read their inputs on object storage (issue 29): through the
library's reader (`sortase_io`, the code `sortase view s3://…` reads with on one machine; the
default) against copies fsspec makes on the worker's disk first (what every task did before, and
what still happens when `storage_options` hold something the library cannot follow).

    bench-venv/bin/python bench/dask_s3_reads.py --job sort --input /work/bench-data/small.bam
    bench-venv/bin/python bench/dask_s3_reads.py --job fq2bam \\
        --reads /work/bench-data/fq17x/R1.fq.gz /work/bench-data/fq17x/R2.fq.gz

Procedure: a moto S3 server (`ThreadedMotoServer`, in this process) holds the inputs; one
standing LocalCluster(n_workers=2, threads_per_worker=1, processes=True) runs the job --rounds
times in each mode, alternating (A B, B A, ...). The copied mode is the same call with one more
client keyword (`verify=False`, no effect on an http endpoint) that the library does not follow,
so its tasks fetch through fsspec; so does its driver (it copies the inputs before planning: its
plan phase is not comparable, the task phases are). Each run's output must equal the first
one's bytes. Prints, per mode, the median wall time and the median seconds, bytes read and bytes
streamed of each phase.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from typing import Any, Dict, List


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", choices=["sort", "markdup", "fq2bam"], default="sort")
    ap.add_argument("--input", default="/work/bench-data/small.bam", help="the BAM (sort, markdup)")
    ap.add_argument("--index", default="/work/bench-data/ref.sr.mmi", help="fq2bam's index")
    ap.add_argument("--reads", nargs=2, default=None, help="fq2bam's BGZF FASTQ pair")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--task-memory", default="128M")
    ap.add_argument("--threads", type=int, default=1, help="threads per task (fq2bam)")
    args = ap.parse_args()

    from dask.distributed import Client, LocalCluster
    from moto.server import ThreadedMotoServer
    import s3fs
    from sortase import distributed

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1")
    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
    copied = {"key": "testing", "secret": "testing",
              "client_kwargs": {"endpoint_url": endpoint, "verify": False}}
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("bench")
    files = [args.input] if args.job != "fq2bam" else [args.index, *args.reads]
    urls = []
    for f in files:
        urls.append(f"s3://bench/in/{os.path.basename(f)}")
        fs.put_file(f, urls[-1])
    size = sum(os.path.getsize(f) for f in files)

    def run(mode: str, k: int) -> Dict[str, Any]:
        out = f"s3://bench/out/{mode}-{k}.bam"
        opts = options if mode == "streamed" else copied
        start = time.perf_counter()
        if args.job == "sort":
            report = distributed.sort(urls[0], out, client=client, no_pg=True, write_index=True,
                                      task_memory=args.task_memory, storage_options=opts,
                                      progress=False)
        elif args.job == "markdup":
            report = distributed.markdup(urls[0], out, client=client, no_pg=True,
                                         storage_options=opts, progress=False)
        else:
            report = distributed.fq2bam(urls[0], urls[1], urls[2], out, client=client, no_pg=True,
                                        write_index=True, threads=args.threads,
                                        storage_options=opts, progress=False)
        wall = time.perf_counter() - start
        fs.invalidate_cache()
        digest = hashlib.sha256(fs.cat_file(out)).hexdigest()
        fs.rm(out)
        for extra in (out + ".csi", out + ".bai"):
            if fs.exists(extra):
                fs.rm(extra)
        return {"wall": wall, "sha": digest, "phases": report["distributed"]["phases"]}

    results: Dict[str, List[Dict[str, Any]]] = {"streamed": [], "copied": []}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        for k in range(args.rounds):
            order = ["streamed", "copied"] if k % 2 == 0 else ["copied", "streamed"]
            for mode in order:
                r = run(mode, k)
                results[mode].append(r)
                print(f"round {k + 1} {mode}: {r['wall']:.2f} s", file=sys.stderr)
    server.stop()
    shas = {r["sha"] for rs in results.values() for r in rs}
    if len(shas) != 1:
        sys.exit(f"outputs differ between runs: {shas}")

    print(f"\n{args.job} on moto S3, {size:,} input bytes, LocalCluster 2 x 1 thread, "
          f"{args.rounds} alternating rounds; outputs identical (sha256 {shas.pop()[:12]}…)\n")
    print("| mode | wall median (s) | min-max |")
    print("|---|---:|---:|")
    for mode, rs in results.items():
        walls = [r["wall"] for r in rs]
        print(f"| {mode} | {statistics.median(walls):.2f} | {min(walls):.2f}-{max(walls):.2f} |")
    names = [p["name"] for p in results["streamed"][0]["phases"]]
    print("\n| phase | streamed s | copied s | streamed: MB read (of it streamed) | copied: MB read |")
    print("|---|---:|---:|---:|---:|")
    for i, name in enumerate(names):
        def med(mode: str, key: str) -> float:
            return statistics.median(r["phases"][i].get(key, 0) for r in results[mode])
        print(f"| {name} | {med('streamed', 'seconds'):.2f} | {med('copied', 'seconds'):.2f} | "
              f"{med('streamed', 'bytes_read') / 1e6:.1f} ({med('streamed', 'bytes_streamed') / 1e6:.1f}) | "
              f"{med('copied', 'bytes_read') / 1e6:.1f} |")


if __name__ == "__main__":
    main()
