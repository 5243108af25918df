"""The commands besides `sort` as functions (issue 17): each result equals samtools' (through
pysam) or the CLI's on small generated files, and errors raise the right class naming the file."""

from __future__ import annotations

import ast
import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Tuple


import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import sortase
from conftest import pysam
from test_sort import unsorted_sam


def cli(binary: Path, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *map(str, args)], check=True, capture_output=True)


@pytest.fixture
def sorted_bam(tmp_path: Path) -> Path:
    """A coordinate-sorted, indexed BAM of 3,000 random records (pysam/samtools)."""
    sam = unsorted_sam(tmp_path / "in.sam", 3000)
    bam = tmp_path / "sorted.bam"
    pysam.sort("-o", str(bam), str(sam))
    pysam.index(str(bam))
    return bam


def test_flagstat_equals_samtools(sorted_bam: Path) -> None:
    want = json.loads(pysam.flagstat("-O", "json", str(sorted_bam)))
    for threads in (1, 2):
        assert sortase.flagstat(sorted_bam, threads=threads) == want
    assert sortase.flagstat(str(sorted_bam))["QC-passed reads"]["total"] == 3000


def test_idxstats_equals_samtools(sorted_bam: Path) -> None:
    table = sortase.idxstats(sorted_bam, threads=1)
    assert table.column_names == ["name", "length", "mapped", "unmapped"]
    want = [line.split("\t") for line in pysam.idxstats(str(sorted_bam)).splitlines()]
    got = [[r["name"], str(r["length"]), str(r["mapped"]), str(r["unmapped"])]
           for r in table.to_pylist()]
    assert got == want


@pytest.mark.parametrize("csi", [False, True])
def test_index_equals_the_cli(tmp_path: Path, sorted_bam: Path, sortase_bin: Path,
                              csi: bool) -> None:
    ours, theirs = tmp_path / "py.idx", tmp_path / "cli.idx"
    report = sortase.index(sorted_bam, ours, csi=csi, threads=2)
    cli(sortase_bin, "index", *(["-c"] if csi else []), "-@", 2, "-o", theirs, sorted_bam)
    assert ours.read_bytes() == theirs.read_bytes()
    assert report.outputs == [str(ours)] and report.bytes == ours.stat().st_size
    default = sortase.index(sorted_bam, csi=csi)
    assert default.outputs == [str(sorted_bam) + (".csi" if csi else ".bai")]


def test_index_min_shift_implies_csi_as_samtools(tmp_path: Path, sorted_bam: Path) -> None:
    """``min_shift`` alone is samtools' ``-m``, which implies ``-c``: the same CSI bytes."""
    bam = tmp_path / "in.bam"
    bam.write_bytes(sorted_bam.read_bytes())
    pysam.index("-m", "12", str(bam), str(tmp_path / "samtools.csi"))
    report = sortase.index(bam, min_shift=12)
    assert report.outputs == [str(bam) + ".csi"]
    assert Path(report.outputs[0]).read_bytes() == (tmp_path / "samtools.csi").read_bytes()



@pytest.mark.parametrize("flags", ["-m 15 -b", "-b -m 15", "-c -b", "-b -c"])
def test_index_last_of_b_c_m_wins_as_samtools(tmp_path: Path, sorted_bam: Path, sortase_bin: Path,
                                              flags: str) -> None:
    """Of ``-b``, ``-c`` and ``-m`` the last given decides BAI or CSI, as samtools' getopt loop."""
    pysam.index(*flags.split(), "-o", str(tmp_path / "samtools.idx"), str(sorted_bam))
    cli(sortase_bin, "index", *flags.split(), "-o", tmp_path / "ours.idx", sorted_bam)
    assert (tmp_path / "ours.idx").read_bytes() == (tmp_path / "samtools.idx").read_bytes()


def test_index_min_shift_edges_as_samtools(tmp_path: Path, sorted_bam: Path,
                                           sortase_bin: Path) -> None:
    """``-m 0`` is samtools' BAI (at ``.bai``); 35 is the largest min_shift htslib sizes soundly;
    36 and more are refused by name, with nothing written (samtools writes none, or a broken CSI)."""
    bam = tmp_path / "in.bam"
    bam.write_bytes(sorted_bam.read_bytes())
    pysam.index("-m", "0", str(bam))
    want = (tmp_path / "in.bam.bai").read_bytes()
    (tmp_path / "in.bam.bai").unlink()
    assert sortase.index(bam, min_shift=0).outputs == [str(bam) + ".bai"]
    assert (tmp_path / "in.bam.bai").read_bytes() == want
    pysam.index("-m", "35", "-o", str(tmp_path / "samtools.csi"), str(bam))
    sortase.index(bam, tmp_path / "ours.csi", min_shift=35)
    assert (tmp_path / "ours.csi").read_bytes() == (tmp_path / "samtools.csi").read_bytes()
    with pytest.raises(sortase.ArgumentError, match="-m 36: min_shift must be at most 35"):
        sortase.index(bam, tmp_path / "no.csi", min_shift=36)
    run = subprocess.run([str(sortase_bin), "index", "-m", "40", str(bam)], capture_output=True,
                         text=True)
    assert run.returncode != 0 and "-m 40: min_shift must be at most 35" in run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert not (tmp_path / "no.csi").exists() and not (tmp_path / "in.bam.csi").exists()


def test_merge_equals_the_cli(tmp_path: Path, sortase_bin: Path) -> None:
    parts = []
    for seed in (1, 2):
        bam = tmp_path / f"part{seed}.bam"
        pysam.sort("-o", str(bam), str(unsorted_sam(tmp_path / f"p{seed}.sam", 1500, seed)))
        parts.append(bam)
    ours, theirs = tmp_path / "py.bam", tmp_path / "cli.bam"
    # A fixed -s: colliding @PG IDs get random suffixes seeded by the clock otherwise (samtools'
    # rule), and two runs in different seconds then differ (a flake seen in CI).
    report = sortase.merge(parts, ours, no_pg=True, threads=2, write_index=True, seed=1)
    cli(sortase_bin, "merge", "--no-PG", "-s", 1, "-@", 2, "--write-index", "-o", theirs, *parts)
    assert ours.read_bytes() == theirs.read_bytes()
    assert report.inputs == 2 and str(ours) in report.outputs
    assert Path(str(ours) + ".csi").exists()


def test_view_count_and_filters(sorted_bam: Path, sortase_bin: Path) -> None:
    for kwargs, flags in [({}, []),
                          ({"require_flags": 16}, ["-f", "16"]),
                          ({"exclude_flags": "UNMAP,REVERSE"}, ["-F", "UNMAP,REVERSE"]),
                          ({"min_mapq": 30, "regions": ["chr2"]}, ["-q", "30", str(sorted_bam), "chr2"])]:
        args = flags if "chr2" in flags else [*flags, str(sorted_bam)]
        want = int(cli(sortase_bin, "view", "-c", *args).stdout)
        assert sortase.view(sorted_bam, count=True, **kwargs).count == want
        assert want == int(pysam.view("-c", *args).strip())


def test_view_samtools_filters(tmp_path: Path, sorted_bam: Path, sortase_bin: Path) -> None:
    """The filters beyond -f/-F/-q under samtools' long names, each counted as samtools counts."""
    bed = tmp_path / "t.bed"
    bed.write_text("chr1\t0\t300000\nchr2\t500000\t900000\n")
    names = tmp_path / "names.txt"
    names.write_text("\n".join(pysam.view(str(sorted_bam)).split("\n")[i].split("\t")[0]
                                for i in range(0, 200, 7)) + "\n")
    for kwargs, flags in [({"target_file": bed}, ["-L", str(bed)]),
                          ({"qname_file": str(names)}, ["-N", str(names)]),
                          ({"qname_file": f"^{names}"}, ["-N", f"^{names}"]),
                          ({"expr": "mapq >= 30 && !flag.reverse"}, ["-e", "mapq >= 30 && !flag.reverse"]),
                          ({"tag": "RG", "expr": "[RG] == \"a\""}, ["-d", "RG", "-e", "[RG] == \"a\""]),
                          ({"tag": ["RG:a", "RG:b"]}, ["-d", "RG:a", "-d", "RG:b"])]:
        want = int(pysam.view("-c", *flags, str(sorted_bam)).strip())
        assert sortase.view(sorted_bam, count=True, **kwargs).count == want, flags
        assert int(cli(sortase_bin, "view", "-c", *flags, sorted_bam).stdout) == want
    with pytest.raises(ValueError, match="filter expression"):
        sortase.view(sorted_bam, count=True, expr="mapq >")


def test_view_output_equals_the_cli(tmp_path: Path, sorted_bam: Path, sortase_bin: Path) -> None:
    for fmt in ("sam", "bam"):
        ours, theirs = tmp_path / f"py.{fmt}", tmp_path / f"cli.{fmt}"
        report = sortase.view(sorted_bam, ours, output_fmt=fmt, with_header=True, no_pg=True,
                              exclude_flags=4, threads=1)
        cli(sortase_bin, "view", "-h", "-O", fmt, "--no-PG", "-F", 4, "-@", 1, "-o", theirs,
            sorted_bam)
        assert ours.read_bytes() == theirs.read_bytes()
        assert report.outputs == [str(ours)]


def paired_sam(path: Path, pairs: int) -> Path:
    """Properly paired reads (flags 99/147) with some duplicate positions, grouped by name."""
    rng = random.Random(7)
    lines = ["@HD\tVN:1.6\tSO:unsorted", "@SQ\tSN:chr1\tLN:100000"]
    positions = [rng.randrange(1, 99_000) for _ in range(pairs // 3)]
    for i in range(pairs):
        pos = rng.choice(positions)
        mate = pos + rng.choice([100, 150, 200])
        seq = "".join(rng.choice("ACGT") for _ in range(50))
        qual = "".join(rng.choice("5?I") for _ in range(50))
        tlen = mate + 50 - pos
        lines.append(f"q{i}\t99\tchr1\t{pos}\t60\t50M\t=\t{mate}\t{tlen}\t{seq}\t{qual}")
        lines.append(f"q{i}\t147\tchr1\t{mate}\t60\t50M\t=\t{pos}\t{-tlen}\t{seq}\t{qual}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("mode", ["query", "coordinate"])
def test_markdup_equals_the_cli(tmp_path: Path, sortase_bin: Path, mode: str) -> None:
    src = tmp_path / "in.bam"
    sam = paired_sam(tmp_path / "pairs.sam", 1000)
    if mode == "query":
        pysam.view("-b", "-o", str(src), str(sam), catch_stdout=False)
    else:
        pysam.sort("-o", str(src), str(sam))
    ours, theirs = tmp_path / "py.bam", tmp_path / "cli.bam"
    pm, cm = tmp_path / "py.metrics", tmp_path / "cli.metrics"
    report = sortase.markdup(src, ours, no_pg=True, threads=1, metrics=pm)
    cli(sortase_bin, "markdup", "--no-PG", "-@", 1, "--metrics", cm, "-o", theirs, src)
    assert ours.read_bytes() == theirs.read_bytes()
    assert report.mode == mode and report.records == 2000
    assert 0 < report.duplicate_records < 2000
    # The metrics (both modes; the '#' lines hold the command line): one library, all pairs.
    table = [l for l in pm.read_text().splitlines() if not l.startswith("#")]
    assert table == [l for l in cm.read_text().splitlines() if not l.startswith("#")]
    row = dict(zip(table[1].split("\t"), table[2].split("\t")))
    assert row["LIBRARY"] == "Unknown Library" and row["READ_PAIRS_EXAMINED"] == "1000"
    assert int(row["READ_PAIR_DUPLICATES"]) * 2 == report.duplicate_records
    assert str(pm) in report.outputs


def fasta(path: Path, n: int = 20) -> Path:
    rng = random.Random(3)
    with path.open("w") as f:
        for i in range(n):
            seq = "".join(rng.choice("ACGT") for _ in range(rng.randrange(10, 300)))
            f.write(f">seq{i} description {i}\n")
            for j in range(0, len(seq), 60):
                f.write(seq[j:j + 60] + "\n")
    return path


def test_bgzip_equals_the_cli(tmp_path: Path, sortase_bin: Path) -> None:
    a, b = fasta(tmp_path / "a.fa"), fasta(tmp_path / "b.fa")
    b.write_bytes(a.read_bytes())
    report = sortase.bgzip(a, keep=True, index=True, threads=1)
    cli(sortase_bin, "bgzip", "-k", "-i", "-@", 1, b)
    assert Path(str(a) + ".gz").read_bytes() == Path(str(b) + ".gz").read_bytes()
    assert Path(str(a) + ".gz.gzi").read_bytes() == Path(str(b) + ".gz.gzi").read_bytes()
    assert report.files == 1 and report.uncompressed_bytes == a.stat().st_size
    assert gzip.decompress(Path(str(a) + ".gz").read_bytes()) == a.read_bytes()
    out = tmp_path / "back.fa"
    sortase.bgzip(str(a) + ".gz", decompress=True, output=out)
    assert out.read_bytes() == a.read_bytes()


def test_bgzip_picks_the_mode_as_the_cli(tmp_path: Path, sortase_bin: Path) -> None:
    """Flags of several modes pick one as bgzip does (``-r`` over ``-b`` over ``-t`` over ``-d``),
    the same in Python as in the CLI: one spec, one rule."""
    a = fasta(tmp_path / "a.fa")
    sortase.bgzip(a, keep=True)
    gz = Path(str(a) + ".gz")
    report = sortase.bgzip(gz, decompress=True, reindex=True)
    assert report.outputs == [str(gz) + ".gzi"]
    gzi = Path(report.outputs[0]).read_bytes()
    Path(report.outputs[0]).unlink()
    cli(sortase_bin, "bgzip", "-d", "-r", gz)
    assert Path(str(gz) + ".gzi").read_bytes() == gzi
    part = tmp_path / "part.fa"
    sortase.bgzip(gz, offset=3, size=10, decompress=True, test=True, output=part)
    assert part.read_bytes() == a.read_bytes()[3:13]


def test_faidx_equals_samtools(tmp_path: Path) -> None:
    ours, theirs = fasta(tmp_path / "ours.fa"), fasta(tmp_path / "theirs.fa")
    report = sortase.faidx(ours)
    pysam.faidx(str(theirs))
    assert Path(str(ours) + ".fai").read_bytes() == Path(str(theirs) + ".fai").read_bytes()
    assert report.indexed and report.sequences == 20
    regions = ["seq3", "seq5:2-70", "seq0:5-5"]
    out = tmp_path / "regions.fa"
    sortase.faidx(ours, regions, output=out, length=50, reverse_complement=True)
    want = tmp_path / "samtools.fa"
    pysam.faidx(str(theirs), "-n", "50", "-i", "-o", str(want), *regions)
    assert out.read_bytes() == want.read_bytes()


def test_fetch_records(tmp_path: Path, sortase_bin: Path) -> None:
    fa = fasta(tmp_path / "f.fa")
    text = fa.read_text()
    whole = {r.split()[0]: ">" + r for r in text.split(">")[1:]}
    names = ["seq7", "seq2", "seq19"]
    assert sortase.fetch(fa, names, threads=1) == [whole[n] for n in names]
    assert sortase.fetch(fa, names, sorted=True) == [whole[n] for n in sorted(names, key=lambda s: int(s[3:]))]
    (tmp_path / "names").write_text("\n".join(names) + "\n")
    want = cli(sortase_bin, "fetch", "-n", tmp_path / "names", fa).stdout.decode()
    assert "".join(sortase.fetch(fa, names)) == want
    sortase.bgzip(fa, keep=True, index=True)
    assert sortase.fetch(str(fa) + ".gz", names) == [whole[n] for n in names]


def pileup_inputs(tmp_path: Path, sorted_bam: Path) -> Path:
    """A VCF of SNVs at positions covered by `sorted_bam`'s reads."""
    rng = random.Random(9)
    lines = ["##fileformat=VCFv4.2", "##contig=<ID=chr1>", "##contig=<ID=chr2>",
             "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    with pysam.AlignmentFile(str(sorted_bam)) as f:
        starts = sorted({(r.reference_name, r.reference_start + 10) for r in f
                         if not r.is_unmapped})
    for chrom, pos in sorted(rng.sample(starts, 60), key=lambda x: (x[0], x[1])):
        ref, alt = rng.sample("ACGT", 2)
        lines.append(f"{chrom}\t{pos}\t.\t{ref}\t{alt}\t.\t.\t.")
    vcf = tmp_path / "snps.vcf"
    vcf.write_text("\n".join(lines) + "\n")
    return vcf


def test_snp_pileup_table_and_report(tmp_path: Path, sorted_bam: Path, sortase_bin: Path) -> None:
    vcf = pileup_inputs(tmp_path, sorted_bam)
    bams = [sorted_bam, sorted_bam]
    theirs = tmp_path / "cli.csv"
    cli(sortase_bin, "snp-pileup", "-@", 1, vcf, theirs, *bams)
    convert = pacsv.ConvertOptions(column_types={"Chromosome": pa.string()})
    want = pacsv.read_csv(theirs, convert_options=convert)
    table = sortase.snp_pileup(vcf, bams, threads=1)
    assert isinstance(table, pa.Table) and table.num_rows > 0
    assert table.equals(want)
    ours = tmp_path / "py.csv"
    report = sortase.snp_pileup(vcf, bams, ours, threads=2)
    assert ours.read_bytes() == theirs.read_bytes()
    assert report.snp_lines == table.num_rows and report.outputs == [str(ours)]


def test_errors_name_the_file(tmp_path: Path, sorted_bam: Path) -> None:
    missing = tmp_path / "missing.bam"
    calls = [
        lambda: sortase.flagstat(missing),
        lambda: sortase.idxstats(missing),
        lambda: sortase.index(missing),
        lambda: sortase.merge([missing], tmp_path / "m.bam"),
        lambda: sortase.view(missing, count=True),
        lambda: sortase.markdup(missing, tmp_path / "d.bam"),
        lambda: sortase.bgzip(missing),
        lambda: sortase.faidx(missing),
        lambda: sortase.fetch(missing, ["x"]),
        lambda: sortase.snp_pileup(missing, [sorted_bam]),
    ]
    for call in calls:
        with pytest.raises(sortase.InputError, match="missing.bam"):
            call()


def test_wrong_arguments(tmp_path: Path, sorted_bam: Path) -> None:
    with pytest.raises(sortase.ArgumentError, match="mode"):
        sortase.markdup(sorted_bam, tmp_path / "d.bam", mode="fast")
    with pytest.raises(sortase.ArgumentError):
        sortase.view(sorted_bam, count=True, exclude_flags="NOSUCHFLAG")
    with pytest.raises(sortase.ArgumentError):
        sortase.flagstat(sorted_bam, threads=0)
    with pytest.raises(TypeError):
        sortase.fetch(sorted_bam, "seq1")


def test_view_to_stdout_and_flagstat_one_liner(sorted_bam: Path, sortase_bin: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = [sys.executable, "-c"]
    got = subprocess.run([*run, f"import sortase; sortase.view({str(sorted_bam)!r}, threads=1)"],
                         check=True, capture_output=True, env=env).stdout
    assert got == cli(sortase_bin, "view", "-@", 1, sorted_bam).stdout
    printed = subprocess.run([*run, f"import sortase; print(sortase.flagstat({str(sorted_bam)!r}))"],
                             check=True, capture_output=True, env=env, text=True).stdout
    assert ast.literal_eval(printed) == json.loads(pysam.flagstat("-O", "json", str(sorted_bam)))


def test_checksums_keyword_proves_sort_merge_and_markdup(tmp_path: Path, sortase_bin: Path) -> None:
    """``checksums=True`` (``--checksums``): the report carries samtools checksum's sums of the
    records read and written, equal to the CLI's ``-v`` line; off by default."""
    sam = paired_sam(tmp_path / "pairs.sam", 500)
    srt = tmp_path / "sorted.bam"
    report = sortase.sort(sam, srt, threads=2, checksums=True)
    c = report.checksums
    assert c.read == c.written and c.read.count == 1000
    assert c.command == "samtools checksum -F 0x0 -P -C -M"
    assert sortase.sort(sam, tmp_path / "plain.bam").checksums is None
    merged = sortase.merge([srt, srt], tmp_path / "merged.bam", threads=2, checksums=True)
    assert merged.checksums.read.count == 2000 and merged.checksums.written == merged.checksums.read
    for remove in (False, True):
        out = tmp_path / f"marked{remove}.bam"
        marked = sortase.markdup(srt, out, remove_dups=remove, checksums=True, threads=1)
        m = marked.checksums
        assert m.read.count == 1000
        if remove:
            assert m.written.count + m.left_out.count == 1000 and m.left_out.count > 0
        else:
            assert m.written == m.read and "left_out" not in m
        line = cli(sortase_bin, "markdup", "--checksums", "-v", *(["-r"] if remove else []),
                   "-@", 1, "-o", tmp_path / "cli.bam", srt).stderr.decode()
        assert f"combined {m.combined:08x}: equal" in line


def _fq2bam_data(directory: Path, pairs: int) -> Tuple[Path, Path, Path]:
    """ref.fa (two contigs) and ``pairs`` FR read pairs of 100 bases from it as r1.fq and r2.fq."""
    rng = random.Random(7)
    contigs = ["".join(rng.choice("ACGT") for _ in range(n)) for n in (20_000, 8_000)]
    ref = directory / "ref.fa"
    ref.write_text("".join(f">c{i}\n{c}\n" for i, c in enumerate(contigs)))
    comp = {"A": "T", "C": "G", "G": "C", "T": "A"}
    r1, r2 = [], []
    for i in range(pairs):
        c = contigs[rng.randrange(2)]
        start = rng.randrange(len(c) - 400)
        frag = c[start:start + 300 + rng.randrange(100)]
        a, b = frag[:100], "".join(comp[x] for x in reversed(frag))[:100]
        q = "".join(chr(35 + rng.randrange(38)) for _ in range(100))
        r1.append(f"@q{i}/1\n{a}\n+\n{q}\n")
        r2.append(f"@q{i}/2\n{b}\n+\n{q}\n")
    (directory / "r1.fq").write_text("".join(r1))
    (directory / "r2.fq").write_text("".join(r2))
    return ref, directory / "r1.fq", directory / "r2.fq"


def test_checksums_keyword_proves_fq2bam_and_agd_import_export(tmp_path: Path,
                                                                sortase_bin: Path) -> None:
    """``checksums=True`` on ``sortase.fq2bam`` (``--checksums``): the report carries the sums of
    the reads and of the primary records written, equal to each other and to the CLI's ``-v``
    line, and the samtools commands that print them; on ``sortase.agd.import_`` and ``export``
    the sums of the records read and written. Off by default; a record corrupted in flight (the
    test fault) raises and leaves no output."""
    ref, r1, r2 = _fq2bam_data(tmp_path, 200)
    out = tmp_path / "out.bam"
    report = sortase.fq2bam(ref, r1, r2, out, threads=2, checksums=True)
    c = report.checksums
    assert c.read == c.written and c.read.count == 400 == report.reads
    assert c.command == (f"samtools import -1 {r1} -2 {r2} | samtools checksum; "
                         f"samtools checksum {out}")
    line = cli(sortase_bin, "fq2bam", "--checksums", "-v", "-@", 2, "-x", ref, "-o",
               tmp_path / "cli.bam", r1, r2).stderr.decode()
    assert f"combined {c.combined:08x}: equal" in line
    assert sortase.fq2bam(ref, r1, r2, tmp_path / "plain.bam", threads=2).checksums is None

    ds = tmp_path / "ds"
    imported = sortase.agd.import_(out, ds, chunk_size=64, threads=2, checksums=True)
    i = imported["checksums"]
    assert i["read"] == i["written"] and i["read"]["count"] == report.records
    assert i["command"] == "samtools checksum -F 0x0 -P -C -M"
    back = sortase.agd.export(ds, tmp_path / "back.bam", threads=2, checksums=True)
    assert back["checksums"]["read"] == i["read"] == back["checksums"]["written"]

    env = {**os.environ, "SORTASE_TEST_CORRUPT_READ": "q7"}
    code = ("import sortase, sys; sortase.fq2bam(*sys.argv[1:5], threads=2, checksums=True)")
    failed = subprocess.run([sys.executable, "-c", code, str(ref), str(r1), str(r2),
                             str(tmp_path / "bad.bam")], env=env, capture_output=True, text=True)
    assert failed.returncode != 0 and "do not match the records read" in failed.stderr
    assert not (tmp_path / "bad.bam").exists()
