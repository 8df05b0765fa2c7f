"""The session's replay proofs (``--replay-proof``), taken after the last benchmark was timed (CUPTI left attached slows
later replays, pytorch#144455): each noted case rebuilt and one call profiled; a failed proof fails the case's recorded
check and the exit status, not the ended test."""

from __future__ import annotations

from typing import Callable


class ReplayProofs:
    """``prepare`` builds a case, ``prove`` gives one profiled call's fields; ``pending``: noted ``(case, extra_info,
    nodeid)`` in timing order; ``failures``: ``(nodeid, reason)``."""

    def __init__(self, prepare: Callable, model: Callable, prove: Callable[[object], dict]):
        self._prepare, self._model, self._prove = prepare, model, prove
        self.pending: list[tuple[object, dict, str]] = []
        self.failures: list[tuple[str, str]] = []

    def note(self, case, extra_info: dict, nodeid: str) -> None:
        """``extra_info`` is the benchmark's own dict (the proof's fields go there)."""
        self.pending.append((case, extra_info, nodeid))

    def run(self, release: Callable[[], None]) -> None:
        """Take every proof, grouped by model and dtype; one that raises is that case's failure, the others go on."""
        from cudagraph_bench.measure.case import describe_exception
        from cudagraph_bench.results.replay import replay_problem

        pending, self.pending = sorted(self.pending, key=lambda p: (p[0].model, p[0].dtype)), []
        for case, info, nodeid in pending:
            prepared = None
            try:
                prepared = self._prepare(case, self._model(case.model, case.dtype))
                fields = self._prove(prepared)
            except Exception as exc:  # the case's failure, never the other proofs'
                reason = f"replay proof raised: {getattr(exc, 'reason', None) or describe_exception(exc)}"
                info["status"] = "failed"
                info["reason"] = "; ".join(r for r in (info.get("reason"), reason) if r)
                self.failures.append((nodeid, reason))
            else:
                info.update(fields)
                problem = replay_problem(fields["replay"]) if "replay" in fields else None
                if problem:
                    self.failures.append((nodeid, problem))
            finally:
                try:
                    if prepared is not None:
                        prepared.close()
                finally:
                    release()
