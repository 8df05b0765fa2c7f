import argparse

import pytest

from cudagraph_bench.options import (ATTN_IMPLEMENTATIONS, DEFAULT_ROUNDS, DEFAULT_WARMUP_ROUNDS, MATRIX_OPTIONS,
                                     PRESET_NAMES, add_to_argparse, model_name_problem, parse_attn_implementation,
                                     parse_buckets, parse_count, parse_dtypes, parse_models, parse_nonneg,
                                     parse_prompt_lengths)


def test_models_presets_and_dirs(tmp_path):
    assert parse_models("gpt2, bert-tiny,gpt2") == ("gpt2", "bert-tiny")
    (tmp_path / "config.json").write_text("{}")
    assert parse_models(str(tmp_path)) == (str(tmp_path),)
    assert model_name_problem(str(tmp_path)) is None and model_name_problem("gpt2") is None


def test_a_directory_without_config_json_is_a_problem_of_that_entry(tmp_path):
    """parse_models takes the list; the entry's problem is found by model_name_problem (check_models collects it
    for every entry, so that one entry does not stop the others)."""
    assert parse_models(str(tmp_path)) == (str(tmp_path),)
    assert "has no config.json: give a directory written by save_pretrained" in model_name_problem(str(tmp_path))


def test_a_folder_given_twice_under_two_spellings_is_one_model(tmp_path, monkeypatch):
    """``m``, ``m/`` and ``./m`` name one folder: measured once, under the first spelling."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert parse_models(f"m,m/,./m,{tmp_path / 'm'}") == ("m",)


def test_a_file_instead_of_its_folder_names_the_folder(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{}")
    reason = model_name_problem(str(config))
    assert "is a file" in reason and repr(str(tmp_path)) in reason


def test_a_file_or_folder_config_json_names_only_a_folder_that_holds_a_config_json(tmp_path):
    """A file beside no config.json, or a config.json that is a folder, points to save_pretrained(), never to a
    folder that holds no config.json either."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "mk.py").write_text("")
    (tmp_path / "y" / "config.json").mkdir(parents=True)
    for given in (tmp_path / "x" / "mk.py", tmp_path / "y", tmp_path / "y" / "config.json"):
        reason = model_name_problem(str(given))
        assert "give a directory written by save_pretrained() (config.json and weights)" in reason, reason
        assert f"({str(given.parent)!r})" not in reason and "\n" not in reason
    assert "config.json' is a folder, not a file" in model_name_problem(str(tmp_path / "y"))


def test_every_preset_is_a_model_name():
    assert parse_models(",".join(PRESET_NAMES)) == PRESET_NAMES
    assert all(model_name_problem(name) is None for name in PRESET_NAMES)


@pytest.mark.parametrize("text, message", [
    ("gpt2,,bert-tiny", "empty item"),
    ("", "empty item"),
])
def test_models_list_errors(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_models(text)


def test_an_unknown_name_lists_the_presets():
    assert model_name_problem("gpt3") == (f"unknown model 'gpt3': use a preset ({', '.join(PRESET_NAMES)}) "
                                          "or a local directory saved with save_pretrained()")


@pytest.mark.parametrize("spelling", ["absolute", "relative", "hub id"])
def test_a_model_path_that_does_not_exist_is_named_a_missing_directory(tmp_path, monkeypatch, spelling):
    monkeypatch.chdir(tmp_path)
    name = {"absolute": str(tmp_path / "missing"), "relative": "./missing",
            "hub id": "meta-llama/Llama-3.2-1B"}[spelling]
    assert parse_models(f"gpt2,{name}") == ("gpt2", name)
    message = model_name_problem(name)
    assert message.startswith(f"no directory {str(tmp_path / name.removeprefix('./'))!r}")
    assert "never from a model hub" in message and "save_pretrained()" in message and "gpt2" in message


def test_attention_implementation_names_and_short_names():
    assert [parse_attn_implementation(n) for n in ATTN_IMPLEMENTATIONS] == list(ATTN_IMPLEMENTATIONS)
    assert parse_attn_implementation("flash") == "flash_attention_2"
    assert parse_attn_implementation("Flex") == "flex_attention"
    with pytest.raises(argparse.ArgumentTypeError, match="unknown attention implementation 'paged': use one of "
                                                         "eager, sdpa, flash_attention_2, flex_attention"):
        parse_attn_implementation("paged")


def test_cli_parser_bad_value_exits_2(capsys):
    parser = argparse.ArgumentParser(prog="x")
    add_to_argparse(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--attn-implementation", "paged"])
    assert exc.value.code == 2
    assert "unknown attention implementation 'paged'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--max-positions", "0"])
    assert "expected a number >= 1" in capsys.readouterr().err


def test_decode_compile_modes_and_variants():
    from cudagraph_bench import variants
    from cudagraph_bench.options import (COMPILE_GRAPH_MODES, DECODE_VARIANTS, DEFAULT_COMPILE_GRAPH_MODE,
                                         parse_compile_mode)

    assert DEFAULT_COMPILE_GRAPH_MODE in COMPILE_GRAPH_MODES
    assert all(parse_compile_mode(mode) == mode for mode in COMPILE_GRAPH_MODES)
    assert all("cudagraphs" not in mode or "no-cudagraphs" in mode for mode in COMPILE_GRAPH_MODES)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown compile mode 'reduce-overhead'"):
        parse_compile_mode("reduce-overhead")
    compiled = {v.name for v in variants.of_suite(variants.DECODE) if v.compiled}
    assert compiled and compiled < set(DECODE_VARIANTS)


def test_decode_compile_tunings_name_real_inductor_fields():
    """Every tuning is accepted by its parser and sets only fields that this torch's inductor config has (a
    rename in torch would otherwise fail only on a GPU, minutes into a compile)."""
    import torch._inductor.config as inductor_config

    from cudagraph_bench.options import (DECODE_COMPILE_TUNINGS, DEFAULT_DECODE_COMPILE_TUNING,
                                         parse_decode_compile_tuning)

    assert DEFAULT_DECODE_COMPILE_TUNING in DECODE_COMPILE_TUNINGS
    for name, fields in DECODE_COMPILE_TUNINGS.items():
        assert parse_decode_compile_tuning(name) == name
        assert all(hasattr(inductor_config, k) for k in fields), name
    with pytest.raises(argparse.ArgumentTypeError, match="unknown decode compile tuning 'fast'.*coordinate-descent"):
        parse_decode_compile_tuning("fast")


def test_a_shard_count_beyond_a_ci_matrix_is_refused_before_the_split_allocates_it():
    """``--shard 1/100000000`` (a mistyped N) would build a load per shard before any test ran."""
    from cudagraph_bench.options import MAX_SHARDS, parse_shard

    assert parse_shard(f"{MAX_SHARDS}/{MAX_SHARDS}") == (MAX_SHARDS, MAX_SHARDS)
    with pytest.raises(argparse.ArgumentTypeError, match=f"bad shard '1/{MAX_SHARDS + 1}': give at most "
                                                         f"{MAX_SHARDS} shards"):
        parse_shard(f"1/{MAX_SHARDS + 1}")


@pytest.mark.parametrize("flag, dest", [("--rounds", "rounds"), ("--max-rounds", "max_rounds"),
                                        ("--warmup-rounds", "warmup_rounds")])
def test_too_many_rounds_names_the_limit_and_no_default(capsys, flag, dest):
    # the suite's defaults and `cudagraph-bench run`'s differ: a default in the message would be wrong for one
    from cudagraph_bench.options import MAX_ROUNDS

    parser = argparse.ArgumentParser(prog="x")
    add_to_argparse(parser)
    assert parser.parse_args([flag, str(MAX_ROUNDS)]).__dict__[dest] == MAX_ROUNDS
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([flag, str(MAX_ROUNDS + 1)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"argument {flag}: expected at most {MAX_ROUNDS}" in err and f"give at most {MAX_ROUNDS}" in err
    assert "default" not in err


def test_a_negative_noise_multiplier_is_named_a_multiplier_not_a_percent():
    from cudagraph_bench.options import parse_multiplier

    with pytest.raises(argparse.ArgumentTypeError, match="expected a multiplier of the spread >= 0, got -1"):
        parse_multiplier("-1")
    assert parse_multiplier("0") == 0 and parse_multiplier("2.5") == 2.5


def test_a_refused_pytest_option_is_one_line_with_its_reason_first(pytester):
    """pytest prints an argparse type error below its usage line; the suite's options say it in one line."""
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "--models", "nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.strip()]
    assert lines == [f"ERROR: --models: unknown model 'nosuch': use a preset ({', '.join(PRESET_NAMES)}) "
                     "or a local directory saved with save_pretrained()"]


def test_matrix_arguments_is_the_one_serializer_in_table_order_and_pytest_spelling():
    """A matrix's values (parsed, keyed by dest) become pytest arguments in the option table's order; a round
    option pytest-benchmark spells goes in its spelling; None is an option not given; an unknown key is an error."""
    from cudagraph_bench.options import matrix_arguments, parse_prompt_lengths

    values = {"max_time_ms": 250.0, "dtypes": ("bfloat16",), "prompt_lengths": parse_prompt_lengths("16,50"),
              "models": ("gpt2",), "pad_to": None}
    assert matrix_arguments(values) == ["--models", "gpt2", "--prompt-lengths", "16,50", "--dtypes", "bfloat16",
                                        "--benchmark-max-time", "0.25"]
    with pytest.raises(ValueError, match="not matrix options: seq_len"):
        matrix_arguments({"seq_len": 16})
