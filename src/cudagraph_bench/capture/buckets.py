"""Serving prompts of any length with fixed-shape graphs: right-padding to one length, or one graph per bucket (vLLM's
``cudagraph_capture_sizes``) captured largest first into one shared pool."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cudagraph_bench.capture.graphed import GraphedForward
from cudagraph_bench.errors import RequestTooLongError, UsageError
from cudagraph_bench.models.presets import max_positions


def select_bucket(seq_len: int, buckets) -> int:
    """Smallest bucket length >= ``seq_len`` (tokens). Raises RequestTooLongError (before any GPU work) above the
    largest bucket; UsageError for ``seq_len < 1`` or no buckets."""
    if not buckets:
        raise UsageError("no bucket lengths given: pass e.g. --buckets 16,32,64")
    if seq_len < 1:
        raise UsageError(f"prompt length must be >= 1 token, got {seq_len}")
    for bucket in sorted(buckets):
        if bucket >= seq_len:
            return bucket
    raise RequestTooLongError(f"prompt of {seq_len} tokens is longer than the largest bucket ({max(buckets)}): "
                              f"add a bucket >= {seq_len} or truncate the prompt")


def cap_buckets(buckets, max_positions: int) -> tuple[int, ...]:
    """Sorted unique buckets within ``max_positions``, which becomes the largest when a bucket was above it."""
    if max_positions < 1 or not buckets or min(buckets) < 1:
        raise UsageError(f"need bucket lengths >= 1 and a position limit >= 1 (got {tuple(buckets)}, {max_positions})")
    kept = sorted({b for b in buckets if b <= max_positions})
    if any(b > max_positions for b in buckets) and max_positions not in kept:
        kept.append(max_positions)
    return tuple(kept)


def pad_prompt(input_ids, pad_to: int, pad_token_id: int = 0):
    """Right-pad ``input_ids [batch, L]`` int64 to ``pad_to``: ``(padded_ids [batch, pad_to] int64, attention_mask
    [batch, pad_to] int64)``, mask 1 on real tokens. RequestTooLongError when ``L > pad_to``."""
    import torch

    batch, length = input_ids.shape
    if length > pad_to:
        raise RequestTooLongError(f"prompt of {length} tokens does not fit the padded length {pad_to}: "
                                  f"raise --pad-to or truncate the prompt")
    ids = torch.full((batch, pad_to), pad_token_id, dtype=torch.int64, device=input_ids.device)
    ids[:, :length] = input_ids
    mask = torch.zeros((batch, pad_to), dtype=torch.int64, device=input_ids.device)
    mask[:, :length] = 1
    return ids, mask


@dataclass(frozen=True)
class BucketCapture:
    """``capture_ms`` (warmup + capture wall ms), ``pool_mib`` (reserved growth; the first bucket pays the pool)."""

    bucket: int
    capture_ms: float
    pool_mib: float


class BucketedGraphs:
    """One GraphedForward (with a static mask) per bucket, captured largest first into one pool; ``buckets`` capped at
    the model's positions. ``__call__(input_ids [1, L])`` replays the smallest bucket >= L and returns a view ``[1, L,
    ...]`` that the next replay of ANY bucket may overwrite. Raises RequestTooLongError (on call, before GPU work) when
    L is above the largest bucket."""

    def __init__(self, model, buckets, *, warmup_iters: int = 3, pad_token_id: int = 0):
        import torch

        self.buckets = cap_buckets(buckets, max_positions(model, bound=max(buckets, default=1)))   # ALiBi, NoPE
        self.pad_token_id = pad_token_id
        self.pool = torch.cuda.graph_pool_handle()
        #: how many variants replayed these graphs (:class:`~cudagraph_bench.measure.forward_variants.PaddedVariant`)
        self.served = 0
        self.graphs: dict[int, GraphedForward] = {}
        self.captures: list[BucketCapture] = []
        for bucket in sorted(self.buckets, reverse=True):
            before = torch.cuda.memory_reserved()
            t0 = time.perf_counter()
            self.graphs[bucket] = GraphedForward(model, bucket, with_attention_mask=True,
                                                 warmup_iters=warmup_iters, pool=self.pool)
            self.captures.append(BucketCapture(bucket, (time.perf_counter() - t0) * 1e3,
                                               (torch.cuda.memory_reserved() - before) / 2**20))

    def bucket_for(self, seq_len: int) -> int:
        """The bucket a prompt of ``seq_len`` tokens replays (see :func:`select_bucket`)."""
        return select_bucket(seq_len, self.buckets)

    def __call__(self, input_ids):
        """``input_ids [1, L]`` int64 -> ``[1, L, ...]`` (a view of the static output)."""
        length = input_ids.shape[1]
        bucket = self.bucket_for(length)
        ids, mask = pad_prompt(input_ids, bucket, self.pad_token_id)
        return self.graphs[bucket](ids, mask)[:, :length]

    def close(self) -> None:
        """Drop every graph and the pool reference (then ``torch.cuda.empty_cache()`` frees the pool)."""
        for graph in self.graphs.values():
            graph.close()
        self.graphs.clear()
        self.pool = None
