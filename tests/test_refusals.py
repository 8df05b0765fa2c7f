"""Any causal LM a user brings: small ``save_pretrained`` checkpoints of current architectures (gpt-oss, GPT-J,
BLOOM, Falcon, Qwen3, Qwen3-MoE, Gemma-3 text, and GPT-2 and Llama, which the suite already took), and of what it
does not measure (T5, ViT, Mamba, a config without weights, a typo). Each accepted one is measured with its own
attention, bounded when its config records no position limit, and graphable: its forward and decode step do no
host work on the capture's code path once the suite has moved its host data to the device (checked with the
model on the ``meta`` device). Every refused one is listed with its reason, and no refusal stops the others."""

import json
import os
import re

import pytest
import torch

from capture_path import decode_steps_host_work, meta_host_work
from cudagraph_bench.models.positions import POSITION_FIELDS
from cudagraph_bench.models.refusals import Refusal, all_refused_message, check_models, exit_status, refusal_lines

SMALL = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=256, initializer_range=0.2)
#: name -> (config class, fields) of the causal LMs the suite measures (BLOOM and Gemma 3 untied: with their tied
#: random embeddings one token wins every greedy step).
ACCEPTED = {
    "gpt-oss": ("GptOssConfig", dict(SMALL, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                                     num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
                                     max_position_embeddings=256, pad_token_id=0, eos_token_id=1)),
    "gptj": ("GPTJConfig", dict(n_layer=2, n_embd=64, n_head=4, rotary_dim=8, n_positions=256, vocab_size=256,
                                initializer_range=0.2)),
    "bloom": ("BloomConfig", dict(n_layer=2, hidden_size=64, n_head=4, vocab_size=256, initializer_range=0.2,
                                  tie_word_embeddings=False)),
    "falcon": ("FalconConfig", dict(SMALL, num_kv_heads=2, new_decoder_architecture=True,
                                    max_position_embeddings=256)),
    "qwen3": ("Qwen3Config", dict(SMALL, num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                  max_position_embeddings=256)),
    "qwen3-moe": ("Qwen3MoeConfig", dict(SMALL, num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                         moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                                         max_position_embeddings=256)),
    "gemma3-text": ("Gemma3TextConfig", dict(SMALL, num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                             query_pre_attn_scalar=16, sliding_window=4, pad_token_id=0,
                                             layer_types=["sliding_attention", "full_attention"],
                                             tie_word_embeddings=False, max_position_embeddings=256)),
    "gpt2": ("GPT2Config", dict(n_layer=2, n_embd=64, n_head=4, n_positions=256, vocab_size=256,
                                initializer_range=0.2)),
    "llama": ("LlamaConfig", dict(SMALL, num_key_value_heads=2, intermediate_size=128, max_position_embeddings=256)),
}
#: name -> (how it is written, a part of its refusal).
REFUSED = {
    "t5": ("T5Model", "is an encoder-decoder model"),
    "vit": ("ViTConfig", "vision, audio or multimodal model"),
    "rwkv": ("RwkvForCausalLM", "has no attention heads"),       # records a context length, still recurrent
    "config-only": ("GPT2Config", "no weights on disk"),
}


def _write(kind: str, folder) -> None:
    import transformers

    torch.manual_seed(0)
    if kind in ACCEPTED:
        config_class, fields = ACCEPTED[kind]
        config = getattr(transformers, config_class)(**fields)
        transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    elif kind == "t5":
        transformers.T5Model(transformers.T5Config(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8,
                                                   vocab_size=64)).save_pretrained(folder)
    elif kind == "vit":
        transformers.ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32).save_pretrained(folder)
    elif kind == "rwkv":
        transformers.RwkvForCausalLM(transformers.RwkvConfig(hidden_size=16, num_hidden_layers=2, vocab_size=64,
                                                             attention_hidden_size=16, intermediate_size=32,
                                                             context_length=64)).save_pretrained(folder)
    else:
        transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64,
                                architectures=["GPT2LMHeadModel"]).save_pretrained(folder)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """name -> its ``save_pretrained`` folder, for every architecture above."""
    root = tmp_path_factory.mktemp("checkpoints")
    out = {}
    for kind in [*ACCEPTED, *REFUSED]:
        out[kind] = str(root / kind)
        _write(kind, root / kind)
    return out


def test_every_entry_is_checked_and_no_refusal_stops_the_others(checkpoints, tmp_path):
    """One check of the whole list: the measurable models in their order, every other entry with its reason
    (a typo and a missing directory too), wherever it stands in the list; the bounded one gets a note."""
    names = [checkpoints["t5"], "gpt2", "no-such-preset", *(checkpoints[k] for k in ACCEPTED), checkpoints["vit"],
             str(tmp_path / "missing"), checkpoints["rwkv"], checkpoints["config-only"]]
    checks = check_models(names)
    assert checks.accepted == ("gpt2", *(checkpoints[k] for k in ACCEPTED))
    reasons = {r.model: r.reason for r in checks.refused}
    assert list(reasons) == [checkpoints["t5"], "no-such-preset", checkpoints["vit"], str(tmp_path / "missing"),
                             checkpoints["rwkv"], checkpoints["config-only"]]
    for kind, (_, part) in REFUSED.items():
        assert part in reasons[checkpoints[kind]], (kind, reasons[checkpoints[kind]])
    assert reasons["no-such-preset"].startswith("unknown model 'no-such-preset': use a preset (gpt2,")
    assert reasons[str(tmp_path / "missing")].startswith("no directory")
    assert all("\n" not in reason for reason in reasons.values())
    assert [n for n in checks.notes if "records no position limit" in n] == [
        f"{checkpoints['bloom']}: BloomConfig records no position limit ({'/'.join(POSITION_FIELDS)}: ALiBi "
        "or NoPE attention): its prompts and caches are bounded by --max-positions, else by the longest request"]


def test_a_trained_length_is_a_position_limit_and_alibi_without_one_is_bounded():
    """MPT (ALiBi) records the length it was trained for as ``max_seq_len``: that is its limit; BLOOM records
    none and is bounded by the request."""
    import transformers

    from cudagraph_bench.models.positions import recorded_position_limit

    mpt = transformers.MptConfig(d_model=32, n_heads=4, n_layers=1, max_seq_len=96, vocab_size=64)
    assert recorded_position_limit(mpt) == mpt.max_seq_len
    assert recorded_position_limit(transformers.BloomConfig(n_layer=1, hidden_size=32, n_head=4)) is None


def test_refusals_are_one_line_each_and_only_a_list_of_refusals_is_a_usage_error():
    refused = (Refusal("/m/t5", "/m/t5: T5Config is an encoder-decoder model"), Refusal("typo", "unknown model 'typo'"),
               Refusal("gpt-oss-20b", "GptOssForCausalLM has no sdpa attention"))
    assert refusal_lines(refused) == ["/m/t5: T5Config is an encoder-decoder model", "unknown model 'typo'",
                                      "gpt-oss-20b: GptOssForCausalLM has no sdpa attention"]
    message = all_refused_message(refused).splitlines()
    assert message[0].startswith("--models: every model was refused (3)") and len(message) == 4
    assert all_refused_message(refused[1:2]) == "--models: unknown model 'typo'"
    assert [exit_status(0, refused), exit_status(1, refused), exit_status(0, ()), exit_status(2, refused)] == [1, 1, 0, 2]


def test_an_attention_the_class_lacks_is_a_refusal_and_one_not_installed_a_usage_error(checkpoints):
    """--attn-implementation sdpa: gpt-oss (no SDPA in its class: attention sinks) is refused with what it runs,
    the others run SDPA; an implementation this environment lacks is one usage error naming what it has."""
    import transformers

    from cudagraph_bench.errors import UsageError
    from cudagraph_bench.models.attention import installed_attention, supported_attention

    names = ["gpt-oss-20b", "gpt2", checkpoints["gpt-oss"], checkpoints["qwen3"]]
    checks = check_models(names, "sdpa")
    runs_sdpa = "sdpa" in supported_attention(transformers.GptOssForCausalLM)
    assert checks.accepted == (("gpt-oss-20b",) if runs_sdpa else ()) + ("gpt2",) + \
        ((checkpoints["gpt-oss"],) if runs_sdpa else ()) + (checkpoints["qwen3"],)
    for refusal in checks.refused:
        assert "GptOssForCausalLM has no sdpa attention" in refusal.reason and "(its own: eager)" in refusal.reason
    missing = [name for name in ("flash_attention_2", "flex_attention") if name not in installed_attention()]
    for name in missing:
        with pytest.raises(UsageError, match=f"--attn-implementation {name} is not installed here: use one of eager, "
                                             "sdpa"):
            check_models(["gpt2"], name)


@pytest.mark.parametrize("kind", list(ACCEPTED))
def test_each_architecture_is_measured_with_its_own_attention_and_graphable(checkpoints, kind):
    """Per architecture: its own attention (SDPA where its class has it, else eager: gpt-oss), its position limit
    (BLOOM's: the bound it is given, as it records none), and the forward pass (with and without a padding mask)
    and a decode step on a static cache do no host work on the capture's code path (the model on ``meta``)."""
    from cudagraph_bench.models.attention import attention_of
    from cudagraph_bench.models.checkpoints import directory_model_class
    from cudagraph_bench.models.hf_internals import supports_attention
    from cudagraph_bench.models.positions import recorded_position_limit
    from cudagraph_bench.models.presets import model_position_limit
    from cudagraph_bench.models.presets import directory_config, load_model, model_forward

    folder = checkpoints[kind]
    config = directory_config(folder)
    model = load_model(folder, "float32", "meta")
    assert attention_of(model) == ("sdpa" if supports_attention(directory_model_class(config), "sdpa") else "eager")
    recorded = recorded_position_limit(config)
    assert (recorded is None) == (kind == "bloom")
    assert model_position_limit(folder, bound=77) == (recorded or 77)
    ids = torch.randint(0, 200, (1, 9), device="meta")
    mask = torch.ones(1, 9, dtype=torch.int64, device="meta")
    assert meta_host_work(model, lambda: model_forward(model, ids), 9) is None
    assert meta_host_work(model, lambda: model_forward(model, ids, mask), 9) is None
    found, decoder = decode_steps_host_work(model, 32)
    assert found is None
    assert decoder.max_positions == (recorded or 32)         # BLOOM: bounded by its cache


@pytest.mark.parametrize("kind", list(ACCEPTED))
def test_each_architecture_decodes_the_tokens_of_generate(checkpoints, kind):
    """The eager static-cache loop (the graphed decoder's step code) gives HF generate's tokens, unpadded and with
    a bucketed prefill, and on the path HF takes while a stream captures: across gpt-oss's and Gemma 3's 4-token
    window, BLOOM's ALiBi bounded by the cache, Falcon's rotary new decoder architecture."""
    from cudagraph_bench.capture.decode import GreedyDecoder
    from cudagraph_bench.models.hf_internals import capture_code_path
    from cudagraph_bench.models.presets import load_model

    model = load_model(checkpoints[kind], "float32", "cpu")
    ids = torch.randint(1, 200, (1, 11), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14)[:, 11:]
    assert len(set(ref[0].tolist())) > 3, "degenerate reference"
    assert torch.equal(GreedyDecoder(model, 32, use_graph=False).generate(ids, 14), ref)
    with capture_code_path():
        assert torch.equal(GreedyDecoder(model, 32, use_graph=False, prefill_buckets=(16,)).generate(ids, 14), ref)


def test_host_work_the_suite_cannot_remove_is_not_graphable_with_its_source_line(checkpoints):
    """The check a GraphedForward runs before it captures (on the GPU), here with the model on ``meta``:
    a Python-list index, without the device constants that make it on the device, and a forward that reads a
    device value on the host, are NotGraphableError naming the operation and the model's source line (the
    first one the forward reaches: Falcon's own list index where the installed transformers has one, newer
    releases split instead); with the suite's device constants Falcon passes."""
    import contextlib
    import inspect

    import transformers.models.falcon.modeling_falcon as falcon_module

    from cudagraph_bench.capture.graphed import GraphedForward
    from cudagraph_bench.capture.host_work import DeviceConstants
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.models.hf_internals import capture_code_path
    from cudagraph_bench.models.presets import load_model, model_forward

    model = load_model(checkpoints["falcon"], "float32", "meta")
    ids = torch.randint(0, 200, (1, 9), device="meta")

    with torch.inference_mode(), capture_code_path():
        model_forward(model, ids)                               # the warm-up

    def check(forward, constants):
        graph = GraphedForward.__new__(GraphedForward)          # the check alone: no CUDA on this machine
        graph._model, graph._forward, graph._input_ids, graph._attention_mask = model, forward, ids, None
        graph._constants = constants
        with torch.inference_mode():
            graph._check_host_work(model, "meta", 9, True)

    check(model_forward, DeviceConstants("meta"))

    def list_index(m, input_ids, mask):
        return model_forward(m, input_ids, mask)[..., [0]]     # a Python list indexing a device tensor

    where = (r"transformers/models/falcon/modeling_falcon.py:\d+ \(_split_heads\)"
             if "[-2]" in inspect.getsource(falcon_module) else r"\S*tests/test_refusals.py:\d+ \(list_index\)")
    with pytest.raises(NotGraphableError, match=r"FalconForCausalLM does host work in its forward that a CUDA graph "
                                                r"capture forbids: a Python list indexing a device tensor .* at "
                                                + where):
        check(list_index, contextlib.nullcontext())
    check(list_index, DeviceConstants("meta"))

    def host_read(m, input_ids, mask):
        logits = model_forward(m, input_ids, mask)
        return logits * float(logits.abs().max() > 0)          # a host read of a device value

    with pytest.raises(NotGraphableError, match=r"a host read of a device value \(Tensor.__float__: a synchronize\) at "
                                                r"\S*tests/test_refusals.py:\d+ \(host_read\)"):
        check(host_read, DeviceConstants("meta"))


def test_a_not_graphable_forward_case_is_a_skip_listed_in_the_json(monkeypatch):
    """Session.measure: a case whose build is NotGraphableError is skipped with the reason, and listed under the
    JSON's failures (status skipped) with its key and attention, as the report shows it."""
    import types

    from cudagraph_bench.cases import Case
    from cudagraph_bench.errors import NotGraphableError
    from cudagraph_bench.measure.case import CaseFailed
    from cudagraph_bench.plugin.session import Session

    config = types.SimpleNamespace(getoption=lambda name, default=None: {"device": "cpu"}.get(name, default))
    session = Session(config)
    monkeypatch.setattr(Session, "skip_if_too_long", lambda self, model, n: None)
    monkeypatch.setattr(Session, "model", lambda self, name, dtype: object())
    reason = "NotGraphableError: FalconForCausalLM does host work in its forward that a CUDA graph capture forbids"

    def prepare(self, case, model):
        raise CaseFailed("build", reason, NotGraphableError(reason), {"attn_implementation": "sdpa"})

    monkeypatch.setattr(Session, "_prepare", prepare)
    case = Case("falcon", "bfloat16", 16, "graph")
    nodeid = "perf_tests/test_forward_bench.py::test_forward[falcon]"
    request = types.SimpleNamespace(node=types.SimpleNamespace(nodeid=nodeid))
    with pytest.raises(pytest.skip.Exception, match="falcon bfloat16 L=16 graph: NotGraphableError: FalconForCausalLM"):
        session.measure(object(), case, request)
    (entry,) = session.records.failures
    assert entry == {**case.extra_info(), "attn_implementation": "sdpa", "status": "skipped",
                     "reason": f"not graphable: {reason}", "fullname": nodeid, "phase": "build"}


def test_run_measures_the_accepted_models_and_lists_the_refused_ones(checkpoints, tmp_path, capsys,
                                                                    in_process_pytest):
    """cudagraph-bench run --models with a preset, a T5 checkpoint, a typo and BLOOM: gpt2 and BLOOM are measured
    (BLOOM bounded by the longest prompt, its attention eager), the two others are listed on stderr and in
    run.json, and the exit code is 1; a list of refused models only is exit 2, one line each."""
    from cudagraph_bench.cli import main as cli_main

    models = ",".join(["gpt2", checkpoints["t5"], "typo", checkpoints["bloom"]])
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--models", models, "--prompt-lengths", "8", "--dtypes", "float32",
                   "-o", str(tmp_path / "o"), "--", "--benchmark-min-rounds", "3", "--benchmark-warmup-iterations", "0"])
    err = capsys.readouterr().err
    doc = json.loads((tmp_path / "o" / "run.json").read_text())
    assert rc == 1
    assert sorted(b["extra_info"]["model"] for b in doc["benchmarks"]) == sorted(["gpt2", checkpoints["bloom"]])
    assert {b["extra_info"]["model"]: b["extra_info"]["attn_implementation"] for b in doc["benchmarks"]} == \
        {"gpt2": "sdpa", checkpoints["bloom"]: "eager"}
    refused = doc["cudagraph_bench"]["refused"]
    assert [r["model"] for r in refused] == [checkpoints["t5"], "typo"]
    assert "is an encoder-decoder model" in refused[0]["reason"] and "unknown model 'typo'" in refused[1]["reason"]
    assert [line for line in err.splitlines() if line.startswith("refused: ")] == [
        f"refused: {line}" for line in refusal_lines([Refusal(r["model"], r["reason"]) for r in refused])]
    notes = list(check_models([checkpoints["bloom"]]).notes)     # BLOOM's bound, said where the run is read
    assert notes and doc["cudagraph_bench"]["model_notes"] == notes
    assert [line for line in err.splitlines() if line.startswith("note: ")] == [f"note: {n}" for n in notes]
    rc = cli_main(["run", "--device", "cpu", "--models", f"{checkpoints['t5']},typo", "-o", str(tmp_path / "p")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 3 and "every model was refused (2)" in lines[0]
    assert not (tmp_path / "p").exists()


def test_the_session_bounds_a_model_without_a_position_limit_by_max_positions(checkpoints):
    """BLOOM records no position limit: the session bounds it by --max-positions, else by the longest request of
    the matrix (a prompt or a decode prompt plus its new tokens)."""
    import types

    from cudagraph_bench.plugin.session import Session

    def limit(**options):
        opts = {"device": "cpu", "prompt_lengths": (8, 32), "decode_prompt_lengths": (50,), "new_tokens": (64,),
                "max_positions": None, **options}
        return Session(types.SimpleNamespace(getoption=lambda n, d=None: opts.get(n, d))).position_limit(
            checkpoints["bloom"])

    assert limit() == 50 + 64
    assert limit(max_positions=16) == 16


CASES_TEST = """
def test_fwd(fwd_case):
    pass

def test_timed(benchmark):
    benchmark(lambda: None)
"""


def test_the_pytest_session_runs_the_accepted_models_and_lists_the_refused_ones(pytester, checkpoints, tmp_path):
    """pytest --models gpt2,<T5>,typo: the gpt2 cases run, the summary lists both refusals with their reasons, the
    JSON holds them under ["cudagraph_bench"]["refused"], and the session exits 1; --models <T5>,typo alone is a
    usage error listing both."""
    pytester.makepyfile(CASES_TEST)
    out = tmp_path / "run.json"
    models = f"gpt2,{checkpoints['t5']},typo"
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--models", models,
                                          "--prompt-lengths", "16", "--dtypes", "fp32", f"--benchmark-json={out}")
    result.assert_outcomes(passed=3)                   # gpt2 eager and graph, and the timed test
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    refused = json.loads(out.read_text())["cudagraph_bench"]["refused"]
    assert [r["model"] for r in refused] == [checkpoints["t5"], "typo"]
    assert f"2 models of --models refused (the others ran; exit status {int(result.ret)})" in text
    assert all(line in text for line in refusal_lines([Refusal(r["model"], r["reason"]) for r in refused]))
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--models",
                                          f"{checkpoints['t5']},typo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "every model was refused (2)" in errors and "is an encoder-decoder model" in errors
    assert "unknown model 'typo'" in errors and "Traceback" not in errors


#: A hand-edited field of a tiny Llama's config.json -> a part of its refusal (each names the field and the fix).
EDITED = {
    ("dtype", "float7"): '"dtype": "float7" is not a torch dtype: set it to the dtype the weights were saved in',
    ("num_attention_heads", 0): '"num_attention_heads" is 0: a model needs at least 1: fix config.json',
    ("max_position_embeddings", "big"): '"max_position_embeddings" is "big", not a position limit',
    ("max_position_embeddings", -1): '"max_position_embeddings" is -1, not a position limit',
    ("max_position_embeddings", 0): '"max_position_embeddings" is 0, not a position limit',
    ("rms_norm_eps", float("nan")): '"rms_norm_eps" is NaN, not a finite number: fix config.json',
    ("hidden_size", "wide"): "cannot load config.json (StrictDataclassFieldValidationError: Validation error for "
                             "field 'hidden_size'",
    ("hidden_act", "wibble"): "its config does not build a LlamaForCausalLM: KeyError: 'wibble' (the value of "
                              '"hidden_act"): fix config.json or re-save the model with save_pretrained()',
    ("num_key_value_heads", 0): "does not build a LlamaForCausalLM: ZeroDivisionError: integer division or modulo "
                                "by zero (at: self.num_key_value_groups = config.num_attention_heads // "
                                "config.num_key_value_heads)",
}


@pytest.fixture(scope="module")
def edited_llamas(tmp_path_factory):
    """``"base"`` -> a tiny Llama's ``save_pretrained`` folder, and each field edit of :data:`EDITED` (plus
    ``vocab_size`` 1024 against its 512-row weights, ``num_hidden_layers`` 4 and 1 against its 2 layers) -> a copy of
    it whose config.json holds that edit."""
    import shutil

    import transformers

    root = tmp_path_factory.mktemp("edited")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=512)
    transformers.LlamaForCausalLM(config).save_pretrained(root / "base")
    folders = {"base": str(root / "base")}
    edits = [*EDITED, ("vocab_size", 1024), ("num_hidden_layers", 4), ("num_hidden_layers", 1)]
    for i, (key, value) in enumerate(edits):
        folder = root / f"{i}-{key}"
        shutil.copytree(root / "base", folder)
        data = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**data, key: value}))
        folders[key, value] = str(folder)
    return folders


def test_a_hand_edited_config_field_is_that_folders_refusal_naming_the_field(edited_llamas):
    """A dtype torch lacks, zero heads, a position limit that is no whole number >= 1, a NaN epsilon, a value transformers'
    strict fields refuse, an activation the model does not know, a zero divisor of the model's build: each is its
    folder's refusal in one line naming the field (or the line that divided by it) and the fix; the untouched
    folder is still measured, wherever it stands in the list."""
    names = [edited_llamas[edit] for edit in EDITED]
    checks = check_models([*names[:3], edited_llamas["base"], *names[3:]])
    assert checks.accepted == (edited_llamas["base"],) and checks.notes == ()
    reasons = {r.model: r.reason for r in checks.refused}
    for edit, part in EDITED.items():
        assert part in reasons[edited_llamas[edit]] and "\n" not in reasons[edited_llamas[edit]], edit
    assert all(reason.startswith(model) for model, reason in reasons.items())


def test_only_a_missing_position_limit_means_none():
    """A position field recorded below 1 is no "no limit": the config is refused, while XLNet's -1 (a property of
    its class, not a field of config.json) and BLOOM's missing field still mean no limit."""
    import transformers

    from cudagraph_bench.errors import UnknownModelError
    from cudagraph_bench.models.checkpoints import check_config_fields
    from cudagraph_bench.models.positions import recorded_position_limit

    for field in POSITION_FIELDS:
        for value in (-1, 0, 1.5, True, "2048"):
            with pytest.raises(UnknownModelError, match=f'"{field}" is .*, not a position limit'):
                check_config_fields("config.json", {field: value})
        check_config_fields("config.json", {field: None})
        check_config_fields("config.json", {field: 1})
    assert recorded_position_limit(transformers.XLNetConfig(n_layer=1, d_model=32, n_head=2)) is None


def test_a_weight_shape_the_config_does_not_build_is_a_load_failure_naming_the_weight(edited_llamas):
    """``vocab_size`` 1024 against 512-row weights passes the checks (they read no weights) and fails the load in
    one line naming the first weight that differs and both shapes, not transformers' pointer to a logged report,
    labelled (as a failed case's reason shows it) as a checkpoint that does not match, not an unknown model."""
    from cudagraph_bench.errors import CheckpointMismatchError
    from cudagraph_bench.measure.case import describe_exception
    from cudagraph_bench.models.presets import load_model

    folder = edited_llamas["vocab_size", 1024]
    assert check_models([folder]).accepted == (folder,)
    with pytest.raises(CheckpointMismatchError) as failure:
        load_model(folder, "float32", "cpu")
    assert str(failure.value).startswith(f"{folder}: its weights do not fit its config: ")
    assert describe_exception(failure.value).startswith(f"CheckpointMismatchError: {folder}: its weights do not fit")
    assert re.search(r"(lm_head|model\.embed_tokens)\.weight is \[512, 64\] in model\.safetensors, \[1024, 64\] in "
                     r"the model config\.json builds: fix config\.json", str(failure.value))


@pytest.mark.parametrize("layers, shown", [(4, "model.layers.2.* is missing from the weights (would be initialised at "
                                                "random)"),
                                            (1, "model.layers.1.* is not in the model config.json builds (would be "
                                                "dropped)")])
def test_weights_the_config_lacks_or_adds_are_a_load_failure_naming_the_first(edited_llamas, checkpoints, layers,
                                                                             shown):
    """A config.json counting more layers than the weights hold (transformers would initialise the rest at random)
    or fewer (it would drop the rest) fails the load in one line naming the first weight and the fix, not a model
    measured silently; a model whose output layer is tied to its embeddings (GPT-2: no lm_head.weight saved) loads."""
    from safetensors import safe_open

    from cudagraph_bench.errors import CheckpointMismatchError
    from cudagraph_bench.models.presets import load_model

    folder = edited_llamas["num_hidden_layers", layers]
    with pytest.raises(CheckpointMismatchError) as failure:
        load_model(folder, "float32", "cpu")
    message = str(failure.value)
    assert message.startswith(f"{folder}: its weights do not fit its config: ") and "\n" not in message
    assert re.search(re.escape(shown).replace(r"\*", r"\S+"), message), message
    assert message.endswith(": fix config.json or re-save the model with save_pretrained()")
    load_model(edited_llamas["base"], "float32", "cpu")
    with safe_open(os.path.join(checkpoints["gpt2"], "model.safetensors"), framework="pt") as fh:
        assert "lm_head.weight" not in fh.keys()
    assert load_model(checkpoints["gpt2"], "float32", "cpu").config.tie_word_embeddings


@pytest.mark.parametrize("edit, shown", [("drop", "missing"), ("drop-text-config", "missing"), (None, "null"),
                                         (0, "0"), ("512", '"512"')])
def test_a_multimodal_config_without_its_text_vocabulary_is_refused_naming_the_field(tmp_path, edit, shown):
    """Gemma 3's image-text config.json whose text model records no vocabulary (or not a whole number >= 1) is its
    folder's one-line refusal naming ``text_config.vocab_size`` and the fix, at the check and at the load: a missing
    one would build transformers' default vocabulary and fail the load with transformers' pointer to a logged
    report, a bad one with its field validation; the saved folder itself is measured."""
    import shutil

    from cudagraph_bench.errors import UnknownModelError
    from cudagraph_bench.models.presets import load_model
    from cudagraph_bench.models.zoo_types import causal_lm_types, zoo_checkpoint

    if "gemma3" not in causal_lm_types():
        pytest.skip("transformers has no gemma3 here")
    saved = zoo_checkpoint("gemma3", tmp_path)
    folder = shutil.copytree(saved, tmp_path / "edited")
    data = json.loads((folder / "config.json").read_text())
    if edit == "drop-text-config":
        del data["text_config"]
    elif edit == "drop":
        del data["text_config"]["vocab_size"]
    else:
        data["text_config"]["vocab_size"] = edit
    (folder / "config.json").write_text(json.dumps(data))
    checks = check_models([str(folder), saved])
    assert checks.accepted == (saved,)
    (refusal,) = checks.refused
    expected = (f'{folder}/config.json: "text_config.vocab_size" is {shown}: a multimodal model is measured on its text '
                "model, whose vocabulary (the rows of its token embedding, a whole number >= 1) config.json must "
                "record: set it, or re-save the model with save_pretrained()")
    assert refusal.reason == expected
    with pytest.raises(UnknownModelError) as exc:
        load_model(str(folder), "float32", "cpu")
    assert str(exc.value) == expected


def test_the_pytest_session_and_run_refuse_a_bad_config_field_in_one_line(pytester, edited_llamas, tmp_path, capsys):
    """pytest --collect-only with the edited folders and the untouched one: no INTERNALERROR, the untouched
    folder's cases are collected and each edited one is listed with its reason under a line that says the others
    were collected (not ran) and the exit status; ``cudagraph-bench run`` of one
    such folder is exit 2 with its reason in one line, and no output folder."""
    from cudagraph_bench.cli import main as cli_main

    pytester.makepyfile(CASES_TEST)
    edits = [("dtype", "float7"), ("num_attention_heads", 0), ("max_position_embeddings", "big")]
    models = ",".join([*(edited_llamas[e] for e in edits), edited_llamas["base"]])
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--collect-only",
                                          "-q", "--device", "cpu", "--models", models, "--prompt-lengths", "16")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "INTERNALERROR" not in text and "Traceback" not in text
    assert f"test_fwd[{edited_llamas['base']}-" in text and "3 models of --models refused" in text
    assert f"(the others were collected; exit status {int(result.ret)})" in text and "the others ran" not in text
    assert all(EDITED[e] in text for e in edits)
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--models", edited_llamas["dtype", "float7"],
                   "--prompt-lengths", "16", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and EDITED["dtype", "float7"] in err[0]
    assert not (tmp_path / "o").exists()
