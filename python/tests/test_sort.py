"""`sortase.sort`: output bytes equal the CLI's, the report, errors, and Ctrl-C."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import List

import pyarrow as pa
import pytest

import sortase
from conftest import expected_rows


def unsorted_sam(path: Path, n: int, seed: int = 5) -> Path:
    rng = random.Random(seed)
    lines = ["@HD\tVN:1.6", "@SQ\tSN:chr1\tLN:1000000", "@SQ\tSN:chr2\tLN:1000000",
             "@RG\tID:a", "@RG\tID:b"]
    for i in range(n):
        ref = rng.choice(["chr1", "chr2", "*"])
        pos = 0 if ref == "*" else rng.randrange(1, 999_000)
        flag = 4 if ref == "*" else rng.choice([0, 16, 99, 147])
        cigar = "*" if ref == "*" else "50M"
        seq = "".join(rng.choice("ACGT") for _ in range(50))
        lines.append(f"r{rng.randrange(n)}\t{flag}\t{ref}\t{pos}\t{30 if pos else 0}\t{cigar}"
                     f"\t*\t0\t0\t{seq}\t{'I' * 50}\tRG:Z:{rng.choice('ab')}")
    path.write_text("\n".join(lines) + "\n")
    return path


def cli_sort(binary: Path, args: List[str]) -> None:
    subprocess.run([str(binary), "sort", *args], check=True, capture_output=True)


@pytest.mark.parametrize(
    "options, cli_flags",
    [
        ({}, []),
        ({"by_name": True}, ["-n"]),
        ({"by_name_lex": True}, ["-N"]),
        ({"tag": "RG"}, ["-t", "RG"]),
        ({"level": 1}, ["-l", "1"]),
        ({"uncompressed": True}, ["-u"]),
        ({"output_fmt": "sam"}, ["-O", "sam"]),
        ({"max_memory": "1M", "threads": 2}, ["--max-memory", "1M", "-@", "2"]),
    ],
)
def test_output_bytes_equal_the_cli(tmp_path: Path, sortase_bin: Path, options: dict,
                                    cli_flags: List[str]) -> None:
    src = unsorted_sam(tmp_path / "in.sam", 20_000)
    ours, theirs = tmp_path / "py.out", tmp_path / "cli.out"
    threads = options.pop("threads", 1)
    report = sortase.sort(src, ours, no_pg=True, threads=threads, **options)
    flags = cli_flags if "-@" in cli_flags else [*cli_flags, "-@", "1"]
    cli_sort(sortase_bin, ["--no-PG", *flags, "-o", str(theirs), str(src)])
    assert ours.read_bytes() == theirs.read_bytes()
    assert report.records == 20_000
    assert report.outputs == [str(ours)]
    assert [p.name for p in report.phases][0] == "read"
    assert sorted(os.listdir(tmp_path)) == ["cli.out", "in.sam", "py.out"]


def test_template_coordinate_equals_the_cli(tmp_path: Path, sortase_bin: Path) -> None:
    plain = unsorted_sam(tmp_path / "plain.sam", 5_000)
    src = tmp_path / "in.sam"  # paired records need their mate's CIGAR (MC) in this order
    src.write_text(plain.read_text().replace("\tRG:Z:", "\tMC:Z:50M\tRG:Z:"))
    ours, theirs = tmp_path / "py.bam", tmp_path / "cli.bam"
    report = sortase.sort(src, ours, no_pg=True, threads=2, template_coordinate=True)
    cli_sort(sortase_bin, ["--template-coordinate", "--no-PG", "-@", "2", "-o", str(theirs),
                           str(src)])
    assert report.records == 5_000
    assert ours.read_bytes() == theirs.read_bytes()
    with pytest.raises(Exception, match="no MC tag"):
        sortase.sort(plain, tmp_path / "bad.bam", template_coordinate=True)
    assert not (tmp_path / "bad.bam").exists()


def test_write_index_and_report(tmp_path: Path, sortase_bin: Path) -> None:
    src = unsorted_sam(tmp_path / "in.sam", 5_000)
    report = sortase.sort(str(src), tmp_path / "py.bam", write_index=True, no_pg=True,
                          index_format="bai", threads=2)
    cli_sort(sortase_bin, ["--no-PG", "--write-index", "--index-format", "bai", "-@", "2",
                           "-o", str(tmp_path / "cli.bam"), str(src)])
    assert (tmp_path / "py.bam").read_bytes() == (tmp_path / "cli.bam").read_bytes()
    assert (tmp_path / "py.bam.bai").read_bytes() == (tmp_path / "cli.bam.bai").read_bytes()
    assert report.outputs == [str(tmp_path / "py.bam"), str(tmp_path / "py.bam.bai")]
    assert report["temp_bytes"] == report.temp_bytes >= 0
    rows = list(expected_rows(tmp_path / "py.bam", columns=["qname"]))
    assert len(rows) == 5_000


def test_pg_line_and_warnings(tmp_path: Path) -> None:
    src = unsorted_sam(tmp_path / "in.sam", 100)
    sortase.sort(src, tmp_path / "o.bam")
    header = sortase.read_bam(tmp_path / "o.bam", columns=[])  # readable
    assert header.num_rows == 100
    with pytest.warns(sortase.SortaseWarning, match="Ignoring --write-index"):
        sortase.sort(src, tmp_path / "n.bam", by_name=True, write_index=True)


def test_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.bam"
    with pytest.raises(sortase.InputError, match="missing.bam") as e:
        sortase.sort(missing, tmp_path / "o.bam")
    assert isinstance(e.value, OSError)
    with pytest.raises(sortase.InputError, match="missing.bam"):
        sortase.read_bam(missing)
    with pytest.raises(sortase.InputError, match="missing.bam"):
        sortase.scan_bam(missing)
    assert not (tmp_path / "o.bam").exists()


def test_truncated_bam_is_a_format_error(tmp_path: Path, large_bam: Path) -> None:
    data = large_bam.read_bytes()
    cut = tmp_path / "cut.bam"
    cut.write_bytes(data[: len(data) * 2 // 3])
    for threads in (1, 3):
        with pytest.raises(sortase.FormatError, match="cut.bam"):
            sortase.read_bam(cut, threads=threads)
    with pytest.raises(sortase.FormatError, match="cut.bam"):
        sortase.sort(cut, tmp_path / "o.bam")
    assert sorted(os.listdir(tmp_path)) == ["cut.bam"]
    # Found while streaming: raised by pyarrow, with sortase's message.
    reader = sortase.scan_bam(cut)
    with pytest.raises(pa.ArrowInvalid, match="cut.bam: truncated BGZF block"):
        reader.read_all()


def test_wrong_arguments(tmp_path: Path, large_bam: Path) -> None:
    with pytest.raises(TypeError):
        sortase.read_bam(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sortase.read_bam(large_bam, threads="4")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sortase.read_bam(large_bam, tags="NM")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sortase.sort(large_bam, tmp_path / "o.bam", level="fast")  # type: ignore[arg-type]
    with pytest.raises(sortase.ArgumentError, match="no column \"nope\""):
        sortase.read_bam(large_bam, columns=["qname", "nope"])
    with pytest.raises(sortase.ArgumentError, match="two-character"):
        sortase.read_bam(large_bam, tags=["NMX"])
    with pytest.raises(sortase.ArgumentError):
        sortase.read_bam(large_bam, tags={"NM": "q"})
    with pytest.raises(sortase.ArgumentError, match="chrZ"):
        sortase.read_bam(large_bam, region="chrZ:1-100")
    with pytest.raises(sortase.ArgumentError, match="threads"):
        sortase.read_bam(large_bam, threads=0)
    with pytest.raises(sortase.ArgumentError, match="max_memory"):
        sortase.sort(large_bam, tmp_path / "o.bam", max_memory="lots")
    with pytest.raises(ValueError):  # ArgumentError is a ValueError
        sortase.sort(large_bam, tmp_path / "o.bam", tag="RGX")
    sam = unsorted_sam(tmp_path / "in.sam", 10)
    with pytest.raises(sortase.ArgumentError, match="region"):
        sortase.read_bam(sam, region="chr1")
    noindex = tmp_path / "noindex.bam"
    noindex.write_bytes(large_bam.read_bytes())
    with pytest.raises(sortase.SortaseError, match="index"):
        sortase.read_bam(noindex, region="chr1")
    assert sorted(os.listdir(tmp_path)) == ["in.sam", "noindex.bam"]


def big_sam_bytes(megabytes: int) -> bytes:
    """About `megabytes` MB of SAM (random positions, 100-base reads), made fast."""
    rng = random.Random(1)
    seq, qual = "ACGT" * 25, "I" * 100
    n = megabytes * 1_000_000 // 180
    lines = ["@SQ\tSN:chr1\tLN:100000000\n"]
    lines += [f"q{i}\t0\tchr1\t{rng.randrange(1, 99_000_000)}\t60\t100M\t*\t0\t0\t{seq}\t{qual}\n"
              for i in range(n)]
    return "".join(lines).encode()


def test_keyboard_interrupt_cancels_and_leaves_no_files(tmp_path: Path) -> None:
    """Ctrl-C during a sort that has spilled runs: KeyboardInterrupt, and no file is left.

    Deterministic (issue 34): the input is a FIFO this test feeds, so the sort cannot finish before
    the test lets it. The feeder writes three quarters of the SAM (stopping inside a record, so the
    input can never become a valid file), waits until runs are spilled, sends SIGINT, and closes the
    FIFO only once the signal has been handled in the main thread. The job then ends either on the
    cancel flag or on the truncated record: both are errors that must leave nothing behind, and the
    call raises KeyboardInterrupt in both cases.
    """
    data = big_sam_bytes(40)
    cut = data.index(b"\t", len(data) * 3 // 4)  # inside a record
    fifo = tmp_path / "in.sam"
    os.mkfifo(fifo)
    out_dir, temp = tmp_path / "out", tmp_path / "tmp"
    out_dir.mkdir()
    temp.mkdir()
    handled = threading.Event()
    problems: List[str] = []

    def spilled() -> bool:
        return any(len(files) > 2 for _, _, files in os.walk(temp))

    def feed() -> None:
        try:
            with open(fifo, "wb") as f:  # returns once the sort has opened its input
                f.write(data[:cut])
                deadline = time.monotonic() + 300  # only against a hang: the sort cannot end now
                while not spilled():
                    if time.monotonic() > deadline:
                        problems.append("no runs were spilled")
                        return
                    time.sleep(0.005)
                os.kill(os.getpid(), signal.SIGINT)
                if not handled.wait(300):
                    problems.append("SIGINT was not handled")
        except BrokenPipeError:
            problems.append("the sort stopped reading before the signal")

    def on_sigint(signum: int, frame: object) -> None:
        handled.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sortase.sort(fifo, out_dir / "sorted.bam", max_memory="4M", threads=2,
                         temp_prefix=temp, progress=False)
    finally:
        signal.signal(signal.SIGINT, previous)
        handled.set()
        feeder.join(timeout=60)
    assert problems == []
    assert handled.is_set()
    assert os.listdir(out_dir) == []
    assert list(os.walk(temp)) == [(str(temp), [], [])]
    assert sorted(os.listdir(tmp_path)) == ["in.sam", "out", "tmp"]
