"""``cudagraph-bench merge -o OUT.json RUN...``."""

from __future__ import annotations

import argparse
import gzip
import json
import sys

from cudagraph_bench.fsio import check_output_file, write_files_atomic, written_verb
from cudagraph_bench.options import parse_run_path
from cudagraph_bench.results.merge import check_shards, commits_of, machine_gpu, merge_runs
from cudagraph_bench.results.runfile import distinct_runs, load_run
from cudagraph_bench.table import plural


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench merge -o OUT RUN...``."""
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="the runs of the shards: pytest-benchmark JSON paths or saved-run ids (a shard that "
                             "ran no benchmark but recorded kernel counts or failed cases is a run too)")
    parser.add_argument("-o", "--output", required=True, type=parse_run_path, metavar="FILE",
                        help="the merged pytest-benchmark JSON (written atomically; never one of the RUNs)")


def main(args: argparse.Namespace) -> int:
    """Returns 0 (warning when a shard is missing); UsageError before anything is written."""
    runs = distinct_runs([load_run(r, records_only=True) for r in args.runs], "merge")
    check_output_file(args.output, "-o", "merged.json", [r.path for r in runs], command="merge")
    parts = [(str(r.path), r.data) for r in runs]
    missing = check_shards(parts)
    merged = merge_runs(parts)
    if missing:
        what = f"shards {', '.join(missing)} are" if len(missing) > 1 else f"shard {missing[0]} is"
        print(f"warning: {what} missing: the merged run lacks their tests (a failed job, or a shard that ran no "
              "benchmark and recorded no kernel count or failure, so wrote no --benchmark-json)", file=sys.stderr)
    commits = commits_of(parts)
    if len(commits) > 1:
        print(f"warning: the runs measured {len(commits)} commits ({', '.join(c[:12] for c in commits)}); the "
              "merged run names the first", file=sys.stderr)
    replaced = written_verb(args.output) == "replaced"
    gpu = machine_gpu(merged["machine_info"]) or "no GPU"

    def say_merged():   # once the file's bytes are written, before it is moved into place
        print(f"merged {plural(len(merged['benchmarks']), 'benchmark')} of {plural(len(runs), 'run')} "
              f"({gpu}) into {args.output}{' (replaced the file that was there)' if replaced else ''}")
        sys.stdout.flush()  # a stdout that cannot be written (a full disk) fails the command: no file is replaced

    data = json.dumps(merged, ensure_ascii=True, indent=4).encode("ascii")
    if str(args.output).endswith(".gz"):      # the form results/ keeps runs in, which every command reads
        data = gzip.compress(data, compresslevel=9, mtime=0)
    write_files_atomic({args.output: data}, say_merged)
    return 0
