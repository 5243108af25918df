"""sortase: samtools-compatible BAM/SAM/CRAM jobs on all cores, and BAM into Apache Arrow.

Every job runs in Rust with the GIL released, on a runtime built for the call (``threads``,
``max_memory``); Ctrl-C cancels it within a second and leaves no temporary or partial files, then
``KeyboardInterrupt`` is raised. Errors raise subclasses of :class:`SortaseError`.

>>> import sortase
>>> report = sortase.sort("in.bam", "sorted.bam", threads=4, max_memory="2G", write_index=True)
>>> table = sortase.read_bam("sorted.bam", region="chr1:1-100000", tags=["NM", "RG"])
>>> import polars as pl; df = pl.from_arrow(table)
>>> sortase.read_bam("sorted.bam", min_mapq=30, exclude_flags="UNMAP,DUP", expr="[NM] < 3")
>>> sortase.lazy_bam("sorted.bam").filter(pl.col("mapq") >= 30).select("qname").collect()
>>> sortase.flagstat("sorted.bam")["QC-passed reads"]["mapped"]   # samtools flagstat -O json
>>> sortase.idxstats("sorted.bam")                                # a pyarrow.Table

Every command is a function whose keywords are its long options: :func:`sort`, :func:`merge`,
:func:`view`, :func:`index`, :func:`markdup`, :func:`flagstat`, :func:`idxstats`, :func:`bgzip`,
:func:`faidx`, :func:`fetch`, :func:`snp_pileup`. Jobs that write files return a :class:`Report`;
the others return their results as data (dicts, tables, lists). AGD datasets (Parquet column chunks
plus a manifest): :mod:`sortase.agd` (``sortase.agd.open(path).read(["qname", "mapq"])``).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar,
                    Union)

import pyarrow as pa

from . import _sortase

if TYPE_CHECKING:  # the spec wrappers' keywords, for type checkers (scripts/spec-types.py)
    from typing_extensions import Unpack

    from . import _spec_types
from ._errors import (
    ArgumentError,
    CancelledError,
    FormatError,
    InputError,
    InternalError,
    OutputError,
    SortaseError,
)

__version__ = _sortase.__version__

__all__ = [
    "ArgumentError",
    "CancelledError",
    "FormatError",
    "InputError",
    "InternalError",
    "OutputError",
    "Report",
    "SortaseError",
    "SortaseWarning",
    "agd",
    "bgzip",
    "faidx",
    "fetch",
    "flagstat",
    "fq2bam",
    "idxstats",
    "index",
    "lazy_bam",
    "markdup",
    "merge",
    "read_bam",
    "scan_bam",
    "snp_pileup",
    "sort",
    "view",
]

PathLike = Union[str, "os.PathLike[str]"]

#: The columns ``read_bam`` and ``scan_bam`` return by default, in order.
COLUMNS = [
    "qname", "flag", "rname", "pos", "mapq", "cigar",
    "rnext", "pnext", "tlen", "seq", "qual", "tags",
]


class SortaseWarning(UserWarning):
    """A warning of a job (samtools' text, e.g. ``--write-index`` ignored for a name sort)."""


class Report(dict):
    """What a job did: a dict (JSON-ready) whose keys are also attributes.

    ``sort`` reports ``records``, ``record_bytes``, ``memory_budget``, ``record_memory``,
    ``runs_spilled``, ``compactions``, ``final_fan_in``, ``ranges``, ``temp_bytes``, ``spilled_bytes``,
    ``spill_seconds``, ``compaction_wait_seconds``, ``threads``, ``phases`` (a list of reports with
    ``name``, ``seconds``, ``cpu_percent``), ``outputs`` (paths written) and ``warnings``.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def _from(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return cls({k: cls._from(v) for k, v in value.items()})
        if isinstance(value, list):
            return [cls._from(v) for v in value]
        return value


def _report(json_text: str, stacklevel: int = 3) -> Report:
    import json

    report = Report._from(json.loads(json_text))
    for w in report.get("warnings", []):
        warnings.warn(w, SortaseWarning, stacklevel=stacklevel)
    return report


def _progress(progress: Optional[bool], label: str) -> Optional[Callable[[str, int, int], None]]:
    """A callback drawing a tqdm bar (when asked, or by default on a terminal)."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    bar = tqdm(total=0, unit="B", unit_scale=True, desc=label, leave=False)
    phase = [label]

    def update(now: str, done: int, total: int) -> None:
        if now != phase[0]:
            # A new phase (e.g. sort's merge and write, counted in records: the label says so).
            phase[0] = now
            records = now.endswith(" records")
            bar.unit = "rec" if records else "B"
            bar.set_description(now[: -len(" records")] if records else now, refresh=False)
            bar.reset(total=total or None)
        if total and bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    update.close = bar.close  # type: ignore[attr-defined]
    return update


def _closing(callback: Optional[Callable[..., None]]) -> None:
    if callback is not None:
        callback.close()  # type: ignore[attr-defined]


#: The keywords of a wrapper that belong to its face, not to the job's spec: the runtime's
#: (``threads``, ``max_memory``) and the progress bar. The others go to the spec as they are.
_FACE_KEYWORDS = ("threads", "max_memory", "progress")


def _plain(value: Any) -> Any:
    """A keyword's value as JSON data: paths as text, sequences as lists."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _job(kind: str, keywords: Dict[str, Any]) -> Report:
    """Runs job ``kind`` with a wrapper's keywords (its ``locals()``, whose ``spec`` holds the
    keywords of ``**spec``): the spec's keywords as a JSON object, which ``_sortase.run_job``
    places into the Rust job spec (a keyword the spec does not have is an
    :class:`ArgumentError`); ``_FACE_KEYWORDS`` go to the runtime."""
    import json

    keywords = {**{k: v for k, v in keywords.items() if k != "spec"}, **keywords.get("spec", {})}
    spec = {k: _plain(v) for k, v in keywords.items() if k not in _FACE_KEYWORDS}
    callback = _progress(keywords["progress"], kind) if "progress" in keywords else None
    try:
        text = _sortase.run_job(
            kind, json.dumps(spec), threads=keywords.get("threads"),
            max_memory=keywords.get("max_memory"), progress=callback,
        )
    finally:
        _closing(callback)
    return _report(text, stacklevel=4)


_F = TypeVar("_F", bound=Callable[..., Any])

#: The wrapper of each job whose keywords come from its spec (:func:`_takes_spec`), by kind.
_WRAPPERS: Dict[str, Callable[..., Any]] = {}


def _takes_spec(kind: str) -> Callable[[_F], _F]:
    """The keywords of job ``kind``'s spec, each described by its CLI flag
    (``_sortase.spec_schema``: the flags declared on the Rust spec's fields), as the decorated
    wrapper's keyword-only parameters (its ``__signature__``, after its own) and a list in its
    docstring. The wrapper takes them as ``**spec`` and passes them on as they are: an option added
    to the Rust spec with its flag is a keyword here, with its default and help, without a line of
    Python. A call is bound to the signature first, so a keyword the job does not take is a
    ``TypeError``, as for any Python function."""
    import functools
    import inspect
    import json

    schema = json.loads(_sortase.spec_schema(kind))

    def wrap(f: _F) -> _F:
        sig = inspect.signature(f)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        mine = {p.name for p in own}
        taken = [k for k in schema if k["name"] not in mine]
        params = [
            inspect.Parameter(
                k["name"], inspect.Parameter.KEYWORD_ONLY,
                default=None if k["default"] == [] else k["default"],
                annotation=k["annotation"],
            )
            for k in taken
        ]
        full = sig.replace(parameters=own + params)

        @functools.wraps(f)
        def checked(*args: Any, **kwargs: Any) -> Any:
            full.bind(*args, **kwargs)  # a keyword the job does not take: Python's TypeError
            return f(*args, **kwargs)

        checked.__signature__ = full  # type: ignore[attr-defined]
        _WRAPPERS[kind] = checked
        lines = [f"- ``{k['name']}`` ({_flag_doc(k['flag'])}): {k['help']}" for k in taken]
        checked.__doc__ = (
            (f.__doc__ or "").rstrip()
            + f"\n\n    The options of ``sortase {_command(kind)}``, as keywords"
            + " (``None``: the default):\n\n    "
            + "\n    ".join(lines)
            + "\n"
        )
        return checked  # type: ignore[return-value]

    return wrap


def _command(kind: str) -> str:
    """The CLI command of job ``kind``: ``agd import`` for ``agd_import``, ``snp-pileup``."""
    return kind.replace("agd_", "agd ", 1).replace("_", "-")


def _flag_doc(flag: str) -> str:
    return f"``{flag}``" if flag else "positional in the CLI"


@_takes_spec("sort")
def sort(
    input: PathLike,
    output: PathLike,
    *,
    threads: Optional[int] = None,
    max_memory: Union[int, str, None] = None,
    progress: Optional[bool] = None,
    **spec: Unpack[_spec_types.SortOptions],
) -> Report:
    """Sorts ``input`` (SAM/BAM/CRAM, or an AGD dataset directory) into ``output``, as ``sortase
    sort`` / ``samtools sort``; with ``output_fmt="agd"`` into a new AGD dataset directory
    (``sortase agd sort``: ``chunk_size`` records per chunk, ``level`` the zstd level).

    ``threads`` (``-@``, default all cores), ``max_memory`` (bytes, or ``"768M"``/``"2G"``; default
    768 MiB per thread), ``progress``: a tqdm bar (default: when stderr is a terminal and tqdm is
    installed). The other keywords are the command's options, listed below: e.g. ``by_name``
    (``-n``), ``level`` (``-l``), ``write_index``, ``input_fmt_options=["filter=mapq >= 30"]``
    (sorts only the records the htslib filter expression passes, as samtools), ``checksums``
    (prove that no record was lost or changed; different sums fail the job and leave no output).

    Returns a :class:`Report`; the output is byte-identical to the command's with the same options.
    """
    return _job("sort", locals())


Tags = Union[Sequence[str], Mapping[str, Optional[str]], None]
Flags = Union[int, str, None]


def _list(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    return None if values is None else list(values)


def _stream_reader(stream: Any) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_stream(stream)


def read_bam(
    path: PathLike,
    region: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    tags: Tags = None,
    threads: Optional[int] = None,
    *,
    reference: Optional[PathLike] = None,
    batch_rows: Optional[int] = None,
    progress: Optional[bool] = None,
    require_flags: Flags = None,
    exclude_flags: Flags = None,
    min_mapq: int = 0,
    expr: Optional[str] = None,
) -> pa.Table:
    """Reads alignment records into a ``pyarrow.Table``, on all cores.

    ``path``: BAM (decoded in parallel by byte ranges), SAM or CRAM (``reference`` for CRAM).
    ``region``: ``"chr1"``, ``"chr1:1,000-2,000"`` (1-based, inclusive; needs a .bai/.csi): the
    records overlapping it, as ``samtools view in.bam REGION``. ``columns``: the fixed columns to
    decode, in order (default :data:`COLUMNS`); asking for fewer is faster. ``tags``: tags that get
    typed columns of their own after the fixed ones, e.g. ``["NM", "RG"]``, or with SAM types
    ``{"NM": "i", "XA": "Z", "ML": "B:i"}`` (``i`` int64, ``f`` float64, ``Z`` string (any tag as
    its SAM text value), ``B:i``/``B:f`` lists). A type not given is the tag's type in the first
    records, else the SAM tag specification's, else ``Z``.

    Columns (pysam equivalents): ``qname`` (query_name), ``flag``, ``rname`` (reference_name,
    dictionary-encoded, null if unplaced), ``pos`` (reference_start + 1: SAM's 1-based POS, 0 if
    unset), ``mapq``, ``cigar`` (cigarstring, null if none; CIGARs over 65535 operations shown
    whole), ``rnext`` (next_reference_name), ``pnext`` (next_reference_start + 1), ``tlen``,
    ``seq`` (query_sequence, null if none), ``qual`` (Phred+33 text, null if none), ``tags`` (the
    tags not selected, as SAM text ``TG:T:VALUE`` joined by tabs, ``""`` if none).
    Rows are in file order.

    Filters, as :func:`view`'s (``samtools view``'s long options), are checked on the raw records
    in the decode threads, before any column is built: ``require_flags`` (``-f``,
    ``--require-flags``) and ``exclude_flags`` (``-F``, ``--excl-flags``), an int or samtools'
    text (``"0x4"``, ``"UNMAP,SECONDARY"``); ``min_mapq`` (``-q``, ``--min-MQ``); ``expr``
    (``-e``, ``--expr``: an htslib filter expression, ``'mapq >= 30 && !flag.dup && [NM] < 3'``).
    The rows are the records ``samtools view`` writes with the same options and region.
    """
    options = {k: v for k, v in locals().items() if k != "progress"}
    callback = _progress(progress, "read_bam")
    try:
        stream = _read(options, progress=callback)
    finally:
        _closing(callback)
    return stream.read_all()


def _read(options: Dict[str, Any], progress: Any = None, stream: bool = False
          ) -> pa.RecordBatchReader:
    """``read_bam`` and ``scan_bam``'s one call into the extension module: their keywords
    (``options``, a wrapper's ``locals()``) as the extension's, which has the same names."""
    batches, _report_text = _sortase.read_bam(
        **{**options, "columns": _list(options["columns"]), "tags": _tags(options["tags"])},
        progress=progress, stream=stream,
    )
    return _stream_reader(batches)


def scan_bam(
    path: PathLike,
    region: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    tags: Tags = None,
    threads: Optional[int] = None,
    *,
    reference: Optional[PathLike] = None,
    batch_rows: Optional[int] = None,
    require_flags: Flags = None,
    exclude_flags: Flags = None,
    min_mapq: int = 0,
    expr: Optional[str] = None,
) -> pa.RecordBatchReader:
    """As :func:`read_bam`, but a ``pyarrow.RecordBatchReader`` that decodes ahead in bounded
    memory (a few byte ranges per thread in flight) while you consume it. Errors in opening
    (missing file, bad arguments, no index) raise :class:`SortaseError` subclasses at once; errors
    found while streaming (a truncated file) are raised by pyarrow as ``ArrowInvalid`` with
    sortase's message, which names the file. The filters (``require_flags``, ``exclude_flags``,
    ``min_mapq``, ``expr``) are :func:`read_bam`'s. For a ``polars.LazyFrame`` see
    :func:`lazy_bam`."""
    return _read(locals(), stream=True)


def lazy_bam(
    path: PathLike,
    region: Optional[str] = None,
    tags: Tags = None,
    threads: Optional[int] = None,
    *,
    reference: Optional[PathLike] = None,
    require_flags: Flags = None,
    exclude_flags: Flags = None,
    min_mapq: int = 0,
    expr: Optional[str] = None,
    batch_rows: Optional[int] = None,
) -> "polars.LazyFrame":  # type: ignore[name-defined]  # noqa: F821
    """The records as a ``polars.LazyFrame`` (needs polars): a query's column selection and
    its simple row filters run in sortase's decode threads.

    The frame's columns are :data:`COLUMNS` then the ``tags`` columns, as :func:`read_bam`'s
    (``rname``/``rnext`` are categorical). When the query is collected, only the columns it uses
    are decoded, and the parts of its filter that are comparisons of ``flag``, ``mapq``, ``pos``,
    ``pnext``, ``tlen`` (numbers, ``&`` masks), ``rname``, ``rnext``, ``qname`` (``==``/``!=`` a
    string) joined by ``&``, ``|``, ``~`` and ``is_between`` become an htslib filter expression
    (``expr``) checked on the raw records; with an index (``.bai``/``.csi``, ``.crai``),
    ``rname == NAME`` with a lower bound on ``pos`` reads only that region. The whole filter is
    then applied by polars as well, so the frame is the eager one filtered in polars, in file order:

    >>> import polars as pl
    >>> lf = sortase.lazy_bam("sorted.bam")
    >>> lf.filter((pl.col("mapq") >= 30) & (pl.col("rname") == "chr1")
    ...           & (pl.col("pos") >= 100_000)).select("qname", "pos").collect()

    ``region``, ``require_flags``, ``exclude_flags``, ``min_mapq``, ``expr`` filter as in
    :func:`read_bam`, before the query's own filter.
    """
    from . import _lazy

    return _lazy.lazy_bam(
        path, region=region, tags=tags, threads=threads, reference=reference,
        require_flags=require_flags, exclude_flags=exclude_flags, min_mapq=min_mapq, expr=expr,
        batch_rows=batch_rows,
    )


def _tags(tags: Tags) -> Union[List[str], Dict[str, Optional[str]], None]:
    if tags is None or isinstance(tags, (str, bytes)):
        return tags  # type: ignore[return-value]  # a str is refused with a TypeError
    if isinstance(tags, Mapping):
        return dict(tags)
    return list(tags)


# The other commands (issue 17): keywords are the commands' long options, results are data.


def flagstat(path: PathLike, *, threads: Optional[int] = None) -> Dict[str, Any]:
    """Counts the flags of a BAM (CRAM, SAM) or an AGD dataset directory, as ``samtools flagstat -O
    json``: a dict with samtools' keys (``{"QC-passed reads": {...}, "QC-failed reads": {...}}``).
    Warnings are issued as :class:`SortaseWarning`."""
    import json

    report_text, json_text = _sortase.flagstat(path, threads=threads)
    _report(report_text)
    return json.loads(json_text)


def idxstats(path: PathLike, *, threads: Optional[int] = None) -> pa.Table:
    """Per-reference counts of a BAM (from its index when it has one) or an AGD dataset directory,
    as ``samtools idxstats``: a ``pyarrow.Table`` with columns ``name``, ``length``, ``mapped``,
    ``unmapped`` (the last row ``*``: unplaced reads)."""
    rows = _report(_sortase.idxstats(path, threads=threads))["rows"]
    return pa.table({
        "name": pa.array([r["name"] for r in rows], pa.string()),
        "length": pa.array([r["length"] for r in rows], pa.uint64()),
        "mapped": pa.array([r["mapped"] for r in rows], pa.uint64()),
        "unmapped": pa.array([r["unmapped"] for r in rows], pa.uint64()),
    })


@_takes_spec("index")
def index(
    input: PathLike,
    output: Optional[PathLike] = None,
    *,
    threads: Optional[int] = None,
    **spec: Unpack[_spec_types.IndexOptions],
) -> Report:
    """Indexes a coordinate-sorted BAM, as ``sortase index`` / ``samtools index``: a ``.bai`` next
    to it, or at ``output``; ``csi=True`` or a ``min_shift`` (``-m``, which implies ``-c`` as in
    samtools) writes a ``.csi``. ``threads`` (``-@``); the other keywords are the command's
    options, listed below. Reports ``bytes``, ``outputs``, ``warnings``."""
    return _job("index", locals())


@_takes_spec("merge")
def merge(
    inputs: Sequence[PathLike],
    output: PathLike,
    *,
    threads: Optional[int] = None,
    **spec: Unpack[_spec_types.MergeOptions],
) -> Report:
    """Merges sorted ``inputs`` into ``output``, as ``sortase merge`` / ``samtools merge``.

    ``threads`` (``-@``); the other keywords are the command's options, listed below (``attach_rg``
    is ``-r``, ``combine_rg`` ``-c``, ``combine_pg`` ``-p``, ``header`` ``-h FILE``, ``force``
    ``-f``). Reports ``inputs``, ``threads``, ``method``, ``ranges``, ``outputs``, ``warnings``,
    ``checksums``."""
    return _job("merge", locals())


@_takes_spec("view")
def view(
    input: PathLike,
    output: Optional[PathLike] = None,
    *,
    threads: Optional[int] = None,
    output_fmt: Optional[str] = None,
    level: Optional[int] = None,
    uncompressed: bool = False,
    reference: Optional[PathLike] = None,
    output_fmt_options: Optional[Sequence[str]] = None,
    write_index: bool = False,
    require_flags: Flags = None,
    exclude_flags: Flags = None,
    **spec: Unpack[_spec_types.ViewOptions],
) -> Report:
    """Filters and converts records, as ``sortase view`` / ``samtools view``. ``input``: a
    SAM/BAM/CRAM file or an AGD dataset directory (filters ``-f -F -q`` only; ``regions`` of a
    coordinate-sorted dataset; ``use_index`` (``-M``): the regions as one union, each record once
    in file order).

    ``output``: the file written (``None``: standard output, SAM unless ``output_fmt``); the output
    keywords (``output_fmt``, ``level``, ``uncompressed``, ``reference``, ``output_fmt_options``,
    ``write_index``) as in :func:`sort`. ``count=True`` (``-c``) writes nothing and reports the
    number of records passing the filters
    in ``count``. ``require_flags`` (``-f``) / ``exclude_flags`` (``-F``): an int or samtools'
    text (``"0x4"``, ``"UNMAP,SECONDARY"``); ``regions`` need an index (``.bai``/``.csi``, or
    ``.crai`` for CRAM); ``tag`` (``-d``): ``"NM"`` or ``"NM:0"``, or a list of values of one tag;
    ``expr`` (``-e``): an htslib filter expression such as
    ``'mapq >= 30 && flag.paired && [NM] < 3'``. Reports ``records``, ``count``, ``outputs``,
    ``warnings``."""
    tag = spec.get("tag")
    if isinstance(tag, str):
        spec["tag"] = [tag]  # one -d value or several
    return _job("view", locals())


@_takes_spec("markdup")
def markdup(
    input: PathLike,
    output: PathLike,
    *,
    threads: Optional[int] = None,
    max_memory: Union[int, str, None] = None,
    mode: str = "auto",
    metrics: Optional[PathLike] = None,
    **spec: Unpack[_spec_types.MarkdupOptions],
) -> Report:
    """Marks duplicates, as ``sortase markdup``: ``mode`` ``"auto"`` (from ``@HD SO``),
    ``"query"`` (samblaster's algorithm) or ``"coordinate"`` (Picard MarkDuplicates').
    ``threads`` (``-@``), ``max_memory`` (default ``"2G"``), ``metrics`` (``--metrics``: Picard's
    DuplicationMetrics file per library, in both modes; query-grouped input reports no optical
    duplicates); the other keywords are the command's options, listed below; with ``checksums``
    the duplicate flag is not summed, and with ``remove_dups`` the removed records are summed
    as ``left_out``. Reports ``mode``, ``records``, ``duplicate_records``, ``summary`` (the lines the
    CLI prints), ``outputs``, ``warnings``, ``checksums``."""
    return _job("markdup", locals())


@_takes_spec("fq2bam")
def fq2bam(
    index: PathLike,
    reads1: PathLike,
    reads2: Optional[PathLike] = None,
    output: Optional[PathLike] = None,
    *,
    threads: Optional[int] = None,
    max_memory: Union[int, str, None] = None,
    max_fan_in: int = 64,
    **spec: Unpack[_spec_types.Fq2bamOptions],
) -> Report:
    """FASTQ to a sorted, duplicate-marked BAM on this machine, as ``sortase fq2bam``: ``index``
    (``-x``, a minimap2 ``.mmi`` or the reference FASTA), ``reads1`` and ``reads2`` of a pair (or
    one file), ``output`` (``-o``, required). ``threads`` (``-@``), ``max_memory`` (default: 768
    MiB per thread plus the index), ``max_fan_in`` (as :func:`sort`'s); the other keywords are
    the command's options, listed below
    (``checksums``: the reads summed as ``samtools import`` makes them records and the primary
    records written; different sums fail the job and leave no output). Reports ``reads``,
    ``fragments``, ``records``, ``duplicate_records``, ``phases``, ``outputs``, ``checksums``, ...
    The Dask version is :func:`sortase.distributed.fq2bam`."""
    if output is None:
        raise ArgumentError("fq2bam needs an output (output=, -o)")
    return _job("fq2bam", locals())


@_takes_spec("bgzip")
def bgzip(
    files: Union[PathLike, Sequence[PathLike]],
    *,
    threads: Optional[int] = None,
    **spec: Unpack[_spec_types.BgzipOptions],
) -> Report:
    """Compresses files to BGZF, as ``sortase bgzip`` / htslib's ``bgzip``: ``FILE`` →
    ``FILE.gz`` (removing ``FILE`` unless ``keep``), or to ``output``. The mode is picked as bgzip
    picks it: ``reindex`` (``-r``), then ``offset`` (``-b``, with ``size``), then ``test``
    (``-t``), then ``decompress`` (``-d``), else compress. ``threads`` (``-@``); the other keywords
    are the command's options, listed below. Reports ``files``, ``uncompressed_bytes``,
    ``outputs``, ``removed``, ``warnings``."""
    files = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    return _job("bgzip", locals())


@_takes_spec("faidx")
def faidx(
    input: PathLike,
    regions: Optional[Sequence[str]] = None,
    *,
    threads: Optional[int] = None,
    **spec: Unpack[_spec_types.FaidxOptions],
) -> Report:
    """Indexes a FASTA/FASTQ (``.fai``, and ``.gzi`` if bgzipped), or writes ``regions`` of it to
    ``output`` (``None``: standard output), as ``samtools faidx``. ``threads`` (``-@``); the other
    keywords are the command's options, listed below (``continue_`` is ``--continue``). Reports
    ``indexed``, ``sequences``, ``regions``, ``outputs``, ``warnings``."""
    return _job("faidx", locals())

def _split_records(text: str) -> List[str]:
    """Whole FASTA records (each from its ``>`` line), or FASTQ records of four lines."""
    if not text:
        return []
    lines = text.splitlines(keepends=True)
    if text.startswith("@"):
        return ["".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]
    records: List[str] = []
    for line in lines:
        if line.startswith(">") or not records:
            records.append(line)
        else:
            records[-1] += line
    return records


def fetch(
    fasta: PathLike,
    names: Sequence[str],
    *,
    sorted: bool = False,
    loc: Optional[PathLike] = None,
    verify: bool = False,
    threads: Optional[int] = None,
) -> List[str]:
    """The whole records named ``names`` of a FASTA/FASTQ (plain or bgzipped), as
    ``sortase fetch -n``: a list of record texts (header line included), in request order
    (``sorted=True``: file order). The ``.loc`` (``loc``) and ``.gzi`` are built if missing.
    FASTQ records are taken as four lines each."""
    import tempfile

    if isinstance(names, str):
        raise TypeError("names must be a list of record names, not a str")
    fd, tmp = tempfile.mkstemp(prefix="sortase-fetch-", suffix=".txt")
    os.close(fd)
    try:
        _report(_sortase.fetch(
            fasta, list(names), tmp, sorted=sorted, loc=loc, verify=verify, threads=threads,
        ))
        with open(tmp, encoding="utf-8", newline="") as f:
            return _split_records(f.read())
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@_takes_spec("snp_pileup")
def snp_pileup(
    vcf: PathLike,
    bams: Sequence[PathLike],
    output: Optional[PathLike] = None,
    *,
    threads: Optional[int] = None,
    **spec: Unpack[_spec_types.SnpPileupOptions],
) -> Union[Report, pa.Table]:
    """FACETS' ``snp-pileup`` of ``bams`` at the SNVs of ``vcf``, as ``sortase snp-pileup``.

    With ``output``: writes the CSV there (``gzip``: compressed) and returns the report
    (``vcf_lines``, ``snvs``, ``snp_lines``, ``pseudo_lines``, ``outputs``, ``warnings``). Without:
    returns the CSV as a ``pyarrow.Table`` (``Chromosome`` as strings). ``threads`` (``-@``); the
    other keywords are the command's options, listed below, with FACETS' defaults. ``bams`` may be
    CRAMs (decoded into temporary indexed BAMs first), with ``reference`` (the FASTA; else
    ``REF_PATH``/``REF_CACHE``)."""
    bams = [os.fspath(b) for b in bams]
    if output is not None:
        return _job("snp_pileup", locals())
    import tempfile

    import pyarrow.csv as pacsv

    tmpdir = tempfile.mkdtemp(prefix="sortase-snp-pileup-")
    output = os.path.join(tmpdir, "pileup.csv")
    spec["gzip"] = False
    try:
        _job("snp_pileup", dict(vcf=vcf, bams=bams, output=output, threads=threads, spec=spec))
        convert = pacsv.ConvertOptions(column_types={"Chromosome": pa.string()})
        return pacsv.read_csv(output, convert_options=convert)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


from . import agd  # noqa: E402 (after the helpers agd uses)
