"""``cudagraph-bench selftest``'s runs (docs/gate.md): unmodified reruns of the gated matrix and planted-fault runs,
each a pytest process writing ``OUT/<name>.json`` and its log, interleaved so host drift does not read as a fault."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.runner.ab import schedule
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE, PADDING_MODULE, Matrix
from cudagraph_bench.runner.process import PytestRun, run_pytest

DECODE_MODULE = "perf_tests/test_decode_bench.py"
DEFAULT_UNMODIFIED_RUNS = 5
DEFAULT_DELAYS_PCT = (3.0, 5.0, 10.0)
#: The delay planted on head in the ab runs (``--ab-delay``, percent): the smallest the gate is tested at.
DEFAULT_AB_DELAY_PCT = 3.0
#: The runs' ``--variants``: reference, gated, padded, and the compiled graph the skip fault goes into.
_GATED_PAIR = f"{variants.FORWARD_REFERENCE},{variants.GATED}"
_PADDED = ",".join(variants.PADDING_NAMES)
_COMPILED_GRAPH = next(v.name for v in variants.of_suite(variants.FORWARD) if v.compiled and v.captured)


@dataclass(frozen=True)
class SelftestRun:
    """File stem, planted fault (None: unmodified) and pytest arguments."""

    name: str
    fault: str | None
    args: tuple[str, ...]


def plan(matrix: Matrix, *, extra_args: tuple[str, ...] = (), gated_lengths: tuple[int, ...],
         runs: int = DEFAULT_UNMODIFIED_RUNS, delays=DEFAULT_DELAYS_PCT, ab_runs: int = 0,
         ab_delay: float = DEFAULT_AB_DELAY_PCT) -> list[SelftestRun]:
    """The runs in order. ``gated_lengths``: prompt lengths of planted runs; forward faults go into the first model and
    last dtype, decode faults into the matrix's models; ``ab_runs`` per ab group (0: none) come last."""
    models, dtypes = matrix.value("models"), matrix.value("dtypes")
    planted_matrix = matrix.replaced(prompt_lengths=tuple(gated_lengths))
    single = planted_matrix.replaced(models=models[:1], dtypes=dtypes[-1:])

    def forward_run(module, names, of, *more):
        return (module, "--benchmark-only", "--variants", names, *of.pytest_args(), *extra_args, *more)

    forward = forward_run(FORWARD_MODULE, _GATED_PAIR, matrix)
    gated = forward_run(FORWARD_MODULE, _GATED_PAIR, planted_matrix)
    unmodified = [SelftestRun(f"unmodified-{i}", None, forward) for i in range(1, runs + 1)]
    planted = [SelftestRun(f"delay-{pct:g}", f"delay:{pct:g}", (*gated, "--plant-fault", f"delay:{pct:g}"))
               for pct in delays]
    order = [r for pair in itertools.zip_longest(unmodified, planted) for r in pair if r is not None]
    for fault, module, names, of, more in (
            ("stale-input", FORWARD_MODULE, _GATED_PAIR, single, ()),
            ("stale-mask", PADDING_MODULE, _PADDED, single, ()),
            ("eager-layer", FORWARD_MODULE, variants.GATED, single, ("--replay-proof",)),
            ("skip-inductor-graphs", FORWARD_MODULE, _COMPILED_GRAPH,
             single.replaced(prompt_lengths=tuple(gated_lengths[:1])), ("--replay-proof",))):
        order.append(SelftestRun(fault, fault, forward_run(module, names, of, *more, "--plant-fault", fault)))
    for fault in ("wrong-decode", "stale-position"):
        order.append(SelftestRun(fault, fault,
                                 (DECODE_MODULE, "--benchmark-only", "--models", ",".join(models), "--new-tokens",
                                  "32", "--decode-rounds", "3", "--plant-fault", fault)))
    return order + ab_plan(gated, ab_runs, ab_delay)


def ab_plan(args: tuple[str, ...], k: int, delay: float = DEFAULT_AB_DELAY_PCT) -> list[SelftestRun]:
    """``3 * k`` runs in ABBA order: ``ab-base-<i>``, ``ab-head-<i>``, ``ab-delay-<delay>-<i>`` (planted)."""
    fault = f"delay:{delay:g}"
    made = {"base": lambda i: SelftestRun(f"ab-base-{i}", None, args),
            "head": lambda i: SelftestRun(f"ab-head-{i}", None, args),
            "delay": lambda i: SelftestRun(f"ab-delay-{delay:g}-{i}", fault, (*args, "--plant-fault", fault))}
    return [made[group](i) for group, i in schedule(k, tuple(made))]


def run_all(tree: Path, out: Path, runs: list[SelftestRun], *, log=print,
            resume: bool = False) -> dict[str, Path | None]:
    """Run ``runs`` in order into ``out``; ``{name: JSON path or None}``. ``resume``: a run with its JSON is kept."""
    done = {}
    for i, r in enumerate(runs, 1):
        kept = next((p for p in (out / f"{r.name}.json", out / f"{r.name}.json.gz") if p.is_file()), None)
        if resume and kept is not None:
            done[r.name] = kept
            log(f"selftest: {i}/{len(runs)} {r.name}: kept from the stopped self-test")
            continue
        outcome = run_pytest(PytestRun(tree, out / f"{r.name}.json", r.args))
        done[r.name] = outcome.json_path
        state = "ok" if outcome.json_path is not None else f"no run written (exit {outcome.returncode})"
        log(f"selftest: {i}/{len(runs)} {r.name}: {state}")
    return done
