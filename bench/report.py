#!/usr/bin/env python3
"""One command regenerates the benchmark report (issue 22): every job of every landed command, sortase
against samtools 1.24 built with libdeflate (the speed peer), Debian's samtools 1.16 and the other peers,
side by side in alternating rounds, outputs checked in the same run; then the summary table, plots, a
64-core model and profiles of the jobs where sortase's lead is under 1.2x.

    python3 bench/report.py [--size small|large] [--pairs 2] [--threads 2] [--cases a,b,...]
                            [--no-setup] [--no-profiles] [--from-json DIR]

Steps:
  1. set-up (unless --no-setup): `cargo build --release`; the peer (`bench/setup-peer.sh`: samtools 1.24
     from pysam 0.24.1's source distribution with libdeflate, in its own venv); `apt-get install` of the
     Debian peers when missing and running as root; the data (`bench/generate.py --size SIZE
     --keep-fastq`, `bench/generate_fasta.py`).
  2. every case of bench/compare.py (list: --cases, default all) with `--samtools
     bench/samtools-1.24-libdeflate --debian-samtools`: alternating rounds, outputs checked. Each run's
     section goes to bench/RESULTS-archive.md and its rows to bench/results.csv; the summary JSON to
     bench/report/CASE.json.
  3. thread scaling: the sortase variant of every case again at 1 thread, pinned to one CPU (taskset;
     one command, --pairs rounds); Karp-Flatt serial fraction from the 1- and 2-thread medians.
     `--scaling-only` runs just this step for every stored case, with sortase's own N-thread runs
     beside the 1-thread ones, so both come from one run at one commit (the 64-core table).
  4. compression levels 1-9: `sortase view -O bam,level=L` and `samtools view -O bam,level=L` of the sorted BAM,
     wall time and output size.
  5. profiles (unless --no-profiles): `perf record -g` of sortase in each job where it is behind
     samtools 1.24 or ahead by less than 1.2x; the top symbols go into bench/report/profile-CASE.txt and
     the report.
  6. bench/RESULTS.md is rewritten: header (machine, tool versions: the peer's `--version` shows
     libdeflate=yes), summary table, plots (bench/report/*.png, matplotlib), the 64-core model, the
     notes on the slow jobs. Per-run sections live in bench/RESULTS-archive.md.

How long: the small data (0.8M records, 105 MB BAM) takes about 30-40 minutes on 2 cores with
--pairs 2; the large (13.2M records, 1.77 GB) several hours. The machine must be otherwise idle.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import compare  # noqa: E402  (the case table and helpers)

PEER = os.path.join(BENCH, "samtools-1.24-libdeflate")
DEBIAN_SAMTOOLS = "/usr/bin/samtools"
OUT_DIR = os.path.join(BENCH, "report")
RESULTS_MD = os.path.join(BENCH, "RESULTS.md")
ARCHIVE_MD = os.path.join(BENCH, "RESULTS-archive.md")
SORTASE = os.path.join(REPO, "target", "release", "sortase")

# Labels as the report shows them (compare.py's labels on the left).
PEER_NAMES = {
    "samtools-1.24": "samtools 1.24 (libdeflate)",
    "samtools-1.16": "samtools 1.16 (Debian)",
}
# The peer a case's headline ratio is taken against: samtools 1.24 with libdeflate where it runs the
# job, else the tool users run for it.
HEADLINE_PEER = {
    "fetch-3000": "bgzip-b-s-loop", "bgzip-compress": "bgzip-1.16", "bgzip-decompress": "bgzip-1.16",
    "markdup-query-u": "samblaster", "markdup-query": "samblaster", "markdup-coord": "picard",
    "fq2bam": "mm2-samblaster-sort",
}
FASTA_CASES = {"fetch-3000", "faidx-3000", "faidx-build", "loc-build", "bgzip-compress",
               "bgzip-decompress"}
LEAD_TARGET = 1.2

# Why a job leads by less than LEAD_TARGET, and what would close the gap: the lead's reading of
# the profiles and floors (printed under the job's profile when it is below the target).
EXPLAIN = {
    "bgzip-compress": "Both tools run libdeflate at the same level on the same 64 KiB blocks, and "
                      "86% of sortase's samples are in libdeflate's compressor: this is the DEFLATE "
                      "floor. The lead that is left comes from overlapping reading and writing with "
                      "compression; only a lower level would go faster.",
    "bgzip-decompress": "80% of the samples are in libdeflate's inflate: the inflate floor. The "
                        "output is written through a pipe to a file by the shell in both tools.",
    "merge": "At -l 6, 72% of the samples are DEFLATE and 14% inflate, and sortase runs 1.18x its "
             "own recompress floor: the same compression work as samtools with libdeflate. The "
             "lead grows where DEFLATE does not dominate (merge-u) and with cores (samtools merges "
             "on one thread).",
    "fq2bam": "Alignment-bound: minimap2 alone (SAM to /dev/null) takes 0.81x of sortase's wall "
              "time, so even with free sorting, marking and compression the pipeline could not "
              "be beaten by more than ~1.4x on this machine. The profile is minimap2's "
              "(mm_idx_get, chaining, ksw2). What remains above the aligner is compressing, "
              "sorting and indexing, overlapped with it.",
    "cram-view-count": "The job takes ~0.1 s on the small CRAM: process start and header/index "
                       "set-up dominate, and both sides run htslib's decoder with the same "
                       "required-fields option. The large data decide (`compare.py cram-view-count "
                       "--size large`); sortase's htslib is 1.19.1 with htscodecs built without "
                       "SIMD flags, which costs on rANS-Nx16 decoding.",
    "cram-flagstat": "As cram-view-count: ~0.1 s, start-up dominated, the same htslib decoder.",
    "cram-encode": "Encoding is htslib's own work in both tools (1.19.1 here, 1.24 in the peer); "
                   "sortase adds only the hand-over of raw records. Closing it needs htscodecs "
                   "built with SIMD (hts-sys sets the flags only when the Rust target enables "
                   "them: `-C target-cpu`) or a newer htslib.",
    "cram-sort": "The sort itself is sortase's (in memory, parallel), but the CRAM encode that "
                 "dominates is htslib's in both tools and runs in htslib's pool; as cram-encode.",
    "cram-decode": "Decoding is htslib's; sortase's BAM writing is its own.",
}


def sh(cmd, **kw):
    print(f"+ {cmd}", flush=True)
    return subprocess.run(cmd, shell=True, executable="/bin/bash", **kw)


def setup(args):
    sh(f"cd {shlex.quote(REPO)} && cargo build --release", check=True)
    if subprocess.run([PEER, "--version"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        sh(f"bash {shlex.quote(os.path.join(BENCH, 'setup-peer.sh'))}", check=True)
    # the peers and tools (sambamba, biobambam2, samblaster, picard, bgzip, perf): setup.sh's one list
    sh(f"bash {shlex.quote(os.path.join(REPO, 'scripts', 'setup.sh'))} --bench", check=False)
    # mako, dupblaster, polars-bio (issue 33) in their own root; a case whose peer is missing fails
    # alone (compare.py exits non-zero and the report goes on)
    sh(f"bash {shlex.quote(os.path.join(BENCH, 'setup-peer.sh'))} --tools", check=False)
    py = shlex.quote(sys.executable)  # the clone's .venv python when run as the bench README says
    sh(f"{py} {shlex.quote(os.path.join(BENCH, 'generate.py'))} --size {args.size} --keep-fastq "
       f"--out {shlex.quote(args.data)}", check=True)
    if FASTA_CASES & set(args.cases):
        sh(f"{py} {shlex.quote(os.path.join(BENCH, 'generate_fasta.py'))} --data "
           f"{shlex.quote(args.data)}", check=True)


# The 1-thread runs of the scaling table are pinned to one CPU: unpinned, a `-@ 1` run's reader
# and writer threads used a second core beside the worker (110-145% CPU), so T1 understated the
# serial time (issue 33).
PIN_ONE_CPU = "taskset -c 0"


def run_case(args, case, threads, only_sortase):
    """compare.py for one case; returns its JSON summary or None when it failed. The sortase-only
    runs of the scaling table (`only_sortase`) at 1 thread are pinned to one CPU."""
    tag = f"{case}.t{threads}" + (".sortase" if only_sortase else "")
    out = os.path.join(OUT_DIR, tag + ".json")
    if args.from_json:
        path = os.path.join(args.from_json, tag + ".json")
        return json.load(open(path)) if os.path.exists(path) else None
    cmd = [sys.executable, os.path.join(BENCH, "compare.py"), case, "--size", args.size, "--data",
           args.data, "--threads", str(threads), "--pairs", str(args.pairs), "--samtools", PEER,
           "--sortase", (f"{PIN_ONE_CPU} {SORTASE}" if only_sortase and threads == 1 else SORTASE),
           "--json", out, "--results-md", ARCHIVE_MD]
    if only_sortase:
        cmd += ["--only", "sortase", "--no-floor", "--no-check", "--no-record"]
    elif case not in FASTA_CASES and case != "fq2bam":
        cmd += ["--debian-samtools", DEBIAN_SAMTOOLS]
    if os.path.exists(out):
        os.remove(out)
    print(f"\n=== {tag}", flush=True)
    rc = subprocess.run(cmd).returncode
    if rc == 3 and os.path.exists(out):
        # the runs finished and the outputs differ: reported as DIFFER in the table
        return json.load(open(out))
    if rc != 0 or not os.path.exists(out):
        print(f"!!! {tag}: compare.py exited {rc}", flush=True)
        return None
    return json.load(open(out))


def stored_results(json_dir, threads, cases=None):
    """Every case's stored summaries in `json_dir` (compare.py's CASE.tN.json and the 1-thread
    CASE.t1.sortase.json), in compare.py's case order: (results, scaling, stderr by case). The report
    is always built from all of them, so a run of a few cases (--cases) updates their rows and keeps
    the others' (issue 33: a one-case run had left every plot with one job)."""
    results, scaling, stderr = {}, {}, {}
    for case in cases or compare.CASES:
        path = os.path.join(json_dir, f"{case}.t{threads}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            s = json.load(f)
        results[case] = s
        path1 = os.path.join(json_dir, f"{case}.t1.sortase.json")
        if threads > 1 and os.path.exists(path1):
            with open(path1) as f:
                s1 = json.load(f)
            # the scaling run's own N-thread runs (--scaling-only) when there are some
            pathn = os.path.join(json_dir, f"{case}.t{threads}.sortase.json")
            if os.path.exists(pathn):
                with open(pathn) as f:
                    s = json.load(f)
            scaling[case] = (s1, s)
            stderr[case] = {1: s1.get("stderr_round1", {}).get("sortase", ""),
                            threads: s.get("stderr_round1", {}).get("sortase", "")}
    return results, scaling, stderr


def stored_profiles(json_dir, cases):
    """The stored `perf` tops (profile-CASE.txt) of `cases`."""
    out = {}
    for case in cases:
        path = os.path.join(json_dir, f"profile-{case}.txt")
        if os.path.exists(path):
            with open(path) as f:
                out[case] = f.read()
    return out


# A 2-thread run whose speed-up over 1 thread is within this (or the rounds' own spread, if larger)
# of 1.0 says nothing about the serial fraction: Karp-Flatt would read noise as e = 1.0.
MIN_NOISE = 0.05
# 1- and 2-thread runs started further apart than this come from different report runs (and may be
# different builds): their ratio is not a speed-up.
SAME_RUN_HOURS = 2.0


def spread(v):
    """Relative spread of a variant's rounds: (max - min) / median."""
    return (v["wall_max"] - v["wall_min"]) / v["wall_median"] if v["wall_median"] else 0.0


def round_noise(s1, s2):
    """The relative noise of a 1- and n-thread pair: their rounds' spreads, at least MIN_NOISE."""
    return max(MIN_NOISE, spread(s1["variants"][0]) + spread(s2["variants"][0]))


def karp_flatt(s1, s2, n):
    """(T1, T2, e or None, why not) for the 1- and n-thread summaries of one case: e is the
    Karp-Flatt serial fraction when the pair fits the model, else None and the reason."""
    v1, v2 = s1["variants"][0], s2["variants"][0]
    t1, t2 = v1["wall_median"], v2["wall_median"]
    started = [datetime.datetime.fromisoformat(x["started"]) for x in (s1, s2)]
    hours = abs((started[1] - started[0]).total_seconds()) / 3600
    noise = round_noise(s1, s2)
    speedup = t1 / t2
    commits = [x.get("commit") for x in (s1, s2)]
    if None in commits:
        return t1, t2, None, "runs from before the pinned scaling runs (no commit recorded)"
    if commits[0] != commits[1]:
        return t1, t2, None, f"1- and {n}-thread runs at different commits ({commits[0]}, {commits[1]})"
    if hours > SAME_RUN_HOURS:
        return t1, t2, None, f"1- and {n}-thread runs {hours:.0f} h apart (different runs)"
    if speedup - 1 <= noise:
        return t1, t2, None, f"speed-up {speedup:.2f}x within noise (±{noise:.0%})"
    if speedup > n * (1 + noise):
        return t1, t2, None, f"speed-up {speedup:.2f}x above {n}x"
    return t1, t2, max(0.0, min(1.0, (n * t2 / t1 - 1) / (n - 1))), ""


def serial_floor(s1, s2, n):
    """The least serial fraction the rounds can tell from zero: e moves by n·(T2/T1)·noise/(n-1)
    when T2/T1 moves by the rounds' noise. A smaller e is reported as below it, and the projection
    uses it (an upper bound on T64), not e: two cores cannot show a 64x speed-up."""
    v1, v2 = s1["variants"][0], s2["variants"][0]
    return n * (v2["wall_median"] / v1["wall_median"]) * round_noise(s1, s2) / (n - 1)


def scaling_commit(scaling):
    """The commit every scaling pair was run at, or None when they differ or are not recorded."""
    commits = {x.get("commit") for pair in scaling.values() for x in pair}
    return commits.pop() if len(commits) == 1 and None not in commits else None


def save_plot(fig, out_dir, key, jobs, pngs):
    """Saves a plot as out_dir/KEY.png with the jobs it shows in its PNG text (`Description:
    jobs: a,b,...`), which python/tests/test_bench_report.py checks against the tables."""
    pngs[key] = f"report/{key}.png"
    fig.savefig(os.path.join(out_dir, f"{key}.png"), dpi=110,
                metadata={"Description": "jobs: " + ",".join(jobs)})


def levels(args):
    """Wall time and output size of `view -O bam,level=L` of the sorted BAM, L = 1..9, sortase and the
    peer alternating."""
    out = os.path.join(OUT_DIR, "levels.json")
    if args.from_json:
        path = os.path.join(args.from_json, "levels.json")
        return json.load(open(path)) if os.path.exists(path) else []
    src = os.path.join(args.data, f"{args.size}.sorted.bam")
    rows = []
    with tempfile.TemporaryDirectory(dir=args.data) as tmp:
        dst = os.path.join(tmp, "out.bam")
        for level in range(1, 10):
            for tool, cmd in (("sortase", f"{SORTASE} view -O bam,level={level} -@{args.threads} -o {dst} {src}"),
                              ("samtools 1.24 (libdeflate)",
                               f"{PEER} view -O bam,level={level} -@{args.threads} -o {dst} {src}")):
                walls = []
                for _ in range(args.pairs):
                    subprocess.run(["sync"])
                    t0 = time.perf_counter()
                    subprocess.run(cmd, shell=True, check=True)
                    walls.append(time.perf_counter() - t0)
                rows.append({"tool": tool, "level": level, "wall": statistics.median(walls),
                             "bytes": os.path.getsize(dst)})
                print(f"level {level} {tool}: {rows[-1]['wall']:.2f} s {rows[-1]['bytes']:,} bytes",
                      flush=True)
    json.dump(rows, open(out, "w"), indent=1)
    return rows


PHASE = re.compile(r"phase (\S+)\s+([\d.]+) s wall\s+(\d+)% CPU")


def phases(stderr):
    return [(m.group(1), float(m.group(2))) for m in PHASE.finditer(stderr or "")]


def profile(args, case, summary):
    """perf record of sortase's command in one case; returns the top of the flat profile."""
    path = os.path.join(OUT_DIR, f"profile-{case}.txt")
    if args.from_json:
        return open(path).read() if os.path.exists(path) else ""
    sortase = next(v for v in summary["variants"] if v["label"] == "sortase")
    cmd = sortase["command"]
    with tempfile.TemporaryDirectory(dir=args.data) as tmp:
        # the command's output paths lived in compare.py's (removed) scratch dir: point them here
        cmd = re.sub(r"/\S*/compare-tmp/[^/\s]+/sortase/", tmp + "/", cmd)
        os.makedirs(os.path.join(tmp, "tmp"), exist_ok=True)
        data = os.path.join(tmp, "perf.data")
        rc = sh(f"perf record -q -F 499 -g -o {data} -- bash -c {shlex.quote(cmd)} > /dev/null "
                f"2>{tmp}/perf.err").returncode
        if rc != 0:
            return f"(perf record failed: {open(tmp + '/perf.err').read()[-300:]})"
        rep = subprocess.run(f"perf report -i {data} --stdio --no-children --sort dso,symbol "
                             f"--percent-limit 2 2>/dev/null | grep -E '^ +[0-9.]+%' | head -12",
                             shell=True, stdout=subprocess.PIPE, text=True).stdout
        rep = "\n".join(re.sub(r"[\s-]+$", "", ln) for ln in rep.splitlines())
    text = f"$ perf record -F 499 -g -- {cmd}\n{rep}"
    open(path, "w").write(text)
    return text


def samtools_version(cmd):
    """`samtools --version`'s first line and its libdeflate line (the build the figures are for)."""
    out = subprocess.run(f"{cmd} --version", shell=True, stdout=subprocess.PIPE, text=True,
                         errors="replace").stdout
    lines = out.splitlines() or ["unknown"]
    found = re.search(r"libdeflate=\w+", out)
    deflate = found.group(0) if found else "libdeflate not reported"
    return f"{lines[0].strip()}; {deflate}"


def fmt_s(x):
    return "-" if x is None else (f"{x:.2f}" if x < 100 else f"{x:.0f}")


def tool_versions():
    """This machine's description and the tools' versions, as the report's header shows them."""
    mi = compare.machine_info()
    versions = {
        "sortase": compare.first_line(f"{SORTASE} --version"),
        "samtools 1.24 (the peer)": samtools_version(PEER),
        "samtools 1.16 (Debian)": samtools_version(DEBIAN_SAMTOOLS),
    }
    for exe, flag in (("sambamba", "--version"), ("samblaster", "--version"), ("bamsormadup", "--version"),
                      ("PicardCommandLine", "MarkDuplicates --version"), ("bgzip", "--version")):
        if shutil.which(exe):
            # Picard prints its version last, after JVM banners
            versions[exe] = compare.first_line(f"{exe} {flag} 2>&1 | grep -v '^$' | "
                                               + ("tail -1" if exe == "PicardCommandLine" else "head -1"))

    return mi, versions


def write_report(args, results, scaling, level_rows, profiles, started, minutes,
                 out_dir=None, results_md=None):
    """Writes RESULTS.md (`results_md`) and the plots (into `out_dir`) from the summaries."""
    out_dir = out_dir or OUT_DIR
    results_md = results_md or RESULTS_MD
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env_json = os.path.join(args.from_json or OUT_DIR, "environment.json")
    if args.from_json and os.path.exists(env_json):
        # Rebuilt from stored runs: the machine and tool versions are those of the runs, stored
        # when they ran, not this machine's.
        with open(env_json) as f:
            env = json.load(f)
        mi, versions = env["machine"], env["versions"]
    else:
        mi, versions = tool_versions()
        with open(os.path.join(out_dir, "environment.json"), "w") as f:
            json.dump({"machine": mi, "versions": versions}, f, indent=1)

    rows = []
    for case, s in results.items():
        if s is None:
            rows.append({"case": case, "failed": True})
            continue
        v = {x["label"]: x for x in s["variants"]}
        base = v["sortase"]
        floor = next((x for x in s["variants"] if x["role"] == "floor"), None)
        peer = HEADLINE_PEER.get(case, "samtools-1.24")
        peer_v = v.get(peer)
        rows.append({
            "case": case, "data": f"{os.path.basename(s['input'])}"
            + (f", {s['records']:,} records" if s.get("records") else ""),
            "sortase": base, "variants": v, "peer": peer, "peer_v": peer_v,
            "ratio": peer_v["wall_median"] / base["wall_median"] if peer_v else None,
            "deb": next((x for lab, x in v.items() if lab.startswith("samtools-1.16")), None),
            "floor": floor,
            "floor_ratio": s.get("sortase_over_floor"), "check": s.get("check_ok"),
        })

    # ---------------------------------------------------------------- plots
    ok = [r for r in rows if not r.get("failed")]
    pngs = {}
    names = [r["case"] for r in ok]

    fig, ax = plt.subplots(figsize=(8, 0.35 * len(ok) + 1.5))
    ratios = [r["ratio"] or 0 for r in ok]
    ax.barh(names, ratios, color=["#2a7" if x >= LEAD_TARGET else ("#da3" if x >= 1 else "#c33")
                                  for x in ratios])
    ax.axvline(1, color="k", lw=0.8)
    ax.axvline(LEAD_TARGET, color="k", lw=0.5, ls=":")
    for i, x in enumerate(ratios):
        ax.text(x, i, f" {x:.2f}x", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("peer wall time / sortase wall time (>1: sortase faster; log scale)")
    ax.set_title(f"sortase vs samtools 1.24 (libdeflate) or the job's usual tool; {args.threads} threads")
    ax.invert_yaxis()
    fig.tight_layout()
    save_plot(fig, out_dir, "speedup", names, pngs)
    plt.close(fig)

    labels = []
    for r in ok:
        for lab in r["variants"]:
            if lab not in labels and r["variants"][lab]["role"] == "variant":
                labels.append(lab)
    def per_tool(key, field, xlabel, title):
        """A grouped bar chart of one field of every tool's summary, per job (log scale)."""
        fig, ax = plt.subplots(figsize=(10, 0.5 * len(ok) + 2))
        width = 0.8 / max(1, len(labels))
        for j, lab in enumerate(labels):
            ys = [i + j * width for i in range(len(ok))]
            xs = [r["variants"][lab][field] if lab in r["variants"] else 0 for r in ok]
            ax.barh(ys, xs, height=width, label=PEER_NAMES.get(lab, lab))
        ax.set_yticks([i + 0.4 - width / 2 for i in range(len(ok))], names)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="lower right")
        ax.invert_yaxis()
        fig.tight_layout()
        save_plot(fig, out_dir, key, names, pngs)
        plt.close(fig)

    per_tool("time", "wall_median", "median wall time (s, log scale)", "time per job per tool")
    per_tool("rss", "rss_max_mb", "peak RSS (MiB, log scale)", "peak memory per job per tool")

    fl = [r for r in ok if r["floor_ratio"]]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(fl) + 1.5))
    ax.barh([r["case"] for r in fl], [r["floor_ratio"] for r in fl], color="#57a")
    ax.axvline(1, color="k", lw=0.8)
    ax.set_xlabel("sortase wall / floor wall (1 = at the floor)")
    ax.set_title("distance from the floor (inflate, or DEFLATE at the same level)")
    ax.invert_yaxis()
    fig.tight_layout()
    save_plot(fig, out_dir, "floor", [r["case"] for r in fl], pngs)
    plt.close(fig)

    # Every job with a 1- and an n-thread run; grey: the pair does not fit Karp-Flatt (see the
    # 64-core table). It was empty when a one-case run (without a 1-thread run) rebuilt it.
    kf = {c: karp_flatt(s1, s2, args.threads) for c, (s1, s2) in scaling.items()}
    sc = [(c, t1, t2, e) for c, (t1, t2, e, _) in kf.items()]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(sc) + 1.5))
    ax.barh([c for c, *_ in sc], [t1 / t2 for _, t1, t2, _ in sc],
            color=["#7a5" if e is not None else "#bbb" for *_, e in sc])
    ax.axvline(1, color="k", lw=0.8)
    ax.axvline(args.threads, color="k", lw=0.5, ls=":")
    ax.set_xlabel(f"speed-up 1 -> {args.threads} threads (sortase; grey: within noise or "
                  "different runs)")
    ax.set_title("thread scaling")
    ax.invert_yaxis()
    fig.tight_layout()
    save_plot(fig, out_dir, "scaling", [c for c, *_ in sc], pngs)
    plt.close(fig)

    if level_rows:
        fig, ax = plt.subplots(figsize=(7, 5))
        for tool in sorted({r["tool"] for r in level_rows}):
            pts = [r for r in level_rows if r["tool"] == tool]
            ax.plot([r["bytes"] / 1e6 for r in pts], [r["wall"] for r in pts], "o-", label=tool)
            for r in pts:
                ax.annotate(str(r["level"]), (r["bytes"] / 1e6, r["wall"]), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
        ax.set_xlabel("output size (MB)")
        ax.set_ylabel("wall time (s)")
        ax.set_title(f"`view -O bam,level=1..9` of {args.size}.sorted.bam, {args.threads} threads")
        ax.legend()
        fig.tight_layout()
        save_plot(fig, out_dir, "levels", [], pngs)
        plt.close(fig)

    # ---------------------------------------------------------------- text
    when = (f"rebuilt on {started:%Y-%m-%d %H:%M} UTC from the JSON of the runs in "
            f"{args.from_json} (their dates are in the archive)" if args.from_json else
            f"on {started:%Y-%m-%d %H:%M} UTC in {minutes:.0f} minutes")
    L = ["# sortase benchmark report", "",
         f"Regenerated by `python3 bench/report.py --size {args.size} --pairs {args.pairs} "
         f"--threads {args.threads}` {when} (commit {compare.git_commit()}). Per-run sections (commands, every round) are in "
         "[RESULTS-archive.md](RESULTS-archive.md), rows in results.csv; older sessions' sections are "
         "archived there too.", "",
         f"- Machine: {mi['nproc']} CPUs ({mi['cpu']}), {mi['ram']} RAM, Linux {mi['kernel']}.",
         f"- Data: bench/generate.py `--size {args.size}` (synthetic 2x150 reads on a 314 Mbp "
         "human-like reference; aligner order and coordinate-sorted), generate_fasta.py's protein "
         "FASTA for the FASTA jobs.",
         f"- Method: each case runs its tools alternately, {args.pairs} rounds, warm page cache, "
         "`sync` before each run; medians. The peer is samtools 1.24 built with libdeflate "
         "(bench/setup-peer.sh); Debian's 1.16 (libdeflate too) is a second column.",
         "- Not in this table: `snp-pileup` against FACETS (bench/snp_pileup.py; FACETS is not "
         "packaged and must be built from its source, which this machine cannot download), the "
         "Python reader (bench/python_read.py) and the Dask driver (bench/dask_overhead.py): each "
         "has its own script and section in the archive.",
         "- Versions:"]
    for k, val in versions.items():
        L.append(f"  - {k}: `{val}`")
    L += ["", f"![sortase vs the peer per job]({pngs['speedup']})", "",
          "## Summary", "",
          "ratio = peer median wall / sortase median wall (> 1: sortase is faster); floor = sortase / "
          "the job's floor (1.00: at the floor). Check: outputs compared in the same run.", "",
          "| job | data | sortase (s) | peer | peer (s) | ratio | samtools 1.16 (s) | ratio | "
          "floor ratio | sortase CPU % | sortase RSS (MiB) | peer RSS (MiB) | check |",
          "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.get("failed"):
            L.append(f"| {r['case']} | (run failed: see the log) |||||||||||")
            continue
        b, p, d = r["sortase"], r["peer_v"], r["deb"]
        L.append(
            "| " + " | ".join([
                r["case"], r["data"], fmt_s(b["wall_median"]), PEER_NAMES.get(r["peer"], r["peer"]),
                fmt_s(p["wall_median"] if p else None), compare.fmt_ratio(r["ratio"]),
                fmt_s(d["wall_median"] if d else None),
                compare.fmt_ratio(d["wall_median"] / b["wall_median"]) if d else "-",
                compare.fmt_ratio(r["floor_ratio"]) if r["floor_ratio"] else "-",
                f"{b['cpu_pct_median']:.0f}", f"{b['rss_max_mb']:.0f}",
                f"{p['rss_max_mb']:.0f}" if p else "-",
                {True: "identical", False: "DIFFER", None: "-"}[r["check"]]]) + " |")
    others = []
    for r in ok:
        for lab, x in r["variants"].items():
            if x["role"] == "variant" and lab not in ("sortase", r["peer"]) \
                    and not lab.startswith("samtools-1.16"):
                others.append(f"{r['case']}: {lab} {fmt_s(x['wall_median'])} s "
                              f"({compare.fmt_ratio(x['wall_median'] / r['sortase']['wall_median'])})")
    if others:
        L += ["", "Other variants (ratio against sortase): " + "; ".join(others) + "."]

    L += ["", "## Plots", ""]
    for key, title in (("time", "time per job per tool"), ("floor", "sortase against the floor"),
                       ("scaling", "1 -> 2 thread scaling"), ("rss", "peak RSS"),
                       ("levels", "size against speed, levels 1-9")):
        if key in pngs:
            L.append(f"- {title}: ![{title}]({pngs[key]})")
    if level_rows:
        L += ["", "| level | " + " | ".join(f"{t} (s, MB)" for t in sorted({r['tool'] for r in level_rows}))
              + " |", "|---:|" + "---:|" * len({r['tool'] for r in level_rows})]
        for level in range(1, 10):
            cells = [f"{r['wall']:.2f}, {r['bytes'] / 1e6:.1f}" for r in
                     sorted((r for r in level_rows if r["level"] == level), key=lambda r: r["tool"])]
            L.append(f"| {level} | " + " | ".join(cells) + " |")
        by = {(r["tool"], r["level"]): r for r in level_rows}
        notes = []
        for tool in sorted({r["tool"] for r in level_rows}):
            five, six = by.get((tool, 5)), by.get((tool, 6))
            if five and six:
                notes.append(f"{tool} {six['wall'] / five['wall']:.2f}x faster, "
                             f"{100 * (five['bytes'] / six['bytes'] - 1):+.2f}% size")
        if notes:
            L += ["", "sortase's default level (`-l 5`, libdeflate 6) against samtools' default "
                  "(`-l 6`, libdeflate 7), from the rows above: " + "; ".join(notes) + "."]

    # ------------------------------------------------------- 64-core model
    L += ["", "## A model of 64 cores", "",
          "From the medians at 1 and " f"{args.threads} threads, the Karp-Flatt serial fraction "
          f"e = ({args.threads}·T{args.threads}/T1 - 1) / ({args.threads} - 1) of each job, and Amdahl's "
          "projection T64 = T1·(e + (1-e)/64). For the jobs that report phases (`-v`), the same per "
          "phase; the phase with the largest projected share is the one that saturates first. "
          "Two cores measure e poorly (it also absorbs memory-bandwidth and I/O contention), so the "
          "figures are an upper bound on the serial part, not a measurement on 64 cores. A job "
          f"whose {args.threads}-thread speed-up is within the noise of its rounds (at least "
          f"{MIN_NOISE:.0%}), above {args.threads}x, or whose 1- and {args.threads}-thread runs come "
          f"from different report runs (more than {SAME_RUN_HOURS:.0f} h apart: the build may "
          "differ) or at different commits does not fit the model and gets no projection. The "
          f"1-thread runs are `-@ 1` pinned to one CPU (`{PIN_ONE_CPU}`), so the reader and "
          "writer threads share the worker's core and T1 is the serial time. An e below what the "
          "rounds' noise can tell from zero (n·(T2/T1)·noise/(n-1)) is shown as `< floor` and the "
          "projection uses the floor: a bound, not a 64x claim."
          + (f" T1 and T{args.threads} are sortase alone, from one scaling run "
             f"(`report.py --scaling-only`) at commit {commit}."
             if (commit := scaling_commit(scaling)) else ""), "",
          "| job | T1 (s) | T1 CPU % | T2 (s) | serial fraction e | projected T64 (s) | "
          "speed-up on 64 | saturates first |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for case, (s1, s2) in scaling.items():
        n = args.threads
        t1, t2, e, why = karp_flatt(s1, s2, n)
        cpu1 = f"{s1['variants'][0]['cpu_pct_median']:.0f}"
        if e is None:
            L.append(f"| {case} | {t1:.2f} | {cpu1} | {t2:.2f} | does not fit: {why} | - | - | - |")
            continue
        floor = serial_floor(s1, s2, n)
        below = e < floor
        e = max(e, floor)
        t64 = t1 * (e + (1 - e) / 64)
        ph1 = phases((scaling_stderr.get(case) or {}).get(1, ""))
        ph2 = phases((scaling_stderr.get(case) or {}).get(n, ""))
        worst = "-"
        if ph1 and ph2 and len(ph1) == len(ph2):
            proj = []
            for (name, a), (_, b) in zip(ph1, ph2):
                pe = max(0.0, min(1.0, (n * b / a - 1) / (n - 1))) if a > 0 else 0.0
                proj.append((a * (pe + (1 - pe) / 64), name, pe))
            tot = sum(p for p, _, _ in proj) or 1
            top = max(proj)
            worst = f"{top[1]} ({100 * top[0] / tot:.0f}% of T64, e={top[2]:.2f})"
        L.append(f"| {case} | {t1:.2f} | {cpu1} | {t2:.2f} | {'< ' if below else ''}{e:.2f} | "
                 f"{'≥ ' if below else ''}{t64:.2f} | {'≤ ' if below else ''}{t1 / t64:.1f}x | {worst} |")

    # ------------------------------------------------------------ slow jobs
    slow = [r for r in ok if r["ratio"] is not None and r["ratio"] < LEAD_TARGET]
    if slow:
        L += ["", f"## Where sortase leads by less than {LEAD_TARGET}x", "",
              "Each with sortase's distance from its floor and the top of a `perf` profile of its "
              "command (bench/report/profile-CASE.txt)."]
        for r in slow:
            L += ["", f"### {r['case']}: {compare.fmt_ratio(r['ratio'])} against "
                      f"{PEER_NAMES.get(r['peer'], r['peer'])}", ""]
            if r["floor"]:
                L.append(f"Floor ({r['floor']['label']}): {fmt_s(r['floor']['wall_median'])} s; "
                         f"sortase / floor = {compare.fmt_ratio(r['floor_ratio'])}."
                         + (" sortase is within 1.25x of its floor: the floor limits, not sortase's "
                            "own work." if r["floor_ratio"] and r["floor_ratio"] <= 1.25 else ""))
            prof = profiles.get(r["case"])
            if prof:
                L += ["", "```", prof.strip(), "```"]
            if r["case"] in EXPLAIN:
                L += ["", EXPLAIN[r["case"]]]
    # The issue benches run by their own scripts (Python reader, AGD, CRAM on the large data, the
    # same-libdeflate peer) are kept by hand in RESULTS-issues.md and follow the report.
    issues_md = os.path.join(BENCH, "RESULTS-issues.md")
    if os.path.exists(issues_md):
        with open(issues_md) as f:
            L += ["", f.read().rstrip("\n")]
    with open(results_md, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"\nwrote {results_md} and {out_dir}/*.png")


scaling_stderr = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small")
    ap.add_argument("--data", default="/work/bench-data")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="all", help="comma-separated compare.py cases [all]")
    ap.add_argument("--no-setup", action="store_true")
    ap.add_argument("--no-profiles", action="store_true")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--scaling-only", action="store_true",
                    help="only the scaling table's runs: sortase alone at 1 thread (pinned) and at "
                         "--threads for every stored case, then the report rebuilt from the JSON")
    ap.add_argument("--no-levels", action="store_true")
    ap.add_argument("--from-json", metavar="DIR",
                    help="rebuild the report from an earlier run's bench/report/*.json (no runs)")
    args = ap.parse_args()
    args.data = os.path.abspath(args.data)
    if args.scaling_only:
        args.no_setup = args.no_levels = args.no_profiles = True
    args.cases = list(compare.CASES) if args.cases == "all" else args.cases.split(",")
    for c in args.cases:
        if c not in compare.CASES:
            sys.exit(f"unknown case {c!r}; known: {', '.join(compare.CASES)}")
    os.makedirs(OUT_DIR, exist_ok=True)
    if not args.from_json and os.path.exists(RESULTS_MD) and not os.path.exists(ARCHIVE_MD):
        # once: the per-session sections compare.py appended until now become the archive
        with open(RESULTS_MD) as f:
            old = f.read()
        if not old.startswith("# sortase benchmark report"):
            with open(ARCHIVE_MD, "w") as f:
                f.write("# sortase benchmark archive\n\nPer-run sections: every `bench/compare.py` run "
                        "(bench/report.py's runs append here), and the sections earlier sessions wrote "
                        "into RESULTS.md before the report existed (the figures issue 22 replaced: "
                        "their samtools 1.24 is pysam's zlib build unless the section says "
                        "libdeflate).\n\n" + old.split("\n", 1)[1])
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.time()
    if not args.no_setup and not args.from_json:
        setup(args)
    ran, profiles = {}, {}
    if args.scaling_only:
        # T1 and TN from one run at one commit, each case's two runs back to back
        stored = [c for c in args.cases
                  if os.path.exists(os.path.join(OUT_DIR, f"{c}.t{args.threads}.json"))]
        for case in stored:
            run_case(args, case, 1, True)
            run_case(args, case, args.threads, True)
        args.cases = []
    for case in args.cases:
        ran[case] = run_case(args, case, args.threads, False)
    if not args.no_scaling and not args.from_json:
        for case in args.cases:
            if ran.get(case):
                run_case(args, case, 1, True)
    level_rows = [] if args.no_levels else levels(args)
    if not level_rows:
        stored = os.path.join(args.from_json or OUT_DIR, "levels.json")
        level_rows = json.load(open(stored)) if os.path.exists(stored) else []
    if not args.no_profiles:
        for case, s in ran.items():
            if not s:
                continue
            v = {x["label"]: x for x in s["variants"]}
            peer = v.get(HEADLINE_PEER.get(case, "samtools-1.24"))
            if peer and peer["wall_median"] / v["sortase"]["wall_median"] < LEAD_TARGET:
                profiles[case] = profile(args, case, s)
    # The report shows every stored case (this run's and earlier runs'), not only --cases.
    results, scaling, stderr = stored_results(args.from_json or OUT_DIR, args.threads)
    scaling_stderr.update(stderr)
    if not args.from_json:
        results.update({c: None for c, s in ran.items() if s is None})
    profiles = {**stored_profiles(args.from_json or OUT_DIR, results), **profiles}
    write_report(args, results, scaling, level_rows, profiles, started, (time.time() - t0) / 60)
    failed = [c for c, s in ran.items() if s is None or s.get("check_ok") is False]
    if failed:
        print(f"failed or differing: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
