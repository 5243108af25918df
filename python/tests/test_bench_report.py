"""bench/report.py (issue 33): every plot shows the jobs of the table it illustrates.

A run of one case (`report.py --cases X`) had rebuilt the headline plot and the time/RSS/floor plots
with that one job while RESULTS.md still listed thirty, and left the scaling plot empty. Each plot
now records the jobs it draws in its PNG text (`Description: jobs: a,b,...`); these tests compare
them with the tables of RESULTS.md: the committed report, and one rebuilt here from the stored JSON
of bench/report after a one-case run (no benchmark runs). Fast: only matplotlib rendering.
"""
import os
import shutil
import struct
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "bench")


def png_jobs(path):
    """The jobs a plot shows, from its `Description` text chunk (None: no such chunk)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    i = 8
    while i + 8 <= len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        i += 12 + n
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            if key == b"Description" and value.startswith(b"jobs: "):
                text = value[len(b"jobs: "):].decode("latin-1")
                return [j for j in text.split(",") if j]
    return None


def table(md, heading):
    """The rows (lists of cells) of the first table under `## heading`."""
    section = md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[1:]]


def check_plots(results_md, png_dir):
    with open(results_md) as f:
        md = f.read()
    summary = [r for r in table(md, "Summary") if not r[1].startswith("(run failed")]
    jobs = [r[0] for r in summary]
    with_floor = [r[0] for r in summary if r[8] != "-"]
    modelled = [r[0] for r in table(md, "A model of 64 cores")]
    assert len(jobs) > 1, "the summary table lists fewer than two jobs"
    for key, want in (("speedup", jobs), ("time", jobs), ("rss", jobs), ("floor", with_floor),
                      ("scaling", modelled)):
        got = png_jobs(os.path.join(png_dir, f"{key}.png"))
        assert got is not None, f"{key}.png does not say which jobs it shows: regenerate it"
        assert got == want, (f"{key}.png shows {len(got)} jobs, its table {len(want)}: "
                             f"missing {sorted(set(want) - set(got))}")


def test_committed_report_plots_show_every_job():
    check_plots(os.path.join(BENCH, "RESULTS.md"), os.path.join(BENCH, "report"))


@pytest.fixture
def report(monkeypatch, tmp_path):
    """bench/report.py imported with its outputs redirected to `tmp_path/out`."""
    pytest.importorskip("matplotlib")
    monkeypatch.syspath_prepend(BENCH)
    sys.modules.pop("report", None)
    import report as module
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(module, "OUT_DIR", str(out))
    monkeypatch.setattr(module, "RESULTS_MD", str(tmp_path / "RESULTS.md"))
    monkeypatch.setattr(module, "ARCHIVE_MD", str(tmp_path / "RESULTS-archive.md"))
    monkeypatch.setattr(module, "scaling_stderr", {})
    return module


def test_one_case_run_rebuilds_every_stored_job(report, tmp_path, monkeypatch):
    stored = tmp_path / "stored"
    shutil.copytree(os.path.join(BENCH, "report"), stored,
                    ignore=shutil.ignore_patterns("*.png"))
    monkeypatch.setattr(sys, "argv", ["report.py", "--from-json", str(stored), "--cases", "sort-u",
                                      "--no-profiles"])
    assert report.main() == 0
    check_plots(str(tmp_path / "RESULTS.md"), report.OUT_DIR)
    n_stored = len([f for f in os.listdir(stored) if f.endswith(".t2.json")])
    with open(tmp_path / "RESULTS.md") as f:
        assert len(table(f.read(), "Summary")) == n_stored


def test_a_plot_with_fewer_jobs_than_the_table_fails(report, tmp_path):
    import matplotlib.pyplot as plt

    out = tmp_path / "one"
    shutil.copytree(os.path.join(BENCH, "report"), out,
                    ignore=shutil.ignore_patterns("*.json", "*.txt"))
    fig, ax = plt.subplots()
    report.save_plot(fig, str(out), "speedup", ["sort-u"], {})
    plt.close(fig)
    with pytest.raises(AssertionError, match="speedup.png shows 1 jobs"):
        check_plots(os.path.join(BENCH, "RESULTS.md"), str(out))


def test_karp_flatt_refuses_noise_and_mixed_runs(report):
    def summary(wall, spread=0.0, started="2026-11-24T20:00:00+00:00"):
        return {"started": started, "variants": [{
            "wall_median": wall, "wall_min": wall * (1 - spread / 2),
            "wall_max": wall * (1 + spread / 2), "cpu_pct_median": 100.0}]}

    stamp = lambda s: dict(s, commit="c")  # noqa: E731
    t1, t2, e, why = report.karp_flatt(stamp(summary(4.0)), stamp(summary(2.2)), 2)
    assert why == "" and e == pytest.approx(0.1)
    assert report.karp_flatt(stamp(summary(0.45)), stamp(summary(0.50)), 2)[2] is None  # slower
    assert "noise" in report.karp_flatt(stamp(summary(1.0, 0.3)), stamp(summary(0.8, 0.3)), 2)[3]
    late = stamp(summary(0.05, started="2026-11-25T02:44:00+00:00"))
    assert "different runs" in report.karp_flatt(stamp(summary(0.11)), late, 2)[3]
    assert "above 2x" in report.karp_flatt(stamp(summary(3.0)), stamp(summary(1.0)), 2)[3]
    assert "no commit" in report.karp_flatt(summary(4.0), summary(2.2), 2)[3]
    # a speed-up of 2x on 2 cores is e = 0 within 5% noise: bounded by the noise, not 64x
    assert report.serial_floor(summary(4.0), summary(2.0), 2) == pytest.approx(0.05)
    at = lambda s, c: dict(s, commit=c)  # noqa: E731
    assert "different commits" in report.karp_flatt(at(summary(4.0), "a"), at(summary(2.2), "b"), 2)[3]
    assert report.karp_flatt(at(summary(4.0), "a"), at(summary(2.2), "a"), 2)[3] == ""


def frontier_rows(md):
    """(job vs peer) of each row of the frontier table in RESULTS.md (issue 33)."""
    return [f"{r[0]} vs {r[3]}" for r in table(md, next(
        h for h in (ln[3:] for ln in md.splitlines() if ln.startswith("## "))
        if h.startswith("Issue 33: the frontier")))]


def test_frontier_plot_shows_every_row_of_its_table():
    with open(os.path.join(BENCH, "RESULTS.md")) as f:
        want = frontier_rows(f.read())
    got = png_jobs(os.path.join(BENCH, "report", "frontier.png"))
    assert len(want) >= 9, "the frontier table lost rows"
    assert got == want, f"frontier.png shows {got}, its table {want}"


def test_frontier_plot_rebuilt_from_stored_rows(tmp_path):
    """bench/frontier.py draws what results.csv holds (no benchmark runs); a row it cannot find
    leaves both the table and the plot."""
    import subprocess
    png = tmp_path / "f.png"
    out = subprocess.run([sys.executable, os.path.join(BENCH, "frontier.py"), "--input", "m4/",
                          "--png", str(png)], capture_output=True, text=True)
    if out.returncode != 0 and "No module named 'matplotlib'" in out.stderr:
        pytest.skip("matplotlib is not installed")
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and not ln.startswith("| job")]
    assert png_jobs(str(png)) == [f"{r.split('|')[1].strip()} vs {r.split('|')[4].strip()}" for r in rows]


def cost_rows(md):
    """job/data/tool of each row of the cost-curve table in RESULTS.md (issue 33)."""
    rows = table(md, next(h for h in (ln[3:] for ln in md.splitlines() if ln.startswith("## "))
                          if h.startswith("Issue 33: genome-like scale")))
    return [f"{r[0]}/{r[1]}/{r[3]}" for r in rows if len(r) == 13 and r[0] != "job"]


def test_cost_curve_plot_shows_every_row_of_its_table():
    with open(os.path.join(BENCH, "RESULTS.md")) as f:
        want = cost_rows(f.read())
    assert len(want) >= 20, "the cost-curve table lost rows"
    got = png_jobs(os.path.join(BENCH, "report", "cost_curve.png"))
    assert got is not None, "cost_curve.png does not say what it draws: run cost_curve.py plot"
    assert got == want, f"cost_curve.png draws {got}, its table {want}"


def test_cost_curve_plot_rebuilt_from_stored_rows(tmp_path):
    """bench/cost_curve.py plot draws the newest row of every job, size and tool in its CSV, and
    prints the same rows as its table (no benchmark runs)."""
    import subprocess
    png = tmp_path / "c.png"
    out = subprocess.run([sys.executable, os.path.join(BENCH, "cost_curve.py"), "plot",
                          "--png", str(png)], capture_output=True, text=True)
    if out.returncode != 0 and "No module named 'matplotlib'" in out.stderr:
        pytest.skip("matplotlib is not installed")
    assert out.returncode == 0, out.stderr
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in out.stdout.splitlines()
            if ln.startswith("| ") and not ln.startswith("| job")]
    assert png_jobs(str(png)) == [f"{r[0]}/{r[1]}/{r[3]}" for r in rows]
