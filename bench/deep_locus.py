#!/usr/bin/env python3
"""A BAM with one very deep locus, for duplicate markers (issue 6: "a 10,000x-deep locus neither
stalls nor blows memory").

    python3 bench/deep_locus.py OUT.sorted.bam [--pairs 40000] [--window 300] [--spread 100] [--seed 1]

Writes `--pairs` read pairs (2x150, forward read 1, reverse read 2 starting 400 + [0, spread) bp
downstream) whose read-1 starts fall in a `--window`-bp window of chr1, so the locus is
pairs * 300 / (window + spread + 550) deep (defaults: ~12,600x), plus 10,000 background pairs
over the rest of chr1 and chr2. Start positions repeat, so most pairs at the locus are duplicates;
names are Illumina-style (tile:x:y) on two tiles, so duplicate sets are also searched for optical
duplicates. Library from @RG LB. The SAM text is coordinate-sorted by `samtools sort` (Debian's,
on PATH) into OUT.
"""
import argparse
import random
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--pairs", type=int, default=40000)
    ap.add_argument("--window", type=int, default=300)
    ap.add_argument("--spread", type=int, default=100, help="range of the mate's offset (bp)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    length = {"chr1": 200000, "chr2": 100000}
    lines = ["@HD\tVN:1.6\tSO:unsorted"]
    lines += [f"@SQ\tSN:{n}\tLN:{l}" for n, l in length.items()]
    lines.append("@RG\tID:rg1\tLB:lib1\tSM:deep")
    bases = "ACGT"

    def pair(i, ref, pos1, pos2):
        tile, x, y = rng.choice((1101, 1102)), rng.randrange(30000), rng.randrange(30000)
        name = f"A00:{i}:FC:1:{tile}:{x}:{y}"
        tlen = pos2 + 150 - pos1
        out = []
        for flag, pos, mpos, t in ((99, pos1, pos2, tlen), (147, pos2, pos1, -tlen)):
            seq = "".join(rng.choice(bases) for _ in range(150))
            qual = "".join(chr(33 + rng.randrange(2, 41)) for _ in range(150))
            out.append(f"{name}\t{flag}\t{ref}\t{pos}\t60\t150M\t=\t{mpos}\t{t}\t{seq}\t{qual}\tRG:Z:rg1")
        return out

    locus = 50000
    for i in range(a.pairs):
        p1 = locus + rng.randrange(a.window)
        lines += pair(i, "chr1", p1, p1 + 400 + rng.randrange(a.spread))
    for i in range(a.pairs, a.pairs + 10000):
        ref = rng.choice(("chr1", "chr2"))
        p1 = 1 + rng.randrange(length[ref] - 1000)
        if ref == "chr1" and abs(p1 - locus) < 2000:
            continue
        lines += pair(i, ref, p1, p1 + 150 + rng.randrange(250, 350))
    sam = "\n".join(lines) + "\n"
    r = subprocess.run(["samtools", "sort", "-o", a.out, "-"], input=sam.encode())
    if r.returncode != 0:
        sys.exit(f"{a.out}: samtools sort failed")
    span = a.window + a.spread + 550
    print(f"{a.out}: {a.pairs} pairs at chr1:{locus}-{locus + span} (~{a.pairs * 300 // span}x)")


if __name__ == "__main__":
    main()
