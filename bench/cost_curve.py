#!/usr/bin/env python3
"""The cost curve of issue 33: what sort, markdup and read_bam cost per record as the data grows,
for sortase and the best peer, with the temporary files they leave on the way.

    python3 bench/cost_curve.py run  --data small=/work/bench-data --data large=/work/bench-data/large \\
                                     --data xl=/work/bench-data/xl [--jobs sort-mem,sort-ooc,markdup,read] \\
                                     [--rounds 1] [--threads 2]
    python3 bench/cost_curve.py plot [--csv bench/cost_curve.csv] [--png bench/report/cost_curve.png]

`run` times each job on each data set (SIZE.bam in aligner order, SIZE.sorted.bam) with
/usr/bin/time (wall, user+system CPU, peak RSS) while a thread polls the job's temporary directory
every 50 ms (peak bytes, peak and total number of files), checks the outputs (records of the sorts
by md5 of `samtools view`, markdup's duplicate flags, read_bam's row counts) and appends one row
per tool and job to bench/cost_curve.csv. `plot` draws CPU per record, wall per record, peak RSS and
temporary files against the number of records, one panel each, sortase and its peer per job, and
prints the markdown table of bench/RESULTS.md.

Jobs (2 threads each; levels equal: sortase -l 6 = libdeflate 7 = the peers' level 7):
  sort-mem  coordinate sort with memory for all records (sortase --max-memory 2.5x the uncompressed
            records, mako -m half of it per thread); left out where that exceeds 3/4 of the RAM
  sort-ooc  coordinate sort with 1/20 of the uncompressed records as memory (mako: half per thread)
  markdup   query-grouped markdup, uncompressed output: sortase markdup -q -u against dupblaster
            (samblaster's single-end keys, no optical classification, one library pool)
  read      read_bam of 5 columns: sortase.read_bam(columns=...) against polars_bio.scan_bam().select()
"""
import argparse
import csv
import datetime
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import bgzf_uncompressed_bytes  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
CSV = os.path.join(BENCH, "cost_curve.csv")
PNG = os.path.join(BENCH, "report", "cost_curve.png")
PEER_ROOT = os.environ.get("SORTASE_PEER_ROOT") or os.path.join(REPO, "target", "bench-peers")
COLUMNS = ["date_utc", "commit", "job", "data", "records", "input_bytes", "uncompressed_bytes",
           "tool", "command", "rounds", "wall_s", "cpu_s", "rss_mib", "temp_peak_bytes",
           "temp_peak_files", "temp_files_total", "budget_mib", "check"]
JOBS = ["sort-mem", "sort-ooc", "markdup", "read"]
PEER = {"sort-mem": "mako", "sort-ooc": "mako", "markdup": "dupblaster", "read": "polars-bio"}


class TempWatch(threading.Thread):
    """Polls a directory tree: peak bytes, peak file count, every file name seen."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.stop = path, threading.Event()
        self.peak_bytes = self.peak_files = 0
        self.seen = set()

    def run(self):
        while not self.stop.is_set():
            n = b = 0
            for root, _, files in os.walk(self.path):
                for name in files:
                    p = os.path.join(root, name)
                    try:
                        b += os.lstat(p).st_size
                    except OSError:
                        continue
                    n += 1
                    self.seen.add(p)
            self.peak_bytes, self.peak_files = max(self.peak_bytes, b), max(self.peak_files, n)
            self.stop.wait(0.05)


def timed(cmd, tmp):
    """Runs cmd (a shell string) under /usr/bin/time with tmp watched: (wall, cpu, rss MiB, watch)."""
    watch = TempWatch(tmp)
    watch.start()
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", "sh", "-c", cmd],
                       capture_output=True, text=True)
    watch.stop.set()
    watch.join()
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {cmd}\n{p.stderr[-3000:]}")
    t = [l for l in p.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    return float(t[1]), float(t[2]) + float(t[3]), int(t[4]) / 1024, watch, p.stdout


def records_md5(samtools, bam):
    h = hashlib.md5()
    p = subprocess.Popen(shlex.split(samtools) + ["view", "-@", "2", bam], stdout=subprocess.PIPE)
    for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
        h.update(chunk)
    if p.wait() != 0:
        raise SystemExit(f"samtools view {bam} failed")
    return h.hexdigest()


def dup_flags(samtools, bam):
    """md5 of (name, flag) of every record in file order: the duplicate decisions and nothing else
    (both tools keep the input order)."""
    h = hashlib.md5()
    p = subprocess.Popen(shlex.split(samtools) + ["view", bam], stdout=subprocess.PIPE)
    for line in p.stdout:
        f = line.split(b"\t", 2)
        h.update(f[0] + b"\t" + f[1] + b"\n")
    if p.wait() != 0:
        raise SystemExit(f"samtools view {bam} failed")
    return h.hexdigest()


def commands(job, a, data, tmp, out, unc):
    """[(tool, shell command)] of a job, sortase first."""
    t, s = a.threads, shlex.quote(a.sortase)
    bam, sbam = data["bam"], data["sorted"]
    q = shlex.quote
    if job in ("sort-mem", "sort-ooc"):
        total = (unc * 5 // 2 if job == "sort-mem" else unc // 20) >> 20
        per = max(1, total // t)
        mako = q(os.path.join(PEER_ROOT, "bin", "mako"))
        return total, [
            ("sortase", f"{s} sort -l 6 -@{t} --max-memory {total}M -T {tmp}/s -o {out} {q(bam)}"),
            ("mako", f"{mako} -i {q(bam)} -o {out} --order coordinate --threads {t} "
                     f"--max-memory {per}M --compression-level 7 --tmp-dir {tmp}"),
        ]
    if job == "markdup":
        db = q(os.path.join(PEER_ROOT, "bin", "dupblaster"))
        # Where two uncompressed outputs do not fit on the disk, both write to /dev/null and the
        # check compares their duplicate counts (Picard's metrics against dupblaster's).
        own_out, db_out = (out, out) if not data.get("devnull") else ("/dev/null", "- > /dev/null")
        return None, [
            ("sortase", f"{s} markdup -q -u -@{t} --metrics METRICS.sortase -o {own_out} {q(bam)}"),
            ("dupblaster", f"{db} -i {q(bam)} -o {db_out} --metrics-prefix METRICS -q "
                           "--single-end-strategy samblaster-legacy --library-aware off "
                           "--sequencing-duplicate-detection off"),
        ]
    proj = ["qname", "flag", "rname", "pos", "mapq"]
    pb_proj = ["name", "flags", "chrom", "start", "mapping_quality"]
    own = (f"import sortase; print(sortase.read_bam({sbam!r}, columns={proj!r}, threads={t})"
           ".num_rows)")
    pb = ("import polars_bio as pb\n"
          f"pb.set_option('datafusion.execution.target_partitions', '{t}')\n"
          f"print(pb.scan_bam({sbam!r}).select({pb_proj!r}).collect().height)")
    peer_python = os.path.join(PEER_ROOT, "venv", "bin", "python")
    return None, [
        ("sortase", f"{q(a.python)} -c {q(own)} > {out}"),
        ("polars-bio", f"{q(peer_python)} -c {q(pb)} > {out}"),
    ]


def run_jobs(a):
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    commit += " (+uncommitted changes)" if dirty else ""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    new = not os.path.exists(a.csv)
    for spec in a.data:
        label, d = spec.split("=", 1)
        with open(os.path.join(d, f"{label}.json")) as f:
            info = json.load(f)
        data = {"bam": os.path.join(d, f"{label}.bam"),
                "sorted": os.path.join(d, f"{label}.sorted.bam"), "records": info["records"]}
        unc = bgzf_uncompressed_bytes(data["bam"])
        free = shutil.disk_usage(a.scratch or tempfile.gettempdir()).free
        data["devnull"] = unc * 5 // 2 > free
        for job in a.jobs.split(","):
            if job == "sort-mem" and unc * 5 // 2 > ram * 3 // 4:
                print(f"{label} {job}: left out: needs {unc * 5 // 2 >> 30} GiB of "
                      f"{ram >> 30} GiB RAM", file=sys.stderr)
                continue
            scratch = tempfile.mkdtemp(prefix=f"cost-{label}-{job}-", dir=a.scratch)
            results, outputs = {}, {}
            budget, tools = commands(job, a, data, "TMP", "OUT", unc)
            for r in range(a.rounds):
                for tool, cmd in tools:
                    tmp = os.path.join(scratch, f"{tool}.tmp")
                    out = os.path.join(scratch, f"{tool}.out" + (".bam" if job != "read" else ""))
                    shutil.rmtree(tmp, ignore_errors=True)
                    os.makedirs(tmp)
                    if os.path.exists(out):
                        os.remove(out)
                    metrics = os.path.join(scratch, "metrics")
                    cmd = (cmd.replace("TMP", shlex.quote(tmp)).replace("OUT", shlex.quote(out))
                           .replace("METRICS", shlex.quote(metrics)))
                    subprocess.run(["sync"])
                    wall, cpu, rss, watch, _ = timed(cmd, tmp)
                    results.setdefault(tool, []).append(
                        (wall, cpu, rss, watch.peak_bytes, watch.peak_files, len(watch.seen), cmd))
                    outputs[tool] = out
                    print(f"{label} {job} round {r + 1} {tool}: {wall:.1f} s, {cpu:.1f} CPU-s, "
                          f"{rss:.0f} MiB, temp peak {watch.peak_bytes >> 20} MiB in "
                          f"{watch.peak_files} files ({len(watch.seen)} seen)", file=sys.stderr)
            check = check_outputs(a, job, outputs, data, os.path.join(scratch, "metrics"))
            rows = []
            date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            for tool, rs in results.items():
                med = lambda i: statistics.median(x[i] for x in rs)  # noqa: E731
                rows.append([date, commit, job, label, data["records"],
                             os.path.getsize(data["bam"] if job != "read" else data["sorted"]),
                             unc, tool, rs[-1][6], len(rs), f"{med(0):.2f}", f"{med(1):.2f}",
                             f"{max(x[2] for x in rs):.0f}", max(x[3] for x in rs),
                             max(x[4] for x in rs), max(x[5] for x in rs),
                             budget if budget is not None else "", check])
            with open(a.csv, "a", newline="") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(COLUMNS)
                    new = False
                w.writerows(rows)
            shutil.rmtree(scratch, ignore_errors=True)


def duplicate_counts(metrics):
    """(pairs, unpaired reads) marked, from sortase's Picard metrics and dupblaster's TSV."""
    own = open(metrics + ".sortase").read().split("## METRICS CLASS")[1].splitlines()
    head, row = own[1].split("\t"), own[2].split("\t")
    own = (int(row[head.index("READ_PAIR_DUPLICATES")]),
           int(row[head.index("UNPAIRED_READ_DUPLICATES")]))
    lines = open(metrics + ".duplicate-metrics.tsv").read().splitlines()
    head, row = lines[0].split("\t"), lines[1].split("\t")
    return own, (int(row[head.index("duplicate_pairs")]), int(row[head.index("duplicate_orphans")]))


def check_outputs(a, job, outputs, data, metrics):
    if job == "markdup" and data.get("devnull"):
        own, peer = duplicate_counts(metrics)
        if own == peer:
            return f"duplicate counts equal ({own[0]:,} pairs, {own[1]:,} single; outputs to /dev/null)"
        return f"DUPLICATE COUNTS DIFFER {own} {peer}"
    if job == "read":
        rows = {}
        for t, o in outputs.items():
            with open(o) as f:
                rows[t] = f.read().strip()
        ok = len(set(rows.values())) == 1 and int(next(iter(rows.values()))) == data["records"]
        return "rows equal" if ok else f"ROWS DIFFER {rows}"
    f = records_md5 if job.startswith("sort") else dup_flags
    sums = {t: f(a.samtools, o) for t, o in outputs.items()}
    if len(set(sums.values())) == 1:
        return "records identical" if job.startswith("sort") else "duplicate flags identical"
    return f"DIFFER {sums}"


def plot(a):
    rows = list(csv.DictReader(open(a.csv)))
    newest = {}
    for r in rows:
        key = (r["job"], r["data"], r["tool"])
        if key not in newest or r["date_utc"] > newest[key]["date_utc"]:
            newest[key] = r
    rows = sorted(newest.values(), key=lambda r: (JOBS.index(r["job"]), int(r["records"]),
                                                   r["tool"] != "sortase"))
    print("| job | data | records | tool | wall s | CPU s | CPU µs/record | wall µs/record "
          "| peak RSS MiB | budget MiB | temp peak MiB | temp files peak / total | check |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        n = int(r["records"])
        print(f"| {r['job']} | {r['data']} | {n:,} | {r['tool']} | {float(r['wall_s']):.1f} | "
              f"{float(r['cpu_s']):.1f} | {float(r['cpu_s']) / n * 1e6:.2f} | "
              f"{float(r['wall_s']) / n * 1e6:.2f} | {r['rss_mib']} | {r['budget_mib'] or '-'} | "
              f"{int(r['temp_peak_bytes']) >> 20} | {r['temp_peak_files']} / {r['temp_files_total']} "
              f"| {r['check']} |")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    jobs = [j for j in JOBS if any(r["job"] == j for r in rows)]
    metrics = [("CPU µs per record", lambda r: float(r["cpu_s"]) / int(r["records"]) * 1e6),
               ("wall µs per record", lambda r: float(r["wall_s"]) / int(r["records"]) * 1e6),
               ("peak RSS (MiB)", lambda r: float(r["rss_mib"])),
               ("temporary files (total)", lambda r: int(r["temp_files_total"]))]
    fig, axes = plt.subplots(len(metrics), len(jobs), figsize=(3.6 * len(jobs), 2.6 * len(metrics)),
                             squeeze=False)
    for j, job in enumerate(jobs):
        for m, (name, value) in enumerate(metrics):
            ax = axes[m][j]
            for tool in dict.fromkeys(r["tool"] for r in rows if r["job"] == job):
                pts = [(int(r["records"]), value(r)) for r in rows
                       if r["job"] == job and r["tool"] == tool]
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=tool)
            ax.set_xscale("log")
            ax.set_ylim(bottom=0)
            if m == 0:
                ax.set_title(job)
            if j == 0:
                ax.set_ylabel(name)
            if m == len(metrics) - 1:
                ax.set_xlabel("records")
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    fig.suptitle("Cost per record against data size (2 threads; bench/cost_curve.py)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(a.png), exist_ok=True)
    # the points drawn, for tests/test_bench_report: a plot that lost a row of the table fails
    drawn = [f"{r['job']}/{r['data']}/{r['tool']}" for r in rows]
    fig.savefig(a.png, dpi=90, metadata={"Description": "jobs: " + ",".join(drawn)})
    print(f"\n![cost curve]({os.path.relpath(a.png, BENCH)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["run", "plot"])
    ap.add_argument("--data", action="append", default=[], metavar="SIZE=DIR",
                    help="a data set: DIR/SIZE.bam, DIR/SIZE.sorted.bam, DIR/SIZE.json")
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sortase", default=os.path.join(REPO, "target", "release", "sortase"))
    ap.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"),
                    help="a Python with the sortase package (a release wheel) for `read`")
    ap.add_argument("--samtools", default=f"{sys.executable} {os.path.join(BENCH, 'samtools-1.24')}")
    ap.add_argument("--scratch", default=None, help="directory for outputs and temporary files")
    ap.add_argument("--csv", default=CSV)
    ap.add_argument("--png", default=PNG)
    a = ap.parse_args()
    if a.mode == "run":
        if not a.data:
            ap.error("run needs --data SIZE=DIR")
        run_jobs(a)
    else:
        plot(a)


if __name__ == "__main__":
    main()
