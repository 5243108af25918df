"""Type stubs of the extension module (crates/py). The public API is in ``sortase/__init__.py``."""

import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

_Path = Union[str, os.PathLike[str]]
_Progress = Optional[Callable[[str, int, int], None]]

__version__: str

class ArrowStream:
    """Record batches exported once through the Arrow PyCapsule interface."""

    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...

def read_bam(
    path: _Path,
    *,
    region: Optional[str] = None,
    columns: Optional[List[str]] = None,
    tags: Union[List[str], Dict[str, Optional[str]], None] = None,
    threads: Optional[int] = None,
    reference: Optional[_Path] = None,
    batch_rows: Optional[int] = None,
    progress: _Progress = None,
    require_flags: Union[int, str, None] = None,
    exclude_flags: Union[int, str, None] = None,
    min_mapq: int = 0,
    expr: Optional[str] = None,
    stream: bool = False,
) -> Tuple[ArrowStream, Optional[str]]: ...
def run_job(
    kind: str,
    spec: str,
    *,
    threads: Optional[int] = None,
    max_memory: Union[int, str, None] = None,
    progress: _Progress = None,
) -> str: ...
def spec_keywords(kind: str) -> str: ...
def spec_schema(kind: str) -> str: ...
def flagstat(path: _Path, *, threads: Optional[int] = None) -> Tuple[str, str]: ...
def idxstats(path: _Path, *, threads: Optional[int] = None) -> str: ...
def fetch(
    fasta: _Path,
    names: List[str],
    output: _Path,
    *,
    sorted: bool = False,
    loc: Optional[_Path] = None,
    verify: bool = False,
    threads: Optional[int] = None,
) -> str: ...
# Jobs as tasks (crates/py/src/tasks.rs): JSON text in and out, for the Dask driver.
TASK_READ_SLACK: int

def task_plan(
    kind: str,
    job: str,
    cut: str = "{}",
    *,
    threads: Optional[int] = None,
    max_memory: Optional[int] = None,
) -> str: ...
def task_stage(plan: str, stage: str, outputs: str = "[]", *, threads: Optional[int] = None) -> str: ...
def task_run(task: str, *, threads: Optional[int] = None, max_memory: Optional[int] = None) -> str: ...
def task_run_remote(task: str, aliases: Dict[str, str], *, threads: Optional[int] = None,
                    max_memory: Optional[int] = None) -> Tuple[str, int]: ...
def task_io(task: str) -> str: ...
def configure_s3(
    *,
    endpoint_url: Optional[str] = None,
    key: Optional[str] = None,
    secret: Optional[str] = None,
    token: Optional[str] = None,
    region: Optional[str] = None,
    anon: bool = False,
    aliases: Optional[Dict[str, str]] = None,
    clear: bool = False,
    keep_aliases: bool = False,
) -> None: ...
def remote_fetched() -> Tuple[int, int]: ...
def task_local_bytes(task: str) -> Tuple[int, int]: ...
def bam_header_end(prefix: bytes, whole: bool = False) -> Optional[int]: ...
def task_layout_reads(plan: str, outputs: str) -> str: ...
def task_finish(plan: str, outputs: str, *, threads: Optional[int] = None) -> str: ...
def task_layout(plan: str, outputs: str, preallocate: bool, *, threads: Optional[int] = None) -> str: ...
def task_place(layout: str) -> str: ...
def task_commit(layout: str) -> str: ...
def task_stage_graph(plan: str) -> str: ...
def task_fallback(plan: str) -> Optional[str]: ...
def task_abort(plan: str) -> None: ...
def flagstat_text(report: str, output_fmt: str = "default") -> str: ...
def snp_pileup_spec(vcf: _Path, output: _Path, bams: List[_Path]) -> str: ...
