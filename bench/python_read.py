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
Against polars-bio (issue 33; `pb-*` variants run in --peer-python, the venv bench/setup-peer.sh
--tools makes, with datafusion.execution.target_partitions = --threads):
  sortase-lazy-proj   sortase.lazy_bam(P).select(the five).collect()  (polars LazyFrame)
  pb-proj             polars_bio.scan_bam(P).select(the same five, its names).collect()
  pb-all              polars_bio.scan_bam(P).collect() (its 12 columns; sortase-all is the peer)
  sortase-region      sortase.lazy_bam(P).filter(rname == CHR, START <= pos <= END, mapq >= 30)
                      .collect(), all columns (pushed: the region through the index, mapq in the
                      decode threads)
  pb-region           polars_bio.scan_bam(P).filter(the same on chrom/start/mapping_quality)
                      .collect()
Every variant prints its row count; rows must agree within the whole-file variants and within the
region variants (--region, default chr1:1000000-5000000). Prints a markdown table (median of the
rounds).
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


# polars-bio's names of the five projected columns (it reads `start` 1-based by default).
PB_PROJ = ["name", "flags", "chrom", "start", "mapping_quality"]
PB_SET = ("import polars_bio as pb, polars as pl\n"
          "pb.set_option('datafusion.execution.target_partitions', str(T))\n")
# The region variants' filter; CHR, START, END are set from --region.
SORTASE_REGION = ("(pl.col('rname') == CHR) & pl.col('pos').is_between(START, END) "
                  "& (pl.col('mapq') >= 30)")
PB_REGION = ("(pl.col('chrom') == CHR) & pl.col('start').is_between(START, END) "
             "& (pl.col('mapping_quality') >= 30)")
SNIPPETS.update({
    "sortase-lazy-proj": "import polars as pl\n" + CALL % (
        "n = sortase.lazy_bam(P, threads=T).select(%r).collect().height" % PROJ),
    "pb-proj": PB_SET + "n = pb.scan_bam(P).select(%r).collect().height\nprint(n)" % PB_PROJ,
    "pb-all": PB_SET + "n = pb.scan_bam(P).collect().height\nprint(n)",
    "sortase-region": "import polars as pl\n" + CALL % (
        "n = sortase.lazy_bam(P, threads=T).filter(%s).collect().height" % SORTASE_REGION),
    "pb-region": PB_SET + "n = pb.scan_bam(P).filter(%s).collect().height\nprint(n)" % PB_REGION,
})
# Variants whose rows are those of the region (the others: every record).
REGION_VARIANTS = {"sortase-region", "pb-region"}
PEER_ROOT = os.environ.get("SORTASE_PEER_ROOT") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "target", "bench-peers")


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
    ap.add_argument("--peer-python", default=os.path.join(PEER_ROOT, "venv", "bin", "python"),
                    help="the python with polars-bio for the pb-* variants "
                         "[$SORTASE_PEER_ROOT/venv/bin/python, made by bench/setup-peer.sh --tools]")
    ap.add_argument("--record", metavar="CSV", nargs="?", const=os.path.join(os.path.dirname(__file__), "results.csv"),
                    help="append one row per variant to CSV (compare.py's columns; case python-read or "
                         "python-read-region) [bench/results.csv]")
    ap.add_argument("--region", default="chr1:1000000-5000000",
                    help="CHR:START-END of the region variants (1-based, inclusive)")
    a = ap.parse_args()
    chrom, span = a.region.rsplit(":", 1)
    start, end = (int(x.replace(",", "")) for x in span.split("-"))
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
                code = (f"P = {a.bam!r}; T = {a.threads}; CHR = {chrom!r}; START = {start}; "
                        f"END = {end}\n" + SNIPPETS[v])
                python = a.peer_python if v.startswith("pb-") else sys.executable
                cmd = [python, "-c", code]
            wall, rss, cpu, out, call = run(cmd)
            times[v].append((wall, rss, cpu))
            if call:
                calls[v].append(call)
            if v != "floor":
                rows[v] = int(out)
            print(f"round {r + 1} {v}: {wall:.2f} s, {cpu:.2f} s CPU, {rss:.0f} MiB", file=sys.stderr)
    for group in (set(rows) - REGION_VARIANTS, set(rows) & REGION_VARIANTS):
        if len({rows[v] for v in group}) > 1:
            raise SystemExit(f"row counts differ: { {v: rows[v] for v in group} }")
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
    if a.record:
        record(a, variants, times, rows, floor)
    region_rows = next((rows[v] for v in rows if v in REGION_VARIANTS), None)
    whole_rows = next((rows[v] for v in rows if v not in REGION_VARIANTS), None)
    print(f"\nrows: {whole_rows if whole_rows is not None else 'n/a'}"
          + (f" ({a.region} filtered: {region_rows})" if region_rows is not None else "")
          + f"; threads {a.threads}; file {a.bam} "
          f"({os.path.getsize(a.bam) / 1e9:.2f} GB)")


def record(a, variants, times, rows, floor):
    """Rows in compare.py's results.csv format: the whole-file variants as case `python-read`
    (ratios against sortase-proj), the region variants as `python-read-region` (against
    sortase-region); a pb-* variant's ratio is against its sortase counterpart."""
    import csv
    import datetime
    peer_of = {"pb-proj": "sortase-proj", "pb-all": "sortase-all", "pb-region": "sortase-region",
               "pysam-proj": "sortase-proj", "oxbow-proj": "sortase-proj", "oxbow-all": "sortase-all"}
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse",
                             "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    med = {v: statistics.median(x for x, _, _ in times[v]) for v in variants}
    new = not os.path.exists(a.record)
    with open(a.record, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from compare import CSV_COLUMNS
            w.writerow(CSV_COLUMNS)
        for v in variants:
            walls = [x for x, _, _ in times[v]]
            cpu = statistics.median(x for _, _, x in times[v])
            base = peer_of.get(v)
            ratio = f"{med[v] / med[base]:.4f}" if base in med else ""
            over = f"{med[v] / floor:.4f}" if floor and v.startswith("sortase") else ""
            case = "python-read-region" if v in REGION_VARIANTS else "python-read"
            w.writerow([date, commit, case, a.bam, os.path.getsize(a.bam), rows.get(v, ""), a.threads,
                        v, "floor" if v == "floor" else "variant", len(walls), f"{med[v]:.4f}",
                        f"{min(walls):.4f}", f"{max(walls):.4f}", f"{100 * cpu / med[v]:.1f}",
                        f"{cpu:.3f}", f"{max(x for _, x, _ in times[v]):.1f}", ratio, over,
                        "rows agree" if v != "floor" else "", SNIPPETS.get(v, "sortase flagstat")
                        .replace("\n", "; ")])


if __name__ == "__main__":
    main()
