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
    run); its decode awaits the GPU after the eager static-cache steps gave generate's tokens; rwkv is refused."""
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
    rc = cli_main(["zoo", "--device", "cpu", "--types", "gpt2,rwkv", "-o", str(out)])
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
    assert {parts[("rwkv", p)]["status"] for p in ("forward", "decode")} == {"refused"}
    assert "no attention heads" in parts[("rwkv", "forward")]["reason"]
    page = (out / "architectures.md").read_text()
    assert "| `gpt2` | measured | awaits GPU run |" in page and "| `rwkv` | refused | refused |" in page
    log = (out / "zoo.log").read_text()     # pytest names its attempt's file; the log says where it went
    assert "zoo.part0.json merged into" in log and str(out / "zoo.json") in log
    assert not list(out.glob("zoo.part*.json"))
    assert "transformers" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["", "0/2", "3/2", "x/2", "llama,,gpt2", "llama,llama", "all,llama"])
def test_a_malformed_types_value_is_a_one_line_usage_error_before_anything_is_made(value, tmp_path, capsys):
    import argparse

    from cudagraph_bench.parsers import parse_zoo_types

    with pytest.raises(argparse.ArgumentTypeError) as parsed:
        parse_zoo_types(value)
    out = tmp_path / "zoo"
    with pytest.raises(SystemExit) as exc:
        cli_main(["zoo", "--device", "cpu", "--types", value, "-o", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--types" in err and str(parsed.value) in err
    assert not out.exists()


def test_a_type_transformers_lacks_is_a_one_line_usage_error_before_anything_is_made(tmp_path, capsys):
    """The names are checked against the zoo's own list of the installed release (as pytest --zoo checks them);
    a K past that list too."""
    import transformers

    from cudagraph_bench.models.zoo_types import causal_lm_types

    types = causal_lm_types()
    assert "llama" in types and "t5" not in types and "bogus" not in types
    out = tmp_path / "zoo"
    for value, named in (("llama,t5", "t5 is"), ("bogus,t5", "bogus, t5 are"),
                         (f"{len(types) + 1}/{len(types) + 1}", f"give K <= {len(types)}")):
        assert cli_main(["zoo", "--device", "cpu", "--types", value, "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and named in err and "--types" in err, err
        assert transformers.__version__ in err and str(len(types)) in err
        assert not out.exists()


def test_pytest_zoo_takes_the_same_values_and_refuses_the_same_types():
    from cudagraph_bench.models.zoo_types import causal_lm_types
    from cudagraph_bench.parsers import ZooTypes, parse_zoo_types
    from cudagraph_bench.plugin.zoo_tests import selected_types

    assert [str(parse_zoo_types(v)) for v in ("all", " 2 / 3 ", "llama, gpt2")] == ["all", "2/3", "llama,gpt2"]
    assert selected_types(ZooTypes()) == causal_lm_types()
    assert selected_types(parse_zoo_types("2/3")) == causal_lm_types()[1::3]
    assert selected_types("llama,gpt2") == ["llama", "gpt2"]
    for value in ("llama,t5", "3/2", ""):
        with pytest.raises(pytest.UsageError) as refused:
            selected_types(value)
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("value", ["nosuchtype", "llama,t5"])
def test_pytest_zoo_refuses_an_unknown_type_at_configure_in_one_line(pytester, value):
    """A type the installed transformers lacks stops pytest with one usage error line before collection, as a
    malformed value does: no collection error, no claim that the session was interrupted."""
    pytester.makepyfile(test_zoo="def test_part(zoo_type):\n    raise AssertionError('must not run')\n")
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", "--zoo", value,
                                          "--device", "cpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --zoo: ") and "no causal-LM model type" in errors[0]
    assert "interrupted" not in result.stdout.str().lower() and "collecting" not in result.stdout.str()


def test_a_negative_deadline_is_a_usage_error_before_anything_is_made(tmp_path, capsys):
    out = tmp_path / "zoo"
    with pytest.raises(SystemExit) as exc:
        cli_main(["zoo", "--device", "cpu", "--deadline-s", "-1", "-o", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--deadline-s" in err and ">= 0" in err
    assert not out.exists()


def test_a_log_or_journal_the_tool_did_not_write_is_refused_and_its_own_are_replaced(tmp_path, monkeypatch, capsys):
    """-o DIR's zoo.log, zoo.journal, attempt JSON and page (no --markdown given) are the zoo's: a file of those names
    the tool did not write is refused before anything runs, naming -o (exit 2, one line, kept); the tool's own (a run
    cut short by a Ctrl-C leaves its journal) are replaced. The process here writes nothing."""
    monkeypatch.setattr(process, "run_process", lambda cmd, cwd, env, log: 5)
    out = tmp_path / "zoo"
    out.mkdir()
    for name in ("zoo.log", "zoo.journal", "zoo.part0.json", "architectures.md"):     # the page: not --markdown's
        (out / name).write_text("my notes\n")
        assert cli_main(["zoo", "--device", "cpu", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"-o {out} holds {name}, which cudagraph-bench zoo did not write" in err, err
        assert (out / name).read_text() == "my notes\n"
        (out / name).unlink()
    assert cli_main(["zoo", "--device", "cpu", "-o", str(out)]) == 1           # no run written: the log says why
    (out / "zoo.journal").write_text('{"start": "perf_tests/test_zoo.py::t"}\n')
    assert cli_main(["zoo", "--device", "cpu", "-o", str(out)]) == 1
    assert [p.name for p in out.iterdir()] == ["zoo.log"]
    assert "wrote no run" in capsys.readouterr().err
