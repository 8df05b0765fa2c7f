"""The between-run noise model and regression rule of ``gate``, ``compare`` and ``ab`` (no torch; docs/gate-noise.md): a
change of the median of run medians beyond :func:`tolerance_pct` and, where sample sizes allow, a one-sided Mann-Whitney
U p-value below ``alpha``. Sources: asv ``continuous``; Google benchmark ``tools/compare.py``; Kalibera and Jones,
"Rigorous Benchmarking in Reasonable Time", ISMM 2013."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cudagraph_bench.defaults import DEFAULT_FLOOR_PCT, DEVICE_FLOOR_PCT

#: The floor of each figure a regression check compares (:meth:`cudagraph_bench.results.record.Measurement.figure_ms`).
FLOORS_PCT = {"device": DEVICE_FLOOR_PCT, "wall": DEFAULT_FLOOR_PCT}
#: Fixed multiplier of the spread; None: Student's t quantile (:data:`DEFAULT_TAIL`, the spread's df).
DEFAULT_MULTIPLIER = None
#: One-sided probability that an unchanged run exceeds the tolerance under normal noise.
DEFAULT_TAIL = 0.001
#: Significance level of the one-sided rank test.
DEFAULT_ALPHA = 0.05
#: Fewest separate runs a per-GPU baseline is built from.
MIN_BASELINE_RUNS = 5


def floor_of(thresholds: dict, figure: str, override: float | None = None) -> float:
    """``override``, else the baseline's ``regression_floor_pct``, else ``figure``'s floor (KeyError, only then, for
    an unknown figure)."""
    if override is not None:
        return override
    floor = thresholds.get("regression_floor_pct")
    return float(floor) if floor is not None else FLOORS_PCT[figure]


def _positive(values: Sequence[float], what: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)) or not np.all(x > 0):
        raise ValueError(f"{what}: need positive finite run medians (ms), got {list(values)!r}")
    return x


def spread_pct(run_medians_ms: Sequence[float]) -> float | None:
    """Between-run spread in percent, ``100 * MAD_normal(log(run_medians_ms))`` (robust to one odd run) of
    ``run_medians_ms: [runs]`` ms. None for fewer than 2 runs; ValueError for a value that is not a positive number."""
    from scipy.stats import median_abs_deviation

    x = _positive(run_medians_ms, "spread_pct")
    if x.size < 2:
        return None
    return float(100.0 * median_abs_deviation(np.log(x), scale="normal"))


def pooled_spread_pct(groups: Sequence[Sequence[float]]) -> float | None:
    """Spread (percent) of groups of run medians, each centred on its own; None for < 2 runs in groups of 2+."""
    from scipy.stats import median_abs_deviation

    residuals = []
    for g in groups:
        x = np.log(_positive(g, "pooled_spread_pct"))
        if x.size >= 2:
            residuals.extend(x - np.median(x))
    if len(residuals) < 2:
        return None
    # centring on each group's median removes one degree of freedom per group: scale back up
    n, k = len(residuals), sum(1 for g in groups if len(g) >= 2)
    return float(100.0 * median_abs_deviation(residuals, scale="normal") * math.sqrt(n / max(n - k, 1)))


@dataclass(frozen=True)
class HostSpread:
    """One case's noise over hosts (percent, log scale): ``within_pct`` pooled within hosts (``within_df``),
    ``cross_pct`` = ``100 * std(log host medians, ddof=1)`` (``cross_df`` = hosts - 1), ``host_medians_ms`` in
    first-seen order."""

    within_pct: float | None
    within_df: int
    cross_pct: float | None
    cross_df: int
    host_medians_ms: tuple[float, ...]

    @property
    def n_hosts(self) -> int:
        return len(self.host_medians_ms)

    @property
    def center_ms(self) -> float:
        """Geometric mean of the host medians (ms)."""
        return float(np.exp(np.mean(np.log(self.host_medians_ms))))


def host_spread(run_medians_ms: Sequence[float], hosts: Sequence[str | None]) -> HostSpread:
    """:class:`HostSpread` of ``run_medians_ms: [runs]`` (ms) on ``hosts: [runs]`` (None: a host of its own). ValueError
    for lists of other lengths or a median that is not a positive number."""
    x = _positive(run_medians_ms, "host_spread")
    if len(hosts) != x.size:
        raise ValueError(f"host_spread: {x.size} run medians but {len(hosts)} hosts")
    groups: dict[str, list[float]] = {}
    for i, (value, host) in enumerate(zip(x, hosts)):
        groups.setdefault(host if host is not None else f"\0run-{i}", []).append(float(value))
    within = pooled_spread_pct(list(groups.values()))
    within_df = sum(len(g) - 1 for g in groups.values() if len(g) >= 2)
    medians = tuple(float(np.median(g)) for g in groups.values())
    cross = float(100.0 * np.std(np.log(medians), ddof=1)) if len(medians) >= 2 else None
    return HostSpread(within, within_df, cross, len(medians) - 1, medians)


def pooled_cross_host_pct(spreads: Sequence[HostSpread]) -> tuple[float | None, int]:
    """``(cross_pct pooled over cases by df-weighted RMS, summed df)``; ``(None, 0)`` without 2+ hosts."""
    usable = [s for s in spreads if s.cross_pct is not None and s.cross_df > 0]
    if not usable:
        return None, 0
    df = sum(s.cross_df for s in usable)
    return float(math.sqrt(sum(s.cross_df * s.cross_pct ** 2 for s in usable) / df)), df


@functools.lru_cache(maxsize=1024)
def spread_multiplier(df: int, multiplier: float | None = DEFAULT_MULTIPLIER, tail: float = DEFAULT_TAIL) -> float:
    """``multiplier`` when given, else ``scipy.stats.t.ppf(1 - tail, df)`` (df < 1 counts as 1)."""
    from scipy.stats import t

    return float(multiplier) if multiplier is not None else float(t.ppf(1.0 - tail, max(int(df), 1)))


def tolerance_pct(spread: float | None, n_old: int, n_new: int, *, floor_pct: float = DEFAULT_FLOOR_PCT,
                  multiplier: float | None = DEFAULT_MULTIPLIER, df: int | None = None) -> float:
    """Allowed slow-down (percent) of ``n_new`` run medians against ``n_old``: ``max(floor_pct, m * spread *
    sqrt(1/n_old + 1/n_new))`` (normal-theory prediction interval), ``floor_pct`` alone when ``spread`` is None.
    ValueError for ``n_old`` or ``n_new`` < 1."""
    if n_old < 1 or n_new < 1:
        raise ValueError(f"need at least one run on each side, got {n_old} and {n_new}")
    if spread is None:
        return floor_pct
    m = spread_multiplier(n_old - 1 if df is None else df, multiplier)
    return max(floor_pct, m * spread * math.sqrt(1.0 / n_old + 1.0 / n_new))


def smallest_rank_p(n_old: int, n_new: int) -> float:
    """``1 / C(n_old + n_new, n_new)``: the exact one-sided Mann-Whitney U test's smallest p-value."""
    return 1.0 / math.comb(n_old + n_new, n_new)


def rank_test_p(old_ms: Sequence[float], new_ms: Sequence[float], alpha: float = DEFAULT_ALPHA) -> float | None:
    """One-sided Mann-Whitney U p-value that NEW run medians are larger than OLD ones, or None when the sample sizes
    cannot get below ``alpha`` (3 against 3 cannot, 4 against 4 can). Cached per rank pattern (``calibrate``)."""
    old, new = _positive(old_ms, "rank_test_p old"), _positive(new_ms, "rank_test_p new")
    if smallest_rank_p(old.size, new.size) >= alpha:
        return None
    _, dense = np.unique(np.concatenate([new, old]), return_inverse=True)
    return _rank_p(int(new.size), tuple(dense.tolist()))


@functools.lru_cache(maxsize=1 << 16)
def _rank_p(n_new: int, dense_ranks: tuple[int, ...]) -> float:
    from scipy.stats import mannwhitneyu

    ranks = np.asarray(dense_ranks, dtype=float)
    return float(mannwhitneyu(ranks[:n_new], ranks[n_new:], alternative="greater").pvalue)


@dataclass(frozen=True)
class RegressionCheck:
    """Verdict of one benchmark: NEW run medians against OLD (ms, percent). ``change_pct``: ``100 * (new_median_ms /
    old_median_ms - 1)``; ``spread_pct`` None: the floor applies; ``p_value`` None: the rank test cannot reach
    ``alpha``; ``noise_source``: ``"baseline"``, ``"runs"`` or ``"none"``."""

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
    cross_host_pct: float | None = None
    n_hosts: int = 1

    @property
    def rule_text(self) -> str:
        """The rule in words, e.g. ``"tolerance max(5%, 7.17 x baseline's ... x sqrt(1/5 + 1/1)), no rank test"``."""
        rank = (f"rank test at alpha {self.alpha:g}" if self.p_value is not None else
                f"no rank test ({self.n_old} vs {self.n_new} runs cannot get below alpha {self.alpha:g}: ratio only)")
        m = f"{self.multiplier:.2f}" if self.multiplier is not None else "-"
        if self.cross_host_pct is not None:
            return (f"tolerance max({self.floor_pct:g}%, {m} x sqrt(cross-host spread^2 x (1 + 1/{self.n_hosts} hosts) "
                    f"+ within-host spread^2 x (1/{self.n_old} + 1/{self.n_new}))), cross-host spread pooled over the "
                    f"gated cases, {rank}")
        spread = {"baseline": "baseline's between-run spread", "runs": "between-run spread of these runs",
                  "none": "unknown spread"}[self.noise_source]
        return (f"tolerance max({self.floor_pct:g}%, {m} x {spread} x "
                f"sqrt(1/{self.n_old} + 1/{self.n_new})), {rank}")

    @property
    def beyond_tolerance(self) -> bool:
        return self.change_pct > self.tolerance_pct

    @property
    def regressed(self) -> bool:
        """Slower than the tolerance allows and, where the rank test applies, significantly so."""
        return self.beyond_tolerance and (self.p_value is None or self.p_value < self.alpha)


def check_across_hosts(old_ms: Sequence[float], center_ms: float, new_ms: Sequence[float], *,
                       within_pct: float | None, within_df: int, cross_pct: float, cross_df: int, n_hosts: int,
                       floor_pct: float = DEVICE_FLOOR_PCT, alpha: float = DEFAULT_ALPHA,
                       tail: float = DEFAULT_TAIL) -> RegressionCheck:
    """Check ``new_ms: [n_new]`` (ms) of one host outside a baseline of ``old_ms: [n_base]`` over ``n_hosts`` hosts
    centred on ``center_ms``: tolerance (percent) ``max(floor_pct, t * sqrt(cross^2 (1 + 1/n_hosts) + within^2 (1/n_base
    + 1/n_new)))``, the one-way random-effects prediction interval, ``t`` with Welch-Satterthwaite df (Satterthwaite
    1946). ValueError for an empty side, a non-positive median or ``n_hosts`` < 1."""
    from scipy.stats import t as student

    old, new = _positive(old_ms, "old run medians"), _positive(new_ms, "new run medians")
    if n_hosts < 1:
        raise ValueError(f"need at least one run and host on each side, got {old.size}, {new.size}, {n_hosts}")
    cross_var = cross_pct ** 2 * (1.0 + 1.0 / n_hosts)
    within_var = (within_pct or 0.0) ** 2 * (1.0 / old.size + 1.0 / new.size)
    total = cross_var + within_var
    tol, m = floor_pct, float("nan")
    if total > 0:
        denominator = cross_var ** 2 / max(cross_df, 1) + (within_var ** 2 / max(within_df, 1) if within_var else 0.0)
        m = float(student.ppf(1.0 - tail, total ** 2 / denominator))
        tol = max(floor_pct, m * math.sqrt(total))
    return _verdict(old, new, float(center_ms), alpha, spread_pct=within_pct, tolerance_pct=tol,
                    noise_source="baseline", floor_pct=floor_pct, multiplier=m if math.isfinite(m) else None,
                    cross_host_pct=cross_pct, n_hosts=n_hosts)


def _verdict(old: np.ndarray, new: np.ndarray, old_median_ms: float, alpha: float, **rule) -> RegressionCheck:
    """The check of ``new`` against ``old`` centred on ``old_median_ms``, under ``rule`` (its tolerance and spread)."""
    new_median = float(np.median(new))
    return RegressionCheck(old_median_ms=old_median_ms, new_median_ms=new_median, n_old=int(old.size),
                           n_new=int(new.size), change_pct=100.0 * (new_median / old_median_ms - 1.0),
                           p_value=rank_test_p(old, new, alpha), alpha=alpha, **rule)


def check_regression(old_ms: Sequence[float], new_ms: Sequence[float], *, spread: float | None = None,
                     floor_pct: float = DEFAULT_FLOOR_PCT, multiplier: float | None = DEFAULT_MULTIPLIER,
                     alpha: float = DEFAULT_ALPHA, df: int | None = None) -> RegressionCheck:
    """Check run medians ``new_ms: [n_new]`` against ``old_ms: [n_old]`` (ms). ``spread`` (percent, the baseline's;
    ``df`` default ``n_old - 1``): None pools it from the two sides, else only the floor applies. ValueError for an
    empty side or a non-positive median."""
    old, new = _positive(old_ms, "old run medians"), _positive(new_ms, "new run medians")
    source, df = "baseline", old.size - 1 if df is None else df
    if spread is None:
        spread = pooled_spread_pct([old, new])
        source = "runs" if spread is not None else "none"
        df = sum(g.size - 1 for g in (old, new) if g.size >= 2)
    m = spread_multiplier(df, multiplier) if spread is not None else None
    return _verdict(old, new, float(np.median(old)), alpha, spread_pct=spread, noise_source=source,
                    tolerance_pct=tolerance_pct(spread, old.size, new.size, floor_pct=floor_pct, multiplier=m),
                    floor_pct=floor_pct, multiplier=m)
