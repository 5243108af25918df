"""sortase.distributed.markdup (samblaster mode, query-grouped input) on a LocalCluster of 2 worker
processes: byte identity with the single-machine CLI (``sortase markdup``) over a local path and over
an S3 API server (moto); a worker killed in the middle of the job; a failing job leaves nothing
behind, locally and in the bucket."""

from __future__ import annotations

from pathlib import Path

import pytest

pysam = pytest.importorskip("pysam")
distributed_mod = pytest.importorskip("dask.distributed")

from sortase import ArgumentError, distributed  # noqa: E402

from markdup_bams import (  # noqa: E402,F401  (fixtures)
    TASK_MEMORY, grouped_bam, make_grouped_bam, s3_markdup_equals_cli,
    s3_markdup_fails_leaving_nothing)
from test_distributed import cli, leftovers, s3, with_a_worker_killed  # noqa: E402,F401  (fixtures)


@pytest.mark.parametrize("level", [None, 0, 6])
def test_markdup_is_byte_identical(grouped_bam: Path, client, tmp_path: Path, level) -> None:
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    args = ["-l", str(level)] if level is not None else []
    cli("markdup", "--no-PG", *args, "-o", str(one), str(grouped_bam))
    report = distributed.markdup(grouped_bam, out, client=client, no_pg=True, level=level,
                                 task_memory=TASK_MEMORY, progress=False)
    assert out.read_bytes() == one.read_bytes()
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["map"]["tasks"] > 3 and phases["reduce"]["tasks"] > 1
    assert phases["encode"]["tasks"] > 1
    assert report["mode"] == "query" and report["duplicate_groups"] > 300
    with pysam.AlignmentFile(str(out), "rb") as f:
        dups = sum(1 for r in f if r.flag & 1024)
    assert dups == report["duplicate_records"]
    assert leftovers(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "dask.bam", "one.bam"]


def test_markdup_with_pg_and_options_matches_the_cli(grouped_bam: Path, client, tmp_path: Path) -> None:
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    distributed.markdup(grouped_bam, out, client=client, max_read_length=300, reduce_tasks=5,
                        task_memory=TASK_MEMORY, progress=False)
    # The @PG line names sortase-dask's command line: compare the records and the rest of the header.
    cli("markdup", "--maxReadLength", "300", "-o", str(one), str(grouped_bam))
    with pysam.AlignmentFile(str(out), "rb") as a, pysam.AlignmentFile(str(one), "rb") as b:
        assert [r.to_string() for r in a] == [r.to_string() for r in b]
        assert "sortase-dask markdup" in str(a.header)


def test_worker_killed_mid_markdup_still_byte_identical(tmp_path: Path) -> None:
    """A worker SIGKILLed inside the scheduler's transition of the first map task to 'memory'
    (the reduce stage is not submitted yet: the job is provably in the middle)."""
    bam = make_grouped_bam(tmp_path / "in.bam", pairs=6_000, seed=34)
    cli("markdup", "--no-PG", "-o", str(tmp_path / "one.bam"), str(bam))
    out = tmp_path / "dask.bam"
    report = with_a_worker_killed(tmp_path, "map", lambda c: (
        distributed.markdup(bam, out, client=c, no_pg=True, task_memory=TASK_MEMORY,
                                     progress=False)))
    assert report["distributed"]["phases"][2]["tasks"] >= 4
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert leftovers(tmp_path) == []


def test_failing_markdup_leaves_nothing(client, tmp_path: Path) -> None:
    bad = make_grouped_bam(tmp_path / "bad.bam", pairs=3_000, seed=5, grouped=False)
    out = tmp_path / "out.bam"
    # Not grouped by name: a map task finds a pair without its mate, as the one-machine job does.
    with pytest.raises(Exception, match="no usable primary pair"):
        distributed.markdup(bad, out, client=client, task_memory=TASK_MEMORY, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bam"]
    # Picard's mode on input grouped by name: out of coordinate order, as the one-machine job says.
    with pytest.raises(Exception, match="not coordinate-sorted"):
        distributed.markdup(bad, out, client=client, mode="coordinate", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bam"]
    with pytest.raises(ArgumentError, match="mode"):
        distributed.markdup(bad, out, client=client, mode="picard", progress=False)


def test_s3_markdup_byte_identical_and_failure_leaves_nothing(grouped_bam: Path, client, s3,
                                                                tmp_path: Path) -> None:
    fs = s3[0]
    report = s3_markdup_equals_cli(s3, client, grouped_bam, "md", tmp_path)
    assert sorted(fs.ls("sortase-test/md", detail=False)) == [
        "sortase-test/md/in.bam", "sortase-test/md/out"]
    assert fs.ls("sortase-test/md/out", detail=False) == ["sortase-test/md/out/dup.bam"]
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["encode"]["tasks"] > 1 and phases["upload"]["tasks"] >= 1
    # The map tasks read the input's ranges from the object through the library's reader.
    assert phases["map"]["bytes_streamed"] == phases["map"]["bytes_read"] > 0
    # ... and the reduce and encode tasks their slices of the map and reduce tasks' files.
    assert phases["reduce"]["bytes_streamed"] == phases["reduce"]["bytes_read"] > 0
    assert phases["encode"]["bytes_streamed"] == phases["encode"]["bytes_read"] > 0

    bad = make_grouped_bam(tmp_path / "bad.bam", pairs=3_000, seed=5, grouped=False)
    s3_markdup_fails_leaving_nothing(s3, client, bad, "mdbad", "no usable primary pair")
    # The bucket is shared with the other modules' tests, which list it.
    fs.rm("sortase-test/md", recursive=True)
    fs.rm("sortase-test/mdbad", recursive=True)


def test_console_script_markdup(grouped_bam: Path, client, tmp_path: Path) -> None:
    from sortase import _dask_cli

    out = tmp_path / "dask.bam"
    cli("markdup", "--no-PG", "-o", str(tmp_path / "one.bam"), str(grouped_bam))
    address = client.scheduler.address
    assert _dask_cli.main(["markdup", "--no-PG", "--task-memory", TASK_MEMORY, "--scheduler",
                           address, "--no-progress", "-o", str(out), str(grouped_bam)]) == 0
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
