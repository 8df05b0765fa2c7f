"""The pytest plugin's options given bad values: each is one ``ERROR:`` line naming the option and what is wrong,
pytest's usage-error exit code (the commands' bad input: tests/test_bad_input_matrix.py)."""

import pytest

#: pytest options of the plugin -> what the one line says (pytest's own form: ``ERROR: FLAG VALUE: reason``)
PYTEST_OPTIONS = {
    ("--new-tokens", "0"): "--new-tokens 0: token counts must be positive",
    ("--new-tokens", "64,99999999"): "--new-tokens 64,99999999: expected at most 131072 new tokens (the largest "
                                     "position limit of any preset), got 99999999: a request that long never finishes",
    ("--decode-dtypes", "int8"): "--decode-dtypes int8: unknown dtype 'int8'",
    ("--plant-fault", "bogus"): "--plant-fault bogus: unknown fault 'bogus'",
    ("--plant-fault", "stale-masks"): "--plant-fault stale-masks: unknown fault 'stale-masks'",
    ("--plant-fault", "stale-mask:1"): "--plant-fault stale-mask:1: fault stale-mask takes no argument",
    ("--plant-fault", "stale-position:5"): "--plant-fault stale-position:5: fault stale-position takes no argument",
    ("--plant-fault", "eager-layer:1"): "--plant-fault eager-layer:1: fault eager-layer takes no argument",
    ("--decode-rounds", "x"): "--decode-rounds x: expected a whole number",
    ("--decode-compile-tuning", "max"): "--decode-compile-tuning max: unknown decode compile tuning",
    ("--compile-timeout-s", "-1"): "--compile-timeout-s -1: expected seconds >= 0",
    ("--models", "nosuch"): "unknown model 'nosuch'",
    ("--prompt-lengths", "0"): "--prompt-lengths 0: prompt lengths must be positive",
    ("--prompt-lengths", "99999999999999999999"): "--prompt-lengths 99999999999999999999: prompt lengths must be at "
                                                  "most 131072 tokens (the largest position limit of any preset), got "
                                                  "99999999999999999999: no model takes a prompt that long",
    ("--decode-prompt-lengths", "50,131073"): "--decode-prompt-lengths 50,131073: prompt lengths must be at most 131072",
    ("--buckets", "16," + "9" * 30): "bucket lengths must be at most 131072 tokens (the largest position limit of any "
                                      "preset), got a number of 30 digits",
    ("--shard", "3/2"): "bad shard '3/2'",
}


@pytest.mark.parametrize("option", PYTEST_OPTIONS, ids=" ".join)
def test_a_bad_plugin_option_is_one_line(pytester, option):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: ") and PYTEST_OPTIONS[option] in lines[0], lines


def test_the_new_tokens_bound_is_the_largest_position_limit_of_any_preset():
    """``--new-tokens``, prompt and bucket lengths are bounded by the most positions a preset records: every preset
    can be asked for its whole length, and no more (a model without a limit would decode a larger count for days)."""
    from cudagraph_bench.models.positions import recorded_position_limit
    from cudagraph_bench.models.presets import PRESETS, preset_config
    from cudagraph_bench.options import MAX_TOKENS, parse_buckets, parse_prompt_lengths, parse_token_counts

    assert MAX_TOKENS == max(recorded_position_limit(preset_config(name)) or 0 for name in PRESETS)
    assert parse_token_counts(f"64,{MAX_TOKENS}") == (64, MAX_TOKENS)
    assert parse_prompt_lengths(f"16,{MAX_TOKENS}") == parse_buckets(f"16,{MAX_TOKENS}") == (16, MAX_TOKENS)
