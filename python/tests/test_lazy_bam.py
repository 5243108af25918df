"""`lazy_bam`: polars queries whose projection and filters are pushed into `read_bam`, against
the eager frame filtered in polars."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, List

import pytest

import sortase

pl = pytest.importorskip("polars")


pl = pytest.importorskip("polars")


def queries() -> List[tuple]:
    c = pl.col
    return [
        ("mapq", c("mapq") >= 30),
        ("flag mask", (c("flag") & 0x10) == 0),
        ("region", (c("rname") == "chr2") & (c("pos") >= 1_000_000) & (c("pos") <= 2_000_000)),
        ("region open", (c("rname") == "chr3") & (c("pos") > 4_000_000) & (c("mapq") > 10)),
        ("between", c("pos").is_between(10_000, 900_000, closed="left") & (c("rname") == "chr1")),
        ("or", (c("rname") == "chr1") | (c("flag") == 4)),
        ("not", ~((c("flag") & 16) == 16) & (c("tlen") > 0)),
        ("rname only", c("rname") == "chr3"),
        ("untranslated", c("qname").str.ends_with("7") & (c("mapq") < 5)),
        ("untranslated or", c("qname").str.ends_with("7") | (c("mapq") < 5)),
        ("not untranslated", ~(c("qname").str.ends_with("7") & (c("mapq") < 5))),
        ("tag", (c("NM") == 0) & (c("pnext") > 100_000)),
        ("rname null", c("rname").is_null()),
        ("rname not", c("rname") != "chr1"),
        ("float", c("pos") < 123_456.5),
        ("none", (c("mapq") > 200)),
    ]


@pytest.fixture(scope="module")
def eager(large_bam: Path) -> Any:
    return pl.from_arrow(sortase.read_bam(large_bam, tags=["NM"]))


@pytest.mark.parametrize("name,predicate", queries(), ids=[q[0] for q in queries()])
def test_lazy_query_equals_eager_filtered(large_bam: Path, eager: Any, name: str,
                                          predicate: Any) -> None:
    lf = sortase.lazy_bam(large_bam, tags=["NM"], threads=2)
    got = lf.filter(predicate).select("qname", "flag", "pos", "NM").collect()
    want = eager.filter(predicate).select("qname", "flag", "pos", "NM")
    assert got.equals(want), name
    assert lf.filter(predicate).select(pl.len()).collect().item() == want.height
    assert lf.filter(predicate).head(7).collect().equals(eager.filter(predicate).head(7))


def test_lazy_whole_frame_and_projection(large_bam: Path, eager: Any) -> None:
    lf = sortase.lazy_bam(large_bam, tags={"NM": "i"})
    assert lf.collect_schema() == eager.schema
    assert lf.collect().equals(eager)
    assert lf.select("tlen", "rname").collect().equals(eager.select("tlen", "rname"))


def test_lazy_options_filter_first(large_bam: Path, eager: Any) -> None:
    lf = sortase.lazy_bam(large_bam, region="chr1:1-2000000", min_mapq=20, exclude_flags="REVERSE",
                          tags=["NM"])
    got = lf.filter(pl.col("NM") < 3).select("qname").collect()
    want = sortase.read_bam(large_bam, region="chr1:1-2000000", min_mapq=20, exclude_flags=16,
                            expr="[NM] < 3", columns=["qname"])
    assert got["qname"].to_list() == want.column("qname").to_pylist()


def test_pushdown_translation() -> None:
    from sortase._lazy import pushdown

    c = pl.col
    names = ["chr1", "chr2"]
    region, expr = pushdown((c("rname") == "chr2") & (c("pos") >= 100) & (c("pos") < 200)
                            & (c("mapq") > 3), names)
    assert region == "chr2:100-199"
    assert "(mapq > 3)" in expr and '(rname == "chr2")' in expr
    # no lower bound on pos: no region (a record with pos 0 is in none)
    assert pushdown(c("rname") == "chr2", names) == (None, '(rname == "chr2")')
    # a name not in the header, or no index: no region
    assert pushdown((c("rname") == "chrX") & (c("pos") > 5), names)[0] is None
    assert pushdown((c("rname") == "chr1") & (c("pos") > 5), None)[0] is None
    # an untranslatable part: left out of &, the whole | and ~ given up
    s = c("qname").str.starts_with("x")
    assert pushdown(s & (c("mapq") > 1), names) == (None, "(mapq > 1)")
    assert pushdown(s | (c("mapq") > 1), names) == (None, None)
    assert pushdown(~(s & (c("mapq") > 1)), names) == (None, None)
    assert pushdown(None, names) == (None, None)


def test_lazy_needs_polars(large_bam: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(ImportError, match="needs polars"):
        sortase.lazy_bam(large_bam)


def test_lazy_bad_input_raises_at_once(tmp_path: Path) -> None:
    with pytest.raises(sortase.InputError):
        sortase.lazy_bam(tmp_path / "missing.bam")



def test_lazy_bad_expression_raises_at_once(large_bam: Path) -> None:
    with pytest.raises(sortase.ArgumentError, match="filter expression"):
        sortase.lazy_bam(large_bam, expr="(")


def test_collect_reads_only_what_the_query_needs(large_bam: Path, eager: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lf = sortase.lazy_bam(large_bam, tags=["NM"])
    calls: List[Any] = []
    scan = sortase.scan_bam

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return scan(*args, **kwargs)

    monkeypatch.setattr(sortase, "scan_bam", spy)
    q = lf.filter((pl.col("rname") == "chr2") & (pl.col("pos") >= 1_000_000)
                  & (pl.col("mapq") >= 30)).select("qname")
    got = q.collect()
    (args, kwargs), = calls
    assert args[1] == "chr2:1000000"  # the region read through the index
    assert kwargs["columns"] == ["qname", "rname", "pos", "mapq"] and kwargs["tags"] is None
    assert "(mapq >= 30)" in kwargs["expr"]
    want = eager.filter((pl.col("rname") == "chr2") & (pl.col("pos") >= 1_000_000)
                        & (pl.col("mapq") >= 30)).select("qname")
    assert got.equals(want) and got.height > 0
