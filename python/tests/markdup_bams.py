"""The inputs of the distributed markdup tests and the checks they share: query-grouped BAMs for
samblaster's mode (test_distributed_markdup, test_distributed_agd_markdup, ...) and
coordinate-sorted ones for Picard's (test_distributed_pmarkdup, ...), generated with pysam."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Dict

import pytest

pysam = pytest.importorskip("pysam")

from sortase import distributed  # noqa: E402

from conftest import input_fixture  # noqa: E402
from test_distributed import cli  # noqa: E402

# Small tasks, so that the test BAMs are cut into many ranges: read-name groups straddle them, and
# many pairs have their mates in others.
TASK_MEMORY = "256K"


def segment(header: Any, rng: random.Random, name: str, flag: int, ref: int, pos: int, cigar,
            mref: int, mpos: int, qual: str) -> Any:
    """A record of 100 bases drawn from ``rng``, all of quality ``qual`` (a mapped one, with a
    ``cigar``, of MAPQ 60), for the markdup tests' BAMs; the caller adds its fields and tags."""
    a = pysam.AlignedSegment(header)
    a.query_name = name
    a.flag = flag
    a.query_sequence = "".join(rng.choice("ACGT") for _ in range(100))
    a.query_qualities = pysam.qualitystring_to_array(qual * 100)
    a.reference_id = ref
    a.reference_start = pos
    if cigar is not None:
        a.cigar = cigar
        a.mapping_quality = 60
    a.next_reference_id = mref
    a.next_reference_start = mpos
    return a


def make_grouped_bam(path: Path, pairs: int = 8_000, seed: int = 29, grouped: bool = True) -> Path:
    """Aligner-like output: each read name's records together (pairs with secondary and
    supplementary records, orphans, unmapped pairs, fragments), few distinct positions so that
    many groups are duplicates; ``grouped=False`` swaps two records of different names."""
    rng = random.Random(seed)
    header = {"HD": {"VN": "1.6", "SO": "unsorted", "GO": "query"},
              "SQ": [{"SN": f"chr{i}", "LN": 200_000} for i in range(1, 4)]}
    records = []

    def rec(name: str, flag: int, ref: int, pos: int, cigar, mref: int = -1, mpos: int = -1,
            tlen: int = 0):
        return (name, flag, ref, pos, cigar, mref, mpos, tlen)

    for i in range(pairs):
        name = f"r{i:06d}:{rng.randrange(1000)}"
        ref = rng.randrange(3)
        pos = rng.randrange(0, 3_000, 7)
        mpos = pos + rng.randrange(100, 400, 25)
        clip = rng.choice([0, 0, 0, 3, 8])
        cig = [(4, clip), (0, 100 - clip)] if clip else [(0, 100)]
        kind = rng.random()
        if kind < 0.05:
            records += [rec(name, 77, -1, -1, None), rec(name, 141, -1, -1, None)]
        elif kind < 0.12:
            records += [rec(name, 73, ref, pos, cig, ref, pos), rec(name, 133, ref, pos, None, ref, pos)]
        elif kind < 0.18:
            records += [rec(name, rng.choice([0, 16]), ref, pos, cig)]
        else:
            group = [rec(name, 99, ref, pos, cig, ref, mpos, mpos - pos + 100),
                     rec(name, 147, ref, mpos, [(0, 100)], ref, pos, pos - mpos - 100)]
            if rng.random() < 0.2:
                group.insert(1, rec(name, 2048 | 65 | 32, (ref + 1) % 3, pos + 50, [(4, 40), (0, 60)],
                                    ref, mpos))
            if rng.random() < 0.1:
                group.append(rec(name, 256 | 129 | 16, ref, mpos + 500, [(0, 100)], ref, pos))
            records += group
    if not grouped:
        k = len(records) // 2
        # The last record of a group of several moves past the next group's first record: both
        # groups lose a record samblaster needs.
        while (records[k - 1][0] != records[k][0] or records[k][0] == records[k + 1][0]
               or records[k + 1][0] == records[k + 2][0]):
            k += 1
        records[k], records[k + 1] = records[k + 1], records[k]
    with pysam.AlignmentFile(str(path), "wb", header=header) as out:
        for name, flag, ref, pos, cigar, mref, mpos, tlen in records:
            a = segment(out.header, rng, name, flag, ref, pos, cigar, mref, mpos, "I")
            a.template_length = tlen
            a.set_tag("NM", rng.randrange(3))
            out.write(a)
    return path


def make_coordinate_bam(path: Path, pairs: int = 6_000, seed: int = 29, sort: bool = True) -> Path:
    """Pairs at few positions (many duplicates; half with mates far away, so in other ranges),
    Illumina read names whose tile:x:y lie close together (optical duplicates), fragments, pairs
    with an unmapped mate, unmapped pairs, secondary and supplementary records, two libraries and
    records without a read group; sorted by coordinate with ``sortase sort`` (``sort=False``:
    left in generation order under an ``SO:coordinate`` header)."""
    rng = random.Random(seed)
    header = {"HD": {"VN": "1.6", "SO": "coordinate"},
              "SQ": [{"SN": f"chr{i}", "LN": 200_000} for i in range(1, 3)],
              "RG": [{"ID": "a", "LB": "libA", "SM": "s"}, {"ID": "b", "LB": "libB", "SM": "s"}]}
    records = []
    for i in range(pairs):
        name = f"M1:{i}:FC:1:{1101 + rng.randrange(2)}:{1000 + rng.randrange(300)}:{2000 + rng.randrange(300)}"
        rg = rng.choice([None, "a", "a", "a", "b", "b"])
        q = rng.randrange(20, 40)
        ref = rng.randrange(2)
        pos = rng.randrange(0, 800, 13)
        far = rng.random() < 0.5
        mref, mpos = (0, 40_000 + rng.randrange(0, 500, 11)) if far else (ref, pos + rng.randrange(100, 200, 20))
        cig = [(4, 5), (0, 95)] if rng.random() < 0.25 else [(0, 100)]
        kind = rng.random()
        if kind < 0.06:
            records += [(name, 77, -1, -1, None, -1, -1, rg, q), (name, 141, -1, -1, None, -1, -1, rg, q)]
        elif kind < 0.12:
            records += [(name, rng.choice([0, 16]), ref, pos, cig, -1, -1, rg, q)]
        elif kind < 0.18:
            records += [(name, 73, ref, pos, cig, ref, pos, rg, q), (name, 133, ref, pos, None, ref, pos, rg, q)]
        else:
            dup = 1024 if rng.random() < 0.1 else 0
            records += [(name, 99 | dup, ref, pos, cig, mref, mpos, rg, q),
                        (name, 147, mref, mpos, [(0, 100)], ref, pos, rg, q)]
            extra = rng.random()
            if extra < 0.1:
                records.append((name, 2048 | 65 | 32, 1, 5_000 + pos, [(4, 40), (0, 60)], mref, mpos, rg, q))
            elif extra < 0.2:
                records.append((name, 256 | 65 | 32, ref, pos + 7, [(0, 100)], mref, mpos, rg, q))
    raw = path.with_suffix(".raw.bam")
    with pysam.AlignmentFile(str(raw if sort else path), "wb", header=header) as out:
        for name, flag, ref, pos, cigar, mref, mpos, rg, q in records:
            a = segment(out.header, rng, name, flag, ref, pos, cigar, mref, mpos, chr(33 + q))
            if rg is not None:
                a.set_tag("RG", rg)
            out.write(a)
    if sort:
        cli("sort", "-o", str(path), str(raw))
        raw.unlink()
    return path


def metrics_body(text: str) -> list:
    """The metrics file without its command line (the second line names the program run)."""
    lines = text.splitlines()
    assert lines[1].startswith("# sortase markdup (Picard MarkDuplicates 2.27.5 metrics)")
    return lines[:1] + lines[2:]


#: The test modules' inputs (imported as fixtures).
grouped_bam = input_fixture(make_grouped_bam, "mddata")
coord_bam = input_fixture(make_coordinate_bam, "pmddata")


def s3_markdup_equals_cli(s3: Any, client: Any, bam: Path, key: str, tmp_path: Path, *flags: str,
                          **keywords: Any) -> Dict[str, Any]:
    """``bam`` put at ``sortase-test/KEY/in.bam`` and marked by :func:`distributed.markdup` (with
    ``keywords``) into ``sortase-test/KEY/out/dup.bam``: checks that the object is the BAM ``sortase
    markdup --no-PG FLAGS`` writes (``tmp_path/one.bam``); returns the job's report."""
    fs, options = s3
    fs.put_file(str(bam), f"sortase-test/{key}/in.bam")
    report = distributed.markdup(f"s3://sortase-test/{key}/in.bam",
                                 f"s3://sortase-test/{key}/out/dup.bam", client=client, no_pg=True,
                                 task_memory=TASK_MEMORY, storage_options=options, progress=False,
                                 **keywords)
    cli("markdup", "--no-PG", *flags, "-o", str(tmp_path / "one.bam"), str(bam))
    fs.invalidate_cache()
    assert fs.cat_file(f"sortase-test/{key}/out/dup.bam") == (tmp_path / "one.bam").read_bytes()
    return report


def s3_markdup_fails_leaving_nothing(s3: Any, client: Any, bad: Path, key: str, match: str,
                                     **keywords: Any) -> None:
    """``bad`` put at ``sortase-test/KEY/in.bam``: :func:`distributed.markdup` of it (with
    ``keywords``) fails with ``match`` and leaves nothing under the prefix but the input."""
    fs, options = s3
    fs.put_file(str(bad), f"sortase-test/{key}/in.bam")
    with pytest.raises(Exception, match=match):
        distributed.markdup(f"s3://sortase-test/{key}/in.bam", f"s3://sortase-test/{key}/out.bam",
                            client=client, task_memory=TASK_MEMORY, storage_options=options,
                            progress=False, **keywords)
    fs.invalidate_cache()
    assert fs.ls(f"sortase-test/{key}", detail=False) == [f"sortase-test/{key}/in.bam"]
