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
#: Smallest tolerance (percent) of the device-side figure (CUDA events over blocks of replays queued behind a held
#: stream, which the host does not move): below it a change is never a regression. On two H200 machines the figure's
#: run medians spanned 0.05-1.1% between processes of one machine (4 and 5 processes) and the machines differed by
#: 0.0-1.3%; the spread measured from a baseline's runs sets the tolerance above this floor (docs/gate-noise.md).
DEVICE_FLOOR_PCT = 1.0
#: The floor of each figure a regression check compares (:attr:`cudagraph_bench.results.record.Measurement.figure`).
FLOORS_PCT = {"device": DEVICE_FLOOR_PCT, "wall": DEFAULT_FLOOR_PCT}
#: Fixed multiplier of the spread; None: Student's t quantile (:data:`DEFAULT_TAIL`, the spread's
#: degrees of freedom).
DEFAULT_MULTIPLIER = None
#: One-sided probability that an unchanged run exceeds the tolerance under normal noise.
DEFAULT_TAIL = 0.001
#: Significance level of the one-sided rank test.
DEFAULT_ALPHA = 0.05
#: Fewest separate runs a per-GPU baseline is built from.
MIN_BASELINE_RUNS = 5


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
    from scipy.stats import median_abs_deviation

    x = _positive(run_medians_ms, "spread_pct")
    if x.size < 2:
        return None
    return float(100.0 * median_abs_deviation(np.log(x), scale="normal"))


def pooled_spread_pct(groups: Sequence[Sequence[float]]) -> float | None:
    """Spread (percent, as :func:`spread_pct`) of several groups of run medians of the same case, each
    centred on its own median first (so a real change between the groups is not counted as noise).
    None when fewer than 2 runs in all are in groups of at least 2."""
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
    """One case's noise over several hosts (percent, log scale as :func:`spread_pct`).

    ``within_pct``: between-run spread within a host, pooled over the hosts (:func:`pooled_spread_pct`), with
    ``within_df`` degrees of freedom (runs minus hosts of 2+ runs); ``cross_pct``: standard deviation of the hosts'
    medians (``100 * std(log host medians, ddof=1)``), ``cross_df`` = hosts - 1; ``host_medians_ms``: each host's
    median, in the order the hosts first appear; ``n_runs``, ``n_hosts``."""

    within_pct: float | None
    within_df: int
    cross_pct: float | None
    cross_df: int
    host_medians_ms: tuple[float, ...]
    n_runs: int

    @property
    def n_hosts(self) -> int:
        return len(self.host_medians_ms)

    @property
    def center_ms(self) -> float:
        """The case's centre over hosts: the geometric mean of the host medians (each host weighs the same,
        whatever its number of runs)."""
        return float(np.exp(np.mean(np.log(self.host_medians_ms))))


def host_spread(run_medians_ms: Sequence[float], hosts: Sequence[str | None]) -> HostSpread:
    """:class:`HostSpread` of ``run_medians_ms: [runs]`` (ms) measured on ``hosts: [runs]`` (a run without a host
    counts as a host of its own: nothing says it shares one). Raises ``ValueError`` for lists of other lengths or a
    median that is not a positive number."""
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
    return HostSpread(within, within_df, cross, len(medians) - 1, medians, int(x.size))


def pooled_cross_host_pct(spreads: Sequence[HostSpread]) -> tuple[float | None, int]:
    """``(spread, df)``: the cross-host spread pooled over cases (root mean square of each case's ``cross_pct``,
    weighted by its degrees of freedom), and its degrees of freedom (the sum). A host that is slower is slower for
    every case, so the cases' host differences estimate one spread: two hosts and 24 cases give 24 degrees of freedom
    where one case alone has 1. ``(None, 0)`` when no case was measured on 2+ hosts."""
    usable = [s for s in spreads if s.cross_pct is not None and s.cross_df > 0]
    if not usable:
        return None, 0
    df = sum(s.cross_df for s in usable)
    return float(math.sqrt(sum(s.cross_df * s.cross_pct ** 2 for s in usable) / df)), df


def across_hosts_tolerance_pct(within_pct: float | None, within_df: int, cross_pct: float, cross_df: int,
                               n_hosts: int, n_base: int, n_new: int, *, floor_pct: float = DEFAULT_FLOOR_PCT,
                               tail: float = DEFAULT_TAIL) -> tuple[float, float, float]:
    """Allowed slow-down (percent) of ``n_new`` runs of a host that is not among the baseline's ``n_hosts`` (``n_base``
    runs) against the baseline's centre: ``max(floor_pct, t * sqrt(cross^2 (1 + 1/n_hosts) + within^2 (1/n_base +
    1/n_new)))``: the new host's offset, the centre's uncertainty over hosts and runs, the runs' own noise. ``t``:
    the one-sided ``1 - tail`` quantile of Student's t with the Welch-Satterthwaite degrees of freedom of that sum.
    Returns ``(tolerance, t, df)``. Raises ``ValueError`` for ``n_base``, ``n_new`` or ``n_hosts`` < 1.

    Source: the prediction interval of a new observation in a one-way random-effects model (hosts random), with
    the Welch-Satterthwaite approximation for a sum of variance estimates (Satterthwaite, Biometrics Bulletin 2, 1946).
    """
    from scipy.stats import t as student

    if min(n_base, n_new, n_hosts) < 1:
        raise ValueError(f"need at least one run and host on each side, got {n_base}, {n_new}, {n_hosts}")
    cross_var = cross_pct ** 2 * (1.0 + 1.0 / n_hosts)
    within_var = (within_pct or 0.0) ** 2 * (1.0 / n_base + 1.0 / n_new)
    total = cross_var + within_var
    if total <= 0:
        return floor_pct, float("nan"), float("nan")
    denominator = cross_var ** 2 / max(cross_df, 1) + (within_var ** 2 / max(within_df, 1) if within_var else 0.0)
    df = total ** 2 / denominator
    m = float(student.ppf(1.0 - tail, df))
    return max(floor_pct, m * math.sqrt(total)), m, df


@functools.lru_cache(maxsize=1024)
def spread_multiplier(df: int, multiplier: float | None = DEFAULT_MULTIPLIER, tail: float = DEFAULT_TAIL) -> float:
    """``multiplier`` when given, else ``scipy.stats.t.ppf(1 - tail, df)`` (df < 1 counts as 1): how
    many spreads a change must exceed when the spread was estimated with ``df`` degrees of freedom."""
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
    cannot get below ``alpha`` (:func:`smallest_rank_p` >= alpha), e.g. one run against five."""
    from scipy.stats import mannwhitneyu

    old, new = _positive(old_ms, "rank_test_p old"), _positive(new_ms, "rank_test_p new")
    if smallest_rank_p(old.size, new.size) >= alpha:
        return None
    return float(mannwhitneyu(new, old, alternative="greater").pvalue)


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
    cross_host_pct: float | None = None
    n_hosts: int = 1

    @property
    def rule_text(self) -> str:
        """The rule in words, e.g. ``"tolerance max(5%, 7.17 x baseline's between-run spread x sqrt(1/5 + 1/1)),
        no rank test (...)"``."""
        rank = (f"rank test at alpha {self.alpha:g}" if self.p_value is not None else
                f"no rank test ({self.n_old} vs {self.n_new} runs cannot get below alpha {self.alpha:g}: ratio only)")
        if self.cross_host_pct is not None:
            m = f"{self.multiplier:.2f}" if self.multiplier is not None else "-"
            return (f"tolerance max({self.floor_pct:g}%, {m} x sqrt(cross-host spread^2 x (1 + 1/{self.n_hosts} hosts) "
                    f"+ within-host spread^2 x (1/{self.n_old} + 1/{self.n_new}))), cross-host spread pooled over the "
                    f"gated cases, {rank}")
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


def check_across_hosts(old_ms: Sequence[float], old_hosts: Sequence[str | None], center_ms: float,
                       new_ms: Sequence[float], *, within_pct: float | None, within_df: int, cross_pct: float,
                       cross_df: int, n_hosts: int, floor_pct: float = DEVICE_FLOOR_PCT, alpha: float = DEFAULT_ALPHA,
                       tail: float = DEFAULT_TAIL) -> RegressionCheck:
    """:class:`RegressionCheck` of run medians ``new_ms: [n_new]`` (ms) of one host against a baseline of ``old_ms``
    measured on ``n_hosts`` hosts (``old_hosts``, per run), centred on ``center_ms`` (the geometric mean of its host
    medians): the change is ``new median / center_ms``, the tolerance :func:`across_hosts_tolerance_pct`; the rank
    test as in :func:`check_regression`."""
    old, new = _positive(old_ms, "old run medians"), _positive(new_ms, "new run medians")
    tol, m, _ = across_hosts_tolerance_pct(within_pct, within_df, cross_pct, cross_df, n_hosts, int(old.size),
                                           int(new.size), floor_pct=floor_pct, tail=tail)
    new_median = float(np.median(new))
    return RegressionCheck(
        old_median_ms=float(center_ms), new_median_ms=new_median, n_old=int(old.size), n_new=int(new.size),
        change_pct=100.0 * (new_median / center_ms - 1.0), spread_pct=within_pct, tolerance_pct=tol,
        p_value=rank_test_p(old, new, alpha), alpha=alpha, noise_source="baseline", floor_pct=floor_pct,
        multiplier=m if math.isfinite(m) else None, cross_host_pct=cross_pct, n_hosts=n_hosts)


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
    old_median, new_median = float(np.median(old)), float(np.median(new))
    m = spread_multiplier(df, multiplier) if spread is not None else None
    return RegressionCheck(
        old_median_ms=old_median, new_median_ms=new_median, n_old=int(old.size), n_new=int(new.size),
        change_pct=100.0 * (new_median / old_median - 1.0), spread_pct=spread,
        tolerance_pct=tolerance_pct(spread, old.size, new.size, floor_pct=floor_pct, multiplier=m),
        p_value=rank_test_p(old, new, alpha), alpha=alpha, noise_source=source, floor_pct=floor_pct,
        multiplier=m)
