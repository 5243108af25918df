"""`sortase.agd` (issue 19): a dataset opened with `sortase.agd.open` reads, column for column, what
`read_bam` returns for the BAM it came from; a chunk the manifest lists but the directory lacks is an
error naming the file; DuckDB counts on the files what `read_bam` counts; FASTQ imports from Python
as from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import sortase
import sortase.agd
from conftest import sam_to_bam

SAM = (
    "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:100000\n@SQ\tSN:chr2\tLN:5000\n"
    + "".join(
        f"r{i}\t{flag}\t{ref}\t{pos}\t{mapq}\t{cigar}\t=\t{pos}\t0\t{seq}\t{qual}\tNM:i:{i % 3}\n"
        for i, (flag, ref, pos, mapq, cigar, seq, qual) in enumerate(
            [
                (0, "chr1", 10 + 7 * k, (k * 13) % 61, "4M", "ACGT", "IIII")
                if k % 4
                else (16, "chr2", 5 + k, 30, "2M1I1M", "ACGA", "*")
                for k in range(23)
            ]
        )
    )
    + "u1\t4\t*\t0\t0\t*\t*\t0\t0\tNNAC\t!!#$\n"
)


@pytest.fixture()
def dataset(tmp_path: Path):
    bam = sam_to_bam(SAM, tmp_path)
    ds = tmp_path / "ds"
    report = sortase.agd.import_(bam, ds, chunk_size=5, threads=2)
    assert report["records"] == 24 and report["chunks"] == 5
    return bam, ds


def test_open_reads_what_read_bam_returns(dataset) -> None:
    bam, ds = dataset
    d = sortase.agd.open(ds)
    assert d.records == 24 and len(d.chunks) == 5 and d.sort_order == "unsorted"
    assert [r["name"] for r in d.references] == ["chr1", "chr2"]
    assert d.header.startswith("@HD\tVN:1.6")
    assert set(d.groups) == {"names", "bases", "qual", "results"}
    table = d.read(["qname", "flag", "ref_id", "pos", "mapq", "cigar", "tlen", "seq", "qual"])
    want = sortase.read_bam(bam)
    for col in ["qname", "flag", "mapq", "tlen", "seq", "qual", "cigar"]:
        assert table.column(col).to_pylist() == want.column(col).to_pylist(), col
    names = [r["name"] for r in d.references]
    rname = [None if i < 0 else names[i] for i in table.column("ref_id").to_pylist()]
    assert rname == want.column("rname").to_pylist()
    assert [p + 1 for p in table.column("pos").to_pylist()] == want.column("pos").to_pylist()
    part = d.read_group("results", ["flag"], chunks=[1, 3])
    assert part.column("flag").to_pylist() == (
        want.column("flag").to_pylist()[5:10] + want.column("flag").to_pylist()[15:20]
    )


def test_missing_chunk_names_the_file(dataset) -> None:
    _, ds = dataset
    missing = ds / "bases" / "000002.parquet"
    os.remove(missing)
    d = sortase.agd.open(ds)
    d.read(["qname"])  # other groups are whole
    with pytest.raises(sortase.InputError, match=str(missing)):
        d.read(["seq"])
    with pytest.raises(KeyError):
        d.read(["no_such_column"])


def test_duckdb_counts_on_the_files(dataset) -> None:
    duckdb = pytest.importorskip("duckdb")
    bam, ds = dataset
    q = f"SELECT count(*) FROM '{ds}/results/*.parquet' WHERE mapq >= 30"
    got = duckdb.sql(q).fetchall()[0][0]
    want = sortase.read_bam(bam, columns=["mapq"]).column("mapq")
    assert got == pc.sum(pc.greater_equal(want, 30)).as_py()
    assert sortase.agd.flagstat(ds) == sortase.flagstat(bam)


def test_fastq_import_and_export(tmp_path: Path) -> None:
    r1 = tmp_path / "r1.fq"
    r2 = tmp_path / "r2.fq"
    r1.write_text("".join(f"@p{i} 1:N:0:1\nACGT\n+\nIIII\n" for i in range(7)))
    r2.write_text("".join(f"@p{i} 2:N:0:1\nTTGA\n+\nJJJJ\n" for i in range(7)))
    ds = tmp_path / "ds"
    sortase.agd.import_([r1, r2], ds, chunk_size=4, rg="grp")
    d = sortase.agd.open(ds)
    assert d.records == 14 and "@RG\tID:grp" in d.header
    t = d.read(["qname", "flag"])
    assert t.column("flag").to_pylist() == [77, 141] * 7
    assert t.column("qname").to_pylist()[:2] == ["p0", "p0"]
    out = tmp_path / "out.fq"
    sortase.agd.export(ds, out, output_fmt="fastq")
    assert out.read_text().startswith("@p0/1\nACGT\n+\nIIII\n@p0/2\nTTGA\n+\nJJJJ\n")
    with pytest.raises(sortase.SortaseError, match="exists and is not empty"):
        sortase.agd.import_([r1, r2], ds)
    assert isinstance(d.read_group("names"), pa.Table)


def test_fastq_import_keywords_are_the_cli_flags(tmp_path: Path, sortase_bin: Path) -> None:
    """``sortase.agd.import_``'s keywords are ``sortase agd import``'s flags (one spec): ``rg_line``
    is ``-r`` repeated, ``read1``/``read2`` are ``-1``/``-2``, ``level`` is ``--level``; both
    faces write the same chunks and header, and record their own command line as provenance.
    Without an input or FASTQ files, the call is refused (the CLI would read stdin)."""
    r1, r2 = tmp_path / "a.fastq", tmp_path / "b.fastq"
    r1.write_text("".join(f"@q{i}\nACGTA\n+\nIIIII\n" for i in range(9)))
    r2.write_text("".join(f"@q{i}\nTTGAC\n+\nJJJJJ\n" for i in range(9)))
    py, cli = tmp_path / "py", tmp_path / "cli"
    report = sortase.agd.import_(None, py, read1=r1, read2=r2, rg_line=["ID:g1", "SM:s1"],
                                 level=5, chunk_size=4)
    assert report["records"] == 18 and report["chunks"] == 5
    subprocess.run([str(sortase_bin), "agd", "import", "-o", str(cli), "-1", str(r1), "-2", str(r2),
                    "-r", "ID:g1", "-r", "SM:s1", "--level", "5", "--chunk-size", "4"],
                   check=True)
    a, b = sortase.agd.open(py), sortase.agd.open(cli)
    assert a.header == b.header and "@RG\tID:g1\tSM:s1" in a.header
    assert a.read(["qname", "flag", "seq", "tags"]).equals(b.read(["qname", "flag", "seq", "tags"]))
    provenance = json.loads((py / "manifest.json").read_text())["provenance"]
    assert provenance["names"]["command_line"] == "sortase.agd.import_"
    with pytest.raises(sortase.ArgumentError, match="give input"):
        sortase.agd.import_(None, tmp_path / "none")
    with pytest.raises(TypeError, match="no_such"):
        sortase.agd.import_(r1, tmp_path / "none", no_such=1)  # type: ignore[call-arg]


def test_bad_arguments_and_bad_fastq_raise_their_error_class(tmp_path: Path) -> None:
    """A bad option is an ``ArgumentError`` and a bad FASTQ record a ``FormatError`` (they were
    ``InternalError``s, or a Parquet error after the work began), named in one line; no dataset
    or output is left."""
    sam = tmp_path / "in.sam"
    sam.write_text(SAM)
    r1, r2 = tmp_path / "a.fq", tmp_path / "b.fq"
    r1.write_text("@p1\nACGT\n+\nIIII\n")
    r2.write_text("@q1\nACGT\n+\nIIII\n")
    fasta = tmp_path / "f.fq"
    fasta.write_text(">p1\nACGT\n")
    ds = tmp_path / "ds"
    cases = [
        (lambda: sortase.agd.import_(sam, ds, level=0), sortase.ArgumentError, "--level 0"),
        (lambda: sortase.sort(sam, ds, output_fmt="agd", level=30), sortase.ArgumentError,
         "-l 30"),
        (lambda: sortase.sort(sam, tmp_path / "o.bam", output_fmt="xyz"), sortase.ArgumentError,
         "-O xyz"),
        (lambda: sortase.agd.import_(r1, ds, rg_line=["SM:x"]), sortase.ArgumentError,
         "no ID field"),
        (lambda: sortase.agd.import_([r1, r2], ds), sortase.FormatError, "differs in name"),
        (lambda: sortase.agd.import_(fasta, ds), sortase.FormatError, "not FASTQ"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
        assert not ds.exists() and not (tmp_path / "o.bam").exists(), message


def test_idxstats_equals_idxstats_of_the_sorted_bam(dataset, tmp_path: Path) -> None:
    bam, ds = dataset
    with pytest.raises(sortase.FormatError, match="not position sorted"):
        sortase.agd.idxstats(ds)
    sorted_bam = tmp_path / "sorted.bam"
    sortase.sort(bam, sorted_bam)
    sorted_ds = tmp_path / "sorted"
    sortase.agd.import_(sorted_bam, sorted_ds, chunk_size=5)
    table = sortase.agd.idxstats(sorted_ds, threads=2)
    assert table.equals(sortase.idxstats(sorted_bam))
    assert table.column("name").to_pylist() == ["chr1", "chr2", "*"]
    assert table.column("unmapped").to_pylist()[-1] == 1
