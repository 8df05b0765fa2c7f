"""The ``cgb`` session fixture: :class:`Session` ties the session's parts to one measurement pipeline of a case,
:meth:`Session.measure` (docs/measurement.md, "Isolation policy")."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import pytest

from cudagraph_bench.cases import Case, DecodeCase
from cudagraph_bench.errors import NotGraphableError, RequestTooLongError
from cudagraph_bench.models.positions import position_bound, prompt_does_not_fit
from cudagraph_bench.models.presets import random_input_ids
from cudagraph_bench.plugin.benchmark_timing import benchmark_call, round_policy
from cudagraph_bench.plugin.memory import MemoryLedger, release, reserved_mib
from cudagraph_bench.plugin.models import ModelCache, PaddingGraphs
from cudagraph_bench.plugin.profiles import Profiles
from cudagraph_bench.plugin.pytest_options import MIN_DECODE_ROUNDS
from cudagraph_bench.plugin.references import DecodeReferences
from cudagraph_bench.variants import FORWARD, gated


@dataclass
class SessionRecords:
    """What a session records besides benchmarks. ``failures``: per unmeasured case; ``kernel_counts``: key ->
    ``n_kernels``, ``gpu_busy_ms``."""

    failures: list[dict] = field(default_factory=list)
    kernel_counts: dict[tuple[str, str, int], dict] = field(default_factory=dict)

    def fail(self, fullname: str, key: dict, reason: str, *, status: str = "failed", **details) -> None:
        """List an unmeasured case with its one-line ``reason``, ``status`` (``failed``/``skipped``), ``key``,
        ``fullname`` and ``details``."""
        self.failures.append({**key, "status": status, "reason": reason, "fullname": fullname, **details})

    def summary(self) -> dict:
        """The fields of the run JSON's ``cudagraph_bench`` section."""
        return {"kernel_counts": [{"model": m, "dtype": d, "seq_len": n, **fields}
                                  for (m, d, n), fields in sorted(self.kernel_counts.items())],
                "failures": list(self.failures)}

    def __bool__(self) -> bool:
        return bool(self.failures or self.kernel_counts)


class ReplayProofs:
    """The session's replay proofs (``--replay-proof``), taken after the last benchmark was timed (CUPTI left attached
    slows later replays, pytorch#144455); a failed proof fails the case's recorded check and the exit status, not the
    ended test. ``prepare`` builds a case, ``prove`` gives one profiled call's fields; ``pending``: noted ``(case,
    extra_info, nodeid)`` in timing order; ``failures``: ``(nodeid, reason)``."""

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


class Session:
    """The ``cgb`` fixture: ``config``, ``device`` (``"cuda"`` or ``"cpu"``), and the session's parts (``proofs`` None
    without ``--replay-proof``)."""

    def __init__(self, config):
        self.config = config
        self.device = config.getoption("device", "cuda")
        self.padding = PaddingGraphs(release)
        self.models = ModelCache(self.device, padding=self.padding,
                                 attn_implementation=config.getoption("attn_implementation", None))
        self.references = DecodeReferences(self.model, self.position_limit)
        self.profiles = Profiles(self.model)
        self.records = SessionRecords()
        self.ledger = MemoryLedger(start_mib=reserved_mib())
        self.proofs = None
        if config.getoption("replay_proof", False):
            from cudagraph_bench.measure.replay_proof import proof_fields

            self.proofs = ReplayProofs(self._prepare, self.model, partial(proof_fields, device=self.device,
                                                                          enabled=True))

    def option(self, name: str):
        return self.config.getoption(name)

    def model(self, name: str, dtype: str):
        """Built once per session."""
        return self.models.get(name, dtype)

    def position_limit(self, name: str) -> int:
        """Bounded by ``--max-positions`` or the longest request where the config records none."""
        opt = self.option
        return self.models.position_limit(name, bound=lambda: position_bound(
            opt("max_positions"), opt("prompt_lengths"), opt("decode_prompt_lengths"), opt("new_tokens")))

    def skip_if_too_long(self, name: str, seq_len: int) -> None:
        limit = self.position_limit(name)
        if seq_len > limit:
            pytest.skip(prompt_does_not_fit(name, limit, seq_len))

    def inputs(self, model, seq_len: int, n: int, seed: int = 0) -> list:
        """``n`` random ``input_ids [1, seq_len]`` int64 on the session's device (fixed seed)."""
        import torch

        device = next(model.parameters()).device
        gen = torch.Generator(device=device).manual_seed(seed)
        return [random_input_ids(model, seq_len, device=device, generator=gen) for _ in range(n)]

    release = staticmethod(release)

    def case_spec(self, case: Case):
        """The :class:`~cudagraph_bench.measure.case.CaseSpec` of a forward case from the session's options."""
        from cudagraph_bench.measure.case import CaseSpec

        return CaseSpec.from_options(self.option, model=case.model, dtype=case.dtype, seq_len=case.seq_len,
                                     variant=case.variant)

    def decode_spec(self, case: DecodeCase):
        """The :class:`~cudagraph_bench.measure.decode_case.DecodeSpec` of a decode case from the options."""
        from cudagraph_bench.measure.decode_case import DecodeSpec

        opt = self.option
        return DecodeSpec(case.model, case.dtype, case.seq_len, case.new_tokens, case.variant,
                          longest_new_tokens=max(opt("new_tokens")), steps_per_graph=opt("decode_steps_per_graph"),
                          compile_mode=opt("compile_mode"), compile_timeout_s=opt("compile_timeout_s"),
                          compile_tuning=opt("decode_compile_tuning"), buckets=tuple(opt("buckets")),
                          rounds=min(MIN_DECODE_ROUNDS, opt("decode_rounds")), max_rounds=opt("decode_rounds"))

    def _prepare(self, case, model):
        from cudagraph_bench.measure.case import CaseFailed, describe_exception, prepare_case
        from cudagraph_bench.measure.decode_case import DECODE_PROMPT_SEED, prepare_decode
        from cudagraph_bench.selftest.faults import plant_decode, plant_forward

        fault = self.option("plant_fault")
        if fault is not None and not fault.applies_to(case.suite, case.variant):
            fault = None
        decode = isinstance(case, DecodeCase)
        if decode:
            (ids,) = self.inputs(model, case.seq_len, n=1, seed=DECODE_PROMPT_SEED)
            plant = plant_decode(fault, model) if fault is not None else None
        else:
            spec = self.case_spec(case)
        try:
            if decode:
                return prepare_decode(self.decode_spec(case), model, ids, self.references, plant=plant)
            built = plant_forward(fault, model, spec) if fault is not None else None
        except CaseFailed:
            raise
        except Exception as exc:  # the case's failure, with the phase it happened in
            raise CaseFailed("build", describe_exception(exc), exc) from exc
        return prepare_case(spec, model, variant=built or self.padding.variant_for(spec, model))

    def measure(self, benchmark, case: Case | DecodeCase, request) -> None:
        """One benchmark of a forward or decode case: build, check, time, record, release. Too long a request or an
        ungraphable model is a skip; a raising phase fails this test only (a peer's: xfail); a failed check is timed and
        recorded, then fails the test."""
        from cudagraph_bench.measure.case import CaseFailed, describe_exception

        kind = case.variant_spec
        nodeid = request.node.nodeid
        self.skip_if_too_long(case.model, case.seq_len + getattr(case, "new_tokens", 0))
        prepared, info = None, case.extra_info()
        try:
            try:
                model = self.model(case.model, case.dtype)
            except Exception as exc:
                raise CaseFailed("load", describe_exception(exc), exc) from exc
            before = reserved_mib()
            prepared = self._prepare(case, model)
            info.update(prepared.info)
            benchmark_call(benchmark, prepared.call, group=case.group, extra_info=info,
                           policy=round_policy(self.option, **(prepared.round_limits or {})), device=self.device,
                           warm=prepared.warm, checked_call_ms=prepared.checked_call_ms,
                           device_figure=isinstance(case, Case) and kind in gated(FORWARD))
            notes = prepared.finish()
            if notes:
                benchmark.extra_info["notes"] = notes
            if getattr(prepared, "cudagraph_skips", None):
                benchmark.extra_info["cudagraph_skips"] = prepared.cudagraph_skips
            if self.proofs is not None and kind.captured and str(self.device).startswith("cuda"):
                self.proofs.note(case, benchmark.extra_info, nodeid)
        except Exception as exc:
            failed = exc if isinstance(exc, CaseFailed) else CaseFailed("timing", describe_exception(exc), exc)
            phase, reason = failed.phase, failed.reason
            info.update(failed.info)          # what the case recorded before it failed (its attention, ...)
            if isinstance(failed.cause, (NotGraphableError, RequestTooLongError)):
                if isinstance(failed.cause, NotGraphableError):
                    self.records.fail(nodeid, info, f"not graphable: {reason}", status="skipped", phase=phase)
                pytest.skip(f"{case.label}: {reason}")
            self.records.fail(nodeid, info, reason, phase=phase,
                              **({"compile_ms": info["compile_ms"]} if info.get("compile_ms") else {}))
            if kind.peer:
                pytest.xfail(f"{case.variant} failed (recorded in the run JSON): {reason}")
            raise pytest.fail.Exception(f"{case.test_id}: {phase} failed: {reason}", pytrace=False) from None
        finally:
            if prepared is not None:
                prepared.close()
            self.release()
        if kind.captured and not kind.lengths:   # the padded graphs are held for the next prompt length
            self.ledger.record(case.test_id, before, reserved_mib())
        if isinstance(case, DecodeCase):
            median_ms = benchmark.stats.stats.median * 1e3
            benchmark.extra_info.update(ms_per_token=median_ms / case.new_tokens,
                                        tokens_per_s=case.new_tokens / (median_ms / 1e3))
        failed = prepared.failed_check
        if failed is not None:
            if kind.peer:
                pytest.xfail(f"{case.variant} differs from its reference (recorded in the run JSON): {failed}")
            pytest.fail(f"{case.test_id}: the check against {kind.reference} failed (recorded in the run JSON): "
                        f"{failed}", pytrace=False)

    def close(self) -> None:
        self.padding.drop()
        self.models.clear()
        release(everything=True)
        self.ledger.end_mib = reserved_mib()


@pytest.fixture(scope="session")
def cgb(request):
    """The session's :class:`Session` (kept on the config for the output hooks)."""
    session = Session(request.config)
    request.config.stash[SESSION] = session
    yield session
    try:
        if session.proofs is not None:
            session.proofs.run(session.release)
    finally:
        session.close()


SESSION = pytest.StashKey[Session]()


def session_of(config) -> Session | None:
    """None when no test used it."""
    return config.stash.get(SESSION, None)
