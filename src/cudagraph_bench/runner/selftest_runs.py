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
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE, PADDING_MODULE
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


def plan(matrix_args: list[str], *, runs: int = DEFAULT_UNMODIFIED_RUNS, delays=DEFAULT_DELAYS_PCT,
         first_model: str, first_dtype: str, causal_model: str | None,
         planted_args: list[str] = (), ab_runs: int = 0,
         ab_delay: float = DEFAULT_AB_DELAY_PCT) -> list[SelftestRun]:
    """The self-test's runs in the order they run. ``matrix_args``: the pytest options of the gated matrix
    (``--models ... --prompt-lengths ...``); ``first_model`` / ``first_dtype``: where the stale input and the stale
    mask are planted; ``causal_model``: the ``--models`` of the wrong-decode and stale-position runs (the plugin keeps
    their causal LMs; None: no decode fault); ``planted_args``: more options of the planted runs (e.g. only the gated
    prompt lengths: the unmodified runs are the baseline of every length, the planted ones need the gated cases
    only); ``ab_runs``: runs per ab
    group (0: none), each with ``planted_args``, the delay group's with ``delay:<ab_delay>`` planted (:func:`ab_plan`),
    last."""
    forward = (FORWARD_MODULE, "--benchmark-only", "--variants", _GATED_PAIR, *matrix_args)
    unmodified = [SelftestRun(f"unmodified-{i}", None, forward) for i in range(1, runs + 1)]
    planted = [SelftestRun(f"delay-{pct:g}", f"delay:{pct:g}",
                           (*forward, *planted_args, "--plant-fault", f"delay:{pct:g}")) for pct in delays]
    order = []
    for i in range(max(len(unmodified), len(planted))):
        order += unmodified[i:i + 1] + planted[i:i + 1]
    single = [a for a in _without([*matrix_args, *planted_args], ("--models", "--dtypes"))]
    order.append(SelftestRun("stale-input", "stale-input",
                             (FORWARD_MODULE, "--benchmark-only", "--variants", _GATED_PAIR, *single,
                              "--models", first_model, "--dtypes", first_dtype, "--plant-fault", "stale-input")))
    order.append(SelftestRun("stale-mask", "stale-mask",
                             (PADDING_MODULE, "--benchmark-only", "--variants", _PADDED, *single,
                              "--models", first_model, "--dtypes", first_dtype, "--plant-fault", "stale-mask")))
    order.append(SelftestRun("eager-layer", "eager-layer",
                             (FORWARD_MODULE, "--benchmark-only", "--variants", variants.GATED, *single,
                              "--models", first_model, "--dtypes", first_dtype, "--replay-proof",
                              "--plant-fault", "eager-layer")))
    lengths = _last_value(single, "--prompt-lengths")
    order.append(SelftestRun("skip-inductor-graphs", "skip-inductor-graphs",
                             (FORWARD_MODULE, "--benchmark-only", "--variants", _COMPILED_GRAPH, *single,
                              *(("--prompt-lengths", lengths.split(",")[0]) if lengths else ()),
                              "--models", first_model, "--dtypes", first_dtype, "--replay-proof",
                              "--plant-fault", "skip-inductor-graphs")))
    if causal_model is not None:
        for fault in ("wrong-decode", "stale-position"):
            order.append(SelftestRun(fault, fault,
                                     (DECODE_MODULE, "--benchmark-only", "--models", causal_model, "--new-tokens", "32",
                                      "--decode-rounds", "3", "--plant-fault", fault)))
    return order + ab_plan((*forward, *planted_args), ab_runs, ab_delay)


def ab_plan(args: tuple[str, ...], k: int, delay: float = DEFAULT_AB_DELAY_PCT) -> list[SelftestRun]:
    """The ab groups' ``3 * k`` runs of the pytest arguments ``args`` in :func:`~cudagraph_bench.runner.ab.schedule`'s
    order: ``ab-base-<i>`` and ``ab-head-<i>`` as given, ``ab-delay-<delay>-<i>`` with ``delay:<delay>`` planted
    (``--plant-fault``); none for ``k`` 0."""
    fault = f"delay:{delay:g}"
    made = {"base": lambda i: SelftestRun(f"ab-base-{i}", None, args),
            "head": lambda i: SelftestRun(f"ab-head-{i}", None, args),
            "delay": lambda i: SelftestRun(f"ab-delay-{delay:g}-{i}", fault, (*args, "--plant-fault", fault))}
    return [made[group](i) for group, i in schedule(k, tuple(made))]


def _last_value(args, flag: str) -> str | None:
    """The value of the last ``flag`` in ``args`` (``--flag V`` or ``--flag=V``: pytest takes the last), or None."""
    values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    values += [a.split("=", 1)[1] for a in args if a.startswith(flag + "=")]
    return values[-1] if values else None


def _without(args: list[str], flags: tuple[str, ...]) -> list[str]:
    """``args`` without the given flags and their values."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in flags:
            skip = True
            continue
        if any(a.startswith(f + "=") for f in flags):
            continue
        out.append(a)
    return out


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
