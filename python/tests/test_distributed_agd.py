"""sortase.distributed on AGD datasets (issue 19): flagstat, idxstats and counting (``-q``, ``-f``,
``-F``, regions, ``-M``) with one task per run of chunks, and sort with chunks as the map tasks'
inputs, on a LocalCluster of 2 worker processes, over a local directory and over an S3 API server
(moto): equal to the single-machine CLI (a sort: byte-identical to ``sortase sort`` of the
export); a damaged dataset fails naming the chunk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pysam")
pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402
from test_distributed import RECORDS, cli, leftovers, make_bam, s3  # noqa: E402,F401

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


def test_dataset_idxstats_matches_one_machine(dataset: tuple, client, tmp_path: Path) -> None:
    """Rows equal ``sortase agd idxstats`` and ``sortase idxstats`` of the export (no index); an
    unsorted dataset fails as they do."""
    bam, ds = dataset
    report = distributed.idxstats(ds, client=client, tasks=5, progress=False)
    assert report["distributed"]["phases"][1]["tasks"] == 5
    text = distributed.idxstats_text(report)
    assert text == cli("agd", "idxstats", str(ds)).decode()
    exported = tmp_path / "exported.bam"
    cli("agd", "export", str(ds), "-o", str(exported))
    assert text == cli("idxstats", str(exported)).decode()
    assert text == cli("idxstats", str(bam)).decode()  # from the index
    # The tasks read the results files only.
    results = sum(f.stat().st_size for f in (ds / "results").iterdir())
    assert report["distributed"]["phases"][1]["bytes_read"] == results
    unsorted = tmp_path / "unsorted"
    cli("agd", "import", "--chunk-size", str(CHUNK), str(make_bam(tmp_path / "u.bam", 5000)),
        "-o", str(unsorted))
    with pytest.raises(Exception, match="not position sorted"):
        distributed.idxstats(unsorted, client=client, tasks=3, progress=False)


@pytest.fixture(scope="module")
def unsorted_dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """An unsorted dataset and its export; a coordinate-sorted copy marked by ``agd markdup``
    (a ``duplicate`` group) and that copy's export."""
    d = tmp_path_factory.mktemp("agd-sort")
    bam = make_bam(d / "in.bam", 12_000, seed=19)
    ds = d / "ds"
    cli("agd", "import", "--chunk-size", "1000", str(bam), "-o", str(ds))
    exported = d / "exported.bam"
    cli("agd", "export", str(ds), "-o", str(exported))
    marked = d / "marked"
    cli("agd", "sort", "--no-PG", "--chunk-size", "1500", str(ds), "-o", str(marked))
    cli("agd", "markdup", str(marked))
    marked_bam = d / "marked.bam"
    cli("agd", "export", str(marked), "-o", str(marked_bam))
    return ds, exported, marked, marked_bam


#: (keywords of distributed.sort, the same order's flags of `sortase sort`).
ORDERS = [({}, []), ({"by_name": True}, ["-n"]), ({"by_name_lex": True}, ["-N"]),
          ({"tag": "NM"}, ["-t", "NM"])]


def test_dataset_sort_is_byte_identical(unsorted_dataset: tuple, client, tmp_path: Path) -> None:
    """Every order: the bytes of ``sortase sort`` of the export (with an index for coordinate
    order), several map tasks of chunks and no count tasks; and the records of ``sortase agd
    export`` of ``sortase agd sort``."""
    ds, exported, _, _ = unsorted_dataset
    for keywords, flags in ORDERS:
        out = tmp_path / "dask.bam"
        index = not flags
        report = distributed.sort(ds, out, client=client, no_pg=True, task_memory="1M",
                                  write_index=index, reduce_tasks=3, progress=False, **keywords)
        one = tmp_path / "one.bam"
        cli("sort", "--no-PG", *(["--write-index"] if index else []), *flags, "-o", str(one),
            str(exported))
        assert out.read_bytes() == one.read_bytes(), flags
        if index:
            assert (tmp_path / "dask.bam.csi").read_bytes() == (tmp_path / "one.bam.csi").read_bytes()
        phases = {p["name"]: p for p in report["distributed"]["phases"]}
        assert phases["count"]["tasks"] == 0
        assert phases["map"]["tasks"] > 1, "the dataset's 12 chunks are cut into several map tasks"
        assert report["records"] == 12_000
        agd_sorted = tmp_path / "agd-sorted"
        cli("agd", "sort", "--no-PG", *flags, str(ds), "-o", str(agd_sorted))
        again = tmp_path / "again.bam"
        cli("agd", "export", str(agd_sorted), "-o", str(again))
        assert cli("view", str(again)) == cli("view", str(out)), flags
        for f in (out, one, agd_sorted, again, tmp_path / "dask.bam.csi", tmp_path / "one.bam.csi"):
            if f.is_dir():
                shutil.rmtree(f)
            elif f.exists():
                f.unlink()
    assert leftovers(tmp_path) == []


def test_marked_dataset_sort_applies_duplicates(unsorted_dataset: tuple, client, tmp_path: Path) -> None:
    """The ``duplicate`` group's flags are in the sorted records, as in the export."""
    _, exported, marked_ds, marked_bam = unsorted_dataset
    out = tmp_path / "dask.bam"
    distributed.sort(marked_ds, out, client=client, by_name=True, no_pg=True, task_memory="1M",
                     progress=False)
    one = tmp_path / "one.bam"
    cli("sort", "--no-PG", "-n", "-o", str(one), str(marked_bam))
    assert out.read_bytes() == one.read_bytes()
    dups = int(cli("view", "-c", "-f", "1024", str(out)))
    assert dups == int(cli("agd", "view", "-c", "-f", "1024", str(marked_ds)))
    assert dups != int(cli("view", "-c", "-f", "1024", str(exported))), "markdup changed flags"


def test_s3_dataset_idxstats_and_sort(dataset: tuple, unsorted_dataset: tuple, client, s3,
                                      tmp_path: Path) -> None:
    """On S3: idxstats tasks fetch the results files only; sort tasks the chunk files of their
    runs, once each; the driver the manifest and the first chunk's footers."""
    fs, options = s3
    bam, ds = dataset
    fs.put(str(ds), "sortase-test/ids", recursive=True)
    report = distributed.idxstats("s3://sortase-test/ids", client=client, tasks=4,
                                  storage_options=options, progress=False)
    assert distributed.idxstats_text(report) == cli("idxstats", str(bam)).decode()
    phases = report["distributed"]["phases"]
    assert phases[1]["bytes_read"] == sum(f.stat().st_size for f in (ds / "results").iterdir())
    fs.rm("sortase-test/ids", recursive=True)

    uds, exported, _, _ = unsorted_dataset
    # Its own prefix: moto keeps buckets process-wide, with other tests' outputs in them.
    fs.put(str(uds), "sortase-test/uds", recursive=True)
    report = distributed.sort("s3://sortase-test/uds", "s3://sortase-test/agd-sort-out/sorted.bam",
                              client=client, by_name=True, no_pg=True, task_memory="1M",
                              storage_options=options, progress=False)
    one = tmp_path / "one.bam"
    cli("sort", "--no-PG", "-n", "-o", str(one), str(exported))
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/agd-sort-out/sorted.bam") == one.read_bytes()
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    chunk_files = sum(f.stat().st_size for g in ("names", "bases", "qual", "results")
                      for f in (uds / g).iterdir())
    assert phases["map"]["tasks"] > 1
    assert phases["map"]["bytes_read"] == chunk_files
    # ... read from their objects by the library's reader, not copied to the workers' disks first.
    assert phases["map"]["bytes_streamed"] == chunk_files
    assert phases["map"]["whole_object_fetches"] == 0
    assert report["distributed"]["plan_bytes_read"] <= (uds / "manifest.json").stat().st_size + 4 * distributed.FOOTER
    fs.invalidate_cache()
    assert sorted(fs.ls("sortase-test/agd-sort-out", detail=False)) == ["sortase-test/agd-sort-out/sorted.bam"]
    fs.rm("sortase-test/uds", recursive=True)
    fs.rm("sortase-test/agd-sort-out", recursive=True)


def test_jobs_that_read_bams_only_refuse_a_dataset(dataset: tuple, client, tmp_path: Path) -> None:
    """merge, index and snp-pileup: an ArgumentError naming the dataset, before any task."""
    from sortase import ArgumentError

    bam, ds = dataset
    with pytest.raises(ArgumentError, match=r"merge: .*ds is an AGD dataset; merging datasets"):
        distributed.merge([bam, ds], tmp_path / "m.bam", client=client, progress=False)
    with pytest.raises(ArgumentError, match=r"index: .*ds is an AGD dataset; a dataset has no BAM index"):
        distributed.index(ds, client=client, progress=False)
    with pytest.raises(ArgumentError, match=r"snp_pileup: .*ds is an AGD dataset"):
        distributed.snp_pileup(tmp_path / "x.vcf", tmp_path / "out.csv", [ds], client=client,
                               progress=False)
    assert list(tmp_path.iterdir()) == []
