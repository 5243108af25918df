#!/usr/bin/env python3
"""Write a dbSNP-like VCF of random SNVs on the bench reference, for `snp-pileup` benchmarks.

    python3 bench/make_snp_vcf.py [--ref /work/bench-data/ref.fa] [--sites 1200000]
                                  [--out /work/bench-data/snps.vcf] [--seed 7]

Sites are spread uniformly over the reference (N bases skipped), sorted in the reference's order, with
contig names written without the `chr` prefix (as NCBI's common_all VCFs are), so snp-pileup's
prefix matching is exercised. Like real dbSNP files it also holds lines snp-pileup must skip or that
hit its loop's corner cases: ~2 % multi-allelic, ~2 % indels, ~0.5 % repeated positions, a few
lowercase REF bases, and sites on a contig absent from the BAMs (before and between the others).
Only the Python standard library is used; the output is reproducible for a given seed.
"""
import argparse
import bisect
import mmap
import os
import random

BASES = "ACGT"


def read_fai(path):
    out = []
    with open(path) as f:
        for line in f:
            name, length, offset, lb, lw = line.split("\t")[:5]
            out.append((name, int(length), int(offset), int(lb), int(lw)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="/work/bench-data/ref.fa")
    ap.add_argument("--sites", type=int, default=1_200_000)
    ap.add_argument("--out", default="/work/bench-data/snps.vcf")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.abspath(args.out).startswith(repo + os.sep):
        raise SystemExit("--out is inside the repository; write data outside it")
    rng = random.Random(args.seed)
    fai = read_fai(args.ref + ".fai")
    total = sum(c[1] for c in fai)
    starts = []
    acc = 0
    for c in fai:
        starts.append(acc)
        acc += c[1]
    picks = sorted(rng.randrange(total) for _ in range(args.sites))
    tmp = args.out + ".tmp"
    with open(args.ref, "rb") as fa, open(tmp, "w") as out:
        mm = mmap.mmap(fa.fileno(), 0, access=mmap.ACCESS_READ)
        out.write("##fileformat=VCFv4.2\n")
        for name, length, *_ in fai:
            out.write(f"##contig=<ID={name.removeprefix('chr')},length={length}>\n")
        out.write("##contig=<ID=GL000999.1,length=100000>\n")
        out.write('##INFO=<ID=CAF,Number=.,Type=String,Description="Allele frequencies">\n')
        out.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
        out.write("GL000999.1\t500\trs0\tA\tG\t.\t.\tCAF=0.9,0.1\n")
        last_contig = None
        n = 0
        for g in picks:
            ci = bisect.bisect_right(starts, g) - 1
            name, length, offset, lb, lw = fai[ci]
            pos = g - starts[ci]
            base = chr(mm[offset + pos // lb * lw + pos % lb]).upper()
            if base not in BASES:
                continue
            chrom = name.removeprefix("chr")
            if chrom != last_contig and last_contig is not None and rng.random() < 0.2:
                out.write(f"GL000999.1\t{rng.randrange(1, 100000)}\t.\tC\tT\t.\t.\t.\n")
            last_contig = chrom
            n += 1
            alt = rng.choice([b for b in BASES if b != base])
            r = rng.random()
            ref = base
            if r < 0.02:
                alt = alt + "," + rng.choice([b for b in BASES if b not in (base, alt)])
            elif r < 0.03:
                alt = base + rng.choice(BASES)  # insertion
            elif r < 0.04:
                ref = base + rng.choice(BASES)  # deletion (REF longer than one base)
            elif r < 0.041:
                ref = base.lower()
            line = f"{chrom}\t{pos + 1}\trs{n}\t{ref}\t{alt}\t.\t.\tCAF=0.7,0.3\n"
            out.write(line)
            if rng.random() < 0.005:
                other = rng.choice([b for b in BASES if b != base])
                out.write(f"{chrom}\t{pos + 1}\trs{n}b\t{base}\t{other}\t.\t.\t.\n")
    os.replace(tmp, args.out)
    print(f"{args.out}: {n} sites (+ corner cases)")


if __name__ == "__main__":
    main()
