"""Proof of replay: one profiled call of a timed graph variant, its graph launches and kernels outside a graph against
what it should launch. A graph variant that silently runs eagerly passes its check (vLLM#36165, pytorch#124506). Only
after timing and with ``--replay-proof``: CUPTI left attached slows launches (pytorch#144455)."""

from __future__ import annotations

from typing import Callable

from cudagraph_bench.capture.buckets import select_bucket
from cudagraph_bench.capture.decode import replay_plan
from cudagraph_bench.measure.launch_overhead import _device_type_name, _require_cuda, profile_calls
from cudagraph_bench.measure.roofline import window_records
from cudagraph_bench.results.replay import ReplayCount, count_replay, replay_field
from cudagraph_bench.variants import DECODE

#: Kernels a padded or bucketed forward launches outside its graph per call to pad the prompt.
PAD_INPUT_KERNELS = 4


def count_call(fn: Callable[[], object], *, calls: int = 1) -> ReplayCount:
    """Launches, kernels and copies outside a graph, summed over ``calls`` calls of ``fn`` under ``inference_mode`` by
    :func:`~cudagraph_bench.measure.launch_overhead.profile_calls` (CPU activity too: some torch versions record
    Triton's ``cuLaunchKernel`` only with it). CudaUnavailableError without a GPU; ValueError for ``calls < 1``."""
    torch = _require_cuda()
    with torch.inference_mode():
        prof = profile_calls(fn, calls=calls)
    return count_replay([(r.name, str(r.activity_type) if getattr(r, "activity_type", None)   # else the device type
                          else _device_type_name(r.device_type)) for r in window_records(prof)])


def replay_expectation(prepared) -> tuple[int, int | None] | None:
    """``(graph launches per call, kernels outside a graph allowed per call or None: unbounded)``; None for a variant
    without a graph of the suite's own. A forward graph: one launch, no kernel outside (padded:
    :data:`PAD_INPUT_KERNELS`). A graphed decode request: :func:`~cudagraph_bench.capture.decode.replay_plan`'s replays
    plus a prefill graph's."""
    kind = prepared.spec.variant_spec
    if not kind.captured:
        return None
    if kind.suite != DECODE:
        return 1, (PAD_INPUT_KERNELS if kind.lengths else 0)
    decoder = prepared.decoder
    launches = sum(count for _, count in replay_plan(prepared.spec.new_tokens - 1, decoder.steps_per_graph))
    buckets = getattr(decoder, "buckets", ())
    bucket = select_bucket(prepared.spec.seq_len, buckets) if buckets else None
    if bucket is not None and bucket in getattr(decoder, "_prefill_graphs", {}):
        launches += 1
    return launches, None


def proof_fields(prepared, *, device: str, enabled: bool, calls: int = 1) -> dict:
    """``{"replay": ...}`` of a graph variant on CUDA when ``enabled``, else ``{}``. Call after timing."""
    expected = replay_expectation(prepared)
    if not enabled or expected is None or not str(device).startswith("cuda"):
        return {}
    count = count_call(prepared.call, calls=calls)
    return {"replay": replay_field(count, calls=calls, expected_graph_launches=expected[0],
                                   kernels_outside_allowed=expected[1])}
