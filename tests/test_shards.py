"""Splitting the suite into shards (:mod:`cudagraph_bench.results.shards`): groups, greedy
longest-processing-time, recorded durations. Expectations come from brute force over every assignment
and from the committed H200 run's test names."""

import itertools
import statistics

import pytest

from cudagraph_bench.errors import InputFileError
from cudagraph_bench.results.shards import (DURATIONS_KEY, assign_shards, base_nodeid, durations_of, group_of,
                                            group_seconds, load_durations, typical_seconds)

from h200_fixture import DOC, write


@pytest.mark.parametrize("nodeid, base", [
    ("perf_tests/test_forward_bench.py::test_forward[gpt2-float32-L16-graph]@gpt2-float32",
     "perf_tests/test_forward_bench.py::test_forward[gpt2-float32-L16-graph]"),
    ("perf_tests/test_launch.py::test_clock_ordering@perf_tests/test_launch.py",
     "perf_tests/test_launch.py::test_clock_ordering"),
    ("t.py::test_x[a@b]", "t.py::test_x[a@b]"),          # an @ inside a parameter id stays
    ("dir@2/t.py::test_x", "dir@2/t.py::test_x"),        # and one in the path
    ("t.py::test_x", "t.py::test_x"),
])
def test_base_nodeid_drops_only_xdists_group_suffix(nodeid, base):
    assert base_nodeid(nodeid) == base


def test_a_test_groups_by_model_and_dtype_else_by_module():
    assert group_of({"model": "gpt2", "dtype": "float32", "seq_len": 16}, "m.py::t[x]") == "gpt2-float32"
    assert group_of({"causal_model": "tinyllama-1.1b", "dtype": "bfloat16"}, "m.py::t[x]") == "tinyllama-1.1b-bfloat16"
    assert group_of({"arch": "mistral", "dtype": "bfloat16"}, "perf_tests/test_decode.py::t[x]@g") == \
        "perf_tests/test_decode.py"
    assert group_of({}, "perf_tests/test_launch.py::test_clock_ordering") == "perf_tests/test_launch.py"


def test_a_tests_own_xdist_group_mark_names_its_group():
    """Tests that must share one process carry their own ``xdist_group`` mark: it wins over the model and
    dtype, for --shard and pytest-xdist's loadgroup alike."""
    from types import SimpleNamespace

    from cudagraph_bench.plugin.sharding import item_group

    def item(mark):
        return SimpleNamespace(nodeid="perf_tests/test_kernel_counts.py::t[gpt2-float32-L16-eager]",
                               callspec=SimpleNamespace(params={"model": "gpt2", "dtype": "float32", "seq_len": 16}),
                               get_closest_marker=lambda name: mark if name == "xdist_group" else None)

    assert item_group(item(None)) == "gpt2-float32"
    assert item_group(item(pytest.mark.xdist_group("one-process").mark)) == "one-process"
    assert item_group(item(pytest.mark.xdist_group(name="profiles").mark)) == "profiles"


def loads(shards, weights):
    return [sum(weights[g] for g in shard) for shard in shards]


@pytest.mark.parametrize("weights, n", [
    ({"a": 7.0, "b": 5.0, "c": 4.0, "d": 3.0, "e": 3.0, "f": 2.0}, 2),
    ({"a": 3.0, "b": 3.0, "c": 2.0, "d": 2.0, "e": 2.0}, 2),        # Graham's bad case for LPT on 2 machines
    ({"a": 9.0, "b": 1.0, "c": 1.0, "d": 1.0}, 3),
    ({"a": 1.0, "b": 1.0}, 3),                                       # more shards than groups: one stays empty
])
def test_assign_shards_is_within_grahams_bound_of_the_best_split(weights, n):
    groups = {g: [f"t.py::{g}[{i}]" for i in range(3)] for g in weights}
    durations = {f"t.py::{g}[{i}]": w / 3 for g, w in weights.items() for i in range(3)}
    shards = assign_shards(groups, n, durations)
    assert sorted(g for shard in shards for g in shard) == sorted(weights)   # each group once
    best = min(max(sum(weights[g] for g, s in zip(weights, pick) if s == i) for i in range(n))
               for pick in itertools.product(range(n), repeat=len(weights)))
    # LPT's makespan is at most (4/3 - 1/(3n)) of the best one (Graham 1969)
    assert max(loads(shards, weights)) <= (4 / 3 - 1 / (3 * n)) * best + 1e-9
    assert shards == assign_shards(dict(reversed(list(groups.items()))), n, durations)   # order of collection


def test_without_durations_groups_weigh_their_test_count():
    groups = {"big": [f"t.py::b[{i}]" for i in range(5)], "mid": ["t.py::m[0]", "t.py::m[1]", "t.py::m[2]"],
              "small": ["t.py::s[0]", "t.py::s[1]"]}
    assert assign_shards(groups, 2) == [["big"], ["mid", "small"]]


def test_a_test_without_a_recorded_duration_counts_the_median_one():
    durations = {"t.py::a": 1.0, "t.py::b": 2.0, "t.py::c": 10.0}
    assert typical_seconds(durations) == statistics.median(durations.values()) == 2.0
    assert typical_seconds(None) == 1.0
    assert group_seconds(["t.py::a@g", "t.py::new"], durations, typical_seconds(durations)) == 1.0 + 2.0


def h200_groups():
    """The committed H200 run's benchmarks as the plugin groups them (every one has model and dtype)."""
    groups = {}
    for b in DOC["benchmarks"]:
        groups.setdefault(group_of(b["extra_info"], b["fullname"]), []).append(b["fullname"])
    return groups


def test_the_h200_forward_matrix_splits_into_balanced_shards_of_whole_models():
    groups = h200_groups()
    durations = {b["fullname"]: b["stats"]["total"] for b in DOC["benchmarks"]}
    for n in (2, 3):
        shards = assign_shards(groups, n, durations)
        seconds = [sum(group_seconds(groups[g], durations, 0.0) for g in shard) for shard in shards]
        heaviest = max(group_seconds(ids, durations, 0.0) for ids in groups.values())
        # greedy: no shard exceeds the mean load by more than the heaviest group
        assert max(seconds) <= sum(seconds) / n + heaviest
        assert sorted(g for s in shards for g in s) == sorted(groups)


def test_durations_are_read_from_a_runs_cudagraph_bench_section(tmp_path):
    doc = {**DOC, "cudagraph_bench": {DURATIONS_KEY: {"t.py::a@g": 1.5, "t.py::b": 0}}}
    assert load_durations(str(write(doc, tmp_path / "run.json"))) == {"t.py::a": 1.5, "t.py::b": 0.0}


@pytest.mark.parametrize("section, message", [
    (None, "records no test durations"),
    ({DURATIONS_KEY: {}}, "records no test durations"),
    ({DURATIONS_KEY: {"t.py::a": -1}}, "is not seconds >= 0"),
    ({DURATIONS_KEY: {"t.py::a": "fast"}}, "is not seconds >= 0"),
])
def test_a_run_without_usable_durations_is_refused(section, message):
    with pytest.raises(InputFileError, match=message):
        durations_of({"cudagraph_bench": section} if section is not None else {}, "old.json")


def test_assign_shards_needs_a_shard():
    with pytest.raises(ValueError, match="at least one shard"):
        assign_shards({"a": ["t.py::a"]}, 0)


def test_time_per_part_adds_each_module_s_tests():
    from cudagraph_bench.results.shards import time_per_part

    durations = {"perf_tests/test_decode_bench.py::test_decode[a]": 3.0,
                 "perf_tests/test_forward_bench.py::test_forward[a]": 0.5,
                 "perf_tests/test_forward_bench.py::test_forward[b]": 0.25,
                 "tests/test_x.py::test_y": 4.0}
    parts = time_per_part(durations)
    by_module = {}
    for nodeid, s in durations.items():
        by_module.setdefault(nodeid.split("::")[0], []).append(s)
    assert {k: (v["s"], v["tests"]) for k, v in parts.items()} == {k: (sum(v), len(v)) for k, v in by_module.items()}
    assert list(parts) == sorted(by_module, key=lambda k: -sum(by_module[k]))   # longest first
    assert time_per_part({}) == {}
