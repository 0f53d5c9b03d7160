"""Statistics over repeats, as the pages show them: each point's mean and 95 % confidence interval by
:func:`demuxlab.stats.ci_halfwidth` (the project's one interval routine, the one
:func:`demuxlab.stats.point_summary` uses) over the ok runs' throughputs, whether two points differ
(:func:`demuxlab.stats.difference`: Welch's t-test, the one decision of "differs" and "tied"), when an
interval is drawn (:mod:`demuxlab.marks`' rule, the report's too), whether a point is oversubscribed, and
which stored prediction a point shows. Pure.

Speed: a page summarises up to a few thousand points (History: every point × revision); the interval's
half-width is taken for a standard deviation of 1 once per (n, confidence) and scaled (it is linear in the
standard deviation), and Welch's test runs on the summarised moments (microseconds a test).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from demuxlab import marks
from demuxlab.stats import ALPHA, Difference, ci_halfwidth, difference
from demuxlab.stats import welch_p as _welch
from demuxlab.vocab import METHOD_EXACT, METHOD_FLUID, METHOD_SSA

__all__ = ["ALPHA", "MIN_REPEATS_FOR_BAND", "Difference"]

#: From this many repeats a point's 95 % interval is drawn (:data:`demuxlab.marks.MIN_RUNS_FOR_INTERVAL`:
#: the dashboard's figures and the report's draw by one rule).
MIN_REPEATS_FOR_BAND = marks.MIN_RUNS_FOR_INTERVAL
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
    ``half_rel``, ``band`` (whether the interval is drawn: ``MIN_REPEATS_FOR_BAND`` values or more) and
    ``over`` (the server's threads outnumber its CPUs: ``server_cpus``, where the frame has it).
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
    if "server_cpus" in out and "threads" in out:
        out["over"] = [
            c is not None and c == c and int(t) > int(c)
            for t, c in zip(out["threads"], out["server_cpus"], strict=True)
        ]
    else:
        out["over"] = False
    return out


def welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have the same mean
    (:func:`demuxlab.stats.welch_p`); None when a side has fewer than two values."""
    ma, sa = _moments([float(v) for v in a])
    mb, sb = _moments([float(v) for v in b])
    return _welch(ma, sa, len(a), mb, sb, len(b))


def difference_of(a: dict[str, Any], b: dict[str, Any]) -> Difference:
    """:func:`demuxlab.stats.difference` of two summarised records (``mean``, ``sd``, ``n``)."""
    return difference(
        float(a["mean"]), float(a["sd"]), int(a["n"]), float(b["mean"]), float(b["sd"]), int(b["n"])
    )


def welch_of(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Welch's p-value of two summarised records."""
    return difference_of(a, b).p


def oversubscribed(r: dict[str, Any]) -> bool:
    """Whether a summarised point's server threads outnumber the CPUs its runs' server was pinned to
    (:func:`summarise`'s ``over``)."""
    return bool(r.get("over"))


def oversubscribed_text(r: dict[str, Any]) -> str:
    """``oversubscribed: 2 server threads on 1 CPU`` (hover, tables), or ``""``."""
    if not oversubscribed(r):
        return ""
    cpus = r.get("server_cpus")
    on = "fewer CPUs" if cpus is None or cpus != cpus else f"{int(cpus)} CPU{'s' * (int(cpus) != 1)}"
    return f"oversubscribed: {int(r['threads'])} server threads on {on}"


def pick_predictions(preds: pd.DataFrame) -> pd.DataFrame:
    """One prediction per point and source (and calibration class): by :data:`METHOD_PREFERENCE`."""
    if preds.empty:
        return preds
    rank = {m: i for i, m in enumerate(METHOD_PREFERENCE)}
    p = preds.assign(_rank=preds["method"].map(rank).fillna(len(rank)))
    keys = ["point_id", "source", *(["hardware_class"] if "hardware_class" in p else [])]
    p = p.sort_values([*keys[:2], "_rank"]).drop_duplicates(keys)
    return p.drop(columns="_rank")
