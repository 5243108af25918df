"""Type stubs of the extension module (crates/py). The public API is in ``sortase/__init__.py``."""

import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

_Path = Union[str, os.PathLike[str]]
_Progress = Optional[Callable[[str, int, int], None]]

__version__: str

class ArrowStream:
    """Record batches exported once through the Arrow PyCapsule interface."""

    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...

def sort(
    input: _Path,
    output: _Path,
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
    reference: Optional[_Path] = None,
    temp_prefix: Optional[_Path] = None,
    no_pg: bool = False,
    max_fan_in: int = 64,
    progress: _Progress = None,
) -> str: ...
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
) -> Tuple[ArrowStream, str]: ...
def scan_bam(
    path: _Path,
    *,
    region: Optional[str] = None,
    columns: Optional[List[str]] = None,
    tags: Union[List[str], Dict[str, Optional[str]], None] = None,
    threads: Optional[int] = None,
    reference: Optional[_Path] = None,
    batch_rows: Optional[int] = None,
) -> ArrowStream: ...
