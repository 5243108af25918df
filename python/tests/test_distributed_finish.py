"""The finish of a distributed sort and merge moves no output byte through the driver (issue 29).

On a local path: place tasks write the parts at their offsets of the preallocated output, the
driver writes the index only (its process' file I/O during the finish is measured). On S3 (moto):
the parts become the parts of one multipart upload; every request to the S3 server is attributed
to the driver process or to a worker by the client's TCP port, so the tests see that the driver
never fetches a part and uploads only the index, and that a failure leaves no multipart upload and
no object behind. The driver's requests during the finish itself (distributed._assemble: layout,
multipart upload, index) are counted apart and printed (`pytest -s`): for sort, merge and markdup,
the parts' sidecars read and the index (or metrics file) and part list sent, under a tenth of the
output."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

pysam = pytest.importorskip("pysam")
pytest.importorskip("dask.distributed")
psutil = pytest.importorskip("psutil")

from sortase import distributed  # noqa: E402

from conftest import input_fixture  # noqa: E402
from test_distributed import RECORDS, TASK_MEMORY, cli, make_bam, moto_s3, s3_options  # noqa: E402

PART = re.compile(r"/(reduce|merge|encode)-\d+\.bgzf$")
SIDECAR = re.compile(r"/(reduce|merge|encode)-\d+\.sidecar$")


bam = input_fixture(make_bam, "finish")


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


def _io() -> Dict[str, int]:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def test_local_sort_driver_writes_only_the_index(bam: Path, client, tmp_path: Path,
                                                 monkeypatch) -> None:
    # The driver process's file reads and writes while it finishes (rchar/wchar: every read and
    # write system call on files; Dask's sockets use recv/send, not counted).
    measured: List[Dict[str, int]] = []
    assemble = distributed._assemble

    def measure(*args: Any, **kwargs: Any) -> str:
        before = _io()
        try:
            return assemble(*args, **kwargs)
        finally:
            after = _io()
            measured.append({k: after[k] - before[k] for k in ("rchar", "wchar")})

    monkeypatch.setattr(distributed, "_assemble", measure)
    out = tmp_path / "dask.bam"
    report = distributed.sort(bam, out, client=client, write_index=True, no_pg=True,
                              task_memory=TASK_MEMORY, reduce_tasks=3, progress=False)
    cli("sort", "--no-PG", "--write-index", "-o", str(tmp_path / "one.bam"), str(bam))
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert (tmp_path / "dask.bam.csi").read_bytes() == (tmp_path / "one.bam.csi").read_bytes()
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert [p["name"] for p in report["distributed"]["phases"]] == [
        "plan", "count", "map", "reduce", "layout", "place", "clean", "finish"]
    assert phases["place"]["tasks"] == 3
    # What the layout's index work grows with: runs of one bin, at least one per reference.
    assert 0 < phases["layout"]["index_segments"] < RECORDS
    # The workers removed the runs, parts and sidecars; the driver's commit only renames.
    assert phases["clean"]["tasks"] == 4
    assert phases["clean"]["files_removed"] == phases["map"]["tasks"] + 2 * 3
    size = out.stat().st_size
    index = (tmp_path / "dask.bam.csi").stat().st_size
    # The place tasks wrote the parts (all but the header and the EOF block).
    assert size - 2000 < phases["place"]["bytes_written"] <= size
    (io,) = measured
    print(f"local sort finish: output {size} B, index {index} B, driver read {io['rchar']} B, "
          f"wrote {io['wchar']} B")
    assert io["wchar"] < index + size // 20, io
    assert io["rchar"] < size // 4, io
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dask.bam", "dask.bam.csi", "one.bam",
                                                          "one.bam.csi"]


def test_local_failing_place_task_leaves_nothing(bam: Path, client, tmp_path: Path) -> None:
    def place(task_json: str) -> bool:
        return '"place"' in task_json[:20]

    with sabotaged(client, "_run_task", place, "place task sabotaged"):
        with pytest.raises(Exception, match="sabotaged"):
            distributed.sort(bam, tmp_path / "out.bam", client=client, write_index=True,
                             task_memory=TASK_MEMORY, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ---------------------------------------------------------------- S3 (moto), requests attributed


class Recorder:
    """WSGI middleware in front of moto: every request with its method, path, bytes each way and
    whether its client socket belongs to this (the driver's) process."""

    def __init__(self, app: Any, port: int):
        self.app = app
        self.port = port
        self.log: List[Dict[str, Any]] = []
        # True while the driver runs the finish (distributed._assemble: layout, upload, complete,
        # index): requests that arrive meanwhile are the finish's.
        self.finishing = False
        self.lock = threading.Lock()
        self.me = psutil.Process()

    def driver_ports(self) -> set:
        conns = getattr(self.me, "net_connections", self.me.connections)(kind="tcp")
        return {c.laddr.port for c in conns if c.raddr and c.raddr.port == self.port}

    def __call__(self, environ: Dict[str, Any], start_response: Any) -> Any:
        entry = {
            "method": environ["REQUEST_METHOD"],
            "path": environ.get("PATH_INFO", ""),
            "query": environ.get("QUERY_STRING", ""),
            "driver": int(environ.get("REMOTE_PORT") or 0) in self.driver_ports(),
            "sent": int(environ.get("CONTENT_LENGTH") or 0),
            "copy": environ.get("HTTP_X_AMZ_COPY_SOURCE"),
            "range": environ.get("HTTP_RANGE"),
            "finish": self.finishing,
        }
        result = self.app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        entry["received"] = len(body)
        with self.lock:
            self.log.append(entry)
        return [body]

    def take(self) -> List[Dict[str, Any]]:
        with self.lock:
            log, self.log = self.log, []
        return log


@pytest.fixture(scope="module")
def s3():
    with moto_s3("sortase-finish") as (server, host, port, fs):
        recorder = Recorder(server._server.app, port)
        server._server.app = recorder
        assemble = distributed._assemble

        def finishing(*args: Any, **kwargs: Any) -> str:
            recorder.finishing = True
            try:
                return assemble(*args, **kwargs)
            finally:
                recorder.finishing = False

        distributed._assemble = finishing
        yield fs, s3_options(f"http://{host}:{port}"), recorder
        distributed._assemble = assemble


@contextlib.contextmanager
def sabotaged(client: Any, name: str, fails: Callable[[Any], bool], message: str) -> Iterator[None]:
    """``sortase.distributed.<name>`` on every worker of ``client`` raising ``RuntimeError(message)``
    on a call whose first argument ``fails``; restored at the end."""
    def sabotage() -> None:
        from sortase import distributed as d

        real = getattr(d, name)

        def failing(first: Any, *args: Any, **kwargs: Any) -> Any:
            if fails(first):
                raise RuntimeError(message)
            return real(first, *args, **kwargs)

        failing.real = real  # type: ignore[attr-defined]
        setattr(d, name, failing)

    def restore() -> None:
        from sortase import distributed as d

        f = getattr(d, name)
        setattr(d, name, getattr(f, "real", f))

    client.run(sabotage)
    try:
        yield
    finally:
        client.run(restore)


def _uploads(fs: Any) -> List[Any]:
    return fs.call_s3("list_multipart_uploads", Bucket="sortase-finish").get("Uploads", [])


def _check_driver(log: List[Dict[str, Any]], index_bytes: int, output_bytes: int) -> Dict[str, int]:
    """Asserts the driver fetched no part and sent no output byte, only ``index_bytes`` (the index,
    or a markdup's metrics file) and the upload's part list; and that during the finish it read
    the parts' sidecars only and moved, both ways, less than a tenth of the output's
    ``output_bytes``. Returns what it moved."""
    driver = [e for e in log if e["driver"]]
    finish = [e for e in driver if e["finish"]]
    assert finish, "the finish made its requests from the driver (create, complete, the index)"
    assert [e for e in finish if "uploads" in e["query"] and e["method"] == "POST"], finish
    finish_gets = [e for e in finish if e["method"] == "GET"]
    # What it reads: the sidecars, and the listings s3fs makes around an upload (is the target a
    # directory?). No object GET but a sidecar's.
    listings = [e for e in finish_gets if "list-type=" in e["query"]]
    assert all(SIDECAR.search(e["path"]) for e in finish_gets
               if e["received"] and e not in listings), finish_gets
    finish_read = sum(e["received"] for e in finish_gets)
    finish_sent = sum(e["sent"] for e in finish)
    assert finish_read + finish_sent < output_bytes // 10, (finish_read, finish_sent, output_bytes)
    workers = [e for e in log if not e["driver"]]
    assert not [e for e in driver if e["method"] == "GET" and PART.search(e["path"])], driver
    # The parts reached the upload through the workers: their GETs or server-side copies.
    assert [e for e in workers if "uploadId" in e["query"] and e["method"] == "PUT"]
    assert not [e for e in driver if "partNumber" in e["query"]]
    sidecars = sum(e["received"] for e in driver if e["method"] == "GET" and SIDECAR.search(e["path"]))
    sent = sum(e["sent"] for e in driver)
    # What the driver sent: the index and the CompleteMultipartUpload list (~100 bytes a part).
    assert sent < index_bytes + 4096, (sent, index_bytes)
    return {"sidecars_read": sidecars, "sent": sent, "finish_read": finish_read,
            "finish_sent": finish_sent, "finish_requests": len(finish),
            "finish_listed": sum(e["received"] for e in listings),
            "read": sum(e["received"] for e in driver if e["method"] == "GET"),
            "worker_sent": sum(e["sent"] for e in workers),
            "copies": sum(1 for e in workers if e["copy"] and "partNumber" in e["query"])}


def _figures(moved: Dict[str, int]) -> str:
    return (f"driver during the finish: {moved['finish_requests']} requests, read "
            f"{moved['finish_read']} B (sidecars, and {moved['finish_listed']} B of listings), sent "
            f"{moved['finish_sent']} B; over the whole job: read {moved['read']} B, sent "
            f"{moved['sent']} B")


def test_s3_sort_driver_moves_no_part(bam: Path, client, s3, tmp_path: Path) -> None:
    fs, options, recorder = s3
    fs.put_file(str(bam), "sortase-finish/in.bam")
    recorder.take()
    report = distributed.sort("s3://sortase-finish/in.bam", "s3://sortase-finish/out/sorted.bam",
                              client=client, write_index=True, no_pg=True, task_memory=TASK_MEMORY,
                              storage_options=options, progress=False)
    log = recorder.take()
    cli("sort", "--no-PG", "--write-index", "-o", str(tmp_path / "one.bam"), str(bam))
    fs.invalidate_cache()
    one = (tmp_path / "one.bam").read_bytes()
    assert fs.cat_file("sortase-finish/out/sorted.bam") == one
    index = (tmp_path / "one.bam.csi").read_bytes()
    assert fs.cat_file("sortase-finish/out/sorted.bam.csi") == index
    assert sorted(fs.ls("sortase-finish/out", detail=False)) == [
        "sortase-finish/out/sorted.bam", "sortase-finish/out/sorted.bam.csi"]
    assert report["outputs"] == ["s3://sortase-finish/out/sorted.bam",
                                 "s3://sortase-finish/out/sorted.bam.csi"]
    names = [p["name"] for p in report["distributed"]["phases"]]
    assert names == ["plan", "count", "map", "reduce", "layout", "upload", "finish"]
    moved = _check_driver(log, len(index), len(one))
    # The output is under 5 MiB: one part, the header, every part object and the EOF block
    # concatenated by a worker.
    assert len(one) < distributed.MIN_PART
    assert [e for e in log if "partNumber=1" in e["query"] and not e["driver"]]
    assert not [e for e in log if "partNumber=2" in e["query"]]
    print(f"s3 sort: output {len(one)} B, index {len(index)} B; {_figures(moved)}")
    assert moved["sidecars_read"] < len(one) // 20
    assert _uploads(fs) == []
    fs.rm("sortase-finish/out", recursive=True)


@pytest.mark.parametrize("mode", ["query", "coordinate"])
def test_s3_markdup_driver_moves_no_part(client, s3, tmp_path: Path, mode: str) -> None:
    """Distributed markdup in both modes finishes as the sort does: the encode tasks' parts become
    the multipart upload's parts through the workers; the driver reads the input's header and the
    parts' sidecars, and sends the metrics file (Picard's mode) and nothing else of size."""
    from markdup_bams import make_coordinate_bam, make_grouped_bam, metrics_body

    fs, options, recorder = s3
    make = make_grouped_bam if mode == "query" else make_coordinate_bam
    bam = make(tmp_path / "in.bam", pairs=3_000, seed=61)
    fs.put_file(str(bam), f"sortase-finish/md-{mode}/in.bam")
    base = f"s3://sortase-finish/md-{mode}"
    metrics = f"{base}/out/metrics.txt" if mode == "coordinate" else None
    recorder.take()
    report = distributed.markdup(f"{base}/in.bam", f"{base}/out/dup.bam", client=client,
                                 no_pg=True, task_memory="256K", metrics=metrics,
                                 storage_options=options, progress=False)
    log = recorder.take()
    args = ["--metrics", str(tmp_path / "one.txt")] if metrics else []
    cli("markdup", "--no-PG", *args, "-o", str(tmp_path / "one.bam"), str(bam))
    fs.invalidate_cache()
    one = (tmp_path / "one.bam").read_bytes()
    assert fs.cat_file(f"sortase-finish/md-{mode}/out/dup.bam") == one
    side = 0
    if metrics:
        text = fs.cat_file(metrics).decode()
        assert metrics_body(text) == metrics_body((tmp_path / "one.txt").read_text())
        side = len(text.encode())
    names = [p["name"] for p in report["distributed"]["phases"]]
    assert names[-3:] == ["layout", "upload", "finish"], names
    moved = _check_driver(log, side, len(one))
    # The workers read the input by their ranges; the driver planned on the object by ranged
    # reads (header, sampled blocks, the cuts' probes: on a file this small, up to all of it,
    # in 64 KiB windows), never a whole copy.
    gets = [e for e in log if e["driver"] and e["method"] == "GET" and e["path"].endswith("/in.bam")]
    assert gets and all(e["range"] for e in gets), gets
    input_read = sum(e["received"] for e in gets)
    assert input_read <= bam.stat().st_size
    assert report["distributed"]["plan_bytes_read"] == input_read
    print(f"s3 markdup ({mode}): input {bam.stat().st_size} B, output {len(one)} B, metrics "
          f"{side} B; {_figures(moved)} ({input_read} B of the input)")
    assert moved["sidecars_read"] < len(one) // 20
    assert _uploads(fs) == []
    fs.rm(f"sortase-finish/md-{mode}", recursive=True)


def test_s3_merge_in_many_parts_by_copy(bam: Path, client, s3, tmp_path: Path, monkeypatch) -> None:
    """With S3's part floor lowered (moto's and the driver's both, to 64 KiB), the parts of the
    merge become several multipart parts: server-side copies of part objects' byte ranges, and
    parts a worker concatenates (the header, the EOF block, short neighbours); moto refuses the
    upload if a part but the last is under the floor."""
    import moto.s3.models

    fs, options, recorder = s3
    floor = 64 << 10
    monkeypatch.setattr(moto.s3.models, "S3_UPLOAD_PART_MIN_SIZE", floor)
    monkeypatch.setattr(distributed, "MIN_PART", floor)
    inputs = []
    for i in range(3):
        raw = make_bam(tmp_path / f"raw{i}.bam", records=15_000, seed=40 + i)
        inputs.append(tmp_path / f"lane{i}.bam")
        cli("sort", "-o", str(inputs[-1]), str(raw))
        fs.put_file(str(inputs[-1]), f"sortase-finish/lanes/lane{i}.bam")
    urls = [f"s3://sortase-finish/lanes/lane{i}.bam" for i in range(3)]
    recorder.take()
    report = distributed.merge(urls, "s3://sortase-finish/merged/all.bam", client=client, seed=1,
                               write_index=True, no_pg=True, tasks=4, storage_options=options,
                               progress=False)
    log = recorder.take()
    cli("merge", "--no-PG", "-s", "1", "--write-index", "-o", str(tmp_path / "one.bam"),
        *map(str, inputs))
    fs.invalidate_cache()
    one = (tmp_path / "one.bam").read_bytes()
    assert fs.cat_file("sortase-finish/merged/all.bam") == one
    index = (tmp_path / "one.bam.csi").read_bytes()
    assert fs.cat_file("sortase-finish/merged/all.bam.csi") == index
    moved = _check_driver(log, len(index), len(one))
    parts = {int(m.group(1)) for e in log for m in [re.search(r"partNumber=(\d+)", e["query"])] if m}
    # At least: the header with the first part's beginning (a worker concatenates them), the
    # rest of a part object (copied server-side), the EOF block (the last part).
    assert len(parts) >= 3, parts
    assert moved["copies"] >= 1, moved
    upload = [p for p in report["distributed"]["phases"] if p["name"] == "upload"][0]
    assert upload["bytes_copied_server_side"] > 0
    assert upload["bytes_copied_server_side"] + upload["bytes_written"] == len(one)
    print(f"s3 merge: output {len(one)} B in {len(parts)} parts ({moved['copies']} copies), "
          f"index {len(index)} B; {_figures(moved)}")
    assert _uploads(fs) == []
    assert sorted(fs.ls("sortase-finish/merged", detail=False)) == [
        "sortase-finish/merged/all.bam", "sortase-finish/merged/all.bam.csi"]
    fs.rm("sortase-finish/merged", recursive=True)
    fs.rm("sortase-finish/lanes", recursive=True)


def test_s3_failing_upload_leaves_nothing(bam: Path, client, s3, monkeypatch) -> None:
    import moto.s3.models

    fs, options, recorder = s3
    floor = 64 << 10
    monkeypatch.setattr(moto.s3.models, "S3_UPLOAD_PART_MIN_SIZE", floor)
    monkeypatch.setattr(distributed, "MIN_PART", floor)
    fs.put_file(str(bam), "sortase-finish/bad/in.bam")

    with sabotaged(client, "_upload_part", lambda spec: spec["part"] == 2, "upload sabotaged"):
        with pytest.raises(Exception, match="sabotaged"):
            distributed.sort("s3://sortase-finish/bad/in.bam", "s3://sortase-finish/bad/out.bam",
                             client=client, write_index=True, task_memory=TASK_MEMORY,
                             storage_options=options, progress=False)
    log = recorder.take()
    # Part 1 was uploaded before the failure: the upload existed and was aborted.
    assert [e for e in log if "partNumber=1" in e["query"]]
    assert [e for e in log if e["method"] == "DELETE" and "uploadId" in e["query"] and e["driver"]]
    assert _uploads(fs) == []
    fs.invalidate_cache()
    assert fs.ls("sortase-finish/bad", detail=False) == ["sortase-finish/bad/in.bam"]
    fs.rm("sortase-finish/bad", recursive=True)


def test_multipart_plan_bounds() -> None:
    """Every part but the last at least the floor, none above the ceiling, the pieces in output
    order covering every byte once, whatever the parts' sizes."""
    import random

    class R:
        def url(self, path: str) -> str:
            return "s3://b/" + path

    rng = random.Random(3)
    for case in range(300):
        sizes = [rng.choice([0, 1, 10, 100, 999, 1000, 1001, 5000, rng.randrange(1, 20000)])
                 for _ in range(rng.randrange(1, 12))]
        header = "00" * rng.randrange(1, 300)
        layout = {"header": {"bytes": header}, "eof": {"bytes": "00" * 28},
                  "parts": [{"path": f"p{i}", "bytes": s} for i, s in enumerate(sizes)],
                  "size": len(header) // 2 + sum(sizes) + 28}
        plan = distributed._multipart_plan(layout, R(), min_part=1000, max_part=4000,
                                           max_parts=10_000)
        lengths = [sum(len(p["bytes"]) // 2 if "bytes" in p else p["end"] - p["start"]
                       for p in part["pieces"]) for part in plan]
        assert [p["part"] for p in plan] == list(range(1, len(plan) + 1))
        assert all(n >= 1000 for n in lengths[:-1]), (sizes, lengths)
        assert all(0 < n <= 4000 for n in lengths), (sizes, lengths)
        flat = [p for part in plan for p in part["pieces"]]
        assert flat[0].get("bytes") == header and flat[-1].get("bytes") == "00" * 28
        covered: Dict[str, int] = {}
        for p in flat[1:-1]:
            assert p["start"] == covered.get(p["url"], 0), (sizes, flat)
            covered[p["url"]] = p["end"]
        assert covered == {f"s3://b/p{i}": s for i, s in enumerate(sizes) if s}
        # A copy part (one object range) stands alone only when it is not the header's or EOF's.
        assert sum(lengths) == layout["size"]


def test_s3_input_needs_s3_output(bam: Path, client, s3, tmp_path: Path) -> None:
    from sortase import ArgumentError

    fs, options, _ = s3
    fs.put_file(str(bam), "sortase-finish/local-out/in.bam")
    with pytest.raises(ArgumentError, match="object storage"):
        distributed.sort("s3://sortase-finish/local-out/in.bam", tmp_path / "out.bam",
                         client=client, storage_options=options, progress=False)
    fs.invalidate_cache()
    assert fs.ls("sortase-finish/local-out", detail=False) == ["sortase-finish/local-out/in.bam"]
    assert list(tmp_path.iterdir()) == []
    fs.rm("sortase-finish/local-out", recursive=True)
