"""Kernel launches and GPU busy time of one eager forward per case (torch.profiler), for the
launch-overhead model and the forward roofline.

The profiler never runs in this process: a profiler session can leave CUPTI attached and add host cost
to every later launch (pytorch/pytorch#144455), so the counting happens in worker processes
(:func:`cudagraph_bench.measure.kernel_counts.count_in_workers`) and this file may run before, between or after
the benchmarks. The first test of the module sends every selected case to one worker (a crash or hang
fails only the case in flight), unless the session's held worker has counted them already (started by the
first correctness test, it counts before the first timed test:
:meth:`~cudagraph_bench.session.Session.hold_profiling_worker`); each test then records its case's count and
busy time in the session ledger, and the plugin writes them into the matching eager benchmark's extra_info["n_kernels"] and
extra_info["gpu_busy_ms"] when it writes the JSON (a merge of xdist workers or CI shards does it for the
benchmarks that another process measured: :func:`cudagraph_bench.results.record.attach_kernel_counts`).
The test takes the ``benchmark`` fixture only so that it runs under ``--benchmark-only``; it times nothing.

That the one-window profile (:func:`cudagraph_bench.measure.roofline.profile_forward`, calls told apart by
marker kernels) counts each call's kernels like a window of its own is checked on the GPU by
``perf_tests/test_launch.py::test_count_kernel_launches`` (in the child process it already starts).
"""

import pytest

from cudagraph_bench.session import FORWARD_PROFILES_GROUP

# one xdist group with the busy-time tests: under --gpu-workers one worker profiles every case in one batch
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
              pytest.mark.xdist_group(FORWARD_PROFILES_GROUP)]


@pytest.fixture(scope="module")
def kernel_counts(request, cgb):
    from cudagraph_bench.session import ProfiledCases

    return ProfiledCases(request, cgb)


def test_kernel_launches_per_eager_forward(benchmark, cgb, count_case, kernel_counts):
    case = count_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    got = kernel_counts.get((case.model, case.dtype, case.seq_len))
    assert got.status == "ok", f"{case.test_id}: kernels not counted ({got.phase}): {got.reason}"
    cgb.ledger.kernel_counts[got.key] = got.eager_fields()
    print(f"{case.test_id}: {got.n_kernels} kernels per eager forward, GPU busy {got.gpu_busy_ms:.4f} ms")
