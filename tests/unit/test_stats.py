"""Steady-state detection and confidence intervals, on synthetic data with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demuxlab.stats import DRIFT_LIMIT_REL, ci_halfwidth, leading_transient, point_summary, steady_state

# Student t quantiles t(0.975, df) from printed tables (not from scipy), to check point_summary independently.
T_975 = {1: 12.706204736, 2: 4.302652730, 4: 2.776445105, 9: 2.262157163}


@pytest.mark.parametrize("seed", range(10))
def test_flat_noisy_series_is_stationary(seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = rng.normal(80_000.0, 2_000.0, size=60)
    result = steady_state(samples.tolist())
    assert result.stationary is True
    assert result.drift_rel is not None and abs(result.drift_rel) < DRIFT_LIMIT_REL
    assert result.trimmed_seconds == 0
    assert result.throughput == pytest.approx(float(np.mean(samples)))
    assert result.to_json()["throughput_msgs_per_s"] == result.throughput


@pytest.mark.parametrize("seed", range(5))
def test_ramp_is_not_stationary(seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = np.linspace(60_000.0, 90_000.0, 60) + rng.normal(0.0, 1_000.0, 60)
    result = steady_state(samples.tolist())
    assert result.stationary is False
    assert result.drift_rel is not None and result.drift_rel > 0.1
    assert result.p_value is not None and result.p_value < 0.01


def test_slow_decay_is_not_stationary() -> None:
    samples = [100_000.0 * (1.0 - 0.002 * i) for i in range(300)]  # -60 % over a 5-minute run
    result = steady_state(samples)
    assert result.stationary is False and result.drift_rel is not None and result.drift_rel < -0.5


def test_tiny_significant_drift_is_tolerated() -> None:
    # 0.5 % over the window: statistically clear with 300 samples but below the practical limit.
    samples = [100_000.0 * (1.0 + 0.005 * i / 299) + (7.0 if i % 2 else -7.0) for i in range(300)]
    result = steady_state(samples)
    assert result.p_value is not None and result.p_value < 0.01
    assert result.stationary is True


def test_leading_transient_is_trimmed() -> None:
    rng = np.random.default_rng(7)
    steady = rng.normal(50_000.0, 500.0, 30)
    samples = [5_000.0, 20_000.0, 41_000.0, *steady.tolist()]
    result = steady_state(samples)
    assert result.trimmed_seconds == 3
    assert result.samples == 30
    assert result.throughput == pytest.approx(float(np.mean(steady)))
    assert result.stationary is True


def test_trimming_never_takes_more_than_half() -> None:
    samples = [float(i) for i in range(1, 11)]
    assert leading_transient(samples) <= 5


def test_constant_series() -> None:
    result = steady_state([1000.0] * 10)
    assert (result.throughput, result.stationary, result.drift_rel, result.trimmed_seconds) == (
        1000.0,
        True,
        0.0,
        0,
    )


def test_few_samples_give_no_verdict() -> None:
    assert steady_state([]).throughput is None
    two = steady_state([10.0, 12.0])
    assert two.throughput == 11.0 and two.stationary is None and two.drift_rel is None
    three = steady_state([10.0, 11.0, 12.0])
    assert three.stationary is not None


def test_bad_samples() -> None:
    with pytest.raises(ValueError, match="finite"):
        steady_state([1.0, math.nan, 2.0])


def test_known_small_sample_intervals() -> None:
    # n = 5, values 1..5: mean 3, s = sqrt(2.5), halfwidth = t(0.975, 4) · s / sqrt(5).
    summary = point_summary([1.0, 2.0, 3.0, 4.0, 5.0])
    assert summary.n == 5 and summary.mean == 3.0
    assert summary.std == pytest.approx(math.sqrt(2.5))
    expected = T_975[4] * math.sqrt(2.5) / math.sqrt(5)
    assert summary.halfwidth == pytest.approx(expected, rel=1e-8)
    assert (summary.ci_low, summary.ci_high) == (pytest.approx(3 - expected), pytest.approx(3 + expected))
    assert summary.halfwidth_rel == pytest.approx(expected / 3)
    # n = 2, values 10 and 12: s = sqrt(2), halfwidth = t(0.975, 1) · sqrt(2) / sqrt(2).
    pair = point_summary([10.0, 12.0])
    assert pair.halfwidth == pytest.approx(T_975[1], rel=1e-8)
    # n = 3 at 90 %: t(0.95, 2) = 2.919985580.
    three = point_summary([4.0, 6.0, 8.0], confidence=0.90)
    assert three.halfwidth == pytest.approx(2.919985580 * 2.0 / math.sqrt(3), rel=1e-8)


def test_summary_does_not_depend_on_the_order_of_the_repeats() -> None:
    """Records read in another order (a bundle's reproduce, a resumed workflow) give the same bits."""
    import random

    rng = random.Random(0)
    values = [rng.uniform(1e4, 1e5) for _ in range(9)]
    first = point_summary(values)
    orders = [random.Random(seed).sample(values, len(values)) for seed in range(50)]
    assert len({float(np.mean(o)) for o in orders}) > 1  # numpy's mean does depend on the order here
    for other in orders:
        assert point_summary(other) == first


def test_halfwidth_from_aggregates() -> None:
    # The routine behind point_summary, for callers that have only (std, n): t(0.975, n - 1) · s / sqrt(n).
    assert ci_halfwidth(10.0, 10) == pytest.approx(T_975[9] * 10.0 / math.sqrt(10), rel=1e-8)
    assert ci_halfwidth(3.0, 3) == pytest.approx(T_975[2] * 3.0 / math.sqrt(3), rel=1e-8)
    assert ci_halfwidth(0.0, 5) == 0.0
    assert ci_halfwidth(5.0, 1) is None and ci_halfwidth(5.0, 0) is None
    values = [71_000.0, 74_500.0, 69_800.0, 73_100.0]
    assert ci_halfwidth(float(np.std(values, ddof=1)), 4) == point_summary(values).halfwidth
    with pytest.raises(ValueError, match="confidence"):
        ci_halfwidth(1.0, 3, confidence=0.0)


def test_single_value_has_no_interval() -> None:
    summary = point_summary([42.0])
    assert (summary.n, summary.mean) == (1, 42.0)
    assert summary.std is None and summary.ci_low is None and summary.halfwidth is None
    assert summary.to_json()["halfwidth_rel"] is None


def test_bad_summary_input() -> None:
    with pytest.raises(ValueError, match="no values"):
        point_summary([])
    with pytest.raises(ValueError, match="confidence"):
        point_summary([1.0, 2.0], confidence=1.0)


@pytest.mark.parametrize(("n", "confidence"), [(5, 0.95), (10, 0.95), (3, 0.90)])
def test_interval_covers_true_mean_at_nominal_rate(n: int, confidence: float) -> None:
    rng = np.random.default_rng(1234 + n)
    trials, true_mean = 3000, 75_000.0
    covered = 0
    for _ in range(trials):
        summary = point_summary(rng.normal(true_mean, 3_000.0, n).tolist(), confidence=confidence)
        assert summary.ci_low is not None and summary.ci_high is not None
        covered += summary.ci_low <= true_mean <= summary.ci_high
    # Binomial sd at 3000 trials is about 0.004 (0.95) or 0.0055 (0.90): allow about four of them.
    assert abs(covered / trials - confidence) < 0.02


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=1e7, allow_nan=False), min_size=2, max_size=30),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_interval_invariants(values: list[float], confidence: float) -> None:
    summary = point_summary(values, confidence)
    assert summary.halfwidth is not None and summary.halfwidth >= 0
    assert summary.ci_low is not None and summary.ci_high is not None
    assert summary.ci_low <= summary.mean <= summary.ci_high
    assert min(values) - 1e-6 <= summary.mean <= max(values) + 1e-6
    wider = point_summary(values, min(0.999, confidence + 0.005))
    assert wider.halfwidth is not None and wider.halfwidth >= summary.halfwidth


def test_one_decision_of_differs_and_tied() -> None:
    """Welch's t-test at α = 0.05 (scipy's numbers), untested below 2 runs on a side, its words with p and n;
    the standard deviation behind an interval recovered exactly (the claims keep intervals only)."""
    from scipy.stats import ttest_ind

    from demuxlab.stats import ALPHA, difference_of, sd_from_interval, welch_p

    a, b = [100.0, 103.0, 98.0], [90.0, 91.5, 92.0, 89.0]
    d = difference_of(a, b)
    assert d.p == pytest.approx(float(ttest_ind(a, b, equal_var=False).pvalue), rel=1e-9)
    assert d.p < ALPHA and d.differs is True and d.tied is False and d.verdict() == "yes"
    assert d.words().startswith("differs (Welch, p = ") and d.words().endswith("n = 3 vs 4)")
    tied = difference_of([100.0, 110.0], [104.0, 108.0])
    assert tied.differs is False and tied.tied is True and tied.verdict() == "no" and "tied" in tied.words()
    one = difference_of([100.0], [90.0, 91.0])
    assert one.p is None and one.differs is None and one.verdict() == "untested (< 2 runs)"
    assert welch_p(1.0, 0.0, 2, 1.0, 0.0, 2) == 1.0 and welch_p(1.0, 0.0, 2, 2.0, 0.0, 2) == 0.0
    s = point_summary(a)
    assert s.halfwidth is not None and sd_from_interval(s.halfwidth, 3) == pytest.approx(s.std)
