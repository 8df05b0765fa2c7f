"""The measuring side of the proof of replay without a GPU: what each variant is expected to launch, that nothing
is profiled or written on a CPU or without ``--replay-proof``, and a compiled case's cudagraph skips while timed."""

from types import SimpleNamespace

import pytest

from cudagraph_bench.measure.case import CaseSpec, PreparedCase
from cudagraph_bench.measure.replay_proof import PAD_INPUT_KERNELS, proof_fields, replay_expectation
from cudagraph_bench.measure.forward_variants import VariantFailure
from cudagraph_bench.variants import variant


def forward(name):
    return SimpleNamespace(spec=SimpleNamespace(variant_spec=variant("forward", name)))


def decode(name, *, new_tokens=64, steps_per_graph=8, seq_len=50, buckets=(), prefill_graphs=()):
    decoder = SimpleNamespace(steps_per_graph=steps_per_graph, buckets=buckets,
                              _prefill_graphs={b: object() for b in prefill_graphs})
    spec = SimpleNamespace(variant_spec=variant("decode", name), new_tokens=new_tokens, seq_len=seq_len)
    return SimpleNamespace(spec=spec, decoder=decoder)


@pytest.mark.parametrize("name, expected", [("graph", (1, 0)), ("compile+graph", (1, 0)),
                                            ("padded", (1, PAD_INPUT_KERNELS)), ("bucketed", (1, PAD_INPUT_KERNELS)),
                                            ("eager", None), ("compile", None)])
def test_forward_expectations(name, expected):
    assert replay_expectation(forward(name)) == expected


def test_a_decode_request_launches_one_graph_per_replay_of_its_plan():
    assert replay_expectation(decode("graph")) == (7 + 7, None)           # 63 steps: 7 x 8 steps, 7 x 1 step
    assert replay_expectation(decode("graph", steps_per_graph=1)) == (63, None)
    assert replay_expectation(decode("graph", new_tokens=1)) == (0, None)
    with_prefill = decode("compile+graph", buckets=(64, 128), prefill_graphs=(64, 128))
    assert replay_expectation(with_prefill) == (15, None)                   # + the prefill graph of bucket 64
    for name in ("generate", "static-eager", "generate-static-compile"):
        assert replay_expectation(decode(name)) is None


def test_nothing_is_profiled_on_a_cpu_or_without_the_option():
    def never():
        raise AssertionError("profiled")

    prepared = SimpleNamespace(spec=forward("graph").spec, call=never)
    assert proof_fields(prepared, device="cpu", enabled=True) == {}
    assert proof_fields(prepared, device="cuda", enabled=False) == {}
    assert proof_fields(SimpleNamespace(spec=forward("eager").spec, call=never), device="cuda", enabled=True) == {}


class _Variant:
    notes: list = []

    def __call__(self, ids):
        return ids

    def close(self):
        pass


def test_a_compiled_case_records_its_cudagraph_skips_while_timed_with_inductors_reason():
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    spec = CaseSpec("gpt2", "float32", 16, "compile")
    clean = PreparedCase(spec, _Variant(), None, [0], {})
    assert clean.finish() == [] and clean.cudagraph_skips == {"count": 0, "reasons": []}
    clean.close()
    skipped = PreparedCase(spec, _Variant(), None, [0], {})
    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to mutated inputs (2 instances)")
    with pytest.raises(VariantFailure, match=r"1 skip\(s\): skipping cudagraphs due to mutated inputs"):
        skipped.finish()
    assert skipped.cudagraph_skips == {"count": 1,
                                       "reasons": ["skipping cudagraphs due to mutated inputs (2 instances)"]}
    skipped.close()
    assert PreparedCase(CaseSpec("gpt2", "float32", 16, "graph"), _Variant(), None, [0], {}).cudagraph_skips is None
