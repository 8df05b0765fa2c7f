"""Greedy decode with a static KV cache: an eager loop, or captured decode steps replayed back to back, optionally
compiled by inductor first (gpt-fast's ``decode_one_token`` under ``reduce-overhead``; vLLM's decode graphs).

One step reads and writes only static device buffers: ``token [1, 1]`` int64 (gets the argmax), ``pos [1]`` int64
(``position_ids``, equal to the cache's write counter), ``mask [1, max_cache_len]`` int64 (1 on every written position),
``out [1, max_cache_len]`` / ``index [1]`` int64 (the tokens, and where the next one goes)."""

from __future__ import annotations

import contextlib

from cudagraph_bench.capture.buckets import cap_buckets, pad_prompt, select_bucket
from cudagraph_bench.capture.compiling import (compile_counters, device_sync, no_recompile, time_limit,
                                               warm_until_stable)
from cudagraph_bench.capture.graphed import Closing, GraphedForward
from cudagraph_bench.capture.module_state import state_outside_cache_reason, state_rebound_by_step
from cudagraph_bench.errors import (CompileError, CudaUnavailableError, NotGraphableError, RequestTooLongError,
                                     UsageError)
from cudagraph_bench.models.hf_internals import (attention_windows, cache_keyword, set_cache_write_position,
                                                 state_layer_types, static_cache_for_graphs)
from cudagraph_bench.models.presets import max_positions, model_kind
from cudagraph_bench.options import COMPILE_GRAPH_MODES, DEFAULT_DECODE_STEPS_PER_GRAPH


def check_request(prompt_len: int, max_new_tokens: int, max_cache_len: int, max_positions: int | None = None) -> None:
    """Validate a request before any GPU work: UsageError for ``prompt_len < 1`` or ``max_new_tokens < 1``,
    RequestTooLongError when ``prompt_len + max_new_tokens`` exceeds ``max_cache_len`` or the model's positions."""
    if prompt_len < 1 or max_new_tokens < 1:
        raise UsageError(f"need a prompt of >= 1 token and >= 1 new token (got {prompt_len}, {max_new_tokens})")
    total = prompt_len + max_new_tokens
    for limit, what in ((max_cache_len, f"the static KV cache (max_cache_len={max_cache_len}): build the decoder "
                                         "with a larger max_cache_len or ask for fewer tokens"),
                        (max_positions, f"the model's {max_positions} positions: ask for fewer tokens")):
        if limit is not None and total > limit:
            raise RequestTooLongError(f"prompt ({prompt_len}) + new tokens ({max_new_tokens}) = {total} exceeds {what}")


def replay_plan(steps: int, steps_per_graph: int) -> tuple[tuple[int, int], ...]:
    """``((steps_per_graph, full replays), (1, remaining replays))`` without entries of 0 replays."""
    if steps < 0:
        raise ValueError(f"steps must be >= 0 (got {steps})")
    if steps_per_graph < 1:
        raise ValueError(f"steps_per_graph must be >= 1 (got {steps_per_graph})")
    full, rest = divmod(steps, steps_per_graph)        # rest is 0 for one step per graph
    return tuple((n, count) for n, count in ((steps_per_graph, full), (1, rest)) if count)


class GreedyDecoder(Closing):
    """Greedy generation, batch 1, of exactly ``max_new_tokens`` tokens (no EOS stop) with a static KV cache; with
    ``use_graph`` the decode steps are graph replays. One compiled decoder at a time (compiling resets dynamo).

    ``model``: a causal LM on a CUDA device (the eager loop also runs on the CPU). ``max_cache_len``: cache tokens (>=
    prompt + new tokens). ``prefill_buckets``: right-pad the prompt to the smallest bucket >= L (a graph each with
    ``use_graph``); None: an unpadded eager prefill. ``steps_per_graph``: at most ``max_cache_len - 1`` (set to 1
    later, only the 1-step graph replays). ``compile_mode``: None or one of
    :data:`~cudagraph_bench.options.COMPILE_GRAPH_MODES` for the step (prefill stays eager); ``compile_backend``
    ``"eager"``/``"aot_eager"`` for tests; ``compile_timeout_s`` None or 0: no limit; ``compile_options``:
    ``torch._inductor.config`` fields while the step compiles. ``compile_ms``, ``graphs_compiled``, ``capture_ms``:
    None when not compiled / captured.

    Raises:
        UsageError: not a causal LM, ``max_cache_len`` above its positions, ``steps_per_graph < 1``, an unknown
            ``compile_mode``, ``compile_options`` without ``compile_mode``, not a mapping, or with an unknown field or
            a value of another type.
        CudaUnavailableError: ``use_graph`` without CUDA.
        NotGraphableError: layers a static cache cannot hold (chunked or sparse attention), an unrecorded window, state
            layers with ``prefill_buckets``, a forward that ignores the static cache, RoPE that changes past
            ``max_cache_len``, or (``use_graph``) decode state in module attributes that each step replaces.
        CompileError / CompileTimeout: dynamo compiled nothing / compiling ran past ``compile_timeout_s``.
        CaptureError: a capture failed (a recompile during the capture of a compiled step is one)."""

    def __init__(self, model, max_cache_len: int, *, use_graph: bool = True, prefill_buckets=None,
                 warmup_iters: int = 3, steps_per_graph: int = DEFAULT_DECODE_STEPS_PER_GRAPH,
                 compile_mode: str | None = None, compile_backend: str = "inductor",
                 compile_timeout_s: float | None = None, compile_options: dict | None = None):
        import torch

        if model_kind(model) != "causal":
            raise UsageError("decode needs a causal LM (got an encoder): use a causal preset or checkpoint")
        self.max_positions = max_positions(model, bound=max_cache_len)   # ALiBi, NoPE: bounded by the cache
        if max_cache_len > self.max_positions:
            raise UsageError(f"max_cache_len={max_cache_len} is above the model's {self.max_positions} positions")
        if steps_per_graph < 1:
            raise UsageError(f"steps_per_graph must be >= 1 (got {steps_per_graph})")
        if compile_mode is not None and compile_mode not in COMPILE_GRAPH_MODES:
            raise UsageError(f"unknown compile_mode {compile_mode!r}: use one of {', '.join(COMPILE_GRAPH_MODES)} "
                             "(inductor's own CUDA graphs would be captured inside the suite's graph)")
        if compile_options and compile_mode is None:
            raise UsageError("compile_options apply to the compiled step only: pass compile_mode too "
                             f"(one of {', '.join(COMPILE_GRAPH_MODES)})")
        # checked only when given: importing inductor's config costs every eager or graphed decoder otherwise
        self.compile_options = _check_inductor_fields(compile_options) if compile_options else {}
        self.model = model
        self._cache_kw = cache_keyword(model)
        self.max_cache_len = max_cache_len
        self.device = next(model.parameters()).device
        if use_graph and (self.device.type != "cuda" or not torch.cuda.is_available()):
            raise CudaUnavailableError(f"graphed decode needs the model on a CUDA device (it is on {self.device}; "
                                       f"torch.cuda.is_available()={torch.cuda.is_available()}): pass use_graph=False")
        self.use_graph = use_graph
        self.steps_per_graph = max(1, min(steps_per_graph, max_cache_len - 1))
        self.compile_mode = compile_mode
        self.compile_ms = self.capture_ms = self.graphs_compiled = None
        self.cache = static_cache_for_graphs(model, max_cache_len)
        #: the model has recurrent or convolution state layers (mamba, linear attention, short conv)
        states = state_layer_types(model.config)
        self.has_state = bool(states)
        if prefill_buckets and states:
            raise NotGraphableError(f"{type(model).__name__} has {', '.join(states)} layers, whose recurrent or "
                                    "convolution state would take in the padding of a bucketed prefill: use an "
                                    "unpadded prefill (prefill_buckets=None)")
        self._token, self._pos, self._index, self._mask, self._out = (      # the module docstring's buffers
            torch.zeros(shape, dtype=torch.int64, device=self.device)
            for shape in ((1, 1), (1,), (1,), (1, max_cache_len), (1, max_cache_len)))
        # a state-only model (Mamba) has no keys to mask; its steps take no mask, as in its own generate
        self._step_mask = self._mask if attention_windows(model.config) else None
        with torch.inference_mode():  # initialise the (lazy) cache tensors eagerly, outside any graph or compile
            try:
                self._decode_step()
            except (MemoryError, torch.OutOfMemoryError, NotGraphableError):
                raise
            except Exception as exc:   # noqa: BLE001 - the model's own code refused the static cache
                first = (str(exc).strip().splitlines() or [""])[0][:200]
                raise NotGraphableError(f"{type(model).__name__} does not run a decode step on a static KV cache "
                                        f"(the cache a graph needs): {type(exc).__name__}: {first}") from exc
            #: module attributes holding state that a step replaces (a graph cannot follow it), or None
            self.state_outside_cache = state_rebound_by_step(model, self._decode_step)
        if use_graph and self.state_outside_cache:
            raise NotGraphableError(state_outside_cache_reason(model, self.state_outside_cache))
        self._step = (self._decode_step if compile_mode is None
                      else self._compile_step(compile_backend, compile_timeout_s))
        # steps per replay -> GraphedForward / the static logits [1, vocab] of each captured step; bucket -> prefill
        self._step_graphs, self._graph_logits, self._prefill_graphs = {}, {}, {}
        self.buckets = cap_buckets(prefill_buckets, max_cache_len) if prefill_buckets else ()
        self._prefill_pos = {bucket: torch.arange(bucket, device=self.device) for bucket in self.buckets}
        if use_graph:
            self.pool = torch.cuda.graph_pool_handle()
            for bucket in sorted(self.buckets, reverse=True):
                self._prefill_graphs[bucket] = GraphedForward(
                    model, bucket, warmup_iters=warmup_iters, pool=self.pool, max_positions=bucket,
                    forward=lambda m, ids, _mask, b=bucket: self._prefill_logits(ids, self._prefill_pos[b]))
            for steps in sorted({self.steps_per_graph, 1}, reverse=True):
                self._step_graphs[steps] = self._capture_steps(steps, warmup_iters)
            self.capture_ms = sum(g.capture_ms for g in self._step_graphs.values())

    def _prefill_logits(self, input_ids, cache_position):
        """Prefill ``input_ids [1, L]`` at ``cache_position [L]`` -> logits ``[1, L, vocab]``; resets the write counter
        first, so a captured prefill is idempotent."""
        set_cache_write_position(self.cache, 0)
        mask = self._mask[:, :input_ids.shape[1]] if self.has_state else self._mask
        return self.model(input_ids=input_ids, attention_mask=mask, position_ids=cache_position.view(1, -1),
                          use_cache=True, **{self._cache_kw: self.cache}).logits

    def _decode_step(self):
        """One device-only step on the static buffers -> logits ``[1, vocab]``."""
        self._mask.index_fill_(1, self._pos, 1)
        logits = self.model(input_ids=self._token, attention_mask=self._step_mask, position_ids=self._pos.view(1, 1),
                            use_cache=True, **{self._cache_kw: self.cache}).logits[:, -1]          # [1, vocab]
        token = logits.argmax(-1, keepdim=True)                                                     # [1, 1]
        self._token.copy_(token)
        self._out.index_copy_(1, self._index, token)
        self._pos.add_(1)
        self._index.add_(1)
        return logits

    def _run_steps(self, steps: int) -> list:
        """Logits ``[1, vocab]`` of ``steps`` steps in a row."""
        return [self._step() for _ in range(steps)]

    def _rewind(self) -> None:
        """Position, output index, mask and cache write counter to 0."""
        set_cache_write_position(self.cache, 0)
        self._pos.zero_()
        self._index.zero_()
        self._mask.zero_()

    def _compile_step(self, backend: str, timeout_s: float | None = None):
        """The step compiled and warmed until stable; sets ``compile_ms`` and ``graphs_compiled``."""
        import torch
        import torch._inductor.config as inductor_config

        torch._dynamo.reset()
        before = compile_counters()
        options = {"mode": self.compile_mode} if backend == "inductor" else {}
        compiled = torch.compile(self._decode_step, backend=backend, dynamic=False, **options)

        def call():
            with torch.inference_mode():     # the cache's counters are inference tensors on a GPU
                self._rewind()
                compiled()

        patch = inductor_config.patch(self.compile_options) if self.compile_options else contextlib.nullcontext()
        with time_limit(timeout_s, f"compiling the decode step ({self.compile_mode})",
                        "raise --compile-timeout-s (0: no limit)"), patch:
            self.compile_ms, _ = warm_until_stable(call, device_sync(self.device), min_calls=2)
        self.graphs_compiled = compile_counters()["unique_graphs"] - before["unique_graphs"]
        if self.graphs_compiled < 1:
            raise CompileError("torch.compile compiled no graph of the decode step (is TORCHDYNAMO_DISABLE set?): "
                               "unset it, or run the decoder without compile_mode")
        return compiled

    def _capture_steps(self, steps: int, warmup_iters: int):
        """A GraphedForward of ``steps`` steps; logits go to ``self._graph_logits[steps]``."""
        import torch

        compiled = self.compile_mode is not None

        def forward(_model, _ids, _mask):
            capturing = torch.cuda.is_current_stream_capturing()
            if not capturing:
                self._rewind()
            with no_recompile(torch) if compiled and capturing else contextlib.nullcontext():
                self._graph_logits[steps] = self._run_steps(steps)
            return self._graph_logits[steps][-1]

        # a compiled step must not see patched HF globals during the capture: dynamo guards on them
        return GraphedForward(self.model, 1, warmup_iters=warmup_iters, pool=self.pool,
                              max_positions=self.max_cache_len, forward=forward, eager_sdpa_dispatch=not compiled,
                              host_work_check=not compiled)

    def generate(self, input_ids, max_new_tokens: int, *, return_logits: bool = False):
        """Greedy-generate exactly ``max_new_tokens`` tokens after ``input_ids [1, L]`` int64: ``[1, max_new_tokens]``
        int64 on the model's device (a copy; not synchronised); with ``return_logits``, ``(tokens, logits)``, a tuple of
        ``[1, vocab]`` in the model dtype. RequestTooLongError (before GPU work) when L + max_new_tokens exceeds the
        cache or the positions, or L the largest bucket; UsageError when batch != 1."""
        import torch

        if input_ids.dim() != 2 or input_ids.shape[0] != 1:
            raise UsageError(f"input_ids must be [1, L] (batch 1), got {list(input_ids.shape)}")
        length = input_ids.shape[1]
        check_request(length, max_new_tokens, self.max_cache_len, self.max_positions)
        bucket = select_bucket(length, self.buckets) if self.buckets else None
        with torch.inference_mode():
            self.cache.reset()
            self._mask.zero_()
            self._mask[:, :length] = 1
            if bucket is None:
                logits = self._prefill_logits(input_ids.to(self.device),
                                              torch.arange(length, device=self.device))[:, -1]
            else:  # right-padded to the bucket; the static mask keeps the padding out of attention
                padded, _ = pad_prompt(input_ids.to(self.device), bucket)
                if bucket in self._prefill_graphs:
                    logits = self._prefill_graphs[bucket](padded)[:, length - 1]
                else:
                    logits = self._prefill_logits(padded, self._prefill_pos[bucket])[:, length - 1]
                set_cache_write_position(self.cache, length)   # padding wrote slots L..bucket-1; decode overwrites them
            token = logits.argmax(-1, keepdim=True)                       # [1, 1]
            self._token.copy_(token)
            self._out[:, :1] = token
            self._pos.fill_(length)
            self._index.fill_(1)
            kept = [logits.clone()] if return_logits else None
            self._decode(max_new_tokens - 1, kept)
            out = self._out[:, :max_new_tokens].clone()
        return (out, tuple(kept)) if return_logits else out

    def _decode(self, steps: int, kept: list | None) -> None:
        """``steps`` steps by :func:`replay_plan`; ``kept`` (when not None) gets every step's logits."""
        for n, count in replay_plan(steps, self.steps_per_graph):
            graph, outputs = (self._step_graphs[n].graph, self._graph_logits[n]) if self._step_graphs else (None, None)
            for _ in range(count):
                if graph is None:
                    outputs = self._run_steps(n)
                else:
                    graph.replay()
                if kept is not None:
                    kept.extend(t.clone() for t in outputs)

    def close(self) -> None:
        """Drop the graphs, the cache and the compiled step (``torch._dynamo.reset()`` when compiled)."""
        for graph in (*self._prefill_graphs.values(), *self._step_graphs.values()):
            graph.close()
        self._prefill_graphs, self._step_graphs, self._graph_logits = {}, {}, {}
        self.cache = None
        if self.compile_mode is not None and self._step is not None:
            import torch

            self._step = None
            torch._dynamo.reset()


def _check_inductor_fields(options) -> dict:
    """``options`` as a new dict; UsageError when not a mapping, or naming an unknown inductor field or a value of
    another type than its default (an int is taken for a float)."""
    from collections.abc import Mapping

    import torch
    import torch._inductor.config as inductor_config

    if not isinstance(options, Mapping):
        raise UsageError(f"compile_options must map torch._inductor.config fields to values (got {options!r}): "
                         "pass e.g. DECODE_COMPILE_TUNINGS[name] from cudagraph_bench.options")
    unknown = sorted(str(k) for k in options if not isinstance(k, str) or not hasattr(inductor_config, k))
    if unknown:
        raise UsageError(f"torch._inductor.config has no field {', '.join(unknown)} (torch {torch.__version__}): "
                         "pass inductor config fields in compile_options")
    for name, value in options.items():
        default = getattr(inductor_config, name)
        kind = float if isinstance(default, float) else type(default)
        numeric = kind is float and isinstance(value, int) and not isinstance(value, bool)
        bool_for_int = kind is int and isinstance(value, bool)
        if default is not None and value is not None and (not isinstance(value, kind) and not numeric or bool_for_int):
            raise UsageError(f"compile_options[{name!r}] = {value!r} is a {type(value).__name__}: "
                             f"torch._inductor.config.{name} takes {'an' if bool_for_int else 'a'} {kind.__name__}")
    return dict(options)

