"""Statistics of per-round latencies (ms; no torch): summaries, latency reduction, and percentile-bootstrap intervals of
two independent samples (Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: Bootstrap resamples per interval (Efron & Tibshirani advise 1000 or more for percentile intervals).
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
#: Fewest rounds per sample for which the tools report a bootstrap interval.
MIN_BOOTSTRAP_ROUNDS = 5


@dataclass(frozen=True)
class Summary:
    """Summary of ``n`` rounds in ms; ``p95_ms`` is None only when built from aggregate stats without per-round data."""

    n: int
    mean_ms: float
    median_ms: float
    p95_ms: float | None
    min_ms: float
    max_ms: float
    stddev_ms: float


def _as_samples(samples_ms: Sequence[float] | np.ndarray, what: str = "samples") -> np.ndarray:
    x = np.asarray(samples_ms, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError(f"{what}: need at least one round, got none")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: rounds must be finite numbers")
    return x


def summarize(samples_ms: Sequence[float] | np.ndarray) -> Summary:
    """Summary of ``samples_ms: [rounds]`` (ms): numpy's linear-interpolation p95, ``ddof=1`` stddev (0 for one round).
    ValueError for an empty sample or a non-finite value."""
    x = _as_samples(samples_ms)
    return Summary(int(x.size), float(x.mean()), float(np.median(x)), float(np.percentile(x, 95)), float(x.min()),
                   float(x.max()), float(x.std(ddof=1)) if x.size > 1 else 0.0)


def middle90_pct(samples_ms: Sequence[float] | np.ndarray) -> float:
    """``100 * (p95 - p5) / median``; ValueError for an empty, non-finite or median <= 0 sample."""
    x = _as_samples(samples_ms)
    median = float(np.median(x))
    if median <= 0:
        raise ValueError(f"samples: the median must be > 0 ms to relate a spread to it, got {median}")
    p5, p95 = np.percentile(x, [5, 95])
    return float(100.0 * (p95 - p5) / median)


def reduction_pct(eager_median_ms: float, graph_median_ms: float) -> float:
    """``100 * (eager - graph) / eager`` (negative: slower); ValueError when ``eager_median_ms <= 0``."""
    if not eager_median_ms > 0:
        raise ValueError(f"eager median must be > 0 ms, got {eager_median_ms}")
    return 100.0 * (eager_median_ms - graph_median_ms) / eager_median_ms


def runs_reduction_pct(eager_medians_ms: Sequence[float], graph_medians_ms: Sequence[float]
                       ) -> tuple[float, tuple[float, float]]:
    """``(percent reduction of the medians of run medians, (lowest, highest) per-run reduction)``, pairing the i-th
    eager and graph medians (ms). ValueError for an empty list or an eager median <= 0."""
    if not len(eager_medians_ms) or not len(graph_medians_ms):
        raise ValueError("runs_reduction_pct needs at least one eager and one graph run median")
    overall = reduction_pct(float(np.median(eager_medians_ms)), float(np.median(graph_medians_ms)))
    per_run = [reduction_pct(e, g) for e, g in zip(eager_medians_ms, graph_medians_ms)]
    return overall, (min(per_run), max(per_run))


def reduction_ci(eager_ms: Sequence[float] | np.ndarray, graph_ms: Sequence[float] | np.ndarray, *,
                 confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> tuple[float, float]:
    """Percentile-bootstrap ``(low, high)`` (fractions) of ``(eager - graph) / eager`` of the medians of independent
    ``eager_ms [rounds_e]``, ``graph_ms [rounds_g]`` (ms) (``scipy.stats.bootstrap``, unpaired); same inputs and
    ``seed``, same interval. Cached per process (``selftest`` and ``gate --confirm`` gate a run several times).
    ValueError for an empty or non-finite sample or a confidence outside (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    eager, graph = _as_samples(eager_ms), _as_samples(graph_ms)
    return _reduction_ci(eager.tobytes(), graph.tobytes(), confidence, n_resamples, seed)


@functools.lru_cache(maxsize=1 << 12)
def _reduction_ci(eager: bytes, graph: bytes, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    from scipy.stats import bootstrap

    def of_medians(e, g, axis=-1):
        e, g = np.median(e, axis=axis), np.median(g, axis=axis)
        return (e - g) / e

    low, high = bootstrap((np.frombuffer(eager), np.frombuffer(graph)), of_medians, paired=False, vectorized=True,
                          n_resamples=n_resamples, method="percentile", confidence_level=confidence,
                          rng=np.random.default_rng(seed)).confidence_interval
    return float(low), float(high)
