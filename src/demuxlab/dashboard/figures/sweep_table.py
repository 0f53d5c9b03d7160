"""The Sweep page's tables: every point (and hardware class) with its runs, mean, interval and how it is
shown, whether its server was oversubscribed, each source's prediction and error; and the model error per
pattern × notifier × source. Pure."""

from __future__ import annotations

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard.fields import PARAMS
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import pick_predictions, summarise
from demuxlab.dashboard.figures.sweep_view import _interval
from demuxlab.vocab import RATE_SOURCES

SOURCES: tuple[str, ...] = RATE_SOURCES
# What the page shows of :func:`sweep_table` at first (fold.fold_columns): the design, its runs, mean and
# interval, whether it was oversubscribed, each source's prediction and error; the workload's parameters
# where they differ between the rows (else named once above the table, with their value); the CI's
# half-width (the interval says it), the server's CPUs, the predictions' CI and method behind "all columns".
KEY_COLUMNS: tuple[str, ...] = (
    "pattern",
    "notifier",
    "threads",
    "runs_ok",
    "runs_failed",
    "mean_msgs_per_s",
    "interval",
    "oversubscribed",
    *(f"{s}_{c}" for s in SOURCES for c in ("msgs_per_s", "error_pct")),
)
PARAM_COLUMNS: tuple[str, ...] = tuple(c for c in (*PARAMS, "hardware_class") if c not in KEY_COLUMNS)


def sweep_table(points: pd.DataFrame, preds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per point (and hardware class, where the points have one: a row each, never averaged): parameters,
    runs, mean, its 95 % CI and how it is shown, whether the server was oversubscribed, and each source's
    prediction and error (%); a calibrated prediction is matched to its own class's row. Numbers in 4
    significant digits."""
    cols = [*PARAMS, "runs_ok", "runs_failed", "mean_msgs_per_s", "ci95_msgs_per_s", "interval"]
    if points.empty:
        return pd.DataFrame(columns=cols)
    pts = summarise(points)
    out = pts[["point_id", *PARAMS]].copy()
    classed = "hardware_class" in pts
    if classed:
        out["hardware_class"] = [base.cls(c) or "" for c in pts["hardware_class"]]
    recs = base.records(pts)
    out["runs_ok"] = pts["n"].astype(int)
    out["runs_failed"] = pts["n_failed"].astype(int)
    out["mean_msgs_per_s"] = [marks.sig(v) for v in pts["mean"]]
    out["ci95_msgs_per_s"] = [marks.sig(v) for v in pts["half"]]
    out["interval"] = [_interval(r).short() for r in recs]  # the hover says it whole
    if "server_cpus" in pts:
        out["server_cpus"] = [None if c is None or c != c else int(c) for c in pts["server_cpus"]]
        out["oversubscribed"] = ["yes" if r.get("over") else "" for r in recs]
    picked = pick_predictions(preds) if preds is not None and not preds.empty else pd.DataFrame()
    for source in SOURCES if not picked.empty else ():
        out = _with_source(out, picked, source, classed)
    return out.drop(columns="point_id")


def _with_source(out: pd.DataFrame, picked: pd.DataFrame, source: str, classed: bool) -> pd.DataFrame:
    """``out`` with one source's prediction and error columns (its own class's, for calibrated rates)."""
    pr = picked[picked["source"] == source]
    on = ["point_id"]
    if classed and source == "calibration":
        pcls = pr["hardware_class"] if "hardware_class" in pr else [None] * len(pr)
        pr = pr.assign(hardware_class=[base.cls(c) or "" for c in pcls])
        on.append("hardware_class")
    pr = pr[[*on, "predicted", "ci_halfwidth_rel", "method"]]
    if pr.empty:
        return out
    pr = pr.rename(
        columns={
            "predicted": f"{source}_msgs_per_s",
            "ci_halfwidth_rel": f"{source}_ci_rel",
            "method": f"{source}_method",
        }
    )
    out = out.merge(pr, on=on, how="left")
    error = (out[f"{source}_msgs_per_s"] - out["mean_msgs_per_s"]) / out["mean_msgs_per_s"] * 100
    out[f"{source}_msgs_per_s"] = [marks.sig(v) for v in out[f"{source}_msgs_per_s"]]
    out[f"{source}_ci_rel"] = [marks.sig(v, 3) for v in out[f"{source}_ci_rel"]]
    out[f"{source}_error_pct"] = [marks.sig(v, 3) for v in error]
    return out


def error_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per pattern × notifier (× hardware class, where the table has one) × source: points, mean and max
    |error| (%), from :func:`sweep_table`."""
    rows = []
    keys = ["pattern", "notifier", *(["hardware_class"] if "hardware_class" in table else [])]
    for source in SOURCES:
        col = f"{source}_error_pct"
        if col not in table:
            continue
        for gkey, grp in table.dropna(subset=[col]).groupby(keys):
            err = grp[col].abs()
            rows.append(
                {
                    **dict(zip(keys, gkey, strict=True)),
                    "source": source,
                    "points": len(grp),
                    "mean_abs_error_pct": marks.sig(float(err.mean()), 3),
                    "max_abs_error_pct": marks.sig(float(err.max()), 3),
                }
            )
    return pd.DataFrame(rows, columns=[*keys, "source", "points", "mean_abs_error_pct", "max_abs_error_pct"])
