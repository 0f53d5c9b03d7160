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
"""

from __future__ import annotations

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
    from scipy import stats as _st  # imported here: scipy.stats costs ~2 s of CLI start-up

    t = float(_st.t.ppf(0.5 + confidence / 2.0, df=n - 1))
    return t * std / math.sqrt(n)


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
