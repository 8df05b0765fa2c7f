"""A ``save_pretrained`` folder whose safetensors weights cannot be read (a file cut short, an empty one, an index
naming a shard that is not there) is refused up front like one without weights: one line naming the file, the
other models of ``--models`` measured. A file damaged after that check fails its cases with a one-line reason
recorded in the run JSON (phase ``load``), never a traceback."""

import json
import os
import shutil

import pytest
import torch

from cudagraph_bench.models.refusals import check_models
from cudagraph_bench.options import pytest_argument
from in_process import ROOT, run_session

LLAMA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
             vocab_size=256, max_position_embeddings=256)
CPU_MATRIX = ("--device", "cpu", "--variants", "eager", "--prompt-lengths", "8", "--dtypes", "float32")
#: ... and the round policy, after ``--`` (last on the command line).
CPU_ROUNDS = ("--", "--benchmark-min-rounds", "3", "--precision-pct", "0", "--benchmark-warmup-iterations", "1",
              "--warmup-ms", "0")


def _cut(path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def _safe_open_error(path) -> str:
    """The first line of what safetensors itself says when it opens ``path`` (raises when it opens)."""
    from safetensors import safe_open

    with pytest.raises(Exception) as info:
        with safe_open(str(path), framework="pt"):
            pass
    return str(info.value).splitlines()[0]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    import transformers

    folder = tmp_path_factory.mktemp("weights") / "llama"
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA)).save_pretrained(folder)
    return folder


def _damaged(llama_dir, tmp_path, kind: str):
    folder = tmp_path / kind
    shutil.copytree(llama_dir, folder)
    weights = folder / "model.safetensors"
    if kind == "half":
        _cut(weights, os.path.getsize(weights) // 2)
    elif kind == "one-byte-short":
        _cut(weights, os.path.getsize(weights) - 1)
    elif kind == "empty":
        _cut(weights, 0)
    elif kind == "missing-shard":
        weights.rename(folder / "model-00001-of-00002.safetensors")
        index = {"metadata": {}, "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors",
                                                "model.norm.weight": "model-00002-of-00002.safetensors"}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
        return folder, folder / "model-00002-of-00002.safetensors"
    return folder, weights


@pytest.mark.parametrize("kind", ["half", "one-byte-short", "empty", "missing-shard"])
def test_weights_that_do_not_open_are_refused_naming_the_file(llama_dir, tmp_path, kind):
    folder, bad_file = _damaged(llama_dir, tmp_path, kind)
    checks = check_models([str(folder), str(llama_dir)])
    assert checks.accepted == (str(llama_dir),)
    (refusal,) = checks.refused
    assert refusal.model == str(folder) and "\n" not in refusal.reason
    assert refusal.reason.startswith(f"{bad_file}: ")
    if kind == "missing-shard":
        assert "missing" in refusal.reason
    else:
        assert _safe_open_error(bad_file) in refusal.reason


def test_run_measures_the_readable_model_and_records_the_damaged_ones_refusal(llama_dir, tmp_path, capsys,
                                                                            in_process_pytest):
    from cudagraph_bench.cli import main as cli_main

    folder, bad_file = _damaged(llama_dir, tmp_path, "half")
    out = tmp_path / "o"
    rc = cli_main(["run", *CPU_MATRIX, "--models", f"{folder},{llama_dir}", "-o", str(out), *CPU_ROUNDS])
    err = capsys.readouterr().err
    doc = json.loads((out / "run.json").read_text())
    assert rc == 1
    assert [b["extra_info"]["model"] for b in doc["benchmarks"]] == [str(llama_dir)]
    (refused,) = doc["cudagraph_bench"]["refused"]
    assert refused["model"] == str(folder) and refused["reason"].startswith(f"{bad_file}: ")
    assert f"refused: {refused['reason']}" in err.splitlines() and "Traceback" not in err


class _DamageAfterCollection:
    """Cuts the weights file short once the session's up-front checks passed, before any test runs; keeps each
    test's report text."""

    def __init__(self, weights):
        self.weights, self.text = weights, {}

    def pytest_collection_finish(self, session):
        _cut(self.weights, os.path.getsize(self.weights) // 2)

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            self.text[report.nodeid.split("::")[-1]] = (report.outcome, str(report.longrepr or ""))


def test_weights_damaged_after_the_check_fail_their_case_with_a_recorded_one_line_reason(llama_dir, tmp_path):
    folder = tmp_path / "late"
    shutil.copytree(llama_dir, folder)
    out, plugin = tmp_path / "run.json", _DamageAfterCollection(folder / "model.safetensors")
    matrix = [*(text for flag, value in zip(CPU_MATRIX[::2], CPU_MATRIX[1::2]) for text in pytest_argument(flag, value)),
              *CPU_ROUNDS[1:]]
    rc = run_session([str(ROOT / "perf_tests" / "test_forward_bench.py"), "--benchmark-only", *matrix,
                      "--models", str(folder), f"--benchmark-json={out}", "-q"], plugins=[plugin])
    assert rc == pytest.ExitCode.TESTS_FAILED
    (failure,) = json.loads(out.read_text())["cudagraph_bench"]["failures"]
    expected = _safe_open_error(folder / "model.safetensors")
    assert failure["phase"] == "load" and failure["status"] == "failed"
    assert failure["reason"].startswith("SafetensorError: ") and expected in failure["reason"]
    (outcome, text), = plugin.text.values()
    assert outcome == "failed" and "Traceback" not in text and len(text.strip().splitlines()) == 1
    assert expected in text
