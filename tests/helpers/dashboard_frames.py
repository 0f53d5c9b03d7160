"""Small frames in the shape the dashboard's queries return them (``demuxlab.dashboard.data``), for the
tests of the pure figure builders: measured points with their runs' throughputs, and predictions."""

from __future__ import annotations

from typing import Any

import pandas as pd


def spread(mean: float, sd: float, n: int = 3) -> list[float]:
    """``n`` values (odd or even) whose mean is ``mean`` and sample standard deviation ``sd``."""
    if n == 1:
        return [mean]
    if n == 3:
        return [mean - sd, mean, mean + sd]
    half = n // 2
    a = sd * ((n - 1) / n) ** 0.5  # ±a, half each: sample sd = a·sqrt(n/(n−1))
    vals = [mean - a] * half + [mean + a] * half
    return vals + ([mean] if n % 2 else [])


def points(
    patterns: tuple[str, ...] = ("hsha", "lf"),
    notifiers: tuple[str, ...] = ("epoll-lt", "select"),
    threads: tuple[int, ...] = (2, 4, 8),
    *,
    n: int = 3,
    start_id: int = 1,
    mean: Any = None,
    **over: Any,
) -> pd.DataFrame:
    """A sweep of ``patterns × notifiers × threads`` as ``data.points.measured`` returns it: each point
    with ``n`` runs around ``mean(pattern, notifier, threads)`` (default 1000 × threads), sd 1 % of it."""
    rows = []
    pid = start_id - 1
    for pattern in patterns:
        for notifier in notifiers:
            for t in threads:
                pid += 1
                m = float(mean(pattern, notifier, t)) if mean else 1000.0 * t
                vals = spread(m, m / 100.0, n) if n else []
                rows.append(
                    {
                        "point_id": pid,
                        "point_key": f"{pattern}/{notifier}/t{t}/w10/c64/b1/ct1/rclosed",
                        "pattern": pattern,
                        "notifier": notifier,
                        "threads": t,
                        "work_us": 10.0,
                        "connections": 64,
                        "msg_size": 1,
                        "client_threads": 1,
                        "rate": None,
                        "hardware_class": None,
                        "build": None,
                        "n_ok": len(vals),
                        "n_failed": 0,
                        "values": vals,
                        "run_ids": [f"{pid:08d}-0000-0000-0000-{r:012d}" for r in range(len(vals))],
                        "latency_p50_us": 5.0 * t,
                        "latency_p99_us": 20.0 * t,
                        **over,
                    }
                )
    return pd.DataFrame(rows)


def scaled(frame: pd.DataFrame, mask: Any, factor: float) -> pd.DataFrame:
    """``frame`` with the runs of the rows in ``mask`` multiplied by ``factor``."""
    out = frame.copy()
    out["values"] = [
        [v * factor for v in vals] if m else list(vals) for vals, m in zip(out["values"], mask, strict=True)
    ]
    return out


def preds(pts: pd.DataFrame) -> pd.DataFrame:
    """For every point: the paper's fluid (×2) and SSA (×1.1, CI 2 %), and a calibrated SSA (×0.9)."""
    rows = []
    for p, vals in zip(pts["point_id"], pts["values"], strict=True):
        m = sum(vals) / len(vals)
        rows.append(
            {
                "point_id": p,
                "source": "paper",
                "method": "fluid",
                "predicted": m * 2,
                "ci_halfwidth_rel": None,
            }
        )
        rows.append(
            {
                "point_id": p,
                "source": "paper",
                "method": "ssa",
                "predicted": m * 1.1,
                "ci_halfwidth_rel": 0.02,
            }
        )
        rows.append(
            {
                "point_id": p,
                "source": "calibration",
                "method": "ssa",
                "predicted": m * 0.9,
                "ci_halfwidth_rel": 0.01,
            }
        )
    return pd.DataFrame(rows)


def names(fig: dict[str, Any]) -> list[str]:
    return [t.get("name", "") for t in fig["data"]]


def titles(fig: dict[str, Any]) -> list[str]:
    return [a["text"] for a in fig["layout"]["annotations"]]
