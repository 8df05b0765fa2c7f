"""Kernel launches and GPU busy time of one eager forward per case (torch.profiler), for the
launch-overhead model and the forward roofline.

The profiler never runs in this process: a profiler session can leave CUPTI attached and add host cost
to every later launch (pytorch/pytorch#144455), so the counting happens in worker processes
(:func:`cudagraph_bench.measure.kernel_counts.count_in_workers`) and this file may run before, between or after
the benchmarks. The first test of the module sends every selected case to one worker (a crash or hang
fails only the case in flight); each test then records its case's count and busy time in the session
ledger, and the plugin writes them into the matching eager benchmark's extra_info["n_kernels"] and
extra_info["gpu_busy_ms"] when it writes the JSON (a merge of xdist workers or CI shards does it for the
benchmarks that another process measured: :func:`cudagraph_bench.results.record.attach_kernel_counts`).
The test takes the ``benchmark`` fixture only so that it runs under ``--benchmark-only``; it times nothing.

A plain test (skipped under ``--benchmark-only``) checks in a child process that the one-window profile of
several forwards (:func:`cudagraph_bench.measure.roofline.profile_forward`, told apart by marker kernels)
counts for each forward the kernels that a profiler window of that forward alone counts
(:func:`cudagraph_bench.measure.launch.count_kernel_launches`).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudagraph_bench.session import FORWARD_PROFILES_GROUP

# one xdist group with the busy-time tests: under --gpu-workers one worker profiles every case in one batch
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
              pytest.mark.xdist_group(FORWARD_PROFILES_GROUP)]


@pytest.fixture(scope="module")
def kernel_counts(request, cgb):
    from cudagraph_bench.session import ProfiledCases

    return ProfiledCases(request, cgb)


def test_kernel_launches_per_eager_forward(benchmark, cgb, count_case, kernel_counts):
    case = count_case
    cgb.skip_if_too_long(case.model, case.seq_len)
    got = kernel_counts.get((case.model, case.dtype, case.seq_len))
    assert got.status == "ok", f"{case.test_id}: kernels not counted ({got.phase}): {got.reason}"
    cgb.ledger.kernel_counts[got.key] = got.eager_fields()
    print(f"{case.test_id}: {got.n_kernels} kernels per eager forward, GPU busy {got.gpu_busy_ms:.4f} ms")


#: A small preset forward: gpt2 float32 on a 16-token prompt, profiled ``REPEATS`` times in one window.
_WINDOW_SCRIPT = textwrap.dedent("""
    import json, time
    from cudagraph_bench.measure.launch import count_kernel_launches
    from cudagraph_bench.measure.roofline import profile_forward
    from cudagraph_bench.models.presets import load_model, model_forward, random_input_ids
    model = load_model("gpt2", "float32", "cuda")
    ids = random_input_ids(model, 16)
    forward = lambda: model_forward(model, ids)
    separate = count_kernel_launches(forward)
    t0 = time.perf_counter()
    window = profile_forward(forward, repeats=REPEATS)
    print(json.dumps({"separate": separate, "window": window, "window_s": time.perf_counter() - t0}))
""")
REPEATS = 3


def test_one_window_profile_counts_each_forward_like_a_window_of_its_own():
    import cudagraph_bench

    env = dict(os.environ)
    src = str(Path(cudagraph_bench.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", f"REPEATS = {REPEATS}\n" + _WINDOW_SCRIPT], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\ngpt2 float32 L16: {got['separate']} kernels in a window of one forward; one window of "
          f"{REPEATS} forwards: {got['window']} (kernels, busy ms) in {got['window_s']:.3f} s")
    assert got["separate"] > 0, "the profiler saw no kernels (CUPTI unavailable?)"
    assert len(got["window"]) == REPEATS
    for n_kernels, busy_ms in got["window"]:
        assert n_kernels == got["separate"], "a forward's kernels were attributed to the wrong call, or a marker counted"
        assert busy_ms > 0
