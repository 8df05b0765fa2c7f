"""The session's journal for the launcher (``--journal FILE``, :mod:`cudagraph_bench.plugin.session_journal`, read by
:func:`cudagraph_bench.journal.read_journal`) and the stop after a test broke the CUDA context (exit code
:data:`~cudagraph_bench.journal.EXIT_CUDA_BROKEN`), through pytester in this process."""

import json

import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.journal import EXIT_CUDA_BROKEN, is_fatal_cuda_error, read_journal

SUITE = """
def test_forward(benchmark, fwd_case):
    benchmark.extra_info.update(fwd_case.extra_info())
    benchmark.pedantic(sum, args=(range(10),), rounds=2)

def test_plain():
    pass
"""
STICKY = "RuntimeError: CUDA error: an illegal memory access was encountered"
#: A benchmark, a test that fails with a sticky CUDA error, and one after it.
BROKEN = f"""
MESSAGE = {STICKY.split(": ", 1)[1]!r}

def test_a(benchmark):
    benchmark.pedantic(sum, args=(range(10),), rounds=2)

def test_b_breaks_the_context():
    raise RuntimeError(MESSAGE)

def test_c_after():
    pass
"""
#: cuda_context_usable() answers USABLE during the session it is loaded in, and only then: this test process's own
#: session (the plugin's journal hooks run there too) never sees the stand-in.
CONTEXT_CONFTEST = """
import cudagraph_bench.capture.graphed as graphed

real = graphed.cuda_context_usable

def pytest_configure(config):
    graphed.cuda_context_usable = lambda: USABLE

def pytest_unconfigure(config):
    graphed.cuda_context_usable = real
"""


def run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "cudagraph_bench.plugin", "-p", "no:cacheprovider", *args)


def test_the_journal_has_a_line_per_test_started_and_finished_with_the_case_of_a_benchmark(pytester, tmp_path):
    pytester.makepyfile(test_suite=SUITE)
    journal = tmp_path / "run.journal"
    run(pytester, "--models", "gpt2", "--prompt-lengths", "8,16", "--variants", "eager", "--dtypes", "fp32",
        "--device", "cpu", f"--journal={journal}", "--benchmark-max-time=0.001").assert_outcomes(passed=3)
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    forward = [f"test_suite.py::test_forward[gpt2-float32-L{n}-eager]" for n in (8, 16)]
    assert [e.get("start") or e.get("finish") for e in events] == \
        [forward[0], forward[0], forward[1], forward[1], "test_suite.py::test_plain", "test_suite.py::test_plain"]
    assert [e["case"] for e in events if "case" in e] == [Case("gpt2", "float32", n, "eager").extra_info()
                                                         for n in (8, 16)]
    started, finished, in_flight, stop = read_journal(journal)
    assert started == [*forward, "test_suite.py::test_plain"] and finished == set(started)
    assert in_flight is None and stop is None


def test_read_journal_names_the_test_a_crash_was_in_and_ignores_a_cut_off_line(tmp_path):
    journal = tmp_path / "run.journal"
    case = Case("gpt2", "float32", 16, "graph").extra_info()
    journal.write_text("\n".join([json.dumps({"start": "t.py::a"}), json.dumps({"finish": "t.py::a"}),
                                  json.dumps({"start": "t.py::b", "case": case}), '{"finish": "t.py::']))
    started, finished, in_flight, stop = read_journal(journal)
    assert started == ["t.py::a", "t.py::b"] and finished == {"t.py::a"} and stop is None
    assert in_flight == {"start": "t.py::b", "case": case}
    assert read_journal(tmp_path / "missing.journal") == ([], set(), None, None)


@pytest.mark.parametrize("usable", [False, True])
def test_a_test_that_breaks_the_cuda_context_stops_the_session_with_exit_70(pytester, tmp_path, usable):
    """With the context unusable after the sticky error: the session stops after that test (the next one does not
    run), the benchmarks so far are still written, and the journal says which test and why. With the context
    still usable (a failure the process recovered from), the session goes on."""
    pytester.makeconftest(CONTEXT_CONFTEST.replace("USABLE", str(usable)))
    pytester.makepyfile(test_broken=BROKEN)
    journal, out = tmp_path / "run.journal", tmp_path / "run.json"
    result = run(pytester, f"--journal={journal}", f"--benchmark-json={out}", "--benchmark-max-time=0.001")
    started, _, _, stop = read_journal(journal)
    if usable:
        result.assert_outcomes(passed=2, failed=1)
        assert stop is None and started[-1] == "test_broken.py::test_c_after"
        return
    assert result.ret == EXIT_CUDA_BROKEN
    result.assert_outcomes(passed=1, failed=1)
    assert started == ["test_broken.py::test_a", "test_broken.py::test_b_breaks_the_context"]
    assert stop.endswith(STICKY)                                      # the error line of the report
    assert "test_broken.py::test_b_breaks_the_context broke the CUDA context" in result.stdout.str()
    assert [b["name"] for b in json.loads(out.read_text())["benchmarks"]] == ["test_a"]


def test_is_fatal_cuda_error_recognises_sticky_errors():
    assert is_fatal_cuda_error("RuntimeError: CUDA error: device-side assert triggered")
    assert is_fatal_cuda_error("AcceleratorError: an illegal memory access was encountered")
    assert not is_fatal_cuda_error("AssertionError: Tensor-likes are not close!")
    assert not is_fatal_cuda_error(None)
