"""``python/sortase/_sortase.pyi`` checked against the extension module it describes: every function
the module exports has a stub and every stub a function, with the same parameter names, kinds
(positional, keyword-only) and defaults as the function's ``__text_signature__`` (what PyO3 writes
from ``#[pyo3(signature = ...)]``). A new option written in Rust and not in the stub fails here."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

_sortase = pytest.importorskip("sortase._sortase")

PYI = Path(__file__).resolve().parents[1] / "sortase" / "_sortase.pyi"

#: (name, kind, default) per parameter; kind "pos" or "kw"; default a value or REQUIRED.
Params = List[Tuple[str, str, object]]

#: The default of a parameter that has none.
REQUIRED = "<required>"


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def stub_signatures(text: str) -> Dict[str, Params]:
    """The module-level functions of a .pyi: their parameters, kinds and defaults."""
    out: Dict[str, Params] = {}
    for node in ast.parse(text).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        a = node.args
        positional = a.posonlyargs + a.args
        defaults = [REQUIRED] * (len(positional) - len(a.defaults)) + [_literal(d) for d in a.defaults]
        params: Params = [(p.arg, "pos", d) for p, d in zip(positional, defaults)]
        params += [(p.arg, "kw", REQUIRED if d is None else _literal(d))
                   for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        out[node.name] = params
    return out


def module_signatures(module: object) -> Dict[str, Params]:
    """The functions of the extension module, from their ``__text_signature__``."""
    out: Dict[str, Params] = {}
    for name, f in vars(module).items():
        if name.startswith("_") or not inspect.isbuiltin(f):
            continue
        sig = inspect.signature(f)  # parses __text_signature__; raises if PyO3 wrote none
        params: Params = []
        for p in sig.parameters.values():
            kind = "kw" if p.kind is inspect.Parameter.KEYWORD_ONLY else "pos"
            default = REQUIRED if p.default is inspect.Parameter.empty else p.default
            params.append((p.name, kind, default))
        out[name] = params
    return out


def drift(stubs: Dict[str, Params], functions: Dict[str, Params]) -> List[str]:
    """Every difference, one line each (empty: the stub matches the module)."""
    problems = [f"{n}: in the module, not in the .pyi" for n in sorted(set(functions) - set(stubs))]
    problems += [f"{n}: in the .pyi, not in the module" for n in sorted(set(stubs) - set(functions))]
    for name in sorted(set(stubs) & set(functions)):
        if stubs[name] != functions[name]:
            problems.append(f"{name}: .pyi {stubs[name]} != module {functions[name]}")
    return problems


def test_pyi_matches_the_extension_module() -> None:
    problems = drift(stub_signatures(PYI.read_text()), module_signatures(_sortase))
    assert not problems, "\n".join(problems)


def test_a_planted_drift_is_found() -> None:
    """The check can fail: a renamed parameter, a changed default, a missing and an extra
    function in the stub are each reported."""
    text = PYI.read_text()
    functions = module_signatures(_sortase)
    planted = {
        "renamed": text.replace("def task_run(task: str,", "def task_run(job: str,"),
        "default": text.replace('output_fmt: str = "default"', 'output_fmt: str = "json"'),
        "missing": text.replace("def task_io(task: str) -> str: ...", ""),
        "extra": text + "\ndef no_such_function(x: int) -> None: ...\n",
    }
    for what, t in planted.items():
        assert t != text, what
        problems = drift(stub_signatures(t), functions)
        assert len(problems) == 1, (what, problems)
