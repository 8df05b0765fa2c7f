"""A static buffer that a graph never refreshes fails the recorded check of its variant, in float32 and bfloat16,
and the gate run on the JSON alone fails on it (CPU).

A CUDA graph cannot be captured here, so the graphs are CPU stand-ins with the interface of
:class:`~cudagraph_bench.capture.graphed.GraphedForward` (static ``input_ids``, ``attention_mask`` and output, a
``graph.replay()`` that runs the forward on the static buffers): the real
:class:`~cudagraph_bench.capture.buckets.BucketedGraphs` call path and the real
:class:`~cudagraph_bench.measure.forward_variants.PaddedVariant` replay them, and the self-test's planted faults
(:mod:`cudagraph_bench.selftest.faults`) plant into them as into the GPU graphs. The graphed decoder's stand-in is
the eager static-cache loop (:class:`~cudagraph_bench.capture.decode.GreedyDecoder` without graphs), which reads
and advances the same static position the captured steps do.
"""


import pytest
import torch

from h200_fixture import copy_doc, committed_doc, no_default_baseline_fixture, run_cli, write

from cudagraph_bench.capture.buckets import BucketCapture, BucketedGraphs, cap_buckets
from cudagraph_bench.measure import case as C
from cudagraph_bench.selftest import faults
from cudagraph_bench.measure import forward_variants as V
from cudagraph_bench.models.presets import load_model, model_forward

DTYPES = ("float32", "bfloat16")
#: A tiny GPT-2 (causal: a real token attends to the tokens before it), 64 positions.
TINY_GPT2 = {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 128, "n_positions": 64, "bos_token_id": 0,
             "eos_token_id": 0, "initializer_range": 0.2}
#: A tiny BERT (bidirectional: real tokens attend to everything the mask lets through).
TINY_BERT = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128,
             "max_position_embeddings": 64, "vocab_size": 128, "initializer_range": 0.2}
MODELS = {"gpt2": TINY_GPT2, "bert-tiny": TINY_BERT}
#: Bucket lengths of the stand-in graphs (the tiny models have 64 positions).
BUCKETS = (16, 32, 64)


@pytest.fixture(autouse=True)
def no_default_baseline(tmp_path, monkeypatch):
    return no_default_baseline_fixture(tmp_path, monkeypatch)


@pytest.fixture(scope="module", params=[(m, d) for m in MODELS for d in DTYPES], ids="-".join)
def model(request):
    name, dtype = request.param
    return load_model(name, dtype, "cpu", overrides=MODELS[name])


class CpuGraph:
    """A :class:`~cudagraph_bench.capture.graphed.GraphedForward` on the CPU: the same static buffers (capture-time
    ids drawn from ``[1, 100)``, a mask of ones), ``__call__`` copies the new inputs into them and replays;
    ``graph.replay()`` runs the forward on the static buffers into the static output."""

    def __init__(self, model, seq_len):
        self.model, self.graph = model, self
        self.static_input_ids = torch.randint(1, 100, (1, seq_len), generator=torch.Generator().manual_seed(seq_len))
        self.static_attention_mask = torch.ones(1, seq_len, dtype=torch.int64)
        with torch.inference_mode():
            self.static_output = model_forward(model, self.static_input_ids, self.static_attention_mask).clone()

    def replay(self):
        with torch.inference_mode():
            self.static_output.copy_(model_forward(self.model, self.static_input_ids, self.static_attention_mask))

    def __call__(self, input_ids, attention_mask=None):
        with torch.inference_mode():
            self.static_input_ids.copy_(input_ids)
            if attention_mask is None:
                self.static_attention_mask.fill_(1)
            else:
                self.static_attention_mask.copy_(attention_mask)
        self.replay()
        return self.static_output

    def close(self):
        self.model = None


class CpuBuckets(BucketedGraphs):
    """:class:`~cudagraph_bench.capture.buckets.BucketedGraphs` of :class:`CpuGraph` s: its own call path (pad to the
    smallest bucket, copy, replay, slice the real rows)."""

    def __init__(self, model, buckets):
        self.buckets, self.pad_token_id, self.pool, self.served = cap_buckets(buckets, 64), 0, None, 0
        self.graphs = {b: CpuGraph(model, b) for b in sorted(self.buckets, reverse=True)}
        self.captures = [BucketCapture(b, 0.0, 0.0) for b in sorted(self.buckets, reverse=True)]


def padded_variant(model, name, seq_len):
    """The real ``padded`` (one graph at 64) or ``bucketed`` (:data:`BUCKETS`) variant over CPU stand-in graphs."""
    lengths = (64,) if name == "padded" else BUCKETS
    graphs = CpuBuckets(model, V.PaddedVariant.graph_lengths(model, lengths, name, seq_len))
    return V.PaddedVariant(model, seq_len, lengths=lengths, name=name, graphs=graphs)


class CpuGraphVariant(V.GraphVariant):
    """The ``graph`` variant over a :class:`CpuGraph` (what :class:`~cudagraph_bench.selftest.faults.StaleInputGraph`
    plants into)."""

    name = "graph"

    def __init__(self, model, seq_len):
        V.ForwardVariant.__init__(self, seq_len)
        self._graph = CpuGraph(model, seq_len)


def spec(model, variant, seq_len):
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    name = "gpt2" if model.config.model_type == "gpt2" else "bert-tiny"
    return C.CaseSpec(model=name, dtype=dtype, seq_len=seq_len, variant=variant, device="cpu")


def check(model, variant, seq_len, built):
    return C.check_against_eager(built, model, spec(model, variant, seq_len), torch.Generator().manual_seed(7))


# ---------------------------------------------------------------------------- which prompts the check runs


def test_a_padded_graph_is_checked_at_its_shortest_own_and_longest_prompt():
    assert C.check_lengths(50, 3) == [50, 50, 50]
    assert C.check_lengths(50, 3, (33, 64)) == [33, 50, 64]
    assert C.check_lengths(16, 3, (1, 1024)) == [1, 16, 1024]
    assert C.check_lengths(16, 4, (1, 16)) == [1, 16, 16, 16]
    assert C.check_lengths(7, 1, (7, 7)) == [7]


def test_a_padded_variant_serves_the_lengths_of_its_bucket():
    model = load_model("gpt2", "float32", "cpu", overrides=TINY_GPT2)
    assert padded_variant(model, "padded", 16).check_range == (1, 64)
    assert padded_variant(model, "bucketed", 16).check_range == (1, 16)
    assert padded_variant(model, "bucketed", 50).check_range == (33, 64)
    assert V.ForwardVariant(8).check_range is None


# ---------------------------------------------------------------------------- forward: refreshed and stale buffers


@pytest.mark.parametrize("variant,seq_len", [("padded", 16), ("bucketed", 16), ("bucketed", 50)])
def test_a_padded_graph_that_refreshes_its_buffers_passes(model, variant, seq_len):
    out = check(model, variant, seq_len, padded_variant(model, variant, seq_len))
    assert out.passed, out.reason


@pytest.mark.parametrize("variant,seq_len", [("padded", 16), ("bucketed", 16), ("bucketed", 50)])
def test_a_padded_graph_keeping_its_first_mask_fails_its_check(model, variant, seq_len):
    built = padded_variant(model, variant, seq_len)
    planted = faults.PlantedVariant(variant, seq_len, faults.StaleMaskGraphs(built), {"planted_fault": "stale-mask"},
                                    None)
    out = check(model, variant, seq_len, planted)
    lo, hi = built.check_range
    assert not out.passed and out.reason.startswith("outputs differ from eager")
    assert f"in the {hi}-token graph, after {lo}" in out.reason, out.reason     # a longer prompt after it


def test_the_planted_mask_is_written_once_per_graph():
    model = load_model("gpt2", "float32", "cpu", overrides=TINY_GPT2)
    built = padded_variant(model, "bucketed", 50)
    stale = faults.StaleMaskGraphs(built)
    graph = built._graphs.graphs[64]
    stale(torch.randint(0, 128, (1, 40)))
    first = graph.static_attention_mask.clone()
    ids = torch.randint(0, 128, (1, 60))
    stale(ids)
    assert torch.equal(graph.static_attention_mask, first) and int(first.sum()) == 40
    assert torch.equal(graph.static_input_ids[:, :60], ids)          # the ids are still copied
    assert stale.check_range == (33, 64) and stale.static_output is graph.static_output


def test_a_padded_encoder_graph_that_never_writes_its_mask_fails_its_check():
    """The capture-time mask (all ones) lets a bidirectional model's real tokens attend to the padding; a causal
    model's real rows never see it (the output is right), so only the encoder must fail."""
    for dtype in DTYPES:
        model = load_model("bert-tiny", dtype, "cpu", overrides=TINY_BERT)
        built = padded_variant(model, "padded", 16)
        graph = built._graphs.graphs[64]
        unwritten = Replaying(lambda ids: _replay_ids_only(graph, ids), 16, built)
        out = check(model, "padded", 16, unwritten)
        assert not out.passed and "in the 64-token graph" in out.reason, (dtype, out)


class Replaying(V.ForwardVariant):
    """A stand-in graph variant that replays ``fn`` on the static buffers of ``built`` (its static output and
    the lengths its graph serves)."""

    name = "padded"

    def __init__(self, fn, seq_len, built):
        super().__init__(seq_len)
        self._fn, self._built = fn, built

    @property
    def static_output(self):
        return self._built.static_output

    @property
    def check_range(self):
        return self._built.check_range

    def __call__(self, input_ids):
        return self._fn(input_ids)


def _replay_ids_only(graph, ids):
    with torch.inference_mode():
        graph.static_input_ids.zero_()
        graph.static_input_ids[:, :ids.shape[1]] = ids
    graph.replay()
    return graph.static_output[:, :ids.shape[1]]


@pytest.mark.parametrize("variant,seq_len", [("graph", 16), ("padded", 16), ("bucketed", 50)])
def test_a_graph_that_never_copies_its_input_ids_fails_its_check(model, variant, seq_len):
    built = CpuGraphVariant(model, seq_len) if variant == "graph" else padded_variant(model, variant, seq_len)
    if variant == "graph":
        stale = faults.PlantedVariant(variant, seq_len, faults.StaleInputGraph(built), {}, None)
    else:
        graphs = built._graphs
        for graph in graphs.graphs.values():     # ids left as captured: only the mask is refreshed
            graph.static_input_ids.copy_(torch.randint(1, 100, graph.static_input_ids.shape))
        stale = Replaying(lambda ids: _replay_mask_only(graphs, ids), seq_len, built)
    out = check(model, variant, seq_len, stale)
    assert not out.passed and out.reason.startswith("outputs differ from eager"), out


def _replay_mask_only(graphs, ids):
    from cudagraph_bench.capture.buckets import pad_prompt

    graph = graphs.graphs[graphs.bucket_for(ids.shape[1])]
    with torch.inference_mode():
        graph.static_attention_mask.copy_(pad_prompt(ids, graph.static_input_ids.shape[1])[1])
    graph.replay()
    return graph.static_output[:, :ids.shape[1]]


# ---------------------------------------------------------------------------- decode: a stale position


class FakeRefs:
    """:class:`~cudagraph_bench.plugin.references.DecodeReferences` of one CPU model."""

    def __init__(self, model):
        from cudagraph_bench.models.presets import max_positions
        from cudagraph_bench.plugin.references import DecodeReferences

        self.refs = DecodeReferences(lambda name, dtype: model, lambda name: max_positions(model))

    def __getattr__(self, name):
        return getattr(self.refs, name)


def decode_spec(dtype, variant="graph"):
    from cudagraph_bench.measure.decode_case import DecodeSpec

    return DecodeSpec("gpt2", dtype, 12, 8, variant, longest_new_tokens=8, steps_per_graph=4, compile_mode="default",
                      compile_timeout_s=0, compile_tuning="none", buckets=(16,), rounds=1, max_rounds=1)


def prepared_decode(monkeypatch, dtype, plant=None):
    """The decode ``graph`` case through :func:`~cudagraph_bench.measure.decode_case.prepare_decode` on the CPU, its
    decoder the eager static-cache loop (the steps a graph captures)."""
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.measure import decode_case
    from tiny_models import TINY_CAUSAL

    model = load_model("gpt2", dtype, "cpu", overrides=TINY_CAUSAL["gpt2"])
    monkeypatch.setattr(decode_case, "build_decoder",
                        lambda spec, m, info: GreedyDecoder(m, 64, use_graph=False, steps_per_graph=4))
    ids = torch.randint(0, 1000, (1, 12), generator=torch.Generator().manual_seed(5))
    return decode_case.prepare_decode(decode_spec(dtype), model, ids, FakeRefs(model), plant=plant)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_decoder_that_refreshes_its_position_passes_both_requests(monkeypatch, dtype):
    prepared = prepared_decode(monkeypatch, dtype)
    assert prepared.info["correct"] and prepared.failed_check is None and prepared.info["checked_requests"] == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_decoder_that_never_refreshes_its_position_fails_its_check(monkeypatch, dtype):
    prepared = prepared_decode(monkeypatch, dtype, plant=faults.StalePositionDecoder)
    info = prepared.info
    assert info["planted_fault"] == "stale-position" and info["correct"] is False and info["status"] == "mismatch"
    assert prepared.failed_check == "graphed decode tokens differ from the eager static-cache loop's"
    assert info["generate_check_passed"] is False


class FirstRequestPosition(faults.StalePositionDecoder):
    """A decoder that sets its position for its first request only (a stale position from the second on)."""

    fields = {}
    requests = 0

    def generate(self, *args, **kw):
        self.requests += 1
        return (self._built.generate(*args, **kw) if self.requests == 1 else super().generate(*args, **kw))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_position_stale_from_the_second_request_fails_on_it(monkeypatch, dtype):
    prepared = prepared_decode(monkeypatch, dtype, plant=FirstRequestPosition)
    assert prepared.info["correct"] is False
    assert prepared.failed_check.startswith("second request on the same decoder: graphed decode tokens differ")


def test_the_stale_faults_parse_and_plant_where_they_belong():
    from cudagraph_bench.variants import DECODE, FORWARD

    mask, position = faults.parse_fault("stale-mask"), faults.parse_fault("stale-position")
    assert [mask.applies_to(FORWARD, v) for v in ("graph", "padded", "bucketed", "compile+graph")] == \
        [False, True, True, False]
    assert [position.applies_to(DECODE, v) for v in ("static-eager", "graph", "compile+graph")] == [False, True, True]
    assert not mask.applies_to(DECODE, "graph") and not position.applies_to(FORWARD, "graph")
    with pytest.raises(ValueError, match="stale-mask, stale-position"):
        faults.parse_fault("stale")
    assert faults.plant_decode(position, None) is faults.StalePositionDecoder


# ---------------------------------------------------------------------------- the gate reads the recorded check


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_gate_fails_a_run_whose_padded_check_saw_a_stale_mask(tmp_path, capsys, dtype):
    model = load_model("gpt2", dtype, "cpu", overrides=TINY_GPT2)
    built = padded_variant(model, "bucketed", 50)
    planted = faults.PlantedVariant("bucketed", 50, faults.StaleMaskGraphs(built), {}, None)
    outcome = check(model, "bucketed", 50, planted)
    doc = copy_doc(committed_doc("gpu-gate"))
    bench = next(b for b in doc["benchmarks"] if b["extra_info"].get("variant") == "bucketed"
                 and b["extra_info"]["seq_len"] == 50)
    bench["extra_info"].update(correct=outcome.passed, check=outcome.method, max_abs_diff=outcome.max_abs_diff,
                               status="mismatch", reason=outcome.reason)
    rc, out, err = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", "none")
    line = out.splitlines()[-1]
    assert rc == 1 and line.startswith("gate FAIL: ") and "bucketed failed its correctness check" in line, err
    assert "after 33" in line


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_gate_fails_a_run_whose_decode_check_saw_a_stale_position(tmp_path, capsys, monkeypatch, dtype):
    info = prepared_decode(monkeypatch, dtype, plant=faults.StalePositionDecoder).info
    doc = copy_doc(committed_doc("gpu-gate"))
    bench = next(b for b in doc["benchmarks"] if b["extra_info"].get("suite") == "decode"
                 and b["extra_info"]["variant"] == "graph")
    bench["extra_info"].update({k: info[k] for k in ("correct", "check", "status", "reason", "generate_check_passed",
                                                     "generate_check")})
    rc, out, err = run_cli(capsys, "gate", write(doc, tmp_path / "run.json"), "--baseline", "none")
    line = out.splitlines()[-1]
    assert rc == 1 and "graph failed its correctness check" in line and "static-cache loop" in line, err
