"""The pull-request mode in the self-test (``cudagraph-bench selftest --ab K``): the order of its runs, its options,
and its verdicts on real H200 runs of the gated forward matrix (``results/nvidia-h200/forward-repeats/``, separate
processes of one commit) as ab-base and ab-head. The +3% runs are those head runs with the graphs' device-side
figure 3% slower and the planted fields the plugin records, as tests/test_selftest.py plants its delay runs; every
expected verdict comes from ``cudagraph-bench compare``, the comparison ``ab`` runs."""

import itertools
import re
import shutil
from pathlib import Path

import pytest

from h200_fixture import copy_doc, H200_RESULTS, committed_selftest_runs, read_json, run_bad_input, run_cli, write

pytestmark = pytest.mark.transformers_free

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "baselines" / "nvidia-h200.json"
REPEATS = H200_RESULTS / "forward-repeats"
#: forward-repeats runs as the groups (both machines on each side) and as the unmodified runs (with --baseline).
BASE, HEAD, UNMODIFIED = (1, 3, 5, 7), (2, 4, 6, 8), (2, 3)
#: The delay each planted run measured right after its capture (percent), per run: median 3.0.
MEASURED = (2.8, 3.1, 3.3, 2.9)
GROUPS = ("base", "head", "delay")


def repeat(i: int) -> dict:
    return read_json(REPEATS / f"forward-{i}.json.gz")


def planted(doc: dict, pct: float, measured: float, slower: float | None = None) -> dict:
    """``doc`` with every graph's device-side figure ``slower`` % (default ``pct``) slower and the fields a planted
    ``delay:<pct>`` records (the case's and the run's)."""
    out = copy_doc(doc)
    factor = 1 + (pct if slower is None else slower) / 100
    for bench in out["benchmarks"]:
        info = bench["extra_info"]
        if info.get("suite") == "forward" and info.get("variant") == "graph":
            info["device_median_ms"] *= factor
            info["device_ms"] = [v * factor for v in info["device_ms"]]
            info.update(planted_fault=f"delay:{pct:g}", planted_pct=pct, planted_measured_pct=measured,
                        planted_on_target=abs(measured - pct) <= 1)
    out.setdefault("cudagraph_bench", {})["planted_fault"] = f"delay:{pct:g}"
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A self-test folder with 2 unmodified runs (judged with --baseline), 4 runs of each ab group, and the committed
    +5% and always-planted fault runs."""
    out = tmp_path_factory.mktemp("selftest-ab")
    for k, i in enumerate(UNMODIFIED, 1):
        write(repeat(i), out / f"unmodified-{k}.json")
    for k, (b, h) in enumerate(zip(BASE, HEAD), 1):
        write(repeat(b), out / f"ab-base-{k}.json")
        write(repeat(h), out / f"ab-head-{k}.json")
        write(planted(repeat(h), 3.0, MEASURED[k - 1]), out / f"ab-delay-3-{k}.json")
    committed_selftest_runs(out, ("delay-5", "stale-input", "stale-mask", "eager-layer", "skip-inductor-graphs"))
    return out


def compare_statuses(capsys, old: list[Path], new: list[Path]) -> dict[str, str]:
    """``{case label: status}`` of the graph benchmarks in ``cudagraph-bench compare --old ... --new ... --baseline``'s
    table: what ``ab --baseline`` says of the same runs."""
    _, out, err = run_cli(capsys, "compare", "--old", *old, "--new", *new, "--baseline", BASELINE)
    found = {}
    for line in out.splitlines():
        m = re.match(r"forward\s+(\S+ \S+ L=\d+) graph\s.*\s(ok|REGRESSION|marginal|faster)\s*$", line)
        if m:
            found[m.group(1)] = m.group(2)
    assert len(found) == 24, out + err
    return found


def page_rows(text: str) -> dict[str, list[str]]:
    """The rows of the page's ab table: ``{case: [A/A, planted, +3%]}``."""
    section = text[text.index("## Pull-request mode (`ab`)"):]
    section = section[section.index("| case |"):]
    return {cells[0]: cells[1:] for line in section.split("\n\n")[0].splitlines()[2:]
            for cells in [[c.strip() for c in line.strip().strip("|").split("|")]]}


# the order of the runs


@pytest.mark.parametrize("k", [4, 5, 6, 8])
def test_the_three_groups_run_in_abba_order(k):
    from cudagraph_bench.runner.ab import schedule

    order = schedule(k, GROUPS)
    assert order[:6] == [("base", 1), ("head", 1), ("delay", 1), ("delay", 2), ("head", 2), ("base", 2)]
    for group in GROUPS:
        assert [i for g, i in order if g == group] == list(range(1, k + 1))
    places = {g: sum(n for n, (h, _) in enumerate(order) if h == g) / k for g in GROUPS}
    if k % 2 == 0:              # after every pair of rounds each group's mean place in the job is the same
        assert len(set(places.values())) == 1, places
    assert schedule(k) == schedule(k, ("base", "head"))          # ab's own order is unchanged


def test_the_ab_runs_are_the_delay_runs_matrix_with_and_without_the_fault():
    from cudagraph_bench.runner.matrix_processes import Matrix
    from cudagraph_bench.selftest.planned_runs import plan

    matrix = Matrix((("models", ("gpt2",)), ("dtypes", ("float32",)), ("prompt_lengths", (16, 50, 128, 512))), ())
    common = dict(runs=2, delays=(5.0,), gated_lengths=(16, 50, 128))
    without = plan(matrix, **common)
    assert plan(matrix, **common, ab_runs=0) == without
    runs = plan(matrix, **common, ab_runs=4, ab_delay=2.5)
    assert runs[:len(without)] == without and len(runs) == len(without) + 12
    ab = runs[len(without):]
    assert [r.name for r in ab[:6]] == ["ab-base-1", "ab-head-1", "ab-delay-2.5-1", "ab-delay-2.5-2", "ab-head-2",
                                        "ab-base-2"]
    delay_run = next(r for r in without if r.name == "delay-5")
    for r in ab:
        if r.name.startswith("ab-delay-"):
            assert r.fault == "delay:2.5" and r.args == (*delay_run.args[:-1], "delay:2.5")
        else:
            assert r.fault is None and r.args == delay_run.args[:-2]


def test_the_fewest_ab_runs_are_where_the_rank_test_gets_below_alpha():
    from cudagraph_bench.results.noise import DEFAULT_ALPHA, smallest_rank_p
    from cudagraph_bench.runner.ab import MIN_RANK_RUNS

    assert MIN_RANK_RUNS == next(k for k in itertools.count(1) if smallest_rank_p(k, k) < DEFAULT_ALPHA)


def test_a_stopped_ab_self_test_resumes_and_a_failed_run_does_not_stop_the_rest(tmp_path, monkeypatch):
    from cudagraph_bench.selftest import planned_runs as runner

    ran = []

    class Outcome:
        def __init__(self, path, rc=0):
            self.json_path, self.returncode = path, rc

    def fake_run(run):
        ran.append(run.json_path.stem)
        if run.json_path.stem == "ab-head-1":                    # a crash: no run written
            return Outcome(None, 1)
        run.json_path.write_text("{}")
        return Outcome(run.json_path)

    monkeypatch.setattr(runner, "run_pytest", fake_run)
    planned = runner.ab_plan(("perf_tests/test_forward_bench.py",), 4)
    (tmp_path / "ab-base-1.json").write_text("{}")
    done = runner.run_all(tmp_path, tmp_path, planned, log=lambda s: None, resume=True)
    assert ran == [r.name for r in planned][1:] and done["ab-head-1"] is None
    assert sum(p is not None for p in done.values()) == 11


# the options


@pytest.mark.parametrize("argv, says", [
    (["--ab", "2"], "--ab 2: expected 4 to 20 runs per group (ab's one-sided rank test needs 4 per side to get below "
                    "alpha 0.05): give --ab 4 or more, or 0 (off)"),
    (["--ab", "3", "--baseline", BASELINE], "--ab 3: expected 4 to 20 runs per group"),
    (["--ab", "21"], "--ab 21: expected 4 to 20 runs per group"),
    (["--ab-delay", "3"], "--ab-delay 3 is planted into the ab runs, and there are none: add --ab 4, or drop "
                          "--ab-delay"),
    (["--ab", "4", "--ab-delay", "3,5"], "argument --ab-delay: expected one percent such as 3, got '3,5'"),
    (["--ab", "4", "--ab-delay", "0"], "argument --ab-delay: a planted delay is a percent in (0, 100]"),
    (["--ab", "-1"], "argument --ab: expected a number >= 0, got -1"),
])
def test_bad_ab_options_are_one_line_before_any_run(tmp_path, capsys, monkeypatch, argv, says):
    from cudagraph_bench.selftest import planned_runs as runner

    monkeypatch.setattr(runner, "run_pytest", lambda run: pytest.fail(f"ran {run}"))
    err = run_bad_input(capsys, ["selftest", "-o", tmp_path / "new", *argv])
    assert says in err and not (tmp_path / "new").exists()


@pytest.mark.parametrize("argv, says", [
    (["--ab", "4"], "--ab 4 sets the ab runs of a new self-test, but --from evaluates the runs {f} holds (its ab-* "
                    "runs among them): drop --ab"),
    (["--ab-delay", "5"], "--ab-delay 5 sets the ab runs of a new self-test, but --from evaluates"),
])
def test_ab_options_do_not_go_with_from(folder, capsys, argv, says):
    err = run_bad_input(capsys, ["selftest", "--from", folder, "--baseline", BASELINE, *argv])
    assert says.replace("{f}", str(folder)) in err


def test_valid_ab_options_pass_to_the_gpu_check(tmp_path, capsys, monkeypatch):
    """``--ab 4 --ab-delay 2`` is accepted; without a GPU the self-test then stops at the GPU check."""
    from cudagraph_bench.runner import process

    monkeypatch.setattr(process, "cuda_problem", lambda: "no CUDA device here")
    err = run_bad_input(capsys, ["selftest", "-o", tmp_path / "new", "--ab", "4", "--ab-delay", "2"])
    assert "selftest plants faults on a CUDA GPU, but no CUDA device here" in err


# the verdicts


def test_ab_verdicts_are_compares_on_the_same_runs(folder, capsys, tmp_path):
    """A/A false alarms and +3% detection on the page and in the last line are what ``compare --baseline`` says of
    the same groups, case by case; the measured delay is the median of the delay runs'."""
    page = tmp_path / "page.md"
    rc, out, err = run_cli(capsys, "selftest", "--from", folder, "--baseline", BASELINE, "--markdown", page)
    names = sorted(folder.glob("ab-*.json"))
    aa = compare_statuses(capsys, [p for p in names if "base" in p.name], [p for p in names if "head" in p.name])
    d3 = compare_statuses(capsys, [p for p in names if "base" in p.name], [p for p in names if "delay" in p.name])
    alarms, detected = sum(s == "REGRESSION" for s in aa.values()), sum(s == "REGRESSION" for s in d3.values())
    last = out.splitlines()[-1]
    assert last.endswith(f"; ab: A/A false alarms {alarms}/24; +3% detected {detected}/24"), out + err
    assert detected > alarms                     # +3% is caught where nothing changed is not
    text = page.read_text()
    assert f"**{last}**" in text and f"**ab: A/A false alarms {alarms}/24; +3% detected {detected}/24**" in text
    rows = page_rows(text)
    assert set(rows) == set(aa)
    for case, (aa_cell, planted_cell, d3_cell) in rows.items():
        assert aa_cell.startswith("FAIL" if aa[case] == "REGRESSION" else "pass"), case
        assert d3_cell.startswith("FAIL" if d3[case] == "REGRESSION" else "pass"), case
        assert planted_cell == "+3.0%"


def test_an_ab_false_alarm_fails_the_self_test_and_a_missed_delay_does_not(folder, capsys, tmp_path):
    """One case 10% slower in every head run is an A/A false alarm (exit 1); delay runs that are not slower are
    reported as missed, and the self-test still passes."""
    rc, out, _ = run_cli(capsys, "selftest", "--from", folder, "--baseline", BASELINE)
    assert rc == 0 and "A/A false alarms 0/24" in out.splitlines()[-1], out
    slow = tmp_path / "slow"
    shutil.copytree(folder, slow)
    for path in sorted(slow.glob("ab-head-*.json")):
        doc = read_json(path)
        bench = next(b for b in doc["benchmarks"] if b["extra_info"]["variant"] == "graph")
        bench["extra_info"]["device_median_ms"] *= 1.10
        write(doc, path)
    rc, out, _ = run_cli(capsys, "selftest", "--from", slow, "--baseline", BASELINE)
    assert rc == 1 and out.splitlines()[-1].startswith("selftest FAIL") and "A/A false alarms 1/24" in out
    missed = tmp_path / "missed"
    shutil.copytree(folder, missed)
    for k, h in enumerate(HEAD, 1):
        write(planted(repeat(h), 3.0, 3.0, slower=0.0), missed / f"ab-delay-3-{k}.json")
    rc, out, _ = run_cli(capsys, "selftest", "--from", missed, "--baseline", BASELINE)
    assert rc == 0 and "+3% detected 0/24" in out.splitlines()[-1], out


def test_an_off_target_plant_is_marked(folder, capsys, tmp_path):
    off = tmp_path / "off"
    shutil.copytree(folder, off)
    write(planted(repeat(HEAD[0]), 3.0, 5.0), off / "ab-delay-3-1.json")
    page = tmp_path / "page.md"
    run_cli(capsys, "selftest", "--from", off, "--baseline", BASELINE, "--markdown", page)
    assert all(r[1] == "+3.2% (1 off target)" for r in page_rows(page.read_text()).values())   # 2.9 3.1 3.3 5.0


def test_a_self_test_without_ab_runs_says_nothing_of_ab(capsys, tmp_path, monkeypatch):
    """The committed self-test without its ab runs says nothing of ab, and points to the noise page."""
    folder = tmp_path / "selftest"
    folder.mkdir()
    for f in (H200_RESULTS / "selftest").iterdir():
        if not f.name.startswith("ab-"):
            shutil.copy(f, folder / f.name)
    page = tmp_path / "gate-selftest.md"
    monkeypatch.chdir(ROOT)
    rc, out, err = run_cli(capsys, "selftest", "--from", folder, "--baseline", "baselines/nvidia-h200.json",
                           "--markdown", page)
    text = page.read_text()
    assert "ab:" not in out and "Pull-request mode" not in text and "ab-" not in text, err
    assert "## Spread between processes" not in text and "[gate-noise.md](gate-noise.md)" in text


def test_the_ab_runs_of_a_self_test_are_found_by_their_names():
    from cudagraph_bench.selftest.verdicts import split_ab_runs

    names = ["ab-base-1", "ab-head-2", "ab-delay-3-1", "ab-delay-2.5-4", "unmodified-1", "delay-3", "ab-base",
             "ab-delay-3", "xab-base-1"]
    base, head, delays = split_ab_runs({n: n for n in names})
    assert (base, head, delays) == (["ab-base-1"], ["ab-head-2"], {2.5: ["ab-delay-2.5-4"], 3.0: ["ab-delay-3-1"]})


def test_the_self_tests_pytest_args_are_parsed_once_into_its_matrix():
    """pytest's arguments after --: the matrix options in them are parsed by their own parsers (the last of one flag wins, as in
    pytest) over the self-test's defaults; the rest passes on; a bad value is one line; no gated length is refused."""
    from cudagraph_bench.selftest.command import forward_matrix
    from cudagraph_bench.errors import UsageError
    from cudagraph_bench.options import DEFAULT_MODELS

    matrix, rest = forward_matrix(["--prompt-lengths", "512", "--dtypes", "bf16", "--benchmark-max-time", "0.3",
                                   "--prompt-lengths", "16,50", "-k", "gpt2"])
    assert matrix.value("prompt_lengths") == (16, 50) and matrix.value("dtypes") == ("bfloat16",)
    assert matrix.value("models") == tuple(DEFAULT_MODELS) and rest == ["-k", "gpt2"]
    assert matrix.value("max_time_ms") == 300.0 and "--benchmark-max-time" in matrix.pytest_args()
    for args, phrase in ((["--prompt-lengths", "16,x"], "prompt lengths must be whole numbers"),
                         (["--benchmark-max-time", "nan"], "--benchmark-max-time nan: expected a finite number"),
                         (["--benchmark-min-rounds", "0"], "--benchmark-min-rounds 0: expected a number >= 1"),
                         (["--rounds", "5"], "on pytest's command line it is pytest-benchmark's --benchmark-min-rounds"),
                         (["tests"], "pytest's arguments after -- start with an option"),
                         (["--variants", "eager"], "--variants: each run of the self-test chooses its variants: leave it out"),
                         (["--replay-proof"], "--replay-proof: the runs that need the replay proof take it"),
                         (["--plant-fault=stale-input"], "--plant-fault: the self-test plants its faults itself"),
                         (["--device", "cpu"], "the self-test measures graphs on the GPU")):
        with pytest.raises(UsageError, match=re.escape(phrase)) as refused:
            forward_matrix(args)
        assert "\n" not in str(refused.value) and str(refused.value).startswith("selftest --")
