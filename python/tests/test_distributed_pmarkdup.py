"""sortase.distributed.markdup in Picard's mode (coordinate-sorted input) on a LocalCluster of 2
worker processes: byte identity with the single-machine CLI (``sortase markdup``: the BAM and the
metrics file) over a local path and over an S3 API server (moto); a worker killed in the middle
of the job; input out of coordinate order fails as the CLI does and leaves nothing behind."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

pysam = pytest.importorskip("pysam")
distributed_mod = pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402

from test_distributed import (  # noqa: E402,F401  (fixtures)
    CLI, cli, leftovers, s3, segment, with_a_worker_killed)

PAIRS = 6_000
# Small tasks: the test BAM is cut into many ranges, and many pairs have their mates in others.
TASK_MEMORY = "256K"


def make_coordinate_bam(path: Path, pairs: int = PAIRS, seed: int = 29, sort: bool = True) -> Path:
    """Pairs at few positions (many duplicates; half with mates far away, so in other ranges),
    Illumina read names whose tile:x:y lie close together (optical duplicates), fragments, pairs
    with an unmapped mate, unmapped pairs, secondary and supplementary records, two libraries and
    records without a read group; sorted by coordinate with ``sortase sort`` (``sort=False``:
    left in generation order under an ``SO:coordinate`` header)."""
    rng = random.Random(seed)
    header = {"HD": {"VN": "1.6", "SO": "coordinate"},
              "SQ": [{"SN": f"chr{i}", "LN": 200_000} for i in range(1, 3)],
              "RG": [{"ID": "a", "LB": "libA", "SM": "s"}, {"ID": "b", "LB": "libB", "SM": "s"}]}
    records = []
    for i in range(pairs):
        name = f"M1:{i}:FC:1:{1101 + rng.randrange(2)}:{1000 + rng.randrange(300)}:{2000 + rng.randrange(300)}"
        rg = rng.choice([None, "a", "a", "a", "b", "b"])
        q = rng.randrange(20, 40)
        ref = rng.randrange(2)
        pos = rng.randrange(0, 800, 13)
        far = rng.random() < 0.5
        mref, mpos = (0, 40_000 + rng.randrange(0, 500, 11)) if far else (ref, pos + rng.randrange(100, 200, 20))
        cig = [(4, 5), (0, 95)] if rng.random() < 0.25 else [(0, 100)]
        kind = rng.random()
        if kind < 0.06:
            records += [(name, 77, -1, -1, None, -1, -1, rg, q), (name, 141, -1, -1, None, -1, -1, rg, q)]
        elif kind < 0.12:
            records += [(name, rng.choice([0, 16]), ref, pos, cig, -1, -1, rg, q)]
        elif kind < 0.18:
            records += [(name, 73, ref, pos, cig, ref, pos, rg, q), (name, 133, ref, pos, None, ref, pos, rg, q)]
        else:
            dup = 1024 if rng.random() < 0.1 else 0
            records += [(name, 99 | dup, ref, pos, cig, mref, mpos, rg, q),
                        (name, 147, mref, mpos, [(0, 100)], ref, pos, rg, q)]
            extra = rng.random()
            if extra < 0.1:
                records.append((name, 2048 | 65 | 32, 1, 5_000 + pos, [(4, 40), (0, 60)], mref, mpos, rg, q))
            elif extra < 0.2:
                records.append((name, 256 | 65 | 32, ref, pos + 7, [(0, 100)], mref, mpos, rg, q))
    raw = path.with_suffix(".raw.bam")
    with pysam.AlignmentFile(str(raw if sort else path), "wb", header=header) as out:
        for name, flag, ref, pos, cigar, mref, mpos, rg, q in records:
            a = segment(out.header, rng, name, flag, ref, pos, cigar, mref, mpos, chr(33 + q))
            if rg is not None:
                a.set_tag("RG", rg)
            out.write(a)
    if sort:
        cli("sort", "-o", str(path), str(raw))
        raw.unlink()
    return path


def metrics_body(text: str) -> list:
    """The metrics file without its command line (the second line names the program run)."""
    lines = text.splitlines()
    assert lines[1].startswith("# sortase markdup (Picard MarkDuplicates 2.27.5 metrics)")
    return lines[:1] + lines[2:]


@pytest.fixture(scope="module")
def coord_bam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_coordinate_bam(tmp_path_factory.mktemp("pmddata") / "in.bam")


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
    fs, options = s3
    fs.put_file(str(coord_bam), "sortase-test/pmd/in.bam")
    report = distributed.markdup("s3://sortase-test/pmd/in.bam", "s3://sortase-test/pmd/out/dup.bam",
                                 client=client, no_pg=True, task_memory=TASK_MEMORY,
                                 metrics="s3://sortase-test/pmd/out/metrics.txt",
                                 storage_options=options, progress=False)
    cli("markdup", "--no-PG", "--metrics", str(tmp_path / "one.txt"), "-o",
        str(tmp_path / "one.bam"), str(coord_bam))
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/pmd/out/dup.bam") == (tmp_path / "one.bam").read_bytes()
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
    fs.put_file(str(bad), "sortase-test/pmdbad/in.bam")
    with pytest.raises(Exception, match="not coordinate-sorted"):
        distributed.markdup("s3://sortase-test/pmdbad/in.bam", "s3://sortase-test/pmdbad/out.bam",
                            client=client, task_memory=TASK_MEMORY, storage_options=options,
                            metrics="s3://sortase-test/pmdbad/m.txt", progress=False)
    fs.invalidate_cache()
    assert fs.ls("sortase-test/pmdbad", detail=False) == ["sortase-test/pmdbad/in.bam"]
