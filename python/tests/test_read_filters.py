"""`read_bam`'s record filters (`require_flags`, `exclude_flags`, `min_mapq`, `expr`) against
`samtools view` (pysam's 1.24) with the same options."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

import sortase
from conftest import pysam

COLS = ["qname", "flag", "rname", "pos", "mapq"]


def samtools_rows(path: Path, args: Sequence[str], region: Optional[str] = None) -> List[tuple]:
    """(qname, flag, rname, pos, mapq) of the records `samtools view ARGS path [region]` writes."""
    text = pysam.view(*args, str(path), *([region] if region else []))
    out = []
    for line in text.splitlines():
        f = line.split("\t")
        out.append((f[0], int(f[1]), None if f[2] == "*" else f[2], int(f[3]), int(f[4])))
    return out


def sortase_rows(table: Any) -> List[tuple]:
    d = table.to_pydict()
    return list(zip(*(d[c] for c in COLS)))


# (read_bam keywords, samtools view arguments)
CASES: List[tuple] = [
    ({"min_mapq": 30}, ["-q", "30"]),
    ({"require_flags": 16}, ["-f", "16"]),
    ({"require_flags": "PAIRED,READ1"}, ["-f", "0x41"]),
    ({"exclude_flags": "UNMAP,REVERSE"}, ["-F", "0x14"]),
    ({"exclude_flags": 0x10, "min_mapq": 20, "require_flags": "0x1"}, ["-F", "16", "-q", "20", "-f", "1"]),
    ({"expr": "mapq >= 30 && [NM] < 2"}, ["-e", "mapq >= 30 && [NM] < 2"]),
    ({"expr": 'rname == "chr2" || flag.unmap'}, ["-e", 'rname == "chr2" || flag.unmap']),
    ({"expr": "pos > 2000000 && !flag.reverse", "min_mapq": 5}, ["-e", "pos > 2000000 && !flag.reverse", "-q", "5"]),
    ({"expr": "qname =~ \"read1[0-9]*5$\""}, ["-e", "qname =~ \"read1[0-9]*5$\""]),
]


@pytest.mark.parametrize("kwargs,args", CASES, ids=[" ".join(a) for _, a in CASES])
def test_filters_equal_samtools_view(large_bam: Path, kwargs: Dict[str, Any], args: List[str]) -> None:
    want = samtools_rows(large_bam, args)
    assert 0 < len(want) < 60_500, "the filter selects some records"
    for threads in (1, 3):
        got = sortase_rows(sortase.read_bam(large_bam, columns=COLS, threads=threads, **kwargs))
        assert got == want, f"{kwargs} threads={threads}"
    streamed = sortase.scan_bam(large_bam, columns=COLS, threads=2, batch_rows=777, **kwargs)
    assert sortase_rows(streamed.read_all()) == want


@pytest.mark.parametrize("region", ["chr1:1000000-3000000", "chr3", "chr2:4900000-"])
def test_filters_with_a_region(large_bam: Path, region: str) -> None:
    kwargs = {"min_mapq": 20, "exclude_flags": 16, "expr": "[NM] != 4"}
    want = samtools_rows(large_bam, ["-q", "20", "-F", "16", "-e", "[NM] != 4"], region)
    assert want
    got = sortase_rows(sortase.read_bam(large_bam, region=region, columns=COLS, threads=2, **kwargs))
    assert got == want


def test_filters_on_sam_input(large_bam: Path, tmp_path: Path) -> None:
    sam = tmp_path / "large.sam"
    sam.write_text(pysam.view("-h", str(large_bam)))
    for kwargs, args in CASES[:6]:
        got = sortase_rows(sortase.read_bam(sam, columns=COLS, **kwargs))
        assert got == samtools_rows(large_bam, args), kwargs


def test_filter_errors(large_bam: Path) -> None:
    with pytest.raises(sortase.ArgumentError, match="filter expression"):
        sortase.read_bam(large_bam, expr="mapq >")
    with pytest.raises(sortase.SortaseError, match="UNMAPPED"):
        sortase.read_bam(large_bam, exclude_flags="UNMAPPED")
    with pytest.raises(OverflowError):
        sortase.read_bam(large_bam, min_mapq=256)
