"""``cudagraph-bench run`` on CPU: options and aliases, the TOML matrix, planning, the pytest-benchmark
JSON it writes (read back by runfile), the PNGs, one-line usage errors, and isolation end to end."""

import json
import statistics
import sys
import textwrap
from pathlib import Path

import pytest

from cudagraph_bench.commands import run as runcmd
from cudagraph_bench.measure import execute, isolation
from cudagraph_bench.measure import plan as runplan
from cudagraph_bench.cases import Case
from cudagraph_bench.cli import build_parser
from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.errors import UsageError
from cudagraph_bench.options import DEFAULT_MAX_TIME_MS
from cudagraph_bench.results.runfile import forward_cases, load_run

TINY = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0}
TINY_JSON = json.dumps(TINY)
MATRIX_TOML = Path(__file__).parent / "data" / "run-matrix.toml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def parse(*argv):
    return build_parser().parse_args(["run", *argv])


def settings(*argv):
    return runcmd.resolve_settings(parse("--device", "cpu", "--variants", "eager", *argv))


def write_toml(tmp_path, text):
    path = tmp_path / "matrix.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


# ---------------------------------------------------------------------------- options


def test_defaults_follow_the_source_script():
    s = settings()
    assert s.matrices == [runplan.Matrix(("gpt2",), (50,), ("float32",), ("eager",))]
    assert (s.rounds, s.warmup_rounds, s.pad_to) == (100, 10, 1024)
    assert s.max_time_ms == DEFAULT_MAX_TIME_MS
    assert s.isolate == ("compile", "compile+graph")


def test_issue_aliases_share_the_shared_options():
    a = settings("--model", "distilgpt2", "--dtype", "bf16", "--iters", "7", "--warmup", "2")
    b = settings("--models", "distilgpt2", "--dtypes", "bfloat16", "--rounds", "7", "--warmup-rounds", "2")
    assert a.matrices == b.matrices
    assert a.matrices[0].models == ("distilgpt2",) and a.matrices[0].dtypes == ("bfloat16",)
    assert (a.rounds, a.warmup_rounds) == (b.rounds, b.warmup_rounds) == (7, 2)


@pytest.mark.parametrize("argv, message", [
    (["--variants", "eager,graphs"], "unknown variant 'graphs'"),
    (["--iters", "0"], "expected a number >= 1"),
    (["--attn-implementation", "paged"], "unknown attention implementation 'paged'"),
    (["--max-positions", "0"], "expected a number >= 1"),
    (["--prompt-lengths", "16,,32"], "empty item"),
    (["--model-overrides", "[1]"], "must be a JSON object"),
    (["--time-budget", "abc"], "expected a positive number of seconds (e.g. 600), got 'abc'"),
    (["--time-budget", "inf"], "expected a positive number of seconds (e.g. 600), got 'inf'"),
    (["--time-budget", "0"], "expected a positive number of seconds (e.g. 600), got '0'"),
    (["--case-timeout", "nan"], "expected a positive number of seconds (e.g. 600), got 'nan'"),
    (["--rounds", "5", "--iters", "7"], "--rounds and --iters are the same option: give one of them"),
    (["--model", "gpt2", "--models", "bert-tiny"], "--model and --models are the same option: give one of them"),
    (["--rounds", "100001"], "expected at most 100000 rounds, got 100001"),
    (["--max-time-ms", "-1"], "expected milliseconds >= 0, got -1"),
    (["--warmup", "100001"], "expected at most 100000 warmup rounds, got 100001"),
    (["-o", ""], "expected a path, got an empty string"),
])
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["run", "--device", "cpu", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].endswith("(see cudagraph-bench run --help)")


def test_device_cpu_without_variants_runs_eager_only_and_a_chosen_graph_variant_is_refused(tmp_path):
    assert runcmd.resolve_settings(parse("--device", "cpu")).variants == ("eager",)
    assert runcmd.merge_settings(parse()).variants == runcmd.DEFAULT_VARIANTS  # cuda keeps the default
    with pytest.raises(UsageError, match="drop graph"):
        runcmd.resolve_settings(parse("--device", "cpu", "--variants", "eager,graph"))
    path = write_toml(tmp_path, """
        variants = ["eager", "padded"]
    """)
    with pytest.raises(UsageError, match="drop padded"):  # the config chose variants: checked, not replaced
        runcmd.resolve_settings(parse("--device", "cpu", "--config", path))


def test_graph_variants_on_cpu_are_a_usage_error(capsys, tmp_path):
    assert cli_main(["run", "--device", "cpu", "--variants", "eager,graph,compile", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "graph variants need a CUDA GPU" in err and "graph, compile" in err
    assert not (tmp_path / "run.json").exists()


def test_graph_variants_without_cuda_are_a_usage_error(capsys, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli_main(["run", "--variants", "eager,graph", "-o", str(tmp_path)]) == 2
    assert "graph variants need a CUDA GPU" in capsys.readouterr().err


# ---------------------------------------------------------------------------- config


def test_example_config_expands_its_sweeps():
    s = runcmd.merge_settings(parse("--config", str(MATRIX_TOML)))
    assert [m.models for m in s.matrices] == [("gpt2",), ("bert-tiny",)]
    assert s.matrices[0].prompt_lengths == (16, 64, 256, 1024)
    assert s.matrices[0].variants == ("eager", "graph", "padded")  # inherited from the top level
    assert s.matrices[1].variants == ("eager", "graph")
    assert s.matrices[1].dtypes == ("float32",)
    assert (s.rounds, s.warmup_rounds, s.case_timeout_s) == (50, 5, 240.0)


def test_command_line_wins_over_config(tmp_path):
    path = write_toml(tmp_path, """
        models = ["gpt2", "bert-tiny"]
        prompt_lengths = [16, 32]
        rounds = 7
        variants = ["eager"]
    """)
    s = settings("--config", path)
    assert s.matrices[0].models == ("gpt2", "bert-tiny") and s.rounds == 7
    # given explicitly, even when equal to the default, a flag wins
    s = settings("--config", path, "--model", "gpt2", "--iters", "100")
    assert s.matrices[0].models == ("gpt2",) and s.rounds == 100
    assert s.matrices[0].prompt_lengths == (16, 32)


@pytest.mark.parametrize("text, message", [
    ('modles = ["gpt2"]', "unknown key 'modles'"),
    ("prompt_lengths = [16, 0]", "key 'prompt_lengths': prompt lengths must be positive"),
    ('variants = ["eager", "fast"]', "key 'variants': unknown variant 'fast'"),
    ("rounds = 0", "key 'rounds'"),
    ('[[sweep]]\nmodels = ["gpt2"]\nlengths = [1]', "[[sweep]] #1: unknown key 'lengths'"),
    ("sweep = []", "'sweep' is empty: give at least one [[sweep]] table, or remove the key"),
    ("models = [", "is not valid TOML"),
    ("time_budget_s = [1]", "key 'time_budget_s': expected one value, got a list"),
    ("time_budget_s = inf", "key 'time_budget_s': expected a positive number of seconds"),
    ("max_time_ms = -5", "key 'max_time_ms': expected milliseconds >= 0"),
])
def test_bad_config_is_one_line_naming_the_key(tmp_path, capsys, text, message):
    path = write_toml(tmp_path, text)
    with pytest.raises(UsageError, match="matrix.toml") as exc:
        settings("--config", path)
    assert message in str(exc.value)
    assert cli_main(["run", "--device", "cpu", "--variants", "eager", "--config", path]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_max_time_ms_from_the_command_line_or_the_config_reaches_every_case_spec(tmp_path):
    path = write_toml(tmp_path, """
        max_time_ms = 0
    """)
    for argv, expected in ((("--max-time-ms", "250"), 250.0), (("--config", path), 0.0),
                           (("--config", path, "--max-time-ms", "40.5"), 40.5)):
        s = settings("--prompt-lengths", "16,50", *argv)
        assert s.max_time_ms == expected and s.as_dict()["max_time_ms"] == expected
        specs = [spec for _, inproc, iso in runplan.plan_cases(s).groups
                 for spec in [*inproc, *(x for q in iso.values() for x in q)]]
        assert len(specs) == 2
        assert all(spec.max_time_ms == spec.round_policy().max_time_ms == expected for spec in specs)
        # the spec crosses into worker processes as JSON
        assert all(type(spec).from_dict(json.loads(json.dumps(spec.to_dict()))) == spec for spec in specs)


def test_missing_config_file(tmp_path):
    with pytest.raises(UsageError, match="config file not found"):
        settings("--config", str(tmp_path / "nope.toml"))


# ---------------------------------------------------------------------------- planning


def make_settings(**kw):
    base = dict(matrices=[runplan.Matrix(("gpt2", "bert-tiny"), (16, 1024), ("float32",),
                                        ("eager", "graph", "padded", "compile"))])
    return runplan.RunSettings(**{**base, **kw})


def test_plan_skips_prompts_beyond_the_model_positions_up_front():
    plan = runplan.plan_cases(make_settings())
    skipped = {(r.model, r.seq_len, r.variant): r.reason for r in plan.skipped}
    assert set(skipped) == {("bert-tiny", 1024, v) for v in ("eager", "graph", "padded", "compile")}
    assert all("exceeds the model's 512 positions" in reason for reason in skipped.values())
    assert plan.n_cases == 2 * 4 + 4  # gpt2: 2 lengths x 4 variants; bert-tiny: 1 length x 4 variants


def test_plan_runs_risky_variants_isolated_after_the_in_process_ones():
    plan = runplan.plan_cases(make_settings())
    (key, inproc, iso), _ = plan.groups
    assert key == ("gpt2", "float32")
    assert [(s.variant, s.seq_len) for s in inproc] == [("eager", 16), ("eager", 1024), ("graph", 16),
                                                        ("graph", 1024), ("padded", 16), ("padded", 1024)]
    assert list(iso) == ["compile"] and [s.seq_len for s in iso["compile"]] == [16, 1024]
    plan = runplan.plan_cases(make_settings(isolate=()))
    assert all(not iso for _, _, iso in plan.groups)


def test_plan_skips_padded_prompts_longer_than_pad_to():
    plan = runplan.plan_cases(make_settings(pad_to=512))
    reasons = {(r.model, r.seq_len, r.variant): r.reason for r in plan.skipped}
    assert "longer than the padded length 512" in reasons[("gpt2", 1024, "padded")]
    assert ("gpt2", 1024, "graph") not in reasons


# ---------------------------------------------------------------------------- end to end on CPU


def run_cpu(tmp_path, *extra):
    out = tmp_path / "out"
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--model-overrides", TINY_JSON,
                   "--prompt-lengths", "8,16,32", "--iters", "6", "--warmup", "1", "--precision-pct", "0", "-o", str(out),
                   *extra])
    return rc, out


def test_a_run_stopped_after_one_case_in_an_earlier_runs_folder_leaves_no_plot_of_the_earlier_run(
        tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc, out = run_cpu(tmp_path)
    earlier = {p.name for p in out.glob("*.png")}
    assert rc == 0 and {"latency_comparison.png", "speedup_vs_length.png"} <= earlier
    real_execute = runcmd.execute

    def stopped_after_one_case(plan, settings, *, record, **kwargs):
        def record_then_stop(result):
            record(result)
            raise KeyboardInterrupt

        return real_execute(plan, settings, record=record_then_stop, **kwargs)

    monkeypatch.setattr(runcmd, "execute", stopped_after_one_case)
    rc, out = run_cpu(tmp_path, "--prompt-lengths", "64")
    err = capsys.readouterr().err
    assert rc == 130 and "interrupted" in err
    assert [c.seq_len for c in forward_cases(load_run(str(out / "run.json")))] == [64]  # this run's case only
    assert list(out.glob("*.png")) == []                            # the earlier run's plots went with its JSON
    for name in earlier:
        assert f"removed {out / name}: an earlier run's plot" in err


def test_run_cpu_writes_a_pytest_benchmark_json_the_loader_accepts(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc, out = run_cpu(tmp_path)
    assert rc == 0
    stdout = capsys.readouterr().out
    run = load_run(str(out / "run.json"))
    cases = forward_cases(run)
    assert set(cases) == {Case("gpt2", "float32", n, "eager") for n in (8, 16, 32)}
    raw = json.loads((out / "run.json").read_text())
    assert raw["machine_info"]["cuda"] is None and "python_version" in raw["machine_info"]
    assert {"id", "dirty"} <= set(raw["commit_info"])
    for bench in raw["benchmarks"]:
        st = bench["stats"]
        assert len(st["data"]) == st["rounds"] == 6 and st["iterations"] == 1
        assert st["median"] == pytest.approx(statistics.median(st["data"]))
        assert st["min"] == min(st["data"]) and st["max"] == max(st["data"])
        assert {"q1", "q3", "iqr", "ops", "total", "stddev", "outliers"} <= set(st)
        info = bench["extra_info"]
        assert info["suite"] == "forward" and info["device"] == "cpu"
        # eager is the reference the others are checked against, on both measurement paths
        assert info["check"] == "reference" and "correct" not in info and "fp64_rmse_ratio" not in info
        assert info["median_ci95_pct"] is not None and info["precision_target_pct"] == 0
        assert info["max_time_ms"] == raw["cudagraph_bench"]["settings"]["max_time_ms"] == DEFAULT_MAX_TIME_MS
        assert bench["group"] == Case.from_extra_info(info).group
        # the printed table carries each median (ms, 3 decimals)
        assert f"{statistics.median(st['data']) * 1e3:.3f}" in stdout
    assert raw["cudagraph_bench"]["failures"] == []
    for name in ("latency_comparison.png", "speedup_vs_length.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def test_cpu_run_on_a_gpu_machine_records_no_cuda_fingerprint(tmp_path, monkeypatch):
    """A --device cpu run measured no GPU: machine_info["cuda"] is None even where CUDA is available, so
    the run is never gated as a GPU run."""
    import torch

    from cudagraph_bench import envinfo

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(envinfo, "cuda_fingerprint", lambda: pytest.fail("a CPU run read the GPU fingerprint"))
    rc, out = run_cpu(tmp_path, "--prompt-lengths", "8")
    assert rc == 0
    assert json.loads((out / "run.json").read_text())["machine_info"]["cuda"] is None


def test_run_cpus_pins_the_run_and_records_the_cpu_set(tmp_path):
    import os

    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    try:
        rc, out = run_cpu(tmp_path, "--prompt-lengths", "8", "--cpus", str(cpu))
        assert os.sched_getaffinity(0) == {cpu}
    finally:
        os.sched_setaffinity(0, allowed)
    assert rc == 0
    raw = json.loads((out / "run.json").read_text())
    assert raw["machine_info"]["cpu_affinity"] == str(cpu)
    assert raw["benchmarks"][0]["options"]["disable_gc"] is True


def test_run_cpus_outside_the_allowed_set_is_a_usage_error(tmp_path, capsys):
    from cudagraph_bench.envinfo import format_cpus

    import os

    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--cpus", "0,100000", "-o", str(tmp_path / "o")])
    assert rc == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert f"--cpus: CPU(s) 100000 not available to this process: choose among {format_cpus(os.sched_getaffinity(0))}" \
        in err
    assert not (tmp_path / "o").exists()


def test_run_cpu_isolated_eager_goes_through_the_real_worker(tmp_path):
    rc, out = run_cpu(tmp_path, "--isolate", "eager", "--prompt-lengths", "8,16")
    assert rc == 0
    raw = json.loads((out / "run.json").read_text())
    assert sorted(b["extra_info"]["seq_len"] for b in raw["benchmarks"]) == [8, 16]
    assert all(b["extra_info"]["isolated"] for b in raw["benchmarks"])


FAKE = textwrap.dedent("""
    import json, os, sys
    job = json.load(sys.stdin)
    print(json.dumps({"cgb": "ready"}), flush=True)
    for i, spec in enumerate(job["cases"]):
        print(json.dumps({"cgb": "start", "index": i}), flush=True)
        if spec["seq_len"] == 16:
            os.abort()
        result = {"model": spec["model"], "dtype": spec["dtype"], "seq_len": spec["seq_len"],
                  "variant": spec["variant"], "status": "ok", "device": "cpu",
                  "wall_ms": [2.0, 1.0, 3.0], "event_ms": []}
        print(json.dumps({"cgb": "result", "index": i, "result": result}), flush=True)
""")


def test_run_records_a_crashed_case_and_keeps_the_others(tmp_path, monkeypatch, capsys):
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    monkeypatch.setattr(isolation, "worker_command", lambda: [sys.executable, str(script)])
    rc, out = run_cpu(tmp_path, "--isolate", "eager")
    assert rc == 1  # a case failed; everything else is still written
    raw = json.loads((out / "run.json").read_text())
    assert sorted(b["extra_info"]["seq_len"] for b in raw["benchmarks"]) == [8, 32]
    (failure,) = raw["cudagraph_bench"]["failures"]
    assert failure["seq_len"] == 16 and failure["status"] == "failed" and "SIGABRT" in failure["reason"]
    assert "gpt2 float32 L=16 eager: failed: worker killed by SIGABRT" in capsys.readouterr().err
    assert (out / "speedup_vs_length.png").exists()


def test_time_budget_skips_the_remaining_cases(tmp_path, capsys):
    rc, out = run_cpu(tmp_path)                                 # an earlier run leaves its PNGs
    assert rc == 0 and (out / "speedup_vs_length.png").exists()
    capsys.readouterr()
    rc, out = run_cpu(tmp_path, "--time-budget", "0.000001")
    raw = json.loads((out / "run.json").read_text())
    assert raw["benchmarks"] == []
    assert {f["reason"] for f in raw["cudagraph_bench"]["failures"]} == {"time budget exhausted"}
    assert rc == 1
    assert "no case was measured" in capsys.readouterr().err
    assert not (out / "speedup_vs_length.png").exists() and not (out / "latency_comparison.png").exists()
    # report and gate name what happened instead of guessing "no CUDA GPU"
    assert cli_main(["report", str(out / "run.json"), "-o", str(tmp_path / "docs")]) == 2
    err = capsys.readouterr().err
    assert "all 3 case(s) of this `cudagraph-bench run` failed or were skipped" in err
    assert "time budget exhausted" in err


def test_unwritable_output_dir_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "-o", str(blocker / "sub")])
    assert rc == 2
    assert f"{blocker} is a file, not a folder" in capsys.readouterr().err
    assert cli_main(["run", "--device", "cpu", "--variants", "eager", "-o", str(blocker)]) == 2
    assert f"{blocker} is a file, not a folder: give -o a folder for run.json" in capsys.readouterr().err
    (tmp_path / "out" / "run.json").mkdir(parents=True)
    assert cli_main(["run", "--device", "cpu", "--variants", "eager", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "run.json is a folder" in err and "gpt2 float32" not in err   # refused before measuring


def test_non_utf8_config_is_a_usage_error(tmp_path):
    path = tmp_path / "m.toml"
    path.write_bytes(b"models = ['gpt2']\n# \xff\xfe\n")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        settings("--config", str(path))


def test_compile_sweep_config_with_a_model_flag_plans_compile_variants_at_four_lengths():
    s = runcmd.merge_settings(parse("--config", str(MATRIX_TOML.with_name("run-compile-sweep.toml")),
                                    "--model", "tinyllama-1.1b"))
    plan = runplan.plan_cases(s)
    assert plan.skipped == []
    ((key, inproc, iso),) = plan.groups
    assert key == ("tinyllama-1.1b", "float32")
    assert sorted({s.seq_len for s in inproc}) == [16, 32, 64, 128, 256, 512, 1024]
    assert {s.variant for s in inproc} == {"eager", "graph", "padded"}
    assert {v: [s.seq_len for s in q] for v, q in iso.items()} == {"compile": [16, 64, 256, 1024],
                                                                  "compile+graph": [16, 64, 256, 1024]}
    assert plan.n_cases == 3 * 7 + 2 * 4


@pytest.mark.parametrize("name", ["gpt3", "dir without config.json"])
def test_a_matrix_of_one_refused_model_is_a_usage_error_in_one_line(tmp_path, capsys, name):
    if name != "gpt3":
        name = str(tmp_path / "model")
        Path(name).mkdir()
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--model", name, "-o", str(tmp_path / "o")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("unknown model 'gpt3'" if name == "gpt3" else "has no config.json") in err[0]
    assert not (tmp_path / "o").exists()


def test_an_option_repeated_under_one_name_keeps_the_last_value_like_argparse():
    assert runcmd.merge_settings(parse("--rounds", "5", "--rounds", "7")).rounds == 7


def test_help_shows_list_defaults_as_typed(capsys):
    with pytest.raises(SystemExit):
        cli_main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 16,32,64,128,256,512,1024)" in out and "('" not in out


def test_a_case_that_breaks_the_cuda_context_sends_the_rest_of_the_run_to_workers(monkeypatch, tmp_path):
    """After a failure that leaves the CUDA context unusable, no remaining case is dropped: the rest of
    that model's cases and every later model's run in worker processes; a failure the context survives
    (a capture that failed and was recovered) changes nothing."""
    import cudagraph_bench.measure.case as case

    s = runcmd.resolve_settings(parse("--device", "cpu", "--variants", "eager", "--models", "gpt2,distilgpt2",
                                      "--prompt-lengths", "16,50", "--dtypes", "float32",
                                      "-o", str(tmp_path / "o")))
    plan = runplan.plan_cases(s, positions=lambda model, overrides: 1024)
    first = plan.groups[0][1][0]
    in_workers = []

    def measure(spec, models):
        if spec is first:
            return case.CaseResult.of(spec, "failed", "AcceleratorError: CUDA error: an illegal memory access",
                                      "timing")
        return case.CaseResult.of(spec, "ok", wall_ms=[1.0])

    def isolated(specs, **kwargs):
        for i, d in enumerate(specs):
            in_workers.append((d["model"], d["seq_len"]))
            kwargs["on_result"](i, case.CaseResult.of(case.CaseSpec.from_dict(d), "ok", wall_ms=[1.0]).to_dict())

    monkeypatch.setattr(case, "measure_with_cache", measure)
    monkeypatch.setattr(isolation, "run_isolated", isolated)
    in_order = [(spec.model, spec.seq_len) for _, inproc, _ in plan.groups for spec in inproc]
    assert len(in_order) == 4 and len(plan.groups) == 2
    for usable, expected_in_workers in ((False, in_order[1:]), (True, [])):
        monkeypatch.setattr(execute, "_context_usable", lambda spec, usable=usable: usable)
        recorded, in_workers[:] = [], []
        execute.execute(plan, s, record=recorded.append)
        assert sorted((r.model, r.seq_len) for r in recorded) == sorted(
            (spec.model, spec.seq_len) for _, inproc, _ in plan.groups for spec in inproc)
        assert [r.status for r in recorded].count("failed") == 1
        assert sorted(in_workers) == sorted(expected_in_workers)


def test_an_encoder_decoder_checkpoint_is_refused_with_its_reason(tmp_path, capsys):
    import transformers

    model_dir = tmp_path / "t5"
    config = transformers.T5Config(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, vocab_size=64)
    transformers.T5Model(config).save_pretrained(model_dir)
    capsys.readouterr()                       # save_pretrained's progress bars
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--models", str(model_dir),
                   "--prompt-lengths", "8", "-o", str(tmp_path / "o")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "T5Config is an encoder-decoder model" in err[0]
    assert not (tmp_path / "o").exists()


def test_a_classification_checkpoint_is_run_as_its_base_model_with_a_note(tmp_path, capsys):
    """A GPT-2 classification checkpoint runs as GPT2Model: run says so in one ``note:`` line on stderr."""
    import transformers

    from cudagraph_bench.models.presets import preset_config

    model_dir = tmp_path / "classifier"
    transformers.GPT2ForSequenceClassification(preset_config("gpt2", {**TINY, "pad_token_id": 0})).save_pretrained(model_dir)
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--models", str(model_dir), "--prompt-lengths", "8",
                   "--rounds", "3", "-o", str(tmp_path / "o")])
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    assert rc == 0 and len(notes) == 1
    assert "GPT2ForSequenceClassification is measured as its base model GPT2Model" in notes[0]


@pytest.mark.parametrize("config_class", ["GPTJConfig", "CodeGenConfig", "XGLMConfig"])
def test_a_checkpoint_without_sdpa_attention_runs_its_own_eager_attention(tmp_path, capsys, config_class):
    """Architectures whose transformers class has no SDPA attention (GPT-J and CodeGen in 5.17, XGLM) are measured
    with the model's own attention, eager, recorded per case; where the class has SDPA it runs SDPA."""
    import transformers

    from cudagraph_bench.models.hf_internals import supports_sdpa

    model_dir = tmp_path / config_class
    small = {"GPTJConfig": dict(n_embd=32, n_layer=1, n_head=2, rotary_dim=8, n_positions=64),
             "CodeGenConfig": dict(n_embd=32, n_layer=1, n_head=2, rotary_dim=8, n_positions=64),
             "XGLMConfig": dict(d_model=32, num_layers=1, attention_heads=2, ffn_dim=64, max_position_embeddings=64)}
    config = getattr(transformers, config_class)(vocab_size=64, **small[config_class])
    text_class = transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    text_class(config).save_pretrained(model_dir)
    capsys.readouterr()
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--models", str(model_dir),
                   "--prompt-lengths", "8", "--rounds", "3", "-o", str(tmp_path / "o")])
    assert rc == 0
    (bench,) = json.loads((tmp_path / "o" / "run.json").read_text())["benchmarks"]
    assert bench["extra_info"]["attn_implementation"] == ("sdpa" if supports_sdpa(text_class) else "eager")


def run_help(capsys) -> str:
    """``cudagraph-bench run --help`` with its lines joined."""
    with pytest.raises(SystemExit):
        cli_main(["run", "--help"])
    return " ".join(capsys.readouterr().out.split())


def _run_tiny(tmp_path, lengths):
    out = tmp_path / "out"
    rc = cli_main(["run", "--device", "cpu", "--variants", "eager", "--model-overrides", TINY_JSON, "--models", "gpt2",
                   "--prompt-lengths", lengths, "--iters", "4", "--warmup", "1", "-o", str(out)])
    return rc, json.loads((out / "run.json").read_text())


def test_nothing_measured_is_exit_1_and_the_help_says_so(tmp_path, capsys):
    too_long = runplan.position_limit("gpt2", TINY) + 1          # longer than the model's positions
    rc, raw = _run_tiny(tmp_path, str(too_long))
    assert raw["benchmarks"] == [] and {f["status"] for f in raw["cudagraph_bench"]["failures"]} == {"skipped"}
    assert rc == 1
    assert "no case was measured" in capsys.readouterr().err
    assert "1 a case failed or mismatched, or no case was measured" in run_help(capsys)


def test_measured_cases_correct_and_the_rest_skipped_up_front_is_exit_0(tmp_path, capsys):
    too_long = runplan.position_limit("gpt2", TINY) + 1
    rc, raw = _run_tiny(tmp_path, f"8,{too_long}")
    assert [b["extra_info"]["seq_len"] for b in raw["benchmarks"]] == [8]
    assert [f["seq_len"] for f in raw["cudagraph_bench"]["failures"]] == [too_long]
    assert rc == 0
    capsys.readouterr()
    assert "0 every measured case correct, the rest skipped up front" in run_help(capsys)


@pytest.mark.parametrize("bad", ["unknown model_type", "not JSON", "not an object"])
def test_an_unusable_config_json_names_its_cause_and_fix(tmp_path, capsys, bad):
    import transformers

    model = tmp_path / "model"
    model.mkdir()
    text = {"unknown model_type": '{"model_type": "zzz-not-a-model"}', "not JSON": '{\n"model_type": "gpt2",\n',
            "not an object": "[1, 2]"}[bad]
    (model / "config.json").write_text(text)
    rc = cli_main(["run", "--device", "cpu", "--models", str(model), "--prompt-lengths", "8",
                   "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "OSError" not in err and "ValueError" not in err
    assert not (tmp_path / "out").exists()
    if bad == "unknown model_type":
        assert f"transformers {transformers.__version__} does not know model_type 'zzz-not-a-model'" in err
        assert "upgrade transformers or use a supported architecture" in err
    elif bad == "not JSON":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            line = exc.lineno
        assert f"{model / 'config.json'} is not valid JSON (line {line}" in err
        assert "rewrite it with save_pretrained()" in err
    else:
        assert "not an object" in err and "save_pretrained()" in err


@pytest.mark.parametrize("flag", ["-o", "--output-dir"])
def test_the_output_folder_is_dash_o_or_output_dir(flag):
    assert runcmd.merge_settings(parse(flag, "somewhere")).outdir == "somewhere"
