"""Statistics: literal numbers for summaries, reductions and bootstrap intervals."""

import math

import numpy as np
import pytest

from cudagraph_bench.results import stats

pytestmark = pytest.mark.transformers_free


def test_summarize_literal_numbers():
    s = stats.summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert s.n == 5
    assert s.mean_ms == 3.0
    assert s.median_ms == 3.0
    assert s.p95_ms == pytest.approx(4.8)  # linear interpolation: 4 + 0.8 * (5 - 4)
    assert (s.min_ms, s.max_ms) == (1.0, 5.0)
    assert s.stddev_ms == pytest.approx(math.sqrt(2.5))  # sample stddev, ddof=1


def test_summarize_even_count_median_and_single_round():
    assert stats.summarize([1.0, 2.0, 10.0, 20.0]).median_ms == 6.0
    one = stats.summarize([2.5])
    assert (one.n, one.median_ms, one.p95_ms, one.stddev_ms) == (1, 2.5, 2.5, 0.0)


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_summarize_rejects_empty_and_non_finite(bad):
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_reduction_literals():
    assert stats.reduction_pct(10.0, 6.0) == pytest.approx(40.0)
    assert stats.reduction_pct(10.0, 12.0) == pytest.approx(-20.0)
    with pytest.raises(ValueError):
        stats.reduction_pct(0.0, 1.0)


def test_bootstrap_of_constant_samples_is_the_point():
    assert stats.reduction_ci([10.0] * 30, [6.0] * 30) == pytest.approx((0.4, 0.4))
    assert stats.reduction_ci([10.0] * 20, [11.5] * 25) == pytest.approx((-0.15, -0.15))


def test_bootstrap_two_valued_sample_literal_interval():
    # graph: 51 rounds of 5 ms and 50 of 7 ms -> every resampled median is 5 or 7 (n is odd), each
    # with probability near 1/2, so the 2.5% and 97.5% bootstrap quantiles are reductions 0.5 and 0.3.
    graph = [5.0] * 51 + [7.0] * 50
    low, high = stats.reduction_ci([10.0] * 40, graph)
    assert (low, high) == pytest.approx((0.3, 0.5))


def test_bootstrap_is_seeded_and_seed_matters():
    rng = np.random.default_rng(7)
    eager, graph = rng.normal(8.0, 0.5, 100), rng.normal(2.0, 0.2, 100)
    a = stats.reduction_ci(eager, graph)
    assert stats.reduction_ci(eager, graph) == a
    assert stats.reduction_ci(eager, graph, seed=1) != a
    point = stats.reduction_pct(np.median(eager), np.median(graph)) / 100
    assert a[0] < point < a[1]


def test_bootstrap_interval_narrows_with_more_rounds_and_lower_confidence():
    rng = np.random.default_rng(3)
    small = stats.reduction_ci(rng.normal(8, 1, 30), rng.normal(2, 0.5, 30))
    large = stats.reduction_ci(rng.normal(8, 1, 3000), rng.normal(2, 0.5, 3000))
    assert large[1] - large[0] < (small[1] - small[0]) / 3
    eager, graph = rng.normal(8, 1, 100), rng.normal(2, 0.5, 100)
    wide = stats.reduction_ci(eager, graph, confidence=0.99)
    narrow = stats.reduction_ci(eager, graph, confidence=0.5)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


def test_bootstrap_interval_covers_the_true_reduction_most_of_the_time():
    # Normal rounds: true medians 8 ms and 2 ms -> true reduction 0.75. A 95% interval should cover it
    # in roughly 95% of independent experiments (the percentile method is approximate for n=60).
    rng = np.random.default_rng(11)
    covered = 0
    for i in range(100):
        lo, hi = stats.reduction_ci(rng.normal(8.0, 0.8, 60), rng.normal(2.0, 0.3, 60), n_resamples=400, seed=i)
        covered += lo <= 0.75 <= hi
    assert 85 <= covered <= 100


def test_bootstrap_rejects_bad_confidence_and_empty_samples():
    with pytest.raises(ValueError):
        stats.reduction_ci([1.0], [1.0], confidence=1.0)
    with pytest.raises(ValueError):
        stats.reduction_ci([], [1.0])


def test_middle90_pct_literals():
    # sorted 1..5: p5 = 1 + 0.2 * (2 - 1) = 1.2, p95 = 4.8, median 3 -> 100 * 3.6 / 3
    assert stats.middle90_pct([5.0, 1.0, 4.0, 2.0, 3.0]) == pytest.approx(120.0)
    assert stats.middle90_pct([2.0] * 7) == 0.0
    with pytest.raises(ValueError, match="median must be > 0"):
        stats.middle90_pct([0.0, 0.0, 1.0])
    with pytest.raises(ValueError):
        stats.middle90_pct([])
