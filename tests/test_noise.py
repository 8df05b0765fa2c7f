"""The between-run noise model (cudagraph_bench.results.noise), checked against scipy/numpy written out here."""

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, median_abs_deviation, t

from cudagraph_bench.results import noise

pytestmark = pytest.mark.transformers_free

MEDIANS = [1.00, 1.03, 0.98, 1.10, 1.01, 0.97]
TAIL = 0.001  # one-sided probability of an unchanged run beyond the tolerance


def t_multiplier(df):
    """Student's t quantile the tolerance multiplies the spread by (df < 1 counts as 1)."""
    return t.ppf(1 - TAIL, max(df, 1))


def test_spread_is_the_normal_scaled_mad_of_the_log_medians_in_percent():
    x = np.log(MEDIANS)
    mad = np.median(np.abs(x - np.median(x))) * 1.4826022185056018  # 1 / Phi^-1(3/4)
    assert noise.spread_pct(MEDIANS) == pytest.approx(100 * mad, rel=1e-9)
    assert noise.spread_pct(MEDIANS) == pytest.approx(100 * median_abs_deviation(x, scale="normal"), rel=1e-12)


def test_spread_is_scale_free_and_robust_to_one_odd_run():
    assert noise.spread_pct([m * 7.5 for m in MEDIANS]) == pytest.approx(noise.spread_pct(MEDIANS), rel=1e-12)
    odd = MEDIANS[:-1] + [50.0]
    assert noise.spread_pct(odd) < 2 * noise.spread_pct(MEDIANS)
    assert noise.spread_pct([2.0, 2.0, 2.0]) == 0.0


def test_spread_of_one_run_is_unknown():
    assert noise.spread_pct([1.5]) is None


@pytest.mark.parametrize("bad", [[], [1.0, 0.0], [1.0, -2.0], [1.0, float("nan")], [1.0, float("inf")]])
def test_spread_refuses_non_positive_or_empty_medians(bad):
    with pytest.raises(ValueError):
        noise.spread_pct(bad)


def test_pooled_spread_centres_each_group_and_corrects_for_the_lost_degrees_of_freedom():
    a, b = [1.0, 1.02, 0.99, 1.03], [2.0, 2.05, 1.97, 2.01, 2.02]
    residuals = np.concatenate([np.log(a) - np.median(np.log(a)), np.log(b) - np.median(np.log(b))])
    expected = 100 * median_abs_deviation(residuals, scale="normal") * math.sqrt(9 / (9 - 2))
    assert noise.pooled_spread_pct([a, b]) == pytest.approx(expected, rel=1e-12)
    # a real shift between the groups is not noise: shifting a group changes nothing
    assert noise.pooled_spread_pct([a, [x * 1.5 for x in b]]) == pytest.approx(expected, rel=1e-9)


def test_pooled_spread_skips_single_runs_and_is_none_without_two_residuals():
    a = [1.0, 1.02, 0.99]
    residuals = np.log(a) - np.median(np.log(a))
    expected = 100 * median_abs_deviation(residuals, scale="normal") * math.sqrt(3 / 2)
    assert noise.pooled_spread_pct([a, [5.0]]) == pytest.approx(expected, rel=1e-12)
    assert noise.pooled_spread_pct([[1.0], [2.0]]) is None
    with pytest.raises(ValueError):
        noise.pooled_spread_pct([[1.0, 0.0], [1.0, 1.0]])


@pytest.mark.parametrize("spread, k, n", [(0.0, 5, 1), (1.0, 5, 1), (3.0, 5, 1), (3.0, 5, 5), (10.0, 10, 3)])
def test_tolerance_is_the_floor_or_the_noise_term(spread, k, n):
    expected = max(noise.DEFAULT_FLOOR_PCT, t_multiplier(k - 1) * spread * math.sqrt(1 / k + 1 / n))
    assert noise.tolerance_pct(spread, k, n) == pytest.approx(expected, rel=1e-12)
    # the spread came from other runs: their degrees of freedom, not n_old - 1
    assert noise.tolerance_pct(spread, k, n, df=30) == pytest.approx(
        max(noise.DEFAULT_FLOOR_PCT, t_multiplier(30) * spread * math.sqrt(1 / k + 1 / n)), rel=1e-12)
    assert noise.tolerance_pct(spread, k, n, floor_pct=0.5, multiplier=2.0) == pytest.approx(
        max(0.5, 2.0 * spread * math.sqrt(1 / k + 1 / n)), rel=1e-12)


def test_tolerance_without_a_spread_is_the_floor_and_needs_a_run_per_side():
    assert noise.tolerance_pct(None, 5, 1) == noise.DEFAULT_FLOOR_PCT
    assert noise.tolerance_pct(None, 5, 1, floor_pct=7.5) == 7.5
    for k, n in ((0, 1), (1, 0)):
        with pytest.raises(ValueError):
            noise.tolerance_pct(2.0, k, n)


def test_t_multiplier_shrinks_as_the_spread_gets_more_degrees_of_freedom_and_a_given_one_overrides_it():
    dfs = [1, 2, 4, 9, 29, 100]
    ms = [noise.spread_multiplier(df) for df in dfs]
    assert ms == pytest.approx([t_multiplier(df) for df in dfs], rel=1e-12)
    assert all(a > b for a, b in zip(ms, ms[1:]))
    assert ms[-1] > t.ppf(1 - TAIL, 10**9)  # never below the normal quantile
    assert noise.spread_multiplier(0) == noise.spread_multiplier(1)
    assert noise.spread_multiplier(4, 2.5) == 2.5 and noise.spread_multiplier(100, 2.5) == 2.5
    # the tolerance follows: more runs behind the spread, narrower band; a given multiplier wins
    assert noise.tolerance_pct(3.0, 5, 1, df=4) > noise.tolerance_pct(3.0, 5, 1, df=29)
    assert noise.tolerance_pct(3.0, 5, 1, floor_pct=0.0, multiplier=2.5) == pytest.approx(
        2.5 * 3.0 * math.sqrt(1 / 5 + 1), rel=1e-12)
    c = noise.check_regression([1.0, 1.02, 0.98, 1.01, 0.99], [1.5], spread=3.0, multiplier=2.5, df=4)
    assert c.multiplier == 2.5 and c.tolerance_pct == pytest.approx(max(noise.DEFAULT_FLOOR_PCT, 2.5 * 3.0 * math.sqrt(1 / 5 + 1)))
    c = noise.check_regression([1.0, 1.02, 0.98, 1.01, 0.99], [1.5], spread=3.0, df=29)
    assert c.multiplier == pytest.approx(t_multiplier(29))


@pytest.mark.parametrize("k, n", [(1, 1), (1, 5), (3, 3), (4, 4), (5, 5), (5, 1)])
def test_smallest_rank_p_is_one_over_the_number_of_orderings(k, n):
    assert noise.smallest_rank_p(k, n) == pytest.approx(1 / math.comb(k + n, n), rel=1e-12)


@pytest.mark.parametrize("k, n", [(5, 1), (1, 5), (3, 3), (2, 2)])
def test_rank_test_is_none_when_the_sizes_cannot_get_below_alpha(k, n):
    assert 1 / math.comb(k + n, n) >= noise.DEFAULT_ALPHA
    assert noise.rank_test_p([1.0 + i for i in range(k)], [100.0 + i for i in range(n)]) is None


def test_rank_test_equals_scipy_mannwhitneyu_for_five_against_five():
    old = [1.00, 1.02, 0.99, 1.05, 1.01]
    for new in ([1.10, 1.12, 1.08, 1.15, 1.11], [1.00, 1.03, 0.98, 1.06, 1.02], [0.9, 0.91, 0.92, 0.93, 0.94]):
        expected = mannwhitneyu(new, old, alternative="greater").pvalue
        assert noise.rank_test_p(old, new) == pytest.approx(expected, rel=1e-12)
    all_slower = noise.rank_test_p(old, [2.0, 2.1, 2.2, 2.3, 2.4])
    assert all_slower == pytest.approx(1 / math.comb(10, 5), rel=1e-9)


def test_rank_test_applies_from_four_against_four():
    p = noise.rank_test_p([1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3])
    assert p == pytest.approx(1 / math.comb(8, 4), rel=1e-9) and p < noise.DEFAULT_ALPHA


def test_check_regression_of_one_run_is_the_ratio_against_the_tolerance():
    old = [1.0, 1.02, 0.98, 1.01, 0.99]
    spread = 100 * median_abs_deviation(np.log(old), scale="normal")
    tol = max(noise.DEFAULT_FLOOR_PCT, t_multiplier(5 - 1) * spread * math.sqrt(1 / 5 + 1))
    assert tol > noise.DEFAULT_FLOOR_PCT  # the noise term, not the floor, decides
    base = float(np.median(old))
    above = noise.check_regression(old, [base * (1 + (tol + 0.5) / 100)], spread=spread)
    assert above.regressed and above.p_value is None
    assert above.tolerance_pct == pytest.approx(tol) and above.change_pct == pytest.approx(tol + 0.5)
    assert above.noise_source == "baseline" and (above.n_old, above.n_new) == (5, 1)
    assert above.multiplier == pytest.approx(t_multiplier(4))
    below = noise.check_regression(old, [base * (1 + (tol - 0.5) / 100)], spread=spread)
    assert not below.regressed and not below.beyond_tolerance


def test_check_regression_needs_both_the_ratio_and_the_rank_test():
    old = [1.0, 1.01, 1.02, 1.5, 1.6]
    interleaved = [0.9, 0.95, 1.12, 1.13, 1.14]  # median +9.8%, but not consistently slower
    c = noise.check_regression(old, interleaved, spread=0.0)
    assert c.change_pct == pytest.approx(100 * (1.12 / 1.02 - 1))
    assert c.beyond_tolerance and c.p_value == pytest.approx(
        mannwhitneyu(interleaved, old, alternative="greater").pvalue) and c.p_value >= c.alpha
    assert not c.regressed
    tight = [1.0, 1.01, 1.02, 1.03, 1.04]
    slower = [x * 1.3 for x in tight]
    c = noise.check_regression(tight, slower, spread=0.0)
    assert c.regressed and c.p_value < c.alpha
    # significant but small: within the floor, not a regression
    tiny = [x + 0.045 for x in tight]  # every NEW run slower, the median +4.4%
    c = noise.check_regression(tight, tiny, spread=0.0)
    assert c.p_value < c.alpha and not c.beyond_tolerance and not c.regressed


def test_check_regression_pools_the_spread_of_the_runs_without_a_baseline():
    old, new = [1.0, 1.04, 0.96, 1.02, 0.98], [1.3, 1.34, 1.26, 1.32, 1.28]
    c = noise.check_regression(old, new)
    expected = noise.pooled_spread_pct([old, new])
    assert c.noise_source == "runs" and c.spread_pct == pytest.approx(expected)
    m = t_multiplier((5 - 1) + (5 - 1))  # the pooled spread's degrees of freedom
    assert c.multiplier == pytest.approx(m)
    floor = noise.DEFAULT_FLOOR_PCT
    assert c.tolerance_pct == pytest.approx(max(floor, m * expected * math.sqrt(2 / 5)))
    below, above = 1.0 + (floor - 1.0) / 100.0, 1.0 + (floor + 1.0) / 100.0
    single = noise.check_regression([1.0], [below])
    assert single.noise_source == "none" and single.spread_pct is None and single.tolerance_pct == floor
    assert single.multiplier is None
    assert not single.regressed and noise.check_regression([1.0], [above]).regressed


@pytest.mark.parametrize("old, new", [([], [1.0]), ([1.0], []), ([1.0, 0.0], [1.0]), ([1.0], [-1.0])])
def test_check_regression_refuses_empty_or_non_positive_sides(old, new):
    with pytest.raises(ValueError):
        noise.check_regression(old, new)
