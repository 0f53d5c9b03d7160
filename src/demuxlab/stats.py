"""Statistics of runs: steady-state throughput of one run, and confidence intervals over repeats.

Steady state of one run (``per_second``: the client's per-second throughput over the measure phase):

* Leading transient: the second half of the samples is taken as steady. Its median *m* and robust spread
  *s* = 1.4826 · MAD (the normal-consistent median absolute deviation) give a band *m* ± 3 *s*; leading
  samples outside that band are trimmed, one by one, stopping at the first sample inside it and never
  trimming more than half of the samples. A flat noisy series loses a sample to this rule with
  probability ≈ 0.3 %.
* Stationarity of what is left (at least 3 samples): a least-squares line through the samples;
  ``drift_rel`` = slope × (n − 1) / mean, the relative change the line predicts across the window. The
  run is *not* stationary when the slope is significant (two-sided p < 0.01) **and** the drift exceeds
  2 % of the mean: a long run makes tiny drifts significant, a short one makes large noise look like
  drift, and either alone would flag healthy runs. Fewer than 3 samples: ``stationary`` is None.
* Throughput: the mean of the kept samples.

Over repeats, :func:`point_summary` gives mean, sample standard deviation and a Student-t confidence
interval (seed 001 used 5 batches and 95 % intervals); :func:`ci_halfwidth`, the interval's half-width
from the standard deviation and the count, is the one confidence-interval routine of the project (the
report, the claims and the validation through :func:`point_summary`; callers with aggregates only, such
as the dashboard's SQL, directly).

Whether two points differ (the one decision, :func:`difference`): Welch's two-sided t-test of their runs
(unequal variances, Welch–Satterthwaite degrees of freedom) at :data:`ALPHA`; a side with fewer than two
runs has no variance to test with, and the pair is *untested*, never tied. "Differs from the best" and
"tied with the best" on the Ranking, Compare, History and Claims pages, in ``recommendations.csv``, the
claims' verdicts and the report are this test and nothing else (not "the intervals overlap": two 95 %
intervals overlap for differences Welch's test finds at p ≈ 0.006, so overlap called ties that the
Ranking called differences). Every verdict says its n beside it (:meth:`Difference.words`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: A slope with p below this is a real trend...
DRIFT_ALPHA = 0.01
#: ...and a trend larger than this (relative change across the window) is a non-stationary run.
DRIFT_LIMIT_REL = 0.02
#: Leading samples farther than this many robust standard deviations from the steady median are transient.
TRANSIENT_K = 3.0
#: 1 / Φ⁻¹(3/4): scales a MAD to a standard deviation for normal data.
_MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class SteadyState:
    throughput: float | None  # None without samples
    stationary: bool | None  # None with fewer than 3 kept samples
    drift_rel: float | None
    trimmed_seconds: int
    samples: int  # kept after trimming
    p_value: float | None  # of the regression slope

    def to_json(self) -> dict[str, Any]:
        """The ``stats`` object of a run record (CONTRACTS.md §5)."""
        return {
            "throughput_msgs_per_s": self.throughput,
            "stationary": self.stationary,
            "drift_rel": self.drift_rel,
            "trimmed_seconds": self.trimmed_seconds,
        }


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float | None  # sample standard deviation (n − 1); None for n = 1
    ci_low: float | None
    ci_high: float | None
    halfwidth: float | None
    halfwidth_rel: float | None  # halfwidth / |mean|; None when the mean is 0

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "halfwidth": self.halfwidth,
            "halfwidth_rel": self.halfwidth_rel,
        }


def _as_array(values: Sequence[float], what: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1:
        raise ValueError(f"{what}: expected a flat sequence of numbers")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{what}: every value must be finite")
    return data


def leading_transient(per_second: Sequence[float]) -> int:
    """How many leading samples lie outside the steady band of the second half (at most half of them)."""
    data = _as_array(per_second, "per_second")
    n = len(data)
    if n < 4:
        return 0
    steady = data[n // 2 :]
    median = float(np.median(steady))
    spread = _MAD_TO_SD * float(np.median(np.abs(steady - median)))
    # A flat tail has no spread; a relative floor keeps float noise from counting as a transient.
    spread = max(spread, 1e-9 * abs(median), 1e-12)
    trimmed = 0
    while trimmed < n // 2 and abs(data[trimmed] - median) > TRANSIENT_K * spread:
        trimmed += 1
    return trimmed


def steady_state(per_second: Sequence[float]) -> SteadyState:
    """Throughput, stationarity and drift of one run's per-second samples (rules in the module doc)."""
    data = _as_array(per_second, "per_second")
    if len(data) == 0:
        return SteadyState(None, None, None, 0, 0, None)
    trimmed = leading_transient(data.tolist())
    kept = data[trimmed:]
    mean = float(np.mean(kept))
    n = len(kept)
    if n < 3:
        return SteadyState(mean, None, None, trimmed, n, None)
    if float(np.ptp(kept)) == 0.0:
        return SteadyState(mean, True, 0.0, trimmed, n, 1.0)
    from scipy import stats as _st  # imported here: scipy.stats costs ~2 s of CLI start-up

    fit = _st.linregress(np.arange(n, dtype=np.float64), kept)
    slope = float(fit.slope)
    p_value = float(fit.pvalue)
    if mean == 0.0:
        # No scale to relate the slope to (throughput is never negative, so this is pathological).
        return SteadyState(mean, p_value >= DRIFT_ALPHA, None, trimmed, n, p_value)
    drift_rel = slope * (n - 1) / abs(mean)
    stationary = not (p_value < DRIFT_ALPHA and abs(drift_rel) > DRIFT_LIMIT_REL)
    return SteadyState(mean, stationary, drift_rel, trimmed, n, p_value)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def ci_halfwidth(std: float, n: int, confidence: float = 0.95) -> float | None:
    """Half-width of the Student-t confidence interval of a mean of ``n`` values whose sample standard
    deviation (n − 1) is ``std``: t(1/2 + confidence/2, n − 1) · std / √n; None for n < 2 (no interval).

    The project's one confidence-interval routine: :func:`point_summary` uses it on the values themselves,
    and a caller that has only the aggregates (mean, std, n: a SQL ``GROUP BY``) calls it directly."""
    _check_confidence(confidence)
    if n < 2:
        return None
    return _t_quantile(n, confidence) * std / math.sqrt(n)


@functools.lru_cache(maxsize=1024)
def _t_quantile(n: int, confidence: float) -> float:
    """t(1/2 + confidence/2, n − 1), cached: a page summarises thousands of points, each quantile ~0.4 ms."""
    from scipy import stats as _st  # imported here: scipy.stats costs ~2 s of CLI start-up

    return float(_st.t.ppf(0.5 + confidence / 2.0, df=n - 1))


def point_summary(values: Sequence[float], confidence: float = 0.95) -> Summary:
    """Mean and Student-t confidence interval (:func:`ci_halfwidth`) of repeated measurements (n = 1: no
    interval)."""
    _check_confidence(confidence)
    # Sorted: the repeats' order (the order their records were read in) must not change the last bits of
    # the mean, or a bundle's reproduce would find its tables differing from the workflow's.
    data = np.sort(_as_array(values, "values"))
    n = len(data)
    if n == 0:
        raise ValueError("point_summary: no values")
    mean = float(np.mean(data))
    if n == 1:
        return Summary(1, mean, None, None, None, None, None)
    std = float(np.std(data, ddof=1))
    halfwidth = ci_halfwidth(std, n, confidence)
    assert halfwidth is not None
    return Summary(
        n=n,
        mean=mean,
        std=std,
        ci_low=mean - halfwidth,
        ci_high=mean + halfwidth,
        halfwidth=halfwidth,
        halfwidth_rel=halfwidth / abs(mean) if mean != 0.0 else None,
    )


# -- whether two points differ ---------------------------------------------------------------------------

#: The test and the level of the one decision "these two means differ" (module doc).
DIFFERENCE_TEST = "Welch's t-test"
ALPHA = 0.05


@dataclass(frozen=True)
class Difference:
    """Whether two points' means differ: Welch's two-sided p-value (None: untested, a side has fewer than
    two runs) and the runs on each side."""

    p: float | None
    n_a: int
    n_b: int

    @property
    def tested(self) -> bool:
        return self.p is not None

    @property
    def differs(self) -> bool | None:
        """True: the means differ (p < :data:`ALPHA`); False: tied; None: untested."""
        return None if self.p is None else self.p < ALPHA

    @property
    def tied(self) -> bool | None:
        return None if self.p is None else not self.p < ALPHA

    @property
    def runs(self) -> str:
        return f"n = {self.n_a} vs {self.n_b}"

    def verdict(self) -> str:
        """``yes``, ``no`` (tied) or ``untested (< 2 runs)``: how a table's "differs" column reads."""
        if self.p is None:
            return "untested (< 2 runs)"
        return "yes" if self.p < ALPHA else "no"

    def words(self) -> str:
        """The verdict with its test, p and n: ``differs (Welch, p = 0.0045, n = 2 vs 2)``."""
        if self.p is None:
            return f"untested: fewer than 2 runs on a side ({self.runs})"
        what = "differs" if self.p < ALPHA else "tied"
        return f"{what} (Welch, p = {p_text(self.p)}, {self.runs})"


def p_text(p: float) -> str:
    """A p-value in 2 significant digits (``0.0045``, ``0.21``), very small ones as ``< 0.0001``."""
    return "< 0.0001" if p < 1e-4 else f"{p:.2g}"


def welch_p(ma: float, sa: float, na: int, mb: float, sb: float, nb: int) -> float | None:
    """Two-sided p-value of Welch's t-test that two samples (mean, sample standard deviation (n − 1), size)
    have the same mean; None when a side has fewer than two values. Two constant samples: 1 if their means
    are equal, else 0. (The t distribution's CDF, ``scipy.special.stdtr``: microseconds a test, where
    ``scipy.stats.ttest_ind`` takes milliseconds; the same numbers.)"""
    if na < 2 or nb < 2 or not (math.isfinite(sa) and math.isfinite(sb)):
        return None
    va, vb = sa * sa / na, sb * sb / nb
    diff = ma - mb
    if va + vb == 0.0:
        return 1.0 if diff == 0.0 else 0.0
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    from scipy.special import stdtr

    return float(2.0 * stdtr(df, -abs(t)))


def difference(ma: float, sa: float, na: int, mb: float, sb: float, nb: int) -> Difference:
    """The one decision (module doc) from two points' means, standard deviations and runs."""
    return Difference(welch_p(ma, sa, na, mb, sb, nb), int(na), int(nb))


def difference_of(a: Sequence[float], b: Sequence[float]) -> Difference:
    """:func:`difference` of two points' runs (their throughputs)."""
    ma, sa = _mean_sd(a)
    mb, sb = _mean_sd(b)
    return difference(ma, sa, len(a), mb, sb, len(b))


def sd_from_interval(halfwidth: float, n: int, confidence: float = 0.95) -> float | None:
    """The sample standard deviation behind a Student-t interval of half-width ``halfwidth`` over ``n``
    values (the inverse of :func:`ci_halfwidth`), for callers that kept only the interval; None for n < 2."""
    unit = ci_halfwidth(1.0, n, confidence)
    return None if unit is None or unit == 0.0 else halfwidth / unit


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    vals = [float(v) for v in values]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(vals) / n
    if n == 1:
        return mean, math.nan
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (n - 1))
