"""The documentation's links: every relative link (and image) in README.md, ARCHITECTURE.md and
docs/*.md must point at a file of the repository, and a `#anchor` on a Markdown file at one of its
headings. Links to the web are not followed. Pure Python and fast: no build, no network.

Also: every area of docs/ has its page and is linked from the README, and the README's first screen
(before its first link into docs/) stays within 60 lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]

#: The pages the README's first screen promises, one per area.
AREAS = ["sort-merge.md", "markdup.md", "fasta.md", "cram.md", "agd.md", "python.md", "dask.md",
         "fq2bam.md", "benchmarks.md", "architecture.md", "install.md", "contributing.md"]

FIRST_SCREEN_LINES = 60

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); text may hold one level of brackets ([`-b\|-u`]).
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def doc_files(root: Path = REPO) -> List[Path]:
    """The Markdown files whose links are checked."""
    files = [root / "README.md", root / "ARCHITECTURE.md"]
    files += sorted((root / "docs").glob("*.md"))
    return [f for f in files if f.exists()]


def _prose_lines(text: str, blank_code: bool = True) -> Iterator[Tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans blanked out (kept with
    ``blank_code=False``: a heading's anchor is made from its code spans' text too)."""
    fenced = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            yield number, _CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line) if blank_code else line


def links(text: str) -> Iterator[Tuple[int, str]]:
    """(line number, target) of every link and image outside code."""
    for number, line in _prose_lines(text):
        for m in _INLINE.finditer(line):
            yield number, m.group(1)
        m = _REFERENCE.match(line)
        if m:
            yield number, m.group(1)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to
    hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set:
    """Every anchor a Markdown file defines: heading slugs (repeats get -1, -2, ... as on GitHub)
    and explicit <a name/id> tags."""
    found: set = set()
    seen: dict = {}
    for _, line in _prose_lines(text, blank_code=False):
        m = _HEADING.match(line)
        if m:
            slug = _slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
        found.update(_HTML_ANCHOR.findall(line))
    return found


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def dead_links(files: Sequence[Path], root: Path = REPO) -> List[str]:
    """One line per dead relative link: `file:line: target (why)`."""
    root = root.resolve()
    dead = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        for number, target in links(text):
            if _is_external(target):
                continue
            path_part, _, anchor = target.partition("#")
            where = f"{f.relative_to(root)}:{number}: {target}"
            dest = (f.parent / path_part).resolve() if path_part else f.resolve()
            if dest != root and root not in dest.parents:
                dead.append(f"{where} (outside the repository: dead in a clone)")
                continue
            if not dest.exists():
                dead.append(f"{where} (no such file)")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
                dead.append(f"{where} (no heading #{anchor} in {dest.relative_to(root)})")
    return dead


def test_no_dead_relative_links():
    files = doc_files()
    assert (REPO / "README.md") in files and len(files) > 2, files
    dead = dead_links(files)
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_checker_finds_dead_links(tmp_path):
    """The checker itself fails on what it must fail on (a checker that passes everything would
    make the test above worthless)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Two words\n\ntext\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md) [ok anchor](docs/a.md#two-words) [ok self](#intro) ![ok img](docs/a.md)\n"
        "# Intro\n"
        "[missing](docs/b.md)\n"
        "[bad anchor](docs/a.md#three-words)\n"
        "[outside](../shared/DESIGN.md)\n"
        "`[in code](docs/nothing.md)` and <https://example.org> [web](https://example.org/x.md)\n"
        "```\n[in a fence](docs/nothing.md)\n```\n"
        "[ref]: docs/gone.md\n")
    dead = dead_links(doc_files(tmp_path), tmp_path)
    assert [d.split(": ", 1)[1] for d in dead] == [
        "docs/b.md (no such file)",
        "docs/a.md#three-words (no heading #three-words in docs/a.md)",
        "../shared/DESIGN.md (outside the repository: dead in a clone)",
        "docs/gone.md (no such file)",
    ], dead


def test_slugs_match_github():
    assert _slug("The crates, floor by floor") == "the-crates-floor-by-floor"
    assert _slug("Scale-out on Dask (`sortase.distributed`, `sortase-dask`)") == \
        "scale-out-on-dask-sortasedistributed-sortase-dask"
    assert _slug("sort, merge and the BAM jobs (view, index, flagstat, idxstats)") == \
        "sort-merge-and-the-bam-jobs-view-index-flagstat-idxstats"
    # a heading's code spans count in its anchor (they are blanked only when looking for links)
    assert "duplicate-marking-distributedmarkdup-sortase-dask-markdup" in \
        anchors("## Duplicate marking (`distributed.markdup`, `sortase-dask markdup`)\n")


@pytest.mark.parametrize("page", AREAS)
def test_every_area_has_a_page_linked_from_the_readme(page):
    assert (REPO / "docs" / page).exists(), f"docs/{page} is missing"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = {t.partition("#")[0] for _, t in links(readme)}
    assert f"docs/{page}" in targets, f"README.md does not link docs/{page}"


def test_readme_first_screen_is_short():
    """What sortase is, the two commands, the examples, the plot and the table come before the
    first link into docs/, within 60 lines."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = min((n for n, t in links(readme) if t.startswith("docs/")), default=None)
    assert first is not None, "README.md has no link into docs/"
    assert first <= FIRST_SCREEN_LINES, f"first link into docs/ at line {first}"
