"""The ``cgb`` session of the pytest plugin (:mod:`cudagraph_bench.plugin`, which creates it) and the
benchmark timing its tests share.

- :class:`Session`: options, a model cache (one build per model and dtype, the least recently used dropped
  when the cached weights pass :data:`MODEL_CACHE_SHARE` of the GPU's memory), random inputs, the HF
  ``generate`` and float64 references of the decode checks (computed once), the forward measurement through
  the one pipeline of :mod:`cudagraph_bench.measure.case` (:meth:`Session.measure_forward`), and the cases a
  benchmark could not measure (:meth:`Session.record_failure`);
- :class:`MemoryLedger`: reserved GPU memory around each graph case, the eager kernel counts and busy
  times, the failures; the plugin writes its summary into the run JSON under ``"cudagraph_bench"``;
- :func:`benchmark_call`: ``benchmark.pedantic`` over the round policy (:func:`round_policy`), with the
  CUDA-event times, the timing's precision and the GPU state recorded in ``extra_info``;
- :class:`ProfiledCases`: kernel counts and GPU busy times of a test module's cases, profiled in workers;
- :func:`generate_reference`, :func:`decode_cache_len`: the decode benchmarks' reference and cache length.
"""

from __future__ import annotations

import pytest

from cudagraph_bench.cases import Case

#: Fewest measured requests of a decode benchmark (``--decode-rounds`` is the most; the precision target
#: decides in between).
MIN_DECODE_ROUNDS = 3
#: Largest share of GPU memory that the session's cached models may hold before the oldest is dropped.
MODEL_CACHE_SHARE = 0.3
#: Seed of the decode benchmarks' prompt (:meth:`Session.inputs`): the decode correctness tests draw theirs with it
#: too, so a test and a benchmark of one model, dtype and prompt length share one ``generate`` reference.
DECODE_PROMPT_SEED = 11
#: Static KV cache of the decode benchmarks: at least this many tokens (a multiple of it).
DECODE_CACHE_STEP = 256


class MemoryLedger:
    """Reserved GPU memory at the start and end of the session and around each graph case; also what the
    session's JSON lists besides the benchmarks: kernel counts, and the cases that failed
    (``failures``, :meth:`Session.record_failure`)."""

    def __init__(self):
        self.start_mib = None
        self.end_mib = None
        self.cases: list[tuple[str, float, float]] = []   # (case id, reserved before, after release) MiB
        # (model, dtype, seq_len) -> fields of its eager forward benchmark (n_kernels, gpu_busy_ms)
        self.kernel_counts: dict[tuple[str, str, int], dict] = {}
        self.failures: list[dict] = []

    @staticmethod
    def reserved_mib() -> float:
        import torch

        return torch.cuda.memory_reserved() / 2**20

    def record(self, case_id: str, before_mib: float, after_mib: float) -> None:
        self.cases.append((case_id, before_mib, after_mib))

    def summary(self) -> dict:
        growth = [after - before for _, before, after in self.cases]
        return {"memory_reserved_start_mib": self.start_mib,
                "memory_reserved_end_mib": self.end_mib if self.end_mib is not None else self.start_mib,
                "graph_cases": len(self.cases),
                "max_case_growth_mib": max(growth, default=0.0),
                # the first graph case creates the one reused warmup side stream (and its cuBLAS
                # workspace): growth after it is what a leak per case would show
                "max_case_growth_after_first_mib": max(growth[1:], default=0.0),
                "kernel_counts": [{"model": m, "dtype": d, "seq_len": n, **fields}
                                  for (m, d, n), fields in sorted(self.kernel_counts.items())],
                "cases": [{"case": c, "reserved_before_mib": b, "reserved_after_mib": a} for c, b, a in self.cases],
                "failures": list(self.failures)}


class Session:
    """The ``cgb`` fixture: options, a model cache (one build per model and dtype), inputs, memory ledger."""

    def __init__(self, config):
        self.config = config
        self._models = {}
        self._generated = {}
        self._fp64_logits = {}
        self._static_eager = {}
        #: ``(model, dtype, variant, lengths)`` -> the padded / bucketed graphs its cases replay
        #: (:meth:`_padding_variant`)
        self._padding = {}
        #: ``(model, dtype, seq_len)`` -> its kernel count and busy time, profiled once per session
        #: (:class:`ProfiledCases` of every module share it).
        self.profiled: dict = {}
        #: the counting worker started ahead of the first profile (:meth:`hold_profiling_worker`), until taken
        self._held_profiler = None
        self._held_for = None          # the node id of the first test that reads its counts
        #: whether the plugin has decided on holding one (once per session)
        self.hold_tried = False
        self.ledger = MemoryLedger()
        config._cgb_ledger = self.ledger
        self.ledger.start_mib = self.ledger.reserved_mib()

    def option(self, name: str):
        return self.config.getoption(name)

    def position_limit(self, model_name: str) -> int:
        """The model's position limit (tokens), read from its config without building the model; a model whose
        config records none (ALiBi, NoPE) is bounded by ``--max-positions``, else by the longest request
        (:func:`cudagraph_bench.models.positions.model_position_limit`, the function ``cudagraph-bench run`` uses)."""
        from cudagraph_bench.models.positions import model_position_limit, position_bound, recorded_position_limit

        built = next((m for (name, _), m in self._models.items() if name == model_name), None)
        if built is not None and recorded_position_limit(built.config) is not None:
            return recorded_position_limit(built.config)      # the limit of its config, without reading it again
        opt = self.option
        return model_position_limit(model_name, bound=lambda: position_bound(
            opt("max_positions"), opt("prompt_lengths"), opt("decode_prompt_lengths"), opt("new_tokens")))

    def skip_if_too_long(self, model_name: str, seq_len: int) -> None:
        limit = self.position_limit(model_name)
        if seq_len > limit:
            pytest.skip(f"{model_name} has {limit} positions: a {seq_len}-token prompt does not fit")

    def model(self, name: str, dtype: str):
        """The model ``name`` in ``dtype`` on cuda:0, built once per session."""
        from cudagraph_bench.models.presets import load_model

        key = (name, dtype)
        if key not in self._models:
            self._evict_for(name)
            self._models[key] = load_model(name, dtype, "cuda", attn_implementation=self.option("attn_implementation"))
        self._models[key] = self._models.pop(key)   # most recently used last
        return self._models[key]

    def _evict_for(self, name: str, share: float = MODEL_CACHE_SHARE) -> None:
        """Drop the least recently used models (never ``name``'s other dtypes first) while the cached
        weights take more than ``share`` of the GPU's memory, so that large presets (7B in float32 is
        29 GB) fit one after another in one session."""
        import torch

        total = torch.cuda.get_device_properties(0).total_memory

        def cached_bytes():
            return sum(p.numel() * p.element_size() for m in self._models.values() for p in m.parameters())

        while self._models and cached_bytes() > share * total:
            victim = next((k for k in self._models if k[0] != name), next(iter(self._models)))
            if any(k[:2] == victim for k in self._padding):
                self.drop_padding_graphs()
            del self._models[victim]
            self.release(everything=True)

    def generate_tokens(self, model_name: str, dtype: str, input_ids, new_tokens: int, *, share_up_to: int = 0):
        """HF ``generate(do_sample=False)`` after ``input_ids`` ``[1, L]``: its tokens ``[1, new_tokens]`` int64
        and per-step logits (``new_tokens`` tensors ``[1, vocab]``): the reference of the decode checks.

        One greedy request per (model, dtype, prompt), of ``new_tokens`` or, when more, of ``share_up_to`` new
        tokens as far as the model's positions allow (e.g. the most of ``--new-tokens``): a request for fewer
        tokens is its prefix (greedy steps do not depend on how many follow), so the 64- and 128-token
        benchmarks of a prompt share one reference."""
        key = (model_name, dtype, tuple(input_ids.flatten().tolist()))
        room = self.position_limit(model_name) - input_ids.shape[1]     # new tokens that fit the positions
        longest = max(new_tokens, min(share_up_to, room))
        if key not in self._generated or self._generated[key][0].shape[1] < new_tokens:
            self._generated[key] = generate_reference(self.model(model_name, dtype), input_ids, longest)
        tokens, logits = self._generated[key]
        return tokens[:, :new_tokens], logits[:new_tokens]

    def static_eager_decode(self, model_name: str, dtype: str, input_ids, new_tokens: int, max_cache_len: int,
                            decoder=None):
        """Tokens ``[1, new_tokens]`` int64 and per-step logits (``new_tokens`` tensors ``[1, vocab]``) of the
        eager static-cache loop (:class:`~cudagraph_bench.capture.decode.GreedyDecoder` without graphs, cache of
        ``max_cache_len`` tokens) after ``input_ids`` ``[1, L]``, computed once per (model, dtype, prompt, new
        tokens, cache length): by ``decoder`` (such an eager decoder) when given, else by a fresh one. The
        reference of the graphed decoders' exact check, and the static-eager benchmark's own checked request."""
        from cudagraph_bench.capture.decode import GreedyDecoder

        key = (model_name, dtype, tuple(input_ids.flatten().tolist()), new_tokens, max_cache_len)
        if key not in self._static_eager:
            own = decoder is None
            decoder = decoder or GreedyDecoder(self.model(model_name, dtype), max_cache_len, use_graph=False)
            try:
                self._static_eager[key] = decoder.generate(input_ids, new_tokens, return_logits=True)
            finally:
                if own:
                    decoder.close()
        return self._static_eager[key]

    def fp64_decode_logits(self, model_name: str, dtype: str, input_ids, tokens):
        """:func:`~cudagraph_bench.measure.correctness.fp64_decode_logits` of the session's model: ``[n, vocab]``
        float64 on the CPU for the greedy steps of ``tokens`` ``[1, n]`` after ``input_ids`` ``[1, L]``,
        computed once per (model, dtype, prompt, tokens). Row ``s`` depends only on the prompt and
        ``tokens[:, :s]`` (a causal model), so tokens that begin the session's longer ``generate`` reference
        of this prompt (:meth:`generate_tokens`: the 64-token benchmark's begin the 128-token one's) are
        answered from that whole reference's logits, computed once."""
        from cudagraph_bench.measure.correctness import fp64_decode_logits

        prompt = tuple(input_ids.flatten().tolist())
        n = tokens.shape[1]
        generated = self._generated.get((model_name, dtype, prompt))
        if generated is not None and generated[0].shape[1] > n and generated[0][0, :n].tolist() == tokens[0].tolist():
            tokens = generated[0]          # the start of the whole reference: its logits, sliced
        key = (model_name, dtype, prompt, tuple(tokens.flatten().tolist()))
        if key not in self._fp64_logits:
            self._fp64_logits[key] = fp64_decode_logits(self.model(model_name, dtype), input_ids, tokens)
        return self._fp64_logits[key][:n]

    def inputs(self, model, seq_len: int, n: int, seed: int = 0) -> list:
        """``n`` fresh random ``input_ids [1, seq_len]`` int64 on the GPU (fixed seed)."""
        import torch

        from cudagraph_bench.models.presets import random_input_ids

        gen = torch.Generator(device="cuda").manual_seed(seed)
        return [random_input_ids(model, seq_len, device="cuda", generator=gen) for _ in range(n)]

    def case_spec(self, case: Case):
        """The :class:`~cudagraph_bench.measure.case.CaseSpec` of a forward case from the session's options
        (rounds policy, check inputs, ``--pad-to``, ``--buckets``, ``--check-data-ptrs``), the same spec
        ``cudagraph-bench run`` builds from the same options."""
        from cudagraph_bench.measure.case import CaseSpec

        return CaseSpec.from_options(self.option, model=case.model, dtype=case.dtype, seq_len=case.seq_len,
                                     variant=case.variant, check_data_ptrs=self.option("check_data_ptrs"))

    def measure_forward(self, benchmark, case: Case) -> None:
        """A forward benchmark (eager, graph, padded, bucketed, compile, compile+graph) through the one
        pipeline of :mod:`cudagraph_bench.measure.case`: :func:`~cudagraph_bench.measure.case.prepare_case`
        (build, check against eager, timing inputs), :func:`benchmark_call` (pytest-benchmark's pedantic
        over the round policy), :meth:`~cudagraph_bench.measure.case.PreparedCase.finish`, close.
        ``padded`` / ``bucketed`` replay the graphs the session captured for the model and dtype at its first
        prompt length (:meth:`_padding_variant`); each case still checks them against eager on its own inputs.

        A model that cannot be graphed and a prompt longer than the model's positions or the padded
        length are skips with the reason; a build or check that raises fails this test only (with the
        phase and reason); a numerical mismatch is timed and recorded (``correct: false``), and the
        correctness tests are the ones that fail on it.
        """
        from cudagraph_bench.errors import NotGraphableError, RequestTooLongError
        from cudagraph_bench.measure.case import CaseFailed, prepare_case

        self.skip_if_too_long(case.model, case.seq_len)
        model = self.model(case.model, case.dtype)
        spec = self.case_spec(case)
        try:
            shared = self._padding_variant(spec, model)
            # the session's padded / bucketed graphs are held for the next prompt length: not this case's growth
            before = self.ledger.reserved_mib()
            prepared = prepare_case(spec, model, variant=shared)
        except CaseFailed as exc:
            if isinstance(exc.cause, NotGraphableError):      # not graphable: a skip, listed in the JSON too
                self.record_failure(getattr(benchmark, "fullname", case.test_id), {**case.extra_info(), **exc.info},
                                    exc.reason, status="skipped", phase=exc.phase)
            if isinstance(exc.cause, (NotGraphableError, RequestTooLongError)):
                pytest.skip(f"{case.model} {case.variant}: {exc.reason}")
            pytest.fail(f"{case.test_id}: {exc.phase} failed: {exc.reason}", pytrace=False)
        try:
            benchmark_call(benchmark, self, prepared.call, group=case.group,
                           extra_info={**case.extra_info(), **prepared.info}, policy=spec.round_policy())
            notes = prepared.finish()
            if notes:
                benchmark.extra_info["notes"] = notes
        finally:
            prepared.close()
            prepared = None
            self.release()
        if case.variant != "eager":
            self.ledger.record(case.test_id, before, self.ledger.reserved_mib())

    def _padding_variant(self, spec, model):
        """``padded`` / ``bucketed``: the variant of ``spec`` replaying the graphs of its model, dtype and lengths
        that the session's first such case captured (:meth:`PaddedVariant.graphs_for
        <cudagraph_bench.measure.variants.PaddedVariant.graphs_for>`), as a server captures its buckets once and
        replays them for every prompt length: the other prompt lengths' cases check and time the same graphs
        instead of capturing them again (``extra_info["graphs_reused"]``). The graphs of another model or dtype
        are closed first (and their pools freed), so at most one model's padded and bucketed graphs are held;
        :meth:`drop_padding_graphs` closes the last ones. None for other variants.

        Raises:
            CaseFailed: phase ``build``: the capture or the variant raised (e.g. a
                :class:`~cudagraph_bench.errors.RequestTooLongError` for a prompt above every length)."""
        from cudagraph_bench.measure.case import CaseFailed, describe_exception
        from cudagraph_bench.measure.variants import PaddedVariant, build_variant, padding_lengths

        if any(k[:2] != (spec.model, spec.dtype) for k in self._padding):
            self.drop_padding_graphs()
        if spec.variant not in ("padded", "bucketed"):
            return None
        lengths = padding_lengths(spec.variant, spec.pad_to, spec.buckets)
        key = (spec.model, spec.dtype, spec.variant, lengths)
        try:
            if key not in self._padding:
                self._padding[key] = PaddedVariant.graphs_for(model, lengths, spec.variant, spec.seq_len)
            return build_variant(model, spec.variant, spec.seq_len, pad_to=spec.pad_to, dtype=spec.dtype,
                                 buckets=spec.buckets, graphs=self._padding[key])
        except Exception as exc:  # a variant's failure is its case's result
            raise CaseFailed("build", describe_exception(exc), exc) from exc

    def drop_padding_graphs(self) -> None:
        """Close the padded and bucketed graphs the session holds (:meth:`_padding_variant`) and free their
        pools (:meth:`release`); e.g. when the padding benchmarks are done."""
        if self._padding:
            for graphs in self._padding.values():
                graphs.close()
            self._padding.clear()
            self.release()

    def record_failure(self, fullname: str, key: dict, reason: str, *, status: str = "failed", **details) -> dict:
        """List a case that produced no measurement under ``["cudagraph_bench"]["failures"]`` of the session's
        JSON, as ``cudagraph-bench run`` lists its failed cases, so that the report shows it with its reason.

        Args:
            fullname: the test's node id (pytest-benchmark's ``fullname`` of the benchmark it would have
                been: ``report --newest-wins`` replaces a failure and a benchmark of one name by the newer).
            key: the case's ``extra_info`` key: ``suite`` plus that suite's fields (decode: ``model, dtype,
                seq_len, new_tokens, variant``); other fields are kept too.
            reason: one line, e.g. :func:`~cudagraph_bench.capture.graphed.root_cause` of the exception.
            status: ``failed`` (default) or ``skipped``.
            details: more JSON values to keep (``compile_ms``, ``phase``).

        Returns the entry recorded."""
        entry = {**key, "status": status, "reason": reason, "fullname": fullname, **details}
        self.ledger.failures.append(entry)
        return entry

    def release(self, *, everything: bool = False) -> None:
        """Free what the last case left: a garbage collection (a graph wrapper, its static buffers and its
        pool can sit in reference cycles), then the caching allocator's free blocks; without CUDA started in
        this process (a CPU machine, a session of CPU-only tests) only the garbage collection.

        The objects that survive the collection are frozen (``gc.freeze``): models, caches, imported modules
        and pytest's own objects are long-lived, and a full collection over all of them took ~0.4 s per case on
        the H200 image (cProfile of the forward and decode modules: 55 s in 135 releases). The next release
        then scans only what was made since. Nothing is frozen while an exception is propagating (a
        ``finally`` of a failing case): its frames and tensors stay collectable. ``everything``: unfreeze
        first, for when long-lived objects were dropped (a model evicted from the cache, the session's end)."""
        import gc
        import sys

        import torch

        if everything:
            gc.unfreeze()
        gc.collect()
        if sys.exc_info()[1] is None:
            gc.freeze()
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def hold_profiling_worker(self, items) -> None:
        """Start the kernel-count worker of the session's first profile batch now and hold it once prepared
        (:func:`cudagraph_bench.measure.kernel_counts.hold_worker`): its process start, imports, CUDA context and
        first model build then overlap the tests that run meanwhile (the plugin calls this from the first
        ``untimed`` test) instead of adding to the count. The batch is the one :class:`ProfiledCases` will ask
        for: the cases of the first module among ``items`` (pytest's selected tests, in run order) whose tests
        are in :data:`FORWARD_PROFILES_GROUP`. The worker counts before the first test that is not ``untimed``
        starts (:meth:`count_with_held_worker`) and then exits, so that no test is timed while another process
        holds the GPU; :meth:`close` kills a worker nobody took. Cases already profiled are left out. Nothing is
        started without such tests or in a pytest-xdist worker that may never run them: with ``--gpu-workers``
        the worker the group is pinned to holds it like a session without workers
        (:func:`cudagraph_bench.gpu_workers.holds_forward_profiles`); any other worker collects every test but
        runs a share."""
        from cudagraph_bench.gpu_workers import holds_forward_profiles
        from cudagraph_bench.measure.kernel_counts import count_spec, hold_worker
        from cudagraph_bench.sharding import item_group

        if self._held_profiler is not None or not holds_forward_profiles(self.config):
            return
        first = next((i for i in items if item_group(i) == FORWARD_PROFILES_GROUP
                      and "seq_len" in getattr(getattr(i, "callspec", None), "params", {})), None)
        if first is None:
            return
        keys = [key for key in profiled_keys(items, first.module, fits=self.fits) if key not in self.profiled]
        if keys:
            self._held_profiler = hold_worker([count_spec(*k, attn_implementation=self.option("attn_implementation"))
                                               for k in keys])
            self._held_for = first.nodeid

    def take_held_worker(self):
        """The held counting worker (or None), handed over once: the caller runs or closes it."""
        held, self._held_profiler = self._held_profiler, None
        return held

    def count_with_held_worker(self) -> tuple[str, float] | None:
        """Let the held counting worker count its batch now (waiting for it to be prepared first) and keep the
        results in :attr:`profiled`, where :class:`ProfiledCases` finds them. Returns ``(node id, seconds)``:
        the first profiling test, which the counting time belongs to, and the wall seconds it took; None when
        no worker is held."""
        import time

        from cudagraph_bench.measure.kernel_counts import count_in_workers

        held = self.take_held_worker()
        if held is None:
            return None
        t0 = time.perf_counter()
        self.profiled.update(count_in_workers(held.specs, held=held))
        return self._held_for, time.perf_counter() - t0

    def fits(self, model: str, seq_len: int) -> bool:
        """Whether a ``seq_len``-token prompt fits ``model``'s positions (False for a model this cannot tell:
        its own test reports it)."""
        try:
            return seq_len <= self.position_limit(model)
        except Exception:
            return False

    def close(self) -> None:
        held = self.take_held_worker()
        if held is not None:
            held.close()
        self.drop_padding_graphs()
        self.release(everything=True)
        self.ledger.end_mib = self.ledger.reserved_mib()


#: The pytest-xdist group (``xdist_group`` mark) of the tests that read forward profiles (kernel counts, GPU
#: busy time): one worker runs them all and profiles every case in one batch (:class:`ProfiledCases`).
FORWARD_PROFILES_GROUP = "forward-profiles"


class ProfiledCases:
    """Kernel counts and GPU busy times (:func:`cudagraph_bench.measure.kernel_counts.count_in_workers`) of the
    forward cases of one test module, profiled in worker processes in one batch when the first is asked for
    (the profiler never runs in the test process: it can leave CUPTI attached and slow later launches). A
    case is profiled once per session: what one module's batch profiled, another module's reads from
    :attr:`Session.profiled` (the kernel-count and busy-time tests read the same profile of a case).

    In a pytest-xdist worker the batch holds only the cases of the asked case's group
    (:func:`cudagraph_bench.sharding.item_group`): a worker collects every test but runs a share of them
    (with ``--gpu-workers``, whole groups), so profiling the whole module there would profile each case once
    per worker. The suite's profiling tests share one group, :data:`FORWARD_PROFILES_GROUP`, so that one
    worker profiles every case in one batch (each batch pays a worker process's start and model builds).

    Args:
        request: the module-scoped fixture's ``request`` (its module's selected tests are the batch).
        cgb: the :class:`Session`.
        keep: which ``(model, dtype, seq_len)`` keys the batch may hold besides the one asked for (default:
            all); keys whose prompt does not fit the model's positions are never in it.
    """

    def __init__(self, request, cgb, keep=None):
        self._request, self._cgb, self._keep = request, cgb, keep or (lambda key: True)
        self._done: dict = cgb.profiled
        self._in_worker = hasattr(request.config, "workerinput")    # a pytest-xdist worker

    def _batch(self, key) -> list:
        """``key`` and the selected cases not profiled yet (in an xdist worker: of ``key``'s group)."""
        selected = profiled_keys(self._request.session.items, self._request.module, keep=self._keep,
                                 fits=self._cgb.fits)
        rest = [k for k in selected if k != key and k not in self._done]
        if self._in_worker:
            rest = [k for k in rest if selected[k] == selected.get(key)]
        return [key] + rest

    def get(self, key):
        """The :class:`~cudagraph_bench.measure.kernel_counts` result of ``(model, dtype, seq_len)``: the
        batch is counted by the session's held worker when it holds this batch
        (:meth:`Session.hold_profiling_worker`), else by a fresh one."""
        from cudagraph_bench.measure.kernel_counts import count_in_workers, count_spec

        if key not in self._done:
            attention = self._cgb.option("attn_implementation")
            specs = [count_spec(*k, attn_implementation=attention) for k in self._batch(key)]
            self._done.update(count_in_workers(specs,
                                               held=self._cgb.take_held_worker()))
        return self._done[key]


def profiled_keys(items, module, *, keep=None, fits=None) -> dict:
    """``{(model, dtype, seq_len): group}`` of the cases of ``module``'s tests among ``items`` (pytest's
    selected tests), kept (``keep(key)``) and fitting (``fits(model, seq_len)``), in collection order; the
    group is :func:`cudagraph_bench.sharding.item_group`."""
    from cudagraph_bench.sharding import item_group

    keys: dict = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "module", None) is not module or "seq_len" not in params:
            continue
        key = (params["model"], params["dtype"], params["seq_len"])     # the plain params of the case
        if key not in keys and (keep is None or keep(key)) and (fits is None or fits(key[0], key[2])):
            keys[key] = item_group(item)
    return keys


def generate_reference(model, input_ids, new_tokens: int):
    """HF ``generate(do_sample=False, eos_token_id=None)``: tokens ``[1, new_tokens]`` int64 after
    ``input_ids`` ``[1, L]`` and the per-step logits (a tuple of ``[1, vocab]``)."""
    import torch

    with torch.inference_mode():
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0,
                             return_dict_in_generate=True, output_logits=True)
    return out.sequences[:, input_ids.shape[1]:], out.logits


def decode_cache_len(prompt_len: int, new_tokens, positions: int) -> int:
    """Static KV cache length (tokens) of the decode benchmarks: prompt + the most new tokens, rounded up
    to a multiple of :data:`DECODE_CACHE_STEP`, at most the model's ``positions``."""
    need = prompt_len + max(new_tokens)
    return min(-(-need // DECODE_CACHE_STEP) * DECODE_CACHE_STEP, positions)


def decode_prefill_bucket(prompt_len: int, buckets, max_cache_len: int) -> int | None:
    """The bucket (tokens) a graphed prefill pads a ``prompt_len``-token prompt to: the smallest of ``buckets``
    capped at the static KV cache (:func:`~cudagraph_bench.capture.buckets.cap_buckets`) that holds the prompt,
    or None when the prompt is longer than every bucket (then the prefill runs eagerly, unpadded)."""
    from cudagraph_bench.capture.buckets import cap_buckets, select_bucket
    from cudagraph_bench.errors import RequestTooLongError

    try:
        return select_bucket(prompt_len, cap_buckets(buckets, max_cache_len))
    except RequestTooLongError:
        return None


def round_policy(cgb: Session, *, rounds: int | None = None, warmup: int | None = None,
                 max_rounds: int | None = None):
    """The session's :class:`~cudagraph_bench.measure.timing.RoundPolicy`, with ``rounds`` / ``warmup`` /
    ``max_rounds`` replacing ``--rounds`` / ``--warmup-rounds`` / ``--max-rounds`` where given (``--max-time-ms``
    applies to every policy)."""
    from cudagraph_bench.measure.settings import MeasureSettings

    settings = MeasureSettings.from_options(cgb.option)
    return settings.round_policy(rounds=rounds or settings.rounds, max_rounds=max_rounds or settings.max_rounds,
                                 warmup_rounds=settings.warmup_rounds if warmup is None else warmup)


def benchmark_call(benchmark, cgb: Session, fn, *, group: str, extra_info: dict, policy=None, warm: bool = False,
                   checked_call_ms: float | None = None):
    """Time ``fn`` with ``benchmark.pedantic``: every call ends with a synchronize (wall time includes the
    GPU work) and CUDA-event ms of each measured round go to ``extra_info["cuda_event_ms"]``.

    Rounds (``policy``, default :func:`round_policy` of the session's options): a pilot of a few calls
    (:func:`~cudagraph_bench.measure.timing.pilot_call_ms`; ``warm``: without its untimed cold call, for an
    ``fn`` the test has just run on the same inputs; ``checked_call_ms``: that run's wall ms, the pilot itself
    when it is too slow for the precision target to add rounds) plans them
    (:meth:`~cudagraph_bench.measure.timing.RoundPolicy.plan`): at least ``--rounds`` measured rounds, more
    until the median's 95% interval is expected within ``--precision-pct`` but for at most ``--max-time-ms``
    of calls, enough for ``--min-time-ms``, at most ``--max-rounds``; warmup rounds that, with the pilot's
    calls, make at least ``--warmup-rounds`` calls and last at least ``--warmup-ms``. The garbage collector is
    off while timing, the pilot included, unless ``--keep-gc``.

    ``extra_info`` also gets the timing's fields (:func:`~cudagraph_bench.measure.case.timing_record`:
    ``warmup_rounds``, ``pilot_ms``, ``precision_target_pct``, ``max_time_ms``, ``median_ci95_pct`` of the
    measured rounds), ``gpu_state`` (``{"before", "after"}`` NVML readings, :func:`~cudagraph_bench.measure.gpustate.read_gpu_state`;
    None without NVML) and, when either reading has a throttling reason, ``throttled`` (reason names) plus a
    :class:`~cudagraph_bench.measure.gpustate.GpuThrottledWarning`.

    Returns the CUDA-event ms of the measured rounds.
    """
    import contextlib

    import numpy as np
    import torch

    from cudagraph_bench.measure.case import timing_record
    from cudagraph_bench.measure.gpustate import read_gpu_state, warn_if_throttled
    from cudagraph_bench.measure.timing import CallTimer, gc_disabled

    policy = policy or round_policy(cgb)
    benchmark.group = group
    benchmark.extra_info.update(extra_info)
    before = read_gpu_state()
    # the pilot runs with the garbage collector as the measured rounds will (pytest-benchmark turns it off
    # around them): a collection in a pilot call would widen the spread that plans the rounds
    gc_off = gc_disabled() if getattr(benchmark, "_disable_gc", False) else contextlib.nullcontext()
    with torch.inference_mode(), gc_off:
        rounds, warmup, pilot = policy.plan(fn, torch.cuda.synchronize, warm=warm,
                                            checked_call_ms=checked_call_ms)
        timer = CallTimer(fn, capacity=rounds + warmup)
        benchmark.pedantic(timer, rounds=rounds, warmup_rounds=warmup, iterations=1)
    after = read_gpu_state()
    events = timer.event_ms(last=rounds)
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    wall_ms = [x * 1e3 for x in stats.data] if stats is not None and getattr(stats, "data", None) else events
    benchmark.extra_info["cuda_event_ms"] = events
    benchmark.extra_info["event_median_ms"] = float(np.median(events))
    benchmark.extra_info.update(timing_record(rounds, warmup, pilot, wall_ms, policy.precision_pct,
                                              max_time_ms=policy.max_time_ms))
    benchmark.extra_info["gpu_state"] = {"before": before, "after": after}
    throttled = warn_if_throttled(getattr(benchmark, "name", None) or group, before, after)
    if throttled:
        benchmark.extra_info["throttled"] = throttled
    return events


__all__ = ["Session", "DECODE_PROMPT_SEED", "MemoryLedger", "ProfiledCases", "FORWARD_PROFILES_GROUP", "benchmark_call",
           "round_policy", "decode_cache_len", "generate_reference"]
