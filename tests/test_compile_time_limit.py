"""The time limit on compiling (:func:`cudagraph_bench.capture.compiling.time_limit`, ``--compile-timeout-s``):
a body past its limit raises :class:`~cudagraph_bench.errors.CompileTimeout` naming what ran and the fix, a
timer set before (pytest-timeout's) is put back, and the two decode compile variants (the compiled decode
step and the HF static-cache + torch.compile peer) stop at it on the CPU."""

import argparse
import signal
import threading
import time

import pytest
import torch

from cudagraph_bench.capture.compiling import time_limit
from cudagraph_bench.capture.decode import GreedyDecoder
from cudagraph_bench.errors import CompileTimeout
from cudagraph_bench.measure.static_generate import StaticCompiledGenerate
from cudagraph_bench.models.presets import load_model
from cudagraph_bench.options import parse_timeout_s
from tiny_models import TINY_CAUSAL

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="SIGALRM timers do not exist here")



def _spin(seconds: float) -> None:
    """Python bytecode for ``seconds`` (the alarm is handled between bytecodes)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_body_past_its_limit_raises_naming_what_ran_and_the_fix():
    handler = signal.getsignal(signal.SIGALRM)
    start = time.monotonic()
    with pytest.raises(CompileTimeout, match=r"^compiling X did not finish within 0\.05 s; raise --opt$"):
        with time_limit(0.05, "compiling X", "raise --opt"):
            _spin(5.0)
    assert time.monotonic() - start < 4.0, "the limit did not interrupt the body"
    assert signal.getsignal(signal.SIGALRM) is handler and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.parametrize("swallow", [False, True], ids=["caught-and-dropped", "wrapped"])
def test_a_library_that_catches_the_timeout_still_ends_in_it(swallow):
    """dynamo may catch an exception raised while it traces and fall back to eager, or wrap it in its own."""
    with pytest.raises(CompileTimeout, match="did not finish within 0.05 s"):
        with time_limit(0.05, "x", "y"):
            try:
                _spin(5.0)
            except CompileTimeout as exc:
                if swallow:
                    raise RuntimeError("a library's own error") from exc
            _spin(0.01)


@pytest.mark.parametrize("seconds", [None, 0, 10.0])
def test_a_body_within_its_limit_or_without_one_runs_to_the_end(seconds):
    handler = signal.getsignal(signal.SIGALRM)
    with time_limit(seconds, "x", "y"):
        _spin(0.05)
        done = True
    assert done and signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_timer_set_before_is_put_back_with_the_time_it_had_left():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with time_limit(5.0, "x", "y"):
            _spin(0.05)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 20.0 < left < 30.0 - 0.05 and not fired
        signal.setitimer(signal.ITIMER_REAL, 0.01)   # the outer handler is the one in place again
        _spin(1.0)
        assert fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_there_is_no_limit():
    errors = []

    def body():
        try:
            with time_limit(0.01, "x", "y"):
                _spin(0.1)
        except BaseException as exc:   # noqa: BLE001 - the test reports any exception
            errors.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert errors == []


@pytest.mark.parametrize("text, expected", [("600", 600.0), ("0", 0.0), ("2.5", 2.5)])
def test_the_option_parses_seconds(text, expected):
    assert parse_timeout_s(text) == expected


@pytest.mark.parametrize("text", ["-1", "nan", "ten"])
def test_the_option_refuses_what_is_not_a_time_limit(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_timeout_s(text)


@pytest.fixture(scope="module")
def model():
    return load_model("gpt2", "float32", "cpu", overrides=TINY_CAUSAL["gpt2"])


def test_the_compiled_decode_step_stops_at_its_limit(model):
    """Tracing the step with dynamo takes far longer than a millisecond on any CPU."""
    with pytest.raises(CompileTimeout, match="compiling the decode step .default.*--compile-timeout-s"):
        GreedyDecoder(model, 32, use_graph=False, compile_mode="default", compile_backend="eager",
                      compile_timeout_s=1e-3)
    torch._dynamo.reset()


def test_the_static_compile_peer_stops_at_its_limit_and_closes(model):
    ids = torch.randint(0, 1000, (1, 6), generator=torch.Generator().manual_seed(3))
    before = dict(vars(model))
    peer = StaticCompiledGenerate(model, backend="eager")
    try:
        with pytest.raises(CompileTimeout, match="generate with a static cache.*--compile-timeout-s"):
            peer.warm(ids, 10, timeout_s=1e-3)
        assert peer.compile_ms is None
    finally:
        peer.close()
    assert vars(model).keys() == before.keys()
