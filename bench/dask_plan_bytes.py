"""What the Dask driver reads to plan a job on an S3 input (issue 29): the input is put on a local
S3 API server (moto), and the library's planner reads it by ranged reads under the local name the
tasks use, as ``sortase.distributed`` does; prints the bytes and requests per job and task size.

    .venv/bin/python bench/dask_plan_bytes.py BAM [BAM ...] [--jobs sort,markdup]

Needs the package in .venv (scripts/python-build.sh) and moto (scripts/venv.sh installs it). The
plan's reads do not grow with the file: the header, 16 sampled blocks and one probe per cut, each
in a 64 KiB window (so a small file is read almost whole, a large one under 1-2%)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import s3fs
from moto.server import ThreadedMotoServer

from sortase import _sortase, distributed


def job_spec(kind: str, local: str, work: Path) -> dict:
    out = {"path": str(work / "out.bam"), "format": None, "level": None, "uncompressed": False,
           "write_index": False, "index_format": None, "reference": None}
    if kind == "sort":
        return {"input": local, "output": out, "order": "coordinate",
                "temp_prefix": str(work / "work"), "max_fan_in": 64, "program": None}
    return {"input": local, "output": out, "mode": "auto", "remove_duplicates": False,
            "temp_prefix": str(work / "work"),
            "samblaster": {"accept_dups": False, "ignore_unmated": False, "max_read_length": 500},
            "picard": {"metrics": None, "optical_distance": 100, "read_name_regex": None,
                       "max_optical_set": 300000},
            "program": None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bams", nargs="+", type=Path)
    ap.add_argument("--jobs", default="sort,markdup")
    args = ap.parse_args()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": f"http://{host}:{port}"}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("plan-bytes")
        work = Path(tempfile.mkdtemp(prefix="sortase-plan-bytes-"))
        for bam in args.bams:
            key = f"plan-bytes/{bam.name}"
            fs.put_file(str(bam), key)
            size = bam.stat().st_size
            local = str(work / "in" / bam.name)
            for kind in args.jobs.split(","):
                for cut in ({}, {"task_memory": 64 << 20}):
                    settings = distributed._s3_settings(options)
                    _sortase.configure_s3(**settings, aliases={local: f"s3://{key}"})
                    before, requests = _sortase.remote_fetched()
                    start = time.perf_counter()
                    try:
                        _sortase.task_plan(kind, json.dumps(job_spec(kind, local, work)),
                                           json.dumps(cut), threads=1)
                    finally:
                        _sortase.configure_s3(clear=True)
                    got, n = (a - b for a, b in zip(_sortase.remote_fetched(), (before, requests)))
                    print(f"{kind:8} {bam.name} {size:>13,} B  task_memory "
                          f"{cut.get('task_memory', 'default')!s:>9}: plan read {got:>11,} B in "
                          f"{n:>3} requests ({100 * got / size:.2f}%), "
                          f"{time.perf_counter() - start:.1f} s")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
