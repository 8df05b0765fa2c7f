"""A conftest (for pytester) that fakes the kernel-count worker for the whole session of each process it is
loaded in: ``hold_worker`` and ``count_in_workers`` of :mod:`cudagraph_bench.measure.kernel_counts` log each
call to the file ``$EVENTS`` (one JSON list per line) and a count takes :data:`COUNT_S` (or ``$FAKE_COUNT_S``)
seconds; CUDA is reported
available (the plugin holds a worker only where it is) but no GPU fingerprint is read."""

#: Seconds one fake count takes, unless ``$FAKE_COUNT_S`` says otherwise (a test that tells the count's
#: seconds from other tests' overhead on a loaded GPU host sets it longer than that overhead).
COUNT_S = 0.5


def fake_worker_conftest(*, event_prefix: str = "", result: str = "s['seq_len']") -> str:
    """The conftest's text. ``event_prefix``: Python expressions logged before each event (e.g. the process's
    ``CUDA_VISIBLE_DEVICES``); ``result``: the expression a case's count is, of its spec ``s``."""
    return f'''
import json, os, time
import torch
import cudagraph_bench.envinfo
import cudagraph_bench.measure.kernel_counts as kernel_counts
from cudagraph_bench.sharding import session_state

torch.cuda.is_available = lambda: True                  # the plugin holds a worker only where CUDA is
cudagraph_bench.envinfo.cuda_fingerprint = lambda: None     # but there is no GPU to read

def log(*event):
    with open(os.environ["EVENTS"], "a") as f:
        f.write(json.dumps([{event_prefix} *event]) + "\\n")

class FakeHeld:
    def __init__(self, specs):
        self.specs = specs
    def wait_prepared(self, timeout_s):
        return True
    def close(self):
        log("close")

def count_in_workers(specs, held=None):
    log("count", [s["seq_len"] for s in specs], held is not None and held.specs == specs)
    time.sleep(float(os.environ.get("FAKE_COUNT_S", {COUNT_S})))
    return {{(s["model"], s["dtype"], s["seq_len"]): {result} for s in specs}}

# patched for the whole session (this pytest process): the plugin counts between tests
kernel_counts.hold_worker = lambda specs: log("hold", [s["seq_len"] for s in specs]) or FakeHeld(specs)
kernel_counts.count_in_workers = count_in_workers

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        log("seconds per test", session_state(session.config).ran_s)
'''
