"""Statistics over repeats, as the pages show them: each point's mean and 95 % confidence interval from
:func:`demuxlab.stats.point_summary` (the platform's one interval routine, over the ok runs' throughputs),
whether two points differ (Welch's t-test, not "the intervals overlap"), and which stored prediction a
point shows. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from demuxlab.stats import point_summary
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


def summarise(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """``points`` (with a ``values`` column: the ok runs' throughputs) plus ``n`` (values), ``mean``,
    ``sd``, ``half`` (the CI half-width; NaN with fewer than two values), ``lo``/``hi``, ``half_rel``, and
    ``band`` (whether the interval is drawn: ``MIN_REPEATS_FOR_BAND`` values or more)."""
    n, mean, sd, half = [], [], [], []
    for cell in points.get("values", []):
        vals = values_of(cell)
        n.append(len(vals))
        if not vals:
            mean.append(math.nan)
            sd.append(math.nan)
            half.append(math.nan)
            continue
        s = point_summary(vals, confidence)
        mean.append(s.mean)
        sd.append(math.nan if s.std is None else s.std)
        half.append(math.nan if s.halfwidth is None else s.halfwidth)
    out = points.copy()
    out["n"] = np.array(n, dtype=int)
    out["mean"] = np.array(mean, dtype=float)
    out["sd"] = np.array(sd, dtype=float)
    out["half"] = np.array(half, dtype=float)
    out["lo"] = out["mean"] - out["half"]
    out["hi"] = out["mean"] + out["half"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["half_rel"] = np.where(out["mean"] > 0, out["half"] / out["mean"], np.nan)
    out["band"] = out["n"] >= MIN_REPEATS_FOR_BAND
    return out


def welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have the same mean; None when a side has
    fewer than two values (no variance to test with). Two constant samples: 1 if equal, else 0."""
    if len(a) < 2 or len(b) < 2:
        return None
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if float(np.ptp(xa)) == 0.0 and float(np.ptp(xb)) == 0.0:
        return 1.0 if float(xa[0]) == float(xb[0]) else 0.0
    from scipy.stats import ttest_ind

    return float(ttest_ind(xa, xb, equal_var=False).pvalue)


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
