"""Kernel launches and GPU busy time of one eager forward per case (torch.profiler), for the
launch-overhead model and the forward roofline.

The profiler never runs in this process: a profiler session can leave CUPTI attached and add host cost
to every later launch (pytorch/pytorch#144455), so the counting happens in worker processes
(:func:`cudagraph_bench.measure.kernel_counts.count_in_workers`) and this file may run before, between or after
the benchmarks. The first test of the module sends every selected case to one worker (a crash or hang
fails only the case in flight); each test then records its case's count and busy time in the session
ledger, and the plugin writes them into the matching eager benchmark's extra_info["n_kernels"] and
extra_info["gpu_busy_ms"] when it writes the JSON.
The test takes the ``benchmark`` fixture only so that it runs under ``--benchmark-only``; it times nothing.
"""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")]


class _Counts:
    """Kernel counts of the cases of this module, counted in workers in one batch when first asked."""

    def __init__(self, request, cgb):
        self._request, self._cgb = request, cgb
        self._done: dict = {}

    def _selected(self) -> list:
        """(model, dtype, seq_len) of every case of this module that pytest selected and that fits the model."""
        keys = []
        for item in self._request.session.items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            if getattr(item, "module", None) is not self._request.module or "seq_len" not in params:
                continue
            key = (params["model"], params["dtype"], params["seq_len"])     # the plain params of count_case
            if key not in keys and self._fits(*key):
                keys.append(key)
        return keys

    def _fits(self, model, _dtype, seq_len) -> bool:
        try:
            return seq_len <= self._cgb.position_limit(model)
        except Exception:   # an unknown model: its own test reports it (skip or worker failure), not this one
            return False

    def get(self, key):
        from cudagraph_bench.measure.kernel_counts import count_in_workers, count_spec

        if key not in self._done:
            batch = [key] + [k for k in self._selected() if k != key and k not in self._done]
            self._done.update(count_in_workers([count_spec(*k) for k in batch]))
        return self._done[key]


@pytest.fixture(scope="module")
def kernel_counts(request, cgb):
    return _Counts(request, cgb)


def test_kernel_launches_per_eager_forward(benchmark, cgb, count_case, kernel_counts):
    case = count_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    got = kernel_counts.get((case.model, case.dtype, case.seq_len))
    assert got.status == "ok", f"{case.test_id}: kernels not counted ({got.phase}): {got.reason}"
    cgb.ledger.kernel_counts[got.key] = got.eager_fields()
    print(f"{case.test_id}: {got.n_kernels} kernels per eager forward, GPU busy {got.gpu_busy_ms:.4f} ms")
