"""sortase.distributed on a LocalCluster of 2 worker processes: byte identity with the single-machine
CLI (sort by coordinate with --write-index, sort -n, merge of 3 inputs with its index, index,
flagstat, idxstats, snp-pileup) over a local path and over an S3 API server (moto) started on
127.0.0.1; a worker killed in the middle of a sort; a failing job leaves no output and no work directory."""

from __future__ import annotations

import contextlib
import glob
import os
import random
import signal
import subprocess
import tempfile
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

pysam = pytest.importorskip("pysam")
distributed_mod = pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402

from conftest import input_fixture  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# The CLI to compare with: $SORTASE_BIN, else target/release, else target/debug (what `cargo test`
# leaves in CI), as conftest.cli_binary.
CLI = Path(os.environ.get("SORTASE_BIN") or next(
    (p for p in (ROOT / "target" / prof / "sortase" for prof in ("release", "debug")) if p.exists()),
    ROOT / "target" / "release" / "sortase"))
RECORDS = 40_000
# Small map tasks, so that even the test BAM is cut into several ranges and key ranges.
TASK_MEMORY = "1M"


def cli(*args: str) -> bytes:
    return subprocess.run([str(CLI), *args], check=True, capture_output=True).stdout


def make_bam(path: Path, records: int = RECORDS, seed: int = 18) -> Path:
    rng = random.Random(seed)
    header = {"HD": {"VN": "1.6"}, "SQ": [{"SN": f"chr{i}", "LN": 1_000_000} for i in range(1, 4)]}
    with pysam.AlignmentFile(str(path), "wb", header=header) as out:
        for i in range(records):
            a = pysam.AlignedSegment(out.header)
            a.query_name = f"read{rng.randrange(records)}:{i % 7}"
            a.query_sequence = "".join(rng.choice("ACGT") for _ in range(60))
            a.query_qualities = pysam.qualitystring_to_array("I" * 60)
            if rng.random() < 0.05:
                a.flag = 4 | 1 | 64
                a.reference_id = -1
                a.reference_start = -1
            else:
                a.flag = rng.choice([0, 16, 1 | 2 | 64 | 32, 1 | 2 | 128 | 16, 256, 1024, 2048])
                a.reference_id = rng.randrange(3)
                # Few distinct positions: many ties, whose order is the input order.
                a.reference_start = rng.randrange(0, 999_000, 10)
                a.mapping_quality = rng.randrange(61)
                a.cigar = [(0, 60)]
            a.set_tag("NM", rng.randrange(5))
            out.write(a)
    return path


bam = input_fixture(make_bam, "data")


def leftovers(directory: Path) -> list:
    return sorted(p.name for p in directory.iterdir() if "sortase" in p.name and p.name.endswith(".tmp"))


def test_sort_coordinate_with_index_is_byte_identical(bam: Path, client, tmp_path: Path) -> None:
    out = tmp_path / "dask.bam"
    report = distributed.sort(bam, out, client=client, write_index=True, no_pg=True,
                              task_memory=TASK_MEMORY, progress=False)
    cli("sort", "--no-PG", "--write-index", "-@2", "-o", str(tmp_path / "one.bam"), str(bam))
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert (tmp_path / "dask.bam.csi").read_bytes() == (tmp_path / "one.bam.csi").read_bytes()
    assert report["records"] == RECORDS
    d = report["distributed"]
    assert [p["name"] for p in d["phases"]] == ["plan", "count", "map", "reduce", "layout", "place",
                                                "clean", "finish"]
    assert d["phases"][2]["tasks"] > 1, "the test input is cut into several map tasks"
    assert d["bytes_moved"] > 0 and d["workers"] == 2
    assert leftovers(tmp_path) == []


def test_sort_by_name_is_byte_identical(bam: Path, client, tmp_path: Path) -> None:
    out = tmp_path / "dask.bam"
    distributed.sort(bam, out, client=client, by_name=True, no_pg=True, task_memory=TASK_MEMORY,
                     reduce_tasks=3, progress=False)
    cli("sort", "--no-PG", "-n", "-o", str(tmp_path / "one.bam"), str(bam))
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()


def test_index_and_flagstat_match_one_machine(bam: Path, client, tmp_path: Path) -> None:
    sorted_bam = tmp_path / "s.bam"
    cli("sort", "--no-PG", "-o", str(sorted_bam), str(bam))
    report = distributed.index(sorted_bam, tmp_path / "dask.bai", client=client, tasks=5, progress=False)
    cli("index", "-o", str(tmp_path / "one.bai"), str(sorted_bam))
    assert (tmp_path / "dask.bai").read_bytes() == (tmp_path / "one.bai").read_bytes()
    assert report["distributed"]["phases"][1]["tasks"] > 1
    counts = distributed.flagstat(sorted_bam, client=client, tasks=5, progress=False)["counts"]
    tsv = [line.split("\t") for line in cli("flagstat", "-O", "tsv", str(sorted_bam)).decode().splitlines()]
    expect = {row[2]: [int(row[0]), int(row[1])] for row in tsv if row[0].isdigit()}
    assert counts["reads"] == expect["total (QC-passed reads + QC-failed reads)"]
    assert counts["secondary"] == expect["secondary"]
    assert counts["supplementary"] == expect["supplementary"]
    assert counts["dup"] == expect["duplicates"]
    assert counts["mapped"] == expect["mapped"]
    assert counts["read1"] == expect["read1"]
    assert distributed.count(sorted_bam, client=client, progress=False) == int(cli("view", "-c", str(sorted_bam)))


@pytest.fixture(scope="module")
def merge_inputs(tmp_path_factory: pytest.TempPathFactory) -> list:
    """Three coordinate-sorted BAMs, each with sortase's @PG line (their IDs collide: the merge
    renames them with suffixes seeded by -s)."""
    directory = tmp_path_factory.mktemp("merge")
    paths = []
    for i in range(3):
        raw = make_bam(directory / f"raw{i}.bam", records=15_000 + 2_000 * i, seed=30 + i)
        paths.append(directory / f"lane{i}.bam")
        cli("sort", "-o", str(paths[-1]), str(raw))
        raw.unlink()
    return paths


def test_merge_three_inputs_is_byte_identical(merge_inputs: list, client, tmp_path: Path) -> None:
    out = tmp_path / "dask.bam"
    report = distributed.merge(merge_inputs, out, client=client, seed=1, write_index=True,
                               no_pg=True, tasks=3, progress=False)
    cli("merge", "--no-PG", "-s", "1", "--write-index", "-@2", "-o", str(tmp_path / "one.bam"),
        *map(str, merge_inputs))
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert (tmp_path / "dask.bam.csi").read_bytes() == (tmp_path / "one.bam.csi").read_bytes()
    assert report["method"] == "key_ranges" and report["ranges"] >= 3
    phases = report["distributed"]["phases"]
    assert [p["name"] for p in phases] == ["plan", "tasks", "layout", "place", "clean", "finish"]
    assert phases[1]["tasks"] == 3
    # The @PG IDs of the inputs collided and were renamed: -s made the suffixes equal.
    assert b"@PG\tID:sortase-" in pysam.view("-H", str(out)).encode()
    # The work directory next to the output is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dask.bam", "dask.bam.csi", "one.bam",
                                                          "one.bam.csi"]


def test_merge_options_and_console_script(merge_inputs: list, client, tmp_path: Path) -> None:
    from sortase import _dask_cli

    listing = tmp_path / "list.txt"
    listing.write_text(f"{merge_inputs[0]}\n")
    argv = ["--scheduler", client.scheduler.address, "-s", "7", "-r", "-p", "-l", "3", "--no-PG",
            "--write-index", "--index-format", "bai", "-h", str(merge_inputs[2])]
    assert _dask_cli.main(["merge", *argv, "--tasks", "2", "-b", str(listing),
                           "-o", str(tmp_path / "dask.bam"), *map(str, merge_inputs[1:])]) == 0
    cli("merge", *argv[2:], "-b", str(listing), "-o", str(tmp_path / "one.bam"),
        *map(str, merge_inputs[1:]))
    assert (tmp_path / "dask.bam").read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert (tmp_path / "dask.bam.bai").read_bytes() == (tmp_path / "one.bam.bai").read_bytes()
    # -f: an existing output is an error without it, as for sortase merge.
    with pytest.raises(Exception, match="exist"):
        distributed.merge(merge_inputs, tmp_path / "dask.bam", client=client, seed=7,
                          progress=False)


def test_idxstats_matches_one_machine(bam: Path, client, tmp_path: Path) -> None:
    sorted_bam = tmp_path / "s.bam"
    cli("sort", "--no-PG", "-o", str(sorted_bam), str(bam))
    # No index: range tasks count per reference.
    report = distributed.idxstats(sorted_bam, client=client, tasks=5, progress=False)
    assert report["distributed"]["phases"][1]["tasks"] > 1
    assert distributed.idxstats_text(report) == cli("idxstats", str(sorted_bam)).decode()
    # An unsorted BAM: the same error as one machine.
    with pytest.raises(Exception, match="not position sorted"):
        distributed.idxstats(bam, client=client, tasks=5, progress=False)
    # With an index: read from it on the driver, no tasks.
    cli("index", str(sorted_bam))
    report = distributed.idxstats(sorted_bam, client=client, tasks=5, progress=False)
    assert report["distributed"]["phases"][1]["tasks"] == 0
    assert distributed.idxstats_text(report) == cli("idxstats", str(sorted_bam)).decode()
    out = subprocess.run(
        [sys.executable, "-m", "sortase._dask_cli", "idxstats", "--scheduler",
         client.scheduler.address, str(sorted_bam)], check=True, capture_output=True, timeout=120).stdout
    assert out == cli("idxstats", str(sorted_bam))


def make_cram(bam: Path, path: Path) -> Path:
    """A coordinate-sorted CRAM of ``bam`` with many containers (samtools, 500 records a slice and
    no reference: sequences are stored whole)."""
    sorted_bam = path.with_suffix(".sorted.bam")
    pysam.sort("-o", str(sorted_bam), str(bam))
    pysam.view("-C", "--output-fmt-option", "no_ref", "--output-fmt-option", "seqs_per_slice=500",
               "-o", str(path), str(sorted_bam), catch_stdout=False)
    return path


def test_cram_idxstats_and_flagstat_tasks_are_runs_of_containers(bam: Path, client, s3, tmp_path: Path) -> None:
    cram = make_cram(bam, tmp_path / "in.cram")
    want = pysam.idxstats(str(cram))
    assert cli("idxstats", str(cram)).decode() == want
    report = distributed.idxstats(cram, client=client, tasks=5, progress=False)
    assert report["distributed"]["phases"][1]["tasks"] > 1
    assert distributed.idxstats_text(report) == want
    flagstat = distributed.flagstat(cram, client=client, tasks=5, progress=False)
    assert flagstat["distributed"]["phases"][1]["tasks"] > 1
    bam_counts = distributed.flagstat(bam, client=client, tasks=3, progress=False)["counts"]
    assert flagstat["counts"] == bam_counts and sum(bam_counts["reads"]) == RECORDS
    assert distributed.count(cram, client=client, tasks=5, progress=False) == RECORDS
    # On object storage each task fetches the header container and its run only.
    fs, options = s3
    fs.put_file(str(cram), "sortase-test/cram/x.cram")
    stats = distributed.idxstats("s3://sortase-test/cram/x.cram", client=client, tasks=4,
                                 storage_options=options, progress=False)
    phases = stats["distributed"]["phases"]
    assert phases[1]["tasks"] > 1 and phases[1]["whole_object_fetches"] == 0
    assert phases[1]["bytes_read"] < cram.stat().st_size + phases[1]["tasks"] * (64 << 10)
    assert distributed.idxstats_text(stats) == want
    fs.rm("sortase-test/cram", recursive=True)


def test_failing_job_leaves_nothing(client, tmp_path: Path) -> None:
    bad = make_bam(tmp_path / "bad.bam", records=20_000, seed=3)
    data = bytearray(bad.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = os.urandom(4096)  # a corrupt BGZF block in the middle
    bad.write_bytes(bytes(data))
    out = tmp_path / "out.bam"
    with pytest.raises(Exception):
        distributed.sort(bad, out, client=client, write_index=True, task_memory="256K", progress=False)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bam"]


def test_worker_killed_mid_sort_still_byte_identical(tmp_path: Path) -> None:
    """A worker SIGKILLed in the middle of a sort: the job still ends byte-identical.

    Deterministic (issue 34): a scheduler plugin kills the worker inside the scheduler's own
    transition of the first map task to 'memory'. At that moment the reduce stage has not been
    submitted (the driver submits it once every map task is done), so the job is provably in the
    middle; no thread polls the file system racing the job's end.
    """
    bam = make_bam(tmp_path / "in.bam", records=60_000, seed=7)
    cli("sort", "--no-PG", "-o", str(tmp_path / "one.bam"), str(bam))
    out = tmp_path / "dask.bam"
    report = with_a_worker_killed(tmp_path, "map", lambda c: (
        distributed.sort(bam, out, client=c, no_pg=True, task_memory="512K", progress=False)))
    assert report["distributed"]["phases"][2]["tasks"] >= 4
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert leftovers(tmp_path) == []


def with_a_worker_killed(tmp_path: Path, stage: str, job):
    """Runs ``job(client)`` on a LocalCluster of 2 worker processes and SIGKILLs one worker inside
    the scheduler's transition of the first ``stage`` task (key ``...-STAGE-...``) to 'memory':
    the next stage is not submitted yet, so the job is provably in the middle, and no thread
    polls the file system racing the job's end. Checks that the kill happened and that the
    nanny replaced the worker; returns what ``job`` returned."""
    from dask.distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import SchedulerPlugin

    class KillOnFirstResult(SchedulerPlugin):
        name = f"sortase-test-kill-on-first-{stage}"

        def __init__(self, pid: int, marker: str) -> None:
            self.pid, self.marker, self.fired = pid, marker, False

        def transition(self, key, start, finish, *args, **kwargs) -> None:  # type: ignore[override]
            if not self.fired and finish == "memory" and f"-{stage}-" in str(key):
                self.fired = True
                os.kill(self.pid, signal.SIGKILL)
                Path(self.marker).write_text(f"{self.pid} {key}")

    marker = tmp_path / "killed.txt"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        pids = list(c.run(os.getpid).values())
        c.register_plugin(KillOnFirstResult(pids[0], str(marker)))
        result = job(c)
        # The nanny replaced the killed worker process.
        assert pids[0] not in c.run(os.getpid).values()
    assert marker.exists(), f"no {stage} task finished, so no worker was killed"
    return result


# ---------------------------------------------------------------- S3 (moto)


def s3_options(endpoint: str) -> Dict[str, Any]:
    """moto's storage options for the S3 API at ``endpoint``."""
    return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}


@contextlib.contextmanager
def moto_s3(bucket: str) -> Iterator[Tuple[Any, str, int, Any]]:
    """A moto S3 API server on a free local port, with ``bucket``: (the server, its host and port,
    an s3fs file system straight to it); stopped at the end. moto keeps its buckets in
    process-wide state: another module's server may already have the bucket."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        fs = s3fs.S3FileSystem(**s3_options(f"http://{host}:{port}"))
        if not fs.exists(bucket):
            fs.mkdir(bucket)
        yield server, host, port, fs
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3():
    with moto_s3("sortase-test") as (_, host, port, fs):
        yield fs, s3_options(f"http://{host}:{port}")


def test_s3_sort_index_flagstat(bam: Path, client, s3, tmp_path: Path) -> None:
    fs, options = s3
    fs.put_file(str(bam), "sortase-test/in.bam")
    report = distributed.sort("s3://sortase-test/in.bam", "s3://sortase-test/out/sorted.bam",
                              client=client, write_index=True, no_pg=True, task_memory=TASK_MEMORY,
                              storage_options=options, progress=False)
    cli("sort", "--no-PG", "--write-index", "-o", str(tmp_path / "one.bam"), str(bam))
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/out/sorted.bam") == (tmp_path / "one.bam").read_bytes()
    assert fs.cat_file("sortase-test/out/sorted.bam.csi") == (tmp_path / "one.bam.csi").read_bytes()
    assert sorted(fs.ls("sortase-test/out", detail=False)) == [
        "sortase-test/out/sorted.bam", "sortase-test/out/sorted.bam.csi"]
    # No work prefix left beside the output (the bucket is shared with the other modules' tests).
    top = fs.ls("sortase-test", detail=False)
    assert {"sortase-test/in.bam", "sortase-test/out"} <= set(top), top
    assert not [p for p in top if ".sortase-dask-" in p], top
    phases = report["distributed"]["phases"]
    assert phases[2]["tasks"] > 1
    # Every task ran on its byte ranges alone, not on whole objects.
    assert sum(p.get("whole_object_fetches", 0) for p in phases) == 0
    # The driver planned on the object by ranged reads (the header, sampled blocks, the cuts'
    # probes in 64 KiB windows: on a file this small, most of it); test_distributed_finish.py
    # checks that those were ranged reads.
    assert 0 < report["distributed"]["plan_bytes_read"] <= bam.stat().st_size
    slack = distributed.SLACK + (2 << 16)  # the header's block and the block at a range's end
    assert phases[2]["bytes_read"] < bam.stat().st_size + phases[2]["tasks"] * slack
    # The count and map tasks read their ranges of the object through the library's reader (what
    # sortase reads s3:// inputs with on one machine), not from copies fsspec made first (a map
    # task may find all its windows fetched already by a count task on its worker).
    assert [p["name"] for p in phases[1:4]] == ["count", "map", "reduce"]
    assert all(p["bytes_streamed"] == p["bytes_read"] for p in phases[1:4])
    # ... and so do the reduce tasks their stretches of the map tasks' runs.
    assert phases[1]["bytes_streamed"] > 0 and phases[3]["bytes_streamed"] > 0

    distributed.index("s3://sortase-test/out/sorted.bam", client=client, tasks=4,
                      storage_options=options, progress=False)
    cli("index", str(tmp_path / "one.bam"))
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/out/sorted.bam.bai") == (tmp_path / "one.bam.bai").read_bytes()
    counts = distributed.flagstat("s3://sortase-test/out/sorted.bam", client=client, tasks=4,
                                  storage_options=options, progress=False)["counts"]
    assert counts["reads"][0] + counts["reads"][1] == RECORDS
    # idxstats reads the .bai next to the object, as sortase idxstats next to the file.
    stats = distributed.idxstats("s3://sortase-test/out/sorted.bam", client=client,
                                 storage_options=options, progress=False)
    assert stats["distributed"]["phases"][1]["tasks"] == 0
    assert distributed.idxstats_text(stats) == cli("idxstats", str(tmp_path / "one.bam")).decode()
    # Without an index: range tasks, each fetching its byte range.
    fs.put_file(str(tmp_path / "one.bam"), "sortase-test/noindex/x.bam")
    stats = distributed.idxstats("s3://sortase-test/noindex/x.bam", client=client, tasks=4,
                                 storage_options=options, progress=False)
    phases = stats["distributed"]["phases"]
    assert phases[1]["tasks"] > 1 and phases[1]["whole_object_fetches"] == 0
    assert distributed.idxstats_text(stats) == cli("idxstats", str(tmp_path / "one.bam")).decode()
    fs.rm("sortase-test/noindex", recursive=True)


def test_s3_merge_three_inputs(merge_inputs: list, client, s3, tmp_path: Path) -> None:
    fs, options = s3
    urls = []
    for p in merge_inputs:
        urls.append(f"s3://sortase-test/lanes/{p.name}")
        fs.put_file(str(p), urls[-1])
    report = distributed.merge(urls, "s3://sortase-test/merged/all.bam", client=client, seed=1,
                               write_index=True, no_pg=True, tasks=3, storage_options=options,
                               progress=False)
    cli("merge", "--no-PG", "-s", "1", "--write-index", "-o", str(tmp_path / "one.bam"),
        *map(str, merge_inputs))
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/merged/all.bam") == (tmp_path / "one.bam").read_bytes()
    assert fs.cat_file("sortase-test/merged/all.bam.csi") == (tmp_path / "one.bam.csi").read_bytes()
    assert sorted(fs.ls("sortase-test/merged", detail=False)) == [
        "sortase-test/merged/all.bam", "sortase-test/merged/all.bam.csi"]
    assert report["outputs"] == ["s3://sortase-test/merged/all.bam",
                                 "s3://sortase-test/merged/all.bam.csi"]
    phases = report["distributed"]["phases"]
    assert [p["name"] for p in phases] == ["plan", "tasks", "layout", "upload", "finish"]
    assert phases[1]["tasks"] == 3
    # Every task fetched its inputs' headers and key-range spans, not whole objects.
    assert phases[1]["whole_object_fetches"] == 0
    total = sum(p.stat().st_size for p in merge_inputs)
    assert phases[1]["bytes_read"] < total + 3 * len(merge_inputs) * (distributed.SLACK + (2 << 16))
    # The same job again: the output exists, and without force that is an error.
    with pytest.raises(Exception, match="exist"):
        distributed.merge(urls, "s3://sortase-test/merged/all.bam", client=client, seed=1,
                          storage_options=options, progress=False)
    # ... and it left nothing behind (no work prefix, no temporary key).
    fs.invalidate_cache()
    assert sorted(fs.ls("sortase-test/merged", detail=False)) == [
        "sortase-test/merged/all.bam", "sortase-test/merged/all.bam.csi"]


def snp_inputs(bam: Path, tmp_path: Path) -> tuple:
    """The sorted, indexed BAM and a VCF of 900 SNVs on its 3 references."""
    sorted_bam = tmp_path / "s.bam"
    cli("sort", "--no-PG", "--write-index", "-o", str(sorted_bam) + "##idx##" + str(sorted_bam) + ".bai",
        str(bam))
    rng = random.Random(5)
    vcf = tmp_path / "sites.vcf"
    lines = ["##fileformat=VCFv4.2"] + [f"##contig=<ID=chr{i},length=1000000>" for i in range(1, 4)]
    lines.append("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO")
    for chrom in range(1, 4):
        for pos in sorted(rng.sample(range(1, 999_000), 300)):
            lines.append(f"chr{chrom}\t{pos}\t.\tA\tC\t.\t.\t.")
    vcf.write_text("\n".join(lines) + "\n")
    return sorted_bam, vcf


def test_snp_pileup_matches_one_machine(bam: Path, client, tmp_path: Path) -> None:
    sorted_bam, vcf = snp_inputs(bam, tmp_path)
    distributed.snp_pileup(vcf, tmp_path / "dask.csv", [sorted_bam, sorted_bam], client=client,
                           pseudo_snps=5000, tasks=6, progress=False)
    cli("snp-pileup", "-P", "5000", str(vcf), str(tmp_path / "one.csv"), str(sorted_bam), str(sorted_bam))
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()


def test_s3_snp_pileup(bam: Path, client, s3, tmp_path: Path) -> None:
    fs, options = s3
    sorted_bam, vcf = snp_inputs(bam, tmp_path)
    for local, key in ((sorted_bam, "s.bam"), (Path(str(sorted_bam) + ".bai"), "s.bam.bai"),
                       (vcf, "sites.vcf")):
        fs.put_file(str(local), f"sortase-test/snp/{key}")
    bam_url = "s3://sortase-test/snp/s.bam"
    for gzip, name in ((False, "dask.csv"), (True, "dask.csv.gz")):
        report = distributed.snp_pileup(
            "s3://sortase-test/snp/sites.vcf", f"s3://sortase-test/snp/out/{name}", [bam_url, bam_url],
            client=client, pseudo_snps=5000, tasks=6, gzip=gzip, storage_options=options, progress=False)
        one = tmp_path / ("one" + name[4:])
        cli("snp-pileup", "-P", "5000", *(["-g"] if gzip else []), str(vcf), str(one), str(sorted_bam),
            str(sorted_bam))
        fs.invalidate_cache()
        assert fs.cat_file(f"sortase-test/snp/out/{name}") == one.read_bytes()
        assert report["outputs"] == [f"s3://sortase-test/snp/out/{name}"]
        # Nothing left of the job: the output, and the inputs as they were.
        assert sorted(fs.ls("sortase-test/snp", detail=False)) == [
            "sortase-test/snp/out", "sortase-test/snp/s.bam", "sortase-test/snp/s.bam.bai",
            "sortase-test/snp/sites.vcf"]
        d = report["distributed"]
        (tasks,) = [p for p in d["phases"] if p["name"] == "tasks"]
        assert tasks["tasks"] == 6
        # Every task ran on its header, index and chunk spans alone, never on whole objects, read
        # through the library's reader (none at all in the second job: a worker reuses the windows
        # it fetched from an object in the last seconds) ...
        assert tasks["whole_object_fetches"] == 0
        assert tasks["bytes_streamed"] == tasks["bytes_read"], tasks
        whole = 2 * sorted_bam.stat().st_size
        index = 2 * Path(str(sorted_bam) + ".bai").stat().st_size
        # ... which are a part of the BAMs: a task fetches its sixth of the genome plus, per span,
        # 256 KiB past its end (distributed.SLACK: the block of the first record past a region).
        # On this 1.4 MB BAM (3 references of 1 Mb) the slack is a large share, so what is
        # meaningful is that a task fetches well under the whole BAMs (about 0.6 of them here);
        # on a genome-sized BAM a task's share shrinks to its sixth.
        per_task = (tasks["bytes_read"] - tasks["tasks"] * index) / tasks["tasks"]
        assert per_task < 0.75 * whole, (tasks, whole)
        # The driver fetched the VCF, the indexes and the headers, not the BAMs.
        assert d["plan_bytes_read"] < vcf.stat().st_size + index + whole / 10, (d, whole)
    assert sorted(fs.ls("sortase-test/snp/out", detail=False)) == [
        "sortase-test/snp/out/dask.csv", "sortase-test/snp/out/dask.csv.gz"]


def test_s3_snp_pileup_failing_leaves_nothing(bam: Path, client, s3, tmp_path: Path) -> None:
    from sortase import InputError, OutputError

    fs, options = s3
    sorted_bam, vcf = snp_inputs(bam, tmp_path)
    fs.put_file(str(sorted_bam), "sortase-test/snp-bad/s.bam")  # no index next to it
    fs.put_file(str(vcf), "sortase-test/snp-bad/sites.vcf")
    fs.pipe_file("sortase-test/snp-bad/taken.csv", b"keep")
    before = sorted(fs.ls("sortase-test/snp-bad", detail=False))
    run = lambda out: distributed.snp_pileup(  # noqa: E731
        "s3://sortase-test/snp-bad/sites.vcf", f"s3://sortase-test/snp-bad/{out}",
        ["s3://sortase-test/snp-bad/s.bam"], client=client, storage_options=options, progress=False)
    with pytest.raises(InputError, match="no index"):
        run("out.csv")
    with pytest.raises(OutputError, match="already exists"):
        run("taken.csv")
    fs.invalidate_cache()
    assert sorted(fs.ls("sortase-test/snp-bad", detail=False)) == before
    assert fs.cat_file("sortase-test/snp-bad/taken.csv") == b"keep"
    assert not glob.glob(os.path.join(tempfile.gettempdir(), "sortase-dask-*"))


def test_console_script_flagstat_and_sort(bam: Path, client, tmp_path: Path) -> None:
    from sortase import _dask_cli

    address = client.scheduler.address
    assert _dask_cli.main(["sort", "--scheduler", address, "--no-PG", "--task-memory", TASK_MEMORY,
                           "-o", str(tmp_path / "dask.bam"), str(bam)]) == 0
    cli("sort", "--no-PG", "-o", str(tmp_path / "one.bam"), str(bam))
    assert (tmp_path / "dask.bam").read_bytes() == (tmp_path / "one.bam").read_bytes()
    out = subprocess.run(
        [sys.executable, "-m", "sortase._dask_cli", "flagstat", "--scheduler",
         address, "-O", "json", str(tmp_path / "one.bam")],
        check=True, capture_output=True, timeout=120).stdout
    assert out == cli("flagstat", "-O", "json", str(tmp_path / "one.bam"))


def test_s3_failing_job_leaves_nothing(client, s3, tmp_path: Path) -> None:
    fs, options = s3
    bad = make_bam(tmp_path / "bad.bam", records=20_000, seed=3)
    data = bytearray(bad.read_bytes())
    data[len(data) // 2:len(data) // 2 + 4096] = os.urandom(4096)
    fs.pipe_file("sortase-test/bad/bad.bam", bytes(data))
    with pytest.raises(Exception):
        distributed.sort("s3://sortase-test/bad/bad.bam", "s3://sortase-test/bad/out.bam",
                         client=client, write_index=True, task_memory="256K",
                         storage_options=options, progress=False)
    fs.invalidate_cache()
    assert fs.ls("sortase-test/bad", detail=False) == ["sortase-test/bad/bad.bam"]
    assert not glob.glob(os.path.join(tempfile.gettempdir(), "sortase-dask-*"))


def test_console_script_progress_and_report(bam: Path, client, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "sortase._dask_cli", "index", "--scheduler", client.scheduler.address,
         "--progress", "--report", "-o", str(tmp_path / "x.bai"), str(tmp_path / "s.bam")],
        capture_output=True, timeout=120)
    assert run.returncode == 1 and b"sortase-dask:" in run.stderr  # no such input
    cli("sort", "--no-PG", "-o", str(tmp_path / "s.bam"), str(bam))
    run = subprocess.run(
        [sys.executable, "-m", "sortase._dask_cli", "index", "--scheduler", client.scheduler.address,
         "--progress", "--report", "-o", str(tmp_path / "x.bai"), str(tmp_path / "s.bam")],
        check=True, capture_output=True, timeout=120)
    err = run.stderr.decode()
    assert "dashboard" in err and "tasks" in err and '"bytes_moved"' in err
    cli("index", "-o", str(tmp_path / "one.bai"), str(tmp_path / "s.bam"))
    assert (tmp_path / "x.bai").read_bytes() == (tmp_path / "one.bai").read_bytes()


def slurm_up() -> bool:
    try:
        run = subprocess.run(["sinfo", "-h", "-o", "%a"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return run.returncode == 0 and b"up" in run.stdout


@pytest.mark.skipif(not slurm_up(), reason="no SLURM cluster (sinfo) here")
def test_sort_on_slurm_cluster(bam: Path, tmp_path: Path) -> None:
    jobqueue = pytest.importorskip("dask_jobqueue")
    from dask.distributed import Client

    with jobqueue.SLURMCluster(cores=1, processes=1, memory="2GB", walltime="00:10:00",
                               log_directory=str(tmp_path / "logs")) as cluster, Client(cluster) as c:
        cluster.scale(jobs=2)
        c.wait_for_workers(2, timeout=90)
        out = tmp_path / "dask.bam"
        distributed.sort(bam, out, client=c, write_index=True, no_pg=True,
                         task_memory=TASK_MEMORY, progress=False)
    cli("sort", "--no-PG", "--write-index", "-o", str(tmp_path / "one.bam"), str(bam))
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert (tmp_path / "dask.bam.csi").read_bytes() == (tmp_path / "one.bam.csi").read_bytes()


def _s3_sort_equals_one_machine(bam: Path, s3: Any, tmp_path: Path, key: str, client: Any,
                                options: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Sorts ``bam`` put at ``sortase-test/KEY/in.bam`` with ``options``, checks the output is
    ``sortase sort``'s, removes the prefix; returns the report's phases."""
    fs = s3[0]
    fs.put_file(str(bam), f"sortase-test/{key}/in.bam")
    try:
        report = distributed.sort(f"s3://sortase-test/{key}/in.bam",
                                  f"s3://sortase-test/{key}/out.bam", client=client, no_pg=True,
                                  task_memory=TASK_MEMORY, storage_options=options, progress=False)
        cli("sort", "--no-PG", "-o", str(tmp_path / "one.bam"), str(bam))
        fs.invalidate_cache()
        assert fs.cat_file(f"sortase-test/{key}/out.bam") == (tmp_path / "one.bam").read_bytes()
    finally:
        fs.rm(f"sortase-test/{key}", recursive=True)
    return list(report["distributed"]["phases"])


def test_s3_tasks_side_by_side_in_one_worker(bam: Path, s3, tmp_path: Path) -> None:
    """Two tasks at a time in one worker process read their inputs from S3 through the library's
    reader, each under its own local names (per-task aliases, each counting its own bytes): the
    output is one machine's."""
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        phases = _s3_sort_equals_one_machine(bam, s3, tmp_path, "side", client, s3[1])
    by_name = {p["name"]: p for p in phases}
    assert by_name["map"]["tasks"] > 2 and by_name["reduce"]["bytes_streamed"] > 0
    assert all(p.get("bytes_streamed", 0) == p.get("bytes_read", 0)
               for p in phases if p["name"] in ("count", "map", "reduce"))


def test_s3_storage_options_the_library_cannot_follow_copy(bam: Path, client, s3,
                                                           tmp_path: Path) -> None:
    """Storage options the library's reader does not take (here a botocore client keyword) make
    the driver and the tasks copy what they read with fsspec instead: the same bytes out."""
    options = s3[1]
    copying = dict(options, client_kwargs=dict(options["client_kwargs"], verify=False))
    phases = _s3_sort_equals_one_machine(bam, s3, tmp_path, "copy", client, copying)
    assert sum(p.get("bytes_streamed", 0) for p in phases) == 0
    assert sum(p.get("bytes_read", 0) for p in phases if p["name"] == "map") > 0
