"""The Ranking page's builders, after TechEmpower's results viewer: per workload, the designs (pattern ×
notifier, each at its best thread count) ranked by measured throughput, with their share of the best, the
one decision of whether each differs from the best (:func:`demuxlab.stats.difference`: Welch's t-test,
p < 0.05, n beside it), the client's latency at that load, and the model's rank beside the measured one.

A point whose server threads outnumber its server's CPUs is not a design's best: it is ranked apart, listed
under the ranked designs and flagged (the smoke's 2-thread points on a 1-CPU server were #1). A workload is
every point field that is neither the design nor the thread count (derived from the point's fields); runs
of different hardware classes or server builds are ranked apart, never pooled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import fields, style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import (
    difference_of,
    oversubscribed_text,
    pick_predictions,
    summarise,
)
from demuxlab.dashboard.plot import Fig, FigureDict, bar, scatter
from demuxlab.stats import p_text
from demuxlab.vocab import SOURCE_CALIBRATION, SOURCE_PAPER

DESIGN: tuple[str, ...] = ("pattern", "notifier")
KNOB = "threads"
WORKLOAD: tuple[str, ...] = tuple(f for f in fields.PARAMS if f not in (*DESIGN, KNOB))
GROUP: tuple[str, ...] = (*WORKLOAD, "hardware_class", "build")
COLUMNS: tuple[str, ...] = (
    "workload",
    "rank",
    *DESIGN,
    KNOB,
    "mean_msgs_per_s",
    "ci95_msgs_per_s",
    "runs",
    "share_of_best_pct",
    "differs_from_best",
    "p_vs_best",
    "oversubscribed",
    "latency_p50_us",
    "latency_p99_us",
    "model_rank",
    "model_msgs_per_s",
    "model_threads",
)
# What the page's table shows at first (fold.fold_columns): the ranked designs with their figures and
# the model's rank; the workload, class and build where the rows differ in them (else named once above the
# table); the model's throughput and thread count behind "all columns".
_BEHIND: tuple[str, ...] = ("workload", "model_msgs_per_s", "model_threads")
KEY_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in _BEHIND)
PARAM_COLUMNS: tuple[str, ...] = ("workload", "hardware_class", "build")
APART = "apart"  # the rank of an oversubscribed design: listed, not ranked


def workload_label(row: Any) -> str:
    """``10 µs · 64 conn · 1 B · 1 client thr · closed loop`` (+ class, build where present)."""
    parts = [fields.value_text(k, row[k]) for k in WORKLOAD]
    if base.cls(row.get("hardware_class")):
        parts.append(f"class {row['hardware_class']}")
    if base.cls(row.get("build")):
        parts.append(f"build {base.short_build(row['build'])}")
    return " · ".join(parts)


def default_source(preds: pd.DataFrame | None) -> str:
    """The rates the Ranking opens on: the calibrated ones where the experiment has any (as
    ``recommendations.csv``, :func:`demuxlab.claims.context.model_source`), else the paper's."""
    if preds is not None and not preds.empty and (preds["source"] == SOURCE_CALIBRATION).any():
        return SOURCE_CALIBRATION
    return SOURCE_PAPER


def ranking_table(
    points: pd.DataFrame, preds: pd.DataFrame | None = None, *, source: str = SOURCE_PAPER
) -> pd.DataFrame:
    """One row per workload (× class × build) × design: see the module doc. ``preds`` are the stored
    predictions (any pattern the models cover); ``source`` picks the paper's or the calibrated rates."""
    if points.empty:
        return pd.DataFrame(columns=COLUMNS)
    pts = summarise(points)
    pts = pts[pts["n"] > 0]
    if pts.empty:
        return pd.DataFrame(columns=COLUMNS)
    model = _model_index(preds, source)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in base.records(pts):
        groups.setdefault(tuple(base.key(r.get(k)) for k in GROUP), []).append(r)
    rows: list[dict[str, Any]] = []
    for gkey in sorted(groups, key=lambda k: tuple(str(v) for v in k)):
        rows.extend(_rank(groups[gkey], model, source))
    return pd.DataFrame(rows, columns=[*COLUMNS, *(k for k in GROUP if k not in COLUMNS), "_best_runs"])


def _model_index(preds: pd.DataFrame | None, source: str) -> dict[tuple[int, str | None], float]:
    model: dict[tuple[int, str | None], float] = {}
    if preds is None or preds.empty:
        return model
    picked = pick_predictions(preds)
    picked = picked[picked["source"] == source]
    pcls = picked["hardware_class"] if "hardware_class" in picked else [None] * len(picked)
    for pid, val, c in zip(picked["point_id"], picked["predicted"], pcls, strict=True):
        model[(int(pid), base.cls(c) if source == SOURCE_CALIBRATION else None)] = float(val)
    return model


def _best_points(group: list[dict[str, Any]]) -> tuple[dict[tuple[Any, ...], dict[str, Any]], list[Any]]:
    """Each design's best point among those that fit the server's CPUs, else (ranked apart) its best
    oversubscribed one; the designs in ranking order, the ranked ones first."""
    by_design: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in group:
        by_design.setdefault(tuple(r[k] for k in DESIGN), []).append(r)
    best_of = {}
    for d, rs in by_design.items():
        fit = [r for r in rs if not r.get("over")] or rs
        best_of[d] = max(fit, key=lambda r: float(r["mean"]))
    order = sorted(best_of, key=lambda d: (bool(best_of[d].get("over")), -float(best_of[d]["mean"])))
    return best_of, order


def _rank(
    group: list[dict[str, Any]], model: dict[tuple[int, str | None], float], source: str
) -> list[dict[str, Any]]:
    by_design: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in group:
        by_design.setdefault(tuple(r[k] for k in DESIGN), []).append(r)
    best_of, order = _best_points(group)
    top = best_of[order[0]]

    def predicted(design: tuple[Any, ...]) -> tuple[float, int] | None:
        cls = base.cls(by_design[design][0].get("hardware_class")) if source == SOURCE_CALIBRATION else None
        vals = [
            (model[(int(r["point_id"]), cls)], int(r[KNOB]))
            for r in by_design[design]
            if (int(r["point_id"]), cls) in model and not (r.get("over") and not best_of[design].get("over"))
        ]
        return max(vals) if vals else None

    modelled = {d: m for d in order if (m := predicted(d)) is not None}
    model_order = sorted(modelled, key=lambda d: -modelled[d][0])
    out = []
    rank = 0
    for design in order:
        r = best_of[design]
        apart = bool(r.get("over")) and not top.get("over")
        rank += 0 if apart else 1
        diff = difference_of(r, top)
        pred = modelled.get(design)
        out.append(
            {
                "workload": workload_label(r),
                "rank": APART if apart else rank,
                **{k: r[k] for k in DESIGN},
                KNOB: int(r[KNOB]),
                "mean_msgs_per_s": marks.sig(float(r["mean"])),
                "ci95_msgs_per_s": marks.sig(base.f(r["half"])),
                "runs": int(r["n"]),
                "share_of_best_pct": marks.sig(100.0 * float(r["mean"]) / float(top["mean"]), 3),
                "differs_from_best": "best" if r is top else diff.verdict(),
                "p_vs_best": None if r is top or diff.p is None else marks.sig(diff.p, 2),
                "oversubscribed": oversubscribed_text(r),
                "latency_p50_us": marks.sig(base.f(r.get("latency_p50_us"))),
                "latency_p99_us": marks.sig(base.f(r.get("latency_p99_us"))),
                "model_rank": model_order.index(design) + 1 if pred else None,
                "model_msgs_per_s": marks.sig(pred[0]) if pred else None,
                "model_threads": pred[1] if pred else None,
                "_best_runs": int(top["n"]),
                **{k: r.get(k) for k in GROUP},
            }
        )
    return out


def workloads(table: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(table["workload"])) if not table.empty else []


# -- the figure ---------------------------------------------------------------------------------------------


def _bar_text(r: dict[str, Any]) -> str:
    """What a bar says at its end: best, tied or differs, with p and n; or why it is not ranked."""
    if r["rank"] == APART:
        return "not ranked: oversubscribed"
    v = r["differs_from_best"]
    if v == "best":
        return f"best (n = {r['runs']})"
    if str(v).startswith("untested"):
        return f"untested: fewer than 2 runs (n = {r['runs']} vs {r['_best_runs']})"
    p = p_text(float(r["p_vs_best"])) if r["p_vs_best"] is not None else "?"
    what = "differs from the best" if v == "yes" else "tied with the best"
    return f"{what} (p = {p}, n = {r['runs']} vs {r['_best_runs']})"


def _bar_colour(r: dict[str, Any]) -> str:
    """Filled: the best and the designs that differ from it; open (white): tied with the best or untested
    (the data cannot tell them from it); grey: not ranked."""
    if r["rank"] == APART:
        return style.rgba(style.GREY, 0.35)
    if r["differs_from_best"] in ("best", "yes"):
        return style.rgba(style.colour_for(r["pattern"]), 0.85)
    return "#ffffff"


def ranking_figure(
    table: pd.DataFrame,
    workload: str | None = None,
    *,
    source: str = SOURCE_PAPER,
    model_notes: Sequence[str] = (),
) -> FigureDict:
    """One workload's ranking as horizontal bars (share of the best, %), best at the top, colour = pattern:
    a filled bar for the best and for a design that differs from it, an open bar for one tied with it (or
    untested), each saying which at its end with p and n; oversubscribed designs grey, under the ranked
    ones. The model's prediction as a diamond on the same scale, its rank in the design's label."""
    if table.empty:
        return base.empty_figure("no ok runs to rank")
    shown = str(workload) if workload in set(table["workload"]) else workloads(table)[0]
    recs: list[dict[str, Any]] = base.records(table[table["workload"] == shown])
    names = [_bar_name(r) for r in recs]
    best = float(recs[0]["mean_msgs_per_s"])
    fig = Fig()
    fig.add_trace(
        bar(
            orientation="h",
            y=names,
            x=[r["share_of_best_pct"] for r in recs],
            name="measured: share of the best (filled: differs from it or is it; open: tied with it)",
            marker={
                "color": [_bar_colour(r) for r in recs],
                "line": {"color": [style.colour_for(r["pattern"]) for r in recs], "width": 2},
            },
            text=[_bar_text(r) for r in recs],
            textposition="none",  # the verdicts stand in a column of their own, right of every mark
            customdata=[[r["runs"], r["oversubscribed"] or "fits the server's CPUs"] for r in recs],
            hovertemplate="%{y}<br>%{x:.3g} % of the best<br>%{text}<br>%{customdata[1]}<extra></extra>",
        )
    )
    modelled = [(n, r) for n, r in zip(names, recs, strict=True) if base.f(r["model_msgs_per_s"]) is not None]
    if modelled:
        fig.add_trace(
            scatter(
                y=[n for n, _ in modelled],
                x=[100.0 * float(r["model_msgs_per_s"]) / best for _, r in modelled],
                mode="markers",
                name=f"model, {'calibrated' if source == SOURCE_CALIBRATION else 'paper'} rates (its rank in "
                "the label)",
                marker={"symbol": "diamond", "size": 11, "color": "#000000"},
                hovertemplate="%{y}<br>model: %{x:.3g} % of the measured best<extra></extra>",
            )
        )
    # every bar whole: an oversubscribed design listed apart can measure above the best (215 % on the smoke)
    top = max(
        [100.0, *(float(r["share_of_best_pct"]) for r in recs)]
        + [100.0 * float(r["model_msgs_per_s"]) / best for _, r in modelled]
    )
    for n, r in zip(names, recs, strict=True):
        fig.add_annotation(
            x=top * 1.04, y=n, text=_bar_text(r), xanchor="left", showarrow=False, font={"size": 11}
        )
    _ranking_layout(fig, shown, recs, top, model_notes)
    return fig.to_dict()


def _bar_name(r: dict[str, Any]) -> str:
    head = "–" if r["rank"] == APART else f"{r['rank']}."
    model = f" · model #{int(r['model_rank'])}" if base.f(r.get("model_rank")) is not None else ""
    return (
        f"{head} {r['pattern']} · {r['notifier']} · {r[KNOB]} thr: "
        f"{marks.quantity(float(r['mean_msgs_per_s']), 'msg/s')}{model}"
    )


def _ranking_layout(
    fig: Fig, workload: str, recs: list[dict[str, Any]], top: float, model_notes: Sequence[str]
) -> None:
    apart = sum(1 for r in recs if r["rank"] == APART)
    notes = [f"{apart} oversubscribed design(s) (more server threads than server CPUs): listed, not ranked"]
    notes = (notes if apart else []) + [f"no model: {n}" for n in model_notes[:4]]
    margin = {"l": 360, "r": 30, "t": 80, "b": 64 + 18 * len(notes)}
    fig.update_layout(
        **style.base_layout(
            title={"text": f"Ranking: {workload}", "x": 0.01},
            height=170 + 34 * len(recs) + 18 * len(notes),
            margin=margin,
            # room at the right for the verdicts' column
            xaxis={"title": {"text": "throughput, % of the best design"}, "range": [0, top * 1.75]},
            yaxis={"autorange": "reversed"},
            legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        )
    )
    base.notes_below(fig, notes, 62)  # under the x axis title, as the Sweep's


def designs_ranked(table: pd.DataFrame, workload: str) -> Sequence[str]:
    t = table[table["workload"] == workload]
    return [f"{p}/{n}" for p, n in zip(t["pattern"], t["notifier"], strict=True)]
