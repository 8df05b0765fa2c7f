"""Kernel launches and GPU busy time of one eager forward per case (torch.profiler), for the
launch-overhead model and the forward roofline.

The tests are marked ``profiles``: the plugin runs them after every timed test of the session, in the same
process, since a profiler session can leave CUPTI attached and add host cost to every later launch
(pytorch/pytorch#144455; :mod:`cudagraph_bench.plugin.profiles`). Each test records its case's count and busy time
in the session's records; the plugin writes them into the matching eager benchmark's extra_info["n_kernels"] and
extra_info["gpu_busy_ms"] when it writes the JSON (a merge of shards does it for the benchmarks that another
process measured: :func:`cudagraph_bench.results.record.attach_kernel_counts`). The test takes the ``benchmark``
fixture only so that it runs under ``--benchmark-only``; it times nothing.

That the one-window profile (:func:`cudagraph_bench.measure.roofline.profile_forward`, calls told apart by
marker kernels) counts each call's kernels like a window of its own is checked on the GPU by
``perf_tests/test_launch.py::test_count_kernel_launches``.
"""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.profiles, pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")]


def test_kernel_launches_per_eager_forward(benchmark, cgb, count_case):
    case = count_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    got = cgb.profiles.get(case.without_variant())
    assert got.status == "ok", f"{case.test_id}: kernels not counted ({got.phase}): {got.reason}"
    cgb.records.kernel_counts[got.key] = got.eager_fields()
    print(f"{case.test_id}: {got.n_kernels} kernels per eager forward, GPU busy {got.gpu_busy_ms:.4f} ms")
