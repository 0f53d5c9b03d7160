"""Statistics over repeats, as the pages show them: each point's mean and 95 % confidence interval by
:func:`demuxlab.stats.ci_halfwidth` (the project's one interval routine, the one
:func:`demuxlab.stats.point_summary` uses) over the ok runs' throughputs, whether two points differ
(Welch's t-test, not "the intervals overlap"), and which stored prediction a point shows. Pure.

Speed: a page summarises up to a few thousand points (History: every point × revision). The routine's
Student-t quantile costs about 0.4 ms a call and scipy's ``ttest_ind`` about 5 ms, which made a History
page of 1,000 point-revisions take seconds; so the interval's half-width is taken for a standard deviation
of 1 once per (n, confidence) and scaled (it is linear in the standard deviation), and Welch's test is
computed here from the two samples' means and variances with the t distribution's CDF
(``scipy.special.stdtr``): the same numbers, in microseconds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from demuxlab.stats import ci_halfwidth
from demuxlab.vocab import METHOD_EXACT, METHOD_FLUID, METHOD_SSA

#: Below this many repeats a 95 % t-interval is not drawn: with 2 runs its half-width is 12.7 standard
#: errors (t(0.975, 1)), routinely wider than the mean, so a band would mostly show the t quantile.
MIN_REPEATS_FOR_BAND = 3
#: A difference is significant below this p-value (two-sided Welch test).
ALPHA = 0.05
#: Which stored prediction a point shows when a source has several: the SSA (it carries an interval),
#: else the exact solution, else the fluid approximation.
METHOD_PREFERENCE: tuple[str, ...] = (METHOD_SSA, METHOD_EXACT, METHOD_FLUID)


def listed(v: Any) -> list[Any]:
    """An array cell (a list from PostgreSQL's array_agg) as a list; None/NaN (no runs) as []."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return []
    return list(v)


def values_of(v: Any) -> list[float]:
    """A ``values`` cell: the ok runs' throughputs."""
    return [float(x) for x in listed(v) if x is not None]


@functools.lru_cache(maxsize=1024)
def _unit_halfwidth(n: int, confidence: float) -> float | None:
    """:func:`demuxlab.stats.ci_halfwidth` for a standard deviation of 1 (the half-width scales with it)."""
    return ci_halfwidth(1.0, n, confidence)


def _moments(vals: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1; NaN below two values), in plain Python: for the few
    values of a point this is several times faster than numpy's per-call overhead."""
    n = len(vals)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(vals) / n
    if n == 1:
        return mean, math.nan
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (n - 1))


def summarise(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """``points`` (with a ``values`` column: the ok runs' throughputs) plus ``n`` (values), ``mean``,
    ``sd`` (sample, n − 1), ``half`` (the CI half-width; NaN with fewer than two values), ``lo``/``hi``,
    ``half_rel``, and ``band`` (whether the interval is drawn: ``MIN_REPEATS_FOR_BAND`` values or more).
    The same numbers as :func:`demuxlab.stats.point_summary` (a test holds them equal)."""
    cells = [values_of(c) for c in points.get("values", [])]
    moments = [_moments(v) for v in cells]
    n = np.array([len(v) for v in cells], dtype=int)
    mean = np.array([m for m, _ in moments], dtype=float)
    sd = np.array([s for _, s in moments], dtype=float)
    unit = np.array([_unit_halfwidth(int(k), confidence) or math.nan for k in n], dtype=float)
    out = points.copy()
    out["n"] = n
    out["mean"] = mean
    out["sd"] = sd
    out["half"] = unit * sd
    out["lo"] = out["mean"] - out["half"]
    out["hi"] = out["mean"] + out["half"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["half_rel"] = np.where(out["mean"] > 0, out["half"] / out["mean"], np.nan)
    out["band"] = out["n"] >= MIN_REPEATS_FOR_BAND
    return out


def welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have the same mean (unequal variances,
    Welch–Satterthwaite degrees of freedom); None when a side has fewer than two values (no variance to
    test with). Two constant samples: 1 if equal, else 0."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, sa = _moments([float(v) for v in a])
    mb, sb = _moments([float(v) for v in b])
    return welch_from(ma, sa, len(a), mb, sb, len(b))


def welch_from(ma: float, sa: float, na: int, mb: float, sb: float, nb: int) -> float | None:
    """:func:`welch_p` from each sample's mean, standard deviation (n − 1) and size (a summarised point)."""
    if na < 2 or nb < 2:
        return None
    va, vb = sa * sa / na, sb * sb / nb
    diff = ma - mb
    if va + vb == 0.0:
        return 1.0 if diff == 0.0 else 0.0
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    from scipy.special import stdtr

    return float(2.0 * stdtr(df, -abs(t)))


def welch_of(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """:func:`welch_from` for two summarised records (``mean``, ``sd``, ``n``)."""
    return welch_from(
        float(a["mean"]), float(a["sd"]), int(a["n"]), float(b["mean"]), float(b["sd"]), int(b["n"])
    )


def differs(p: float | None) -> str:
    """A p-value in words, as the tables say it."""
    if p is None:
        return "untested (< 2 runs)"
    return "yes" if p < ALPHA else "no"


def pick_predictions(preds: pd.DataFrame) -> pd.DataFrame:
    """One prediction per point and source (and calibration class): by :data:`METHOD_PREFERENCE`."""
    if preds.empty:
        return preds
    rank = {m: i for i, m in enumerate(METHOD_PREFERENCE)}
    p = preds.assign(_rank=preds["method"].map(rank).fillna(len(rank)))
    keys = ["point_id", "source", *(["hardware_class"] if "hardware_class" in p else [])]
    p = p.sort_values([*keys[:2], "_rank"]).drop_duplicates(keys)
    return p.drop(columns="_rank")
