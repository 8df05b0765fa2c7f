"""The zoo's one command end to end on the CPU: cudagraph-bench zoo runs perf_tests/test_zoo.py --zoo in the
launcher's watched process (here: in this process), each type's parts end in the run JSON with their status, a
measured part as a benchmark whose figures come from its own timing, and the page is written; without --zoo the
module is not collected."""

import json

import pytest

from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.runner import process
from in_process import run_process_in_process

pytestmark = pytest.mark.xdist_group("cpu-suite-sessions")


def test_the_zoo_is_not_collected_without_its_option():
    from pathlib import Path
    from types import SimpleNamespace

    from cudagraph_bench.plugin.zoo_tests import pytest_ignore_collect

    def config(zoo):
        return SimpleNamespace(getoption=lambda name, default=None: zoo if name == "zoo" else default)

    module = Path("perf_tests/test_zoo.py")
    assert pytest_ignore_collect(module, config(None)) is True
    assert pytest_ignore_collect(module, config("all")) is None
    assert pytest_ignore_collect(Path("perf_tests/test_decode.py"), config(None)) is None


def test_cudagraph_bench_zoo_records_every_part_and_writes_the_page(tmp_path, monkeypatch, capsys):
    """gpt2's forward is made measurable on the CPU (its eager forward as the "graph": the timing path of a GPU
    run); its decode awaits the GPU after the eager static-cache steps gave generate's tokens; mamba is refused."""
    import cudagraph_bench.measure.zoo_case as zoo_case
    from cudagraph_bench.models.presets import model_forward

    real = zoo_case.forward_outcome

    def measurable(model, device):
        outcome = real(model, device)
        if outcome.status != zoo_case.AWAITS_GPU:
            return outcome
        (ids,) = zoo_case._inputs(model, 1, 1)
        return zoo_case.ZooOutcome(zoo_case.MEASURED, None, {"check": "stand-in"}, timed=lambda: model_forward(model, ids),
                                   reference=lambda: model_forward(model, ids))

    monkeypatch.setattr(zoo_case, "forward_outcome", measurable)
    monkeypatch.setattr(process, "run_process", run_process_in_process)
    out = tmp_path / "zoo"
    rc = cli_main(["zoo", "--device", "cpu", "--types", "gpt2,mamba", "-o", str(out)])
    assert rc == 0, (out / "zoo.log").read_text()[-3000:]
    doc = json.loads((out / "zoo.json").read_text())
    (bench,) = doc["benchmarks"]
    info = bench["extra_info"]
    assert (info["model_type"], info["part"], info["status"]) == ("gpt2", "forward", "measured")
    assert info["reduction_pct"] == pytest.approx(100 * (1 - info["graph_ms"] / info["eager_ms"]))
    assert bench["stats"]["rounds"] == 20
    parts = {(e["model_type"], e["part"]): e for e in doc["cudagraph_bench"]["failures"]}
    assert parts[("gpt2", "decode")]["status"] == "awaits GPU"
    # the eager static-cache steps gave generate's tokens, or a token that differs by a rounding tie the float64
    # rule accepts (which one depends on the CPU kernels of the torch release)
    check = parts[("gpt2", "decode")]["unpadded_prefill"]["check"]
    assert check.startswith("tokens identical to generate") or "a rounding tie" in check, check
    assert {parts[("mamba", p)]["status"] for p in ("forward", "decode")} == {"refused"}
    assert "no attention heads" in parts[("mamba", "forward")]["reason"]
    page = (out / "architectures.md").read_text()
    assert "| `gpt2` | measured | awaits GPU run |" in page and "| `mamba` | refused | refused |" in page
    assert "transformers" in capsys.readouterr().out
