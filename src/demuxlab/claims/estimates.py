"""Means with their 95 % intervals, the comparisons the claims make of them, and how they are written.

Pure: numbers in, numbers or text out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Est:
    """A mean with its 95 % interval; ``lo``/``hi`` None: no interval (one run)."""

    mean: float
    lo: float | None
    hi: float | None

    @property
    def known(self) -> bool:
        return self.lo is not None and self.hi is not None


def above(a: Est, b: Est) -> bool:
    """A's interval lies entirely above B's."""
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
