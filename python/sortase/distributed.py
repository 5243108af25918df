"""sortase's jobs on a Dask cluster (``dask.distributed``): sort, merge, markdup (query-grouped
and coordinate-sorted input), flagstat, idxstats, index, snp-pileup and view counting across machines, byte-identical to
one machine.

AGD datasets (``sortase agd import``; a directory, local or ``s3://``): :func:`sort`,
:func:`flagstat`, :func:`idxstats` and :func:`count` accept a dataset where they accept a BAM,
its chunks being the tasks' inputs (a sort: byte-identical to ``sortase sort`` of the dataset's
``sortase agd export``). :func:`agd_markdup` is ``sortase agd markdup`` (the dataset's
``duplicate`` group, byte-identical to the one-machine job's). :func:`merge`, :func:`markdup`,
:func:`index` and :func:`snp_pileup` take BAMs only (a dataset has no BAM index; export it first)
and refuse a dataset with :class:`sortase.ArgumentError`.

Every job is planned on the driver by the Rust library (``sortase::tasks``), cut into tasks that
are plain JSON, and each stage's tasks run as Dask tasks (``pure=False``, ``retries=2``) that call
the Rust task runner on a worker; the driver gathers their outputs, plans the next stage and
finishes. A sort or a merge is finished with no output byte through the driver (:func:`_assemble`):
the library lays the output out from the parts' sidecars and the driver writes the index only;
tasks place the parts (exactly the bytes ``sortase sort`` / ``sortase merge`` write). Tasks write
under temporary names and rename, so a retried task (a worker lost, a task re-run) is harmless. A
job that fails for good removes its work directory and leaves no output.

Storage: a path every worker sees (NFS, Lustre, or the local disk of a one-machine cluster), or
object storage through fsspec (``s3://bucket/key``, with ``storage_options`` for s3fs): then each
task reads its inputs from their objects by ranges, through the library's reader (the one
``sortase view s3://…`` reads with on one machine: its retries, its read-ahead), runs, and uploads
the files it wrote under the job's work prefix (the other tasks read those the same way). Files a
task cannot read that way (an index minimap2 loads, a CRAM htslib reads), and every input where the
``storage_options`` hold what the library cannot follow (a profile, a botocore config), are copied
to the task's scratch directory first: the byte ranges it reads into a sparse local file at the
same offsets, through fsspec. A sort's or merge's output is then one S3
multipart upload whose parts the workers add (server-side copies of the reduce tasks' part objects
where they can); the driver creates and completes it (aborts it on failure) and uploads the index.

>>> from dask.distributed import Client, LocalCluster
>>> from sortase import distributed
>>> with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as client:
...     report = distributed.sort("in.bam", "sorted.bam", client=client, write_index=True)
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from typing import (Any, Callable, Dict, Iterator, List, NoReturn, Optional, Sequence, Set, Tuple,
                    Union)

from . import Report, _sortase

__all__ = ["WorkerDiskFull", "agd_markdup", "count", "flagstat", "idxstats", "idxstats_text",
           "index", "markdup", "merge", "snp_pileup", "sort"]

PathLike = Union[str, "os.PathLike[str]"]

#: Bytes a task reads past its last planned block (a record may span blocks; the boundary check
#: reads the block at the range's end), included in the spans the library gives (``task_io``). A
#: task that still reads past them is re-run on the whole object.
SLACK = _sortase.TASK_READ_SLACK


# ---------------------------------------------------------------- storage


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


#: The S3 client's own retries (botocore's "standard" mode: exponential back-off with jitter on
#: throttling such as 503 SlowDown, on 500/502/503/504 and on connection errors and resets), unless
#: ``storage_options`` sets ``config_kwargs={"retries": ...}`` itself.
S3_RETRIES = {"mode": "standard", "max_attempts": 8}
#: Attempts of a transfer that the S3 client does not retry: a read that returns fewer bytes than
#: asked (a body cut short under an honest Content-Length) or fails its checksum; back-off from
#: RETRY_DELAY seconds, doubling.
RETRY_ATTEMPTS = 5
RETRY_DELAY = 0.2


def _fs(url: str, storage_options: Optional[Dict[str, Any]]) -> Any:
    import fsspec

    protocol = url.split("://", 1)[0]
    options = dict(storage_options or {})
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", S3_RETRIES)
        options["config_kwargs"] = config
    return fsspec.filesystem(protocol, **options)


class _ShortRead(OSError):
    """A transfer that ended early or arrived damaged: retried by :func:`_retry`."""


def _transient(e: BaseException) -> bool:
    if isinstance(e, _ShortRead):
        return True
    try:
        from botocore.exceptions import FlexibleChecksumError
    except ImportError:
        return False
    return isinstance(e, FlexibleChecksumError)


def _retry(url: str, call: Callable[[], Any]) -> Any:
    """``call()``, again after a back-off when it fails transiently (what the S3 client's own
    retries do not cover); any error that ends it names ``url``."""
    for attempt in range(RETRY_ATTEMPTS):
        try:
            return call()
        except Exception as e:
            if _transient(e) and attempt + 1 < RETRY_ATTEMPTS:
                time.sleep(RETRY_DELAY * 2**attempt)
                continue
            if url in str(e):
                raise
            try:
                named = OSError(f"{url}: {e}") if isinstance(e, _ShortRead) else type(e)(f"{url}: {e}")
            except Exception:
                named = OSError(f"{url}: {e}")
            raise named from e
    raise AssertionError("unreachable")


def _esc(path: str) -> str:
    """``path`` as it appears inside a JSON string."""
    return json.dumps(path)[1:-1]


class _Remote:
    """A job on object storage: the driver's scratch root ``root`` stands for the remote files
    (``files``: local path under root -> URL; everything else under root -> ``prefix`` + relative
    path). Plain data: it travels with every task."""

    def __init__(self, root: str, prefix: str, files: Dict[str, str], storage_options: Any):
        self.root = root
        self.prefix = prefix.rstrip("/")
        self.files = files
        self.storage_options = storage_options
        #: Bytes the driver fetched to plan.
        self.driver_bytes = 0
        #: Inputs (local name -> URL) the driver has not copied: it plans on the objects through
        #: ranged reads, and copies them whole only where that fails (:func:`_plan`).
        self.unfetched: Dict[str, str] = {}
        #: Inputs (local names) that many tasks read whole, such as fq2bam's minimap2 index: a
        #: worker process fetches each once and links it into every task's scratch directory
        #: (:func:`_shared_copy`).
        self.shared: Set[str] = set()

    def __getstate__(self) -> Dict[str, Any]:
        # What a task needs (not the driver's bookkeeping).
        return {k: v for k, v in self.__dict__.items() if k not in ("driver_bytes", "unfetched")}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state, driver_bytes=0, unfetched={})

    def fetch_inputs(self) -> None:
        """Copies the inputs not yet fetched whole to their local names (a planner that cannot
        read an object by ranges, or a fallback plan, reads them there)."""
        fs = self.fs()
        while self.unfetched:
            local, url = next(iter(self.unfetched.items()))
            self.driver_bytes += _fetch(fs, url, local, None)
            del self.unfetched[local]

    def url(self, local: str, root: Optional[str] = None) -> str:
        """Where the file at ``local`` (under ``root``, default the driver's) lives remotely."""
        rel = os.path.relpath(local, root or self.root)
        canonical = os.path.join(self.root, rel)
        if canonical in self.files:
            return self.files[canonical]
        for base, url in self.files.items():
            # A file inside an input directory (an AGD dataset's chunk files).
            if canonical.startswith(base + os.sep):
                return url.rstrip("/") + "/" + os.path.relpath(canonical, base).replace(os.sep, "/")
        return f"{self.prefix}/{rel}"

    def fs(self) -> Any:
        return _fs(self.prefix, self.storage_options)


def _fetch(fs: Any, url: str, local: str, ranges: Optional[List[Tuple[int, int]]]) -> int:
    """Materialises ``url`` at ``local``: whole, or only ``ranges`` of a sparse file of its size.
    Returns the bytes fetched."""
    os.makedirs(os.path.dirname(local), exist_ok=True)
    size = _retry(url, lambda: fs.size(url))
    if ranges is None:
        def whole() -> int:
            fs.get_file(url, local)
            got = os.path.getsize(local)
            if got != size:
                raise _ShortRead(f"read {got} of {size} bytes")
            return got

        return int(_retry(url, whole))
    fetched = 0
    merged: List[List[int]] = []
    for start, end in sorted(ranges):
        start, end = max(0, start), min(size, end)
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)  # overlapping ranges: fetched once
        else:
            merged.append([start, end])
    with open(local, "wb") as f:
        f.truncate(size)
        for start, end in merged:
            data = _retry(url, lambda: _cat_range(fs, url, start, end))
            f.seek(start)
            f.write(data)
            fetched += len(data)
    return fetched


def _cat_range(fs: Any, url: str, start: int, end: int) -> bytes:
    """Bytes ``start..end`` of ``url``, all of them (else :class:`_ShortRead`)."""
    data = fs.cat_file(url, start=start, end=end)
    if len(data) != end - start:
        raise _ShortRead(f"read {len(data)} of the {end - start} bytes at {start}")
    return bytes(data)


def _raise_named(e: BaseException, names: Dict[str, str]) -> NoReturn:
    """Raises ``e`` with the local names of remote files (``names``: local path -> URL) in its
    message replaced by their URLs, so an error names the file as the user gave it. Only sortase's
    own errors, which carry a message alone, are rewritten; others are raised as they are."""
    from ._errors import SortaseError

    if not isinstance(e, SortaseError) or getattr(e, "errno", None) is not None or len(e.args) != 1:
        raise e
    text = str(e)
    for local in sorted(names, key=len, reverse=True):  # a longer name first: no prefix clash
        text = text.replace(local, names[local])
    if text == str(e):
        raise e
    raise type(e)(text) from None


def _run_remote(task_json: str, threads: int, max_memory: Optional[int], remote: _Remote
                ) -> Tuple[str, int, int, int, bool]:
    """Runs a task of a job on object storage in a scratch directory of its own: lets it read its
    streamed inputs from their objects, fetches the others (their byte ranges; the whole objects,
    all of them, if the task fails that way), runs it, uploads what it wrote. Returns the output,
    the bytes it read (copied and streamed), the bytes of those its reader streamed from the
    objects, the bytes uploaded, and whether the whole objects had to be fetched."""
    fs = remote.fs()
    settings = _s3_settings(remote.storage_options)
    scratch = tempfile.mkdtemp(prefix="sortase-dask-task-")
    try:
        local_json = task_json.replace(_esc(remote.root), _esc(scratch))
        # What the task reads (byte ranges, header included; whether only through the library's
        # reader) and writes: the library knows.
        io = json.loads(_sortase.task_io(local_json))
        reads = [(r["path"], r["ranges"], r.get("streamed", False)) for r in io["reads"]
                 if os.path.commonpath([r["path"], scratch]) == scratch]  # else a shared path
        writes = io["writes"]
        for path in writes:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        fetched, streamed_bytes, refetched = 0, 0, False
        for whole in (False, True):
            refetched = whole
            # A file the task reads through the library's reader stands for its object: the
            # task reads it by ranges, as one machine reads an s3:// input (the same code). The
            # others are copied here first: whole, or their spans into a sparse file.
            aliases: Dict[str, str] = {}
            for path, ranges, streamed in reads:
                if os.path.join(remote.root, os.path.relpath(path, scratch)) in remote.shared:
                    fetched += _shared_copy(fs, remote.url(path, scratch), path)
                elif streamed and settings is not None and not whole:
                    aliases[path] = remote.url(path, scratch)
                else:
                    fetched += _fetch(fs, remote.url(path, scratch), path, None if whole else ranges)
            try:
                if aliases:
                    _sortase.configure_s3(**settings, keep_aliases=True)
                    out, streamed_bytes = _sortase.task_run_remote(
                        local_json, aliases, threads=threads, max_memory=max_memory)
                else:
                    out = _sortase.task_run(local_json, threads=threads, max_memory=max_memory)
                break
            except Exception as e:
                if whole:
                    _raise_named(e, {p: remote.url(p, scratch) for p, _, _ in reads})
        written = 0
        for path in writes:
            url = remote.url(path, scratch)
            _retry(url, lambda: fs.put_file(path, url))
            written += os.path.getsize(path)
        out = out.replace(_esc(scratch), _esc(remote.root))
        return out, fetched + streamed_bytes, streamed_bytes, written, refetched
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: The worker process's copies of shared inputs (URL -> (its ETag and size, local file)), see
#: :func:`_shared_copy`.
_SHARED: Dict[str, Tuple[str, str]] = {}
_SHARED_LOCK = threading.Lock()


def _shared_root() -> str:
    """A new directory for a shared copy: in the Dask worker's local directory (which Dask removes
    with the worker, also after a crash), else a temporary one removed when the process exits."""
    try:
        from dask.distributed import get_worker

        base = os.path.join(get_worker().local_directory, "sortase-shared")
        os.makedirs(base, exist_ok=True)
        return tempfile.mkdtemp(dir=base)
    except (ImportError, ValueError):
        root = tempfile.mkdtemp(prefix="sortase-dask-shared-")
        atexit.register(shutil.rmtree, root, True)
        return root


def _shared_copy(fs: Any, url: str, local: str) -> int:
    """Links ``local`` to the worker process's one copy of ``url`` (fetched whole by the first
    task that needs it, into :func:`_shared_root`); returns the bytes fetched now. The library
    keys its cached minimap2 index by the file, not the name, so the index is also loaded once
    per process."""
    os.makedirs(os.path.dirname(local), exist_ok=True)
    info = _retry(url, lambda: fs.info(url))
    version = f"{info.get('ETag') or info.get('LastModified')}:{info.get('size')}"
    with _SHARED_LOCK:  # a second task of the process waits for the first one's copy
        fetched = 0
        known, copy = _SHARED.get(url, ("", ""))
        if known != version or not os.path.exists(copy):
            if copy:
                shutil.rmtree(os.path.dirname(copy), ignore_errors=True)  # an older version
            copy = os.path.join(_shared_root(), os.path.basename(url))
            fetched = _fetch(fs, url, copy, None)
            _SHARED[url] = (version, copy)
    try:
        os.link(copy, local)
    except OSError:  # another file system than the scratch directory's
        shutil.copyfile(copy, local)
    return fetched


class WorkerDiskFull(OSError):
    """A task failed because the local disk of its worker is full (or the worker process reached
    its file-size limit). The driver runs the task again on another worker; the job fails with
    this error when no worker is left."""

    def __init__(self, worker: Optional[str], message: str):
        super().__init__(errno.ENOSPC, message)
        #: The worker's address (``None`` outside a Dask worker).
        self.worker = worker

    def __reduce__(self) -> Any:
        return (WorkerDiskFull, (self.worker, self.strerror))


def _disk_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return True
    # sortase's OutputError and errors named by _retry carry the OS error's text only.
    text = str(e)
    return any(m in text for m in ("No space left on device", "File too large",
                                   "Disk quota exceeded"))


def _worker_address() -> Optional[str]:
    try:
        from dask.distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return None


def _cpu_seconds() -> float:
    """User+system CPU seconds of this process so far (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_task(task_json: str, threads: int, max_memory: Optional[int], remote: Optional[_Remote]) -> Dict[str, Any]:
    """The Dask task: runs one sortase task on this worker. Its CPU seconds are the worker
    process's during the task: exact with one task at a time per worker process (one thread per
    worker), an over-estimate when tasks share a process."""
    start = time.perf_counter()
    cpu = _cpu_seconds()
    refetched, streamed = False, 0
    try:
        if remote is None:
            out = _sortase.task_run(task_json, threads=threads, max_memory=max_memory)
            try:
                read, written = _sortase.task_local_bytes(task_json)
            except (OSError, ValueError):
                read, written = 0, 0
        else:
            out, read, streamed, written, refetched = _run_remote(task_json, threads, max_memory,
                                                                  remote)
    except Exception as e:
        if _disk_full(e) and not isinstance(e, WorkerDiskFull):
            raise WorkerDiskFull(_worker_address(), str(e)) from e
        raise
    return {
        "output": json.loads(out),
        "seconds": time.perf_counter() - start,
        "cpu_seconds": _cpu_seconds() - cpu,
        "read": read,
        "streamed": streamed,
        "written": written,
        "refetched": refetched,
    }


# ---------------------------------------------------------------- the driver


@contextlib.contextmanager
def _connect(client: Any, scheduler: Optional[str], progress: bool) -> Iterator[Any]:
    """The client: given, connected to ``scheduler``, or a ``LocalCluster`` sized to the machine
    (one single-threaded worker process per core), closed at the end."""
    from dask.distributed import Client, LocalCluster

    if client is not None:
        yield client
        return
    if scheduler is not None:
        with Client(scheduler) as c:
            yield c
        return
    n = os.cpu_count() or 1
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


class _Driver:
    def __init__(self, client: Any, name: str, progress: Optional[bool], threads: int,
                 max_memory: Optional[int], remote: Optional[_Remote]):
        self.client = client
        self.name = name
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.threads = threads
        self.max_memory = max_memory
        self.remote = remote
        self.token = uuid.uuid4().hex[:8]
        self.phases: List[Dict[str, Any]] = []
        #: Job-specific facts for the report's ``distributed`` (fq2bam: the index loads).
        self.extra: Dict[str, Any] = {}
        #: The URLs a remote sort or merge wrote (output, then index).
        self.uploaded: List[str] = []
        #: The tasks run so far (JSON), for the clean stage (:func:`_clean`).
        self.ran: List[str] = []

    def say(self, text: str, end: str = "\n") -> None:
        if self.progress:
            print(text, end=end, file=sys.stderr, flush=True)

    def timed(self, name: str, f: Callable[[], Any]) -> Any:
        """Runs a driver step; its wall and CPU seconds (the driver process's, which also hosts
        a LocalCluster's scheduler) go to the report."""
        start, cpu = time.perf_counter(), _cpu_seconds()
        value = f()
        self.phases.append({"name": name, "seconds": time.perf_counter() - start,
                            "cpu_seconds": _cpu_seconds() - cpu})
        return value

    def stage(self, plan: str, stage: str, outputs: List[Any]) -> List[Any]:
        start = time.perf_counter()
        tasks = [json.dumps(t) for t in json.loads(
            _sortase.task_stage(plan, stage, json.dumps(outputs), threads=self.threads))]
        self.ran.extend(tasks)
        return self.run(stage, tasks, start=start)

    def run(self, stage: str, items: List[Any], fn: Optional[Callable[..., Dict[str, Any]]] = None,
            start: Optional[float] = None, **kwargs: Any) -> List[Any]:
        """Runs ``fn`` (default: a sortase task, :func:`_run_task`) on every item as Dask tasks of
        the phase ``stage``; returns their outputs in completion order."""
        from dask.distributed import as_completed

        start = time.perf_counter() if start is None else start
        tasks = items
        keys = [f"sortase-{self.name}-{stage}-{i}-{self.token}" for i in range(len(tasks))]
        if fn is None:
            fn, kwargs = _run_task, dict(threads=self.threads, max_memory=self.max_memory,
                                         remote=self.remote)
        futures = self.client.map(fn, tasks, **kwargs, key=keys, pure=False, retries=2)
        item = {f.key: i for i, f in enumerate(futures)}
        full: List[str] = []  # workers whose disk filled up
        results = []
        try:
            pending = as_completed(futures)
            for future in pending:
                try:
                    results.append(future.result())
                except WorkerDiskFull as e:
                    # Dask retried the task (on that worker, likely): run it elsewhere.
                    if e.worker is not None and e.worker not in full:
                        full.append(e.worker)
                    others = [w for w in self.client.scheduler_info().get("workers", {})
                              if w not in full]
                    if e.worker is None or not others:
                        raise
                    i = item[future.key]
                    again = self.client.submit(fn, tasks[i], **kwargs,
                                               key=f"{keys[i]}-{len(futures)}", pure=False,
                                               retries=2, workers=others,
                                               allow_other_workers=False)
                    item[again.key] = i
                    futures.append(again)
                    pending.add(again)
                    self.say(f"\nsortase-dask {self.name} {stage}: {e}; task {i} runs on "
                             "another worker")
                    continue
                self.say(f"\rsortase-dask {self.name} {stage}: {len(results)}/{len(tasks)} tasks",
                         end="")
            self.say("")
        except BaseException:
            self.say("")
            self.client.cancel(futures)
            self._wait_stopped({f.key for f in futures})
            raise
        self.phases.append({
            "name": stage,
            "seconds": time.perf_counter() - start,
            "tasks": len(tasks),
            "task_seconds": sum(r["seconds"] for r in results),
            "task_cpu_seconds": sum(r.get("cpu_seconds", 0.0) for r in results),
            "bytes_read": sum(r["read"] for r in results),
            # Of those, read from the objects by the tasks' reader (not copied first).
            "bytes_streamed": sum(r.get("streamed", 0) for r in results),
            "bytes_written": sum(r["written"] for r in results),
            "whole_object_fetches": sum(r["refetched"] for r in results),
            # Tasks run again on another worker after their worker's disk filled up.
            "tasks_moved": len(futures) - len(tasks),
        })
        if stage == "upload":
            self.phases[-1]["bytes_copied_server_side"] = sum(r["output"]["copied"] for r in results)
        if stage == "clean":
            self.phases[-1]["files_removed"] = sum(r["output"] for r in results)
        return [r["output"] for r in results]

    def _wait_stopped(self, keys: Set[str], timeout: float = 120.0) -> None:
        """Waits until no worker still runs a task of ``keys``. Cancelling a future does not stop
        its task's function: a task running when another failed would go on and write its outputs
        (in the work directory or prefix) after the driver removed them. The wait ends early if the
        workers cannot be asked."""
        def running(dask_worker: Any) -> List[str]:
            return [str(ts.key) for ts in dask_worker.state.all_running_tasks]

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                busy = self.client.run(running)
            except Exception:
                return
            if not any(k in keys for ks in busy.values() for k in ks):
                return
            time.sleep(0.05)

    def report(self, job_report: str) -> Report:
        report = json.loads(job_report)
        report["distributed"] = {
            "dashboard": getattr(self.client, "dashboard_link", None),
            "workers": len(self.client.scheduler_info().get("workers", {})),
            "phases": self.phases,
            "tasks": sum(p.get("tasks", 0) for p in self.phases),
            "bytes_moved": sum(p.get("bytes_read", 0) + p.get("bytes_written", 0) for p in self.phases),
        }
        report["distributed"].update(self.extra)
        if self.remote is not None:
            report["distributed"]["plan_bytes_read"] = self.remote.driver_bytes
        return Report._from(report)


def _run(kind: str, job: Dict[str, Any], cut: Dict[str, Any], *, client: Any, scheduler: Optional[str],
         progress: Optional[bool], threads: int, max_memory: Optional[int],
         remote: Optional[_Remote], output: Optional[str] = None,
         extras: Optional[Dict[str, str]] = None) -> Report:
    """Plans ``job``, runs its stages and finishes it; a sort or a merge (``output``: its URL on
    object storage) is assembled by :func:`_assemble`."""
    with _connect(client, scheduler, bool(progress)) as c:
        if kind not in ("sort", "agd_sort", "markdup", "fq2bam") and cut.get("tasks") is None:
            # Four range tasks per worker thread, as the single-machine jobs cut per thread.
            workers = c.scheduler_info().get("workers", {}).values()
            cut = dict(cut, tasks=4 * max(1, sum(w.get("nthreads", 1) for w in workers)))
        d = _Driver(c, kind, progress, threads, max_memory, remote)
        d.say(f"sortase-dask: dashboard {c.dashboard_link}")
        plan = d.timed("plan", lambda: _plan(kind, job, cut, threads, max_memory, remote))
        try:
            try:
                outputs, assembled = _stages(d, plan)
            except Exception:
                with _by_ranges(remote):
                    fallback = _sortase.task_fallback(plan)
                if fallback is None:
                    raise
                plan = fallback
                outputs, assembled = _stages(d, plan)
            if assembled:
                text = _assemble(d, plan, outputs, output, extras)
            else:
                with _by_ranges(remote):  # an index's finish reads the input's header
                    text = d.timed("finish", lambda: _sortase.task_finish(
                        plan, json.dumps(outputs), threads=threads))
        except BaseException:
            with contextlib.suppress(Exception):
                _sortase.task_abort(plan)
            raise
        report = d.report(text)
        if remote is not None and output is not None:
            report["outputs"] = d.uploaded
        return report


def _run_ranges(kind: str, job: Dict[str, Any], tasks: Optional[int], remote: Optional[_Remote], *,
                client: Any, scheduler: Optional[str], progress: Optional[bool]) -> Report:
    """:func:`_run` of a one-stage job of range (or chunk) tasks: ``tasks`` of them (default four
    per worker thread), each on one thread, with no memory cap."""
    return _run(kind, job, {"tasks": tasks}, client=client, scheduler=scheduler, progress=progress,
                threads=1, max_memory=None, remote=remote)


def _output_spec(path: Optional[str], level: Optional[int] = None, uncompressed: bool = False,
                 write_index: bool = False, index_format: Optional[str] = None) -> Dict[str, Any]:
    """A job spec's ``output``: the file ``path`` (``None``: standard output), its format from its
    name."""
    return {"path": path, "format": None, "level": level, "uncompressed": uncompressed,
            "write_index": write_index, "index_format": index_format, "reference": None}


def _work_prefix(remote: Optional[_Remote]) -> Optional[str]:
    """A job spec's ``temp_prefix``: under a remote job's local root (``None``: the library's
    default, next to the output)."""
    return os.path.join(remote.root, "work") if remote is not None else None


def _memory_cut(memory: Optional[int], reduce_tasks: Optional[int]
                ) -> Tuple[Dict[str, Any], Optional[int]]:
    """The plan's cut of a job of ``task_memory`` tasks (``memory`` bytes) and its tasks' memory
    cap: a map task's runtime holds its range (about ``memory``) with room to spare."""
    cut = {"task_memory": memory, "reduce_tasks": reduce_tasks}
    return cut, None if memory is None else max(2 * memory, 64 << 20)


def _s3_settings(options: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """``storage_options`` (s3fs's keywords) as the library's S3 settings, or ``None`` where they
    hold anything else it cannot follow (a profile, a botocore config): then the driver copies."""
    options = dict(options or {})
    client = dict(options.pop("client_kwargs", None) or {})
    options.pop("config_kwargs", None)  # retries and timeouts: the library has its own
    settings = {"endpoint_url": options.pop("endpoint_url", None) or client.pop("endpoint_url", None),
                "region": client.pop("region_name", None),
                "key": options.pop("key", None), "secret": options.pop("secret", None),
                "token": options.pop("token", None), "anon": bool(options.pop("anon", False))}
    options.pop("use_listings_cache", None)
    if options or client:
        return None
    return settings


@contextlib.contextmanager
def _by_ranges(remote: Optional[_Remote]) -> Iterator[None]:
    """Inside, the library reads the inputs the driver has not copied (``remote.unfetched``: S3
    objects whose storage options it can follow, see :func:`_plan`) from their objects by ranged
    reads, under their local names; the bytes it fetched count as the driver's."""
    if remote is None or not remote.unfetched:
        yield
        return
    settings = _s3_settings(remote.storage_options)
    assert settings is not None, "_plan copies the inputs it cannot read by ranges"
    before = _sortase.remote_fetched()[0]
    _sortase.configure_s3(**settings, aliases=dict(remote.unfetched))
    try:
        yield
    finally:
        _sortase.configure_s3(clear=True)
        remote.driver_bytes += _sortase.remote_fetched()[0] - before


def _plan(kind: str, job: Dict[str, Any], cut: Dict[str, Any], threads: int,
          max_memory: Optional[int], remote: Optional[_Remote]) -> str:
    """The job's plan. On object storage the library reads the inputs not fetched whole
    (``remote.unfetched``) by ranges from the objects their local names stand for (the header,
    sampled blocks, the probes at the cuts: under 1% of a 400 MB BAM); the tasks fetch their
    ranges to those names. Where it cannot (storage options it does not follow, a planner that
    fails on them) the inputs are copied whole and the plan made on the copies."""
    text, cut_text = json.dumps(job), json.dumps(cut)
    if remote is not None and remote.unfetched:
        if (_s3_settings(remote.storage_options) is not None
                and all(u.startswith("s3://") for u in remote.unfetched.values())):
            try:
                with _by_ranges(remote):
                    return _sortase.task_plan(kind, text, cut_text, threads=threads,
                                              max_memory=max_memory)
            except Exception:
                pass  # planned on the copies below: the same errors, if the input is bad
        remote.fetch_inputs()
    return _sortase.task_plan(kind, text, cut_text, threads=threads, max_memory=max_memory)


def _stages(d: _Driver, plan: str) -> Tuple[List[Any], bool]:
    """Runs the plan's stages in the order the library gives (``task_stage_graph``: each stage's
    tasks are planned from the outputs of the stages it takes); returns the outputs the finish
    takes and whether the output is assembled from parts. Nothing here depends on the kind."""
    graph = json.loads(_sortase.task_stage_graph(plan))
    done: Dict[str, List[Any]] = {}
    for stage in graph["stages"]:
        taken = [o for name in stage["takes"] for o in done[name]]
        done[stage["name"]] = d.stage(plan, stage["name"], taken)
        _count_index_loads(d, done[stage["name"]])
    return [o for name in graph["finish"] for o in done[name]], graph["assembled"]


def _count_index_loads(d: _Driver, outputs: List[Any]) -> None:
    """For the report: the align tasks of an fq2bam, the minimap2 index loads and the worker
    processes that ran them (the index is loaded once per worker process, not per task)."""
    loaded = [o["fq2bam"]["align"] for o in outputs
              if isinstance(o, dict) and isinstance(o.get("fq2bam"), dict) and "align" in o["fq2bam"]]
    if loaded:
        d.extra["index"] = {
            "align_tasks": len(loaded),
            "loads": sum(1 for a in loaded if a["index_loaded"]),
            "worker_processes": len({a["pid"] for a in loaded}),
        }


# ---------------------------------------------------------------- the finish of a sort or merge
#
# No output byte passes through the driver. The library lays the output out from the parts'
# sidecars (their blocks' sizes and index summaries): the header's BGZF blocks, each part's offset,
# the EOF block, and the index, which the driver writes (`task_layout`). Then:
# - on a shared file system the driver preallocates the output's temporary file, one `place` task
#   per part writes it at its offset (the first also the header, the last the EOF block), and the
#   driver renames the file and its index into place (`task_commit`);
# - on object storage the parts become the parts of one S3 multipart upload at the output's key:
#   the driver creates the upload, `upload` tasks on the workers add its parts (UploadPartCopy of a
#   part object written by a reduce task, server-side; or, for a part that needs the header, the
#   EOF block or small neighbours, the bytes fetched by the worker and uploaded with UploadPart),
#   and the driver completes it, then uploads the index. A failure aborts the upload.

#: S3's smallest part (all but the last part of a multipart upload), its largest, and its most parts.
MIN_PART = 5 << 20
MAX_PART = 5 << 30
MAX_PARTS = 10_000


def _assemble(d: _Driver, plan: str, outputs: List[Any], output: Optional[str],
              extras: Optional[Dict[str, str]] = None) -> str:
    """Finishes a sort or merge from its last stage's outputs; returns the report (JSON).
    ``extras``: on object storage, where each other file the layout wrote (a markdup's metrics
    file, by its local target) goes: a URL, or a local path."""
    remote = d.remote
    if remote is None:
        layout = d.timed("layout", lambda: _sortase.task_layout(
            plan, json.dumps(outputs), True, threads=d.threads))
        laid = json.loads(layout)
        d.phases[-1]["index_segments"] = laid["index_segments"]
        d.run("place", [json.dumps(t) for t in json.loads(_sortase.task_place(layout))])
        _clean(d, laid["work_dir"])
        return d.timed("finish", lambda: _sortase.task_commit(layout))
    assert output is not None, "a remote sort or merge has an output URL"
    fs = remote.fs()
    start, cpu = time.perf_counter(), _cpu_seconds()
    fetched = 0
    # The sidecars only: the parts' block sizes and index summaries.
    for sidecar in json.loads(_sortase.task_layout_reads(plan, json.dumps(outputs))):
        fetched += _fetch(fs, remote.url(sidecar), sidecar, None)
    text = _sortase.task_layout(plan, json.dumps(outputs), False, threads=d.threads)
    layout = json.loads(text)
    d.phases.append({"name": "layout", "seconds": time.perf_counter() - start,
                     "cpu_seconds": _cpu_seconds() - cpu, "bytes_read": fetched,
                     "index_segments": layout["index_segments"]})
    specs = _multipart_plan(layout, remote)
    bucket, key, _ = fs.split_path(output)
    start = time.perf_counter()
    upload = _retry(output, lambda: fs.call_s3("create_multipart_upload", Bucket=bucket,
                                               Key=key))["UploadId"]
    try:
        done = d.run("upload", specs, fn=_upload_part, remote=remote, bucket=bucket,
                     object_key=key, upload_id=upload)
        parts = sorted(({"PartNumber": p["part"], "ETag": p["etag"]} for p in done),
                       key=lambda p: p["PartNumber"])
        if [p["PartNumber"] for p in parts] != list(range(1, len(specs) + 1)):
            raise RuntimeError(f"{output}: the upload tasks returned parts {parts}")
        start = time.perf_counter()
        _retry(output, lambda: fs.call_s3("complete_multipart_upload", Bucket=bucket, Key=key,
                                          UploadId=upload, MultipartUpload={"Parts": parts}))
    except BaseException:
        with contextlib.suppress(Exception):
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
        raise
    d.uploaded = [output]
    written = 0
    try:
        if layout["index"] is not None:
            index = layout["index"]
            url = f"{output.rsplit('/', 1)[0]}/{os.path.basename(index['target'])}"
            _upload(remote, index["temp"], url)
            written += os.path.getsize(index["temp"])
            d.uploaded.append(url)
        for extra in layout.get("extras", []):
            dest = (extras or {}).get(extra["target"], extra["target"])
            written += os.path.getsize(extra["temp"])
            if _is_remote(dest):
                _upload(remote, extra["temp"], dest)
            else:
                shutil.move(extra["temp"], dest)
            d.uploaded.append(dest)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(output)  # no output without its index
        raise
    d.phases.append({"name": "finish", "seconds": time.perf_counter() - start,
                     "bytes_written": written})
    with contextlib.suppress(Exception):
        _sortase.task_abort(plan)  # the driver's scratch work directory
    return json.dumps(layout["report"])


def _clean(d: _Driver, work_dir: str) -> None:
    """The clean stage of a finish on a shared file system: the workers remove the files the
    tasks wrote (runs, parts, records: 2-4x the input), each file by one worker, so the driver's
    commit only renames and removes a near-empty work directory. Freeing those blocks is kernel
    work per byte; spread over the workers it is no single-node phase. Only files inside the
    job's work directory are removed; one that cannot be is left to the commit, whose report
    warns."""
    groups: List[List[str]] = []
    for task in d.ran:
        paths = [p for p in json.loads(_sortase.task_io(task))["writes"]
                 if os.path.commonpath([os.path.abspath(p), work_dir]) == work_dir]
        if paths:
            groups.append(paths)
    if not groups:
        return
    n = min(len(groups), 2 * max(1, len(d.client.scheduler_info().get("workers", {}))))
    d.run("clean", [sum(groups[i::n], []) for i in range(n)], fn=_remove_files)


def _remove_files(paths: List[str]) -> Dict[str, Any]:
    """A clean task (:func:`_clean`): removes ``paths`` (gone already is fine)."""
    start, cpu = time.perf_counter(), _cpu_seconds()
    removed = 0
    for path in paths:
        with contextlib.suppress(OSError):
            os.remove(path)
            removed += 1
    return {"output": removed, "seconds": time.perf_counter() - start,
            "cpu_seconds": _cpu_seconds() - cpu, "read": 0, "written": 0, "refetched": False}


def _multipart_plan(layout: Dict[str, Any], remote: _Remote, min_part: Optional[int] = None,
                    max_part: int = MAX_PART, max_parts: int = MAX_PARTS) -> List[Dict[str, Any]]:
    """The parts of the output's multipart upload from its ``layout``: each a list of pieces, the
    header's and the EOF block's bytes (``{"bytes": hex}``) or a byte range of a part object
    (``{"url", "start", "end", "size"}``, ``size`` the whole object's). Every part but the last has
    at least ``min_part`` bytes (S3's 5 MiB, or more so that there are at most ``max_parts``), none
    more than ``max_part``. A stretch of a part object long enough to stand alone is its own part
    (copied server-side); the header, the EOF block and short objects join their neighbours."""
    floor = MIN_PART if min_part is None else min_part
    floor = max(floor, -(-layout["size"] // (max_parts - 1)))
    pieces: List[Dict[str, Any]] = [{"bytes": layout["header"]["bytes"]}]
    for p in layout["parts"]:
        if p["bytes"]:
            pieces.append({"url": remote.url(p["path"]), "start": 0, "end": p["bytes"],
                           "size": p["bytes"]})
    pieces.append({"bytes": layout["eof"]["bytes"]})

    def length(piece: Dict[str, Any]) -> int:
        return len(piece["bytes"]) // 2 if "bytes" in piece else piece["end"] - piece["start"]

    parts: List[List[Dict[str, Any]]] = []
    group: List[Dict[str, Any]] = []
    filled = 0
    for piece in pieces:
        if "bytes" in piece:
            group.append(piece)
            filled += length(piece)
        else:
            at, end = piece["start"], piece["end"]
            if group and filled < floor:
                # Fill the open part up to the floor; the rest of a short object joins it too.
                take = min(end - at, floor - filled)
                if end - (at + take) < floor and filled + end - at <= max_part:
                    take = end - at
                group.append(dict(piece, start=at, end=at + take))
                filled += take
                at += take
            if at < end and end - at >= floor:
                if group:
                    parts.append(group)
                    group, filled = [], 0
                # The rest of the object stands alone: server-side copies of at most max_part.
                n = -(-(end - at) // max_part)
                for i in range(n):
                    a, b = at + (end - at) * i // n, at + (end - at) * (i + 1) // n
                    parts.append([dict(piece, start=a, end=b)])
            elif at < end:
                group.append(dict(piece, start=at, end=end))
                filled += end - at
        if group and filled >= floor:
            parts.append(group)
            group, filled = [], 0
    if group:
        parts.append(group)
    return [{"part": i + 1, "pieces": g} for i, g in enumerate(parts)]


def _upload_part(spec: Dict[str, Any], remote: _Remote, bucket: str, object_key: str,
                 upload_id: str) -> Dict[str, Any]:
    """The Dask task adding one part to the output's multipart upload: a server-side copy
    (UploadPartCopy) of a part object's byte range when the part is one, else the pieces'
    bytes (part objects' ranges fetched by this worker) with UploadPart. Returns its number and
    ETag, and the bytes this worker read and sent."""
    start, cpu = time.perf_counter(), _cpu_seconds()
    fs = remote.fs()
    output = f"s3://{bucket}/{object_key}"
    pieces = spec["pieces"]
    for p in pieces:
        if "url" in p:
            size = _retry(p["url"], lambda: fs.info(p["url"])["size"])
            if size != p["size"]:
                raise RuntimeError(f"{p['url']}: {size} bytes, the layout has {p['size']}")
    read = written = copied = 0
    if len(pieces) == 1 and "url" in pieces[0]:
        p = pieces[0]
        src_bucket, src_key, _ = fs.split_path(p["url"])
        r = _retry(output, lambda: fs.call_s3(
            "upload_part_copy", Bucket=bucket, Key=object_key, UploadId=upload_id,
            PartNumber=spec["part"], CopySource={"Bucket": src_bucket, "Key": src_key},
            CopySourceRange=f"bytes={p['start']}-{p['end'] - 1}"))
        etag = r["CopyPartResult"]["ETag"]
        copied = p["end"] - p["start"]
    else:
        data = bytearray()
        for p in pieces:
            if "url" in p:
                chunk = _retry(p["url"], lambda: _cat_range(fs, p["url"], p["start"], p["end"]))
                read += len(chunk)
                data += chunk
            else:
                data += bytes.fromhex(p["bytes"])
        body = bytes(data)
        r = _retry(output, lambda: fs.call_s3("upload_part", Bucket=bucket, Key=object_key,
                                              UploadId=upload_id, PartNumber=spec["part"],
                                              Body=body))
        etag = r["ETag"]
        written = len(data)
    return {"output": {"part": spec["part"], "etag": etag, "copied": copied},
            "seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu,
            "read": read, "written": written, "refetched": False}


@contextlib.contextmanager
def _storage(inputs: Sequence[str], outputs: Sequence[str], storage_options: Any,
             fetch: bool = True
             ) -> Iterator[Tuple[Optional[_Remote], List[str], Callable[[str], str]]]:
    """Local paths as they are; object storage through a driver scratch directory. Yields the
    remote description (``None`` for local jobs), the local names of ``inputs`` and a function
    mapping a local output name to where it must be uploaded (identity locally). ``fetch``: the
    driver fetches the remote inputs whole (else the caller fetches what it needs)."""
    if not any(_is_remote(p) for p in list(inputs) + list(outputs)):
        yield None, [str(p) for p in inputs], lambda p: p
        return
    anchor = next(p for p in list(outputs) + list(inputs) if _is_remote(p))
    root = tempfile.mkdtemp(prefix="sortase-dask-")
    prefix = f"{anchor}.sortase-dask-{uuid.uuid4().hex[:12]}"
    files: Dict[str, str] = {}
    local_inputs = []
    fs = _fs(anchor, storage_options)
    try:
        for i, p in enumerate(inputs):
            if not _is_remote(p):
                local_inputs.append(os.path.abspath(p))
                continue
            local = os.path.join(root, "in", str(i), os.path.basename(p))
            files[local] = p
            local_inputs.append(local)
        remote = _Remote(root, prefix, files, storage_options)
        if fetch:
            # The planners read the header, sampled blocks and probes for record boundaries
            # anywhere in the file: through ranged reads of the object where the library can
            # (S3), else on a whole copy (_plan); the tasks fetch their ranges.
            remote.unfetched = dict(files)
        try:
            yield remote, local_inputs, lambda p: p
        except Exception as e:
            # The driver's errors (planning, the finish) name the inputs as the user gave them.
            _raise_named(e, files)
    finally:
        with contextlib.suppress(Exception):
            fs.invalidate_cache()
            if fs.exists(prefix):
                fs.rm(prefix, recursive=True)
        shutil.rmtree(root, ignore_errors=True)


def _upload(remote: _Remote, local: str, url: str) -> None:
    """Uploads ``local`` to ``url`` under a temporary key, then moves it into place."""
    fs = remote.fs()
    temp = f"{url}.sortase-tmp-{uuid.uuid4().hex[:8]}"
    try:
        _retry(url, lambda: fs.put_file(local, temp))
        _retry(url, lambda: fs.mv(temp, url))
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(temp)
        raise


def _check_remote_output(remote: Optional[_Remote], output: str) -> None:
    """A sort or merge on object storage writes its output there: the workers add its parts to a
    multipart upload (a local output would pass every byte through the driver)."""
    from . import ArgumentError

    if remote is not None and not _is_remote(output):
        raise ArgumentError(f"{output}: the inputs are on object storage, so must the output be "
                            "(an s3:// URL), or give paths every worker sees for both")


def _local_output(remote: Optional[_Remote], output: str) -> str:
    """Where the driver writes ``output``: itself locally, a scratch file for object storage."""
    if remote is None:
        return output
    local = os.path.join(remote.root, "out", os.path.basename(output))
    os.makedirs(os.path.dirname(local), exist_ok=True)
    return local


def _upload_outputs(remote: _Remote, report: Report, output: str, local_output: str) -> None:
    """Uploads the files the finish wrote (the output, then its index next to it) and records
    them in ``report``."""
    start = time.perf_counter()
    uploaded = []
    base = output.rsplit("/", 1)[0]
    report_locals = [os.fspath(p) for p in report["outputs"]]
    for local in report_locals:
        url = output if local == local_output else f"{base}/{os.path.basename(local)}"
        _upload(remote, local, url)
        uploaded.append(url)
    report["outputs"] = uploaded
    report["distributed"]["phases"].append({
        "name": "upload", "seconds": time.perf_counter() - start,
        "bytes_written": sum(os.path.getsize(p) for p in report_locals)})


def _order(by_name: bool, by_name_lex: bool, tag: Optional[str]) -> Any:
    """The job spec's ``order`` from samtools' ``-n``, ``-N`` and ``-t TAG``."""
    if tag is not None:
        return {"tag": {"tag": tag, "by_name": True if by_name else (False if by_name_lex else None)}}
    return "name" if by_name else ("name_lex" if by_name_lex else "coordinate")


def _size(value: Union[int, str, None]) -> Optional[int]:
    """Bytes from an int or a samtools size (``"768M"``, ``"2G"``)."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


# ---------------------------------------------------------------- the jobs


def sort(
    input: PathLike,
    output: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    by_name: bool = False,
    by_name_lex: bool = False,
    tag: Optional[str] = None,
    level: Optional[int] = None,
    uncompressed: bool = False,
    write_index: bool = False,
    index_format: Optional[str] = None,
    no_pg: bool = False,
    task_memory: Union[int, str, None] = None,
    reduce_tasks: Optional[int] = None,
    threads: int = 1,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """Sorts a BAM on a Dask cluster; the output (and index) are byte-identical to ``sortase sort``
    with the same options.

    ``client``: a ``dask.distributed.Client``; else ``scheduler``: its address
    (``tcp://host:8786``); else a ``LocalCluster`` with one worker process per core, closed at the
    end. ``input``/``output``: paths every worker sees, or ``s3://`` URLs (``storage_options`` go to
    s3fs). ``task_memory``: the memory of one map task (bytes or ``"768M"``); the input is cut
    into ranges of about that much record data. ``threads``: threads of each task. ``progress``:
    tasks done/total on stderr (default: when stderr is a terminal).

    ``input`` may also be an AGD dataset directory (``sortase agd import``; local or ``s3://``):
    then the count stage has no tasks (the manifest gives each chunk's first record and count),
    each map task decodes and sorts a run of consecutive chunks (about ``task_memory`` of records;
    on object storage it fetches those chunks' files), and the output is byte-identical to
    ``sortase sort`` of the BAM ``sortase agd export`` writes from the dataset (its header, and
    the flags of an ``agd markdup`` ``duplicate`` group, as export writes them).

    Returns the sort's report plus ``distributed``: the dashboard address, workers, per-phase
    wall seconds, task counts, task wall and CPU seconds and bytes read and written by the tasks
    (driver phases: wall and CPU seconds).
    """
    input, output = os.fspath(input), os.fspath(output)
    order = _order(by_name, by_name_lex, tag)
    memory = _size(task_memory)
    with _sort_input(input, output, storage_options) as (remote, local_input, kind):
        _check_remote_output(remote, output)
        local_output = _local_output(remote, output)
        job = {
            "input": local_input,
            "output": _output_spec(local_output, level, uncompressed, write_index, index_format),
            "order": order,
            "temp_prefix": _work_prefix(remote),
            "max_fan_in": 64,
            "program": None if no_pg else {"command_line": f"sortase-dask sort -o {output} {input}"},
        }
        cut, max_memory = _memory_cut(memory, reduce_tasks)
        return _run(kind, job, cut, client=client, scheduler=scheduler, progress=progress,
                    threads=threads, max_memory=max_memory, remote=remote,
                    output=output if remote is not None else None)


def merge(
    inputs: Sequence[PathLike],
    output: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    by_name: bool = False,
    by_name_lex: bool = False,
    tag: Optional[str] = None,
    attach_rg: bool = False,
    combine_rg: bool = False,
    combine_pg: bool = False,
    seed: Optional[int] = None,
    header: Optional[PathLike] = None,
    force: bool = False,
    level: Optional[int] = None,
    uncompressed: bool = False,
    write_index: bool = False,
    index_format: Optional[str] = None,
    no_pg: bool = False,
    tasks: Optional[int] = None,
    threads: int = 1,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """Merges sorted BAMs on a Dask cluster; the output (and index) are byte-identical to
    ``sortase merge`` with the same options (give ``seed``, samtools' ``-s``, to compare: without
    it colliding @RG/@PG IDs get suffixes seeded by the clock, as in samtools).

    The driver samples the inputs and chooses the key ranges exactly as ``sortase merge`` does;
    each task merges a stretch of consecutive key ranges from every input into a part file; the
    driver builds the index from their summaries and tasks place the parts (:func:`_assemble`).
    ``tasks``: how many stretches (default 4 per worker thread; at most the number of key ranges). Inputs and output: paths every
    worker sees, or ``s3://`` URLs (then a task fetches each input's header and the byte spans its
    key ranges read). Options as :func:`sortase.merge` (``attach_rg`` is ``-r``, ``combine_rg``
    ``-c``, ``combine_pg`` ``-p``, ``header`` ``-h FILE``, ``force`` ``-f``); the other keywords as
    :func:`sort`. Merges BAM into BAM only (SAM/CRAM inputs, or inputs whose reference orders
    conflict, take ``sortase merge``'s one-thread merge, which has no tasks). An AGD dataset
    among the inputs is refused with :class:`sortase.ArgumentError` (merging datasets is not
    supported).
    """
    from . import ArgumentError

    inputs = [os.fspath(p) for p in inputs]
    output = os.fspath(output)
    _refuse_datasets("merge", inputs, storage_options,
                     "merging datasets is not supported; sort one with sort(), or export them "
                     "(sortase agd export) and merge the BAMs")
    header_path = os.fspath(header) if header is not None else None
    fetch = inputs + ([header_path] if header_path is not None else [])
    with _storage(fetch, [output], storage_options) as (remote, local_inputs, _):
        if remote is not None and not force and _fs(output, storage_options).exists(output):
            raise ArgumentError(f"{output}: the output file exists (use force=True, -f, to overwrite)")
        _check_remote_output(remote, output)
        local_output = _local_output(remote, output)
        job = {
            "inputs": [os.path.abspath(p) for p in local_inputs[:len(inputs)]],
            "output": _output_spec(local_output, level, uncompressed, write_index, index_format),
            "order": _order(by_name, by_name_lex, tag),
            "attach_rg": attach_rg,
            "combine_rg": combine_rg,
            "combine_pg": combine_pg,
            "seed": seed,
            "header_file": os.path.abspath(local_inputs[-1]) if header_path is not None else None,
            "force": force,
            "program": None if no_pg else {
                "command_line": " ".join(["sortase-dask", "merge", "-o", output, *inputs])},
        }
        return _run("merge", job, {"tasks": tasks}, client=client, scheduler=scheduler,
                    progress=progress, threads=threads, max_memory=None, remote=remote,
                    output=output if remote is not None else None)


def markdup(
    input: PathLike,
    output: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    mode: str = "auto",
    accept_dup_marks: bool = False,
    ignore_unmated: bool = False,
    max_read_length: int = 500,
    metrics: Optional[PathLike] = None,
    optical_distance: int = 100,
    read_name_regex: Optional[str] = None,
    max_optical_set: int = 300_000,
    level: Optional[int] = None,
    uncompressed: bool = False,
    no_pg: bool = False,
    task_memory: Union[int, str, None] = None,
    reduce_tasks: Optional[int] = None,
    threads: int = 1,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """Marks duplicates on a Dask cluster: samblaster's algorithm on query-grouped input,
    Picard MarkDuplicates' on coordinate-sorted input; the output (and Picard's metrics file) is
    byte-identical to ``sortase markdup`` with the same options.

    ``mode``: ``"auto"`` (``@HD SO:coordinate`` is Picard's mode, anything else samblaster's),
    ``"query"`` or ``"coordinate"``.

    Query-grouped input, stages: ``map`` (each planned byte range proves its end, names its
    first and last records, and gives every group's signature with its file order, written
    partitioned by hash into one file per task, and how the range's records fall into BGZF
    blocks; its first group is kept apart, and dropped by the driver when it continues the range
    before's last group, which that range's task followed), ``reduce`` (one hash partition each:
    the first occurrence of a signature in file order is kept, later ones are duplicates),
    ``encode`` (the records from a block start to the next, flagged and compressed into the
    blocks ``sortase markdup`` writes). The input is read twice, as on one machine.

    Coordinate-sorted input, stages: ``map`` (each planned byte range proves its end as above;
    its read ends, each with an index in file order, ``range << 40 | position``: fragments and
    the pairs whose two ends the range holds, partitioned by a hash of the duplicate key; the ends
    whose mates lie in other ranges, partitioned by a hash of the read name; the counts of the
    metrics), ``join`` (one read-name partition each: those ends
    paired in file order, as the one machine pairs them), ``reduce`` (one duplicate-key partition
    each: the duplicate sets, optical duplicates included, decided by the one-machine engine's code
    on the same ends in the same order, so ties keep the same read), ``encode`` (as above, 0x400 set
    on the duplicates and cleared elsewhere, as Picard). The driver writes the metrics file from the
    tasks' counts and histograms.

    Then the parallel finish of :func:`sort` (tasks place the parts; on object storage they are
    the parts of one multipart upload).

    Options that change record lengths or write side files (``--removeDups``,
    ``--addMateTags``, ``-d``, ``-s``, ``--unmappedFile``, ``--write-index``) are refused with
    :class:`sortase.ArgumentError`: run :func:`sortase.markdup` for those. ``accept_dup_marks``
    (``-a``), ``ignore_unmated`` and ``max_read_length`` are samblaster's options; ``metrics``
    (Picard's metrics file: a path, or a URL on object storage), ``optical_distance``,
    ``read_name_regex`` (``"null"``: no optical duplicates) and ``max_optical_set`` Picard's.
    ``task_memory`` bounds a map task's range and a reduce (or join) task's partition;
    ``reduce_tasks``: partitions (default one per map task, more when a partition would not fit
    in ``task_memory``). The other keywords as :func:`sort`."""
    from . import ArgumentError

    input, output = os.fspath(input), os.fspath(output)
    metrics_target = None if metrics is None else os.fspath(metrics)
    if mode not in ("auto", "query", "coordinate"):
        raise ArgumentError(f"mode {mode!r}: auto, query or coordinate")
    _refuse_datasets("markdup", [input], storage_options,
                     "mark its duplicates with distributed.agd_markdup (the duplicate group)")
    memory = _size(task_memory)
    with _storage([input], [output], storage_options) as (remote, (local_input,), _):
        _check_remote_output(remote, output)
        local_output = _local_output(remote, output)
        extras: Dict[str, str] = {}
        local_metrics = None
        if metrics_target is not None:
            if remote is None:
                if _is_remote(metrics_target):
                    raise ArgumentError(f"{metrics_target}: the metrics file is on object "
                                        "storage, so must the input and output be")
                local_metrics = os.path.abspath(metrics_target)
            else:
                local_metrics = os.path.join(remote.root, "metrics",
                                             os.path.basename(metrics_target))
                os.makedirs(os.path.dirname(local_metrics), exist_ok=True)
                extras[local_metrics] = (metrics_target if _is_remote(metrics_target)
                                         else os.path.abspath(metrics_target))
        command = ["sortase-dask", "markdup"]
        if metrics_target is not None:
            command += ["--metrics", metrics_target]
        command += ["-o", output, input]
        job = {
            "input": local_input,
            "output": _output_spec(local_output, level, uncompressed),
            "mode": mode,
            "remove_duplicates": False,
            "temp_prefix": _work_prefix(remote),
            "samblaster": {"accept_dups": accept_dup_marks, "ignore_unmated": ignore_unmated,
                           "max_read_length": max_read_length},
            "picard": {"metrics": local_metrics, "optical_distance": optical_distance,
                       "read_name_regex": read_name_regex, "max_optical_set": max_optical_set},
            "program": None if no_pg else {"command_line": " ".join(command)},
        }
        cut, max_memory = _memory_cut(memory, reduce_tasks)
        report = _run("markdup", job, cut, client=client, scheduler=scheduler, progress=progress,
                      threads=threads, max_memory=max_memory, remote=remote,
                      output=output if remote is not None else None, extras=extras)
        if remote is None and local_metrics is not None:
            report["outputs"] = [p if os.fspath(p) != local_metrics else metrics_target
                                 for p in report["outputs"]]
        return report


#: The staging directory of an agd markdup's group inside the dataset (``.duplicate.`` and the
#: library's ``sortase-tasks-PID-N.tmp``).
STAGING = ".duplicate.sortase-tasks-"


def agd_markdup(
    dataset: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    mode: str = "auto",
    accept_dup_marks: bool = False,
    ignore_unmated: bool = False,
    max_read_length: int = 500,
    optical_distance: int = 100,
    read_name_regex: Optional[str] = None,
    max_optical_set: int = 300_000,
    level: Optional[int] = None,
    command_line: Optional[str] = None,
    task_memory: Union[int, str, None] = None,
    reduce_tasks: Optional[int] = None,
    threads: int = 1,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """``sortase agd markdup`` on a Dask cluster: marks the duplicates of an AGD dataset (a
    directory every worker sees, or ``s3://``) and adds them to it as its ``duplicate`` group,
    leaving the dataset byte-identical to the one-machine job's with the same options (every
    file, the manifest included when ``command_line`` is the one-machine run's; default: this
    call's ``sortase-dask agd-markdup ...``).

    Stages: ``map`` (one task per run of consecutive chunks of about ``task_memory`` of
    records: in samblaster's mode each read-name group's signature with its order, the run's
    leading records of the chunk before's last read name left to the run before and its last
    group followed into the next chunks; in Picard's mode the read ends with their ordinals in
    the dataset), ``join`` (Picard's mode: the ends whose mates lie in other runs, paired by read
    name), ``reduce`` (one partition each: samblaster's first occurrence in dataset order, or
    Picard's duplicate sets, optical duplicates included), ``write`` (one task per run: each
    chunk's ``duplicate`` file, into a staging directory inside the dataset). The driver then
    renames the staging directory to the group's and replaces ``manifest.json`` last, as the
    one-machine job; on object storage it copies the staged objects to the group's prefix
    (server-side), uploads the manifest last and removes the staging prefix and a replaced
    group's objects.

    A job that fails leaves the dataset as it was: no group, no staging or work files (locally
    and in the bucket). ``mode``, ``accept_dup_marks`` (``-a``), ``ignore_unmated``,
    ``max_read_length``, ``optical_distance``, ``read_name_regex`` and ``max_optical_set`` as
    :func:`markdup`; ``level``: the zstd level of the group's files (default 3, as the CLI's
    ``--level``). Picard's metrics file is not written (``sortase agd markdup`` refuses it too).
    ``task_memory``, ``reduce_tasks``, ``threads``, ``client``, ``scheduler``,
    ``storage_options`` and ``progress`` as :func:`markdup`."""
    from . import ArgumentError

    dataset = os.fspath(dataset).rstrip("/")
    if mode not in ("auto", "query", "coordinate"):
        raise ArgumentError(f"mode {mode!r}: auto, query or coordinate")
    if not _is_dataset(dataset, storage_options):
        raise ArgumentError(f"{dataset}: not an AGD dataset (no manifest.json)")
    memory = _size(task_memory)
    if command_line is None:
        command_line = " ".join(["sortase-dask", "agd-markdup", dataset])
    with _dataset(dataset, storage_options, False, footers=True) as (remote, local):
        fs = remote.fs() if remote is not None else None
        existing: List[str] = []
        if fs is not None:
            existing = [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(dataset, detail=False)]
            # The group goes to a directory the dataset does not have: the finish picks it on the
            # driver's copy, so the copy gets (empty) stand-ins for the bucket's directories.
            for entry in fs.ls(dataset, detail=True):
                if entry["type"] == "directory":
                    os.makedirs(os.path.join(local, entry["name"].rstrip("/").rsplit("/", 1)[-1]),
                                exist_ok=True)
        job = {
            "job": {
                "dataset": local,
                "mode": mode,
                "temp_prefix": _work_prefix(remote),
                "samblaster": {"accept_dups": accept_dup_marks, "ignore_unmated": ignore_unmated,
                               "max_read_length": max_read_length},
                "picard": {"optical_distance": optical_distance,
                           "read_name_regex": read_name_regex, "max_optical_set": max_optical_set},
                "command_line": command_line,
            },
            "remote": remote is not None,
        }
        if level is not None:
            job["job"]["zstd_level"] = level
        cut, max_memory = _memory_cut(memory, reduce_tasks)
        staging: Optional[str] = None
        group: Optional[str] = None
        try:
            report = _run("agd_markdup", job, cut, client=client, scheduler=scheduler,
                          progress=progress, threads=threads, max_memory=max_memory,
                          remote=remote)
            commit = report.pop("commit", None)
            if fs is not None:
                assert commit is not None, "a remote agd markdup's finish names its directories"
                staging = f"{dataset}/{commit['staging']}"
                group = f"{dataset}/{commit['dir']}"
                start = time.perf_counter()
                fs.invalidate_cache()
                with open(os.path.join(local, "manifest.json")) as f:
                    chunks = len(json.load(f)["chunks"])
                # A dataset without records has an empty group: no objects.
                staged = sorted(fs.ls(staging, detail=False)) if chunks else []
                if len(staged) != chunks:
                    raise RuntimeError(f"{staging}: {len(staged)} objects for {chunks} chunks")
                for url in staged:
                    name = url.rsplit("/", 1)[-1]
                    _retry(url, lambda: fs.copy(url, f"{group}/{name}"))
                # The manifest last: until it is replaced the dataset is what it was.
                _upload(remote, os.path.join(local, "manifest.json"), f"{dataset}/manifest.json")
                group = None
                with contextlib.suppress(Exception):
                    fs.rm(staging, recursive=True)
                if commit["replaced"] is not None:
                    with contextlib.suppress(Exception):
                        fs.rm(f"{dataset}/{commit['replaced']}", recursive=True)
                report["distributed"]["phases"].append({
                    "name": "commit", "seconds": time.perf_counter() - start,
                    "objects_copied_server_side": len(staged)})
            return report
        except BaseException:
            if fs is not None:
                with contextlib.suppress(Exception):
                    fs.invalidate_cache()
                    for url in (group, staging):
                        if url is not None and fs.exists(url):
                            fs.rm(url, recursive=True)
                    # A failure before the finish: the staging prefix the write tasks uploaded to.
                    for entry in fs.ls(dataset, detail=False):
                        name = entry.rstrip("/").rsplit("/", 1)[-1]
                        if name.startswith(STAGING) and name not in existing:
                            fs.rm(entry, recursive=True)
            raise


def fq2bam(
    index: PathLike,
    reads1: PathLike,
    reads2: Optional[PathLike] = None,
    output: Optional[PathLike] = None,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    preset: str = "sr",
    read_group: Optional[str] = None,
    markdup: str = "samblaster",
    md: bool = False,
    cs: bool = False,
    level: Optional[int] = None,
    write_index: bool = False,
    index_format: Optional[str] = None,
    no_pg: bool = False,
    chunk_templates: Optional[int] = None,
    scan_bytes: Union[int, str, None] = None,
    task_memory: Union[int, str, None] = None,
    reduce_tasks: Optional[int] = None,
    threads: int = 1,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """FASTQ to a sorted, duplicate-marked (indexed) BAM on a Dask cluster: byte-identical to
    ``sortase fq2bam -@ THREADS`` with the same options (``-@`` appears in minimap2's ``@PG CL:``
    as ``-t``: give the same ``threads``).

    ``index`` (a minimap2 ``.mmi`` or the reference FASTA) and the reads (``reads1``, and
    ``reads2`` of a pair; FASTQ/FASTA, plain, gzip or BGZF; or ``reads1`` an AGD dataset of the
    reads, from ``agd import``, aligned in runs of whole chunks) are paths every worker sees or,
    but for a dataset, ``s3://`` URLs; the ``output`` a path every worker sees or an ``s3://``
    URL (an ``s3://`` URL when an input is one). On object storage each task fetches the byte
    ranges of the reads it reads (the driver reads the files' first bytes, by ranges), and each
    worker process fetches the index once (every align task of the process links to that copy,
    and the index is loaded once per process); minimap2's ``@PG CL:`` names them as given.
    ``preset``, ``read_group`` (``-R``),
    ``md`` (``--MD``), ``cs`` (``--cs``), ``markdup`` (``"samblaster"``, ``"picard"`` or
    ``"none"``), ``level``, ``write_index``, ``index_format`` and ``no_pg`` as the CLI's flags.

    Stages: ``scan`` (BGZF reads, as ``bgzip`` writes them: one task per ``scan_bytes`` of
    compressed bytes of each file, default 64 MiB, finds and counts its records, so no task reads
    the whole file; the scans' positions are checked against each other), ``split`` (other reads,
    or BGZF reads that are not four-line FASTQ or not paired record for record: one task reads the
    reads once, with the one-machine job's checks, and writes them into one file), ``align``
    (chunks of ``chunk_templates`` templates, default ``task_memory`` / 1000 bytes, each read from
    its first record's position in the BGZF files or from the split's file; minimap2 on each
    chunk, the index loaded once per worker process; the
    records, and each template's samblaster signature partitioned by hash), ``dedup`` (one hash
    partition each: the first occurrence in input order is kept), ``map`` (each chunk's records
    flagged and sorted into a run), ``reduce`` (the sort's key ranges), then the parallel finish
    of :func:`sort`. With ``markdup="picard"`` the stages run without marking into a sorted BAM
    next to the output (libdeflate level 1, removed at the end and on failure), then
    :func:`markdup`'s stages in Picard's mode write the output (``sortase fq2bam --markdup
    picard`` writes the same bytes: its second pass is ``sortase markdup``'s writer) and, with
    ``write_index``, :func:`index` its index. The report's ``distributed.index`` counts the align
    tasks, the index loads and the worker processes that ran them. ``task_memory``, ``reduce_tasks`` (the dedup stage's
    partitions and the sort's reduce tasks), ``threads`` (of each task), ``client``,
    ``scheduler``, ``storage_options`` and ``progress`` as :func:`sort`.
    """
    from . import ArgumentError

    if output is None:
        raise ArgumentError("fq2bam needs an output (output=, -o)")
    if markdup not in ("samblaster", "none", "picard"):
        raise ArgumentError(f"markdup {markdup!r}: samblaster, picard or none")
    index, reads1, output = os.fspath(index), os.fspath(reads1), os.fspath(output)
    reads = [reads1] + ([os.fspath(reads2)] if reads2 is not None else [])
    if _is_remote(reads1) and _is_dataset(reads1, storage_options):
        raise ArgumentError(f"{reads1}: an AGD dataset of reads is aligned from a path every "
                            "worker sees (FASTQ may be on object storage)")
    command = ["sortase-dask", "fq2bam", "-x", index, "-o", output, *reads]
    program = None if no_pg else {"command_line": " ".join(command)}
    aligned = dict(index=index, reads=reads, client=client, scheduler=scheduler, preset=preset,
                   read_group=read_group, md=md, cs=cs, chunk_templates=chunk_templates,
                   scan_bytes=scan_bytes, task_memory=task_memory, reduce_tasks=reduce_tasks, threads=threads,
                   storage_options=storage_options, progress=progress, program=program)
    if markdup != "picard":
        return _fq2bam(output=output, markdup=markdup, level=level, write_index=write_index,
                       index_format=index_format, **aligned)
    data, index_path = _index_name(output, index_format)
    sorted_bam = _scratch_name(data, ".fq2bam-sorted.bam")
    try:
        report = _fq2bam(output=sorted_bam, markdup="none", level=1, write_index=False,
                         index_format=None, **aligned)
        marked = _markdup_bam(sorted_bam, data, client=client, scheduler=scheduler,
                              mode="coordinate", level=level, no_pg=True,
                              task_memory=task_memory, reduce_tasks=reduce_tasks,
                              threads=threads, storage_options=storage_options,
                              progress=progress)
    finally:
        _remove_quietly(sorted_bam, storage_options)
    report["outputs"] = [data]
    report["duplicate_records"] = marked["duplicate_records"]
    if isinstance(report.get("distributed"), dict):
        report["distributed"]["markdup"] = marked.get("distributed")
    if write_index:
        try:
            _index_bam(data, index_path, csi=not index_path.endswith(".bai"), client=client,
                       scheduler=scheduler, storage_options=storage_options, progress=progress)
        except BaseException:
            _remove_quietly(data, storage_options)
            raise
        report["outputs"].append(index_path)
    return report


def _index_bam(*args: Any, **kwargs: Any) -> Report:
    """:func:`index` (where a parameter named ``index`` hides it)."""
    return index(*args, **kwargs)


def _markdup_bam(*args: Any, **kwargs: Any) -> Report:
    """:func:`markdup` (where a parameter named ``markdup`` hides it)."""
    return markdup(*args, **kwargs)


def _index_name(output: str, index_format: Optional[str]) -> Tuple[str, str]:
    """The data file and the index of ``--write-index`` for BAM output to ``output``, as the
    library names them (``OUT##idx##INDEX``, else ``OUT.csi``, or ``OUT.bai`` by
    ``index_format``)."""
    from . import ArgumentError

    data, sep, idx = output.partition("##idx##")
    fmt = None if index_format is None else index_format.lower()
    if fmt not in (None, "bai", "csi"):
        raise ArgumentError(f"--index-format {index_format}: use bai or csi")
    bai = fmt == "bai" or (fmt is None and idx.endswith(".bai"))
    return data, (idx if sep else data + (".bai" if bai else ".csi"))


def _scratch_name(output: str, suffix: str) -> str:
    """A file next to ``output`` (a path or an object URL) for a job's intermediate result."""
    head, _, name = output.rpartition("/")
    scratch = f".{name}.sortase-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}"
    return f"{head}/{scratch}" if head or output.startswith("/") else scratch


def _remove_quietly(path: str, storage_options: Optional[Dict[str, Any]]) -> None:
    """Removes an intermediate file or object (and its temporary siblings); a missing one is fine."""
    try:
        if _is_remote(path):
            fs = _fs(path, storage_options)
            if fs.exists(path):
                fs.rm(path)
        elif os.path.exists(path):
            os.remove(path)
    except OSError:
        pass


def _fq2bam(*, index: str, reads: List[str], output: str, client: Any, scheduler: Optional[str],
            preset: str, read_group: Optional[str], markdup: str, md: bool, cs: bool,
            level: Optional[int], write_index: bool, index_format: Optional[str],
            chunk_templates: Optional[int], scan_bytes: Union[int, str, None],
            task_memory: Union[int, str, None], reduce_tasks: Optional[int], threads: int,
            storage_options: Optional[Dict[str, Any]], progress: Optional[bool],
            program: Optional[Dict[str, str]]) -> Report:
    """:func:`fq2bam` with samblaster's marking or none, to ``output``."""
    memory = _size(task_memory)
    with _storage([index, *reads], [output], storage_options) as (remote, local, _):
        _check_remote_output(remote, output)
        if remote is not None and _is_remote(index):
            remote.shared.add(local[0])  # every align task reads it whole: once per worker
        local_output = _local_output(remote, output)
        job = {
            "job": {
                "index": local[0],
                "reads1": local[1],
                "reads2": local[2] if len(local) > 2 else None,
                "output": _output_spec(local_output, level, False, write_index, index_format),
                "preset": preset,
                "read_group": read_group,
                "markdup": markdup,
                "md": md,
                "cs": cs,
                "temp_prefix": _work_prefix(remote),
                "max_fan_in": 64,
                "program": program,
            },
            "chunk_templates": chunk_templates,
            "scan_bytes": _size(scan_bytes),
            # minimap2's @PG CL names the index and reads as given, not the tasks' local copies.
            "names": [index, *reads] if remote is not None else None,
        }
        cut, max_memory = _memory_cut(memory, reduce_tasks)
        return _run("fq2bam", job, cut, client=client, scheduler=scheduler, progress=progress,
                    threads=threads, max_memory=max_memory, remote=remote,
                    output=output if remote is not None else None)


def flagstat(
    path: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    tasks: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """samtools flagstat on a Dask cluster: one task per byte range (``tasks``, default 4 per
    core of the driver; of a CRAM file, per run of whole containers). The report's ``counts``
    equal ``sortase flagstat``'s.

    ``path`` may also be an AGD dataset directory (local or ``s3://``): then each task counts a
    run of consecutive chunks from their ``results`` files alone (``tasks`` runs, at most one per
    chunk), and the counts equal ``sortase flagstat``'s of the dataset."""
    with _counted_input(os.fspath(path), storage_options) as (remote, local, _):
        return _run_ranges("flagstat", {"input": local}, tasks, remote, client=client,
                           scheduler=scheduler, progress=progress)


def _refuse_datasets(job: str, paths: Sequence[str], storage_options: Optional[Dict[str, Any]],
                     why: str) -> None:
    """An :class:`sortase.ArgumentError` naming the first of ``paths`` that is an AGD dataset
    (a job that reads BAMs only would fail on the directory with a confusing message)."""
    from . import ArgumentError

    for p in paths:
        if _is_dataset(p, storage_options):
            raise ArgumentError(f"{job}: {p} is an AGD dataset; {why}")


def _is_dataset(path: str, storage_options: Optional[Dict[str, Any]]) -> bool:
    """Whether ``path`` is an AGD dataset directory (it holds ``manifest.json``)."""
    if _is_remote(path):
        return bool(_fs(path, storage_options).exists(path.rstrip("/") + "/manifest.json"))
    return os.path.isfile(os.path.join(path, "manifest.json"))


#: Bytes of a Parquet file's end fetched for its footer (a chunk file's is a few KiB: one row
#: group of at most 11 columns).
FOOTER = 64 << 10


@contextlib.contextmanager
def _dataset(path: str, storage_options: Optional[Dict[str, Any]], need_positions: bool,
             outputs: Sequence[str] = (), footers: bool = False
             ) -> Iterator[Tuple[Optional[_Remote], str]]:
    """A dataset as the planner sees it: the directory itself, or (object storage) a driver copy
    of its manifest, plus the ``results`` files when a region query must compute the chunks'
    positions (a manifest that does not record them), plus with ``footers`` the end of the first
    chunk's group files (a sort estimates its record bytes from their footers). Tasks fetch the
    chunk files they read."""
    path = path.rstrip("/")
    with _storage([path], outputs, storage_options, fetch=False) as (remote, (local,), _):
        if remote is not None and _is_remote(path):
            fs = remote.fs()
            manifest = os.path.join(local, "manifest.json")
            remote.driver_bytes += _fetch(fs, f"{path}/manifest.json", manifest, None)
            with open(manifest) as f:
                chunks = json.load(f)["chunks"]
            if need_positions and any("positions" not in c for c in chunks):
                for c in chunks:
                    name = f"results/{c['index']:06}.parquet"
                    remote.driver_bytes += _fetch(fs, f"{path}/{name}", os.path.join(local, name), None)
            for c in chunks[:1] if footers else []:
                for group in ("names", "bases", "qual", "results"):
                    name = f"{group}/{c['index']:06}.parquet"
                    url = f"{path}/{name}"
                    size = fs.size(url)
                    remote.driver_bytes += _fetch(fs, url, os.path.join(local, name),
                                                  [(size - FOOTER, size)])
        yield remote, local


@contextlib.contextmanager
def _counted_input(path: str, storage_options: Optional[Dict[str, Any]]
                   ) -> Iterator[Tuple[Optional[_Remote], str, bool]]:
    """The input of flagstat's and idxstats' range tasks, and whether it is an AGD dataset (whose
    tasks read the footers of its chunks' files, not a BAM's byte ranges)."""
    if _is_dataset(path, storage_options):
        with _dataset(path, storage_options, False) as (remote, local):
            yield remote, local, True
    else:
        with _storage([path], [], storage_options) as (remote, (local,), _):
            yield remote, local, False


@contextlib.contextmanager
def _sort_input(input: str, output: str, storage_options: Optional[Dict[str, Any]]
                ) -> Iterator[Tuple[Optional[_Remote], str, str]]:
    """The input of a sort as the planner sees it and the plan's kind: a BAM (``sort``; the
    driver plans on a whole copy of a remote one) or an AGD dataset (``agd_sort``)."""
    if _is_dataset(input, storage_options):
        with _dataset(input, storage_options, False, [output], footers=True) as (remote, local):
            yield remote, local, "agd_sort"
    else:
        with _storage([input], [output], storage_options) as (remote, (local,), _):
            yield remote, local, "sort"


def idxstats(
    path: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    tasks: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """samtools idxstats on a Dask cluster: like ``sortase idxstats``, from the BAM's index when it
    has one (``.bai`` next to it, or ``.csi``; read by the driver, no tasks), else one task per
    byte range (``tasks``, default 4 per worker thread) counting records per reference. A CRAM
    file is always counted (samtools reads no index for it), one task per run of whole
    containers. The report's ``rows`` equal ``sortase idxstats``'s; :func:`idxstats_text` gives
    its text.

    ``path`` may also be an AGD dataset directory (local or ``s3://``): then each task counts a
    run of consecutive chunks from the ``ref_id`` and ``flag`` columns of their ``results`` files
    (``tasks`` runs, at most one per chunk), and the rows equal ``sortase agd idxstats``'s, which
    are ``sortase idxstats``'s of the BAM ``sortase agd export`` writes (no index: samtools'
    counts by scanning, "file is not position sorted" for an unsorted dataset)."""
    path = os.fspath(path)
    with _counted_input(path, storage_options) as (remote, local, dataset):
        if remote is not None and not dataset:
            # The indexes the library looks for next to the BAM, fetched if present (the local
            # copy keeps the BAM's name, so each lands where the library looks for it).
            fs = remote.fs()
            for url, name in zip(_index_names(path), _index_names(local)):
                if fs.exists(url):
                    remote.driver_bytes += _fetch(fs, url, name, None)
        return _run_ranges("idxstats", {"input": local}, tasks, remote, client=client,
                           scheduler=scheduler, progress=progress)


def idxstats_text(report: Report) -> str:
    """samtools idxstats' text (``sortase idxstats``'s stdout) of an :func:`idxstats` report."""
    return "".join(f"{r['name']}\t{r['length']}\t{r['mapped']}\t{r['unmapped']}\n"
                   for r in report["rows"])


def count(
    path: PathLike,
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    tasks: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
    min_mapq: int = 0,
    require_flags: int = 0,
    exclude_flags: int = 0,
    regions: Optional[Sequence[str]] = None,
    multi_region: bool = False,
) -> int:
    """``sortase view -c``: a BAM's records, counted by flagstat's range tasks (QC-passed plus
    QC-failed); or on an AGD dataset directory (local or ``s3://``), ``sortase agd view -c`` with
    ``-q min_mapq``, ``-f require_flags``, ``-F exclude_flags``, ``regions`` (a coordinate-sorted
    dataset) and ``-M`` (``multi_region``), each task counting a run of consecutive chunks from
    their ``results`` files."""
    from . import ArgumentError

    path = os.fspath(path)
    if _is_dataset(path, storage_options):
        job = {
            "input": None,
            "output": _output_spec(None),
            "with_header": False, "header_only": False, "count": True,
            "require_flags": require_flags, "exclude_flags": exclude_flags, "min_mapq": min_mapq,
            "regions": list(regions or []), "multi_region": multi_region, "program": None,
        }
        with _dataset(path, storage_options, bool(regions)) as (remote, local):
            job["input"] = local
            report = _run_ranges("view", job, tasks, remote, client=client,
                                 scheduler=scheduler, progress=progress)
        for w in report["warnings"]:
            print(w, file=sys.stderr)
        return int(report["count"])
    if min_mapq or require_flags or exclude_flags or regions:
        raise ArgumentError("count: filters and regions are for AGD datasets (a BAM: sortase view -c)")
    report = flagstat(path, client=client, scheduler=scheduler, tasks=tasks,
                      storage_options=storage_options, progress=progress)
    return sum(report["counts"]["reads"])


def index(
    path: PathLike,
    output: Optional[PathLike] = None,
    *,
    csi: bool = False,
    min_shift: Optional[int] = None,
    client: Any = None,
    scheduler: Optional[str] = None,
    tasks: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """samtools index on a Dask cluster: each task summarises one byte range, the driver
    assembles the BAI/CSI (byte-identical to ``sortase index``). An AGD dataset is refused with
    :class:`sortase.ArgumentError` (it has no BAM index)."""
    path = os.fspath(path)
    _refuse_datasets("index", [path], storage_options,
                     "a dataset has no BAM index (its manifest records the chunks' positions); "
                     "index a BAM, e.g. the output of sort() of the dataset")
    # IndexJob::is_csi's rule, for the default name: -m implies -c (samtools), but -m 0 is a BAI.
    csi = (csi or min_shift is not None) and min_shift != 0
    target = os.fspath(output) if output is not None else path + (".csi" if csi else ".bai")
    with _storage([path], [target], storage_options) as (remote, (local,), _):
        local_target = _local_output(remote, target)
        job = {"input": local, "output": local_target, "csi": csi, "min_shift": min_shift}
        report = _run_ranges("index", job, tasks, remote, client=client,
                             scheduler=scheduler, progress=progress)
        if remote is not None:
            _upload(remote, local_target, target)
            report["outputs"] = [target]
        return report


def _bam_header_bytes(fs: Any, url: str) -> int:
    """The compressed bytes of a remote BAM up to the end of the block its header ends in (the
    whole object if the header does not end): fetched in growing prefixes, the end found by the
    library."""
    size = fs.size(url)
    want = 1 << 16
    while True:
        data = fs.cat_file(url, start=0, end=min(want, size))
        end = _sortase.bam_header_end(data)
        if end is not None:
            return end
        if want >= size:
            return size
        want *= 4


def _index_names(bam: str) -> List[str]:
    """Where the library looks for a BAM's index (``find_index``), in its order: ``BAM.bai``,
    ``BAM``-without-``.bam`` + ``.bai``, ``BAM.csi``."""
    return [f"{bam}.bai"] + ([f"{bam[:-4]}.bai"] if bam.endswith(".bam") else []) + [f"{bam}.csi"]


def _index_of(fs: Any, url: str) -> Optional[str]:
    """The index next to a remote BAM that the library would read."""
    return next((c for c in _index_names(url) if fs.exists(c)), None)


def snp_pileup(
    vcf: PathLike,
    output: PathLike,
    bams: Sequence[PathLike],
    *,
    client: Any = None,
    scheduler: Optional[str] = None,
    count_orphans: bool = False,
    gzip: bool = False,
    ignore_overlaps: bool = False,
    min_base_quality: Optional[int] = None,
    min_map_quality: Optional[int] = None,
    max_depth: Optional[int] = None,
    pseudo_snps: Optional[int] = None,
    min_read_counts: Optional[Sequence[int]] = None,
    tasks: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    progress: Optional[bool] = None,
) -> Report:
    """FACETS snp-pileup on a Dask cluster: each task piles up a run of regions of every BAM (read
    through their indexes), the driver writes the CSV (byte-identical to ``sortase snp-pileup``).
    Options left ``None`` take FACETS' defaults.

    Paths every worker sees, or ``s3://`` URLs (``storage_options`` go to s3fs): then the driver
    fetches the VCF whole (it plans from the sites and writes every line from them) and of each BAM
    its index and header only; a task fetches each BAM's header, index and the index chunks of its
    regions (computed by the library when planning), and the whole BAMs only if a batch reads
    outside them (``whole_object_fetches`` in the report's phases). The CSV is uploaded under a
    temporary key and moved into place."""
    vcf, output = os.fspath(vcf), os.fspath(output)
    bam_paths = [os.fspath(b) for b in bams]
    _refuse_datasets("snp_pileup", bam_paths, storage_options,
                     "snp-pileup reads indexed BAMs; sort() the dataset with write_index=True")
    with _storage([vcf] + bam_paths, [output], storage_options, fetch=False) as (remote, local_inputs, _):
        local_output = output
        if remote is not None:
            from . import OutputError

            target = output + ".gz" if gzip and not output.endswith(".gz") else output
            if _is_remote(target) and _fs(target, storage_options).exists(target):
                raise OutputError(f"{target}: output file already exists; snp-pileup does not overwrite it")
            if _is_remote(output):
                local_output = _local_output(remote, output)
            fs = remote.fs()
            for url, local in zip([vcf] + bam_paths, local_inputs):
                if not _is_remote(url):
                    continue
                if url == vcf:
                    remote.driver_bytes += _fetch(fs, url, local, None)
                    continue
                index = _index_of(fs, url)
                if index is not None:
                    local_index = os.path.join(os.path.dirname(local), os.path.basename(index))
                    remote.files[local_index] = index
                    remote.driver_bytes += _fetch(fs, index, local_index, None)
                remote.driver_bytes += _fetch(fs, url, local, [(0, _bam_header_bytes(fs, url))])
        job = json.loads(_sortase.snp_pileup_spec(
            os.path.abspath(local_inputs[0]), os.path.abspath(local_output),
            [os.path.abspath(b) for b in local_inputs[1:]]))
        job.update(count_orphans=count_orphans or job["count_orphans"], gzip=gzip,
                   ignore_overlaps=ignore_overlaps or job["ignore_overlaps"])
        for key, value in (("min_base_quality", min_base_quality), ("min_map_quality", min_map_quality),
                           ("max_depth", max_depth), ("pseudo_snps", pseudo_snps),
                           ("min_read_counts", None if min_read_counts is None else list(min_read_counts))):
            if value is not None:
                job[key] = value
        report = _run_ranges("snp_pileup", job, tasks, remote, client=client,
                             scheduler=scheduler, progress=progress)
        if remote is not None and _is_remote(output):
            _upload_outputs(remote, report, output, local_output)
        return report
