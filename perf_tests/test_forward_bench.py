"""Benchmarks: one forward pass at batch 1, eager vs CUDA graph replay (and, with --with-compile,
torch.compile variants), per model x dtype x prompt length.

Eager and graph of one case share a pytest-benchmark group, so they print side by side. Every timed
call ends with a synchronize; CUDA-event ms of each round are in extra_info["cuda_event_ms"].
Kernel launches per eager forward (extra_info["n_kernels"]) are counted by test_kernel_counts.py in
worker processes: a profiler session can leave CUPTI attached and slow later eager launches.
"""

import itertools

import pytest

from cudagraph_bench.plugin import benchmark_call

pytestmark = pytest.mark.gpu


def _runner(cgb, model, case):
    """-> (callable(input_ids) -> output, close(), extra_info)"""
    from cudagraph_bench.models.presets import model_forward
    from cudagraph_bench.capture.graphed import GraphedForward

    if case.variant == "eager":
        return (lambda ids: model_forward(model, ids)), (lambda: None), {}
    if case.variant == "graph":
        graph = GraphedForward(model, case.seq_len, check_data_ptrs=cgb.option("check_data_ptrs"))
        return graph, graph.close, {"capture_ms": graph.capture_ms}
    from cudagraph_bench.measure.variants import build_variant

    variant = build_variant(model, case.variant, case.seq_len, dtype=case.dtype)
    return variant, variant.close, {"compile_ms": getattr(variant, "compile_ms", None)}


def test_forward(benchmark, cgb, fwd_case):
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.models.presets import experts_implementation

    case = fwd_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    model = cgb.model(case.model, case.dtype)
    inputs = itertools.cycle(cgb.inputs(model, case.seq_len, n=8))
    before = cgb.ledger.reserved_mib()
    try:
        run, close, info = _runner(cgb, model, case)
    except NotGraphableError as exc:
        pytest.skip(f"{case.model} cannot be graphed: {exc}")
    if experts_implementation(model) is not None:
        info["experts_implementation"] = experts_implementation(model)
    try:
        if case.variant != "eager":  # record whether what is timed matches eager (extra_info["correct"])
            info.update(cgb.check(model, case, run, static_output=getattr(run, "static_output", None)))
        benchmark_call(benchmark, cgb, lambda: run(next(inputs)), group=case.group,
                       extra_info={**case.extra_info(), **info})
    finally:
        close()
        run = close = None
        cgb.release()
    if case.variant != "eager":
        cgb.ledger.record(case.test_id, before, cgb.ledger.reserved_mib())
