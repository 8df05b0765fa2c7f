"""A graph whose static buffer is never refreshed fails the check the benchmarks record (GPU, float32 and bfloat16).

The self-test's faults (:mod:`cudagraph_bench.selftest.faults`) are planted into real captured graphs and checked by
the benchmarks' own pipeline (:func:`~cudagraph_bench.measure.case.prepare_case`,
:func:`~cudagraph_bench.measure.decode_case.prepare_decode`):

- ``stale-mask``: padded and bucketed graphs keeping the mask of their first replay fail (the check runs the
  bucket's shortest prompt first, then longer ones); the same graphs refreshing their mask pass;
- ``stale-input``: a graph that never copies its input ids fails;
- a graph whose static input buffer was re-pointed after capture fails its check (the check's replays compare
  each static buffer's ``data_ptr()`` with the captured one; the timed replays do not);
- ``stale-position``: a graphed decode that never refreshes its position fails; refreshing it, both checked
  requests pass.
"""

import pytest

pytestmark = pytest.mark.gpu

DTYPES = ("float32", "bfloat16")
#: (model, prompt tokens, variant): a bidirectional model's output barely moves with a mask stale within the
#: 33..64-token bucket (random weights), so it is planted where the bucket starts at 1 token.
MASK_CASES = [("gpt2", 16, "padded"), ("gpt2", 16, "bucketed"), ("gpt2", 50, "padded"), ("gpt2", 50, "bucketed"),
              ("bert-tiny", 16, "padded"), ("bert-tiny", 16, "bucketed"), ("bert-tiny", 50, "padded")]


def _prepared(cgb, model_name, dtype, seq_len, variant, fault=None):
    from cudagraph_bench.cases import Case
    from cudagraph_bench.measure.case import prepare_case
    from cudagraph_bench.selftest.faults import parse_fault, plant_forward

    model = cgb.model(model_name, dtype)
    spec = cgb.case_spec(Case(model_name, dtype, seq_len, variant))
    built = plant_forward(parse_fault(fault), model, spec) if fault else None
    return prepare_case(spec, model, variant=built)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model_name,seq_len,variant", MASK_CASES)
def test_a_padded_graph_keeping_its_first_mask_fails_its_recorded_check(cgb, model_name, seq_len, variant, dtype):
    cgb.skip_if_too_long(model_name, seq_len)
    honest = _prepared(cgb, model_name, dtype, seq_len, variant)
    try:
        assert honest.info["correct"], honest.info.get("reason")
    finally:
        honest.close()
    stale = _prepared(cgb, model_name, dtype, seq_len, variant, "stale-mask")
    try:
        info = stale.info
        print(f"{model_name} {dtype} L={seq_len} {variant} stale mask: {info.get('reason')}")
        assert info["planted_fault"] == "stale-mask" and info["correct"] is False and info["status"] == "mismatch"
        assert "-token graph, after " in info["reason"]
    finally:
        stale.close()
        cgb.release()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model_name", ["gpt2", "bert-tiny"])
def test_a_graph_that_never_copies_its_input_fails_its_recorded_check(cgb, model_name, dtype):
    stale = _prepared(cgb, model_name, dtype, 50, "graph", "stale-input")
    try:
        print(f"{model_name} {dtype} stale input: {stale.info.get('reason')}")
        assert stale.info["correct"] is False and stale.info["reason"].startswith("outputs differ from eager")
    finally:
        stale.close()
        cgb.release()


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_graphed_decode_that_never_refreshes_its_position_fails_its_recorded_check(cgb, causal_model, dtype):
    from cudagraph_bench.cases import DecodeCase
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.measure.decode_case import DECODE_PROMPT_SEED, prepare_decode
    from cudagraph_bench.selftest.faults import StalePositionDecoder

    cgb.skip_if_too_long(causal_model, 50 + 32)
    model = cgb.model(causal_model, dtype)
    spec = cgb.decode_spec(DecodeCase(causal_model, dtype, 50, 32, "graph"))
    (ids,) = cgb.inputs(model, 50, n=1, seed=DECODE_PROMPT_SEED)
    try:
        honest = prepare_decode(spec, model, ids, cgb.references)
    except NotGraphableError as exc:
        pytest.skip(f"{causal_model} cannot be graphed: {exc}")
    try:
        assert honest.failed_check is None and honest.info["checked_requests"] == 2
    finally:
        honest.close()
    stale = prepare_decode(spec, model, ids, cgb.references, plant=StalePositionDecoder)
    try:
        print(f"{causal_model} {dtype} stale position: {stale.info.get('reason')}")
        assert stale.info["planted_fault"] == "stale-position" and stale.failed_check is not None
        assert stale.info["correct"] is False or stale.info["generate_check_passed"] is False
    finally:
        stale.close()
        cgb.release()


def test_a_graph_whose_static_buffer_was_re_pointed_fails_its_check_and_times_unchecked(cgb):
    import torch

    from cudagraph_bench.cases import Case
    from cudagraph_bench.measure.case import CaseFailed, prepare_case
    from cudagraph_bench.measure.forward_variants import build_variant

    model = cgb.model("gpt2", "float32")
    spec = cgb.case_spec(Case("gpt2", "float32", 16, "graph"))
    honest = prepare_case(spec, model)
    try:
        assert honest.info["correct"] and honest.variant._graph.check_data_ptrs is False
    finally:
        honest.close()
    moved = build_variant(model, "graph", 16)
    moved._graph._input_ids.set_(torch.zeros_like(moved._graph._input_ids))     # the baked pointer now stale
    with pytest.raises(CaseFailed) as failed:
        prepare_case(spec, model, variant=moved)
    assert failed.value.phase == "check" and "data_ptr() changed since capture" in failed.value.reason
    cgb.release()
