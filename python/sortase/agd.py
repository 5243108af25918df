"""AGD datasets (issue 19): a directory of ``manifest.json`` and one Parquet file per column group
per chunk of records, ``DIR/<group>/<chunk:06>.parquet``.

:func:`open` reads the manifest and returns a :class:`Dataset` whose groups and columns read as
``pyarrow`` tables, straight from the Parquet files (no sortase code runs to read them);
:func:`import_`, :func:`export`, :func:`flagstat` and :func:`idxstats` run
``sortase agd import|export|flagstat|idxstats``.

>>> import sortase.agd
>>> report = sortase.agd.import_(["R1.fq.gz", "R2.fq.gz"], "ds", threads=2)   # or "in.bam"
>>> ds = sortase.agd.open("ds")
>>> ds.records, len(ds.chunks), ds.sort_order
>>> ds.read(["qname", "flag", "mapq"]).to_pandas()            # columns of any groups
>>> ds.read_group("bases", chunks=[0]).column("seq")          # one group, some chunks
>>> sortase.agd.export("ds", "out.bam")                       # the records as imported

Groups: ``names`` (``qname``), ``bases`` (``seq``), ``qual`` (``qual``), ``results`` (``flag``,
``ref_id``, ``pos``, ``mapq``, ``bin``, ``cigar``, ``next_ref_id``, ``next_pos``, ``tlen``,
``tags``, ``raw_record``); the manifest lists them.
"""

from __future__ import annotations

import builtins
import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

import pyarrow as pa

from . import Report, _job, _takes_spec
from ._errors import ArgumentError, FormatError, InputError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from . import _spec_types

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["Dataset", "export", "flagstat", "idxstats", "import_", "open"]

#: The manifest's file name inside a dataset.
MANIFEST_FILE = "manifest.json"


class Dataset:
    """An AGD dataset as its manifest describes it.

    Attributes: ``path``, ``manifest`` (the parsed JSON), ``records``, ``chunks`` (dicts with
    ``index``, ``first``, ``last``, ``records``), ``references`` (dicts with ``name``, ``length``),
    ``header`` (the SAM header text), ``sort_order``, ``groups`` (group name → its columns).
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        manifest_path = os.path.join(self.path, MANIFEST_FILE)
        try:
            with builtins.open(manifest_path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise InputError(f"{manifest_path}: {e.strerror or e}") from None
        try:
            m = json.loads(text)
        except ValueError as e:
            raise FormatError(f"{manifest_path}: not JSON: {e}") from None
        if m.get("format") != "sortase-agd":
            raise FormatError(f"{manifest_path}: not a sortase AGD manifest")
        self.manifest: Dict[str, Any] = m
        self.records: int = m["records"]
        self.chunks: List[Dict[str, int]] = m["chunks"]
        self.references: List[Dict[str, Any]] = m["references"]
        self.header: str = m["header"]
        self.sort_order: str = m["sort_order"]
        self.groups: Dict[str, List[str]] = {g["name"]: list(g["columns"]) for g in m["groups"]}
        if sum(c["records"] for c in self.chunks) != self.records:
            raise FormatError(
                f"{manifest_path}: chunks hold {sum(c['records'] for c in self.chunks)} records, "
                f"the manifest says {self.records}"
            )

    def __repr__(self) -> str:
        return (
            f"Dataset({self.path!r}, records={self.records}, chunks={len(self.chunks)}, "
            f"groups={list(self.groups)})"
        )

    @property
    def columns(self) -> List[str]:
        """Every column of every group, in group order."""
        return [c for cols in self.groups.values() for c in cols]

    def chunk_path(self, group: str, chunk: int) -> str:
        """The Parquet file of ``group`` in chunk ``chunk``."""
        return os.path.join(self.path, group, f"{chunk:06}.parquet")

    def _chunks(self, chunks: Optional[Sequence[int]]) -> List[Dict[str, int]]:
        if chunks is None:
            return self.chunks
        out = []
        for i in chunks:
            if not 0 <= i < len(self.chunks):
                raise IndexError(f"{self.path}: chunk {i} out of range (0..{len(self.chunks)})")
            out.append(self.chunks[i])
        return out

    def read_group(
        self,
        group: str,
        columns: Optional[Sequence[str]] = None,
        chunks: Optional[Sequence[int]] = None,
    ) -> pa.Table:
        """Columns ``columns`` (default all) of ``group`` over ``chunks`` (indices; default all), in
        record order. Each file must exist and hold the rows the manifest says, else
        :class:`InputError` / :class:`FormatError` naming the file."""
        import pyarrow.parquet as pq

        if group not in self.groups:
            raise KeyError(f"{self.path}: no group {group!r} (groups: {list(self.groups)})")
        wanted = list(columns) if columns is not None else self.groups[group]
        for c in wanted:
            if c not in self.groups[group]:
                raise KeyError(f"{self.path}: group {group!r} has no column {c!r}")
        tables = []
        for chunk in self._chunks(chunks):
            path = self.chunk_path(group, chunk["index"])
            if not os.path.exists(path):
                raise InputError(f"{path}: missing (the manifest lists chunk {chunk['index']})")
            try:
                table = pq.read_table(path, columns=wanted)
            except (OSError, pa.ArrowException) as e:
                raise FormatError(f"{path}: {e}") from None
            if table.num_rows != chunk["records"]:
                raise FormatError(
                    f"{path}: holds {table.num_rows} records, the manifest says {chunk['records']}"
                )
            tables.append(table)
        if not tables:
            # A dataset of no records has no chunk files to take a schema from.
            return pa.table({c: pa.array([], pa.null()) for c in wanted})
        return pa.concat_tables(tables)

    def read(
        self,
        columns: Optional[Sequence[str]] = None,
        chunks: Optional[Sequence[int]] = None,
    ) -> pa.Table:
        """Columns ``columns`` (names from any groups; default every column) over ``chunks``, side by
        side in record order (the groups' files of one chunk hold the same records)."""
        wanted = list(columns) if columns is not None else self.columns
        owner = {c: g for g, cols in self.groups.items() for c in cols}
        for c in wanted:
            if c not in owner:
                raise KeyError(f"{self.path}: no column {c!r} (columns: {self.columns})")
        by_group: Dict[str, List[str]] = {}
        for c in wanted:
            by_group.setdefault(owner[c], []).append(c)
        parts = {g: self.read_group(g, cols, chunks) for g, cols in by_group.items()}
        return pa.table({c: parts[owner[c]].column(c) for c in wanted})


def open(path: PathLike) -> Dataset:  # noqa: A001 (the module's verb, as ``gzip.open``)
    """Opens the AGD dataset directory ``path``: its manifest, read and checked."""
    return Dataset(path)


@_takes_spec("agd_import")
def import_(
    input: Union[PathLike, Sequence[PathLike], None],
    output: PathLike,
    *,
    threads: Optional[int] = None,
    progress: Optional[bool] = None,
    **spec: Unpack[_spec_types.AgdImportOptions],
) -> Report:
    """``sortase agd import``: a SAM/BAM/CRAM or FASTQ file, or ``[R1, R2]`` FASTQ files, into the new
    dataset directory ``output``. FASTQ is read as ``samtools import`` reads it; ``unpaired``,
    ``read1``, ``read2``, ``interleaved``, ``rg``, ``rg_line`` are its ``-0 -1 -2 -s -R -r`` (then
    ``input`` is ``None``). ``checksums`` (``--checksums``): the records read and those the chunks'
    encoded columns decode to are summed (``samtools checksum -F 0 -P -C -M``); different sums fail
    the import and leave no dataset. ``threads`` (``-@``); ``progress``: a bar on stderr (default:
    when stderr is a terminal). Returns the report (``records``, ``chunks``, ``bytes``,
    ``checksums``, ...)."""
    if input is None:
        if not any(spec.get(k) for k in ("unpaired", "read1", "read2", "interleaved")):
            raise ArgumentError("agd import: give input (SAM/BAM/CRAM/FASTQ, or [R1, R2]) or FASTQ "
                                "files with unpaired/read1/read2/interleaved")
        inputs: List[PathLike] = []
    elif isinstance(input, (str, os.PathLike)):
        inputs = [input]
    else:
        inputs = list(input)
    return _job("agd_import", {"input": inputs, "output": output, "threads": threads,
                               "progress": progress, "spec": spec})


@_takes_spec("agd_export")
def export(
    input: PathLike,
    output: Optional[PathLike] = None,
    *,
    threads: Optional[int] = None,
    progress: Optional[bool] = None,
    **spec: Unpack[_spec_types.AgdExportOptions],
) -> Report:
    """``sortase agd export``: dataset ``input`` back into BAM/SAM/CRAM (record for record as
    imported) or FASTQ (``output_fmt="fastq"``, as samtools fastq), format from ``output_fmt`` or
    the extension of ``output``; ``write_index`` indexes BAM or CRAM output as ``samtools view
    --write-index`` does. ``checksums`` (``--checksums``, BAM/SAM/CRAM only): the records decoded
    from the chunks and those written are summed; different sums fail the export and leave no
    output (the report's ``checksums``). ``threads`` (``-@``); ``progress`` as :func:`import_`."""
    return _job("agd_export", locals())


def flagstat(input: PathLike, *, threads: Optional[int] = None) -> Dict[str, Any]:
    """``sortase agd flagstat``: samtools flagstat ``-O json``'s dict for the dataset, counted on the
    ``results`` columns alone (:func:`sortase.flagstat` of the dataset directory)."""
    from . import flagstat as flagstat_

    return flagstat_(os.fspath(input), threads=threads)


def idxstats(input: PathLike, *, threads: Optional[int] = None) -> pa.Table:
    """``sortase agd idxstats``: per-reference counts as :func:`sortase.idxstats` returns them for
    the BAM ``sortase agd export`` writes (columns ``name``, ``length``, ``mapped``,
    ``unmapped``; the last row ``*``), counted on the ``ref_id`` and ``flag`` columns alone
    (:func:`sortase.idxstats` of the dataset directory). An unsorted dataset raises as samtools
    idxstats does ("file is not position sorted")."""
    from . import idxstats as idxstats_

    return idxstats_(os.fspath(input), threads=threads)
