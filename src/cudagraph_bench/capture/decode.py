"""Greedy autoregressive decode with a static KV cache: an eager loop, or one captured decode step
replayed per token.

The KV cache holds transformers' ``StaticLayer`` s (fixed ``max_cache_len``) for every attention
layer (:func:`cudagraph_bench.models.hf_internals.static_cache_for_graphs`), so every decode step has the
same shapes and the same buffer addresses, which is what a CUDA graph needs. Sliding-window layers
get a full-length layer too: the model's sliding-window mask, built on the device, keeps attention
inside the window (transformers' own sliding static layer changes its write path with a host-side
branch once the window is full, which a captured step cannot follow). The pattern is the
one of gpt-fast (``decode_one_token`` under ``torch.compile(mode="reduce-overhead")``) and of vLLM's
decode graphs, written here with plain ``torch.cuda.graph``.

Static buffers of a :class:`GreedyDecoder`:

- ``input_ids [1, 1]`` int64 (the previous token) — the step graph's static input,
- ``cache_position [1]`` int64 (its position) — updated in place with ``add_(1)``; passed to the
  model as ``position_ids [1, 1]``. transformers 5 removed the ``cache_position`` argument: a
  ``StaticLayer`` writes at its own device-side counter (``cumulative_length``), which every
  update (also a replayed one) advances in place. The decoder keeps the two equal and sets the
  counter to the real prompt length after a padded prefill
  (:func:`cudagraph_bench.models.hf_internals.set_cache_write_position`),
- ``attention_mask [1, max_cache_len]`` int64 — 1 on every position written so far; the step sets
  its own position to 1 (inside the graph). It keeps padding written by a bucketed prefill and
  stale cache slots out of attention: eager HF code skips the causal mask for a 1-token query.
"""

from __future__ import annotations

from cudagraph_bench.errors import RequestTooLongError, UsageError


def check_request(prompt_len: int, max_new_tokens: int, max_cache_len: int, max_positions: int | None = None) -> None:
    """Validate a request before any GPU work.

    Raises:
        UsageError: ``prompt_len < 1`` or ``max_new_tokens < 1``.
        RequestTooLongError: ``prompt_len + max_new_tokens`` exceeds the static KV cache
            (``max_cache_len``) or the model's positions.
    """
    if prompt_len < 1 or max_new_tokens < 1:
        raise UsageError(f"need a prompt of >= 1 token and >= 1 new token (got {prompt_len}, {max_new_tokens})")
    total = prompt_len + max_new_tokens
    if total > max_cache_len:
        raise RequestTooLongError(f"prompt ({prompt_len}) + new tokens ({max_new_tokens}) = {total} exceeds the "
                                  f"static KV cache (max_cache_len={max_cache_len}): build the decoder with a "
                                  f"larger max_cache_len or ask for fewer tokens")
    if max_positions is not None and total > max_positions:
        raise RequestTooLongError(f"prompt ({prompt_len}) + new tokens ({max_new_tokens}) = {total} exceeds the "
                                  f"model's {max_positions} positions: ask for fewer tokens")


class GreedyDecoder:
    """Greedy generation with a static KV cache; with ``use_graph`` every decode step is a replay.

    Workflow: construction allocates the cache and the static buffers, initialises the cache with
    one eager step, and (``use_graph``) captures the decode step and the bucketed prefill graphs.
    :meth:`generate` validates the request, resets the cache, runs the prefill (eager on the
    unpadded prompt, or the smallest bucket's graph on the right-padded prompt with its mask), then
    for each new token: replay the step graph (or call the step eagerly), copy the token into the
    output buffer (a clone, before the next replay), advance ``cache_position`` in place.

    Does not: sample (greedy only), stop at EOS (exactly ``max_new_tokens`` tokens, like
    ``generate(..., eos_token_id=None)``), batch (batch 1), or grow the cache.

    Args:
        model: a causal LM on a CUDA device (the eager loop also runs on the CPU).
        max_cache_len: static KV cache length in tokens (>= prompt + new tokens of any request).
        use_graph: capture the decode step (needs CUDA).
        prefill_buckets: bucket lengths (tokens): the prompt is right-padded to the smallest bucket
            >= L and prefilled with its mask (one graph per bucket when ``use_graph``), or None for an
            unpadded eager prefill.
        warmup_iters: side-stream warmup passes before each capture.

    Raises:
        UsageError: the model is not a causal LM, or ``max_cache_len`` is above its positions.
        CudaUnavailableError: ``use_graph`` without CUDA.
        NotGraphableError: the model has attention layers a static cache cannot hold (chunked,
            recurrent), or RoPE that changes past ``max_cache_len`` positions (before any capture).
        CaptureError: a capture failed (the message names the operation).
    """

    def __init__(self, model, max_cache_len: int, *, use_graph: bool = True, prefill_buckets=None,
                 warmup_iters: int = 3):
        import torch

        from cudagraph_bench.capture.buckets import cap_buckets
        from cudagraph_bench.models.hf_internals import static_cache_for_graphs
        from cudagraph_bench.models.presets import max_positions, model_kind

        if model_kind(model) != "causal":
            raise UsageError("decode needs a causal LM (got an encoder): use a causal preset or checkpoint")
        self.max_positions = max_positions(model)
        if max_cache_len > self.max_positions:
            raise UsageError(f"max_cache_len={max_cache_len} is above the model's {self.max_positions} positions")
        from cudagraph_bench.models.hf_internals import cache_keyword

        self.model = model
        self._cache_kw = cache_keyword(model)
        self.max_cache_len = max_cache_len
        self.device = next(model.parameters()).device
        self.cache = static_cache_for_graphs(model, max_cache_len)
        self._pos = torch.zeros(1, dtype=torch.int64, device=self.device)                    # [1]
        self._mask = torch.zeros(1, max_cache_len, dtype=torch.int64, device=self.device)    # [1, max_cache_len]
        with torch.inference_mode():  # initialise the (lazy) cache tensors eagerly, outside any graph
            self._step(torch.zeros(1, 1, dtype=torch.int64, device=self.device))
        self._step_graph = None
        self._prefill_graphs = {}
        self._prefill_pos = {}
        self.buckets = cap_buckets(prefill_buckets, max_cache_len) if prefill_buckets else ()
        for bucket in self.buckets:
            self._prefill_pos[bucket] = torch.arange(bucket, device=self.device)
        if use_graph:
            from cudagraph_bench.capture.graphed import GraphedForward

            self.pool = torch.cuda.graph_pool_handle()
            for bucket in sorted(self.buckets, reverse=True):
                self._prefill_graphs[bucket] = GraphedForward(
                    model, bucket, warmup_iters=warmup_iters, pool=self.pool, max_positions=bucket,
                    forward=lambda m, ids, _mask, b=bucket: self._prefill_logits(ids, self._prefill_pos[b]))
            self._step_graph = GraphedForward(model, 1, warmup_iters=warmup_iters, pool=self.pool,
                                              max_positions=max_cache_len,
                                              forward=lambda m, ids, _mask: self._step(ids))
        self.use_graph = use_graph

    def _prefill_logits(self, input_ids, cache_position):
        """Prefill ``input_ids [1, L]`` at positions ``cache_position [L]``; returns logits ``[1, L, vocab]``.

        Starts by pointing the cache's write counter at 0, so a captured prefill is idempotent (its
        warmup passes cannot run the counter past the cache)."""
        self._set_cache_length(0)
        return self.model(input_ids=input_ids, attention_mask=self._mask, position_ids=cache_position.view(1, -1),
                          use_cache=True, **{self._cache_kw: self.cache}).logits

    def _step(self, input_ids):
        """One decode step for ``input_ids [1, 1]`` at ``self._pos``; returns the next token ``[1, 1]`` int64."""
        self._mask.index_fill_(1, self._pos, 1)
        logits = self.model(input_ids=input_ids, attention_mask=self._mask, position_ids=self._pos.view(1, 1),
                            use_cache=True, **{self._cache_kw: self.cache}).logits
        self._step_logits = logits[:, -1]          # [1, vocab]; when captured, a static output in the graph pool
        return self._step_logits.argmax(-1, keepdim=True)

    def _set_cache_length(self, length: int) -> None:
        """Point every cache layer's write counter at ``length`` tokens (after a prefill padded past it)."""
        from cudagraph_bench.models.hf_internals import set_cache_write_position

        set_cache_write_position(self.cache, length)

    def generate(self, input_ids, max_new_tokens: int, *, return_logits: bool = False):
        """Greedy-generate exactly ``max_new_tokens`` tokens after ``input_ids`` ``[1, L]`` int64.

        Returns:
            ``[1, max_new_tokens]`` int64 on the model's device (not synchronised); with ``return_logits``,
            ``(tokens, logits)`` where ``logits`` is a tuple of ``max_new_tokens`` tensors ``[1, vocab]``
            in the model dtype, the logits each token was chosen from (copied out of the graph's static
            output after every replay: for checks, not for timing).
        Raises:
            RequestTooLongError: L + max_new_tokens exceeds the cache or the positions (before GPU work),
                or L is above the largest prefill bucket.
            UsageError: batch != 1.
        """
        import torch

        from cudagraph_bench.capture.buckets import pad_prompt, select_bucket

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
                self._set_cache_length(length)   # padding wrote slots L..bucket-1; decode overwrites them
            token = logits.argmax(-1, keepdim=True)                       # [1, 1]
            out = torch.empty(1, max_new_tokens, dtype=torch.int64, device=self.device)
            out[:, :1] = token
            kept = [logits.clone()] if return_logits else None
            self._pos.fill_(length)
            for i in range(1, max_new_tokens):
                token = self._step_graph(token) if self._step_graph is not None else self._step(token)
                out[:, i:i + 1] = token       # clone out of the static output before the next replay
                if kept is not None:
                    kept.append(self._step_logits.clone())
                self._pos.add_(1)
        return (out, tuple(kept)) if return_logits else out

    def close(self) -> None:
        """Drop the graphs (their pool is freed by ``torch.cuda.empty_cache()``) and the cache."""
        for graph in self._prefill_graphs.values():
            graph.close()
        if self._step_graph is not None:
            self._step_graph.close()
        self._prefill_graphs.clear()
        self._step_graph = None
        self.cache = None
