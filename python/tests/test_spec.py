"""One job spec, many faces (issue 28): ``sort``, ``merge``, ``markdup``, ``view``, ``fq2bam``,
``faidx``, ``snp_pileup``, ``index`` and ``bgzip`` take the keywords of their Rust job spec: ``_sortase.spec_schema(kind)`` lists them (each with the
default, annotation and help of the CLI flag declared on the spec's field), ``sortase._takes_spec``
makes them the wrapper's keyword-only parameters and docstring, and the wrapper passes them on as
data to ``_sortase.run_job``. Checked here: every keyword of a wrapper is a field of the Rust spec
(or a face keyword, ``_FACE_KEYWORDS``), every spec field has a keyword (or is listed in
:data:`NOT_IN_PYTHON` with the reason), a wrapper's defaults are the spec's, and each keyword's
help is in the docstring. A field added in Rust without a flag or keyword, or a keyword without its
field, fails here."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

import sortase

_sortase = pytest.importorskip("sortase._sortase")

KINDS = ["sort", "merge", "markdup", "view", "fq2bam", "faidx", "snp_pileup", "index", "bgzip",
         "agd_import", "agd_export"]

#: Spec fields the Python wrapper does not take, per job (no flag of the command sets them either).
NOT_IN_PYTHON: Dict[str, Set[str]] = {
    "sort": set(),
    # samtools merge has no --template-coordinate.
    "merge": {"template_coordinate"},
    # The metrics file's command line is the call's (the @PG line's).
    "markdup": {"metrics_command_line"},
    # view's --write-index writes samtools' default index format.
    "view": {"index_format"},
    "fq2bam": set(),
    "faidx": set(),
    # --batch-bytes is a hidden flag, for tests.
    "snp_pileup": {"batch_bytes"},
    "index": set(),
    "bgzip": set(),
    "agd_import": set(),
    "agd_export": set(),
}


def wrapper_keywords(kind: str) -> Dict[str, object]:
    """The keywords of ``sortase.<kind>`` with their defaults (``None`` for required ones)."""
    params = inspect.signature(sortase._WRAPPERS[kind]).parameters.values()
    return {p.name: None if p.default is inspect.Parameter.empty else p.default for p in params}


def drift(kind: str, python: Dict[str, object], spec: Dict[str, object]) -> List[str]:
    """Every difference between a wrapper's keywords and the spec's, one line each."""
    face = set(sortase._FACE_KEYWORDS)
    mine = set(python) - face
    problems = [f"{kind}: keyword {k!r} names no spec field" for k in sorted(mine - set(spec))]
    problems += [f"{kind}: spec field {k!r} has no keyword (nor a NOT_IN_PYTHON entry)"
                 for k in sorted(set(spec) - mine - NOT_IN_PYTHON[kind])]
    problems += [f"{kind}: {k!r} is in NOT_IN_PYTHON but is a keyword"
                 for k in sorted(NOT_IN_PYTHON[kind] & mine)]
    for k in sorted(mine & set(spec)):
        # None in Python: the spec's default.
        if python[k] is not None and python[k] != spec[k]:
            problems.append(f"{kind}: {k}={python[k]!r} in Python, {spec[k]!r} in the spec")
    return problems


def spec_keywords(kind: str) -> Dict[str, object]:
    return json.loads(_sortase.spec_keywords(kind))


def test_every_spec_kind_has_one_wrapper() -> None:
    """The jobs whose keywords come from their spec are the ones tested here, each with one
    Python wrapper (``_takes_spec`` registers it)."""
    assert sorted(sortase._WRAPPERS) == sorted(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_wrapper_keywords_are_the_spec_fields(kind: str) -> None:
    problems = drift(kind, wrapper_keywords(kind), spec_keywords(kind))
    assert not problems, "\n".join(problems)


def test_a_planted_drift_is_found() -> None:
    """The check can fail: a keyword the spec lacks, a field without a keyword, a changed default."""
    python, spec = wrapper_keywords("sort"), spec_keywords("sort")
    planted = {
        "extra keyword": ({**python, "no_such_option": False}, spec),
        "missing keyword": ({k: v for k, v in python.items() if k != "max_fan_in"}, spec),
        "new field": (python, {**spec, "new_field": 0}),
        "default": ({**python, "max_fan_in": 32}, spec),
    }
    for what, (p, s) in planted.items():
        problems = drift("sort", p, s)
        assert len(problems) == 1, (what, problems)


#: Keywords that are not their long option's name in snake case, and why.
NOT_THE_LONG_NAME: Dict[str, str] = {
    "output_fmt_options": "--output-fmt-option repeats: a list, named in the plural",
    "input_fmt_options": "--input-fmt-option repeats: a list, named in the plural",
    "min_mapq": "-q's keyword in read_bam, view and count alike (pysam's mapping_quality)",
    "level": "bgzip's --compress-level is -l, the level keyword of every writer",
    "continue_": "--continue is a Python keyword",
    "read1": "agd import's -1 (--r1): the FastqInput field, fq2bam's reads1",
    "read2": "agd import's -2 (--r2): the FastqInput field, fq2bam's reads2",
}


def snake(flag: str) -> str:
    """``--acceptDupMarks`` → ``accept_dup_marks``, ``--min-MQ`` → ``min_mq``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", flag.lstrip("-")).replace("-", "_").lower()


def long_name_drift(kind: str, schema: List[Dict[str, object]]) -> List[str]:
    """The keywords of ``kind`` that are not their long option's name, unless listed."""
    problems = []
    for k in schema:
        longs = [f for f in str(k["flag"]).split(", ") if f.startswith("--")]
        if longs and snake(longs[0]) != k["name"] and k["name"] not in NOT_THE_LONG_NAME:
            problems.append(f"{kind}: keyword {k['name']!r} for {longs[0]}: {snake(longs[0])!r}")
    return problems


@pytest.mark.parametrize("kind", KINDS)
def test_keywords_are_the_long_option_names(kind: str) -> None:
    """Python keyword arguments are the long option names (``--acceptDupMarks`` is
    ``accept_dup_marks``), but for the few listed with the reason."""
    problems = long_name_drift(kind, spec_schema(kind))
    assert not problems, "\n".join(problems)
    planted = [{"name": "accept_dups", "flag": "-a, --acceptDupMarks"}]
    assert long_name_drift(kind, planted), "the check can fail"


#: The Dask functions' keywords of their own: the cluster's, the task sizes, the runtime's.
DASK_KEYWORDS = {"client", "scheduler", "tasks", "task_memory", "reduce_tasks", "threads",
                 "storage_options", "progress"}
#: Per Dask function: the job it runs, and keywords of its own beyond ``DASK_KEYWORDS``.
DASK_JOBS = {
    "sort": ("sort", set()),
    "merge": ("merge", set()),
    "markdup": ("markdup", set()),
    "agd_markdup": ("markdup", {"dataset", "command_line"}),
    "fq2bam": ("fq2bam", {"chunk_templates", "scan_bytes"}),
    "index": ("index", {"path"}),
    "snp_pileup": ("snp_pileup", set()),
}


@pytest.mark.parametrize("name", sorted(DASK_JOBS))
def test_dask_keywords_are_the_spec_keywords(name: str) -> None:
    """A Dask function takes its job's options under the one-machine wrapper's names and
    defaults (a subset: what the tasks support), plus the cluster's keywords."""
    from sortase import distributed

    kind, own = DASK_JOBS[name]
    params = inspect.signature(getattr(distributed, name)).parameters
    spec = spec_keywords(kind)
    wrapper = set(inspect.signature(sortase._WRAPPERS[kind]).parameters)
    for p in params.values():
        if p.name in DASK_KEYWORDS | own:
            continue
        assert p.name in spec or p.name in wrapper, f"distributed.{name}: {p.name!r} is not a " \
            f"keyword of sortase.{kind}"
        default = p.default
        if p.name in spec and default not in (inspect.Parameter.empty, None):
            assert default == spec[p.name], (name, p.name, default, spec[p.name])


def test_face_keywords_are_no_spec_field() -> None:
    for kind in KINDS:
        assert not set(sortase._FACE_KEYWORDS) & set(spec_keywords(kind)), kind


def test_unknown_keyword_is_refused_by_name(tmp_path: Path) -> None:
    spec = {"input": str(tmp_path / "in.bam"), "output": str(tmp_path / "out.bam"),
            "no_such_option": True}
    with pytest.raises(sortase.ArgumentError, match="no_such_option"):
        _sortase.run_job("sort", json.dumps(spec))
    assert not (tmp_path / "out.bam").exists()
    with pytest.raises(sortase.ArgumentError, match="no job"):
        _sortase.run_job("sortt", json.dumps(spec))


def test_wrong_type_names_its_keyword(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="max_fan_in"):
        sortase.sort(tmp_path / "in.bam", tmp_path / "out.bam", max_fan_in="many")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="level"):
        sortase.view(tmp_path / "in.bam", count=True, level="high")  # type: ignore[arg-type]
    with pytest.raises(sortase.ArgumentError, match="mode"):
        sortase.markdup(tmp_path / "in.bam", tmp_path / "d.bam", mode="fastest")


def test_a_new_sort_option_reaches_the_spec(tmp_path: Path) -> None:
    """The example of issue 28: ``input_fmt_options`` (``--input-fmt-option filter=EXPR``) is a
    spec field, a flag and a keyword line; through the Python face the filter drops the records
    the expression fails, as the CLI does."""
    sam = tmp_path / "in.sam"
    rows = [f"r{i}\t0\tchr1\t{1 + (i * 37) % 900}\t{i % 61}\t4M\t*\t0\t0\tACGT\tIIII" for i in range(300)]
    sam.write_text("@SQ\tSN:chr1\tLN:1000\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out.bam"
    report = sortase.sort(sam, out, threads=2, input_fmt_options=["filter=mapq >= 30"])
    kept = sum(1 for i in range(300) if i % 61 >= 30)
    assert report.records == kept
    table = sortase.read_bam(out, columns=["mapq", "pos"])
    assert table.num_rows == kept and min(table.column("mapq").to_pylist()) >= 30
    assert table.column("pos").to_pylist() == sorted(table.column("pos").to_pylist())


def spec_schema(kind: str) -> List[Dict[str, object]]:
    return json.loads(_sortase.spec_schema(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_the_spec_flags_are_the_keywords(kind: str) -> None:
    """Each flag of the spec is a keyword-only parameter of the wrapper with the flag's annotation
    (a type that resolves in ``sortase``), and its help stands in the wrapper's docstring."""
    wrapper = sortase._WRAPPERS[kind]
    params = inspect.signature(wrapper).parameters
    namespace = vars(sortase)
    schema = spec_schema(kind)
    assert schema, kind
    for k in schema:
        name = str(k["name"])
        assert name in params, (kind, name)
        assert eval(str(k["annotation"]), namespace) is not None  # noqa: S307 (our own schema)
        assert k["help"], (kind, name, "a flag without help")
        if name not in written_in_python(wrapper):
            assert f"- ``{name}`` (" in wrapper.__doc__ and str(k["help"]) in wrapper.__doc__, name


def written_in_python(f: object) -> Set[str]:
    """The parameters a wrapper's ``def`` names itself (its code's, not ``__signature__``)."""
    code = f.__wrapped__.__code__  # type: ignore[attr-defined]
    return set(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])


def test_a_spec_keyword_reaches_the_job(tmp_path: Path) -> None:
    """A keyword that only the schema declares (samblaster's ``--addMateTags``, a field of the
    spec's ``samblaster`` group with no line of Python) does what the flag does."""
    sam = tmp_path / "in.sam"
    sam.write_text(
        "@HD\tVN:1.6\tSO:queryname\n@SQ\tSN:chr1\tLN:1000\n"
        "p1\t99\tchr1\t100\t60\t4M\t=\t200\t104\tACGT\tIIII\n"
        "p1\t147\tchr1\t200\t50\t4M\t=\t100\t-104\tACGT\tIIII\n"
    )
    out = tmp_path / "out.sam"
    sortase.markdup(sam, out, mode="query", add_mate_tags=True, output_fmt="sam", no_pg=True)
    records = [line for line in out.read_text().splitlines() if not line.startswith("@")]
    assert [("MC:Z:4M" in r, "MQ:i:" in r) for r in records] == [(True, True), (True, True)]
    sortase.markdup(sam, out, mode="query", output_fmt="sam", no_pg=True)
    assert "MC:Z:" not in out.read_text()


def test_an_unknown_keyword_is_a_type_error(tmp_path: Path) -> None:
    """As for any Python function: a keyword the job does not take, or a missing positional, is a
    ``TypeError`` before anything runs."""
    with pytest.raises(TypeError, match="lvl"):
        sortase.sort(tmp_path / "in.bam", tmp_path / "out.bam", lvl=1)
    with pytest.raises(TypeError):
        sortase.markdup(tmp_path / "in.bam")  # type: ignore[call-arg]
    assert not (tmp_path / "out.bam").exists()


REPO = Path(__file__).resolve().parents[2]


def test_the_type_checkers_keywords_are_the_specs() -> None:
    """python/sortase/_spec_types.py (the wrappers' ``**spec`` keywords as TypedDicts) is what
    scripts/spec-types.py writes from the specs: a flag added to a spec needs that script run."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "scripts" / "spec-types.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_mypy_checks_the_spec_keywords(tmp_path: Path) -> None:
    """A type checker sees each spec keyword with its type: a misspelled keyword and a wrong type
    are errors, a right call is not (as when the keywords were written out by hand)."""
    api = pytest.importorskip("mypy.api")
    code = tmp_path / "use.py"
    code.write_text(
        "import sortase\n"
        "sortase.sort('in.bam', 'out.bam', by_name=True, level=1, write_index=True)\n"
        "sortase.markdup('in.bam', 'out.bam', add_mate_tags=True)\n"
        "sortase.sort('in.bam', 'out.bam', by_nmae=True)\n"
        "sortase.sort('in.bam', 'out.bam', level='fast')\n")
    out, err, status = api.run([str(code), "--no-incremental", "--follow-imports=silent",
                                "--cache-dir", str(tmp_path / "cache")])
    lines = [line for line in out.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in lines] == ["4", "5"], out + err
    assert '"by_nmae"' in lines[0] and '"level"' in lines[1], out
