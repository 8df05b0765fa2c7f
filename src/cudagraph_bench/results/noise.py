"""The between-run noise model and the regression rule of ``gate``, ``compare`` and ``ab`` (no torch).

Why run medians, not rounds: the rounds of one run share that run's GPU clock state, host state and
memory layout, and they are autocorrelated, so a bootstrap over them (a within-run interval of
±0.1–0.7%) says nothing about where the *next* run's median lands; on an H200 the graph median of a
0.1 ms case moved by up to ~20% between runs a minute apart. Every regression verdict here is
therefore made on run medians (one per separate process), with a tolerance calibrated on how much
run medians of the same code move:

- **spread** of a case: normal-scaled median absolute deviation of the log run medians
  (``scipy.stats.median_abs_deviation(scale="normal")``), in percent (~ the between-run coefficient
  of variation, robust to one odd run);
- **tolerance** of a comparison of ``n_new`` runs against ``n_old`` runs:
  ``max(floor_pct, multiplier * spread_pct * sqrt(1/n_old + 1/n_new))``: a noisy tiny model gets a
  wide band, a stable large model a narrow one, never narrower than the floor. The multiplier is by
  default the one-sided ``1 - DEFAULT_TAIL`` quantile of Student's t with the spread's degrees of
  freedom (``n_old - 1`` for a baseline's spread): the normal-theory prediction interval of a new
  run, which widens when the spread comes from few runs (5 runs: 7.2, 10 runs: 4.3, 30 runs: 3.4);
- **rank test**: one-sided Mann-Whitney U of the NEW run medians against the OLD run medians
  (``scipy.stats.mannwhitneyu(new, old, alternative="greater")``), used when the two sample sizes
  can get below ``alpha`` at all (the exact test's smallest p-value is ``1 / C(n_old + n_new, n_new)``:
  3 against 3 runs cannot, 4 against 4 can);
- **regression** = the change of the median of run medians exceeds the tolerance AND (when the rank
  test applies) its p-value is below ``alpha``. With one run on a side only the ratio can decide,
  against the calibrated tolerance.

Sources: asv ``continuous`` (a ratio threshold and a statistical test over repeated runs); Google
benchmark ``tools/compare.py`` (Mann-Whitney U over repetitions); T. Kalibera and R. Jones, "Rigorous
Benchmarking in Reasonable Time", ISMM 2013 (variation between process runs dominates within-run noise).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: Smallest tolerance of a regression check, in percent: below it a change is never a regression. It
#: covers what a baseline's spread cannot see, the offset between hosts: on two H200 hosts the graph
#: medians of otherwise stable cases (gpt2, distilgpt2) differed by up to ~6%
#: (``results/nvidia-h200/forward-repeats``, host h1 against h2); see docs/gate-noise.md.
DEFAULT_FLOOR_PCT = 8.0
#: Fixed multiplier of the spread; None: Student's t quantile (:data:`DEFAULT_TAIL`, the spread's
#: degrees of freedom).
DEFAULT_MULTIPLIER = None
#: One-sided probability that an unchanged run exceeds the tolerance under normal noise.
DEFAULT_TAIL = 0.001
#: Significance level of the one-sided rank test.
DEFAULT_ALPHA = 0.05
#: Fewest separate runs a per-GPU baseline is built from.
MIN_BASELINE_RUNS = 5


#: What ``scipy.stats.median_abs_deviation(scale="normal")`` divides by: ``scipy.special.ndtri(0.75)``.
NORMAL_MAD_SCALE = 0.6744897501960817


def median(x: Sequence[float] | np.ndarray) -> float:
    """``np.median`` of ``x: [n]`` finite values (n >= 1), to the last bit (the middle value, or the two middle
    values' sum over 2), by sorting a list: run medians are few, and numpy's per-call overhead on a handful of
    values dominated ``calibrate``'s tens of thousands of checks."""
    s = sorted(np.asarray(x, dtype=np.float64).ravel().tolist())
    half = len(s) // 2
    return s[half] if len(s) % 2 else (s[half - 1] + s[half]) / 2.0


def normal_mad(x: Sequence[float] | np.ndarray) -> float:
    """``scipy.stats.median_abs_deviation(x, scale="normal")`` of ``x: [n]`` finite values, computed as scipy
    does (median of the absolute deviations from the median, over :data:`NORMAL_MAD_SCALE`) without its
    per-call argument handling, which took most of ``calibrate``'s tens of thousands of checks."""
    x = np.asarray(x, dtype=np.float64)
    return median(np.abs(x - median(x))) / NORMAL_MAD_SCALE


def _positive(values: Sequence[float], what: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)) or not np.all(x > 0):
        raise ValueError(f"{what}: need positive finite run medians (ms), got {list(values)!r}")
    return x


def spread_pct(run_medians_ms: Sequence[float]) -> float | None:
    """Between-run spread of one case in percent: ``100 * MAD_normal(log(run_medians_ms))``.

    ``run_medians_ms: [runs]`` medians in ms, one per separate run. None for fewer than 2 runs (one run
    says nothing about the next). Raises ``ValueError`` for a value that is not a positive number.
    """
    x = _positive(run_medians_ms, "spread_pct")
    if x.size < 2:
        return None
    return 100.0 * normal_mad(np.log(x))


def pooled_spread_pct(groups: Sequence[Sequence[float]]) -> float | None:
    """Spread (percent, as :func:`spread_pct`) of several groups of run medians of the same case, each
    centred on its own median first (so a real change between the groups is not counted as noise).
    None when fewer than 2 runs in all are in groups of at least 2."""
    residuals = []
    for g in groups:
        x = np.log(_positive(g, "pooled_spread_pct"))
        if x.size >= 2:
            residuals.extend(x - median(x))
    if len(residuals) < 2:
        return None
    # centring on each group's median removes one degree of freedom per group: scale back up
    n, k = len(residuals), sum(1 for g in groups if len(g) >= 2)
    return 100.0 * normal_mad(residuals) * math.sqrt(n / max(n - k, 1))


@functools.lru_cache(maxsize=1024)
def spread_multiplier(df: int, multiplier: float | None = DEFAULT_MULTIPLIER, tail: float = DEFAULT_TAIL) -> float:
    """``multiplier`` when given, else ``scipy.stats.t.ppf(1 - tail, df)`` (df < 1 counts as 1): how
    many spreads a change must exceed when the spread was estimated with ``df`` degrees of freedom.
    Cached: a pure function of its arguments, asked again for every check."""
    from scipy.stats import t

    return float(multiplier) if multiplier is not None else float(t.ppf(1.0 - tail, max(int(df), 1)))


def tolerance_pct(spread: float | None, n_old: int, n_new: int, *, floor_pct: float = DEFAULT_FLOOR_PCT,
                  multiplier: float | None = DEFAULT_MULTIPLIER, df: int | None = None) -> float:
    """Allowed slow-down (percent) of the median of ``n_new`` run medians against that of ``n_old``:
    ``max(floor_pct, m * spread * sqrt(1/n_old + 1/n_new))`` with ``m`` = :func:`spread_multiplier`
    of ``df`` (default ``n_old - 1``, a baseline's spread); ``floor_pct`` alone when the spread is
    unknown (None). Raises ``ValueError`` for ``n_old`` or ``n_new`` < 1."""
    if n_old < 1 or n_new < 1:
        raise ValueError(f"need at least one run on each side, got {n_old} and {n_new}")
    if spread is None:
        return floor_pct
    m = spread_multiplier(n_old - 1 if df is None else df, multiplier)
    return max(floor_pct, m * spread * math.sqrt(1.0 / n_old + 1.0 / n_new))


def smallest_rank_p(n_old: int, n_new: int) -> float:
    """Smallest p-value the exact one-sided Mann-Whitney U test can give for these sample sizes:
    ``1 / C(n_old + n_new, n_new)`` (every NEW run slower than every OLD run)."""
    return 1.0 / math.comb(n_old + n_new, n_new)


def rank_test_p(old_ms: Sequence[float], new_ms: Sequence[float], alpha: float = DEFAULT_ALPHA) -> float | None:
    """One-sided p-value that NEW run medians are larger than OLD ones (Mann-Whitney U,
    ``scipy.stats.mannwhitneyu(new, old, alternative="greater")``), or None when the sample sizes
    cannot get below ``alpha`` (:func:`smallest_rank_p` >= alpha), e.g. one run against five. The test
    depends on the ranks only: without ties the p-value of a rank pattern is computed once
    (:func:`_rank_pattern_p`)."""
    from scipy.stats import mannwhitneyu

    old, new = _positive(old_ms, "rank_test_p old"), _positive(new_ms, "rank_test_p new")
    if smallest_rank_p(old.size, new.size) >= alpha:
        return None
    both = np.concatenate([new, old])
    order = np.argsort(both, kind="stable")
    if np.any(np.diff(both[order]) == 0):
        return float(mannwhitneyu(new, old, alternative="greater").pvalue)
    return _rank_pattern_p(tuple(int(r) + 1 for r in np.flatnonzero(order < new.size)), int(both.size))


@functools.lru_cache(maxsize=4096)
def _rank_pattern_p(new_ranks: tuple[int, ...], n: int) -> float:
    """:func:`rank_test_p` of NEW runs holding ``new_ranks`` (1-based) among ``n`` runs without ties:
    ``mannwhitneyu`` of the ranks themselves, which rank as the medians did (the same U, the same p)."""
    from scipy.stats import mannwhitneyu

    old_ranks = [r for r in range(1, n + 1) if r not in set(new_ranks)]
    return float(mannwhitneyu(list(new_ranks), old_ranks, alternative="greater").pvalue)


@dataclass(frozen=True)
class RegressionCheck:
    """Verdict of one benchmark: NEW run medians against OLD run medians (times in ms, percent).

    Attributes:
        old_median_ms, new_median_ms: median of the run medians of each side.
        n_old, n_new: runs on each side.
        change_pct: ``100 * (new_median_ms / old_median_ms - 1)``.
        spread_pct: between-run spread used for the tolerance (None: unknown, the floor applies).
        tolerance_pct: :func:`tolerance_pct` of the spread.
        p_value: one-sided rank-test p-value, None when the rank test cannot reach ``alpha``.
        alpha: significance level of the rank test.
        noise_source: where the spread comes from (``"baseline"``, ``"runs"``, ``"none"``).
        floor_pct, multiplier: the tolerance's floor and the spread multiplier it used.
    """

    old_median_ms: float
    new_median_ms: float
    n_old: int
    n_new: int
    change_pct: float
    spread_pct: float | None
    tolerance_pct: float
    p_value: float | None
    alpha: float
    noise_source: str
    floor_pct: float = DEFAULT_FLOOR_PCT
    multiplier: float | None = None

    @property
    def rule_text(self) -> str:
        """The rule in words, e.g. ``"tolerance max(5%, 7.17 x baseline's between-run spread x sqrt(1/5 + 1/1)),
        no rank test (...)"``."""
        rank = (f"rank test at alpha {self.alpha:g}" if self.p_value is not None else
                f"no rank test ({self.n_old} vs {self.n_new} runs cannot get below alpha {self.alpha:g}: ratio only)")
        spread = {"baseline": "baseline's between-run spread", "runs": "between-run spread of these runs",
                  "none": "unknown spread"}[self.noise_source]
        m = f"{self.multiplier:.2f}" if self.multiplier is not None else "-"
        return (f"tolerance max({self.floor_pct:g}%, {m} x {spread} x "
                f"sqrt(1/{self.n_old} + 1/{self.n_new})), {rank}")

    @property
    def beyond_tolerance(self) -> bool:
        return self.change_pct > self.tolerance_pct

    @property
    def regressed(self) -> bool:
        """Slower than the tolerance allows and, where the rank test applies, significantly so."""
        return self.beyond_tolerance and (self.p_value is None or self.p_value < self.alpha)

    @property
    def rule(self) -> str:
        """``"ratio+rank"`` when the rank test took part, else ``"ratio"``."""
        return "ratio" if self.p_value is None else "ratio+rank"


def check_regression(old_ms: Sequence[float], new_ms: Sequence[float], *, spread: float | None = None,
                     noise_source: str | None = None, floor_pct: float = DEFAULT_FLOOR_PCT,
                     multiplier: float | None = DEFAULT_MULTIPLIER, alpha: float = DEFAULT_ALPHA,
                     df: int | None = None) -> RegressionCheck:
    """:class:`RegressionCheck` of run medians ``new_ms: [n_new]`` against ``old_ms: [n_old]`` (ms).

    ``spread`` (percent) is the case's between-run spread, e.g. from a baseline built of the ``old_ms``
    runs (``n_old - 1`` degrees of freedom); when None it is pooled from the two sides
    (:func:`pooled_spread_pct`, needs 2+ runs on a side), else only the floor applies. ``multiplier``
    None: :func:`spread_multiplier` of those degrees of freedom (``df`` when the spread came from
    other runs, e.g. ``k - 1`` of a baseline's k runs). Raises ``ValueError`` for an empty side or a non-positive median.
    """
    old, new = _positive(old_ms, "old run medians"), _positive(new_ms, "new run medians")
    source = noise_source or ("baseline" if spread is not None else "none")
    df = old.size - 1 if df is None else df
    if spread is None:
        spread = pooled_spread_pct([old, new])
        source = "runs" if spread is not None else "none"
        df = sum(g.size - 1 for g in (old, new) if g.size >= 2)
    old_median, new_median = median(old), median(new)
    m = spread_multiplier(df, multiplier) if spread is not None else None
    return RegressionCheck(
        old_median_ms=old_median, new_median_ms=new_median, n_old=int(old.size), n_new=int(new.size),
        change_pct=100.0 * (new_median / old_median - 1.0), spread_pct=spread,
        tolerance_pct=tolerance_pct(spread, old.size, new.size, floor_pct=floor_pct, multiplier=m),
        p_value=rank_test_p(old, new, alpha), alpha=alpha, noise_source=source, floor_pct=floor_pct,
        multiplier=m)
