"""Kernel launches of one eager forward per case (torch.profiler), for the launch-overhead model.

The file name sorts last on purpose: a profiler session can leave CUPTI attached and add host cost to
every later launch (seen on the H200: eager gpt2 at 50 tokens went from 6.1 to 7.6 ms after one
profiled call; pytorch/pytorch#144455), so counting happens after all timing. The plugin writes each
count into the matching eager benchmark's extra_info["n_kernels"] when it writes the JSON.
The test takes the ``benchmark`` fixture only so that it runs under ``--benchmark-only``; it times nothing.
"""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")]


def test_kernel_launches_per_eager_forward(benchmark, cgb, count_case):
    from cudagraph_bench.launch import count_kernel_launches
    from cudagraph_bench.presets import model_forward

    case = count_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    model = cgb.model(case.model, case.dtype)
    (ids,) = cgb.inputs(model, case.seq_len, n=1)
    first = count_kernel_launches(lambda: model_forward(model, ids))
    second = count_kernel_launches(lambda: model_forward(model, ids))
    assert first > 0, "the profiler saw no kernels (CUPTI unavailable?)"
    assert first == second, "the same eager forward must launch the same kernels every time"
    cgb.ledger.kernel_counts[(case.model, case.dtype, case.seq_len)] = first
    print(f"{case.test_id}: {first} kernels per eager forward")
