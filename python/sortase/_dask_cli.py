"""``sortase-dask``: the console script of :mod:`sortase.distributed`.

    sortase-dask sort [-n|-N|-t TAG] [-l N] [-u] [--write-index] [--no-PG] -o OUT IN
    sortase-dask merge [-n|-N|-t TAG] [-r] [-c] [-p] [-s SEED] [-h FILE] [-b LIST] [-f] [-1] [-l N]
                       [-u] [--write-index] [--index-format bai|csi] [--no-PG] -o OUT IN...
    sortase-dask markdup [--mode auto|query|coordinate] [-a] [--ignoreUnmated] [--maxReadLength N]
                         [--metrics FILE] [--optical-distance N] [--read-name-regex RE]
                         [--max-optical-set N] [-l N] [-u] [--no-PG] -o OUT IN
    sortase-dask agd-markdup [--mode auto|query|coordinate] [-a] [--ignoreUnmated]
                             [--maxReadLength N] [--optical-distance N] [--read-name-regex RE]
                             [--max-optical-set N] [--level N] DATASET
    sortase-dask fq2bam -x REF.mmi|REF.fa [--preset PRESET] [-R RG] [--markdup samblaster|picard|none]
                        [--MD] [--cs] [-@ N] [--chunk-templates N] [--scan-bytes SIZE] [-l N]
                        [--write-index]
                        [--no-PG] -o OUT R1.fq [R2.fq]
    sortase-dask flagstat [-O default|json|tsv] IN
    sortase-dask idxstats IN
    sortase-dask index [-c] [-m N] [-o OUT] IN
    sortase-dask snp-pileup [-g] [-q N] [-Q N] [-P N] [-r N,...] [-A] [-x] [-d N] VCF OUT BAM...

``IN`` of sort, flagstat and idxstats may be an AGD dataset directory (``sortase agd import``);
``agd-markdup`` adds a dataset's ``duplicate`` group, as ``sortase agd markdup``.

Common options: ``--scheduler tcp://host:8786`` (default: a LocalCluster with one worker process
per core), ``--storage-option KEY=VALUE`` (repeatable; fsspec options for ``s3://`` paths),
``--progress``/``--no-progress``, ``--report`` (the JSON report on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from . import SortaseError, _sortase, distributed


def _storage_options(items: Optional[List[str]]) -> Optional[Dict[str, Any]]:
    if not items:
        return None
    options: Dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"sortase-dask: --storage-option {item!r}: expected KEY=VALUE")
        if key == "endpoint_url":
            options.setdefault("client_kwargs", {})["endpoint_url"] = value
        else:
            options[key] = value
    return options


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sortase-dask", description="sortase's jobs on a Dask cluster")
    sub = p.add_subparsers(dest="command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--scheduler", help="Dask scheduler address (default: a LocalCluster)")
        q.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                       help="fsspec option for s3:// paths (endpoint_url=, key=, secret=, ...)")
        q.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="tasks done/total on stderr (default: when stderr is a terminal)")
        q.add_argument("--report", action="store_true", help="print the JSON report on stderr")

    def output(q: argparse.ArgumentParser, uncompressed: bool = True, index: bool = True) -> None:
        """The output BAM's options: -l, -u, --write-index, --index-format, --no-PG."""
        q.add_argument("-l", dest="level", type=int, help="compression level 0-9")
        if uncompressed:
            q.add_argument("-u", dest="uncompressed", action="store_true", help="uncompressed BAM")
        if index:
            q.add_argument("--write-index", action="store_true")
            q.add_argument("--index-format", choices=["bai", "csi"])
        q.add_argument("--no-PG", dest="no_pg", action="store_true")

    def tasks(q: argparse.ArgumentParser, memory: str = "memory of one task [768M]",
              threads: str = "threads of each task [1]") -> None:
        """A job of task_memory tasks: --task-memory, --reduce-tasks, -@."""
        q.add_argument("--task-memory", default=None, help=memory)
        q.add_argument("--reduce-tasks", type=int)
        q.add_argument("-@", "--threads", type=int, default=1, help=threads)

    s = sub.add_parser("sort", help="sort a BAM or an AGD dataset (byte-identical to sortase sort "
                                    "of the BAM, or of the dataset's export)")
    s.add_argument("input")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("-n", dest="by_name", action="store_true", help="by read name (natural)")
    s.add_argument("-N", dest="by_name_lex", action="store_true", help="by read name (strcmp)")
    s.add_argument("-t", dest="tag", help="by the value of TAG")
    output(s)
    tasks(s, memory="memory of one map task [768M]")
    common(s)

    fq = sub.add_parser("fq2bam", help="align FASTQ with minimap2, mark duplicates, sort and "
                                       "index (byte-identical to sortase fq2bam)")
    fq.add_argument("-x", "--index", required=True, help="minimap2 index (.mmi) or reference FASTA")
    fq.add_argument("reads1")
    fq.add_argument("reads2", nargs="?")
    fq.add_argument("-o", "--output", required=True)
    fq.add_argument("--preset", default="sr", help="minimap2 preset [sr]")
    fq.add_argument("-R", dest="read_group", help="read group line, e.g. '@RG\\tID:lane1'")
    fq.add_argument("--markdup", choices=["samblaster", "picard", "none"], default="samblaster")
    fq.add_argument("--MD", dest="md", action="store_true", help="write MD tags")
    fq.add_argument("--cs", action="store_true", help="write short cs tags")
    output(fq, uncompressed=False)
    fq.add_argument("--chunk-templates", type=int, help="templates per align task")
    fq.add_argument("--scan-bytes", default=None,
                    help="compressed bytes of a BGZF reads file per scan task [64M]")
    tasks(fq, threads="threads of each task (minimap2's -t in @PG) [1]")
    common(fq)
    md = sub.add_parser("markdup", help="mark duplicates (samblaster's algorithm on query-grouped "
                                        "input, Picard's on coordinate-sorted input; "
                                        "byte-identical to sortase markdup)")
    md.add_argument("input")
    md.add_argument("-o", "--output", required=True)
    md.add_argument("--mode", choices=["auto", "query", "coordinate"], default="auto")
    md.add_argument("-a", "--acceptDupMarks", dest="accept_dup_marks", action="store_true")
    md.add_argument("--ignoreUnmated", dest="ignore_unmated", action="store_true")
    md.add_argument("--maxReadLength", dest="max_read_length", type=int, default=500)
    md.add_argument("--metrics", help="Picard's duplication metrics to FILE (coordinate-sorted input)")
    md.add_argument("--optical-distance", dest="optical_distance", type=int, default=100)
    md.add_argument("--read-name-regex", dest="read_name_regex")
    md.add_argument("--max-optical-set", dest="max_optical_set", type=int, default=300000)
    output(md, index=False)
    tasks(md)
    common(md)

    am = sub.add_parser("agd-markdup", help="mark the duplicates of an AGD dataset as its "
                                             "duplicate group (byte-identical to sortase agd "
                                             "markdup)")
    am.add_argument("dataset")
    am.add_argument("--mode", choices=["auto", "query", "coordinate"], default="auto")
    am.add_argument("-a", "--acceptDupMarks", dest="accept_dup_marks", action="store_true")
    am.add_argument("--ignoreUnmated", dest="ignore_unmated", action="store_true")
    am.add_argument("--maxReadLength", dest="max_read_length", type=int, default=500)
    am.add_argument("--optical-distance", dest="optical_distance", type=int, default=100)
    am.add_argument("--read-name-regex", dest="read_name_regex")
    am.add_argument("--max-optical-set", dest="max_optical_set", type=int, default=300000)
    am.add_argument("--level", type=int, help="zstd level of the group's files (1-22) [3]")
    tasks(am)
    common(am)

    m = sub.add_parser("merge", help="merge sorted BAMs (byte-identical to sortase merge)",
                       add_help=False)
    m.add_argument("--help", action="help", help="show this help message and exit")
    m.add_argument("inputs", nargs="*")
    m.add_argument("-o", "--output", required=True)
    m.add_argument("-n", dest="by_name", action="store_true", help="inputs sorted by read name (natural)")
    m.add_argument("-N", dest="by_name_lex", action="store_true", help="inputs sorted by read name (strcmp)")
    m.add_argument("-t", dest="tag", help="inputs sorted by the value of TAG")
    m.add_argument("-r", dest="attach_rg", action="store_true", help="attach an RG tag named after each input")
    m.add_argument("-c", dest="combine_rg", action="store_true", help="combine colliding @RG IDs")
    m.add_argument("-p", dest="combine_pg", action="store_true", help="combine colliding @PG IDs")
    m.add_argument("-s", dest="seed", type=int, help="seed of the suffixes of renamed IDs [time]")
    m.add_argument("-h", dest="header", help="use FILE's header as the base of the output header")
    m.add_argument("-b", dest="list", help="file listing input files, one per line")
    m.add_argument("-f", dest="force", action="store_true", help="overwrite the output file")
    m.add_argument("-1", dest="fast", action="store_true", help="compression level 1")
    output(m)
    m.add_argument("--tasks", type=int, help="tasks (stretches of key ranges) [4 per worker thread]")
    m.add_argument("-@", "--threads", type=int, default=1, help="threads of each task [1]")
    common(m)

    f = sub.add_parser("flagstat", help="samtools flagstat")
    f.add_argument("input")
    f.add_argument("-O", "--output-fmt", default="default", choices=["default", "json", "tsv"])
    f.add_argument("--tasks", type=int)
    common(f)

    x = sub.add_parser("idxstats", help="samtools idxstats of a BAM (from the index when there is "
                                        "one) or of an AGD dataset")
    x.add_argument("input")
    x.add_argument("--tasks", type=int)
    common(x)

    i = sub.add_parser("index", help="samtools index (BAI, or CSI with -c/-m)")
    i.add_argument("input")
    i.add_argument("-o", "--output")
    i.add_argument("-c", "--csi", action="store_true")
    i.add_argument("-m", "--min-shift", type=int)
    i.add_argument("--tasks", type=int)
    common(i)

    sp = sub.add_parser("snp-pileup", help="FACETS snp-pileup (local, shared or s3:// paths)")
    sp.add_argument("vcf")
    sp.add_argument("output")
    sp.add_argument("bams", nargs="+")
    sp.add_argument("-A", "--count-orphans", action="store_true")
    sp.add_argument("-g", "--gzip", action="store_true")
    sp.add_argument("-x", "--ignore-overlaps", action="store_true")
    sp.add_argument("-Q", "--min-base-quality", type=int)
    sp.add_argument("-q", "--min-map-quality", type=int)
    sp.add_argument("-d", "--max-depth", type=int)
    sp.add_argument("-P", "--pseudo-snps", type=int)
    sp.add_argument("-r", "--min-read-counts", help="comma-separated, one per BAM")
    sp.add_argument("--tasks", type=int)
    common(sp)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    common = {"scheduler": args.scheduler, "progress": args.progress}
    options = _storage_options(args.storage_option)
    try:
        if args.command == "sort":
            report = distributed.sort(
                args.input, args.output, by_name=args.by_name, by_name_lex=args.by_name_lex,
                tag=args.tag, level=args.level, uncompressed=args.uncompressed,
                write_index=args.write_index, index_format=args.index_format, no_pg=args.no_pg,
                task_memory=args.task_memory, reduce_tasks=args.reduce_tasks, threads=args.threads,
                storage_options=options, **common)
        elif args.command == "fq2bam":
            report = distributed.fq2bam(
                args.index, args.reads1, args.reads2, args.output, preset=args.preset,
                read_group=args.read_group, markdup=args.markdup, md=args.md, cs=args.cs,
                level=args.level, write_index=args.write_index, index_format=args.index_format,
                no_pg=args.no_pg, chunk_templates=args.chunk_templates,
                scan_bytes=args.scan_bytes, task_memory=args.task_memory,
                reduce_tasks=args.reduce_tasks,
                threads=args.threads, storage_options=options, **common)
        elif args.command == "markdup":
            report = distributed.markdup(
                args.input, args.output, mode=args.mode, accept_dup_marks=args.accept_dup_marks,
                ignore_unmated=args.ignore_unmated, max_read_length=args.max_read_length,
                metrics=args.metrics, optical_distance=args.optical_distance,
                read_name_regex=args.read_name_regex, max_optical_set=args.max_optical_set,
                level=args.level, uncompressed=args.uncompressed, no_pg=args.no_pg,
                task_memory=args.task_memory, reduce_tasks=args.reduce_tasks,
                threads=args.threads, storage_options=options, **common)
            for line in report.get("summary", []):
                print(line, file=sys.stderr)
        elif args.command == "agd-markdup":
            report = distributed.agd_markdup(
                args.dataset, mode=args.mode, accept_dup_marks=args.accept_dup_marks,
                ignore_unmated=args.ignore_unmated, max_read_length=args.max_read_length,
                optical_distance=args.optical_distance, read_name_regex=args.read_name_regex,
                max_optical_set=args.max_optical_set, level=args.level,
                command_line=" ".join(["sortase-dask",
                                       *(argv if argv is not None else sys.argv[1:])]),
                task_memory=args.task_memory, reduce_tasks=args.reduce_tasks,
                threads=args.threads, storage_options=options, **common)
            for line in report.get("summary", []):
                print(line, file=sys.stderr)
        elif args.command == "merge":
            inputs = list(args.inputs)
            if args.list:
                with open(args.list) as f:
                    inputs = [line for line in f.read().splitlines() if line] + inputs
            report = distributed.merge(
                inputs, args.output, by_name=args.by_name, by_name_lex=args.by_name_lex,
                tag=args.tag, attach_rg=args.attach_rg, combine_rg=args.combine_rg,
                combine_pg=args.combine_pg, seed=args.seed, header=args.header, force=args.force,
                level=1 if args.fast else args.level, uncompressed=args.uncompressed,
                write_index=args.write_index, index_format=args.index_format, no_pg=args.no_pg,
                tasks=args.tasks, threads=args.threads, storage_options=options, **common)
        elif args.command == "idxstats":
            report = distributed.idxstats(args.input, tasks=args.tasks, storage_options=options,
                                          **common)
            sys.stdout.write(distributed.idxstats_text(report))
        elif args.command == "flagstat":
            report = distributed.flagstat(args.input, tasks=args.tasks, storage_options=options,
                                          **common)
            sys.stdout.write(_sortase.flagstat_text(json.dumps(report), args.output_fmt))
        elif args.command == "index":
            report = distributed.index(args.input, args.output, csi=args.csi,
                                       min_shift=args.min_shift, tasks=args.tasks,
                                       storage_options=options, **common)
        else:
            counts = [int(x) for x in args.min_read_counts.split(",")] if args.min_read_counts else None
            report = distributed.snp_pileup(
                args.vcf, args.output, args.bams, count_orphans=args.count_orphans,
                gzip=args.gzip, ignore_overlaps=args.ignore_overlaps,
                min_base_quality=args.min_base_quality, min_map_quality=args.min_map_quality,
                max_depth=args.max_depth, pseudo_snps=args.pseudo_snps, min_read_counts=counts,
                tasks=args.tasks, storage_options=options, **common)
    except SortaseError as e:
        print(f"sortase-dask: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    for warning in report.get("warnings", []):
        print(warning, file=sys.stderr)
    if args.report:
        print(json.dumps(report, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
