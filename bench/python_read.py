#!/usr/bin/env python3
"""Issue 17's read benchmark: a BAM into Arrow from Python, side by side in alternating rounds.

    python3 bench/python_read.py /work/bench-data/large.sorted.bam --rounds 2 --threads 2

Each variant runs as its own process under GNU time (wall seconds, CPU seconds user+sys, peak RSS;
on a machine shared with other work compare the CPU seconds, wall times need a quiet machine):
  sortase-proj   sortase.read_bam(columns=qname,flag,rname,pos,mapq)
  sortase-all    sortase.read_bam() (every column, unselected tags as one SAM-text column)
  sortase-scan   sortase.scan_bam() streamed batch by batch, every column (bounded memory)
  pysam-proj     a pysam loop building the same five columns, then pyarrow.table
  oxbow-proj     oxbow 0.8.2 read_bam(fields=the five) -> pyarrow (one thread)
  oxbow-all      oxbow 0.8.2 read_bam(fields=the 11 SAM fields; no tags) -> pyarrow
                 (oxbow's default fields=None reads no field: rows only)
  floor          `sortase flagstat -@N` of the file (inflate + walk every record)
Every variant prints its row count; rows must agree. Prints a markdown table (median of the rounds).
The floor is a whole process; a Python variant's process also starts the interpreter and imports
pyarrow (~0.2 s CPU, one thread): the sortase variants also time their call alone (perf_counter and
process_time around it), the "in call" columns, to set against the floor without that start.
"""
import argparse
import os
import statistics
import subprocess
import sys

PROJ = ["qname", "flag", "rname", "pos", "mapq"]

# Times the call alone (after the interpreter started and the imports), printed before the rows.
CALL = ("import sortase, time\nw0, c0 = time.perf_counter(), time.process_time()\n%s\n"
        "print('CALL', time.perf_counter() - w0, time.process_time() - c0)\nprint(n)")

SNIPPETS = {
    "sortase-proj": CALL % ("n = sortase.read_bam(P, columns=%r, threads=T).num_rows" % PROJ),
    "sortase-all": CALL % "n = sortase.read_bam(P, threads=T).num_rows",
    "sortase-scan": CALL % "n = 0\nfor b in sortase.scan_bam(P, threads=T):\n    n += b.num_rows",
    "pysam-proj": (
        "import pysam, pyarrow as pa\n"
        "q, f, r, p, m = [], [], [], [], []\n"
        "with pysam.AlignmentFile(P, threads=T) as bam:\n"
        "    for a in bam.fetch(until_eof=True):\n"
        "        q.append(a.query_name); f.append(a.flag); r.append(a.reference_name)\n"
        "        p.append(a.reference_start + 1); m.append(a.mapping_quality)\n"
        "t = pa.table({'qname': q, 'flag': f, 'rname': r, 'pos': p, 'mapq': m})\n"
        "print(t.num_rows)"
    ),
    "oxbow-proj": (
        "import oxbow as ox, pyarrow as pa\n"
        "t = pa.ipc.open_file(ox.read_bam(P, fields=%r)).read_all()\n"
        "print(t.num_rows)" % ["qname", "flag", "rname", "pos", "mapq"]
    ),
    "oxbow-all": (
        "import oxbow as ox, pyarrow as pa\n"
        "t = pa.ipc.open_file(ox.read_bam(P, fields=%r)).read_all()\n"
        "print(t.num_rows)" % ["qname", "flag", "rname", "pos", "mapq", "cigar", "rnext", "pnext",
                               "tlen", "seq", "qual"]
    ),
}


def run(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M %U %S"] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed: {cmd}\n{out.stderr[-2000:]}")
    line = [l for l in out.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    cpu = float(line[3]) + float(line[4])
    lines = out.stdout.strip().splitlines()
    call = next((tuple(map(float, l.split()[1:])) for l in lines if l.startswith("CALL ")), None)
    return float(line[1]), int(line[2]) / 1024, cpu, lines[-1], call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bam")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sortase", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "sortase"))
    ap.add_argument("--only", help="comma-separated variants")
    a = ap.parse_args()
    variants = list(SNIPPETS) + ["floor"]
    if a.only:
        variants = [v for v in variants if v in a.only.split(",")]
    times = {v: [] for v in variants}
    calls = {v: [] for v in variants}
    rows = {}
    for r in range(a.rounds):
        for v in variants:
            if v == "floor":
                cmd = [a.sortase, "flagstat", "-@", str(a.threads), a.bam]
            else:
                code = f"P = {a.bam!r}; T = {a.threads}\n" + SNIPPETS[v]
                cmd = [sys.executable, "-c", code]
            wall, rss, cpu, out, call = run(cmd)
            times[v].append((wall, rss, cpu))
            if call:
                calls[v].append(call)
            if v != "floor":
                rows[v] = int(out)
            print(f"round {r + 1} {v}: {wall:.2f} s, {cpu:.2f} s CPU, {rss:.0f} MiB", file=sys.stderr)
    if len(set(rows.values())) > 1:
        raise SystemExit(f"row counts differ: {rows}")
    floor = statistics.median(w for w, _, _ in times["floor"]) if "floor" in times else None
    floor_cpu = statistics.median(c for _, _, c in times["floor"]) if "floor" in times else None
    print(f"| variant | wall s (median of {a.rounds}) | CPU s | peak RSS MiB | / floor | CPU / floor CPU "
          "| in call: wall s | / floor | CPU s | / floor CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for v in variants:
        w = statistics.median(x for x, _, _ in times[v])
        c = statistics.median(x for _, _, x in times[v])
        m = max(x for _, x, _ in times[v])
        ratio = f"{w / floor:.2f}" if floor else ""
        cpu_ratio = f"{c / floor_cpu:.2f}" if floor_cpu else ""
        call = ["", "", "", ""]
        if calls[v]:
            cw = statistics.median(x for x, _ in calls[v])
            cc = statistics.median(x for _, x in calls[v])
            call = [f"{cw:.2f}", f"{cw / floor:.2f}" if floor else "", f"{cc:.2f}",
                    f"{cc / floor_cpu:.2f}" if floor_cpu else ""]
        print(f"| {v} | {w:.2f} | {c:.2f} | {m:.0f} | {ratio} | {cpu_ratio} | {' | '.join(call)} |")
    print(f"\nrows: {next(iter(rows.values())) if rows else 'n/a'}; threads {a.threads}; file {a.bam} "
          f"({os.path.getsize(a.bam) / 1e9:.2f} GB)")


if __name__ == "__main__":
    main()
