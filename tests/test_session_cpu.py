"""The one measurement pipeline (:meth:`cudagraph_bench.plugin.Session.measure`) end to end on CPU: the suite's own
``perf_tests/test_forward_bench.py`` and ``test_decode_bench.py`` with ``--device cpu`` on a tiny
``save_pretrained`` GPT-2, run in this process. The run JSON holds each benchmark's check fields and loads with
:func:`~cudagraph_bench.results.runfile.load_run`; a check that fails is recorded in the JSON and fails its test; a
model that cannot be graphed is a skip recorded under ``cudagraph_bench.failures``."""

import json
from types import SimpleNamespace

import pytest

from cudagraph_bench.errors import NotGraphableError
from cudagraph_bench.journal import read_journal
from cudagraph_bench.results.runfile import load_run
from in_process import ROOT, run_session

MODULES = [str(ROOT / "perf_tests" / "test_forward_bench.py"), str(ROOT / "perf_tests" / "test_decode_bench.py")]
#: Two prompt lengths of eager forwards, one decode request of 4 tokens; 3 rounds each, no time floors.
MATRIX = ("--device", "cpu", "--prompt-lengths", "8,16", "--dtypes", "float32", "--decode-dtypes", "float32",
          "--decode-prompt-lengths", "8", "--new-tokens", "4", "--benchmark-min-rounds", "3", "--decode-rounds", "3",
          "--precision-pct", "0", "--benchmark-warmup-iterations", "1", "--warmup-ms", "0", "--min-time-ms", "0")
#: The module-scoped sessions are made once: all tests of this module in one pytest-xdist worker
#: (make test runs --dist loadgroup).
pytestmark = pytest.mark.xdist_group("cpu-suite-sessions")
PLANTED = "planted: this model's attention cannot be captured"


class Outcomes:
    """A plugin that keeps each test's outcome (``passed``/``failed``/``skipped``) and its report's text."""

    def __init__(self):
        self.outcome: dict[str, str] = {}
        self.text: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcome[report.nodeid.split("::")[-1]] = report.outcome
            self.text[report.nodeid.split("::")[-1]] = str(report.longrepr or "")


def run_suite(tmp_path, model_dir):
    """The two benchmark modules with :data:`MATRIX` on ``model_dir``: ``(exit code, Outcomes, run JSON path,
    journal path)``."""
    out, journal, outcomes = tmp_path / "run.json", tmp_path / "run.journal", Outcomes()
    rc = run_session([*MODULES, *MATRIX, "--models", model_dir, f"--benchmark-json={out}", f"--journal={journal}",
                      "-q"], plugins=[outcomes])
    return rc, outcomes, out, journal


def node_id(model_dir, *rest) -> str:
    return "-".join([model_dir, "float32", *map(str, rest)])


@pytest.fixture(scope="module")
def clean(tmp_path_factory, tiny_gpt2_dir):
    return run_suite(tmp_path_factory.mktemp("clean"), tiny_gpt2_dir)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory, tiny_gpt2_dir):
    """The same run with the L=16 forward build raising NotGraphableError and the decode check failing."""
    import cudagraph_bench.measure.case as case
    import cudagraph_bench.measure.correctness as correctness

    real_build = case.build_variant

    def build(model, variant, seq_len, **kw):
        if seq_len == 16:
            raise NotGraphableError(PLANTED)
        return real_build(model, variant, seq_len, **kw)

    def failing_check(*args, **kw):
        return SimpleNamespace(identical=False, passed=False, summary="token 0 differs (planted)",
                               distinct_reference_tokens=1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(case, "build_variant", build)
        patch.setattr(correctness, "check_decode_against_generate", failing_check)
        return run_suite(tmp_path_factory.mktemp("faulty"), tiny_gpt2_dir)


def infos(path) -> dict:
    return {(b["extra_info"]["suite"], b["extra_info"]["seq_len"], b["extra_info"]["variant"]): b["extra_info"]
            for b in json.loads(path.read_text())["benchmarks"]}


def test_every_cpu_variant_is_measured_with_its_check_fields(clean, tiny_gpt2_dir):
    rc, outcomes, out, _ = clean
    assert rc == 0 and set(outcomes.outcome.values()) == {"passed"} and len(outcomes.outcome) == 4
    got = infos(out)
    assert set(got) == {("forward", 8, "eager"), ("forward", 16, "eager"), ("decode", 8, "generate"),
                        ("decode", 8, "static-eager")}
    for n in (8, 16):
        eager = got[("forward", n, "eager")]
        assert eager["model"] == tiny_gpt2_dir and eager["check"] == "reference" and "correct" not in eager
        assert eager["warmup_rounds"] >= 0 and eager["pilot_ms"] and eager["median_ci95_pct"] is not None
        assert eager["gpu_state"] == {"before": None, "after": None} and "cuda_event_ms" not in eager
    generate, static = got[("decode", 8, "generate")], got[("decode", 8, "static-eager")]
    assert generate["check"] == "reference" and generate["new_tokens"] == 4
    assert static["correct"] is True and static["check"] == "tokens vs generate, fp64 rule"
    assert static["generate_check_passed"] is True and isinstance(static["matches_generate"], bool)
    assert static["generate_check"] and static["distinct_reference_tokens"] >= 1 and static["max_cache_len"] <= 64
    for info in (generate, static):
        assert info["ms_per_token"] > 0 and info["tokens_per_s"] == pytest.approx(4 / (info["ms_per_token"] * 4e-3))
        assert info["bytes_per_token"] > 0
    doc = json.loads(out.read_text())
    assert all(b["stats"]["rounds"] == 3 for b in doc["benchmarks"])
    assert doc["cudagraph_bench"]["failures"] == [] and doc["cudagraph_bench"]["graph_cases"] == 0


def test_the_run_loads_and_every_check_is_read_back(clean):
    run = load_run(str(clean[2]))
    checks = {(m.suite, m.case.variant): m.check for m in run.measurements.values()}
    assert set(checks) == {("forward", "eager"), ("decode", "generate"), ("decode", "static-eager")}
    assert checks[("forward", "eager")].status == "reference" and checks[("decode", "generate")].method == "reference"
    assert checks[("decode", "static-eager")].status == "pass"
    assert checks[("decode", "static-eager")].generate_check_passed is True
    assert list(run.failures) == [] and run.environment.gpu_slug is None


def test_the_journal_says_each_test_started_with_its_case_and_finished(clean, tiny_gpt2_dir):
    started, finished, in_flight, stop = read_journal(clean[3])
    assert len(started) == 4 and set(started) == finished and in_flight is None and stop is None
    assert started[0].endswith(f"test_forward[{node_id(tiny_gpt2_dir, 'L8', 'eager')}]")


def test_a_failed_check_is_recorded_and_fails_its_test(faulty, tiny_gpt2_dir):
    rc, outcomes, out, _ = faulty
    static = f"test_decode[{node_id(tiny_gpt2_dir, 'L8', 'new4', 'static-eager')}]"
    assert rc == pytest.ExitCode.TESTS_FAILED and outcomes.outcome[static] == "failed"
    assert "the check against generate failed (recorded in the run JSON): token 0 differs (planted)" in \
        outcomes.text[static]
    info = infos(out)[("decode", 8, "static-eager")]
    assert info["correct"] is False and info["status"] == "mismatch" and info["reason"] == "token 0 differs (planted)"
    assert info["ms_per_token"] > 0                                 # timed before it failed
    checks = {m.case.variant: m.check for m in load_run(str(out)).measurements.values() if m.suite == "decode"}
    assert checks["static-eager"].status == "fail" and checks["static-eager"].reason == "token 0 differs (planted)"
    assert checks["generate"].method == "reference"


def test_a_model_that_cannot_be_graphed_is_a_recorded_skip(faulty, tiny_gpt2_dir):
    rc, outcomes, out, _ = faulty
    skipped = f"test_forward[{node_id(tiny_gpt2_dir, 'L16', 'eager')}]"
    assert outcomes.outcome[skipped] == "skipped" and PLANTED in outcomes.text[skipped]
    assert outcomes.outcome[f"test_forward[{node_id(tiny_gpt2_dir, 'L8', 'eager')}]"] == "passed"
    assert ("forward", 16, "eager") not in infos(out)
    (failure,) = json.loads(out.read_text())["cudagraph_bench"]["failures"]
    assert failure["status"] == "skipped" and failure["phase"] == "build" and failure["seq_len"] == 16
    assert failure["reason"] == f"not graphable: NotGraphableError: {PLANTED}"
    assert failure["fullname"].endswith(skipped)
    (recorded,) = load_run(str(out)).failures
    assert recorded.status == "skipped" and recorded.case.seq_len == 16
