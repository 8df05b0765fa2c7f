"""``--shard K/N`` (:mod:`cudagraph_bench.plugin.sharding`): one process of a CI matrix, or one per GPU as
``cudagraph-bench run --gpus`` starts them, keeps whole test groups (a model and dtype, else a module), after
``-k`` deselects; ``--shard-durations`` balances the groups. Driven through pytester in this process."""

import json
import re

import pytest

from cudagraph_bench.results.shards import DURATIONS_KEY, assign_shards

from h200_fixture import DOC, write

MODELS = ("m1", "m2", "m3")
#: Benchmarks of three models (a group each: model and dtype) and a plain test (its module's group).
SUITE = f"""
import pytest

@pytest.mark.parametrize("model", {list(MODELS)!r})
@pytest.mark.parametrize("dtype", ["float32"])
@pytest.mark.parametrize("n", [1, 2])
def test_bench(benchmark, model, dtype, n):
    benchmark.pedantic(sum, args=(range(100),), rounds=3)

def test_plain():
    pass
"""
N_TESTS = 2 * len(MODELS) + 1


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", *args)


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def durations_run(tmp_path, seconds_by_group):
    """A run JSON whose recorded durations give each group of SUITE the seconds asked for."""
    durations = {"test_suite.py::test_plain": seconds_by_group["test_suite.py"]}
    for model in MODELS:
        for n in (1, 2):
            durations[f"test_suite.py::test_bench[{n}-float32-{model}]"] = seconds_by_group[f"{model}-float32"] / 2
    return write({**DOC, "cudagraph_bench": {DURATIONS_KEY: durations}}, tmp_path / "durations.json")


def test_shards_split_the_suite_into_whole_groups(suite, tmp_path):
    seconds = {"m1-float32": 1.0, "m2-float32": 30.0, "m3-float32": 7.0, "test_suite.py": 12.0}
    durations = durations_run(tmp_path, seconds)
    expected = assign_shards({g: [g] for g in seconds}, 2, seconds)
    got = []
    for k in (1, 2):
        out = tmp_path / f"shard-{k}.json"
        result = run(suite, f"--shard={k}/2", f"--shard-durations={durations}", f"--benchmark-json={out}")
        n = sum(2 if g != "test_suite.py" else 1 for g in expected[k - 1])
        result.assert_outcomes(passed=n)
        assert f"{N_TESTS - n} deselected" in result.stdout.str()
        section = json.loads(out.read_text())["cudagraph_bench"]
        assert section["shard"] == {"index": k, "count": 2, "groups": sorted(expected[k - 1]), "tests": n,
                                    "durations_from": str(durations)}
        got.append(set(section[DURATIONS_KEY]))
    assert not got[0] & got[1] and len(got[0] | got[1]) == N_TESTS


def test_without_durations_the_shards_are_balanced_by_test_count(suite, tmp_path):
    sizes = {**{f"{m}-float32": [f"{m}-{n}" for n in (1, 2)] for m in MODELS}, "test_suite.py": ["plain"]}
    expected = assign_shards(sizes, 2, None)
    for k in (1, 2):
        result = run(suite, f"--shard={k}/2", "--collect-only", "-q")
        n = sum(len(sizes[g]) for g in expected[k - 1])
        assert f"{n}/{N_TESTS} tests collected ({N_TESTS - n} deselected)" in result.stdout.str()


def test_a_shard_is_taken_after_k_deselects(suite):
    result = run(suite, "--shard=1/2", "-k", "m1 or m2", "--collect-only", "-q")
    # four tests of two groups remain; shard 1 of 2 keeps one group (two tests)
    assert "2/7 tests collected (5 deselected)" in result.stdout.str()


def test_a_bad_shard_is_a_usage_error(suite):
    for value in ("3/2", "0/2", "1", "a/b"):
        result = run(suite, f"--shard={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, value
        assert f"bad shard {value!r}: give K/N" in result.stderr.str()


def test_shard_durations_without_durations_is_a_usage_error(suite, tmp_path):
    result = run(suite, "--shard=1/2", f"--shard-durations={write(DOC, tmp_path / 'old.json')}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "records no test durations (cudagraph_bench.test_durations_s)" in result.stderr.str()


def test_shard_durations_of_an_interrupted_session_name_a_fix_pytest_has(suite, tmp_path):
    doc = {**DOC, "cudagraph_bench": {"interrupted": "Ctrl-C after 2 benchmarks", DURATIONS_KEY: {"t.py::a": 1.0}}}
    result = run(suite, "--shard=1/2", f"--shard-durations={write(doc, tmp_path / 'cut.json')}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert ("is the run of an interrupted session (Ctrl-C after 2 benchmarks): its last benchmark may have been cut "
            "short and the cases after it are missing: rerun the benchmarks, or give --shard-durations the run of a "
            "session that ran to its end") in err and "--allow" not in err


def test_shard_durations_of_other_tests_are_a_warning(suite, tmp_path):
    """Durations recorded under other node ids (another suite, another rootdir) would balance nothing."""
    other = write({**DOC, "cudagraph_bench": {DURATIONS_KEY: {"suites/other/test_x.py::test_y": 3.0}}},
                  tmp_path / "other.json")
    result = run(suite, "--shard=1/1", f"--shard-durations={other}", "--benchmark-disable")
    result.assert_outcomes(passed=N_TESTS)
    assert re.search(rf"--shard-durations {re.escape(str(other))} records none of the {N_TESTS} tests collected "
                     r"here \(e\.g\. test_suite\.py::", result.stdout.str())
    durations = durations_run(tmp_path, {"m1-float32": 1.0, "m2-float32": 2.0, "m3-float32": 3.0,
                                         "test_suite.py": 1.0})
    result = run(suite, "--shard=1/1", f"--shard-durations={durations}", "--benchmark-disable")
    assert "records none of the" not in result.stdout.str()


def test_a_session_of_one_test_counts_it_as_one_test(pytester, tmp_path):
    """The time per part and the warning of --shard-durations that records none of it say "1 test"."""
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    other = write({**DOC, "cudagraph_bench": {DURATIONS_KEY: {"suites/other/test_x.py::test_y": 3.0}}},
                  tmp_path / "other.json")
    text = run(pytester, "--shard=1/1", f"--shard-durations={other}").stdout.str()
    assert re.search(r"^ +[0-9.]+ s +1 test +test_one\.py$", text, re.MULTILINE), text
    assert "records none of the 1 test collected here" in text and "1 tests" not in text


def test_every_run_records_its_durations_time_per_part_and_wall_time(suite, tmp_path):
    out = tmp_path / "run.json"
    result = run(suite, f"--benchmark-json={out}")
    result.assert_outcomes(passed=N_TESTS)
    section = json.loads(out.read_text())["cudagraph_bench"]
    assert len(section[DURATIONS_KEY]) == N_TESTS and "shard" not in section
    assert list(section["time_per_part_s"]) == ["test_suite.py"] and section["wall_s"] > 0
    wall = re.search(r"session wall time ([0-9.]+) s", result.stdout.str())
    assert wall and re.search(rf"{N_TESTS} tests +test_suite\.py", result.stdout.str())
