"""CRAM through the Python package (issue 21): `read_bam` of CRAM whole and by region (through the
`.crai`) with `reference=`, against pysam; the job wrappers' CRAM output options (`reference`,
`output_fmt_options`, `write_index`); `snp_pileup` on CRAM; a missing reference named by its
`@SQ` and `M5`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import sortase
from conftest import CORPUS, assert_same, expected_rows, pysam, rows

RANGE_CRAM = CORPUS / "range.cram"
CE_FA = CORPUS / "ce.fa"


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not RANGE_CRAM.exists():
        pytest.skip("htslib-test corpus missing")
    return CORPUS


REGIONS = {
    "CHROMOSOME_I": ("CHROMOSOME_I", None, None),
    "CHROMOSOME_I:1000-2000": ("CHROMOSOME_I", 999, 2000),
    "CHROMOSOME_II:1-1": ("CHROMOSOME_II", 0, 1),
    "CHROMOSOME_IV:900-1,000": ("CHROMOSOME_IV", 899, 1000),
}


def test_read_cram_whole_and_by_region(corpus: Path) -> None:
    want = list(expected_rows(RANGE_CRAM, reference=CE_FA))
    assert len(want) > 100
    for threads in (1, 3):
        got = rows(sortase.read_bam(RANGE_CRAM, reference=CE_FA, threads=threads, batch_rows=7))
        assert_same(got, want, f"range.cram (threads={threads})")
    for region, oracle in REGIONS.items():
        want = list(expected_rows(RANGE_CRAM, region=oracle, reference=CE_FA))
        got = rows(sortase.read_bam(RANGE_CRAM, region=region, reference=CE_FA))
        assert_same(got, want, f"range.cram {region}")
        streamed = sortase.scan_bam(RANGE_CRAM, region=region, reference=CE_FA).read_all()
        assert_same(rows(streamed), want, f"scan_bam range.cram {region}")
    with pytest.raises(sortase.ArgumentError, match="nosuch"):
        sortase.read_bam(RANGE_CRAM, region="nosuch:1-10", reference=CE_FA)


def test_region_needs_a_crai(corpus: Path, tmp_path: Path) -> None:
    cram = tmp_path / "noindex.cram"
    shutil.copy(RANGE_CRAM, cram)
    with pytest.raises(sortase.SortaseError, match="crai"):
        sortase.read_bam(cram, region="CHROMOSOME_I", reference=CE_FA)


def cram_version(path: Path) -> tuple:
    head = path.read_bytes()[:6]
    assert head[:4] == b"CRAM"
    return head[4], head[5]


def test_jobs_write_cram_with_options_and_index(corpus: Path, tmp_path: Path) -> None:
    sam = corpus / "ce#1000.sam"
    want = list(expected_rows(sam))
    srt = tmp_path / "sorted.cram"
    sortase.sort(sam, srt, reference=CE_FA, write_index=True,
                 output_fmt_options=["version=3.0", "seqs_per_slice=100"])
    assert cram_version(srt) == (3, 0)
    assert Path(f"{srt}.crai").exists()
    by_pysam = list(expected_rows(srt, reference=CE_FA))
    assert sorted(r["qname"] for r in by_pysam) == sorted(r["qname"] for r in want)
    for region, oracle in REGIONS.items():
        assert_same(rows(sortase.read_bam(srt, region=region, reference=CE_FA)),
                    list(expected_rows(srt, region=oracle, reference=CE_FA)), f"sorted {region}")
    viewed = tmp_path / "viewed.cram"
    sortase.view(srt, viewed, output_fmt="cram", reference=CE_FA, write_index=True)
    assert cram_version(viewed) == (3, 1)
    assert_same(rows(sortase.read_bam(viewed, reference=CE_FA)), by_pysam, "view → CRAM")
    assert Path(f"{viewed}.crai").exists()
    merged = tmp_path / "merged.cram"
    sortase.merge([srt, viewed], merged, reference=CE_FA, output_fmt_options=["version=3.0"],
                  write_index=True)
    assert cram_version(merged) == (3, 0)
    assert len(list(expected_rows(merged, reference=CE_FA))) == 2 * len(by_pysam)
    embedded = tmp_path / "embedded.cram"
    sortase.view(srt, embedded, output_fmt="cram", reference=CE_FA, output_fmt_options=["embed_ref"])
    # embed_ref: pysam decodes it without the FASTA.
    assert_same(list(expected_rows(embedded)), by_pysam, "embed_ref")


def test_snp_pileup_on_cram(corpus: Path, tmp_path: Path) -> None:
    bam = tmp_path / "in.bam"
    sortase.sort(corpus / "ce#1000.sam", bam, write_index=True, index_format="bai")
    cram = tmp_path / "in.cram"
    sortase.view(bam, cram, output_fmt="cram", reference=CE_FA)
    vcf = tmp_path / "sites.vcf"
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    with pysam.FastaFile(str(CE_FA)) as fa:
        # ce#1000's reads cover the first ~300 bases of CHROMOSOME_I: a site every 7 bases there.
        seq = fa.fetch("CHROMOSOME_I")
        for pos in range(1, 400, 7):
            ref = seq[pos - 1].upper()
            if ref in "ACGT":
                alt = "C" if ref != "C" else "T"
                lines.append(f"CHROMOSOME_I\t{pos}\t.\t{ref}\t{alt}\t.\t.\t.")
    vcf.write_text("\n".join(lines) + "\n")
    options = dict(min_map_quality=0, pseudo_snps=50, count_orphans=True)
    from_bam = sortase.snp_pileup(vcf, [bam], **options)
    from_cram = sortase.snp_pileup(vcf, [cram], reference=CE_FA, **options)
    assert from_bam.num_rows > 30
    assert from_cram.equals(from_bam)


def test_missing_reference_names_the_sq(corpus: Path, tmp_path: Path) -> None:
    fa = tmp_path / "ce.fa"
    shutil.copy(CE_FA, fa)
    cram = tmp_path / "x.cram"
    sortase.view(corpus / "ce#1000.sam", cram, output_fmt="cram", reference=fa)
    fa.unlink()
    Path(f"{fa}.fai").unlink(missing_ok=True)
    with pytest.raises(sortase.SortaseError,
                       match=r"@SQ SN:CHROMOSOME_I \(M5:8ede36131e0dbf3417807e48f77f3ebd\)"):
        sortase.read_bam(cram)
