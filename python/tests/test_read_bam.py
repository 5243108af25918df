"""`read_bam` / `scan_bam` against pysam, field by field: the htslib test corpus, generated edge
cases, regions, projections, typed tags, threads and batch sizes; then Polars and DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pyarrow as pa
import pytest

import sortase
from conftest import FIXED, assert_same, corpus_sams, expected_rows, pysam, rows, write_bam

# Fewer compared corpus files than this means the corpus went missing.
MIN_CORPUS_FILES = 40


def test_corpus_bams_equal_pysam(corpus_bams: Dict[str, Path]) -> None:
    assert len(corpus_bams) >= MIN_CORPUS_FILES, f"only {len(corpus_bams)} corpus files"
    for name, bam in corpus_bams.items():
        want = list(expected_rows(bam))
        for threads in (1, 3):
            got = rows(sortase.read_bam(bam, threads=threads, batch_rows=5))
            assert_same(got, want, f"{name} (threads={threads})")


def test_corpus_sams_read_directly(corpus_bams: Dict[str, Path]) -> None:
    compared = 0
    for sam in corpus_sams():
        name = str(sam).split("/test/", 1)[-1].replace("/", "_")
        if name not in corpus_bams:
            continue  # pysam rejects it
        want = list(expected_rows(sam))
        assert_same(rows(sortase.read_bam(sam)), want, f"{name} (SAM)")
        compared += 1
    assert compared >= MIN_CORPUS_FILES


def test_corpus_bam_files_and_regions() -> None:
    bam = Path("/usr/share/htslib-test/test/range.bam")
    if not bam.exists():
        pytest.skip("htslib-test corpus missing")
    assert_same(rows(sortase.read_bam(bam)), list(expected_rows(bam)), "range.bam")
    regions = {
        "CHROMOSOME_I": ("CHROMOSOME_I", None, None),
        "CHROMOSOME_I:1000-2000": ("CHROMOSOME_I", 999, 2000),
        "CHROMOSOME_II:1-1": ("CHROMOSOME_II", 0, 1),
        "CHROMOSOME_V:1,000,000-1,200,000": ("CHROMOSOME_V", 999_999, 1_200_000),
        "CHROMOSOME_X:500-": ("CHROMOSOME_X", 499, None),
        "CHROMOSOME_IV": ("CHROMOSOME_IV", None, None),
    }
    for region, oracle in regions.items():
        for threads in (1, 4):
            got = rows(sortase.read_bam(bam, region=region, threads=threads))
            assert_same(got, list(expected_rows(bam, region=oracle)), f"range.bam {region}")


def test_large_file_many_ranges_equals_pysam(large_bam: Path) -> None:
    want = list(expected_rows(large_bam, tags=["NM"]))
    for threads in (1, 2, 4):
        got = rows(sortase.read_bam(large_bam, threads=threads, tags=["NM"]))
        assert_same(got, want, f"large.bam threads={threads}")


def test_large_file_regions(large_bam: Path) -> None:
    regions = {
        "chr2": ("chr2", None, None),
        "chr1:1000000-3000000": ("chr1", 999_999, 3_000_000),
        "chr3:4999000-": ("chr3", 4_998_999, None),
        "chr1:1-100": ("chr1", 0, 100),
    }
    for region, oracle in regions.items():
        want = list(expected_rows(large_bam, region=oracle))
        got = rows(sortase.read_bam(large_bam, region=region, threads=4))
        assert_same(got, want, f"large.bam {region}")


def test_projection_decodes_only_what_is_asked(large_bam: Path) -> None:
    cols = ["qname", "flag", "rname", "pos", "mapq"]
    t = sortase.read_bam(large_bam, columns=cols)
    assert t.column_names == cols
    assert_same(rows(t), list(expected_rows(large_bam, columns=cols)), "projection")
    t = sortase.read_bam(large_bam, columns=["pos"], tags=["RG"])
    assert t.column_names == ["pos", "RG"]
    t = sortase.read_bam(large_bam, columns=[])
    assert t.num_columns == 0 and t.num_rows == 60_500


def test_scan_bam_streams_in_order(large_bam: Path) -> None:
    reader = sortase.scan_bam(large_bam, columns=["qname", "pos"], threads=2, batch_rows=1000)
    assert isinstance(reader, pa.RecordBatchReader)
    names: List[str] = []
    for batch in reader:
        assert batch.num_rows <= 1000
        names.extend(batch.column("qname").to_pylist())
    assert names == [r["qname"] for r in expected_rows(large_bam, columns=["qname"])]


def test_scan_bam_dropped_early_stops(large_bam: Path) -> None:
    reader = sortase.scan_bam(large_bam, threads=2, batch_rows=100)
    first = reader.read_next_batch()
    assert first.num_rows == 100
    del reader  # workers stop; nothing hangs


def edge_records() -> List[Dict[str, Any]]:
    import array

    long_cigar = [(0, 1), (1, 1)] * 35_000  # 70 000 operations: stored in the CG tag
    long_len = 70_000
    every_tag = [
        ("XA", "c", "A"), ("Xc", -5, "c"), ("XC", 200, "C"), ("Xs", -30000, "s"),
        ("XS", 60000, "S"), ("Xi", -2_000_000_000, "i"), ("XI", 4_000_000_000, "I"),
        ("Xf", 1.25, "f"), ("XZ", "hello world", "Z"), ("XH", "1AE301", "H"),
        ("Bc", array.array("b", [-1, 2, -3]), None), ("BC", array.array("B", [1, 255]), None),
        ("Bs", array.array("h", [-300, 300]), None), ("BS", array.array("H", [65535]), None),
        ("Bi", array.array("i", [-70000, 5]), None), ("BI", array.array("I", [4_000_000_000]), None),
        ("Bf", array.array("f", [0.5, -1.5, 3.0]), None),
    ]
    qual = pysam.qualitystring_to_array
    return [
        {"query_name": "mapped", "flag": 0, "reference_id": 0, "reference_start": 9,
         "mapping_quality": 60, "cigarstring": "2S4M1D2M", "query_sequence": "NNACGTAC",
         "query_qualities": qual("!!IIII#~"), "tags": every_tag},
        {"query_name": "noseq", "flag": 0, "reference_id": 0, "reference_start": 20,
         "mapping_quality": 0, "cigarstring": "5M"},
        {"query_name": "seq_no_qual", "flag": 16, "reference_id": 0, "reference_start": 30,
         "cigarstring": "3M", "query_sequence": "ACG"},
        {"query_name": "long_cigar", "flag": 0, "reference_id": 0, "reference_start": 40,
         "cigartuples": long_cigar, "query_sequence": "A" * long_len,
         "tags": [("NM", 3, "i")]},
        {"query_name": "placed_unmapped", "flag": 4, "reference_id": 1, "reference_start": 5,
         "query_sequence": "ACGT", "next_reference_id": 0, "next_reference_start": 9},
        {"query_name": "mate_elsewhere", "flag": 1 | 2 | 32 | 64, "reference_id": 1,
         "reference_start": 7, "cigarstring": "4M", "query_sequence": "TTTT",
         "next_reference_id": 0, "next_reference_start": 99, "template_length": -123},
        {"query_name": "unmapped", "flag": 4, "reference_id": -1, "reference_start": -1,
         "query_sequence": "ACGTN", "query_qualities": qual("IIIII"),
         "tags": [("RG", "g1", "Z")]},
        {"query_name": "bare", "flag": 4, "reference_id": -1, "reference_start": -1},
    ]


EDGE_TAGS = ["XA", "Xc", "XC", "Xs", "XS", "Xi", "XI", "Xf", "XZ", "XH", "Bc", "BC", "Bs", "BS",
             "Bi", "BI", "Bf", "NM", "RG", "CG"]


@pytest.fixture(scope="module")
def edge_bam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    header = {"HD": {"VN": "1.6", "SO": "coordinate"},
              "SQ": [{"SN": "c1", "LN": 200_000}, {"SN": "c:2", "LN": 1000}],
              "RG": [{"ID": "g1"}]}
    path = tmp_path_factory.mktemp("edge") / "edge.bam"
    return write_bam(path, header, edge_records(), index=True)


def test_edge_cases_equal_pysam(edge_bam: Path) -> None:
    want = list(expected_rows(edge_bam))
    assert any(r["cigar"] and r["cigar"].count("I") == 35_000 for r in want)
    for threads in (1, 2):
        assert_same(rows(sortase.read_bam(edge_bam, threads=threads)), want, "edge")


def test_every_tag_type_as_typed_columns(edge_bam: Path) -> None:
    got = rows(sortase.read_bam(edge_bam, tags=EDGE_TAGS))
    want = list(expected_rows(edge_bam, tags=EDGE_TAGS))
    assert_same(got, want, "typed tags")
    t = sortase.read_bam(edge_bam, columns=[], tags=["Xi", "Xf", "XZ", "Bc", "Bf"])
    assert [f.type for f in t.schema] == [pa.int64(), pa.float64(), pa.string(),
                                          pa.list_(pa.int64()), pa.list_(pa.float64())]


def test_explicit_tag_types(edge_bam: Path) -> None:
    t = sortase.read_bam(edge_bam, columns=["qname"], tags={"Xi": "Z", "Bc": "Z", "NM": "f"})
    first = t.to_pylist()[0]
    assert first["Xi"] == "-2000000000"
    assert first["Bc"] == "c,-1,2,-3"
    long_row = [r for r in t.to_pylist() if r["qname"] == "long_cigar"][0]
    assert long_row["NM"] == 3.0
    with pytest.raises(sortase.FormatError, match="tag XZ has type 'Z'"):
        sortase.read_bam(edge_bam, tags={"XZ": "i"})


def test_regions_on_edge_cases(edge_bam: Path) -> None:
    regions = {
        "c1": ("c1", None, None),
        "c1:10-15": ("c1", 9, 15),
        "c1:41-41": ("c1", 40, 41),
        "{c:2}": ("c:2", None, None),
        "{c:2}:1-7": ("c:2", 0, 7),
        "c1:100000-": ("c1", 99_999, None),
    }
    for region, oracle in regions.items():
        got = rows(sortase.read_bam(edge_bam, region=region))
        assert_same(got, list(expected_rows(edge_bam, region=oracle)), f"edge {region}")


def test_header_only_and_empty_inputs(tmp_path: Path) -> None:
    header = {"HD": {"VN": "1.6"}, "SQ": [{"SN": "c1", "LN": 100}]}
    bam = write_bam(tmp_path / "header_only.bam", header, [])
    for path in (bam,):
        t = sortase.read_bam(path, tags=["NM"])
        assert t.num_rows == 0
        assert t.column_names == FIXED + ["NM"]
    sam = tmp_path / "header_only.sam"
    sam.write_text("@SQ\tSN:c1\tLN:100\n")
    assert sortase.read_bam(sam).num_rows == 0
    assert sortase.scan_bam(sam).read_all().num_rows == 0
    empty = tmp_path / "empty.bam"
    empty.write_bytes(b"")
    with pytest.raises(sortase.InputError, match="empty.bam: file is empty"):
        sortase.read_bam(empty)


def test_progress_bar(large_bam: Path) -> None:
    pytest.importorskip("tqdm")
    assert sortase.read_bam(large_bam, columns=["pos"], progress=True).num_rows == 60_500


def test_polars_and_duckdb_read_the_result(large_bam: Path) -> None:
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    t = sortase.read_bam(large_bam, columns=["qname", "rname", "pos", "mapq"], tags=["NM"])
    df = pl.from_arrow(t)
    assert df.height == t.num_rows
    per_ref = df.group_by("rname").len().sort("rname")
    assert per_ref["len"].sum() == t.num_rows
    con = duckdb.connect()
    con.register("reads", t)
    [(n,)] = con.execute("select count(*) from reads where mapq >= 30 and NM = 0").fetchall()
    assert n == sum(1 for r in t.to_pylist() if r["mapq"] >= 30 and r["NM"] == 0)
    con.register("stream", sortase.scan_bam(large_bam, columns=["rname", "pos"]))
    [(m,)] = con.execute("select count(*) from stream").fetchall()
    assert m == t.num_rows
