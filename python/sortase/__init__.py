"""sortase: samtools-compatible BAM/SAM/CRAM jobs on all cores, and BAM into Apache Arrow.

Every job runs in Rust with the GIL released, on a runtime built for the call (``threads``,
``max_memory``); Ctrl-C cancels it within a second and leaves no temporary or partial files, then
``KeyboardInterrupt`` is raised. Errors raise subclasses of :class:`SortaseError`.

>>> import sortase
>>> report = sortase.sort("in.bam", "sorted.bam", threads=4, max_memory="2G", write_index=True)
>>> table = sortase.read_bam("sorted.bam", region="chr1:1-100000", tags=["NM", "RG"])
>>> import polars as pl; df = pl.from_arrow(table)
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import pyarrow as pa

from . import _sortase
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
    "read_bam",
    "scan_bam",
    "sort",
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


def _report(json_text: str) -> Report:
    import json

    report = Report._from(json.loads(json_text))
    for w in report.get("warnings", []):
        warnings.warn(w, SortaseWarning, stacklevel=3)
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

    def update(_label: str, done: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    update.close = bar.close  # type: ignore[attr-defined]
    return update


def _closing(callback: Optional[Callable[..., None]]) -> None:
    if callback is not None:
        callback.close()  # type: ignore[attr-defined]


def sort(
    input: PathLike,
    output: PathLike,
    *,
    threads: Optional[int] = None,
    max_memory: Union[int, str, None] = None,
    by_name: bool = False,
    by_name_lex: bool = False,
    tag: Optional[str] = None,
    level: Optional[int] = None,
    uncompressed: bool = False,
    write_index: bool = False,
    output_fmt: Optional[str] = None,
    index_format: Optional[str] = None,
    reference: Optional[PathLike] = None,
    temp_prefix: Optional[PathLike] = None,
    no_pg: bool = False,
    max_fan_in: int = 64,
    progress: Optional[bool] = None,
) -> Report:
    """Sorts ``input`` (SAM/BAM/CRAM) into ``output``, as ``sortase sort`` / ``samtools sort``.

    Keywords are the command's long options: ``threads`` (``-@``, default all cores),
    ``max_memory`` (bytes, or ``"768M"``/``"2G"``; default 768 MiB per thread), ``by_name``
    (``-n``), ``by_name_lex`` (``-N``), ``tag`` (``-t``), ``level`` (``-l``), ``uncompressed``
    (``-u``), ``write_index``, ``output_fmt`` (``-O``), ``index_format``, ``reference``,
    ``temp_prefix`` (``-T``), ``no_pg`` (``--no-PG``), ``max_fan_in``. ``progress``: a tqdm bar
    (default: when stderr is a terminal and tqdm is installed).

    Returns a :class:`Report`; the output is byte-identical to the command's with the same options.
    """
    callback = _progress(progress, "sort")
    try:
        text = _sortase.sort(
            input, output, threads=threads, max_memory=max_memory, by_name=by_name,
            by_name_lex=by_name_lex, tag=tag, level=level, uncompressed=uncompressed,
            write_index=write_index, output_fmt=output_fmt, index_format=index_format,
            reference=reference, temp_prefix=temp_prefix, no_pg=no_pg, max_fan_in=max_fan_in,
            progress=callback,
        )
    finally:
        _closing(callback)
    return _report(text)


Tags = Union[Sequence[str], Mapping[str, Optional[str]], None]


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
    """
    callback = _progress(progress, "read_bam")
    try:
        stream, _report_text = _sortase.read_bam(
            path, region=region, columns=None if columns is None else list(columns),
            tags=_tags(tags), threads=threads, reference=reference, batch_rows=batch_rows,
            progress=callback,
        )
    finally:
        _closing(callback)
    return _stream_reader(stream).read_all()


def scan_bam(
    path: PathLike,
    region: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    tags: Tags = None,
    threads: Optional[int] = None,
    *,
    reference: Optional[PathLike] = None,
    batch_rows: Optional[int] = None,
) -> pa.RecordBatchReader:
    """As :func:`read_bam`, but a ``pyarrow.RecordBatchReader`` that decodes ahead in bounded
    memory (a few byte ranges per thread in flight) while you consume it. Errors found while
    streaming are raised by pyarrow (``OSError``/``ArrowInvalid``) with sortase's message."""
    stream = _sortase.scan_bam(
        path, region=region, columns=None if columns is None else list(columns),
        tags=_tags(tags), threads=threads, reference=reference, batch_rows=batch_rows,
    )
    return _stream_reader(stream)


def _tags(tags: Tags) -> Union[List[str], Dict[str, Optional[str]], None]:
    if tags is None or isinstance(tags, (str, bytes)):
        return tags  # type: ignore[return-value]  # a str is refused with a TypeError
    if isinstance(tags, Mapping):
        return dict(tags)
    return list(tags)
