#!/usr/bin/env python3
"""Function sizes of the workspace's Rust code: lines from a `fn` line to its closing brace, for
every .rs file under crates/ (tests, examples and build.rs included; target/ skipped). Prints the
count, p50, p90, p99 and max; `--top N` lists the N longest; `--max-p99 N` exits 1 when the p99 is
over N (scripts/test-all.sh checks 70, issue 28).

Braces are counted per line after blanking string and char literals and `//` comments, which is
exact for rustfmt-formatted code (a `fn` without a body, ending in `;`, is skipped).

    python3 scripts/function-sizes.py [ROOT] [--top N] [--max-p99 N]
"""

import argparse
import pathlib
import re
import sys

FN = re.compile(
    r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)'
)
STRING = re.compile(r'"(\\.|[^"\\])*"')
CHAR = re.compile(r"'(\\.|[^'\\])'")


def code_of(line):
    """The line without string and char literals and its `//` comment."""
    line = STRING.sub('""', line)
    line = CHAR.sub("''", line)
    return line.split("//")[0]


def function_length(lines, start):
    """Lines from the `fn` at `start` to its closing brace; None for a function without a body."""
    depth, opened = 0, False
    for j in range(start, len(lines)):
        code = code_of(lines[j])
        if not opened and ";" in code and "{" not in code:
            return None
        for ch in code:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
        if opened and depth <= 0:
            return j - start + 1
    return None


def function_sizes(root):
    """(lines, "path:line:name") of every function under root/crates."""
    sizes = []
    for path in sorted(root.glob("crates/**/*.rs")):
        if "/target/" in str(path):
            continue
        lines = path.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            m = FN.match(line)
            if m:
                n = function_length(lines, i)
                if n is not None:
                    sizes.append((n, f"{path}:{i + 1}:{m.group(7)}"))
    sizes.sort()
    return sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=".", help="the workspace (default: .)")
    ap.add_argument("--top", "-v", type=int, default=0, metavar="N", help="list the N longest")
    ap.add_argument("--max-p99", type=int, metavar="N", help="fail when the p99 is over N lines")
    args = ap.parse_args()
    sizes = function_sizes(pathlib.Path(args.root))
    if not sizes:
        sys.exit(f"no Rust functions under {args.root}/crates")
    n = len(sizes)

    def q(p):
        return sizes[min(n - 1, int(p * n))][0]

    print(f"functions {n}  p50 {q(.5)}  p90 {q(.9)}  p99 {q(.99)}  max {sizes[-1][0]}")
    for size, where in sizes[len(sizes) - args.top:] if args.top > 0 else []:
        print(size, where)
    if args.max_p99 is not None and q(.99) > args.max_p99:
        over = [f"  {size} {where}" for size, where in sizes if size > args.max_p99]
        print(
            f"function-size p99 {q(.99)} is over {args.max_p99} lines; the longest:\n"
            + "\n".join(over[-20:]),
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
