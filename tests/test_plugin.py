"""The pytest plugin, driven through pytester in this process (as pytest-benchmark tests its own plugin)."""

import importlib.metadata
import json
import os

import pytest

from cudagraph_bench.options import PRESET_NAMES


CASES_TEST = """
def test_fwd(fwd_case):
    pass

def test_corr(corr_case):
    pass

def test_dec(decode_case):
    pass
"""


def test_running_page_names_every_option_of_the_plugin():
    """docs/running.md lists the plugin's options: every ``--option`` that the plugin's parts add to pytest
    (its ``cudagraph-bench`` group) is named there, in backticks."""
    import importlib
    from pathlib import Path

    from cudagraph_bench import plugin

    names = []

    class Group:
        def addoption(self, *opts, **_kwargs):
            names.extend(o for o in opts if o.startswith("--"))

    class Parser:
        def getgroup(self, *_args, **_kwargs):
            return Group()

    for part in plugin.pytest_plugins:
        hook = getattr(importlib.import_module(part), "pytest_addoption", None)
        if hook is not None:
            hook(Parser())
    page = (Path(__file__).parents[1] / "docs" / "running.md").read_text(encoding="utf-8")
    assert {"--models", "--decode-compile-tuning", "--shard", "--journal", "--plant-fault"} <= set(names)
    assert [n for n in names if f"`{n}`" not in page] == []


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", *args)


def test_the_launchers_options_are_accepted_but_not_listed_in_help(pytester, tmp_path):
    """``--journal`` and ``--zoo-deadline-at`` are set by ``cudagraph-bench run`` and ``zoo``: pytest takes them (the
    journal gets its lines) while its ``--help`` lists only the options a user types."""
    help_text = run(pytester, "--help").stdout.str()
    assert "--models" in help_text and "--replay-proof" in help_text
    assert "--journal" not in help_text and "--zoo-deadline-at" not in help_text
    pytester.makepyfile("def test_one():\n    pass\n")
    journal = tmp_path / "journal.jsonl"
    result = run(pytester, "-q", "--journal", str(journal), "--zoo-deadline-at", "1")
    assert result.ret == 0
    assert [line for line in journal.read_text(encoding="utf-8").splitlines() if "test_one" in line]


def test_matrix_parametrization(pytester):
    pytester.makepyfile(CASES_TEST)
    result = run(pytester, "--collect-only", "-q", "--models", "gpt2,bert-tiny", "--prompt-lengths", "50,16",
                 "--dtypes", "bf16")
    out = result.stdout.str()
    for case in ("gpt2-bfloat16-L16-eager", "gpt2-bfloat16-L50-graph", "bert-tiny-bfloat16-L50-eager"):
        assert f"test_fwd[{case}]" in out
    assert "test_corr[gpt2-bfloat16-L16-graph]" in out
    # 2 models x 1 dtype x 2 lengths x 2 variants + 4 correctness + decode: gpt2 only, 2 token counts x 3 variants
    assert "18 tests collected" in out
    assert "test_dec[gpt2-bfloat16-L50-new64-generate]" in out and "bert-tiny-bfloat16-L50-new" not in out


def test_decode_tests_of_a_matrix_without_a_causal_model_skip_with_that_reason(pytester):
    pytester.makepyfile(CASES_TEST + "\ndef test_model(causal_model):\n    pass\n")
    result = run(pytester, "-rs", "--models", "bert-tiny", "--prompt-lengths", "16", "--dtypes", "fp32")
    out = result.stdout.str()
    result.assert_outcomes(passed=3, skipped=2)  # the forward cases (eager, graph) and the correctness case run
    assert "SKIPPED [2] " in out and "decode needs a causal LM: --models bert-tiny holds none" in out
    assert "empty parameter set" not in out


def test_padding_tests_without_a_padded_variant_or_length_skip_with_that_reason(pytester):
    """``--variants eager,graph`` leaves the padding benchmarks nothing to measure, and so do prompt lengths none of
    which is below ``--pad-to``: each is one skip that says why, not pytest's "got empty parameter set"."""
    pytester.makepyfile("def test_pad(pad_case):\n    pass\n")
    result = run(pytester, "-rs", "--models", "gpt2", "--prompt-lengths", "16", "--dtypes", "fp32",
                 "--variants", "eager,graph")
    out = result.stdout.str()
    result.assert_outcomes(skipped=1)
    assert "no padded or bucketed variant among the selected (eager,graph)" in out
    result = run(pytester, "-rs", "--models", "gpt2", "--prompt-lengths", "64", "--dtypes", "fp32", "--pad-to", "32")
    out = result.stdout.str()
    result.assert_outcomes(skipped=1)
    assert "no --prompt-lengths below --pad-to 32" in out and "empty parameter set" not in out


def test_with_compile_adds_variants(pytester):
    pytester.makepyfile(CASES_TEST)
    out = run(pytester, "--collect-only", "-q", "--models", "gpt2", "--prompt-lengths", "50", "--dtypes", "fp32",
              "--with-compile", "-k", "fwd").stdout.str()
    from cudagraph_bench.options import DECODE_VARIANTS

    # fwd: eager, graph, compile, compile+graph; 1 correctness; decode: 2 token counts x every decode variant
    total = 4 + 1 + 2 * len(DECODE_VARIANTS)
    assert f"4/{total} tests collected ({total - 4} deselected)" in out
    assert "test_fwd[gpt2-float32-L50-compile+graph]" in out


def test_with_compile_adds_decode_variants(pytester):
    from cudagraph_bench import variants
    from cudagraph_bench.options import DECODE_VARIANTS

    pytester.makepyfile(CASES_TEST)
    args = ("--collect-only", "-q", "--models", "gpt2", "--new-tokens", "128", "-k", "dec")
    plain = run(pytester, *args).stdout.str()
    with_compile = run(pytester, *args, "--with-compile").stdout.str()
    for variant in DECODE_VARIANTS:
        node = f"test_dec[gpt2-bfloat16-L50-new128-{variant}]"
        assert node in with_compile
        assert (node in plain) == (not variants.variant(variants.DECODE, variant).compiled)


@pytest.mark.parametrize("args, message", [
    (("--models", "gpt3"), f"unknown model 'gpt3': use a preset ({', '.join(PRESET_NAMES)})"),
    (("--prompt-lengths", "16,x"), "prompt lengths must be whole numbers"),
    (("--dtypes", "int8"), "unknown dtype 'int8'"),
    (("--benchmark-min-rounds", "0"), "must be at least 1"),       # pytest-benchmark's own check
])
def test_bad_options_are_usage_errors(pytester, args, message):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_gpu_tests_skip_with_one_reason_on_cpu(pytester, no_gpu):
    pytester.makepyfile("""
        import pytest
        pytestmark = pytest.mark.gpu
        def test_a(): raise AssertionError("must not run without CUDA")
        def test_b(benchmark): raise AssertionError("must not run without CUDA")
    """)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a CUDA GPU\n")
    result = run(pytester, "-rs")
    result.assert_outcomes(skipped=2)
    assert "needs a CUDA GPU: torch.cuda.is_available() is False on this machine" in result.stdout.str()


def test_machine_info_has_cuda_key(pytester, tmp_path, no_gpu):
    pytester.makepyfile("def test_b(benchmark):\n    benchmark(lambda: None)\n")
    out = tmp_path / "run.json"
    result = run(pytester, "--benchmark-only", f"--benchmark-json={out}", "--benchmark-max-time=0.001")
    assert result.ret == 0
    data = json.loads(out.read_text())
    assert "cuda" in data["machine_info"] and data["machine_info"]["cuda"] is None
    assert data["machine_info"]["cpu_affinity"]                   # e.g. "0-7"
    (bench,) = data["benchmarks"]


@pytest.mark.parametrize("given", [False, True])
def test_benchmark_disable_gc_decides_whether_the_garbage_collector_runs_while_timing(pytester, tmp_path, given):
    """pytest-benchmark's ``--benchmark-disable-gc`` means what it says (this project's ini ``addopts`` gives it)."""
    pytester.makepyfile("def test_b(benchmark):\n    benchmark(lambda: None)\n")
    out = tmp_path / "run.json"
    flag = ["--benchmark-disable-gc"] if given else []
    assert run(pytester, "--benchmark-only", f"--benchmark-json={out}", *flag,
               "--benchmark-max-time=0.001").ret == 0
    assert json.loads(out.read_text())["benchmarks"][0]["options"]["disable_gc"] is given


def test_the_projects_ini_turns_the_garbage_collector_off_while_timing():
    import shlex
    import tomllib
    from pathlib import Path

    ini = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--benchmark-disable-gc" in shlex.split(ini["addopts"])


@pytest.mark.parametrize("args, message", [
    (("--min-time-ms", "-1"), "expected milliseconds >= 0"),
    (("--benchmark-max-time", "-1"), "--benchmark-max-time -1: expected seconds >= 0"),
    (("--benchmark-max-time", "nan"), "expected a finite number"),
])
def test_bad_timing_options_are_usage_errors(pytester, args, message):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


ROUND_POLICY_TEST = """
from cudagraph_bench.cases import Case
from cudagraph_bench.plugin import Session
from cudagraph_bench.plugin.benchmark_timing import round_policy

def test_policy(request):
    session = Session(request.config)
    spec = session.case_spec(Case("gpt2", "float32", 16, "graph"))
    policies = (spec.round_policy(), round_policy(session.option),
                round_policy(session.option, rounds=3, max_rounds=8))
    assert spec.max_time_ms == {expected!r}
    assert [p.max_time_ms for p in policies] == [{expected!r}] * 3
"""


@pytest.mark.parametrize("args, expected", [((), None), (("--benchmark-max-time", "0.25"), 250.0),
                                            (("--benchmark-max-time", "0"), 0.0)])
def test_max_time_ms_reaches_the_case_spec_and_every_round_policy(pytester, args, expected):
    """--benchmark-max-time (seconds) on the pytest command line (default DEFAULT_MAX_TIME_MS) is the time cap of the forward
    cases' CaseSpec and of the session's round policies, the decode ones (rounds and max_rounds given) too."""
    from cudagraph_bench.options import DEFAULT_MAX_TIME_MS

    pytester.makepyfile(ROUND_POLICY_TEST.format(expected=DEFAULT_MAX_TIME_MS if expected is None else expected))
    run(pytester, *args).assert_outcomes(passed=1)


def test_memory_ledger_summary_separates_the_first_graph_case():
    from cudagraph_bench.plugin.memory import MemoryLedger

    ledger = MemoryLedger()
    ledger.start_mib = 0.0
    ledger.record("gpt2-float32-L16-graph", 678.0, 746.0)     # first case: + the side stream's workspace
    ledger.record("gpt2-float32-L50-graph", 746.0, 746.0)
    ledger.record("gpt2-float32-L128-graph", 746.0, 750.0)
    s = ledger.summary()
    assert s["graph_cases"] == 3
    assert s["max_case_growth_mib"] == 68.0 and s["max_case_growth_after_first_mib"] == 4.0
    assert s["memory_reserved_end_mib"] == 0.0        # no end recorded: the start is reported
    assert MemoryLedger().summary()["max_case_growth_after_first_mib"] == 0.0


def test_prepared_case_records_the_check_against_eager_for_both_measurement_paths():
    """prepare_case (the one pipeline of the pytest benchmarks and ``run``) records the check's
    extra_info fields; a replay that is off, or never writes its NaN-poisoned static output, is a
    mismatch that is still timed, not a failure; eager logits holding NaN fail the case, eager's own too."""
    import torch

    from cudagraph_bench.measure.case import INPUT_POOL, CaseFailed, CaseSpec, prepare_case
    from cudagraph_bench.measure.forward_variants import ForwardVariant
    from cudagraph_bench.models.presets import load_model, model_forward

    class CallableVariant(ForwardVariant):
        """``fn(input_ids)`` as a variant writing ``static_output``."""

        def __init__(self, name, fn, seq_len, static_output):
            super().__init__(seq_len)
            self.name, self._fn, self._static = name, fn, static_output

        @property
        def static_output(self):
            return self._static

        def __call__(self, input_ids):
            return self._fn(input_ids)

    tiny = load_model("gpt2", "float32", "cpu", overrides={"n_layer": 1, "n_embd": 32, "n_head": 2,
                                                           "vocab_size": 128})
    spec = CaseSpec("gpt2", "float32", 8, "graph", device="cpu")
    static = torch.zeros(1, 8, 128)

    def replay(ids, offset=0.0):
        with torch.inference_mode():
            static.copy_(model_forward(tiny, ids) + offset)
        return static

    def prepared_info(fn):
        prepared = prepare_case(spec, tiny, variant=CallableVariant("graph", fn, 8, static))
        try:
            seen = {tuple(prepared.call().shape) for _ in range(INPUT_POOL + 1)}
            assert seen == {(1, 8, 128)}
            return prepared.status, prepared.info
        finally:
            prepared.close()

    status, info = prepared_info(replay)
    assert status == "ok" and info == {"attn_implementation": "sdpa", "correct": True, "check": "strict",
                                       "max_abs_diff": 0.0}
    status, info = prepared_info(lambda ids: replay(ids, 1e-3))
    assert status == "mismatch" and info["correct"] is False and info["status"] == "mismatch"
    assert info["max_abs_diff"] == pytest.approx(1e-3, rel=1e-3) and "differ from eager" in info["reason"]
    # a replay that never writes its static output is caught by the NaN poisoning
    status, info = prepared_info(lambda ids: static)
    assert status == "mismatch" and info["correct"] is False and "NaN" in info["reason"]
    # NaN eager logits prove nothing: the reference itself and a replay matching it NaN for NaN both fail the case
    with torch.no_grad():
        tiny.transformer.ln_f.weight.fill_(float("nan"))
    for case, variant in ((spec, CallableVariant("graph", replay, 8, static)),
                          (CaseSpec("gpt2", "float32", 8, "eager", device="cpu"), None)):
        with pytest.raises(CaseFailed, match=r"^check: eager logits are not finite \(NaN or inf\), .* config\.json"):
            prepare_case(case, tiny, variant=variant)


def test_a_classification_checkpoint_is_collected_as_an_encoder_with_a_warning(pytester, tmp_path):
    """--models with a GPT-2 classification checkpoint: collected without decode tests, and the warnings summary
    says that it is measured as its base model."""
    import transformers

    from cudagraph_bench.models.presets import preset_config

    folder = tmp_path / "classifier"
    config = preset_config("gpt2", {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "pad_token_id": 0})
    transformers.GPT2ForSequenceClassification(config).save_pretrained(folder)
    pytester.makepyfile(CASES_TEST)
    result = run(pytester, "--collect-only", "-q", "--models", str(folder))
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert f"test_fwd[{folder}-" in out and f"test_dec[{folder}-" not in out   # no decode case of it
    assert "PytestConfigWarning" in out and "GPT2ForSequenceClassification is measured as its base model GPT2Model" in out


@pytest.mark.parametrize("kind", ["encoder-decoder", "not-json", "recurrent", "no-model-class", "no-weights"])
def test_a_checkpoint_the_suite_cannot_measure_is_one_usage_error(pytester, tmp_path, kind):
    """--models with only a T5 checkpoint, a config.json that is not JSON, a recurrent model whose state
    transformers' cache does not hold (RWKV), a config that no model class loads on its own (BLIP's text config) or a causal LM's
    config without its weights: pytest stops before collection with the reason that check_model_directory gives,
    in one line, not a collection traceback (nor an error in every test on a GPU)."""
    from cudagraph_bench.errors import UnknownModelError
    from cudagraph_bench.models.checkpoints import check_model_directory
    from cudagraph_bench.models.refusals import Refusal, all_refused_message

    folder = tmp_path / kind
    folder.mkdir()
    if kind == "encoder-decoder":
        import transformers

        transformers.T5Config(d_model=16, d_ff=32, num_layers=1, num_heads=2, vocab_size=64).save_pretrained(folder)
    elif kind == "recurrent":
        import transformers

        transformers.RwkvConfig(hidden_size=16, num_hidden_layers=1, vocab_size=64, attention_hidden_size=16,
                                intermediate_size=32, context_length=64,
                                architectures=["RwkvForCausalLM"]).save_pretrained(folder)
    elif kind == "no-model-class":
        import transformers

        transformers.BlipTextConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                    vocab_size=64).save_pretrained(folder)
    elif kind == "no-weights":
        import transformers

        transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64,
                                architectures=["GPT2LMHeadModel"]).save_pretrained(folder)
    else:
        (folder / "config.json").write_text("{not json")
    with pytest.raises(UnknownModelError) as reason:
        check_model_directory(str(folder))
    pytester.makepyfile(CASES_TEST)
    result = run(pytester, "--collect-only", "-q", "--models", str(folder))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [f"ERROR: {all_refused_message([Refusal(str(folder), str(reason.value))])}"]
    assert str(folder) in errors[0] and str(reason.value) in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


# pytest-benchmark before 5.3 opens --benchmark-json while pytest parses its options (argparse.FileType), so
# argparse refuses a path it cannot open before the plugin's own check runs
BENCHMARK_JSON_OPENED_AT_PARSE = tuple(int(part) for part in
                                       importlib.metadata.version("pytest-benchmark").split(".")[:2]) < (5, 3)


@pytest.mark.parametrize("flag", ["--benchmark-json", "--journal"])
@pytest.mark.parametrize("where, message", [
    ("a directory", "{path} is a directory: give a file such as {path}/"),
    ("a missing folder", "{path}: folder {parent} does not exist: create it first (mkdir -p {parent})"),
    ("under a file", "{path}: {parent} is a file, not a folder: choose another path for out.json"),
    ("a read-only folder", "{path} cannot be written: /proc does not take new files"),
])
def test_an_output_file_the_session_cannot_write_is_one_usage_error_before_any_test(pytester, tmp_path, flag, where,
                                                                                      message):
    """--benchmark-json (written after the last test: a bad path would lose every result) and --journal (opened
    at configure): a directory, a path in a missing folder, under a file or in a read-only folder (/proc, which
    refuses new files even to root) stop pytest with one usage error line, before any test, creating nothing."""
    pytester.makepyfile("def test_x(benchmark):\n    raise AssertionError('must not run')\n")
    (tmp_path / "file").write_text("")
    path = {"a directory": tmp_path, "a missing folder": tmp_path / "missing" / "out.json",
            "under a file": tmp_path / "file" / "out.json", "a read-only folder": "/proc/cgb-out.json"}[where]
    result = run(pytester, f"{flag}={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    if flag == "--benchmark-json" and BENCHMARK_JSON_OPENED_AT_PARSE:
        # argparse refuses it first, in pytest's usage-error form (usage, error, inifile, rootdir)
        assert [line for line in errors if "error:" in line] == [
            line for line in errors if f"error: argument {flag}: can't open '{path}'" in line]
        assert errors[0].startswith("ERROR: usage:") and len(errors) == 4
    else:
        assert len(errors) == 1 and errors[0].startswith(f"ERROR: {flag} " + message.format(
            path=path, parent=os.path.dirname(path)))
    assert "INTERNALERROR" not in result.stdout.str() and sorted(os.listdir(tmp_path)) == ["file"]


@pytest.mark.parametrize("name", ["README.md", "notes.log", "old.journal"])
def test_journal_refuses_a_file_the_tool_did_not_write(pytester, tmp_path, name):
    """--journal appends to its file: a file of the user's (any suffix) is one usage error line before any test and
    is left as it was, while a journal this tool wrote is taken (the session appends its lines)."""
    pytester.makepyfile("def test_one():\n    pass\n")
    user = tmp_path / name
    user.write_text("# my notes\n", encoding="utf-8")
    result = run(pytester, f"--journal={user}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [f"ERROR: --journal {user} is not a journal that cudagraph-bench wrote, the only file it "
                      "replaces: give another path, or remove that file first"]
    assert user.read_text(encoding="utf-8") == "# my notes\n"
    own = tmp_path / "run.journal"
    own.write_text('{"finish": "earlier::test"}\n', encoding="utf-8")
    run(pytester, f"--journal={own}").assert_outcomes(passed=1)
    assert own.read_text(encoding="utf-8").count("\n") == 3        # its line, and the session's start and finish


def test_an_output_file_already_open_is_left_as_it_is(tmp_path):
    """pytest-benchmark before 5.3 opens --benchmark-json while it parses the command line: an open file is the
    option's value then, which the check leaves alone (the open succeeded)."""
    from cudagraph_bench.plugin.output_files import output_file_problem

    with open(tmp_path / "run.json", "wb") as fh:
        assert output_file_problem(fh, "--benchmark-json", "run.json") is None
    assert output_file_problem(None, "--journal", "journal.jsonl") is None
    assert output_file_problem(tmp_path / "run.json", "--benchmark-json", "run.json") is None
    assert sorted(os.listdir(tmp_path)) == ["run.json"]            # the probe left nothing behind
