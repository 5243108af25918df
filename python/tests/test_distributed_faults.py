"""sortase.distributed under faults (issue 30): the S3 API server (moto) behind a proxy that injects
503 SlowDown, 500 InternalError, connection resets and GET bodies cut short (``s3faults``). The
distributed sort, merge and markdup survive transient faults byte-identically; a permanent fault
fails the job with an error naming the URL and leaves no output object, no open multipart upload
and no work prefix; a worker whose local disk fills up fails its task, which runs again on the
other worker, and the job ends byte-identical."""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
from pathlib import Path
from typing import Any, List

import pytest

pysam = pytest.importorskip("pysam")
distributed_mod = pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402

from conftest import input_fixture  # noqa: E402
from s3faults import Fault, FaultProxy  # noqa: E402
from test_distributed import CLI, cli, make_bam, moto_s3, s3_options  # noqa: E402,F401  (fixtures)
from markdup_bams import make_grouped_bam  # noqa: E402

BUCKET = "sortase-faults"
TASK_MEMORY = "1M"


@pytest.fixture(scope="module")
def s3():
    """(s3fs straight to moto, storage options through the fault proxy, the proxy)."""
    with moto_s3(BUCKET) as (_, host, port, fs):
        proxy = FaultProxy(host, port)
        endpoint = proxy.start()
        # Few, quick client retries, so that a permanent fault fails within seconds.
        options = dict(s3_options(endpoint),
                       config_kwargs={"retries": {"mode": "standard", "max_attempts": 3}})
        yield fs, options, proxy
        proxy.stop()


def _uploads(fs: Any) -> List[Any]:
    return fs.call_s3("list_multipart_uploads", Bucket=BUCKET).get("Uploads", [])


def _listing(fs: Any, prefix: str) -> List[str]:
    fs.invalidate_cache()
    return sorted(fs.find(f"{BUCKET}/{prefix}"))


def transient() -> List[Fault]:
    """One or two of every fault, spread over the job's requests (the driver's and the workers')."""
    return [
        Fault("slowdown", method="GET", after=1, times=2),
        Fault("short", method="GET", after=2, times=2),
        Fault("internal", method="GET", after=3, times=2),
        Fault("short_lie", method="GET", after=4, times=2),
        Fault("reset", method="GET", after=5, times=2),
        Fault("reset", method="HEAD", after=1, times=1),
        Fault("slowdown", method="PUT", times=1),
        Fault("internal", method="PUT", after=2, times=1),
        Fault("reset", method="PUT", path=r"partNumber=", times=1),
        Fault("internal", method="POST", path=r"uploadId=", times=1),
    ]


def _all_fired(faults: List[Fault], report: Any) -> None:
    missed = [(f.kind, f.method, f.path) for f in faults if f.fired != f.times]
    assert not missed, f"faults never injected (the test did not exercise them): {missed}"
    # The retries repaired every read where it failed: no task fell back to fetching whole
    # objects (as one would after a short read went unnoticed into its sparse input).
    phases = report["distributed"]["phases"]
    assert sum(p.get("whole_object_fetches", 0) for p in phases) == 0, phases


bam = input_fixture(make_bam, "faults", records=20_000, seed=3)


def test_sort_survives_transient_faults(bam: Path, client, s3, tmp_path: Path) -> None:
    fs, options, proxy = s3
    fs.put_file(str(bam), f"{BUCKET}/sort/in.bam")
    faults = transient()
    proxy.schedule(faults)
    report = distributed.sort(f"s3://{BUCKET}/sort/in.bam", f"s3://{BUCKET}/sort/out/sorted.bam",
                              client=client, write_index=True, no_pg=True, task_memory=TASK_MEMORY,
                              storage_options=options, progress=False)
    proxy.clear()
    _all_fired(faults, report)
    cli("sort", "--no-PG", "--write-index", "-o", str(tmp_path / "one.bam"), str(bam))
    fs.invalidate_cache()
    assert fs.cat_file(f"{BUCKET}/sort/out/sorted.bam") == (tmp_path / "one.bam").read_bytes()
    index = (tmp_path / "one.bam.csi").read_bytes()
    assert fs.cat_file(f"{BUCKET}/sort/out/sorted.bam.csi") == index
    assert report["distributed"]["phases"][2]["tasks"] > 1
    assert _listing(fs, "sort") == [f"{BUCKET}/sort/in.bam", f"{BUCKET}/sort/out/sorted.bam",
                                    f"{BUCKET}/sort/out/sorted.bam.csi"]
    assert _uploads(fs) == []


def test_merge_survives_transient_faults(client, s3, tmp_path: Path) -> None:
    fs, options, proxy = s3
    inputs, urls = [], []
    for i in range(3):
        raw = make_bam(tmp_path / f"raw{i}.bam", records=6_000, seed=50 + i)
        inputs.append(tmp_path / f"lane{i}.bam")
        cli("sort", "-o", str(inputs[-1]), str(raw))
        urls.append(f"s3://{BUCKET}/merge/lane{i}.bam")
        fs.put_file(str(inputs[-1]), urls[-1])
    faults = transient()
    proxy.schedule(faults)
    report = distributed.merge(urls, f"s3://{BUCKET}/merge/out/all.bam", client=client, seed=1,
                               write_index=True, no_pg=True, tasks=3, storage_options=options,
                               progress=False)
    proxy.clear()
    _all_fired(faults, report)
    cli("merge", "--no-PG", "-s", "1", "--write-index", "-o", str(tmp_path / "one.bam"),
        *map(str, inputs))
    fs.invalidate_cache()
    assert fs.cat_file(f"{BUCKET}/merge/out/all.bam") == (tmp_path / "one.bam").read_bytes()
    assert fs.cat_file(f"{BUCKET}/merge/out/all.bam.csi") == (tmp_path / "one.bam.csi").read_bytes()
    assert _uploads(fs) == []


def test_markdup_survives_transient_faults(client, s3, tmp_path: Path) -> None:
    fs, options, proxy = s3
    grouped = make_grouped_bam(tmp_path / "grouped.bam", pairs=3_000, seed=8)
    fs.put_file(str(grouped), f"{BUCKET}/md/in.bam")
    faults = transient()
    proxy.schedule(faults)
    report = distributed.markdup(f"s3://{BUCKET}/md/in.bam", f"s3://{BUCKET}/md/out/dup.bam",
                                 client=client, no_pg=True, task_memory="256K",
                                 storage_options=options, progress=False)
    proxy.clear()
    _all_fired(faults, report)
    cli("markdup", "--no-PG", "-o", str(tmp_path / "one.bam"), str(grouped))
    fs.invalidate_cache()
    assert fs.cat_file(f"{BUCKET}/md/out/dup.bam") == (tmp_path / "one.bam").read_bytes()
    assert _listing(fs, "md") == [f"{BUCKET}/md/in.bam", f"{BUCKET}/md/out/dup.bam"]
    assert _uploads(fs) == []


@pytest.mark.parametrize("fault,names", [
    # Every UploadPart of the output fails: the multipart upload is aborted.
    (Fault("internal", method="PUT", path=r"partNumber=", times=None), "s3://{b}/perm/out.bam"),
    # Every read of the input after the driver's whole fetch: the tasks' range reads fail.
    (Fault("short", method="GET", path=r"/perm/in\.bam", after=1, times=None),
     "s3://{b}/perm/in.bam"),
])
def test_permanent_fault_fails_cleanly(bam: Path, client, s3, fault: Fault, names: str) -> None:
    fs, options, proxy = s3
    # One client retry, so that each of the 3 attempts Dask makes fails quickly.
    options = dict(options, config_kwargs={"retries": {"mode": "standard", "max_attempts": 2}})
    fs.put_file(str(bam), f"{BUCKET}/perm/in.bam")
    # Quick back-off of the explicit retries (short reads), so that the test takes seconds.
    delay = distributed.RETRY_DELAY
    client.run(lambda: setattr(distributed, "RETRY_DELAY", 0.01))
    proxy.schedule([fault])
    try:
        with pytest.raises(Exception) as failure:
            distributed.sort(f"s3://{BUCKET}/perm/in.bam", f"s3://{BUCKET}/perm/out.bam",
                             client=client, write_index=True, no_pg=True, task_memory=TASK_MEMORY,
                             storage_options=options, progress=False)
    finally:
        proxy.clear()
        client.run(lambda: setattr(distributed, "RETRY_DELAY", delay))
    assert fault.fired > 0
    assert names.format(b=BUCKET) in str(failure.value), failure.value
    print(f"permanent {fault.kind} fault: {type(failure.value).__name__}: {failure.value}")
    # No output, no index, no work prefix, no open upload.
    assert _listing(fs, "perm") == [f"{BUCKET}/perm/in.bam"]
    assert _uploads(fs) == []
    fs.rm(f"{BUCKET}/perm", recursive=True)


def _fill_disk(directory: str, limit: int) -> None:
    """On this worker: task scratch files go to ``directory``, and the process may write no file
    beyond ``limit`` bytes (RLIMIT_FSIZE: the write fails with EFBIG, as a full disk's with
    ENOSPC; Python ignores SIGXFSZ)."""
    os.makedirs(directory, exist_ok=True)
    tempfile.tempdir = directory
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


def _mount_tmpfs(directory: str, size: str) -> bool:
    """A tiny tmpfs at ``directory`` (needs root); False if it cannot be mounted."""
    os.makedirs(directory, exist_ok=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", directory],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


@pytest.mark.parametrize("how", ["tmpfs", "fsize"])
def test_worker_disk_full_task_runs_elsewhere(bam: Path, s3, tmp_path: Path, how: str) -> None:
    """One worker's scratch disk fills up (a 64 KiB tmpfs when the test may mount one, else a
    64 KiB file-size limit on the worker process): its tasks fail with ENOSPC/EFBIG, the driver
    runs them on the other worker, and the output is byte-identical. The tasks copy their inputs
    to their scratch here (storage options the library's reader does not follow), so the first
    task the full worker runs fails: tasks that read through the library write only their outputs,
    and whether the full worker gets one of those is the scheduler's choice."""
    from dask.distributed import Client, LocalCluster

    fs, options, proxy = s3
    options = dict(options, client_kwargs=dict(options["client_kwargs"], verify=False))
    fs.put_file(str(bam), f"{BUCKET}/full/in.bam")
    scratch = str(tmp_path / "scratch")
    if how == "tmpfs" and not _mount_tmpfs(scratch, "64k"):
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as c:
            workers = sorted(c.scheduler_info()["workers"])
            if how == "tmpfs":
                c.run(lambda d: setattr(tempfile, "tempdir", d), scratch, workers=[workers[0]])
            else:
                c.run(_fill_disk, scratch, 64 << 10, workers=[workers[0]])
            report = distributed.sort(f"s3://{BUCKET}/full/in.bam", f"s3://{BUCKET}/full/out.bam",
                                      client=c, no_pg=True, task_memory=TASK_MEMORY,
                                      storage_options=options, progress=False)
    finally:
        if how == "tmpfs":
            subprocess.run(["umount", scratch], check=False)
    cli("sort", "--no-PG", "-o", str(tmp_path / "one.bam"), str(bam))
    fs.invalidate_cache()
    assert fs.cat_file(f"{BUCKET}/full/out.bam") == (tmp_path / "one.bam").read_bytes()
    phases = report["distributed"]["phases"]
    assert phases[2]["tasks"] > 1
    # Tasks failed on the full worker and ran on the other.
    assert sum(p.get("tasks_moved", 0) for p in phases) > 0, phases
    assert _listing(fs, "full") == [f"{BUCKET}/full/in.bam", f"{BUCKET}/full/out.bam"]
    fs.rm(f"{BUCKET}/full", recursive=True)


def test_disk_full_on_every_worker_fails_the_job(bam: Path, s3, tmp_path: Path) -> None:
    from dask.distributed import Client, LocalCluster

    fs, options, proxy = s3
    fs.put_file(str(bam), f"{BUCKET}/allfull/in.bam")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        c.run(_fill_disk, str(tmp_path / "scratch"), 64 << 10)
        with pytest.raises(distributed.WorkerDiskFull, match="File too large"):
            distributed.sort(f"s3://{BUCKET}/allfull/in.bam", f"s3://{BUCKET}/allfull/out.bam",
                             client=c, no_pg=True, task_memory=TASK_MEMORY,
                             storage_options=options, progress=False)
    assert _listing(fs, "allfull") == [f"{BUCKET}/allfull/in.bam"]
    assert _uploads(fs) == []
    fs.rm(f"{BUCKET}/allfull", recursive=True)


def test_one_machine_reader_survives_cut_bodies(bam: Path, s3, tmp_path: Path) -> None:
    """The library's S3 reader, which ``sortase view s3://…`` and the distributed tasks share,
    fetches a window again when its body comes short (honest or lying ``Content-Length``) or the
    connection breaks off mid-body; the records equal the local file's."""
    fs, options, proxy = s3
    fs.put_file(str(bam), f"{BUCKET}/view/in.bam")
    endpoint = options["client_kwargs"]["endpoint_url"]
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    faults = [Fault("short", method="GET", after=0, times=1),
              Fault("short_lie", method="GET", after=1, times=1),
              Fault("reset", method="GET", after=2, times=1),
              Fault("slowdown", method="GET", after=3, times=1)]
    proxy.schedule(faults)
    try:
        got = subprocess.run([str(CLI), "view", "--no-PG", f"s3://{BUCKET}/view/in.bam"],
                             env=env, capture_output=True, text=True)
    finally:
        proxy.clear()
        fs.rm(f"{BUCKET}/view", recursive=True)
    assert got.returncode == 0, got.stderr
    assert [(f.kind, f.fired) for f in faults] == [(f.kind, f.times) for f in faults]
    assert got.stdout == cli("view", "--no-PG", str(bam)).decode()


def _fail_or_write_late(item: str) -> Any:
    """A stage's task: ``fail`` raises at once; a path sleeps, then writes that file."""
    import time

    if item == "fail":
        raise ValueError("boom")
    time.sleep(2.0)
    Path(item).write_text("late")
    return {"output": item}


def test_a_failed_stage_returns_after_its_running_tasks_stop(client: Any, tmp_path: Path) -> None:
    """A cancelled task that was already running is not stopped by Dask: the failed stage waits
    for it, so the job's cleanup that follows cannot race a task still writing its outputs."""
    late = tmp_path / "late"
    driver = distributed._Driver(client, "faults", False, 1, None, None)
    with pytest.raises(ValueError, match="boom"):
        driver.run("stage", [str(late), "fail"], fn=_fail_or_write_late)
    assert late.read_text() == "late"
