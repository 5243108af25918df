"""``sortase.lazy_bam``: a ``polars.LazyFrame`` over ``sortase.scan_bam`` (polars' IO plugins).

polars hands the source the columns a query uses and its row filter (a ``polars.Expr``). The filter
is read from its serialized tree: the comparisons sortase can check on raw records become an htslib
filter expression (``expr=``, the language of ``samtools view -e``), and ``rname == NAME`` with a
lower bound on ``pos`` becomes a region when the file has an index. What is pushed is a superset of
the rows the filter keeps (a part that cannot be translated is left out of an ``&``, never out of
an ``|`` or ``~``), and polars' filter is applied to every batch as well, so the pushed query's
frame equals the eager one filtered in polars.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pyarrow as pa

# Fixed columns the filter expression can read, and htslib's name of each (the same values:
# `pos`/`pnext` are 1-based in both, `rname`/`rnext` are the reference names).
_NUMBERS = {"flag", "mapq", "pos", "pnext", "tlen"}
_STRINGS = {"rname", "rnext", "qname"}
# Casts polars inserts when a column is compared with a literal of a wider type (widening only:
# an overflowing cast to a narrower type would change the values).
_WIDER = {
    "flag": {"UInt16", "UInt32", "UInt64", "Int32", "Int64", "Float32", "Float64"},
    "mapq": {"UInt8", "UInt16", "UInt32", "UInt64", "Int16", "Int32", "Int64", "Float32",
             "Float64"},
    "tlen": {"Int32", "Int64", "Float64"},
    "pos": {"Int64", "Float64"},
    "pnext": {"Int64", "Float64"},
}
_COMPARE = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_FLIP = {"Eq": "Eq", "NotEq": "NotEq", "Lt": "Gt", "LtEq": "GtEq", "Gt": "Lt", "GtEq": "LtEq"}
_BITWISE = {"And": "&", "Or": "|", "Xor": "^"}
_INTEGER_TYPES = {"Int", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"}
_FLOAT_TYPES = {"Float", "Float32", "Float64"}
# Largest integer a double (htslib's number) holds exactly.
_EXACT = 2**53

# A value: ("num" | "str", htslib text) plus, for a literal, the Python value.
Value = Tuple[str, str, Any]


def _literal(node: Any) -> Optional[Value]:
    """A number or string literal (``{"Dyn": {"Int": 3}}``, ``{"Scalar": {"UInt16": 4}}``)."""
    if not isinstance(node, dict) or len(node) != 1:
        return None
    (kind, inner), = node.items()
    if kind not in ("Dyn", "Scalar") or not isinstance(inner, dict) or len(inner) != 1:
        return None
    (dtype, v), = inner.items()
    if dtype in _INTEGER_TYPES and isinstance(v, int) and not isinstance(v, bool):
        if abs(v) > _EXACT:
            return None
        return ("num", str(v), v)
    if dtype in _FLOAT_TYPES and isinstance(v, (int, float)) and not isinstance(v, bool):
        if not math.isfinite(v):
            return None
        return ("num", repr(float(v)), float(v))
    if dtype == "String" and isinstance(v, str):
        if any(c in v for c in '"\\') or not v.isprintable():
            return None
        return ("str", '"%s"' % v, v)
    return None


def _value(node: Any) -> Optional[Value]:
    """A column, literal, widening cast of a column or bitwise operation of integers."""
    if not isinstance(node, dict) or len(node) != 1:
        return None
    (kind, inner), = node.items()
    if kind == "Column" and isinstance(inner, str):
        if inner in _NUMBERS:
            return ("num", inner, None)
        if inner in _STRINGS:
            return ("str", inner, None)
        return None
    if kind == "Literal":
        return _literal(inner)
    if kind == "Cast" and isinstance(inner, dict):
        col = inner.get("expr", {}).get("Column") if isinstance(inner.get("expr"), dict) else None
        dtype = inner.get("dtype", {})
        target = dtype.get("Literal") if isinstance(dtype, dict) else None
        if col in _WIDER and target in _WIDER[col]:
            return ("num", col, None)
        return None
    if kind == "BinaryExpr" and isinstance(inner, dict) and inner.get("op") in _BITWISE:
        left, right = _value(inner.get("left")), _value(inner.get("right"))
        if left and right and left[0] == right[0] == "num":
            ints = [v for v in (left, right) if v[2] is not None]
            if all(isinstance(v[2], int) and v[2] >= 0 for v in ints):
                return ("num", "(%s %s %s)" % (left[1], _BITWISE[inner["op"]], right[1]), None)
    return None


def _condition(node: Any) -> Optional[Tuple[str, bool]]:
    """The htslib text of a boolean expression and whether it is exact (``False``: it keeps a
    superset of the rows); ``None``: nothing can be said."""
    if not isinstance(node, dict) or len(node) != 1:
        return None
    (kind, inner), = node.items()
    if kind == "BinaryExpr" and isinstance(inner, dict):
        op = inner.get("op")
        if op in _COMPARE:
            left, right = _value(inner.get("left")), _value(inner.get("right"))
            if not left or not right or left[0] != right[0]:
                return None
            if left[0] == "str" and op not in ("Eq", "NotEq"):
                return None
            if left[2] is not None and right[2] is not None:
                return None  # two literals: polars folds these
            return ("(%s %s %s)" % (left[1], _COMPARE[op], right[1]), True)
        if op in ("And", "LogicalAnd"):
            a, b = _condition(inner.get("left")), _condition(inner.get("right"))
            if a and b:
                return ("(%s && %s)" % (a[0], b[0]), a[1] and b[1])
            kept = a or b
            return (kept[0], False) if kept else None
        if op in ("Or", "LogicalOr"):
            a, b = _condition(inner.get("left")), _condition(inner.get("right"))
            if a and b:
                return ("(%s || %s)" % (a[0], b[0]), a[1] and b[1])
        return None
    if kind == "Function" and isinstance(inner, dict):
        function, args = inner.get("function"), inner.get("input") or []
        boolean = function.get("Boolean") if isinstance(function, dict) else None
        if boolean == "Not" and len(args) == 1:
            c = _condition(args[0])
            # The negation of a superset is a subset: only an exact condition can be negated.
            if c and c[1]:
                return ("!%s" % c[0], True)
            return None
        if isinstance(boolean, dict) and "IsBetween" in boolean and len(args) == 3:
            x, lo, hi = (_value(a) for a in args)
            if not (x and lo and hi) or {x[0], lo[0], hi[0]} != {"num"}:
                return None
            closed = (boolean["IsBetween"] or {}).get("closed", "Both")
            low = ">=" if closed in ("Both", "Left") else ">"
            high = "<=" if closed in ("Both", "Right") else "<"
            return ("(%s %s %s && %s %s %s)" % (x[1], low, lo[1], x[1], high, hi[1]), True)
    return None


def _conjuncts(node: Any) -> Iterator[Any]:
    """The terms of a chain of ``&``."""
    if isinstance(node, dict) and isinstance(node.get("BinaryExpr"), dict):
        b = node["BinaryExpr"]
        if b.get("op") in ("And", "LogicalAnd") and _condition(node) is not None:
            yield from _conjuncts(b.get("left"))
            yield from _conjuncts(b.get("right"))
            return
    yield node


def _bounds(tree: Any) -> Tuple[Optional[str], Optional[int], Optional[int]]:
    """From the top-level ``&`` terms: ``rname == NAME`` and the integer bounds of ``pos``
    (1-based, inclusive; ``lo`` is at least 1, ``None`` when not bounded)."""
    name: Optional[str] = None
    lo: Optional[int] = None
    hi: Optional[int] = None

    def low(v: int) -> Optional[int]:
        return max(lo or 0, v) if v >= 1 else lo

    for term in _conjuncts(tree):
        b = term.get("BinaryExpr") if isinstance(term, dict) else None
        between = None
        if isinstance(term, dict) and isinstance(term.get("Function"), dict):
            f = term["Function"]
            boolean = (f.get("function") or {}).get("Boolean") if isinstance(
                f.get("function"), dict) else None
            if isinstance(boolean, dict) and "IsBetween" in boolean:
                between = (f.get("input") or [], (boolean["IsBetween"] or {}).get("closed"))
        if between:
            args, closed = between
            if len(args) == 3 and args[0] == {"Column": "pos"}:
                a, z = _value(args[1]), _value(args[2])
                if a and z and isinstance(a[2], int) and isinstance(z[2], int):
                    lo = low(a[2] if closed in ("Both", "Left") else a[2] + 1)
                    top = z[2] if closed in ("Both", "Right") else z[2] - 1
                    hi = top if hi is None else min(hi, top)
            continue
        if not isinstance(b, dict) or b.get("op") not in _COMPARE:
            continue
        op, left, right = b["op"], b.get("left"), b.get("right")
        if _value(left) and _value(left)[2] is not None:
            op, left, right = _FLIP[op], right, left
        lit = _value(right)
        if not lit or lit[2] is None:
            continue
        if left == {"Column": "rname"} and op == "Eq" and lit[0] == "str":
            name = lit[2]
        elif left == {"Column": "pos"} and isinstance(lit[2], int):
            v = lit[2]
            if op in ("GtEq", "Gt"):
                lo = low(v if op == "GtEq" else v + 1)
            elif op in ("LtEq", "Lt"):
                top = v if op == "LtEq" else v - 1
                hi = top if hi is None else min(hi, top)
            elif op == "Eq":
                lo, hi = low(v), v if hi is None else min(hi, v)
    return name, lo, hi


def pushdown(predicate: Any, names: Optional[List[str]]) -> Tuple[Optional[str], Optional[str]]:
    """The region (or ``None``) and filter expression (or ``None``) that keep a superset of the
    rows ``predicate`` keeps; ``names``: the file's reference names (``None``: no region)."""
    if predicate is None:
        return None, None
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # a polars without JSON serialization: nothing is pushed
        return None, None
    c = _condition(tree)
    text = c[0] if c else None
    region = None
    if names is not None:
        name, lo, hi = _bounds(tree)
        # A region's records overlap it; every record with lo <= pos <= hi on NAME does. A lower
        # bound is needed: a record on NAME with pos 0 (unset) is in no region.
        if name is not None and name in names and ":" not in name and lo is not None:
            if hi is None:
                region = "%s:%d" % (name, lo)
            elif hi >= lo:
                region = "%s:%d-%d" % (name, lo, hi)
    return region, text


def _has_index(path: str) -> bool:
    """Whether ``path`` has the index a region read looks for (as sortase_bam's ``find_index``;
    ``.crai`` for CRAM)."""
    if path.endswith(".cram"):
        return os.path.exists(path + ".crai")
    if path.endswith(".sam") or path == "-":
        return False
    candidates = [path + ".bai", path + ".csi"]
    if path.endswith(".bam"):
        candidates.append(path[: -len(".bam")] + ".bai")
    return any(os.path.exists(c) for c in candidates)


def _tag_kind(dtype: pa.DataType) -> str:
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return "B:f" if pa.types.is_floating(dtype.value_type) else "B:i"
    if pa.types.is_integer(dtype):
        return "i"
    if pa.types.is_floating(dtype):
        return "f"
    return "Z"


def lazy_bam(path: Any, *, region: Optional[str], tags: Any, threads: Optional[int],
             reference: Any, require_flags: Any, exclude_flags: Any, min_mapq: int,
             expr: Optional[str], batch_rows: Optional[int]) -> Any:
    try:
        import polars as pl
        from polars.io.plugins import register_io_source
    except ImportError:
        raise ImportError(
            "sortase.lazy_bam needs polars (pip install polars); sortase.read_bam and "
            "sortase.scan_bam return pyarrow tables and readers without it") from None
    import sortase

    path = os.fspath(path)
    filters = dict(require_flags=require_flags, exclude_flags=exclude_flags, min_mapq=min_mapq)
    # The schema now, and the tags' types fixed: a pushed region must not sample other types. The
    # first batch's `rname` dictionary is the header's reference names.
    probe = sortase.scan_bam(path, region, tags=tags, threads=1, reference=reference,
                             batch_rows=16, expr=expr, **filters)
    schema = probe.schema
    names: Optional[List[str]] = None
    try:
        first = probe.read_next_batch()
        names = [str(n) for n in first.column(schema.get_field_index("rname")).dictionary]
    except StopIteration:
        pass
    finally:
        probe.close()
    fixed = list(sortase.COLUMNS)
    tag_kinds: Dict[str, str] = {
        f.name: _tag_kind(f.type) for f in schema if f.name not in fixed}
    frame_schema = pl.from_arrow(schema.empty_table()).schema
    indexed = region is None and names is not None and _has_index(path)

    def source(with_columns: Optional[List[str]], predicate: Any, n_rows: Optional[int],
               batch_size: Optional[int]) -> Iterator[Any]:
        wanted = list(with_columns) if with_columns is not None else list(frame_schema.names())
        needed = set(wanted)
        if predicate is not None:
            needed.update(predicate.meta.root_names())
        columns = [c for c in fixed if c in needed]
        selected = {t: k for t, k in tag_kinds.items() if t in needed}
        if not columns and not selected:
            columns = ["flag"]  # rows only (a count): the cheapest column, dropped below
        pushed_region, pushed = pushdown(predicate, names if indexed else None)
        text = " && ".join("(%s)" % e for e in (expr, pushed) if e) or None
        reader = sortase.scan_bam(path, region or pushed_region, columns=columns,
                                  tags=selected or None, threads=threads, reference=reference,
                                  batch_rows=batch_rows, expr=text, **filters)
        left = n_rows
        try:
            for batch in reader:
                df = pl.from_arrow(batch)
                if predicate is not None:
                    df = df.filter(predicate)
                df = df.select(wanted)
                if left is not None:
                    df = df.head(left)
                    left -= df.height
                if df.height:
                    yield df
                if left is not None and left <= 0:
                    break
        finally:
            reader.close()

    return register_io_source(
        source, schema=frame_schema, explain_name="sortase",
        explain_detail="read_bam %s" % os.path.basename(path))
