"""Running the plan of a ``cudagraph-bench run`` (:func:`execute`): in-process cases of a (model, dtype)
share one model, isolated variants run in worker processes, a time budget stops starting cases, and a
failure that leaves the CUDA context unusable moves every remaining case into workers."""

from __future__ import annotations

import time
from pathlib import Path

from cudagraph_bench.measure.case import CaseResult, CaseSpec
from cudagraph_bench.measure.plan import Plan, RunSettings


def execute(plan: Plan, settings: RunSettings, *, record, worker_cmd=None, started_at: float | None = None) -> None:
    """Run every planned case, calling ``record(CaseResult)`` after each. In-process cases of a
    (model, dtype) share one model. A case that fails (a capture that fails included) is that case's
    result; when a failure leaves the process's CUDA context unusable
    (:func:`~cudagraph_bench.capture.graphed.cuda_context_usable` is False after it), every remaining case,
    of this model and the next ones, runs in worker processes (:func:`~cudagraph_bench.measure.isolation.run_isolated`),
    so one broken case never stops the run.

    ``settings.time_budget_s`` counts from ``started_at`` (a ``time.monotonic()`` value; default: now),
    so that the command's start-up (importing torch, reading the GPU) is inside the budget."""
    from cudagraph_bench.measure.case import ModelCache, measure_with_cache
    from cudagraph_bench.measure.isolation import IsolationStats, is_fatal_cuda_error, run_isolated

    t0 = time.monotonic() if started_at is None else started_at
    deadline = t0 + settings.time_budget_s if settings.time_budget_s else None
    broken = False
    log_path = str(Path(settings.outdir) / "workers.log")

    def in_workers(specs) -> None:
        if specs:
            run_isolated([s.to_dict() for s in specs], timeout_s=settings.case_timeout_s, worker_cmd=worker_cmd,
                         deadline=deadline, log_path=log_path, stats=IsolationStats(),
                         on_result=lambda i, d: record(CaseResult.from_dict(d)))

    for (model, dtype), inproc, isolated in plan.groups:
        models = ModelCache()
        pending = list(inproc)
        while pending and not broken:
            spec = pending.pop(0)
            if deadline is not None and time.monotonic() >= deadline:
                record(CaseResult.of(spec, "skipped", "time budget exhausted", "budget"))
                continue
            result = measure_with_cache(spec, models)
            record(result)
            if result.status == "failed" and is_fatal_cuda_error(result.reason) and not _context_usable(spec):
                broken = True
        models.clear()
        if broken:   # this process can no longer run CUDA work: the rest of this model in fresh workers
            in_workers(pending)
        for variant, specs in isolated.items():
            in_workers(specs)


def _context_usable(spec: CaseSpec) -> bool:
    """Whether the CUDA context survived a failed case (always True for a CPU case)."""
    if spec.device != "cuda":
        return True
    from cudagraph_bench.capture.graphed import cuda_context_usable

    return cuda_context_usable()

