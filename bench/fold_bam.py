#!/usr/bin/env python3
"""Deep coverage from shallow data, for the index-segment measurements of bench/RESULTS.md
(issue 29): `fold` rewrites a BAM with every mapped record on the first reference at its
position modulo WINDOW (mates likewise), so the same reads, CIGARs and clips stand at
depth x (reference length / WINDOW); `segments` counts a coordinate-sorted BAM's index segments
(runs of records of one reference and bin, what the distributed sort's layout replays).
Sequences no longer match the reference: sort, index and markdup do not look at them.

  python3 bench/fold_bam.py fold IN.bam OUT.bam [--window 4000000]
  python3 bench/fold_bam.py segments SORTED.bam ...
"""
import argparse

import pysam


def reg2bin(beg: int, end: int, min_shift: int = 14, depth: int = 5) -> int:
    """htslib's hts_reg2bin."""
    end -= 1
    s, t = min_shift, ((1 << ((depth << 1) + depth)) - 1) // 7
    level = depth
    while level > 0:
        if beg >> s == end >> s:
            return t + (beg >> s)
        level -= 1
        s += 3
        t -= 1 << ((level << 1) + level)
    return 0


def fold(src: str, dst: str, window: int) -> None:
    with pysam.AlignmentFile(src, "rb") as f, pysam.AlignmentFile(dst, "wb", template=f) as out:
        for r in f:
            if r.reference_id >= 0:
                r.reference_id = 0
                r.reference_start %= window
            if r.next_reference_id >= 0:
                r.next_reference_id = 0
                r.next_reference_start %= window
            out.write(r)


def segments(path: str) -> None:
    n = runs = 0
    last = None
    with pysam.AlignmentFile(path) as f:
        for r in f:
            n += 1
            if r.reference_id < 0:
                key = (-1, 4680)
            else:
                beg = max(r.reference_start, 0)
                end = r.reference_end if not r.is_unmapped and (r.reference_end or 0) > beg else beg + 1
                key = (r.reference_id, reg2bin(beg, end))
            runs += key != last
            last = key
    print(f"{path}: {n} records, {runs} index segments ({runs / max(n, 1):.4f} per record)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fold")
    f.add_argument("input")
    f.add_argument("output")
    f.add_argument("--window", type=int, default=4_000_000)
    s = sub.add_parser("segments")
    s.add_argument("bams", nargs="+")
    args = ap.parse_args()
    if args.cmd == "fold":
        fold(args.input, args.output, args.window)
    else:
        for b in args.bams:
            segments(b)


if __name__ == "__main__":
    main()
