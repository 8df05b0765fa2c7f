"""The self-test's replay faults without a GPU: ``eager-layer`` (the graph's output layer run eagerly after each
replay) and ``skip-inductor-graphs`` (``compile+graph`` without its graph): how they parse and where they are
planted, the eager layer's split forward on tiny CPU models (its outputs equal eager's), the self-test's runs of
both with ``--replay-proof``, and their verdicts on runs derived from committed H200 runs; and ``cudagraph-bench
run -- --replay-proof`` passing the flag to every pytest process."""


import pytest
import torch
import transformers

from h200_fixture import copy_doc, committed_doc, committed_selftest_runs, run_cli, write
from test_selftest import JITTER, _with_device_figure

from cudagraph_bench.cli import build_parser
from cudagraph_bench.errors import UsageError
from cudagraph_bench.commands import run as runcmd
from cudagraph_bench.selftest.eager_layer import SkippedLayer, output_layer
from cudagraph_bench.selftest.faults import Fault, parse_fault
from cudagraph_bench.models.presets import model_forward
from cudagraph_bench.runner import matrix_processes
from cudagraph_bench.runner.matrix_processes import Matrix
from cudagraph_bench.selftest.planned_runs import plan

FAULTS = ("eager-layer", "skip-inductor-graphs")


# --- parsing and where each fault goes ---------------------------------------------------------------------

@pytest.mark.parametrize("name", FAULTS)
def test_the_replay_faults_parse_by_name_and_take_no_argument(name):
    assert parse_fault(name) == Fault(name) and parse_fault(name).label == name
    with pytest.raises(ValueError, match=f"fault {name} takes no argument"):
        parse_fault(f"{name}:1")


def test_an_unknown_fault_lists_the_replay_faults():
    with pytest.raises(ValueError, match="stale-position, eager-layer or skip-inductor-graphs"):
        parse_fault("eager-layers")


def test_the_eager_layer_goes_into_the_forward_graph_and_the_skip_into_compile_graph_only():
    planted = {name: {(s, v) for s, v in (("forward", "eager"), ("forward", "graph"), ("forward", "padded"),
                                          ("forward", "compile"), ("forward", "compile+graph"), ("decode", "graph"),
                                          ("decode", "compile+graph")) if Fault(name).applies_to(s, v)}
               for name in FAULTS}
    assert planted == {"eager-layer": {("forward", "graph")}, "skip-inductor-graphs": {("forward", "compile+graph")}}


# --- the eager layer's split forward on CPU -----------------------------------------------------------------

def _tiny(kind):
    torch.manual_seed(0)
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=2, vocab_size=100, bos_token_id=0, eos_token_id=0)).eval()
    if kind == "bert":
        return transformers.BertModel(transformers.BertConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100)).eval()
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100,
        bos_token_id=0, eos_token_id=0)).eval()


@pytest.mark.parametrize("kind, layer", [("gpt2", "lm_head"), ("bert", "encoder.layer.1"), ("llama", "lm_head")])
def test_the_skipped_output_layer_run_after_the_forward_gives_eager_outputs(kind, layer):
    model = _tiny(kind)
    ids = torch.randint(0, 100, (1, 12))
    found = output_layer(model, ids)
    assert found.name == layer
    skip = SkippedLayer(found)
    with torch.inference_mode():
        expected = model_forward(model, ids).clone()
        with skip.skipped():
            out = model_forward(model, ids)
    assert out.data_ptr() == skip.placeholder.data_ptr()     # the forward's output is the placeholder
    assert "forward" not in found.module.__dict__             # the real layer is back
    other = torch.randint(0, 100, (1, 12))
    assert torch.equal(skip.run(), expected)
    with torch.inference_mode():
        assert not torch.equal(model_forward(model, other), expected)


def test_a_model_that_post_processes_its_output_has_no_output_layer():
    model = _tiny("gpt2")
    with pytest.raises(ValueError, match="no layer returns the forward's output tensor"):
        output_layer(model, torch.randint(0, 100, (1, 8)), forward=lambda m, ids: model_forward(m, ids) * 2)


def test_a_layer_never_skipped_has_nothing_to_run():
    with pytest.raises(RuntimeError, match="never skipped"):
        SkippedLayer(output_layer(_tiny("gpt2"), torch.randint(0, 100, (1, 8)))).run()


# --- the self-test's runs ------------------------------------------------------------------------------------

def test_the_self_test_runs_both_faults_with_the_replay_proof():
    """The replay faults go into the first model and the last dtype at the gated lengths (the skipped inductor
    graphs at the first), each option once, with the replay proof; the matrix's other arguments follow."""
    matrix = Matrix((("models", ("gpt2", "bert-tiny")), ("dtypes", ("bfloat16", "float32")),
                     ("prompt_lengths", (16, 50, 128, 512))), ())
    runs = {r.name: r for r in plan(matrix, extra_args=("-p", "no:cacheprovider"), gated_lengths=(16, 50, 128),
                                    runs=2, delays=(5.0,))}
    one = ("--models", "gpt2", "--prompt-lengths", "16,50,128", "--dtypes", "float32", "-p", "no:cacheprovider")
    eager = runs["eager-layer"]
    assert eager.fault == "eager-layer" and eager.args == (
        "perf_tests/test_forward_bench.py", "--benchmark-only", "--variants", "graph", *one, "--replay-proof",
        "--plant-fault", "eager-layer")
    skip = runs["skip-inductor-graphs"]
    assert skip.fault == "skip-inductor-graphs" and skip.args == (
        "perf_tests/test_forward_bench.py", "--benchmark-only", "--variants", "compile+graph", "--models", "gpt2",
        "--prompt-lengths", "16", "--dtypes", "float32", "-p", "no:cacheprovider", "--replay-proof",
        "--plant-fault", "skip-inductor-graphs")
    assert runs["unmodified-1"].args[4:] == ("--models", "gpt2,bert-tiny", "--prompt-lengths", "16,50,128,512",
                                             "--dtypes", "bfloat16,float32", "-p", "no:cacheprovider")
    assert runs["wrong-decode"].args[2:4] == ("--models", "gpt2,bert-tiny")
    names = list(runs)
    assert names.index("stale-mask") < names.index("eager-layer") < names.index("skip-inductor-graphs") \
        < names.index("wrong-decode")


# --- the verdicts ---------------------------------------------------------------------------------------------

def _replay(launches, kernels):
    return {"calls": 1, "graph_launches": launches, "kernels_outside_graph": kernels, "copies_outside_graph": 1,
            "expected_graph_launches": 1, "kernels_outside_allowed": 0}


def _planted(doc, fault, keep, replay):
    """``doc`` with only the benchmarks ``keep(extra_info)`` selects, the graph ones with ``replay`` recorded and
    the fault named, as the plugin writes a planted run."""
    out = copy_doc(doc)
    out["benchmarks"] = [b for b in out["benchmarks"] if keep(b["extra_info"])]
    for bench in out["benchmarks"]:
        if bench["extra_info"]["variant"] != "eager":
            bench["extra_info"].update(replay=replay, planted_fault=fault)
    out.setdefault("cudagraph_bench", {})["planted_fault"] = fault
    return out


@pytest.fixture(scope="module")
def replay_folder(tmp_path_factory):
    """Five unmodified runs, a +5% run, an eager-layer run (gpt2's graphs launch kernels outside) and a
    skip-inductor-graphs run (tinyllama's compile+graph at 16 tokens launches no graph), and the committed stale-input
    and stale-mask runs."""
    base = committed_doc("forward-checked")
    out = tmp_path_factory.mktemp("replay-selftest")
    for i, f in enumerate(JITTER, 1):
        write(_with_device_figure(base, f), out / f"unmodified-{i}.json")
    eager = _planted(_with_device_figure(base, 1.0), "eager-layer",
                     lambda i: i["model"] == "gpt2" and i["variant"] == "graph", _replay(1, 1))
    write(eager, out / "eager-layer.json")
    skip = _planted(committed_doc("compile-sweep"), "skip-inductor-graphs",
                    lambda i: i.get("variant") == "compile+graph" and i.get("seq_len") == 16, _replay(0, 180))
    assert skip["benchmarks"]
    write(skip, out / "skip-inductor-graphs.json")
    write(_with_device_figure(base, 1.0, 1.05), out / "delay-5.json")
    committed_selftest_runs(out, ("stale-input", "stale-mask"))
    return out


def test_both_replay_faults_fail_the_gate_on_their_replay_proof(replay_folder, capsys, tmp_path):
    page = tmp_path / "gate-selftest.md"
    rc, out, err = run_cli(capsys, "selftest", "--from", replay_folder, "--markdown", page)
    assert rc == 0, out + err
    last = out.splitlines()[-1]
    assert "eager-layer fails the gate" in last and "skip-inductor-graphs fails the gate" in last
    text = page.read_text()
    assert "- `eager-layer`: the gate fails: gpt2 " in text and "part of the call ran outside its graph" in text
    assert "- `skip-inductor-graphs`: the gate fails: tinyllama-1.1b " in text and "the timed call ran eagerly" in text
    assert "a graph that runs its output layer eagerly after each replay" in text


def test_a_replay_fault_whose_proof_shows_a_clean_replay_passes_the_gate_and_fails_the_self_test(
        replay_folder, capsys, tmp_path):
    blind = tmp_path / "blind"
    blind.mkdir()
    for path in replay_folder.iterdir():
        (blind / path.name).write_bytes(path.read_bytes())
    doc = _planted(_with_device_figure(committed_doc("forward-checked"), 1.0), "eager-layer",
                   lambda i: i["model"] == "gpt2" and i["variant"] == "graph", _replay(1, 0))
    write(doc, blind / "eager-layer.json")
    rc, out, _ = run_cli(capsys, "selftest", "--from", blind)
    last = out.splitlines()[-1]
    assert rc == 1 and "eager-layer PASSES the gate" in last and last.startswith("selftest FAIL"), last


# --- cudagraph-bench run -- --replay-proof ------------------------------------------------------------------------

def test_run_passes_replay_proof_to_every_pytest_process():
    args = build_parser().parse_args(["run", "--variants", "eager,graph", "--", "--with-compile", "--replay-proof"])
    (matrix,) = runcmd.matrices(args)
    assert matrix.flags == ("--replay-proof",)
    steps = matrix_processes.plan([matrix], gpus=("0", "1"))
    parts = [p for step in steps for p in step]
    assert len(parts) == 4 and all(p.args.count("--replay-proof") == 1 for p in parts)


def test_run_without_replay_proof_passes_no_such_flag():
    (matrix,) = runcmd.matrices(build_parser().parse_args(["run", "--variants", "eager,graph"]))
    steps = matrix_processes.plan([matrix])
    assert matrix.flags == () and all("--replay-proof" not in p.args for s in steps for p in s)


def test_run_refuses_the_replay_proof_on_the_cpu_before_any_process():
    (matrix,) = runcmd.matrices(build_parser().parse_args(["run", "--device", "cpu", "--variants", "eager", "--",
                                                           "--replay-proof"]))
    with pytest.raises(UsageError, match=r"--device cpu has none to prove \(drop --replay-proof\)"):
        runcmd.check_device([matrix])


def test_a_planted_variant_replays_and_closes_what_it_plants_and_records_its_fields():
    """The pipeline's view of a planted fault: calls and ``static_output`` are the planted object's, ``record()``
    is its capture time and fault fields, and closing it closes the planted object (CPU: a stand-in graph)."""
    from cudagraph_bench.selftest.faults import PlantedVariant

    class Planted:
        static_output, closed = "out", False

        def __call__(self, ids):
            return ("replayed", ids)

        def close(self):
            self.closed = True

    planted, fields = Planted(), {"planted_fault": "stale-input"}
    variant = PlantedVariant("graph", 16, planted, fields, capture_ms=2.5)
    assert (variant(7), variant.static_output) == (planted(7), planted.static_output)
    assert variant.record() == {"capture_ms": 2.5, **fields}
    assert PlantedVariant("graph", 16, planted, fields, capture_ms=None).record() == fields
    variant.close()
    assert planted.closed
