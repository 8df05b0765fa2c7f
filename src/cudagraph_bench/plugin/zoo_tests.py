"""The architecture zoo in the pytest session: ``--zoo`` collects ``perf_tests/test_zoo.py``, a forward and a decode
test per causal-LM type on its tiny checkpoint; a measured part is a benchmark, any other a failure entry."""

from __future__ import annotations

import argparse
import time

import pytest

from cudagraph_bench.models.zoo_types import ZooRefused, causal_lm_types, zoo_checkpoint
from cudagraph_bench.parsers import parse_zoo_types
from cudagraph_bench.zoo_keys import (AWAITS_GPU, DTYPE, FAILED, FORWARD, MEASURED, NOT_GRAPHABLE, REFUSED,
                                      SUITE)

#: The test module the option collects.
ZOO_MODULE = "test_zoo.py"
#: Measured rounds and warm-up calls of a forward part (graph and eager each), and of a decode part (requests).
FORWARD_ROUNDS, FORWARD_WARMUP = 20, 5
DECODE_ROUNDS, DECODE_WARMUP = 3, 1


def pytest_addoption(parser):
    group = parser.getgroup("cudagraph-bench", "cudagraph-bench: eager vs CUDA graph replay")
    group.addoption("--zoo", dest="zoo", type=parse_zoo_types, default=None, metavar="TYPES",
                    help="the architecture zoo: collect perf_tests/test_zoo.py for these causal-LM model types of the "
                         "installed transformers: all, K/N (every N-th type from the K-th) or type,type,... "
                         "(default: not collected). With --device cpu: the classification a CPU can make")
    # tests that would start after this epoch time are skipped, so a time-limited session still writes its run
    group.addoption("--zoo-deadline-at", dest="zoo_deadline_at", type=float, default=0.0, metavar="EPOCH_S",
                    help=argparse.SUPPRESS)


#: The model types ``--zoo`` selects, picked once at configure.
ZOO_TYPES = pytest.StashKey[list]()


def pytest_configure(config):
    """``--zoo``'s types picked from the installed transformers before collection (a usage error for an unknown one,
    as for its form at parsing), kept for the tests' parameters."""
    if config.getoption("zoo", None):
        config.stash[ZOO_TYPES] = selected_types(config.getoption("zoo"))


def pytest_ignore_collect(collection_path, config):
    """``perf_tests/test_zoo.py`` is collected only with ``--zoo``."""
    return True if collection_path.name == ZOO_MODULE and not config.getoption("zoo", None) else None


def pytest_runtest_setup(item):
    """A zoo test past ``--zoo-deadline-at`` is skipped before it starts."""
    deadline = item.config.getoption("zoo_deadline_at", 0.0) or 0.0
    if deadline and "zoo_type" in item.fixturenames and time.time() > deadline:
        pytest.skip("not run: past the zoo's deadline (--zoo-deadline-at)")


def selected_types(option) -> list[str]:
    """``--zoo``'s types in order; pytest.UsageError for an unknown type or a K past them."""
    import transformers

    try:
        selection = parse_zoo_types(option) if isinstance(option, str) else option
        return selection.pick(causal_lm_types(), "--zoo", transformers.__version__)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_generate_tests(metafunc):
    if "zoo_type" in metafunc.fixturenames:
        types = metafunc.config.stash[ZOO_TYPES]
        metafunc.parametrize("zoo_type", types, ids=types)


class Zoo:
    """One folder of tiny checkpoints, each built once; a type's refusal kept with it."""

    def __init__(self, folder, device: str, attn_implementation: str | None):
        self.folder, self.device, self.attn_implementation = folder, device, attn_implementation
        self._paths: dict[str, str | Exception] = {}

    def checkpoint(self, model_type: str) -> str:
        """Raises ZooRefused."""
        if model_type not in self._paths:
            try:
                self._paths[model_type] = zoo_checkpoint(model_type, self.folder,
                                                         attn_implementation=self.attn_implementation)
            except ZooRefused as exc:
                self._paths[model_type] = exc
        found = self._paths[model_type]
        if isinstance(found, Exception):
            raise found
        return found


@pytest.fixture(scope="session")
def zoo(tmp_path_factory, request) -> Zoo:
    """The session's zoo in a temporary folder. On the CPU torch runs one thread: a descheduled thread costs seconds."""
    if request.config.getoption("device", "cuda") == "cpu":
        import torch

        torch.set_num_threads(1)
    return Zoo(tmp_path_factory.mktemp("zoo"), request.config.getoption("device", "cuda"),
               request.config.getoption("attn_implementation", None))


def run_part(cgb, zoo: Zoo, benchmark, request, model_type: str, part: str) -> None:
    """Refusal, load, check, timing, record."""
    import torch
    import transformers

    key = {"suite": SUITE, "model_type": model_type, "part": part, "dtype": DTYPE,
           "transformers": transformers.__version__, "torch": torch.__version__}
    try:
        path = zoo.checkpoint(model_type)
    except ZooRefused as exc:
        _finish(cgb, request, key, REFUSED, str(exc), {})
        return
    outcome = None
    try:
        outcome = _outcome(zoo, path, part, request.config.getoption("with_compile", False))
        if outcome.status == MEASURED:
            _time(cgb, benchmark, key, outcome, zoo.device)
            return
        _finish(cgb, request, key, outcome.status, outcome.reason, outcome.info)
    finally:
        if outcome is not None:
            outcome.close()
        cgb.release()


def _outcome(zoo: Zoo, path: str, part: str, with_compile: bool):
    """The part's outcome, the pipeline's own exception as a failed one."""
    from cudagraph_bench.measure.zoo_case import EAGER_PHASE, ZooOutcome, decode_outcome, first_line, forward_outcome
    from cudagraph_bench.models.presets import load_model
    from cudagraph_bench.plugin.references import generate_reference

    def run(dtype):
        try:
            model = load_model(path, dtype, zoo.device, attn_implementation=zoo.attn_implementation)
        except Exception as exc:   # noqa: BLE001 - the suite's load path refused the folder
            return ZooOutcome(REFUSED, f"the checkpoint does not load: {first_line(exc)}")
        try:
            if part == FORWARD:
                return forward_outcome(model, zoo.device)
            return decode_outcome(model, zoo.device, generate_reference, with_compile=with_compile)
        except Exception as exc:   # noqa: BLE001 - recorded as this part's failure; the other types go on
            return ZooOutcome(FAILED, f"the pipeline raised {first_line(exc)}")

    outcome = run(DTYPE)
    if zoo.device == "cpu" and outcome.info.get("phase") == EAGER_PHASE:
        # a model whose bfloat16 kernels the CPU lacks (a mixed-dtype layer norm) is classified in float32
        retry = run("float32")
        if retry.info.get("phase") != EAGER_PHASE:
            note = f"classified in float32: in {DTYPE} on the CPU {outcome.reason}"
            retry.reason = f"{retry.reason}; {note}" if retry.reason else note
            return retry
    return outcome


def _time(cgb, benchmark, key: dict, outcome, device: str) -> None:
    """Time the graph by pytest-benchmark and its eager peer by :func:`time_call`."""
    import numpy as np
    import torch

    from cudagraph_bench.measure.timing import time_call
    from cudagraph_bench.plugin.benchmark_timing import benchmark_call, round_policy

    forward = key["part"] == FORWARD
    rounds, warmup = (FORWARD_ROUNDS, FORWARD_WARMUP) if forward else (DECODE_ROUNDS, DECODE_WARMUP)
    with torch.inference_mode():   # a decode's reference request already ran once (its check): no warm-up
        reference = time_call(outcome.reference, rounds=rounds, warmup=warmup if forward else 0, device=device)
    info = {**key, "status": MEASURED, "reason": outcome.reason, **outcome.info}
    events = benchmark_call(benchmark, outcome.timed, group=f"zoo-{key['model_type']}", extra_info=info,
                            policy=round_policy(cgb.option, rounds=rounds, warmup=warmup, max_rounds=rounds),
                            device=device)
    ref_ms = float(np.median(reference.event_ms or reference.wall_ms))
    graph_ms = float(np.median(events)) if events else float(benchmark.stats.stats.median * 1e3)
    if forward:
        figures = {"eager_ms": ref_ms, "graph_ms": graph_ms, "reduction_pct": 100.0 * (1.0 - graph_ms / ref_ms)}
    else:
        n = outcome.tokens_per_call
        figures = {"generate_ms_per_token": ref_ms / n, "graph_ms_per_token": graph_ms / n,
                   "speedup": ref_ms / graph_ms}
    benchmark.extra_info.update(figures)


def _finish(cgb, request, key: dict, status: str, reason: str | None, info: dict) -> None:
    """Record an unmeasured part and end its test: a skip (refused, not graphable), failure, or pass (awaits GPU)."""
    cgb.records.fail(request.node.nodeid, {**key, **info}, reason or "", status=status)
    label = f"{key['model_type']} {key['part']}"
    if status in (REFUSED, NOT_GRAPHABLE):
        pytest.skip(f"{label} {status}: {reason}")
    if status == FAILED:
        pytest.fail(f"{label} failed (recorded in the run JSON): {reason}", pytrace=False)
    assert status == AWAITS_GPU, status      # a CPU run's part that nothing refused: the test passes
