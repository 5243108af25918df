"""Issue 28: an AGD dataset is a source of `sortase.view`, `sortase.flagstat` and `sortase.idxstats`
as a BAM is: their results on the dataset equal theirs on the BAM it came from (and
`sortase.agd.flagstat`/`idxstats`, now calls of the same jobs); a filter the dataset's columns do
not decide on is refused naming the dataset; `use_index` (`-M`) is the regions' union."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Tuple

import pytest

import sortase
import sortase.agd
from conftest import pysam, sam_to_bam

SAM = (
    "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:100000\n@SQ\tSN:chr2\tLN:5000\n"
    + "".join(
        f"r{k}\t{(0, 16, 1024, 256)[k % 4]}\t{('chr1', 'chr2')[k % 2]}\t{10 + 37 * k}\t{(k * 13) % 61}"
        f"\t4M\t*\t0\t0\tACGT\tIIII\n"
        for k in range(40)
    )
    + "u1\t4\t*\t0\t0\t*\t*\t0\t0\tNNAC\t!!#$\n"
)


@pytest.fixture()
def sorted_pair(tmp_path: Path):
    """A coordinate-sorted indexed BAM and its dataset in chunks of 7 records."""
    sam = tmp_path / "in.sam"
    sam.write_text(SAM)
    bam = tmp_path / "sorted.bam"
    sortase.sort(sam, bam, write_index=True)
    ds = tmp_path / "ds"
    sortase.agd.import_(bam, ds, chunk_size=7)
    return bam, ds


def test_flagstat_and_idxstats_of_a_dataset(sorted_pair) -> None:
    bam, ds = sorted_pair
    assert sortase.flagstat(ds) == sortase.flagstat(bam) == sortase.agd.flagstat(ds)
    table = sortase.idxstats(ds, threads=2)
    assert table.equals(sortase.idxstats(bam)) and table.equals(sortase.agd.idxstats(ds))


def test_view_of_a_dataset_equals_view_of_its_bam(sorted_pair, tmp_path: Path) -> None:
    bam, ds = sorted_pair
    for kw in [{}, {"min_mapq": 20}, {"exclude_flags": "DUP", "regions": ["chr1:100-900"]},
               {"require_flags": 16, "regions": ["chr2", "*"]}]:
        assert sortase.view(ds, count=True, **kw)["count"] == sortase.view(bam, count=True, **kw)["count"], kw
        ours, theirs = tmp_path / "ours.sam", tmp_path / "theirs.sam"
        sortase.view(ds, ours, with_header=True, no_pg=True, **kw)
        sortase.view(bam, theirs, with_header=True, no_pg=True, **kw)
        assert ours.read_text() == theirs.read_text(), kw
    regions = ["chr1:1-500", "chr1:300-800"]
    union = sortase.view(ds, count=True, regions=regions, use_index=True)["count"]
    want = int(pysam.samtools.view("-c", "-M", str(bam), *regions))
    assert union == want < sortase.view(ds, count=True, regions=regions)["count"]


def test_view_of_a_dataset_refuses_other_filters(sorted_pair) -> None:
    _, ds = sorted_pair
    with pytest.raises(sortase.ArgumentError, match="-f, -F and -q only"):
        sortase.view(ds, count=True, expr="mapq > 3")


def unsorted_pair(tmp_path: Path) -> Tuple[Path, Path]:
    """The test SAM as a BAM in its own order and its dataset in chunks of 6 records."""
    tmp_path.mkdir(exist_ok=True)
    bam = sam_to_bam(SAM, tmp_path)
    ds = tmp_path / "ds"
    sortase.agd.import_(bam, ds, chunk_size=6)
    return bam, ds


def test_sort_of_a_dataset_equals_sort_of_its_bam(tmp_path: Path) -> None:
    bam, ds = unsorted_pair(tmp_path)
    for kw in [{}, {"by_name": True}]:
        ours, theirs = tmp_path / "ours.sam", tmp_path / "theirs.sam"
        assert sortase.sort(ds, ours, no_pg=True, **kw)["records"] == 41
        sortase.sort(bam, theirs, no_pg=True, **kw)
        assert ours.read_text() == theirs.read_text(), kw


def test_sort_into_a_dataset_from_a_bam_or_a_dataset(tmp_path: Path) -> None:
    """``output_fmt="agd"``: the sort's sink is a new dataset (``sortase agd sort``); from the BAM or
    from its dataset, the chunks hold the same records, and the export is the sorted BAM's."""
    bam, ds = unsorted_pair(tmp_path)
    want = tmp_path / "want.sam"
    sortase.sort(bam, want, no_pg=True)
    for source in (bam, ds):
        out = tmp_path / f"sorted-{source.name}"
        report = sortase.sort(source, out, output_fmt="agd", chunk_size=5, no_pg=True)
        assert report["records"] == 41 and report["chunks"] >= 9
        sorted_ds = sortase.agd.open(out)
        assert sorted_ds.sort_order == "coordinate"
        assert sorted_ds.records == 41
        back = tmp_path / f"back-{source.name}.sam"
        sortase.agd.export(out, back)
        assert back.read_text() == want.read_text(), source


def test_export_writes_the_index_samtools_writes(sorted_pair, tmp_path: Path, sortase_bin: Path
                                                 ) -> None:
    """``write_index`` (``--write-index``: export's flags are its spec's, the output flags of every
    job): the exported BAM's index is the one samtools index writes for it, a CSI by default and a
    BAI by its ``##idx##`` name; the CLI writes the same bytes. An unsorted dataset is refused as
    view refuses an unsorted input, FASTQ output as having no index; neither leaves a file."""
    _, ds = sorted_pair
    out = tmp_path / "back.bam"
    report = sortase.agd.export(ds, out, write_index=True)
    assert report["outputs"] == [str(out), f"{out}.csi"]
    pysam.index("-c", str(out), "-o", str(tmp_path / "theirs.csi"))
    assert Path(f"{out}.csi").read_bytes() == (tmp_path / "theirs.csi").read_bytes()
    bai = tmp_path / "b.bai"
    sortase.agd.export(ds, f"{tmp_path / 'b.bam'}##idx##{bai}", write_index=True)
    pysam.index(str(tmp_path / "b.bam"), "-o", str(tmp_path / "theirs.bai"))
    assert bai.read_bytes() == (tmp_path / "theirs.bai").read_bytes()
    cli = tmp_path / "cli.bam"
    subprocess.run([str(sortase_bin), "agd", "export", "--write-index", "-o", str(cli), str(ds)],
                   check=True)
    assert cli.read_bytes() == out.read_bytes()
    assert Path(f"{cli}.csi").read_bytes() == Path(f"{out}.csi").read_bytes()

    _, unsorted = unsorted_pair(tmp_path / "u")
    with pytest.raises(sortase.SortaseError, match="not coordinate-sorted"):
        sortase.agd.export(unsorted, tmp_path / "u.bam", write_index=True)
    with pytest.raises(sortase.ArgumentError, match="--write-index"):
        sortase.agd.export(ds, tmp_path / "u.fq", output_fmt="fastq", write_index=True)
    assert not list(tmp_path.glob("u.*"))
