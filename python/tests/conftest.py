"""Shared fixtures: the htslib test corpus, generated inputs, the pysam oracle and the CLI binary."""

from __future__ import annotations

import array
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

pysam = pytest.importorskip("pysam")

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("SORTASE_HTSLIB_TEST_DIR", "/usr/share/htslib-test/test"))

FIXED = ["qname", "flag", "rname", "pos", "mapq", "cigar", "rnext", "pnext", "tlen", "seq",
         "qual", "tags"]


def pytest_configure(config: Any) -> None:
    """Give this test process a temporary directory of its own ($TMPDIR, inherited by the CLI, the
    Dask workers it starts and the Rust library): tests that check no `sortase-*` scratch is left
    behind must not see another process's (pytest-xdist's other worker, another run on the machine)."""
    own = tempfile.mkdtemp(prefix="sortase-pytest-")
    config._sortase_tmp = (own, os.environ.get("TMPDIR"))
    os.environ["TMPDIR"] = own
    tempfile.tempdir = None


def pytest_unconfigure(config: Any) -> None:
    own, before = getattr(config, "_sortase_tmp", (None, None))
    if own is None:
        return
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    tempfile.tempdir = None
    shutil.rmtree(own, ignore_errors=True)


def cli_binary() -> Optional[Path]:
    """The `sortase` binary to compare with: $SORTASE_BIN, else target/release, else target/debug."""
    if os.environ.get("SORTASE_BIN"):
        return Path(os.environ["SORTASE_BIN"])
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "sortase"
        if p.exists():
            return p
    return None


@pytest.fixture(scope="session")
def sortase_bin() -> Path:
    p = cli_binary()
    if p is None:
        pytest.skip("no sortase binary (cargo build --release, or set SORTASE_BIN)")
    return p


def input_fixture(make: Callable[..., Path], folder: str, **keywords: Any) -> Any:
    """A module-scoped fixture, named as the module variable it is assigned to: the input
    ``make(FOLDER/in.bam, **keywords)`` writes, in a fresh temporary ``folder``, once per module
    that uses it (``bam = input_fixture(make_bam, "data")``)."""

    @pytest.fixture(scope="module")
    def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return make(tmp_path_factory.mktemp(folder) / "in.bam", **keywords)

    return made


def corpus_sams() -> List[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(CORPUS.rglob("*.sam"))


def tag_value(r: Any, tag: str) -> Any:
    """pysam's value of `tag`, with arrays as lists (None if absent)."""
    if not r.has_tag(tag):
        return None
    v = r.get_tag(tag)
    if isinstance(v, array.array):
        return list(v)
    return v


def rows(table: Any) -> List[Dict[str, Any]]:
    """An Arrow table's rows as dicts."""
    return table.to_pylist()


def assert_same(got: List[Dict[str, Any]], want: List[Dict[str, Any]], label: str) -> None:
    """``got`` (sortase's rows) equal ``want`` (pysam's, :func:`expected_rows`) in every key of
    ``want``."""
    assert len(got) == len(want), f"{label}: {len(got)} rows, pysam has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        for key in w:
            assert g[key] == w[key], f"{label}: row {i} ({w.get('qname')}) {key}: {g[key]!r} != {w[key]!r}"


def expected_rows(path: Path, region: Optional[Tuple[str, Optional[int], Optional[int]]] = None,
                  tags: Sequence[str] = (),
                  columns: Sequence[str] = FIXED,
                  reference: Optional[Path] = None) -> Iterator[Dict[str, Any]]:
    """pysam's reading of `path` (or of `region`: contig, 0-based start, end; `reference`: the
    FASTA of a CRAM), as the rows `read_bam` must return."""
    fasta = None if reference is None else str(reference)
    with pysam.AlignmentFile(str(path), check_sq=False, reference_filename=fasta) as f:
        if region:
            records = f.fetch(contig=region[0], start=region[1], stop=region[2])
        else:
            records = f.fetch(until_eof=True)
        for r in records:
            row: Dict[str, Any] = {}
            every = {
                "qname": r.query_name,
                "flag": r.flag,
                "rname": r.reference_name,
                "pos": r.reference_start + 1,
                "mapq": r.mapping_quality,
                "cigar": r.cigarstring,
                "rnext": r.next_reference_name,
                "pnext": r.next_reference_start + 1,
                "tlen": r.template_length,
                "seq": r.query_sequence,
                "qual": None if r.query_qualities is None
                else "".join(chr(q + 33) for q in r.query_qualities),
            }
            for c in columns:
                if c == "tags":
                    fields = r.to_string().split("\t")[11:]
                    row["tags"] = "\t".join(t for t in fields if t[:2] not in tags)
                else:
                    row[c] = every[c]
            for t in tags:
                row[t] = tag_value(r, t)
            yield row


def sam_to_bam(text: str, directory: Path) -> Path:
    """SAM ``text`` written to ``directory``/in.sam and converted by samtools to in.bam (returned),
    in the same order."""
    sam = directory / "in.sam"
    sam.write_text(text)
    bam = directory / "in.bam"
    pysam.samtools.view("-b", "-o", str(bam), str(sam), catch_stdout=False)
    return bam


def write_bam(path: Path, header: Dict[str, Any], records: Sequence[Dict[str, Any]],
              index: bool = False) -> Path:
    """A BAM written by pysam (htslib) from record dicts (pysam AlignedSegment attributes)."""
    h = pysam.AlignmentHeader.from_dict(header)
    with pysam.AlignmentFile(str(path), "wb", header=h) as out:
        for spec in records:
            a = pysam.AlignedSegment(h)
            for key, value in spec.items():
                if key == "tags":
                    for tag, v, t in value:
                        a.set_tag(tag, v, value_type=t)
                else:
                    setattr(a, key, value)
            out.write(a)
    if index:
        pysam.index(str(path))
    return path


@pytest.fixture(scope="session")
def corpus_bams(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """Every corpus SAM that pysam reads, converted by pysam to BAM (name → path)."""
    out_dir = tmp_path_factory.mktemp("corpus")
    out: Dict[str, Path] = {}
    for sam in corpus_sams():
        name = str(sam.relative_to(CORPUS)).replace("/", "_")
        bam = out_dir / (name[:-4] + ".bam")
        try:
            with pysam.AlignmentFile(str(sam), check_sq=False) as f, \
                    pysam.AlignmentFile(str(bam), "wb", template=f) as w:
                for r in f.fetch(until_eof=True):
                    w.write(r)
        except (ValueError, OSError):
            bam.unlink(missing_ok=True)
            continue
        out[name] = bam
    return out


@pytest.fixture(scope="session")
def large_bam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sorted, indexed BAM of ~6 MB (many byte ranges per thread), varied records."""
    import random

    rng = random.Random(17)
    path = tmp_path_factory.mktemp("large") / "large.bam"
    refs = [{"SN": f"chr{i}", "LN": 5_000_000} for i in range(1, 4)]
    recs = []
    for i in range(60_000):
        tid = rng.randrange(3)
        pos = rng.randrange(4_999_000)
        length = rng.randrange(30, 160)
        seq = "".join(rng.choice("ACGT") for _ in range(length))
        spec = {
            "query_name": f"read{i}",
            "flag": rng.choice([0, 16, 99, 147, 83, 163]),
            "reference_id": tid,
            "reference_start": pos,
            "mapping_quality": rng.randrange(61),
            "cigarstring": f"{length}M",
            "next_reference_id": tid,
            "next_reference_start": pos + 200,
            "template_length": 300,
            "query_sequence": seq,
            "query_qualities": pysam.qualitystring_to_array(
                "".join(chr(33 + rng.randrange(42)) for _ in range(length))),
            "tags": [("NM", rng.randrange(5), "i"), ("RG", "g1", "Z")],
        }
        recs.append(spec)
    for i in range(500):
        recs.append({"query_name": f"unmapped{i}", "flag": 4, "reference_id": -1,
                     "reference_start": -1, "query_sequence": "ACGT",
                     "query_qualities": pysam.qualitystring_to_array("IIII")})
    recs.sort(key=lambda s: (s["reference_id"] < 0, s["reference_id"], s["reference_start"]))
    header = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": refs, "RG": [{"ID": "g1"}]}
    return write_bam(path, header, recs, index=True)


@pytest.fixture
def clean_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture(scope="session")
def client() -> Iterator[Any]:
    """One LocalCluster of 2 worker processes for every distributed test module (starting one per
    module cost seconds each); tests that kill a worker or sabotage task code start their own."""
    pytest.importorskip("dask.distributed")
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c
