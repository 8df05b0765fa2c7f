"""``cudagraph-bench run`` on CPU: its options and aliases, the TOML matrix (the command line wins), one-line usage
errors, the pytest processes it plans (the isolated variants apart, one shard per GPU), and end to end: one real
run of the suite on a tiny ``save_pretrained`` model (run.json, table, PNGs), and the launcher's other paths with
its pytest processes run in this process (a process that dies in a test, ``--gpus`` with two shards merged, a
usage error of the launched pytest, nothing measured)."""

import contextlib
import io
import json
import os
import shutil
import statistics
import textwrap
from pathlib import Path

import pytest

from cudagraph_bench import variants
from cudagraph_bench.cases import Case
from cudagraph_bench.cli import build_parser
from cudagraph_bench.cli import main as cli_main
from cudagraph_bench.commands import run as runcmd
from cudagraph_bench.errors import UsageError
from cudagraph_bench.models.positions import prompt_does_not_fit
from cudagraph_bench.models.presets import model_position_limit
from cudagraph_bench.options import (DEFAULT_VARIANTS, MATRIX_OPTIONS, RUN_FLAGS, format_cpus, pytest_argument,
                                     show_default)
from cudagraph_bench.results.runfile import forward_cases, load_run
from cudagraph_bench.runner import matrix_processes, process
from cudagraph_bench.runner.matrix_processes import FORWARD_MODULE, PADDING_MODULE, Matrix
from in_process import run_process_in_process

DATA = Path(__file__).parent / "data"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ("latency_comparison.png", "speedup_vs_length.png")
#: Few rounds, no time floors: a CPU case of a tiny model in well under a second.
QUICK = ("--device", "cpu", "--variants", "eager", "--dtypes", "float32")
#: ... and the round policy after ``--``, last on the command line.
ROUNDS = ("--", "--benchmark-min-rounds", "3", "--precision-pct", "0", "--benchmark-warmup-iterations", "1",
          "--warmup-ms", "0", "--min-time-ms", "0")


def parse(*argv):
    return build_parser().parse_args(["run", *argv])


def options(matrix: Matrix) -> dict:
    """The matrix's values as run's flags and their text (``{"--models": "gpt2,bert-tiny"}``)."""
    flags = {o.dest: o.flag for o in MATRIX_OPTIONS}
    return {flags[dest]: show_default(v) for dest, v in matrix.values if v is not None}


def write_toml(tmp_path, text):
    path = tmp_path / "matrix.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


# ---------------------------------------------------------------------------- options and config


def test_the_defaults_are_the_suites():
    """run launches the suite with the options' own defaults: the pytest run's."""
    (matrix,) = runcmd.matrices(parse())
    assert options(matrix) == {o.flag: show_default(o.default) for o in MATRIX_OPTIONS      # None: not given
                               if o.dest != "variants" and o.default is not None and o.flag in RUN_FLAGS}
    assert matrix.variants == DEFAULT_VARIANTS


def test_the_round_policy_after_the_double_dash_is_parsed_into_the_matrix_and_the_rest_passed_on():
    """After ``--``: the round options in pytest's spelling join the matrix (parsed by their own parsers); other
    pytest arguments go to every process; --with-compile adds the compiled variants."""
    (matrix,) = runcmd.matrices(parse("--variants", "eager", "--", "--benchmark-min-rounds", "7", "--precision-pct",
                                      "0.5", "--replay-proof", "-o", "addopts=", "--with-compile"))
    assert options(matrix)["--rounds"] == "7" and options(matrix)["--precision-pct"] == "0.5"
    assert matrix.flags == ("--replay-proof", "-o", "addopts=")
    assert matrix.variants == ("eager", *(v.name for v in variants.of_suite(variants.FORWARD) if v.compiled))


def test_the_round_options_reach_pytest_in_pytest_benchmarks_spelling():
    """The config's rounds, max_time_ms and warmup_rounds reach each pytest process as pytest-benchmark's flag of the
    same value (seconds for the time cap), never under the config's name, which pytest does not take."""
    from cudagraph_bench.runner import matrix_processes

    (matrix,) = runcmd.matrices(parse("--", "--benchmark-min-rounds", "7", "--benchmark-max-time", "0.25",
                                      "--benchmark-warmup-iterations", "2"))
    ((part,),) = matrix_processes.plan([matrix])
    args = list(part.args)
    given = {flag: args[args.index(flag) + 1] for flag in ("--benchmark-min-rounds", "--benchmark-max-time",
                                                           "--benchmark-warmup-iterations")}
    assert given == {"--benchmark-min-rounds": "7", "--benchmark-max-time": "0.25", "--benchmark-warmup-iterations": "2"}
    assert not {"--rounds", "--max-time-ms", "--warmup-rounds"} & set(args)


@pytest.mark.parametrize("argv, message", [
    (["--variants", "eager,graphs"], "unknown variant 'graphs'"),
    (["--prompt-lengths", "16,,32"], "empty item"),
    (["--cpus", "3-1"], "bad CPU range '3-1'"),
    (["--rounds", "3"], "unrecognized arguments: --rounds; give it after -- as --benchmark-min-rounds"),
    (["--pad-to", "64"], "--pad-to is pytest's option: give it after --, e.g. -- --pad-to ..."),
    (["--replay-proof"], "--replay-proof is pytest's option: give it after --"),
    (["--iters", "3"], "give it after -- as --benchmark-min-rounds"),
    (["--out", "x"], "unrecognized arguments: --out ("),                   # no abbreviation of --output-dir
    (["--config", ""], "expected a path, got an empty string"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["-o", ""], "expected a path, got an empty string"),
])
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["run", "--device", "cpu", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].endswith("(see cudagraph-bench run --help)")


@pytest.mark.parametrize("argv, message", [
    (["--", "--benchmark-min-rounds", "0"], "--benchmark-min-rounds 0: expected a number >= 1"),
    (["--", "--attn-implementation", "paged"], "unknown attention implementation 'paged'"),
    (["--", "--max-positions", "0"], "--max-positions 0: expected a number >= 1"),
    (["--models", "gpt2", "--", "--models", "bert-tiny"], "--models given before and after --: give it once"),
    (["--", "--benchmark-min-rounds", "100001"], "expected at most 100000 rounds, got 100001"),
    (["--", "--max-time-ms", "1"], "--max-time-ms is the round option's name in a run's TOML config: on pytest's "
                                   "command line it is pytest-benchmark's --benchmark-max-time"),
    (["--", "--benchmark-warmup-iterations", "100001"], "expected at most 100000 warmup rounds, got 100001"),
    (["--", "--shard", "1/2"], "--shard: run --gpus shards the matrix: leave it out"),
    (["--", "tests"], "pytest's arguments after -- start with an option"),
    (["--", "--gpus", "0"], "--gpus: it is run's own option: give it before --"),
    (["--", "-k", "gpt2", "perf_tests/test_launch.py"], "the command chooses the test modules"),
    (["--", "--pad-to", "64", "--", "--buckets", "16"], "pytest's arguments come after one --"),
    (["--", "--warmup-ms", "1e12"], "expected at most 3600000 ms (an hour per benchmark)"),
])
def test_bad_pytest_arguments_after_the_double_dash_exit_2_with_one_line_before_anything_runs(argv, message, capsys,
                                                                                            tmp_path):
    assert cli_main(["run", "--device", "cpu", "-o", str(tmp_path / "o"), *argv]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("cudagraph-bench run: error: ") and message in err
    assert not (tmp_path / "o").exists()


def test_a_model_folder_without_a_config_is_a_usage_error(tmp_path, capsys):
    empty = tmp_path / "model"
    empty.mkdir()
    assert cli_main(["run", *QUICK, "--models", str(empty), "-o", str(tmp_path / "o"), *ROUNDS]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "has no config.json" in err
    assert not (tmp_path / "o").exists()


def test_an_option_repeated_under_one_name_keeps_the_last_value_like_argparse():
    assert options(runcmd.matrices(parse("--models", "gpt2", "--models", "bert-tiny"))[0])["--models"] == "bert-tiny"
    argv = ("--", "--benchmark-min-rounds", "5", "--benchmark-min-rounds", "7")
    assert options(runcmd.matrices(parse(*argv))[0])["--rounds"] == "7"


def command_line(pairs) -> list[str]:
    """run's argv for ``(matrix option, text)`` pairs: the options that are not run's own after ``--``, in pytest's
    spelling."""
    before, after = [], []
    for opt, text in pairs:
        if opt.flag in RUN_FLAGS:
            before += [opt.flag, text]
        else:
            after += pytest_argument(opt.flag, text)
    return [*before, *(["--", *after] if after else [])]


def test_the_example_config_expands_its_sweeps():
    first, second = runcmd.matrices(parse("--config", str(DATA / "run-matrix.toml")))
    assert options(first)["--models"] == "gpt2" and options(second)["--models"] == "bert-tiny"
    assert options(first)["--prompt-lengths"] == "16,64,256,1024"
    assert first.variants == ("eager", "graph", "padded")       # inherited from the top level
    assert second.variants == ("eager", "graph")
    assert all(options(m)["--dtypes"] == "float32" and options(m)["--rounds"] == "50"
               and options(m)["--warmup-rounds"] == "5" for m in (first, second))


def test_the_compile_sweep_config_measures_the_compiled_variants_in_processes_of_their_own():
    matrices = runcmd.matrices(parse("--config", str(DATA / "run-compile-sweep.toml"), "--models", "tinyllama-1.1b"))
    assert [options(m)["--models"] for m in matrices] == ["tinyllama-1.1b"] * 2
    steps = matrix_processes.plan(matrices)
    assert [[p.name for p in step] for step in steps] == [["part1"], ["part2-isolated"]]
    (graphs,), (compiled,) = steps
    assert graphs.args[graphs.args.index("--variants") + 1] == "eager,graph,padded"
    assert compiled.args[compiled.args.index("--variants") + 1] == "compile,compile+graph"
    assert compiled.args[compiled.args.index("--prompt-lengths") + 1] == "16,64,256,1024"


def test_the_command_line_wins_over_the_config(tmp_path):
    path = write_toml(tmp_path, """
        models = ["gpt2", "bert-tiny"]
        prompt_lengths = [16, 32]
        rounds = 7
        variants = ["eager"]
    """)
    (matrix,) = runcmd.matrices(parse("--config", path))
    assert options(matrix)["--models"] == "gpt2,bert-tiny" and options(matrix)["--rounds"] == "7"
    # given explicitly, even when equal to the default, a flag wins
    (matrix,) = runcmd.matrices(parse("--config", path, "--models", "gpt2", "--", "--benchmark-min-rounds", "100"))
    assert options(matrix)["--models"] == "gpt2" and options(matrix)["--rounds"] == "100"
    assert options(matrix)["--prompt-lengths"] == "16,32" and matrix.variants == ("eager",)
    path = write_toml(tmp_path, "max_time_ms = 0")
    for argv, expected in ((("--", "--benchmark-max-time", "0.25"), "250.0"), (("--config", path), "0.0"),
                           (("--config", path, "--", "--benchmark-max-time", "0.0405"), "40.5")):
        assert options(runcmd.matrices(parse(*argv))[0])["--max-time-ms"] == expected


#: A value of every matrix key other than its default: the key's TOML value and its command-line text.
EVERY_KEY = {"models": (["gpt2"], "gpt2"), "prompt_lengths": ([16], "16"), "dtypes": (["float32"], "float32"),
             "variants": (["eager"], "eager"), "device": ("cpu", "cpu"), "attn_implementation": ("eager", "eager"),
             "max_positions": (64, "64"), "rounds": (3, "3"), "precision_pct": (0, "0"), "max_rounds": (9, "9"),
             "max_time_ms": (5, "5"), "warmup_rounds": (1, "1"), "warmup_ms": (0, "0"), "min_time_ms": (1, "1"),
             "check_inputs": (2, "2"), "compile_mode": ("max-autotune-no-cudagraphs", "max-autotune-no-cudagraphs"),
             "pad_to": (32, "32"), "buckets": ([16, 32], "16,32")}


def test_every_config_key_counts_and_the_command_line_wins_over_it(tmp_path, capsys, monkeypatch):
    """Defaults < --config < command line, for every key: a config of every key gives the matrix its flags give
    (``device`` and ``compile_mode`` too, whose string defaults argparse runs through their parsers); each flag
    given wins over the config, even at its default value. ``device = "cpu"`` in the config is the device the
    run checks: its eager matrix needs no GPU, and a [[sweep]] of graph is refused with the graph-needs-CUDA line."""
    import tomllib

    assert set(EVERY_KEY) == {o.dest for o in MATRIX_OPTIONS}
    text = "".join(f"{key} = {json.dumps(value)}\n" for key, (value, _) in EVERY_KEY.items())
    assert tomllib.loads(text)
    path = write_toml(tmp_path, text)
    flags = command_line((o, EVERY_KEY[o.dest][1]) for o in MATRIX_OPTIONS)
    (from_config,) = runcmd.matrices(parse("--config", path))
    (from_flags,) = runcmd.matrices(parse(*flags))
    assert from_config == from_flags and options(from_config)["--device"] == "cpu"
    for o in MATRIX_OPTIONS:
        default = show_default(o.default) if o.default is not None else None
        if default is None:
            continue
        (matrix,) = runcmd.matrices(parse("--config", path, *command_line([(o, default)])))
        (flag_alone,) = runcmd.matrices(parse(*command_line([(o, default)])))
        assert (options(matrix).get(o.flag), matrix.variants)[o.dest == "variants"] == \
            (options(flag_alone).get(o.flag), flag_alone.variants)[o.dest == "variants"], o.flag
    monkeypatch.setattr(process, "cuda_problem", lambda: "torch.cuda.is_available() is False for python")
    runcmd.check_device([from_config])                               # on the config's CPU: no GPU needed
    with pytest.raises(UsageError, match="no CUDA GPU"):
        runcmd.check_device(runcmd.matrices(parse("--config", path, "--device", "cuda")))
    path = write_toml(tmp_path, text + '[[sweep]]\nvariants = ["graph"]\n')
    assert cli_main(["run", "--config", path, "-o", str(tmp_path / "o")]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "graph variants need a CUDA GPU: --device cpu runs only --variants eager (drop graph)" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text, message", [
    ('modles = ["gpt2"]', "unknown key 'modles'"),
    ("prompt_lengths = [16, 0]", "key 'prompt_lengths': prompt lengths must be positive"),
    ('variants = ["eager", "fast"]', "key 'variants': unknown variant 'fast'"),
    ("rounds = 0", "key 'rounds'"),
    ('[[sweep]]\nmodels = ["gpt2"]\nlengths = [1]', "[[sweep]] #1: unknown key 'lengths'"),
    ('[[sweep]]\nrounds = 3', "[[sweep]] #1: unknown key 'rounds'"),
    ("sweep = []", "'sweep' is empty: give at least one [[sweep]] table, or remove the key"),
    ("sweep = 3", "key 'sweep' must be an array of tables"),
    ("models = [", "is not valid TOML"),
    ("rounds = [1]", "key 'rounds': expected an integer, got a list ([1])"),
    ("max_time_ms = -5", "key 'max_time_ms': expected milliseconds >= 0"),
    ("check_inputs = true", "key 'check_inputs': expected an integer, got a boolean (true)"),
    ("models = 5", "key 'models': expected a list of strings, got an integer (5)"),
    ('models = ["gpt2", 5]', "key 'models': expected a list of strings, got an integer (5) in the list"),
    ('prompt_lengths = "16"', "key 'prompt_lengths': expected a list of integers, got a string (\"16\")"),
    ('rounds = "20"', "key 'rounds': expected an integer, got a string (\"20\")"),
    ("pad_to = 1.5", "key 'pad_to': expected an integer, got a number (1.5)"),
    ("device = 1", "key 'device': expected a string, got an integer (1)"),
    ("warmup_ms = 1979-05-27", "key 'warmup_ms': expected a number, got a date or time"),
    ('[[sweep]]\nmodels = "gpt2"', "[[sweep]] #1: key 'models': expected a list of strings, got a string"),
])
def test_a_bad_config_is_one_line_naming_the_file_and_the_key(tmp_path, capsys, text, message):
    path = write_toml(tmp_path, text)
    with pytest.raises(UsageError, match="matrix.toml") as exc:
        runcmd.matrices(parse("--config", path))
    assert message in str(exc.value)
    assert cli_main(["run", "--device", "cpu", "--variants", "eager", "--config", path]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_a_missing_or_non_utf8_config_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as missing:
        runcmd.matrices(parse("--config", str(tmp_path / "nope.toml")))
    assert str(missing.value) == (f"no such config file: {tmp_path / 'nope.toml'}: give a TOML matrix config (as "
                                  "scripts/device/compile-sweep.toml)")
    path = tmp_path / "m.toml"
    path.write_bytes(b"models = ['gpt2']\n# \xff\xfe\n")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        runcmd.matrices(parse("--config", str(path)))



def test_a_config_that_is_no_regular_file_or_too_large_is_refused_before_reading(tmp_path):
    """``--config /dev/zero`` would be read for ever: refused by its kind, a folder and an oversized file by what
    they are, each before a byte is parsed."""
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (runcmd.MAX_CONFIG_BYTES + 1))
    for path, message in (("/dev/zero", "is not a regular file"), (str(tmp_path), "is a folder"),
                          (str(big), "read at most")):
        with pytest.raises(UsageError, match=message):
            runcmd.matrices(parse("--config", path))


def test_the_help_shows_list_defaults_as_typed(capsys):
    with pytest.raises(SystemExit):
        cli_main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 16,50,128,512,1024)" in out and "('" not in out


@pytest.mark.parametrize("flag", ["-o", "--output-dir"])
def test_the_output_folder_is_dash_o_or_output_dir(flag):
    assert parse(flag, "somewhere").outdir == "somewhere"


# ---------------------------------------------------------------------------- the device


def test_device_cpu_refuses_every_variant_that_needs_a_gpu_before_anything_runs(capsys, tmp_path):
    assert cli_main(["run", "--device", "cpu", "--variants", "eager,graph,compile", "-o", str(tmp_path / "o")]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "graph variants need a CUDA GPU: --device cpu runs only --variants eager (drop graph, compile)" in err
    (matrix,) = runcmd.matrices(parse("--device", "cpu"))                          # no --variants: the CPU's
    assert "eager" in matrix.variants and not [n for n in matrix.variants if variants.variant(variants.FORWARD, n).needs_cuda]
    path = write_toml(tmp_path, 'variants = ["eager", "padded"]')
    assert cli_main(["run", "--device", "cpu", "--config", path, "-o", str(tmp_path / "o")]) == 2
    assert "(drop padded)" in capsys.readouterr().err                # the config's choice is checked too
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("chosen", [(), ("--variants", "eager")])
def test_device_cpu_with_compile_names_the_option_given(capsys, tmp_path, chosen):
    """``--with-compile`` after ``--`` on the CPU: the one line names the option to drop (and the variants it adds,
    those of the registry that are compiled), not only the variants the user never typed."""
    compiled = [v.name for v in variants.of_suite(variants.FORWARD) if v.compiled]
    assert cli_main(["run", "--device", "cpu", *chosen, "-o", str(tmp_path / "o"), "--", "--with-compile"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.endswith(f"--with-compile adds the torch.compile variants ({', '.join(compiled)}), which need a CUDA "
                        "GPU: --device cpu runs only --variants eager (drop --with-compile)")
    assert not (tmp_path / "o").exists()


def test_device_cuda_without_a_gpu_is_a_usage_error_that_names_the_cpu_hint(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(process, "cuda_problem", lambda: "torch.cuda.is_available() is False for python")
    assert cli_main(["run", "--variants", "eager,graph", "-o", str(tmp_path / "o")]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "no CUDA GPU (torch.cuda.is_available() is False for python)" in err and "--device cpu --variants eager" \
        in err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------- the processes of a run


def test_the_isolated_variants_run_in_a_process_of_their_own_after_the_others():
    (matrix,) = runcmd.matrices(parse("--variants", "eager,graph,bucketed,compile", "--models", "gpt2"))
    (main,), (isolated,) = matrix_processes.plan([matrix])
    assert (main.name, isolated.name) == ("main", "isolated")
    assert main.args[:3] == (FORWARD_MODULE, PADDING_MODULE, "--benchmark-only")
    assert main.args[main.args.index("--variants") + 1] == "eager,graph,bucketed"
    assert isolated.args[:2] == (FORWARD_MODULE, "--benchmark-only")
    assert isolated.args[isolated.args.index("--variants") + 1] == "compile"
    assert all(v.isolated == v.compiled for v in variants.of_suite(variants.FORWARD))


def test_with_gpus_each_process_is_one_shard_on_its_gpu_and_its_share_of_the_cpus():
    (matrix,) = runcmd.matrices(parse("--variants", "eager,graph"))
    (step,) = matrix_processes.plan([matrix], gpus=("0", "1"), cpus=list(range(8)))
    assert [p.name for p in step] == ["part-main-gpu0-shard1", "part-main-gpu1-shard2"]
    assert [p.env for p in step] == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    assert [p.args[p.args.index("--shard") + 1] for p in step] == ["1/2", "2/2"]
    assert [p.cpus for p in step] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    (one,) = matrix_processes.plan([matrix], cpus=[0, 1, 2])[0]                # without --gpus: the one process pinned
    assert one.cpus == (0, 1, 2) and "--shard" not in one.args


def test_cpu_shares_are_contiguous_and_even():
    assert matrix_processes.cpu_shares(list(range(8)), 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert matrix_processes.cpu_shares([1, 2, 3, 4, 5], 2) == [[1, 2, 3], [4, 5]]
    assert matrix_processes.cpu_shares([0], 2) == [[0], [0]]                  # fewer CPUs than processes: shared
    assert matrix_processes.cpu_shares([], 2) == [[], []]


def test_gpus_are_indices_or_all_the_visible_ones(monkeypatch):
    assert matrix_processes.visible_gpus("0,1") == ("0", "1") and matrix_processes.visible_gpus(" 2 ") == ("2",)
    for bad in ("", "0,x", "GPU-1"):
        with pytest.raises(ValueError, match="give GPU indices such as 0,1 or 'all'"):
            matrix_processes.visible_gpus(bad)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5,")
    assert matrix_processes.visible_gpus("all") == ("3", "5")


def test_a_bad_gpus_value_is_a_usage_error(tmp_path, capsys):
    assert cli_main(["run", *QUICK, "--gpus", "0,x", "-o", str(tmp_path / "o"), *ROUNDS]) == 2
    assert "--gpus '0,x': give GPU indices such as 0,1 or 'all'" in capsys.readouterr().err


def test_the_note_of_gpus_on_the_cpu_counts_its_shards_in_words_that_fit_one(tmp_path, capsys, monkeypatch):
    """One GPU index is one shard, which runs beside no other: the note says so (the folder is refused after it)."""
    monkeypatch.setattr(process, "run_process", lambda *a: pytest.fail("a pytest process was started"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for gpus, said in (("0", "its one shard runs on the CPU ("),
                       ("0,0", "the 2 shards run side by side on the CPU and disturb each other's timing")):
        assert cli_main(["run", *QUICK, "--gpus", gpus, "-o", str(blocker), *ROUNDS]) == 2
        assert f"note: --gpus {gpus} with --device cpu: {said}" in capsys.readouterr().err


def test_an_output_folder_that_cannot_be_one_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(process, "run_process", lambda *a: pytest.fail("a pytest process was started"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli_main(["run", *QUICK, "-o", str(blocker / "sub"), *ROUNDS]) == 2
    assert f"{blocker} is a file, not a folder" in capsys.readouterr().err
    assert cli_main(["run", *QUICK, "-o", str(blocker), *ROUNDS]) == 2
    assert f"{blocker} is a file, not a folder: give -o a folder for run.json" in capsys.readouterr().err
    (tmp_path / "out" / "run.json").mkdir(parents=True)
    assert cli_main(["run", *QUICK, "-o", str(tmp_path / "out"), *ROUNDS]) == 2
    assert "run.json is a folder" in capsys.readouterr().err


def test_run_outside_a_checkout_names_the_pytest_command(tmp_path, capsys, monkeypatch):
    import cudagraph_bench.paths as paths

    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    assert cli_main(["run", *QUICK, "-o", str(tmp_path / "o"), *ROUNDS]) == 2
    assert "run it from a cudagraph-bench checkout" in capsys.readouterr().err


# ---------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, tiny_gpt2_dir):
    """One real ``cudagraph-bench run`` (its pytest process a real one) on the tiny model, pinned to one CPU:
    ``(exit code, stdout, stderr, output folder, the CPU)``."""
    out = tmp_path_factory.mktemp("run") / "out"
    cpu = min(os.sched_getaffinity(0))
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8,16", "--cpus", str(cpu),
                       "-o", str(out), *ROUNDS])
    return rc, stdout.getvalue(), stderr.getvalue(), out, cpu


def test_a_real_run_writes_a_pytest_benchmark_json_the_loader_accepts(real_run, tiny_gpt2_dir):
    rc, stdout, stderr, out, cpu = real_run
    assert rc == 0, stderr
    cases = forward_cases(load_run(str(out / "run.json")))
    assert set(cases) == {Case(tiny_gpt2_dir, "float32", n, "eager") for n in (8, 16)}
    raw = json.loads((out / "run.json").read_text())
    assert raw["machine_info"]["cuda"] is None and raw["machine_info"]["cpu_affinity"] == str(cpu)
    assert {"id", "dirty"} <= set(raw["commit_info"]) and raw["cudagraph_bench"]["failures"] == []
    for bench in raw["benchmarks"]:
        st = bench["stats"]
        assert len(st["data"]) == st["rounds"] == 3 and st["iterations"] == 1
        assert st["median"] == pytest.approx(statistics.median(st["data"]))
        assert bench["options"]["disable_gc"] is True
        assert bench["fullname"].startswith(f"{FORWARD_MODULE}::test_forward[")     # a real pytest node id
        info = bench["extra_info"]
        assert info["suite"] == "forward" and info["check"] == "reference" and "correct" not in info
        assert bench["group"] == Case.from_extra_info(info).group
        assert f"{statistics.median(st['data']) * 1e3:.3f}" in stdout        # the printed table, ms
    for name in PLOTS:
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in (out / "parts").iterdir()) == ["main.json", "main.log"]
    assert f"wrote {out / 'run.json'}" in stderr and "run: main: ok" in stderr
    assert not [p for p in out.iterdir() if p.name.startswith(".")]       # no temp files left


@pytest.fixture
def in_process_pytest(monkeypatch):
    """The launcher's pytest processes run in this process (:func:`in_process.run_process_in_process`); the calls
    are recorded (``(cmd, env)``)."""
    calls = []

    def run(cmd, cwd, env, log):
        calls.append((cmd, env))
        return run_process_in_process(cmd, cwd, env, log)

    monkeypatch.setattr(process, "run_process", run)
    return calls


def test_a_test_the_pytest_process_dies_in_is_recorded_and_the_rest_still_measured(tmp_path, capsys, monkeypatch,
                                                                                   tiny_gpt2_dir):
    """A process that dies in the 16-token case (a stand-in: its journal names that test, it exits by SIGSEGV)
    is started again without it; the other case is measured and the crash recorded in run.json and the table."""
    crashed = Case(tiny_gpt2_dir, "float32", 16, "eager")
    node = f"{FORWARD_MODULE}::test_forward[{crashed.test_id}]"
    attempts = []

    def dies_in_one_test(cmd, cwd, env, log):
        attempts.append(cmd)
        if f"--deselect={node}" in cmd:
            return run_process_in_process(cmd, cwd, env, log)
        journal = next(a.split("=", 1)[1] for a in cmd if a.startswith("--journal="))
        Path(journal).write_text(json.dumps({"start": node, "case": crashed.extra_info()}) + "\n")
        log.write("Fatal Python error: Segmentation fault\n")
        return -11

    monkeypatch.setattr(process, "run_process", dies_in_one_test)
    out = tmp_path / "out"
    rc = cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8,16", "-o", str(out), *ROUNDS])
    err = capsys.readouterr().err
    assert rc == 1 and len(attempts) == 2
    run = load_run(str(out / "run.json"))
    assert [c.seq_len for c in forward_cases(run)] == [8]
    (failure,) = json.loads((out / "run.json").read_text())["cudagraph_bench"]["failures"]
    assert failure["fullname"] == node and failure["phase"] == "process" and failure["seq_len"] == 16
    assert "killed by SIGSEGV" in failure["reason"] and "Fatal Python error: Segmentation fault" in failure["reason"]
    assert f"failed: {crashed.label}: the pytest process died in this test (killed by SIGSEGV)" in err
    assert "run: main: exit 1, 1 crashed test recorded" in err
    assert all((out / name).exists() for name in PLOTS)


def test_two_gpu_shards_are_merged_into_one_run(tmp_path, capsys, in_process_pytest, tiny_gpt2_dir):
    out = tmp_path / "out"
    rc = cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8,16", "--dtypes",
                   "float32,bfloat16", "--gpus", "0,0", "-o", str(out), *ROUNDS])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "--gpus 0,0 with --device cpu: the 2 shards run side by side on the CPU" in err
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in in_process_pytest] == ["0", "0"]
    shards = sorted(cmd[cmd.index("--shard") + 1] for cmd, _ in in_process_pytest)
    assert shards == ["1/2", "2/2"]
    run = load_run(str(out / "run.json"))
    assert set(forward_cases(run)) == {Case(tiny_gpt2_dir, d, n, "eager") for d in ("float32", "bfloat16")
                                       for n in (8, 16)}
    parts = [json.loads((out / "parts" / f"part-main-gpu0-shard{k}.json").read_text()) for k in (1, 2)]
    dtypes = [{b["extra_info"]["dtype"] for b in p["benchmarks"]} for p in parts]
    assert sorted(map(sorted, dtypes)) == [["bfloat16"], ["float32"]]       # a model and dtype stay together
    merged = json.loads((out / "run.json").read_text())
    assert sorted((p["source"], p["shard"], p["benchmarks"]) for p in merged["machine_info"]["parts"]) == \
        [(f"part-main-gpu0-shard{k}", f"{k}/2", 2) for k in (1, 2)]


@pytest.mark.filterwarnings("ignore:Not saving anything")          # true: the second shard measured nothing
def test_a_shard_that_no_group_fell_to_is_no_failure_of_the_run(tmp_path, capsys, in_process_pytest, tiny_gpt2_dir):
    """One model and dtype over two shards: the second shard selects no test (pytest's exit 5), the run is whole and
    exits 0; two shards on one CPU are said to share it."""
    out = tmp_path / "out"
    cpu = str(min(os.sched_getaffinity(0)))
    rc = cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", "8", "--gpus", "0,1", "--cpus", cpu,
                   "-o", str(out), *ROUNDS])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "run: part-main-gpu1-shard2: no test of the matrix in this shard (log: parts/part-main-gpu1-shard2.log)" \
        in err.splitlines()
    assert f"note: --cpus {cpu} has fewer CPUs than --gpus has shards: shards share a CPU" in err
    assert set(forward_cases(load_run(str(out / "run.json")))) == {Case(tiny_gpt2_dir, "float32", 8, "eager")}
    assert (out / "parts" / "part-main-gpu1-shard2.log").is_file()


def test_a_checkpoint_the_launched_pytest_refuses_is_a_usage_error_of_run(tmp_path, capsys, in_process_pytest):
    import transformers

    model_dir = tmp_path / "t5"
    transformers.T5Config(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, vocab_size=64).save_pretrained(
        model_dir)
    assert cli_main(["run", *QUICK, "--models", str(model_dir), "-o", str(tmp_path / "o"), *ROUNDS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cudagraph-bench run: error: --models: ") and "T5Config is an encoder-decoder model" \
        in err[-1]
    assert not (tmp_path / "o" / "run.json").exists()


@pytest.mark.parametrize("bad", ["unknown model_type", "not JSON", "not an object"])
def test_an_unusable_config_json_names_its_cause_and_fix(tmp_path, capsys, in_process_pytest, bad):
    import transformers

    model = tmp_path / "model"
    model.mkdir()
    text = {"unknown model_type": '{"model_type": "zzz-not-a-model"}', "not JSON": '{\n"model_type": "gpt2",\n',
            "not an object": "[1, 2]"}[bad]
    (model / "config.json").write_text(text)
    assert cli_main(["run", *QUICK, "--models", str(model), "--prompt-lengths", "8", "-o", str(tmp_path / "o"), *ROUNDS]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in err and "OSError" not in err and "ValueError" not in err
    if bad == "unknown model_type":
        assert f"transformers {transformers.__version__} does not know model_type 'zzz-not-a-model'" in err
        assert "upgrade transformers or use a supported architecture" in err
    elif bad == "not JSON":
        with pytest.raises(json.JSONDecodeError) as exc:
            json.loads(text)
        assert f"{model / 'config.json'} is not valid JSON (line {exc.value.lineno}" in err
        assert "rewrite it with save_pretrained()" in err
    else:
        assert "not an object" in err and "save_pretrained()" in err


def test_cpus_the_machine_lacks_are_a_usage_error_of_run(tmp_path, capsys, in_process_pytest, cpu_affinity_restored):
    assert cli_main(["run", *QUICK, "--cpus", "0,60000", "--prompt-lengths", "8", "-o", str(tmp_path / "o"), *ROUNDS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (f"--cpus: CPU(s) 60000 not available to this process: choose among "
            f"{format_cpus(os.sched_getaffinity(0))}") in err[-1]


@pytest.mark.filterwarnings("ignore:Not saving anything")          # true: that pytest session measured nothing
def test_nothing_measured_is_exit_1_and_the_earlier_run_is_left_whole(tmp_path, capsys, in_process_pytest,
                                                                     tiny_gpt2_dir):
    """A prompt longer than the model's positions is skipped: the other prompts measured, exit 0; nothing
    measured, exit 1, and the folder keeps the earlier run, every file as it was, the logs of this one kept
    aside where stderr says. Either way the skip's reason is one line on stderr, with the number of tests it
    skipped as the process's log reports it."""
    out = tmp_path / "out"
    limit = model_position_limit(tiny_gpt2_dir)
    too_long = limit + 1
    reason = prompt_does_not_fit(tiny_gpt2_dir, limit, too_long)

    def skip_lines(err, logs):
        skipped = process.skip_reasons((logs / "main.log").read_text())
        assert list(skipped) == [reason]
        lines = [line for line in err.splitlines() if line.startswith("skipped: ")]
        assert lines == [f"skipped: {reason} ({skipped[reason]} test{'' if skipped[reason] == 1 else 's'})"]

    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", f"8,{too_long}",
                     "-o", str(out), *ROUNDS]) == 0
    assert [c.seq_len for c in forward_cases(load_run(str(out / "run.json")))] == [8]
    assert all((out / name).exists() for name in PLOTS)
    skip_lines(capsys.readouterr().err, out / "parts")
    earlier = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert cli_main(["run", *QUICK, "--models", tiny_gpt2_dir, "--prompt-lengths", str(too_long),
                     "-o", str(out), *ROUNDS]) == 1
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert last.endswith(f"nothing measured, {out} left as it was (exit 1)")
    logs = Path(last.split("see the logs under ", 1)[1].split(")", 1)[0])
    skip_lines(err, logs)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == earlier
    shutil.rmtree(logs.parent)
    with pytest.raises(SystemExit):
        cli_main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "0 every measured case correct;" in help_text and "or no case was measured" in help_text
    assert "1 a case failed, crashed or differs from its reference" in help_text


def test_a_run_whose_every_case_failed_points_at_the_failures(tmp_path, capsys, in_process_pytest, tiny_gpt2_dir):
    """A checkpoint whose config.json counts more layers than its weights hold fails every case: run exits 1 with
    each case's reason on stderr and a last line that points at them and the logs, not at a merge of shards."""
    model = shutil.copytree(tiny_gpt2_dir, tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "n_layer": config["n_layer"] + 1}))
    out = tmp_path / "out"
    assert cli_main(["run", *QUICK, "--models", str(model), "--prompt-lengths", "8", "-o", str(out), *ROUNDS]) == 1
    err = capsys.readouterr().err
    assert "merge" not in err and "a session that ran no benchmark" not in err
    failed = [line for line in err.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 1 and "CheckpointMismatchError" in failed[0] and "initialised at random" in failed[0]
    assert (f"{out / 'run.json'} holds no benchmark: every case of this run failed or was skipped (the reasons "
            f"above, the logs under {out / 'parts'}): fix what they name and run again") in err.splitlines()


def test_a_pytest_usage_error_is_said_by_what_argparse_refused(tmp_path):
    """A process that pytest's own parser stopped (an option from PYTEST_ADDOPTS it does not know) is reported by
    the line that names the refused argument, not by pytest's usage line."""
    from types import SimpleNamespace

    log = tmp_path / "main.log"
    log.write_text("ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]\n"
                   "python -m pytest: error: unrecognized arguments: --nosuch-flag\n"
                   "  inifile: None\n  rootdir: /x\n")
    assert runcmd._usage_error([SimpleNamespace(returncode=4, log_path=log)]) == \
        "pytest: unrecognized arguments: --nosuch-flag"
    log.write_text("ERROR: --models nosuch: unknown model 'nosuch'\n")
    assert runcmd._usage_error([SimpleNamespace(returncode=4, log_path=log)]) == "--models nosuch: unknown model 'nosuch'"


def test_on_the_cpu_a_sweep_without_variants_gets_the_cpus_defaults_beside_one_that_names_its_own(tmp_path):
    """device = "cpu": a [[sweep]] that names no variants gets the defaults that need no GPU, even when another
    sweep names its own."""
    path = write_toml(tmp_path, """
        device = "cpu"
        [[sweep]]
        models = ["gpt2"]
        variants = ["eager"]
        [[sweep]]
        models = ["bert-tiny"]
    """)
    named, defaulted = runcmd.matrices(parse("--config", path))
    assert named.variants == ("eager",) and defaulted.variants
    assert not any(variants.variant(variants.FORWARD, n).needs_cuda for n in defaulted.variants)
    runcmd.check_device([named, defaulted])
