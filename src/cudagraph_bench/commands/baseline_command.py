"""``cudagraph-bench baseline RUN... -o baselines/<gpu>.json``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cudagraph_bench.errors import FailedCheckError, UsageError
from cudagraph_bench.fsio import check_output_file, refuse_overwriting_inputs, write_text_atomic, written_verb
from cudagraph_bench.options import (add_regression_floor_option, parse_count, parse_multiplier, parse_baseline_path,
                                     parse_reduction_pct)
from cudagraph_bench.results import noise
from cudagraph_bench.results.baseline import (BASELINE_COLUMNS, DEFAULT_MAX_GATED_LEN,
                                              DEFAULT_MIN_REDUCTION_PCT, baseline_rows, build_baseline, stored_case)
from cudagraph_bench.results.runfile import load_run
from cudagraph_bench.table import render_table


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``cudagraph-bench baseline RUN... -o FILE``."""
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help=f"pytest-benchmark JSON of separate GPU runs of the same matrix, at least "
                             f"{noise.MIN_BASELINE_RUNS} (paths or saved-run ids, e.g. 0001)")
    parser.add_argument("-o", "--output", required=True, type=parse_baseline_path, metavar="FILE",
                        help="baseline file to write, by convention baselines/<gpu_slug>.json")
    parser.add_argument("--min-reduction", type=parse_reduction_pct, default=DEFAULT_MIN_REDUCTION_PCT, metavar="PCT",
                        help="per-case minimum median latency reduction stored for gated cases "
                             "(default: %(default)s)")
    add_regression_floor_option(parser)
    parser.add_argument("--noise-multiplier", type=parse_multiplier, default=noise.DEFAULT_MULTIPLIER, metavar="X",
                        help="a change must exceed X between-run spreads (default: Student's t quantile at "
                             f"{1 - noise.DEFAULT_TAIL:g} with k-1 degrees of freedom)")
    parser.add_argument("--max-gated-len", type=parse_count, default=DEFAULT_MAX_GATED_LEN, metavar="TOKENS",
                        help="cases with prompt length <= this are gated (default: %(default)s)")
    parser.add_argument("--min-runs", type=parse_count, default=noise.MIN_BASELINE_RUNS, metavar="K",
                        help="fewest runs a case must be measured in (default: %(default)s)")


#: ``--allow`` words of baseline -> what each accepts (cli adds ``interrupted``).
ALLOWANCES = {
    "unchecked": "store graph cases whose run recorded no correctness check (runs recorded before checks existed); "
                 "a failed check is always refused",
}


def main(args: argparse.Namespace) -> int:
    """Returns 0, or 1 (nothing written) when a run recorded a failed check. UsageError (too few runs, a missing check,
    different GPUs, an unwritable output) before anything is printed or written."""
    if str(args.output).endswith(".gz"):
        raise UsageError(f"-o {args.output}: a baseline is plain JSON, which gate reads: name it .json "
                         "(e.g. baselines/<gpu>.json)")
    runs = [load_run(ref) for ref in args.runs]
    refuse_overwriting_inputs(args.output, "-o", [r.path for r in runs])
    try:
        exact = build_baseline(runs, min_reduction_pct=args.min_reduction, regression_floor_pct=args.max_regression,
                               noise_multiplier=args.noise_multiplier, max_gated_len=args.max_gated_len,
                               min_runs=args.min_runs, allow_unchecked=args.allow_unchecked, rounded=False)
    except FailedCheckError as exc:   # readable runs with a wrong result: a failure (1), not a usage error (2)
        print(f"cudagraph-bench baseline: FAIL: {exc}", file=sys.stderr)
        return 1
    doc = {**exact, "cases": [stored_case(c) for c in exact["cases"]]}
    out = Path(args.output)
    check_output_file(out, "-o", doc["gpu_slug"] + ".json", command="baseline")
    if out.parent.name == "baselines" and out.stem != doc["gpu_slug"]:
        print(f"cudagraph-bench baseline: warning: {out} is named for another GPU; gate looks up "
              f"baselines/{doc['gpu_slug']}.json for this run", file=sys.stderr)
    print(render_table(BASELINE_COLUMNS, baseline_rows(exact)))  # exact values: printed as gate prints them
    verb = written_verb(out)
    write_text_atomic(out, json.dumps(doc, indent=2) + "\n")
    n_gated = sum(c["gated"] for c in doc["cases"])
    print(f"{verb} {out}: {len(doc['cases'])} cases ({n_gated} gated), GPU {doc['gpu_slug']}, "
          f"from {len(runs)} runs ({', '.join(r.path.name for r in runs)})")
    return 0

