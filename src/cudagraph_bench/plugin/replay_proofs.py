"""The session's replay proofs (``--replay-proof``), taken after the last benchmark of the session was timed.

A profiler session leaves CUPTI attached to the process (pytorch/pytorch#144455), and the graph replays timed after
one profiled call read slower on the device figure too, every case at once, by a share the size of the gate's
tolerances. So no proof is taken between two timings. :class:`ReplayProofs` notes each timed graph case; after the
session's last test (the ``cgb`` fixture's teardown) it builds each noted case again, the way its benchmark built it
(planted fault and check included), profiles one call
(:func:`~cudagraph_bench.measure.replay_proof.proof_fields`) and writes ``extra_info["replay"]`` into that case's
benchmark, which pytest-benchmark saves afterwards.

What it does not do: profile the very object that was timed (that one is released after its timing, as every case's
memory is; the rebuilt one runs the same build code on the same model); fail the test that timed the case (that test
has ended): a proof that shows no replay, or whose build raised, fails the case's recorded check (the gate reads it)
and the session's exit status.
"""

from __future__ import annotations

from typing import Callable


class ReplayProofs:
    """The replay proofs of one session.

    Args:
        prepare: ``prepare(case, model) -> prepared``: the session's build of a case
            (:meth:`~cudagraph_bench.plugin.session.Session._prepare`), whose result has ``close()``.
        model: ``model(name, dtype)``: the session's model cache.
        prove: ``prove(prepared) -> dict``: the ``extra_info`` fields of one profiled call
            (:func:`~cudagraph_bench.measure.replay_proof.proof_fields` on the session's device).

    Attributes:
        pending: ``(case, extra_info, nodeid)`` of each noted case, in the order timed.
        failures: ``(nodeid, reason)`` of each proof that showed no replay or raised.
    """

    def __init__(self, prepare: Callable, model: Callable, prove: Callable[[object], dict]):
        self._prepare, self._model, self._prove = prepare, model, prove
        self.pending: list[tuple[object, dict, str]] = []
        self.failures: list[tuple[str, str]] = []

    def note(self, case, extra_info: dict, nodeid: str) -> None:
        """Remember a timed case; ``extra_info`` is its benchmark's own dict (the proof's fields go there)."""
        self.pending.append((case, extra_info, nodeid))

    def run(self, release: Callable[[], None]) -> None:
        """Take every noted proof, the cases of one model and dtype together (one model in memory at a time), and
        ``release()`` after each. A build or profiled call that raises is that case's failure (its ``status``
        ``failed`` with the reason), and the others go on."""
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
