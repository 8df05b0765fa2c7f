"""``cudagraph-bench selftest``'s runs: unmodified reruns of the gated matrix and runs with a known fault planted
into the real pipeline (``--plant-fault``, :mod:`cudagraph_bench.measure.faults`), each a separate pytest process on
this GPU (:func:`cudagraph_bench.runner.process.run_pytest`). The verdicts are
:mod:`cudagraph_bench.results.selftest_verdicts`.

Runs, written to ``OUT/<name>.json`` with a log beside each:

- ``unmodified-1`` .. ``unmodified-N``: the forward benchmarks (eager and graph) of the gated prompt lengths;
- ``delay-<pct>`` for each ``--delays`` percent: the same, every gated graph replay slowed on the GPU by that share
  of its own time;
- ``stale-input``: the graph of the first model and dtype replays without refreshing its static input;
- ``wrong-decode``: the graphed decode of the matrix's causal models gives other tokens;
- ``stale-mask``: the padding benchmarks (``padded``, ``bucketed``) of the first model and dtype, their graphs keeping
  the attention mask of their first replay;
- ``stale-position``: the graphed decode of the matrix's causal models never refreshing its decode position;
- ``eager-layer``: the graph of the first model and dtype runs its output layer eagerly after each replay, with
  ``--replay-proof`` (only the proof can catch it: the outputs are right);
- ``skip-inductor-graphs``: the ``compile+graph`` of the first model and dtype at the first planted prompt length
  runs its compiled forward without its graph, with ``--replay-proof`` (named in ``--variants``, it runs without
  ``--with-compile``, which would add the ``compile`` variant too);
- with ``ab_runs`` K (``--ab K``), the pull-request mode's groups (``cudagraph-bench ab``), K runs each at the gated
  prompt lengths, as the delay runs: ``ab-base-<i>`` and ``ab-head-<i>`` unmodified (base and head of an A/A
  comparison), ``ab-delay-<pct>-<i>`` with ``delay:<pct>`` planted on head only.

Unmodified and planted runs are interleaved (unmodified-1, delay-3, unmodified-2, delay-5, ...), so that a drift of
the host over the job does not read as a fault; the ab groups run after them in ``ab``'s own ABBA order over three
groups (base, head, delay, delay, head, base, ...: :func:`cudagraph_bench.runner.ab.schedule`).
"""

from __future__ import annotations

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
#: The ``--variants`` of the runs: the forward reference and the gated variant, the padded ones, and the compiled
#: graph the skip-inductor-graphs fault is planted in.
_GATED_PAIR = f"{variants.FORWARD_REFERENCE},{variants.GATED}"
_PADDED = ",".join(variants.PADDING_NAMES)
_COMPILED_GRAPH = next(v.name for v in variants.of_suite(variants.FORWARD) if v.compiled and v.captured)


@dataclass(frozen=True)
class SelftestRun:
    """One run of the self-test: its file stem, the fault planted (None: unmodified) and its pytest arguments."""

    name: str
    fault: str | None
    args: tuple[str, ...]


def plan(matrix: Matrix, *, extra_args: tuple[str, ...] = (), gated_lengths: tuple[int, ...],
         runs: int = DEFAULT_UNMODIFIED_RUNS, delays=DEFAULT_DELAYS_PCT, ab_runs: int = 0,
         ab_delay: float = DEFAULT_AB_DELAY_PCT) -> list[SelftestRun]:
    """The self-test's runs in the order they run. ``matrix``: the forward matrix of the unmodified runs (its
    ``models``, ``dtypes`` and ``prompt_lengths`` given); ``extra_args``: more pytest arguments of every forward
    run; ``gated_lengths``: the prompt lengths of the planted runs (the unmodified runs are the baseline of every
    length, the planted ones need the gated cases only). The stale input, stale mask, eager layer and skipped
    inductor graphs go into the first model and the last dtype (the skipped graphs at the first gated length); the
    wrong decode and stale position into the matrix's models (the plugin keeps their causal LMs). ``ab_runs``:
    runs per ab group (0: none), at the gated lengths, the delay group's with ``delay:<ab_delay>`` planted
    (:func:`ab_plan`), last."""
    models, dtypes = matrix.value("models"), matrix.value("dtypes")
    planted_matrix = matrix.replaced(prompt_lengths=tuple(gated_lengths))
    single = planted_matrix.replaced(models=models[:1], dtypes=dtypes[-1:])

    def forward_run(module, names, of, *more):
        return (module, "--benchmark-only", "--variants", names, *of.pytest_args(), *extra_args, *more)

    forward, gated = forward_run(FORWARD_MODULE, _GATED_PAIR, matrix), forward_run(FORWARD_MODULE, _GATED_PAIR,
                                                                                  planted_matrix)
    unmodified = [SelftestRun(f"unmodified-{i}", None, forward) for i in range(1, runs + 1)]
    planted = [SelftestRun(f"delay-{pct:g}", f"delay:{pct:g}", (*gated, "--plant-fault", f"delay:{pct:g}"))
               for pct in delays]
    order = []
    for i in range(max(len(unmodified), len(planted))):
        order += unmodified[i:i + 1] + planted[i:i + 1]
    order.append(SelftestRun("stale-input", "stale-input",
                             forward_run(FORWARD_MODULE, _GATED_PAIR, single, "--plant-fault", "stale-input")))
    order.append(SelftestRun("stale-mask", "stale-mask",
                             forward_run(PADDING_MODULE, _PADDED, single, "--plant-fault", "stale-mask")))
    order.append(SelftestRun("eager-layer", "eager-layer",
                             forward_run(FORWARD_MODULE, variants.GATED, single, "--replay-proof",
                                         "--plant-fault", "eager-layer")))
    order.append(SelftestRun("skip-inductor-graphs", "skip-inductor-graphs",
                             forward_run(FORWARD_MODULE, _COMPILED_GRAPH,
                                         single.replaced(prompt_lengths=tuple(gated_lengths[:1])),
                                         "--replay-proof", "--plant-fault", "skip-inductor-graphs")))
    for fault in ("wrong-decode", "stale-position"):
        order.append(SelftestRun(fault, fault,
                                 (DECODE_MODULE, "--benchmark-only", "--models", ",".join(models), "--new-tokens",
                                  "32", "--decode-rounds", "3", "--plant-fault", fault)))
    return order + ab_plan(gated, ab_runs, ab_delay)


def ab_plan(args: tuple[str, ...], k: int, delay: float = DEFAULT_AB_DELAY_PCT) -> list[SelftestRun]:
    """The ab groups' ``3 * k`` runs of the pytest arguments ``args`` in :func:`~cudagraph_bench.runner.ab.schedule`'s
    order: ``ab-base-<i>`` and ``ab-head-<i>`` as given, ``ab-delay-<delay>-<i>`` with ``delay:<delay>`` planted
    (``--plant-fault``); none for ``k`` 0."""
    fault = f"delay:{delay:g}"
    made = {"base": lambda i: SelftestRun(f"ab-base-{i}", None, args),
            "head": lambda i: SelftestRun(f"ab-head-{i}", None, args),
            "delay": lambda i: SelftestRun(f"ab-delay-{delay:g}-{i}", fault, (*args, "--plant-fault", fault))}
    return [made[group](i) for group, i in schedule(k, tuple(made))]


def run_all(tree: Path, out: Path, runs: list[SelftestRun], *, log=print, resume: bool = False) -> dict[str, Path | None]:
    """Run ``runs`` one after another (their JSON and logs in ``out``); returns ``{name: JSON path or None}`` (None:
    the process wrote no run; its log says why). ``resume``: a run whose JSON is already in ``out`` (a finished run
    of a stopped self-test) is kept, not run again."""
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
