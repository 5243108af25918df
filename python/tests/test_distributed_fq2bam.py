"""sortase.distributed.fq2bam on a LocalCluster of 2 worker processes: byte identity (BAM and
.csi) with the single-machine CLI (``sortase fq2bam``) on simulated read pairs cut into several
chunks, over a local path and an S3 API server (moto); the minimap2 index loaded once per worker
process; an AGD dataset of the reads (Persona's pipeline); a worker killed in the middle of the
job; bad FASTQ input fails with the one-machine job's message and leaves nothing behind, locally
and in the bucket."""

from __future__ import annotations

import gzip
import os
import random
import subprocess
from pathlib import Path

import pytest

pysam = pytest.importorskip("pysam")
distributed_mod = pytest.importorskip("dask.distributed")

from sortase import distributed  # noqa: E402

from test_distributed import CLI, leftovers, s3, with_a_worker_killed  # noqa: E402,F401  (fixtures)

PAIRS = 3_000
# Templates per align task: 3000 pairs make at least 4 chunks.
CHUNK = 700
THREADS = 2


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True)


def revcomp(s: str) -> str:
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


def simulate(directory: Path, pairs: int = PAIRS, seed: int = 29) -> dict:
    """A reference of three contigs (the third holds a copy of a piece of the first: reads that
    map twice) and FR read pairs of 100 bases with errors, ~10% exact copies of the previous pair
    under a new name (duplicates), a few unmapped reads and discordant pairs. R1 plain, R2 gzip."""
    rng = random.Random(seed)
    contigs = {name: "".join(rng.choice("ACGT") for _ in range(n))
               for name, n in (("c1", 40_000), ("c2", 20_000), ("c3", 8_000))}
    c3 = contigs["c3"]
    contigs["c3"] = c3[:3_000] + contigs["c1"][10_000:11_200] + c3[4_200:]
    ref = directory / "ref.fa"
    with open(ref, "w") as f:
        for name, seq in contigs.items():
            f.write(f">{name}\n")
            for i in range(0, len(seq), 70):
                f.write(seq[i:i + 70] + "\n")

    def noisy(s: str) -> str:
        return "".join(rng.choice("ACGT") if rng.random() < 0.01 else c for c in s)

    names = list(contigs)
    r1, r2 = [], []
    last = None
    for i in range(pairs):
        if last is not None and rng.random() < 0.1:
            a, b = last
        else:
            seq = contigs[rng.choice(names)]
            ins = rng.randrange(200, 500)
            start = rng.randrange(0, len(seq) - ins)
            frag = seq[start:start + ins]
            if rng.random() < 0.5:
                frag = revcomp(frag)
            a, b = noisy(frag[:100]), noisy(revcomp(frag)[:100])
            kind = rng.random()
            if kind < 0.02:
                a = "".join(rng.choice("ACGT") for _ in range(100))
            elif kind < 0.04:
                other = contigs[rng.choice(names)]
                s = rng.randrange(0, len(other) - 100)
                b = other[s:s + 100]
        last = (a, b)
        name = f"sim:{i}:{rng.randrange(10_000)}"
        r1.append(f"@{name}/1\n{a}\n+\n{''.join(rng.choice('#5?I') for _ in a)}\n")
        r2.append(f"@{name}/2\n{b}\n+\n{''.join(rng.choice('#5?I') for _ in b)}\n")
    (directory / "r1.fq").write_text("".join(r1))
    with gzip.open(directory / "r2.fq.gz", "wt") as f:
        f.write("".join(r2))
    return {"ref": ref, "r1": directory / "r1.fq", "r2": directory / "r2.fq.gz",
            "r1_text": "".join(r1), "r2_text": "".join(r2)}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return simulate(tmp_path_factory.mktemp("fq2bam"))


def one_machine(data: dict, out: Path, *extra: str) -> None:
    r = run_cli("fq2bam", "-@", str(THREADS), "-x", str(data["ref"]), "--write-index", *extra,
                "-o", str(out), str(data["r1"]), str(data["r2"]))
    assert r.returncode == 0, r.stderr


def test_fq2bam_is_byte_identical_and_loads_the_index_once_per_worker(data: dict, client,
                                                                        tmp_path: Path) -> None:
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    one_machine(data, one, "-R", "@RG\\tID:lane1\\tSM:s1", "--no-PG")
    report = distributed.fq2bam(data["ref"], data["r1"], data["r2"], out, client=client,
                                read_group="@RG\\tID:lane1\\tSM:s1", write_index=True, no_pg=True,
                                chunk_templates=CHUNK, reduce_tasks=3, threads=THREADS,
                                progress=False)
    assert out.read_bytes() == one.read_bytes()
    assert Path(f"{out}.csi").read_bytes() == Path(f"{one}.csi").read_bytes()
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["align"]["tasks"] >= 4 and phases["dedup"]["tasks"] == 3
    # The sort reduce tasks: at most one per key range (a small output has few).
    assert phases["map"]["tasks"] == phases["align"]["tasks"] and phases["reduce"]["tasks"] >= 1
    # One index load per worker process that ran align tasks, not one per task.
    index = report["distributed"]["index"]
    assert index["align_tasks"] >= 4
    assert index["loads"] == index["worker_processes"] <= 2
    assert report["fragments"] == PAIRS and report["duplicate_templates"] > 100
    with pysam.AlignmentFile(str(out), "rb") as f:
        assert "SO:coordinate" in str(f.header) and "ID:minimap2" in str(f.header)
        assert sum(1 for r in f if r.flag & 1024) > 200
    assert leftovers(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "dask.bam", "dask.bam.csi", "one.bam", "one.bam.csi"]


def test_fq2bam_cuts_bgzf_reads_by_blocks(data: dict, client, tmp_path: Path) -> None:
    """BGZF reads (as bgzip writes them): scan tasks over byte ranges of each file find the
    records, no task reads a whole file, and the bytes are one machine's on the same files."""
    bgzf = {}
    for key, text in (("r1", data["r1_text"]), ("r2", data["r2_text"])):
        plain = tmp_path / f"{key}.fq"
        plain.write_text(text)
        bgzf[key] = tmp_path / f"{key}.fq.gz"
        pysam.tabix_compress(str(plain), str(bgzf[key]), force=True)
        plain.unlink()
    reads = dict(data, **bgzf)
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    one_machine(reads, one, "--no-PG")
    report = distributed.fq2bam(reads["ref"], reads["r1"], reads["r2"], out, client=client,
                                write_index=True, no_pg=True, chunk_templates=CHUNK,
                                scan_bytes="40K", threads=THREADS, progress=False)
    assert out.read_bytes() == one.read_bytes()
    assert Path(f"{out}.csi").read_bytes() == Path(f"{one}.csi").read_bytes()
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    sizes = sum(-(-bgzf[k].stat().st_size // (40 << 10)) for k in bgzf)
    assert phases["scan"]["tasks"] == sizes >= 4
    assert phases.get("split", {"tasks": 0})["tasks"] == 0
    assert phases["align"]["tasks"] == -(-PAIRS // CHUNK)
    assert report["fragments"] == PAIRS
    assert leftovers(tmp_path) == []


def test_fq2bam_of_an_agd_dataset_is_persona_s_pipeline(data: dict, client, tmp_path: Path) -> None:
    """Persona's pipeline: the reads imported into an AGD dataset (``agd import -1 -2``, chunks
    of an odd number of records, so pairs straddle chunks), then aligned, marked and sorted across
    the workers in runs of whole chunks: no scan or split task, and the bytes (BAM and .csi) of
    ``sortase fq2bam`` of the dataset on one machine."""
    ds = tmp_path / "reads.agd"
    r = run_cli("agd", "import", "--chunk-size", "501", "-1", str(data["r1"]), "-2",
                str(data["r2"]), "-o", str(ds))
    assert r.returncode == 0, r.stderr
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    r = run_cli("fq2bam", "-@", str(THREADS), "-x", str(data["ref"]), "--write-index", "--no-PG",
                "-o", str(one), str(ds))
    assert r.returncode == 0, r.stderr
    report = distributed.fq2bam(data["ref"], ds, None, out, client=client, write_index=True,
                                no_pg=True, chunk_templates=CHUNK, threads=THREADS,
                                progress=False)
    assert out.read_bytes() == one.read_bytes()
    assert Path(f"{out}.csi").read_bytes() == Path(f"{one}.csi").read_bytes()
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases.get("scan", {"tasks": 0})["tasks"] == 0
    assert phases.get("split", {"tasks": 0})["tasks"] == 0
    assert phases["align"]["tasks"] >= 4
    assert report["fragments"] == PAIRS and report["duplicate_templates"] > 100
    assert leftovers(tmp_path) == []


def test_fq2bam_without_marking_and_with_pg_matches_the_cli(data: dict, client,
                                                             tmp_path: Path) -> None:
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    one_machine(data, one, "--markdup", "none", "--MD")
    distributed.fq2bam(data["ref"], data["r1"], data["r2"], out, client=client, markdup="none",
                       md=True, write_index=True, chunk_templates=CHUNK, threads=THREADS,
                       progress=False)
    # sortase's @PG names each job's own command line: compare the records and the rest.
    with pysam.AlignmentFile(str(out), "rb") as a, pysam.AlignmentFile(str(one), "rb") as b:
        records = [r.to_string() for r in a]
        assert records == [r.to_string() for r in b]
        assert not any(int(r.split("\t")[1]) & 1024 for r in records)
        assert "sortase-dask fq2bam" in str(a.header)
        strip = lambda h: [line for line in str(h).splitlines() if "ID:sortase" not in line]  # noqa: E731
        assert strip(a.header) == strip(b.header)


def test_fq2bam_with_picard_marking_is_byte_identical(data: dict, client, s3,
                                                      tmp_path: Path) -> None:
    """``markdup="picard"``: the unmarked sort, then the distributed markdup in Picard's mode,
    then the distributed index; BAM and index equal ``sortase fq2bam --markdup picard``'s, on a
    path (BAI) and on S3 (CSI), and the intermediate sorted BAM is gone."""
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    one_machine(data, one, "--markdup", "picard", "--index-format", "bai", "--no-PG")
    report = distributed.fq2bam(data["ref"], data["r1"], data["r2"], out, client=client,
                                markdup="picard", write_index=True, index_format="bai",
                                no_pg=True, chunk_templates=CHUNK, reduce_tasks=3,
                                threads=THREADS, progress=False)
    assert out.read_bytes() == one.read_bytes()
    assert Path(f"{out}.bai").read_bytes() == Path(f"{one}.bai").read_bytes()
    with pysam.AlignmentFile(str(out), "rb") as f:
        marked = sum(1 for r in f if r.flag & 1024)
    assert marked > 200 and report["duplicate_records"] == marked
    assert report["outputs"] == [str(out), f"{out}.bai"]
    assert report["distributed"]["markdup"]["phases"]
    assert leftovers(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "dask.bam", "dask.bam.bai", "one.bam", "one.bam.bai"]

    fs, options = s3
    one_machine(data, one, "--markdup", "picard", "--no-PG")
    distributed.fq2bam(data["ref"], data["r1"], data["r2"], "s3://sortase-test/fqp/x.bam",
                       client=client, markdup="picard", write_index=True, no_pg=True,
                       chunk_templates=CHUNK, threads=THREADS, storage_options=options,
                       progress=False)
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/fqp/x.bam") == one.read_bytes()
    assert fs.cat_file("sortase-test/fqp/x.bam.csi") == Path(f"{one}.csi").read_bytes()
    assert sorted(fs.ls("sortase-test/fqp", detail=False)) == [
        "sortase-test/fqp/x.bam", "sortase-test/fqp/x.bam.csi"]


def test_fq2bam_with_picard_marking_that_fails_leaves_nothing(data: dict, client,
                                                               tmp_path: Path) -> None:
    """A Picard-mode run whose reads are bad fails with the CLI's message, and neither the
    output nor the intermediate sorted BAM stays."""
    r1, short = bad_inputs(data, tmp_path)[0]
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(Exception) as e:
        distributed.fq2bam(data["ref"], r1, short, work / "dask.bam", client=client,
                           markdup="picard", write_index=True, chunk_templates=CHUNK,
                           progress=False)
    assert str(short) in str(e.value)
    assert sorted(p.name for p in work.iterdir()) == []


def test_worker_killed_mid_fq2bam_still_byte_identical(data: dict, tmp_path: Path) -> None:
    """A worker SIGKILLed when the first align task's result reaches the scheduler (the dedup
    stage is not submitted yet: the job is provably in the middle)."""
    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    one_machine(data, one, "--no-PG")
    with_a_worker_killed(tmp_path, "align", lambda c: (
        distributed.fq2bam(data["ref"], data["r1"], data["r2"], out, client=c, no_pg=True,
                           write_index=True, chunk_templates=CHUNK, threads=THREADS,
                           progress=False)))
    assert out.read_bytes() == one.read_bytes()
    assert Path(f"{out}.csi").read_bytes() == Path(f"{one}.csi").read_bytes()
    assert leftovers(tmp_path) == []


def bad_inputs(data: dict, directory: Path) -> list:
    """(R1, R2) pairs that fail: R2 short of a record, R2 with a renamed read, R1 gzip cut in
    the middle."""
    r2 = data["r2_text"]
    short = directory / "short.fq"
    short.write_text("".join(r2.splitlines(keepends=True)[:4 * 2_500]))
    renamed = directory / "renamed.fq"
    lines = r2.splitlines(keepends=True)
    lines[4 * 2_000] = lines[4 * 2_000].replace("/2", "x/2")
    renamed.write_text("".join(lines))
    cut = directory / "cut.fq.gz"
    whole = gzip.compress(data["r1_text"].encode())
    cut.write_bytes(whole[:len(whole) * 2 // 3])
    return [(data["r1"], short), (data["r1"], renamed), (cut, data["r2"])]


def test_bad_fastq_fails_with_the_cli_message_and_leaves_nothing(data: dict, client, s3,
                                                                  tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    fs, options = s3
    for i, (r1, r2) in enumerate(bad_inputs(data, inputs)):
        r = run_cli("fq2bam", "-x", str(data["ref"]), "-o", str(work / "one.bam"), str(r1), str(r2))
        assert r.returncode != 0
        message = r.stderr.strip().splitlines()[-1].split("sortase: ", 1)[-1]
        # The one-machine message names the short file and the cut gzip file (a renamed read
        # is named by its record number and names).
        assert str(r2) in message if i == 0 else str(r1) in message if i == 2 else "differ" in message
        with pytest.raises(Exception) as e:
            distributed.fq2bam(data["ref"], r1, r2, work / "dask.bam", client=client,
                               write_index=True, chunk_templates=CHUNK, progress=False)
        assert message in str(e.value)
        assert sorted(p.name for p in work.iterdir()) == []
        with pytest.raises(Exception) as e:
            distributed.fq2bam(data["ref"], r1, r2, f"s3://sortase-test/fqbad{i}/out.bam",
                               client=client, write_index=True, chunk_templates=CHUNK,
                               storage_options=options, progress=False)
        assert message in str(e.value)
        fs.invalidate_cache()
        assert not fs.exists(f"sortase-test/fqbad{i}")
        # The reads on S3 too: the message names them by their URLs, not the tasks' local copies.
        urls = [f"s3://sortase-test/fqbadin{i}/{p.name}" for p in (r1, r2)]
        for path, url in zip((r1, r2), urls):
            fs.put_file(str(path), url[len("s3://"):])
        with pytest.raises(Exception) as e:
            distributed.fq2bam(data["ref"], *urls, f"s3://sortase-test/fqbad{i}/out.bam",
                               client=client, chunk_templates=CHUNK, storage_options=options,
                               progress=False)
        assert message.replace(str(r1), urls[0]).replace(str(r2), urls[1]) in str(e.value)
        assert "sortase-dask" not in str(e.value)
        fs.invalidate_cache()
        assert not fs.exists(f"sortase-test/fqbad{i}")


def test_s3_output_is_byte_identical(data: dict, client, s3, tmp_path: Path) -> None:
    fs, options = s3
    one = tmp_path / "one.bam"
    one_machine(data, one, "--no-PG")
    report = distributed.fq2bam(data["ref"], data["r1"], data["r2"],
                                "s3://sortase-test/fq/out/x.bam", client=client, no_pg=True,
                                write_index=True, chunk_templates=CHUNK, threads=THREADS,
                                storage_options=options, progress=False)
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/fq/out/x.bam") == one.read_bytes()
    assert fs.cat_file("sortase-test/fq/out/x.bam.csi") == Path(f"{one}.csi").read_bytes()
    assert sorted(fs.ls("sortase-test/fq", detail=False)) == ["sortase-test/fq/out"]
    assert sorted(fs.ls("sortase-test/fq/out", detail=False)) == [
        "sortase-test/fq/out/x.bam", "sortase-test/fq/out/x.bam.csi"]
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["align"]["tasks"] >= 4 and phases["upload"]["tasks"] >= 1


def records_and_header(bam: bytes, tmp_path: Path) -> tuple:
    """A BAM's header text and its records as SAM lines."""
    path = tmp_path / "cmp.bam"
    path.write_bytes(bam)
    with pysam.AlignmentFile(str(path), "rb") as f:
        return str(f.header), [r.to_string() for r in f]


def test_s3_reads_and_index_equal_one_machine_but_for_their_names(data: dict, client, s3,
                                                                   tmp_path: Path) -> None:
    """Reads (BGZF) and the index on object storage: the scan tasks fetch byte ranges of the
    reads, each worker process fetches the index once and loads it once, the driver reads the
    files' first bytes only; the records and header are one machine's on local copies, but for
    minimap2's ``@PG CL:``, which names the objects as given. With a local index the BAM and its
    index are byte for byte those of ``sortase fq2bam`` reading the same URLs."""
    fs, options = s3
    urls = {}
    for key, text in (("r1", data["r1_text"]), ("r2", data["r2_text"])):
        plain = tmp_path / f"{key}.fq"
        plain.write_text(text)
        pysam.tabix_compress(str(plain), str(tmp_path / f"{key}.fq.gz"), force=True)
        plain.unlink()
    local = {"ref": data["ref"], "r1": tmp_path / "r1.fq.gz", "r2": tmp_path / "r2.fq.gz"}
    for key, path in local.items():
        urls[key] = f"s3://sortase-test/fqin/{path.name}"
        fs.put_file(str(path), urls[key][len("s3://"):])
    one = tmp_path / "one.bam"
    one_machine(local, one, "--no-PG")
    report = distributed.fq2bam(urls["ref"], urls["r1"], urls["r2"],
                                "s3://sortase-test/fqin-out/x.bam", client=client, no_pg=True,
                                write_index=True, chunk_templates=CHUNK, scan_bytes="40K",
                                threads=THREADS, storage_options=options, progress=False)
    fs.invalidate_cache()
    header, records = records_and_header(fs.cat_file("sortase-test/fqin-out/x.bam"), tmp_path)
    one_header, one_records = records_and_header(one.read_bytes(), tmp_path)
    assert records == one_records and len(records) >= 2 * PAIRS
    for key in local:
        one_header = one_header.replace(f" {local[key]}", f" {urls[key]}")
    assert header == one_header and urls["r1"] in header
    phases = {p["name"]: p for p in report["distributed"]["phases"]}
    assert phases["scan"]["tasks"] >= 4 and phases.get("split", {"tasks": 0})["tasks"] == 0
    # The scan and align tasks read the BGZF reads from their objects by ranges through the
    # library's reader: what the align tasks copied is the index alone, once per worker process
    # (minimap2 loads a file).
    assert phases["scan"]["bytes_streamed"] == phases["scan"]["bytes_read"] > 0
    copied = phases["align"]["bytes_read"] - phases["align"]["bytes_streamed"]
    assert copied <= 2 * Path(local["ref"]).stat().st_size
    # ... and so do the sort's map tasks the align and dedup tasks' files.
    assert phases["map"]["bytes_streamed"] == phases["map"]["bytes_read"] > 0
    assert sum(p.get("whole_object_fetches", 0) for p in report["distributed"]["phases"]) == 0
    index = report["distributed"]["index"]
    assert index["loads"] == index["worker_processes"] <= 2 < index["align_tasks"]
    reads_size = local["r1"].stat().st_size + local["r2"].stat().st_size
    assert 0 < report["distributed"]["plan_bytes_read"] < reads_size
    top = fs.ls("sortase-test", detail=False)
    assert not [p for p in top if ".sortase-dask-" in p], top
    assert sorted(fs.ls("sortase-test/fqin-out", detail=False)) == [
        "sortase-test/fqin-out/x.bam", "sortase-test/fqin-out/x.bam.csi"]

    # With the index a local path, the bytes are those of `sortase fq2bam` reading the same URLs.
    cli_env = dict(os.environ, AWS_ENDPOINT_URL=options["client_kwargs"]["endpoint_url"],
                   AWS_ACCESS_KEY_ID=options["key"], AWS_SECRET_ACCESS_KEY=options["secret"],
                   AWS_REGION="us-east-1")
    r = subprocess.run([str(CLI), "fq2bam", "-@", str(THREADS), "-x", str(data["ref"]),
                        "--write-index", "--no-PG", "-o", str(one), urls["r1"], urls["r2"]],
                       capture_output=True, text=True, env=cli_env)
    assert r.returncode == 0, r.stderr
    distributed.fq2bam(data["ref"], urls["r1"], urls["r2"], "s3://sortase-test/fqin-out/y.bam",
                       client=client, no_pg=True, write_index=True, chunk_templates=CHUNK,
                       scan_bytes="40K", threads=THREADS, storage_options=options, progress=False)
    fs.invalidate_cache()
    assert fs.cat_file("sortase-test/fqin-out/y.bam") == one.read_bytes()
    assert fs.cat_file("sortase-test/fqin-out/y.bam.csi") == Path(f"{one}.csi").read_bytes()


def test_console_script_fq2bam(data: dict, client, tmp_path: Path) -> None:
    from sortase import _dask_cli

    one, out = tmp_path / "one.bam", tmp_path / "dask.bam"
    one_machine(data, one, "--no-PG")
    address = client.scheduler.address
    assert _dask_cli.main(["fq2bam", "-x", str(data["ref"]), "--write-index", "--no-PG",
                           "-@", str(THREADS), "--chunk-templates", str(CHUNK), "--scheduler",
                           address, "--no-progress", "-o", str(out), str(data["r1"]),
                           str(data["r2"])]) == 0
    assert out.read_bytes() == one.read_bytes()
