"""``gate --confirm K``: the regressed cases measured again in ``K`` separate pytest processes, so a regression must
show in independent samples (the rank test then judges all runs together)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import written_here
from cudagraph_bench.paths import checkout_root
from cudagraph_bench.results.runfile import Run, forward_groups, load_run
from cudagraph_bench.runner.matrix_processes import Matrix
from cudagraph_bench.runner.process import PytestRun, run_pytest
from cudagraph_bench.table import plural


def confirm_regressions(runs: list[Run], results, k: int) -> list[Run]:
    """Rerun every regressed case's gated variants and references ``k`` times, written beside the first run as
    ``<stem>.confirm-<i>.json``; returns the runs that succeeded. UsageError when such a file exists (never
    overwritten)."""
    first = runs[0]
    groups = forward_groups(first)
    cases = [(r.model, r.dtype, r.seq_len) for r in results if r.regressed]
    names = {v.name for v in variants.gated()} | {v.reference for v in variants.gated()}
    selection = [groups[c][v].name for c in cases for v in sorted(names) if c in groups and v in groups[c]]
    paths = [first.path.with_name(f"{first.path.stem}.confirm-{i}.json") for i in range(1, k + 1)]
    tree = checkout_root() or Path.cwd()
    taken = [p for p in paths if os.path.lexists(p)]          # a dangling link too: a rerun would write through it
    if taken:
        raise UsageError(f"{taken[0]} exists: move the earlier confirmation runs away (they are never overwritten)")
    other = [f for p in paths for f in PytestRun(tree, p).files() if not written_here(f, f.suffix, "pytest")]
    if other:        # the log, journal or attempt of a rerun, which run_pytest replaces or removes
        raise UsageError(f"{other[0]} is no file of a cudagraph-bench rerun, which would replace it: move it away")
    values = tuple((dest, tuple(dict.fromkeys(c[i] for c in cases)))
                   for i, dest in enumerate(("models", "dtypes", "prompt_lengths")))
    matrix = Matrix(values, tuple(sorted(names, key=lambda n: variants.display_rank(variants.FORWARD, n))))
    print(f"gate: {plural(len(cases), 'regressed case')}: confirming with {plural(k, 'separate rerun')} "
          f"({', '.join('{} {} L={}'.format(*c) for c in cases)})", flush=True)
    done = []
    for path in paths:
        outcome = run_pytest(PytestRun(tree, path, (*selection, "--benchmark-only", "--variants",
                                                    ",".join(matrix.variants), *matrix.pytest_args())))
        if outcome.ok:
            done.append(load_run(str(path)))
        else:
            print(f"gate: confirmation run {path.name} FAILED (exit {outcome.returncode}; no JSON written when every "
                  f"benchmark was skipped, e.g. without a GPU), see {path.with_suffix('.log')}", file=sys.stderr,
                  flush=True)
    return done
