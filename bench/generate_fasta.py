#!/usr/bin/env python3
"""Generates the protein FASTA of issue 5's benchmarks (data outside the repository).

    python3 bench/generate_fasta.py [--data /work/bench-data] [--records 1000000] [--seed 5]

Writes, in DATA:
  proteins.fa           ~1M UniProt-style records, 50-1500 residues, 60 per line (~0.85 GB)
  proteins.fa.gz(.gzi)  the same, bgzipped by htslib's bgzip -@2 -i (what users keep)
  proteins.names.txt    3000 record names drawn at random (seeded, repeats possible)
  proteins.pairs.txt    the same records as "OFFSET SIZE" (uncompressed bytes), for `bgzip -b -s`
  proteins.expected.fa  those 3000 records cut out of proteins.fa, concatenated (the fetch answer)
Residues come from os.urandom through a 256->20 letter table (Python's random is ~50x slower);
names and lengths from random.Random(seed), so names/pairs are reproducible for a given seed.
"""
import argparse
import os
import random
import subprocess
import sys

AMINO = b"ACDEFGHIKLMNPQRSTVWY"
TABLE = bytes(AMINO[i % 20] for i in range(256))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/work/bench-data")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--pick", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    os.makedirs(args.data, exist_ok=True)
    rng = random.Random(args.seed)
    fa = os.path.join(args.data, "proteins.fa")
    locs = []
    offset = 0
    with open(fa, "wb", buffering=1 << 22) as out:
        pool, at = b"", 0
        for i in range(args.records):
            n = rng.randint(50, 1500)
            if len(pool) - at < n:
                pool, at = os.urandom(1 << 24).translate(TABLE), 0
            seq = pool[at:at + n]
            at += n
            name = f"sp|Q{i:07d}|PRT{i % 99991}_SYNTH"
            head = f">{name} Synthetic protein {i} OS=Homo sapiens OX=9606 GN=G{i % 7919} PE=1 SV=1\n"
            body = b"\n".join(seq[j:j + 60] for j in range(0, n, 60)) + b"\n"
            rec = head.encode() + body
            out.write(rec)
            locs.append((name, offset, len(rec)))
            offset += len(rec)
    picks = [rng.randrange(len(locs)) for _ in range(args.pick)]
    with open(os.path.join(args.data, "proteins.names.txt"), "w") as f:
        f.writelines(locs[k][0] + "\n" for k in picks)
    with open(os.path.join(args.data, "proteins.pairs.txt"), "w") as f:
        f.writelines(f"{locs[k][1]} {locs[k][2]}\n" for k in picks)
    with open(fa, "rb") as src, open(os.path.join(args.data, "proteins.expected.fa"), "wb") as dst:
        for k in picks:
            src.seek(locs[k][1])
            dst.write(src.read(locs[k][2]))
    gz = fa + ".gz"
    with open(gz, "wb") as out:
        subprocess.run(["bgzip", "-@2", "-c", "-i", "-I", gz + ".gzi", fa], stdout=out, check=True)
    print(f"{fa}: {args.records} records, {offset} bytes; {gz}: {os.path.getsize(gz)} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
