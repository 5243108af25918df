"""sortase.distributed.markdup in Picard's mode (coordinate-sorted input) on a LocalCluster of 2
worker processes: byte identity with the single-machine CLI (``sortase markdup``: the BAM and the
metrics file) over a local path and over an S3 API server (moto); a worker killed in the middle
of the job; input out of coordinate order fails as the CLI does and leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pysam = pytest.importorskip("pysam")
distributed_mod = pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402

from markdup_bams import (  # noqa: E402,F401  (fixtures)
    TASK_MEMORY, coord_bam, make_coordinate_bam, metrics_body, s3_markdup_equals_cli,
    s3_markdup_fails_leaving_nothing)
from test_distributed import CLI, cli, leftovers, s3, with_a_worker_killed  # noqa: E402,F401  (fixtures)


@pytest.mark.parametrize("level", [None, 0])
def test_picard_markdup_is_byte_identical(coord_bam: Path, client, tmp_path: Path, level) -> None:
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    m1, m2 = tmp_path / "one.txt", tmp_path / "dask.txt"
    args = ["-l", str(level)] if level is not None else []
    cli("markdup", "--no-PG", *args, "--metrics", str(m1), "-o", str(one), str(coord_bam))
    report = distributed.markdup(coord_bam, out, client=client, no_pg=True, level=level,
                                 metrics=m2, task_memory=TASK_MEMORY, progress=False)
    assert out.read_bytes() == one.read_bytes()
    assert metrics_body(m2.read_text()) == metrics_body(m1.read_text())
    names = [p["name"] for p in report["distributed"]["phases"]]
    # No stage reads the input only to count it: the map tasks prove their ranges' ends.
    assert names[:5] == ["plan", "map", "join", "reduce", "encode"], names
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["map"]["tasks"] > 3 and phases["join"]["tasks"] > 1
    assert phases["reduce"]["tasks"] > 1 and phases["encode"]["tasks"] > 1
    assert report["mode"] == "coordinate" and report["duplicate_records"] > 1000
    optical = sum(int(line.split("\t")[7]) for line in m1.read_text().splitlines()
                  if line.startswith("lib"))
    assert optical > 10, "no optical duplicates in the test data"
    with pysam.AlignmentFile(str(out), "rb") as f:
        dups = sum(1 for r in f if r.flag & 1024)
    assert dups == report["duplicate_records"]
    assert str(m2) in [os.fspath(p) for p in report["outputs"]]
    assert leftovers(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "dask.bam", "dask.txt", "one.bam", "one.txt"]


def test_picard_options_and_console_script(coord_bam: Path, client, tmp_path: Path) -> None:
    from sortase import _dask_cli

    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    opts = ["--optical-distance", "40", "--max-optical-set", "3"]
    cli("markdup", "--no-PG", *opts, "--metrics", str(tmp_path / "one.txt"), "-o", str(one),
        str(coord_bam))
    address = client.scheduler.address
    assert _dask_cli.main(["markdup", "--no-PG", *opts, "--metrics", str(tmp_path / "dask.txt"),
                           "--mode", "coordinate", "--task-memory", TASK_MEMORY, "--reduce-tasks",
                           "5", "--scheduler", address, "--no-progress", "-o", str(out),
                           str(coord_bam)]) == 0
    assert out.read_bytes() == one.read_bytes()
    assert (metrics_body((tmp_path / "dask.txt").read_text())
            == metrics_body((tmp_path / "one.txt").read_text()))


def test_worker_killed_mid_picard_markdup_still_byte_identical(tmp_path: Path) -> None:
    """A worker SIGKILLed inside the scheduler's transition of the first map task to 'memory'
    (the join stage is not submitted yet: the job is provably in the middle)."""
    bam = make_coordinate_bam(tmp_path / "in.bam", pairs=5_000, seed=34)
    cli("markdup", "--no-PG", "--metrics", str(tmp_path / "one.txt"), "-o",
        str(tmp_path / "one.bam"), str(bam))
    out = tmp_path / "dask.bam"
    report = with_a_worker_killed(tmp_path, "map", lambda c: (
        distributed.markdup(bam, out, client=c, no_pg=True, metrics=tmp_path / "dask.txt",
                                     task_memory=TASK_MEMORY, progress=False)))
    assert report["distributed"]["phases"][2]["tasks"] >= 4
    assert out.read_bytes() == (tmp_path / "one.bam").read_bytes()
    assert (metrics_body((tmp_path / "dask.txt").read_text())
            == metrics_body((tmp_path / "one.txt").read_text()))
    assert leftovers(tmp_path) == []


def test_unsorted_input_fails_as_the_cli_and_leaves_nothing(client, tmp_path: Path) -> None:
    bad = make_coordinate_bam(tmp_path / "bad.bam", pairs=3_000, seed=5, sort=False)
    one = subprocess.run([str(CLI), "markdup", "-o", str(tmp_path / "one.bam"), str(bad)],
                         capture_output=True, text=True)
    assert one.returncode != 0 and "not coordinate-sorted" in one.stderr
    # The CLI's message after "sortase markdup: " (or the like), from the file name on.
    message = one.stderr.strip().splitlines()[-1]
    message = message[message.index(str(bad)):]
    with pytest.raises(Exception) as e:
        distributed.markdup(bad, tmp_path / "out.bam", client=client, metrics=tmp_path / "m.txt",
                            task_memory=TASK_MEMORY, progress=False)
    assert message in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bam"]


def test_s3_picard_markdup_byte_identical_and_failure_leaves_nothing(coord_bam: Path, client, s3,
                                                                       tmp_path: Path) -> None:
    fs = s3[0]
    report = s3_markdup_equals_cli(s3, client, coord_bam, "pmd", tmp_path,
                                   "--metrics", str(tmp_path / "one.txt"),
                                   metrics="s3://sortase-test/pmd/out/metrics.txt")
    text = fs.cat_file("sortase-test/pmd/out/metrics.txt").decode()
    assert metrics_body(text) == metrics_body((tmp_path / "one.txt").read_text())
    assert sorted(fs.ls("sortase-test/pmd", detail=False)) == [
        "sortase-test/pmd/in.bam", "sortase-test/pmd/out"]
    assert sorted(fs.ls("sortase-test/pmd/out", detail=False)) == [
        "sortase-test/pmd/out/dup.bam", "sortase-test/pmd/out/metrics.txt"]
    assert report["outputs"] == ["s3://sortase-test/pmd/out/dup.bam",
                                 "s3://sortase-test/pmd/out/metrics.txt"]
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["join"]["tasks"] > 1 and phases["upload"]["tasks"] >= 1

    bad = make_coordinate_bam(tmp_path / "bad.bam", pairs=3_000, seed=5, sort=False)
    s3_markdup_fails_leaving_nothing(s3, client, bad, "pmdbad", "not coordinate-sorted",
                                     metrics="s3://sortase-test/pmdbad/m.txt")
