"""sortase.distributed.agd_markdup (issue 29: ``sortase agd markdup`` with a dataset's chunks as map
tasks and the ``duplicate`` group written per chunk) on a LocalCluster of 2 worker processes: in both
modes the dataset ends byte-identical to the one-machine CLI's (every file, the manifest included),
over a local directory and over an S3 API server (moto); a worker SIGKILLed in the middle changes
nothing; a failing job leaves the dataset as it was, locally and in the bucket."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Dict

import pytest

pysam = pytest.importorskip("pysam")
pytest.importorskip("dask.distributed")

from sortase import ArgumentError, distributed  # noqa: E402

from test_distributed import CLI, s3, with_a_worker_killed  # noqa: E402,F401  (fixtures)
from markdup_bams import make_coordinate_bam, make_grouped_bam  # noqa: E402

#: Records per chunk (the test datasets have 10-20 chunks), and small tasks: several runs of chunks,
#: read-name groups and mates across them.
CHUNK = "500"
TASK_MEMORY = "160K"


def cli(*args: str, cwd: Path | None = None) -> bytes:
    return subprocess.run([str(CLI), *args], check=True, capture_output=True, cwd=cwd).stdout


def files(root: Path) -> Dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """A query-grouped dataset (samblaster's mode) and a coordinate-sorted one (Picard's)."""
    d = tmp_path_factory.mktemp("agdmd")
    grouped = make_grouped_bam(d / "grouped.bam", pairs=2_500, seed=41)
    coordinate = make_coordinate_bam(d / "coord.bam", pairs=2_500, seed=43)
    out = {}
    for mode, bam in (("query", grouped), ("coordinate", coordinate)):
        ds = d / mode
        cli("agd", "import", "--chunk-size", CHUNK, str(bam), "-o", str(ds))
        out[mode] = ds
    return out


def one_machine(ds: Path, work: Path) -> tuple:
    """``sortase agd markdup`` on a copy of ``ds`` (as ``work/ds``); its files and command line."""
    one = work / "one"
    one.mkdir(parents=True)
    shutil.copytree(ds, one / "ds")
    cli("agd", "markdup", "ds", cwd=one)
    return files(one / "ds"), f"{CLI} agd markdup ds"


@pytest.mark.parametrize("mode", ["query", "coordinate"])
def test_agd_markdup_is_byte_identical(datasets, mode: str, client, tmp_path: Path) -> None:
    expected, command = one_machine(datasets[mode], tmp_path)
    ds = tmp_path / "dask" / "ds"
    shutil.copytree(datasets[mode], ds)
    report = distributed.agd_markdup(ds, client=client, task_memory=TASK_MEMORY, command_line=command,
                                     progress=False)
    assert files(ds) == expected
    assert any(name.startswith("duplicate/") for name in expected)
    assert report["mode"] == mode and report["duplicate_records"] > 100
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["map"]["tasks"] > 2 and phases["reduce"]["tasks"] > 1
    assert phases["write"]["tasks"] == phases["map"]["tasks"]
    if mode == "coordinate":
        assert phases["join"]["tasks"] > 1
    # The export (flag 0x400 from the group) equals the one machine's.
    cli("agd", "export", str(ds), "-o", str(tmp_path / "dask.bam"))
    cli("agd", "export", str(tmp_path / "one" / "ds"), "-o", str(tmp_path / "one.bam"))
    assert (tmp_path / "dask.bam").read_bytes() == (tmp_path / "one.bam").read_bytes()
    # Run again: the group is replaced (duplicate.1), as the one machine replaces it.
    cli("agd", "markdup", "ds", cwd=tmp_path / "one")
    distributed.agd_markdup(ds, client=client, task_memory=TASK_MEMORY, command_line=command,
                            reduce_tasks=3, progress=False)
    assert files(ds) == files(tmp_path / "one" / "ds")
    assert not [p for p in ds.iterdir() if p.name.startswith(".")]


def test_agd_markdup_options_and_refusals(datasets, client, tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    shutil.copytree(datasets["query"], ds)
    before = files(ds)
    with pytest.raises(ArgumentError, match="agd_markdup"):
        distributed.markdup(ds, tmp_path / "out.bam", client=client, progress=False)
    with pytest.raises(ArgumentError, match="mode"):
        distributed.agd_markdup(ds, client=client, mode="picard", progress=False)
    with pytest.raises(ArgumentError, match="not an AGD dataset"):
        distributed.agd_markdup(tmp_path, client=client, progress=False)
    assert files(ds) == before
    # Options reach the tasks: -a marks nothing new, --level changes the files as the CLI's does.
    one = tmp_path / "one"
    one.mkdir()
    shutil.copytree(datasets["query"], one / "ds")
    cli("agd", "markdup", "--maxReadLength", "300", "--level", "9", "ds", cwd=one)
    distributed.agd_markdup(ds, client=client, max_read_length=300, level=9,
                            task_memory=TASK_MEMORY, command_line=f"{CLI} agd markdup "
                            "--maxReadLength 300 --level 9 ds", progress=False)
    assert files(ds) == files(one / "ds")
    # task_memory cuts the runs: one map task when the dataset fits, the same dataset.
    again = tmp_path / "again"
    shutil.copytree(datasets["query"], again)
    report = distributed.agd_markdup(again, client=client, max_read_length=300, level=9,
                                     task_memory="64M", command_line=f"{CLI} agd markdup "
                                     "--maxReadLength 300 --level 9 ds", progress=False)
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["map"]["tasks"] == 1 and phases["write"]["tasks"] == 1
    assert files(again) == files(one / "ds")


def test_failing_agd_markdup_leaves_the_dataset_as_it_was(datasets, client, tmp_path: Path) -> None:
    for mode in ("query", "coordinate"):
        ds = tmp_path / mode
        shutil.copytree(datasets[mode], ds)
        chunk = ds / "bases" / "000004.parquet"
        chunk.write_bytes(chunk.read_bytes()[:100])
        before = files(ds)
        with pytest.raises(Exception, match="000004.parquet"):
            distributed.agd_markdup(ds, client=client, task_memory=TASK_MEMORY, progress=False)
        assert files(ds) == before
        assert sorted(p.name for p in ds.iterdir()) == sorted(
            p.name for p in datasets[mode].iterdir())


def test_worker_killed_mid_agd_markdup_changes_nothing(datasets, tmp_path: Path) -> None:
    """A worker SIGKILLed inside the scheduler's transition of the first map task to 'memory'
    (the reduce stage is not submitted yet: the job is provably in the middle)."""
    expected, command = one_machine(datasets["query"], tmp_path)
    ds = tmp_path / "dask" / "ds"
    shutil.copytree(datasets["query"], ds)
    with_a_worker_killed(tmp_path, "map", lambda c: (
        distributed.agd_markdup(ds, client=c, task_memory=TASK_MEMORY, command_line=command,
                                progress=False)))
    assert files(ds) == expected


def test_s3_agd_markdup_byte_identical_and_failure_leaves_nothing(datasets, client, s3,
                                                                    tmp_path: Path) -> None:
    fs, options = s3
    for mode in ("query", "coordinate"):
        expected, command = one_machine(datasets[mode], tmp_path / mode)
        url = f"sortase-test/agdmd-{mode}/ds"
        fs.put(str(datasets[mode]), url, recursive=True)
        report = distributed.agd_markdup(f"s3://{url}", client=client, task_memory=TASK_MEMORY,
                                         command_line=command, storage_options=options,
                                         progress=False)
        assert report["mode"] == mode
        fs.invalidate_cache()
        got = tmp_path / mode / "got"
        fs.get(url, str(got), recursive=True)
        assert files(got) == expected
        # Nothing else in the bucket: no staging, no work prefix next to the dataset.
        assert fs.ls(f"sortase-test/agdmd-{mode}", detail=False) == [url]
        phases = {p["name"]: p for p in report["distributed"]["phases"]}
        assert phases["commit"]["objects_copied_server_side"] == len(
            [k for k in expected if k.startswith("duplicate/")])

    # A dataset without records: an empty group (no objects), the manifest as the one machine's.
    sam = tmp_path / "empty.sam"
    sam.write_text("@HD\tVN:1.6\tSO:queryname\n@SQ\tSN:c\tLN:100\n")
    empty = tmp_path / "empty"
    cli("agd", "import", str(sam), "-o", str(empty))
    expected, command = one_machine(empty, tmp_path / "empty-one")
    fs.put(str(empty), "sortase-test/agdmd-empty/ds", recursive=True)
    distributed.agd_markdup("s3://sortase-test/agdmd-empty/ds", client=client,
                            command_line=command, storage_options=options, progress=False)
    fs.invalidate_cache()
    fs.get("sortase-test/agdmd-empty/ds", str(tmp_path / "empty-got"), recursive=True)
    assert files(tmp_path / "empty-got") == expected

    bad = tmp_path / "bad"
    shutil.copytree(datasets["query"], bad)
    chunk = bad / "names" / "000005.parquet"
    chunk.write_bytes(chunk.read_bytes()[:100])
    fs.put(str(bad), "sortase-test/agdmd-bad/ds", recursive=True)
    fs.invalidate_cache()
    before = sorted(fs.find("sortase-test/agdmd-bad"))
    with pytest.raises(Exception, match="000005.parquet"):
        distributed.agd_markdup("s3://sortase-test/agdmd-bad/ds", client=client,
                                task_memory=TASK_MEMORY, storage_options=options, progress=False)
    fs.invalidate_cache()
    assert sorted(fs.find("sortase-test/agdmd-bad")) == before


def test_console_script_agd_markdup(datasets, client, tmp_path: Path) -> None:
    from sortase import _dask_cli

    ds = tmp_path / "ds"
    shutil.copytree(datasets["coordinate"], ds)
    expected, _ = one_machine(datasets["coordinate"], tmp_path)
    assert _dask_cli.main(["agd-markdup", "--task-memory", TASK_MEMORY, "--scheduler",
                           client.scheduler.address, "--no-progress", str(ds)]) == 0
    got = files(ds)
    # The manifest records sortase-dask's command line; every other file is the one machine's.
    assert "sortase-dask agd-markdup" in got.pop("manifest.json").decode()
    expected.pop("manifest.json")
    assert got == expected
