"""When a run's data is steady enough to end it early (an adaptive sweep's ``steady`` rule, docs/adaptive.md).

A run measures at least ``min_s`` seconds; from then on, after each whole second, its per-second samples
so far are checked: the stationarity check of :func:`demuxlab.stats.steady_state` (leading transient
trimmed, no significant drift beyond 2 %) and the within-run 95 % interval of the mean of the kept samples
(Student-t, :func:`demuxlab.stats.point_summary`) relative to that mean. The run stops at the first second
where both pass, the interval inside ``target_rel``; otherwise it measures its whole measure phase.

Pure: samples in, a :class:`SteadyDecision` out. The launchers call :func:`check` live, once a second (the
client ends its measure phase when told); the replay calls :func:`first_stop` over a recorded run's
samples, which gives the same decision the live run would have made.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SteadyRule:
    """Runs that end once steady: at least ``min_s`` measured seconds, then stop at the first whole second
    whose samples are stationary with a within-run interval inside ``target_rel`` (a spec's
    ``adaptive.steady``)."""

    min_s: float
    target_rel: float

    def to_json(self) -> dict[str, Any]:
        return {"min_s": self.min_s, "target_rel": self.target_rel}


@dataclass(frozen=True)
class SteadyDecision:
    """The decision after ``seconds`` samples: ``stop`` (the data is steady), and what it was judged on."""

    stop: bool
    seconds: int  # samples judged
    stationary: bool | None
    halfwidth_rel: float | None  # within-run 95 % interval of the kept samples' mean, relative
    trimmed: int  # leading transient seconds left out
    reason: str

    def to_json(self, min_s: float, target_rel: float, measure_s: float) -> dict[str, Any]:
        """The ``steady_stop`` object of a run record (CONTRACTS.md §5)."""
        return {
            "min_s": min_s,
            "target_rel": target_rel,
            "measure_s": measure_s,
            "stopped_early": self.stop,
            "judged_s": self.seconds,
            "measured_s": self.seconds,
            "stationary": self.stationary,
            "halfwidth_rel": self.halfwidth_rel,
            "trimmed_seconds": self.trimmed,
            "reason": self.reason,
        }


def warm() -> None:
    """Import what :func:`check` needs (scipy.stats: a second or two on a loaded host) before a run starts,
    so that the first check does not delay the stop it decides."""
    from scipy import stats  # noqa: F401


def check(per_second: Sequence[float], min_s: float, target_rel: float) -> SteadyDecision:
    """Whether a run may stop after the samples it has (``per_second``, one per whole second)."""
    # Imported here, as by warm(): a launcher imports this module, and only adaptive runs call it.
    from demuxlab.stats import point_summary, steady_state

    n = len(per_second)
    if n < math.ceil(min_s):
        return SteadyDecision(False, n, None, None, 0, f"{n} s measured, fewer than the minimum {min_s:g} s")
    state = steady_state(per_second)
    kept = list(per_second[state.trimmed_seconds :])
    mean = state.throughput
    if state.stationary is None or mean is None or len(kept) < 2:
        return SteadyDecision(
            False, n, None, None, state.trimmed_seconds, "too few samples after the transient"
        )
    if mean <= 0:
        return SteadyDecision(False, n, state.stationary, None, state.trimmed_seconds, "no throughput")
    hw = point_summary(kept).halfwidth
    rel = None if hw is None else hw / mean
    if not state.stationary:
        drift = state.drift_rel if state.drift_rel is not None else float("nan")
        return SteadyDecision(
            False,
            n,
            False,
            rel,
            state.trimmed_seconds,
            f"not stationary (drift {drift:+.1%} across the window)",
        )
    if rel is None or rel > target_rel:
        shown = "none" if rel is None else f"±{rel:.1%}"
        return SteadyDecision(
            False,
            n,
            True,
            rel,
            state.trimmed_seconds,
            f"within-run interval {shown} wider than ±{target_rel:.1%}",
        )
    return SteadyDecision(
        True,
        n,
        True,
        rel,
        state.trimmed_seconds,
        f"steady after {n} s: stationary, within-run interval ±{rel:.1%}",
    )


def first_stop(per_second: Sequence[float], min_s: float, target_rel: float) -> SteadyDecision:
    """The decision a run with these samples made: the first second at which :func:`check` says stop, or
    the last second's decision (not stopped) when it never did."""
    start = max(1, math.ceil(min_s))
    last = check(per_second, min_s, target_rel)
    for n in range(start, len(per_second) + 1):
        decision = check(per_second[:n], min_s, target_rel)
        if decision.stop:
            return decision
        last = decision
    return last
