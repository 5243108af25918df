"""sortase.distributed on AGD datasets (issue 19): flagstat and counting (``-q``, ``-f``, ``-F``,
regions, ``-M``) with one task per run of chunks, on a LocalCluster of 2 worker processes, over a
local directory and over an S3 API server (moto): equal to the single-machine CLI; a damaged
dataset fails naming the chunk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pysam")
pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402
from test_distributed import RECORDS, cli, client, make_bam, s3  # noqa: E402,F401

#: Records per chunk: the test BAM makes 14 chunks.
CHUNK = 3000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """A coordinate-sorted, indexed BAM and its dataset."""
    d = tmp_path_factory.mktemp("agd")
    bam = make_bam(d / "in.bam")
    sorted_bam = d / "sorted.bam"
    cli("sort", "--no-PG", "-o", str(sorted_bam), str(bam))
    cli("index", str(sorted_bam))
    ds = d / "ds"
    cli("agd", "import", "--chunk-size", str(CHUNK), str(sorted_bam), "-o", str(ds))
    return sorted_bam, ds


def one_machine_flagstat(ds: Path) -> dict:
    """``sortase agd flagstat -O tsv`` as {name: [passed, failed]}."""
    tsv = [line.split("\t") for line in cli("agd", "flagstat", "-O", "tsv", str(ds)).decode().splitlines()]
    return {row[2]: [int(row[0]), int(row[1])] for row in tsv if row[0].isdigit()}


def check_flagstat(counts: dict, expect: dict) -> None:
    assert counts["reads"] == expect["total (QC-passed reads + QC-failed reads)"]
    for key, name in (("secondary", "secondary"), ("supplementary", "supplementary"),
                      ("dup", "duplicates"), ("mapped", "mapped"), ("read1", "read1")):
        assert counts[key] == expect[name], key


#: (keywords of distributed.count, the same options for `sortase view -c` on the indexed BAM).
COUNTS = [
    ({}, []),
    ({"min_mapq": 30}, ["-q", "30"]),
    ({"exclude_flags": 16, "require_flags": 1}, ["-F", "16", "-f", "1"]),
    ({"regions": ["chr1:100000-500000", "chr3", "*"]}, ["REGIONS", "chr1:100000-500000", "chr3", "*"]),
    ({"regions": ["chr2:1-400000", "chr2:300000-700000"], "min_mapq": 10},
     ["-q", "10", "REGIONS", "chr2:1-400000", "chr2:300000-700000"]),
]


def view_count(bam: Path, options: list) -> int:
    """``sortase view -c`` with ``options`` (regions after the BAM)."""
    if "REGIONS" in options:
        at = options.index("REGIONS")
        args = ["view", "-c", *options[:at], str(bam), *options[at + 1:]]
    else:
        args = ["view", "-c", *options, str(bam)]
    return int(cli(*args))


def test_dataset_flagstat_and_counts_match_one_machine(dataset: tuple, client) -> None:
    bam, ds = dataset
    report = distributed.flagstat(ds, client=client, tasks=5, progress=False)
    assert report["distributed"]["phases"][1]["tasks"] == 5
    check_flagstat(report["counts"], one_machine_flagstat(ds))
    assert report["counts"] == distributed.flagstat(bam, client=client, tasks=3, progress=False)["counts"]
    for keywords, options in COUNTS:
        n = distributed.count(ds, client=client, tasks=4, progress=False, **keywords)
        assert n == view_count(bam, options), keywords
    # -M: each record once (the two chr2 regions overlap).
    regions = ["chr2:1-400000", "chr2:300000-700000"]
    union = distributed.count(ds, client=client, regions=regions, multi_region=True, progress=False)
    assert union == int(cli("agd", "view", "-c", "-M", str(ds), *regions))
    assert union < view_count(bam, ["REGIONS", *regions])


def test_dataset_tasks_read_only_results(dataset: tuple, client) -> None:
    _, ds = dataset
    report = distributed.flagstat(ds, client=client, progress=False)
    results = sum(f.stat().st_size for f in (ds / "results").iterdir())
    assert report["distributed"]["phases"][1]["bytes_read"] == results


def test_damaged_dataset_fails_naming_the_chunk(dataset: tuple, client, tmp_path: Path) -> None:
    _, ds = dataset
    broken = tmp_path / "ds"
    cli("agd", "import", "--chunk-size", str(CHUNK), str(dataset[0]), "-o", str(broken))
    chunk = broken / "results" / "000003.parquet"
    data = chunk.read_bytes()
    chunk.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception, match="000003.parquet.*truncated"):
        distributed.flagstat(broken, client=client, tasks=4, progress=False)
    chunk.unlink()
    with pytest.raises(Exception, match="000003.parquet.*missing"):
        distributed.count(broken, client=client, min_mapq=30, progress=False)
    chunk.write_bytes(data)
    manifest = broken / "manifest.json"
    m = json.loads(manifest.read_text())
    m["chunks"][0]["records"] -= 1
    m["chunks"][0]["last"] -= 1
    m["chunks"][1]["records"] += 1
    m["chunks"][1]["first"] -= 1
    for c in m["chunks"][:2]:
        del c["positions"]
    manifest.write_text(json.dumps(m))
    with pytest.raises(Exception, match="000000.parquet.*holds 3000 records, the manifest says 2999"):
        distributed.flagstat(broken, client=client, progress=False)


def test_s3_dataset_flagstat_and_counts(dataset: tuple, client, s3) -> None:
    fs, options = s3
    bam, ds = dataset
    fs.put(str(ds), "sortase-test/ds", recursive=True)
    url = "s3://sortase-test/ds"
    report = distributed.flagstat(url, client=client, tasks=4, storage_options=options, progress=False)
    check_flagstat(report["counts"], one_machine_flagstat(ds))
    phases = report["distributed"]["phases"]
    assert phases[1]["tasks"] == 4
    # The driver fetched the manifest only; the tasks the results files only.
    assert report["distributed"]["plan_bytes_read"] == (ds / "manifest.json").stat().st_size
    assert phases[1]["bytes_read"] == sum(f.stat().st_size for f in (ds / "results").iterdir())
    for keywords, options_ in COUNTS:
        n = distributed.count(url, client=client, tasks=3, storage_options=options, progress=False,
                              **keywords)
        assert n == view_count(bam, options_), keywords
    fs.invalidate_cache()
    assert sorted(fs.ls("sortase-test", detail=False)) == sorted(
        p for p in fs.ls("sortase-test", detail=False) if ".sortase-dask-" not in p)
    fs.rm("sortase-test/ds", recursive=True)


def test_marked_dataset_counts_its_duplicate_group(dataset: tuple, client, s3, tmp_path: Path) -> None:
    """After ``agd markdup`` the flags come from the ``duplicate`` group: the tasks read (and on S3
    fetch) its files too, and the counts equal the single-machine ``agd flagstat`` / ``agd view``."""
    fs, options = s3
    marked = tmp_path / "marked"
    cli("agd", "import", "--chunk-size", str(CHUNK), str(dataset[0]), "-o", str(marked))
    cli("agd", "markdup", str(marked))
    assert (marked / "manifest.json").read_text().count('"duplicate"') >= 1
    expect = one_machine_flagstat(marked)
    assert expect["duplicates"][0] > 0
    dup_only = int(cli("agd", "view", "-c", "-f", "1024", str(marked)))
    assert dup_only == expect["duplicates"][0]
    fs.put(str(marked), "sortase-test/marked", recursive=True)
    for where, kw in ((marked, {}), ("s3://sortase-test/marked", {"storage_options": options})):
        report = distributed.flagstat(where, client=client, tasks=3, progress=False, **kw)
        check_flagstat(report["counts"], expect)
        assert distributed.count(where, client=client, tasks=3, require_flags=1024, progress=False,
                                 **kw) == dup_only
    fs.rm("sortase-test/marked", recursive=True)
