"""Means with their 95 % intervals, the comparisons the claims make of them, and how they are written.

Two measured means (each with its runs) are compared by the platform's one decision,
:func:`demuxlab.stats.difference` (Welch's t-test, p < 0.05): the Ranking, Compare and History pages decide
"differs" and "tied" the same way. A model's prediction has no runs: a comparison with one is by the
intervals (the model's SSA interval against the measurement's).

Pure: numbers in, numbers or text out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from demuxlab.stats import Difference, sd_from_interval
from demuxlab.stats import difference as stats_difference


@dataclass(frozen=True)
class Est:
    """A mean with its 95 % interval; ``lo``/``hi`` None: no interval (one run). ``n``: the runs behind a
    measured mean (None: a model's prediction)."""

    mean: float
    lo: float | None
    hi: float | None
    n: int | None = None

    @property
    def known(self) -> bool:
        return self.lo is not None and self.hi is not None

    @property
    def measured(self) -> bool:
        return self.n is not None and self.n >= 2 and self.known


def difference(a: Est, b: Est) -> Difference:
    """The one decision (:func:`demuxlab.stats.difference`) between two measured means, their standard
    deviations recovered from their intervals and runs."""
    assert a.lo is not None and a.hi is not None and b.lo is not None and b.hi is not None
    assert a.n is not None and b.n is not None
    sa = sd_from_interval((a.hi - a.lo) / 2.0, a.n)
    sb = sd_from_interval((b.hi - b.lo) / 2.0, b.n)
    return stats_difference(
        a.mean, math.nan if sa is None else sa, a.n, b.mean, math.nan if sb is None else sb, b.n
    )


def above(a: Est, b: Est) -> bool:
    """A is above B: for two measured means, A's mean is higher and the two differ (Welch, p < 0.05: the
    one decision); where one side is a model's prediction, A's interval lies entirely above B's."""
    if a.measured and b.measured:
        return a.mean > b.mean and bool(difference(a, b).differs)
    return a.lo is not None and b.hi is not None and a.lo > b.hi


def fmt_rate(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.4g}k"
    return f"{v:.4g}"


def fmt_est(e: Est, unit: str = "msg/s", fmt: Callable[[float], str] = fmt_rate) -> str:
    if e.lo is None or e.hi is None:
        return f"{fmt(e.mean)} {unit} (one run, no CI)"
    return f"{fmt(e.mean)} {unit} [{fmt(e.lo)}, {fmt(e.hi)}]"


def fmt_g3(v: float) -> str:
    return f"{v:.3g}"


def ratio(a: Est, b: Est) -> Est:
    """a / b with the interval from the extreme ends of both intervals."""
    mean = a.mean / b.mean if b.mean > 0 else math.inf
    if not (a.known and b.known) or not b.lo or b.lo <= 0:
        return Est(mean, None, None)
    assert a.lo is not None and a.hi is not None and b.hi is not None
    return Est(mean, a.lo / b.hi, a.hi / b.lo)


def fmt_ratio(r: Est) -> str:
    if r.lo is None or r.hi is None:
        return f"{r.mean:.3f}× (no CI)"
    return f"{r.mean:.3f}× [{r.lo:.3f}, {r.hi:.3f}]"
