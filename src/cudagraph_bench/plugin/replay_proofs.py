"""The session's replay proofs (``--replay-proof``), taken after its last benchmark was timed: CUPTI left attached
by a profiler (pytorch/pytorch#144455) slows every replay timed after it by a share the size of the gate's
tolerances. Each noted case is built again as its benchmark built it and one call profiled
(:func:`~cudagraph_bench.measure.replay_proof.proof_fields`); a failed proof fails the case's recorded check and
the session's exit status, not the test, which has ended."""

from __future__ import annotations

from typing import Callable


class ReplayProofs:
    """The replay proofs of one session: ``prepare(case, model) -> prepared`` (with ``close()``) builds a case,
    ``model(name, dtype)`` is the session's model cache, ``prove(prepared) -> dict`` the ``extra_info`` fields of one
    profiled call. ``pending``: ``(case, extra_info, nodeid)`` of each noted case, in the order timed;
    ``failures``: ``(nodeid, reason)`` of each proof that showed no replay or raised."""

    def __init__(self, prepare: Callable, model: Callable, prove: Callable[[object], dict]):
        self._prepare, self._model, self._prove = prepare, model, prove
        self.pending: list[tuple[object, dict, str]] = []
        self.failures: list[tuple[str, str]] = []

    def note(self, case, extra_info: dict, nodeid: str) -> None:
        """Remember a timed case; ``extra_info`` is its benchmark's own dict (the proof's fields go there)."""
        self.pending.append((case, extra_info, nodeid))

    def run(self, release: Callable[[], None]) -> None:
        """Take every noted proof, grouped by model and dtype, ``release()`` after each; one that raises is that
        case's failure (``status`` ``failed`` with the reason), and the others go on."""
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
