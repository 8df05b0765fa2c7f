"""Kernel launches and GPU busy time of one eager forward per case, profiled with ``torch.profiler`` in
worker processes.

The launch-overhead model (:func:`cudagraph_bench.results.launch_model.predicted_saving_ms`) needs the number of
device kernels that one eager forward launches, and the roofline (:mod:`cudagraph_bench.results.roofline`) the
time the GPU is busy with them (the sum of their durations): what a graph replay could at best come down
to. Profiling needs a profiler session, and a profiler
session can leave CUPTI attached to the process and add host cost to every later launch (on the H200
eager gpt2 at 50 tokens went from 6.1 to 7.6 ms after one profiled call; pytorch/pytorch#144455). So
the counting never happens in the process that times benchmarks: :func:`count_in_workers` sends the
cases to ``python -m cudagraph_bench.measure.kernel_counts --worker``, which speaks the worker protocol of
:mod:`cudagraph_bench.measure.isolation` (:func:`~cudagraph_bench.measure.isolation.worker_main`) and is driven by
:func:`~cudagraph_bench.measure.isolation.run_isolated`: a worker that crashes or hangs fails the case in flight
(its reason names the exit code or signal and the last stderr lines) and a fresh worker counts the rest.

A worker profiles the forwards of one case in a single profiler window that records CUDA activity only, a
marker kernel after each forward telling them apart (:func:`~cudagraph_bench.measure.roofline.profile_forward`,
:func:`~cudagraph_bench.measure.roofline.split_at_markers`): a profiler schedule that stopped and restarted
the trace for every forward and post-processed every CPU event in Python took most of the suite's
profiling time. A marker the profiler dropped fails the case (phase ``count``) with that reason.

The pytest suite records each case's fields (:meth:`KernelCount.eager_fields`: ``n_kernels``,
``gpu_busy_ms``; ``perf_tests/test_kernel_counts.py``) in the session's ledger; the plugin writes them
into the matching eager forward benchmark's ``extra_info`` and into the benchmark JSON's
``["cudagraph_bench"]["kernel_counts"]``, in whatever order the tests ran (the profiler never runs in the
timing process).

The pytest session starts its counting worker early (:func:`hold_worker`,
:meth:`cudagraph_bench.session.Session.hold_profiling_worker`): the worker prepares (:func:`prepare_case`)
while the correctness tests run, and counts, then exits, before the first timed test starts.

Only :func:`count_case` and :func:`prepare_case` (run inside the worker) import torch.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from typing import Iterable

#: Per-case limit of a counting worker in seconds (model build included; a 7B preset takes a while).
DEFAULT_COUNT_TIMEOUT_S = 300.0
#: The ``variant`` every count spec carries: the counted call is the eager forward.
COUNTED_VARIANT = "eager"

Key = tuple[str, str, int]   # (model, dtype, seq_len in tokens)


@dataclass
class KernelCount:
    """The kernel count of one case, as a worker reports it (JSON-serialisable).

    ``status``: ``ok`` (``n_kernels`` is the count, > 0; ``gpu_busy_ms`` the median over the profiled
    forwards of the summed kernel durations in ms, > 0, or None from a worker that did not time them),
    ``failed`` (not counted: ``reason`` says why, ``phase`` where: ``load``, ``count``, ``worker``,
    ``timeout``, ``protocol``) or ``skipped`` (not run, e.g. time budget exhausted).
    """

    model: str
    dtype: str
    seq_len: int
    status: str
    n_kernels: int | None = None
    reason: str | None = None
    phase: str | None = None
    variant: str = COUNTED_VARIANT
    device: str = "cuda"
    isolated: bool = False
    gpu_busy_ms: float | None = None

    @property
    def key(self) -> Key:
        return (self.model, self.dtype, self.seq_len)

    def eager_fields(self) -> dict:
        """The fields the plugin writes into the eager benchmark's ``extra_info``: ``n_kernels`` and, when
        timed, ``gpu_busy_ms``."""
        fields = {"n_kernels": self.n_kernels}
        if self.gpu_busy_ms is not None:
            fields["gpu_busy_ms"] = self.gpu_busy_ms
        return fields

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_result(cls, result: dict) -> "KernelCount":
        """Parse one result dict of :func:`~cudagraph_bench.measure.isolation.run_isolated` (a worker's
        ``result`` line, or the failure that ``run_isolated`` made up for a crashed or hung worker).

        A result that says ``ok`` without a positive integer ``n_kernels``, or with a ``gpu_busy_ms`` that
        is not a positive number, becomes ``failed`` (phase ``protocol``): a value that cannot be used is
        never recorded.

        Raises:
            KeyError: the result has no ``model``, ``dtype``, ``seq_len`` or ``status``.
        """
        base = dict(model=result["model"], dtype=result["dtype"], seq_len=int(result["seq_len"]),
                    device=result.get("device") or "cuda", isolated=bool(result.get("isolated", False)))
        status, n, busy = result["status"], result.get("n_kernels"), result.get("gpu_busy_ms")
        if status == "ok":
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                return cls(**base, status="failed", phase="protocol",
                           reason=f"the worker reported ok without a positive kernel count (n_kernels={n!r})")
            if busy is not None and (isinstance(busy, bool) or not isinstance(busy, (int, float))
                                     or not math.isfinite(busy) or busy <= 0):
                return cls(**base, status="failed", phase="protocol",
                           reason=f"the worker reported a GPU busy time that is not a positive number "
                                  f"(gpu_busy_ms={busy!r})")
            return cls(**base, status="ok", n_kernels=n, gpu_busy_ms=None if busy is None else float(busy))
        return cls(**base, status=status, reason=result.get("reason") or f"{status} without a reason",
                   phase=result.get("phase"))


def count_spec(model: str, dtype: str, seq_len: int, *, device: str = "cuda", seed: int = 0,
               overrides: dict | None = None, attn_implementation: str | None = None) -> dict:
    """The JSON spec of one case for a counting worker (a :class:`~cudagraph_bench.measure.case.CaseSpec`
    dict of the eager variant): ``seq_len`` in tokens, ``overrides`` preset config fields,
    ``attn_implementation`` the attention the model runs (None: its own)."""
    from cudagraph_bench.measure.case import CaseSpec

    return CaseSpec(model=model, dtype=dtype, seq_len=int(seq_len), variant=COUNTED_VARIANT, device=device,
                    seed=seed, overrides=overrides, attn_implementation=attn_implementation).to_dict()


def worker_command() -> list[str]:
    """The command of a real counting worker: this interpreter running ``-m cudagraph_bench.measure.kernel_counts --worker``."""
    return [sys.executable, "-m", "cudagraph_bench.measure.kernel_counts", "--worker"]


def hold_worker(specs: Iterable[dict], *, worker_cmd: list[str] | None = None):
    """A counting worker started now on ``specs`` (:func:`count_spec` dicts) and held once prepared (CUDA
    initialised, the first case's model built: :func:`prepare_case`): an
    :class:`~cudagraph_bench.measure.isolation.HeldWorker` for :func:`count_in_workers` ``(held=...)``, so that
    a worker process's start is paid while other tests run, not when the first count is asked for."""
    from cudagraph_bench.measure.isolation import HeldWorker

    return HeldWorker.start(list(specs), worker_cmd or worker_command())


def count_in_workers(specs: Iterable[dict], *, timeout_s: float = DEFAULT_COUNT_TIMEOUT_S,
                     worker_cmd: list[str] | None = None, log_path: str | None = None,
                     held=None) -> dict[Key, KernelCount]:
    """Count the kernels of each spec (:func:`count_spec`) in worker processes, never in this one.

    One worker counts the cases one after another (a model is built once for its consecutive cases);
    when it dies or sends nothing for ``timeout_s`` seconds, the case in flight becomes ``failed`` with
    the reason and a new worker takes the remaining cases (:func:`~cudagraph_bench.measure.isolation.run_isolated`).

    Args:
        specs: case dicts from :func:`count_spec`.
        timeout_s: per-case limit in seconds.
        worker_cmd: argv of the worker (default :func:`worker_command`; tests pass a fake one).
        log_path: file that collects the workers' stderr (appended); a temporary file if None.
        held: a worker from :func:`hold_worker` on the same specs, taken as the first worker (other specs:
            it is killed and a fresh worker starts).

    Returns:
        ``{(model, dtype, seq_len): KernelCount}``, one entry per spec.
    """
    from cudagraph_bench.measure.isolation import run_isolated

    specs = list(specs)
    if not specs:
        return {}
    results = run_isolated(specs, timeout_s=timeout_s, worker_cmd=worker_cmd or worker_command(),
                           log_path=log_path, held=held)
    counts = [KernelCount.from_result(r) for r in results]
    return {c.key: c for c in counts}


def device_problem(device: str) -> str | None:
    """Why kernels cannot be counted on ``device`` (the profiler counts CUDA kernels only), or None."""
    if str(device).startswith("cuda"):
        return None
    return f"kernel counts need a CUDA device (the case runs on {device}): count on a CUDA GPU"


def prepare_case(spec, models) -> None:
    """Run inside a held worker before its cases: CUDA initialised and ``spec``'s model built (the first
    model of a process also pays for loading the CUDA kernels it initialises weights with), the profiler
    imported. Raises what building the model raises (the case's own count then reports it)."""
    import torch.profiler  # noqa: F401  (imported here, not while the first case is counted)

    if problem := device_problem(spec.device):
        raise RuntimeError(problem)
    models.get(spec)


def count_case(spec, models, *, repeats: int | None = None) -> KernelCount:
    """Run inside the worker: kernels launched by one eager forward of ``spec.model`` on random
    ``input_ids [1, spec.seq_len]`` and the GPU busy time of that forward, from ``repeats`` profiled
    forwards (default :data:`~cudagraph_bench.measure.roofline.DEFAULT_BUSY_REPEATS`,
    :func:`~cudagraph_bench.measure.roofline.profile_forward`): every forward must launch the same number of
    kernels, and ``gpu_busy_ms`` is the median of their summed kernel durations.

    Never raises: a failure to build the model (phase ``load``), a case on a device other than CUDA, a
    profiler or CUDA error (``count``), no kernel seen (CUPTI unavailable), counts that differ or no busy
    time (``count``) are a ``failed`` :class:`KernelCount` with the reason.
    """
    import statistics

    from cudagraph_bench.measure.case import describe_exception

    def failed(reason: str, phase: str) -> KernelCount:
        return KernelCount(spec.model, spec.dtype, spec.seq_len, "failed", reason=reason, phase=phase,
                           device=spec.device)

    try:
        model = models.get(spec)
    except Exception as exc:
        return failed(describe_exception(exc), "load")
    problem = device_problem(spec.device)
    if problem is not None:
        return failed(problem, "count")
    try:
        import torch

        from cudagraph_bench.measure import roofline
        from cudagraph_bench.models.presets import model_forward, random_input_ids

        generator = torch.Generator(device=spec.device).manual_seed(spec.seed)
        ids = random_input_ids(model, spec.seq_len, device=spec.device, generator=generator)
        profiled = roofline.profile_forward(lambda: model_forward(model, ids),
                                            repeats=repeats or roofline.DEFAULT_BUSY_REPEATS)
    except Exception as exc:  # includes CUDA errors: the worker exits after a sticky one
        return failed(describe_exception(exc), "count")
    counts = [n for n, _ in profiled]
    if not counts or counts[0] <= 0:
        return failed("the profiler saw no kernels (CUPTI unavailable, or GPU profiling restricted to admin "
                      "users: allow it with the NVreg_RestrictProfilingToAdminUsers=0 driver option)", "count")
    if len(set(counts)) > 1:
        return failed(f"the same eager forward launched {', then '.join(map(str, counts))} kernels: the count is "
                      "not stable", "count")
    busy = statistics.median(ms for _, ms in profiled)
    if not busy > 0:
        return failed(f"the profiler recorded {counts[0]} kernels but no device time for them (busy {busy!r} ms)",
                      "count")
    return KernelCount(spec.model, spec.dtype, spec.seq_len, "ok", n_kernels=counts[0], gpu_busy_ms=busy,
                       device=spec.device)


def _main(argv: list[str] | None = None) -> int:
    import argparse

    from cudagraph_bench.measure.isolation import worker_main

    parser = argparse.ArgumentParser(
        prog="python -m cudagraph_bench.measure.kernel_counts",
        description="Kernel-counting worker of the pytest suite: reads {\"cases\": [case specs]} as JSON on "
                    "stdin, counts the kernels of one eager forward per case and the GPU time they take "
                    "with torch.profiler and writes "
                    "one JSON line per case to stdout. Exit code 0 when every case was handled (a case that "
                    "could not be counted is a failed result, not an error), 70 after a CUDA error that "
                    "broke the process.")
    parser.add_argument("--worker", action="store_true", required=True,
                        help="count the cases given as JSON on stdin; stream JSON lines to stdout")
    parser.parse_args(argv)
    return worker_main(measure=count_case, prepare=prepare_case)


if __name__ == "__main__":
    sys.exit(_main())
