"""Benchmarks: what padding every prompt to one length costs against length buckets.

Variants ``padded`` (one graph at --pad-to, default 1024, capped at the model's positions) and
``bucketed`` (one graph per --buckets length, all captured into one shared pool; a prompt replays the
smallest bucket >= L) for L in 16, 50, 128, 512, measured by the same pipeline as the forward benchmarks
(:meth:`cudagraph_bench.plugin.Session.measure`). They share the group of test_forward_bench's
eager/graph of the same case, so all four print together; extra_info has ``bucket``, ``buckets``,
``capture_ms_by_bucket`` and ``pool_mib_by_bucket``. The padded graph and the bucket graphs of a model and dtype
are captured once, by its first prompt length, and replayed by the others (``graphs_reused``), as a server
captures its buckets once for every prompt.
"""

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def padding_graphs_dropped_after_the_module(cgb):
    """The graphs the session holds for a model's next prompt length are not kept for the modules after."""
    yield
    cgb.padding.drop()


def test_padded_and_bucketed(benchmark, cgb, pad_case, request):
    cgb.measure(benchmark, pad_case, request)
