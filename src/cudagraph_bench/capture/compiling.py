"""torch.compile helpers: warm-up until stable, a compile time limit, dynamo's counters, no-recompile."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from typing import Callable

from cudagraph_bench.errors import CompileTimeout

#: A timing is "stable" when two consecutive warm-up calls differ by less than this factor.
STABLE_FACTOR = 1.5


def warm_until_stable(call: Callable[[], object], sync: Callable[[], None], *, min_calls: int = 2,
                      max_calls: int = 10, factor: float = STABLE_FACTOR) -> tuple[float, list[float]]:
    """Call ``call()`` then ``sync()`` until two consecutive calls are within ``factor``, ``min_calls`` to ``max_calls``
    times. Returns ``(sum(times_ms) - len(times_ms) * min(last two), times_ms)``: the compile cost and every call's
    ms."""
    times: list[float] = []
    for _ in range(max_calls):
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if len(times) >= max(min_calls, 2) and max(times[-2:]) <= factor * min(times[-2:]):
            break
    steady = min(times[-2:])
    return sum(times) - steady * len(times), times


def device_sync(device) -> Callable[[], None]:
    """A function waiting for ``device``'s queued work (``torch.cuda.synchronize``); a no-op off CUDA."""
    import torch

    device = torch.device(device)
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str, fix: str):
    """Raise CompileTimeout (``"<what> did not finish within <seconds> s; <fix>"``) once the body ran ``seconds`` s, so
    a compilation that never settles fails its case. A ``SIGALRM`` timer (an earlier one is put back); no limit for
    ``seconds`` None or <= 0, off the main thread, or without ``SIGALRM``."""
    if not seconds or seconds <= 0 or not hasattr(signal, "SIGALRM") \
            or threading.current_thread() is not threading.main_thread():
        yield
        return

    message = f"{what} did not finish within {seconds:g} s; {fix}"
    fired = []

    def on_alarm(_signum, _frame):
        fired.append(True)
        raise CompileTimeout(message)

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    except BaseException as exc:
        if fired and not isinstance(exc, CompileTimeout):     # the library wrapped it in its own error
            raise CompileTimeout(message) from exc
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay:
            signal.setitimer(signal.ITIMER_REAL, max(previous_delay - (time.monotonic() - start), 1e-3))
    if fired:       # the library caught it (e.g. dynamo falling back to eager) and the body ran on to its end
        raise CompileTimeout(message)


def compile_counters() -> dict:
    """dynamo's ``unique_graphs`` and inductor's ``cudagraph_skips`` now (compare two readings)."""
    from torch._dynamo.utils import counters

    return {"unique_graphs": int(counters["stats"]["unique_graphs"]),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def no_recompile(torch):
    """A dynamo recompile raises instead of compiling (``set_stance`` on torch >= 2.6)."""
    if hasattr(torch.compiler, "set_stance"):
        return torch.compiler.set_stance("fail_on_recompile")
    return torch._dynamo.config.patch(error_on_recompile=True)


def inductor_or_error_patch():
    """Inductor raises instead of logging "skipping cudagraphs due to ..." (no-op without the flag)."""
    import torch._inductor.config as inductor_config

    if hasattr(inductor_config.triton, "cudagraph_or_error"):
        return inductor_config.patch({"triton.cudagraph_or_error": True})
    return contextlib.nullcontext()


#: Logger that inductor's ``log_cudagraph_skip_and_bump_counter`` writes "skipping cudagraphs due to ..." to.
_CUDAGRAPH_SKIP_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"


class SkipReasons(logging.Handler):
    """A context collecting inductor's "skipping cudagraphs due to ..." messages in ``messages``."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        logging.getLogger(_CUDAGRAPH_SKIP_LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger(_CUDAGRAPH_SKIP_LOGGER).removeHandler(self)

    def text(self) -> str:
        unique = list(dict.fromkeys(m.strip() for m in self.messages if m.strip()))
        return "; ".join(unique) if unique else "reason not logged"
