"""Benchmarks: what padding every prompt to one length costs against length buckets.

Variants ``padded`` (one graph at --pad-to, default 1024, capped at the model's positions) and
``bucketed`` (one graph per --buckets length, smallest bucket >= L) for L in 16, 50, 128, 512. They
share the group of test_forward_bench's eager/graph of the same case, so all four print together.
"""

import itertools

import pytest

from cudagraph_bench.plugin import benchmark_call

pytestmark = pytest.mark.gpu


def test_padded_and_bucketed(benchmark, cgb, pad_case):
    from cudagraph_bench.capture.buckets import BucketedGraphs

    case = pad_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    model = cgb.model(case.model, case.dtype)
    limit = cgb.position_limit(case.model)
    buckets = (min(cgb.option("pad_to"), limit),) if case.variant == "padded" else cgb.option("buckets")
    inputs = itertools.cycle(cgb.inputs(model, case.seq_len, n=8))
    before = cgb.ledger.reserved_mib()
    graphs = BucketedGraphs(model, buckets)
    try:
        bucket = graphs.bucket_for(case.seq_len)
        checked = cgb.check(model, case, graphs, static_output=graphs.graphs[bucket].static_output)
        info = {**case.extra_info(), **checked, "bucket": bucket,
                "buckets": list(graphs.buckets),
                "capture_ms": {str(c.bucket): c.capture_ms for c in graphs.captures},
                "pool_mib": {str(c.bucket): c.pool_mib for c in graphs.captures}}
        benchmark_call(benchmark, cgb, lambda: graphs(next(inputs)), group=case.group, extra_info=info)
    finally:
        graphs.close()
        graphs = None
        cgb.release()
    cgb.ledger.record(case.test_id, before, cgb.ledger.reserved_mib())
