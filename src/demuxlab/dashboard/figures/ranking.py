"""The Ranking page's builders, after TechEmpower's results viewer: per workload, the designs (pattern ×
notifier, each at its best thread count) ranked by measured throughput, with their share of the best, a
Welch t-test against the best (not "the intervals overlap"), the client's latency at that load, and the
model's rank beside the measured one.

A workload is every point field that is neither the design nor the thread count (derived from the point's
fields); runs of different hardware classes or server builds are ranked apart, never pooled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from demuxlab.dashboard import fields, style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import differs, pick_predictions, summarise, welch_of
from demuxlab.dashboard.plot import Fig, FigureDict, bar, scatter

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
    "p_vs_best",
    "differs_from_best",
    "latency_p50_us",
    "latency_p99_us",
    "model_rank",
    "model_msgs_per_s",
    "model_threads",
)


def workload_label(row: Any) -> str:
    """``10 µs · 64 conn · 1 B · 1 client thr · closed loop`` (+ class, build where present)."""
    parts = [fields.value_text(k, row[k]) for k in WORKLOAD]
    if base.cls(row.get("hardware_class")):
        parts.append(f"class {row['hardware_class']}")
    if base.cls(row.get("build")):
        parts.append(f"build {base.short_build(row['build'])}")
    return " · ".join(parts)


def ranking_table(
    points: pd.DataFrame, preds: pd.DataFrame | None = None, *, source: str = "paper"
) -> pd.DataFrame:
    """One row per workload (× class × build) × design: see the module doc. ``preds`` are the stored
    predictions (any pattern the models cover); ``source`` picks the paper's or the calibrated rates."""
    if points.empty:
        return pd.DataFrame(columns=COLUMNS)
    pts = summarise(points)
    pts = pts[pts["n"] > 0]
    if pts.empty:
        return pd.DataFrame(columns=COLUMNS)
    model: dict[tuple[int, str | None], float] = {}
    if preds is not None and not preds.empty:
        picked = pick_predictions(preds)
        picked = picked[picked["source"] == source]
        pcls = picked["hardware_class"] if "hardware_class" in picked else [None] * len(picked)
        for pid, val, c in zip(picked["point_id"], picked["predicted"], pcls, strict=True):
            model[(int(pid), base.cls(c) if source == "calibration" else None)] = float(val)
    records: list[dict[str, Any]] = base.records(pts)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(tuple(base.key(r.get(k)) for k in GROUP), []).append(r)
    rows: list[dict[str, Any]] = []
    for gkey in sorted(groups, key=lambda k: tuple(str(v) for v in k)):
        rows.extend(_rank(groups[gkey], model, source))
    return pd.DataFrame(rows, columns=list(COLUMNS) + [k for k in GROUP if k not in COLUMNS])


def _rank(
    group: list[dict[str, Any]], model: dict[tuple[int, str | None], float], source: str
) -> list[dict[str, Any]]:
    by_design: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in group:
        by_design.setdefault(tuple(r[k] for k in DESIGN), []).append(r)
    best_of = {d: max(rs, key=lambda r: float(r["mean"])) for d, rs in by_design.items()}
    order = sorted(best_of, key=lambda d: -float(best_of[d]["mean"]))
    top = best_of[order[0]]

    def predicted(design: tuple[Any, ...]) -> tuple[float, int] | None:
        vals = [
            (model[k], int(r[KNOB]))
            for r in by_design[design]
            if (
                k := (
                    int(r["point_id"]),
                    base.cls(r.get("hardware_class")) if source == "calibration" else None,
                )
            )
            in model
        ]
        return max(vals) if vals else None

    modelled = {d: m for d in order if (m := predicted(d)) is not None}
    model_order = sorted(modelled, key=lambda d: -modelled[d][0])
    out = []
    for rank, design in enumerate(order, start=1):
        r = best_of[design]
        p = None if rank == 1 else welch_of(r, top)
        pred = modelled.get(design)
        out.append(
            {
                "workload": workload_label(r),
                "rank": rank,
                **{k: r[k] for k in DESIGN},
                KNOB: int(r[KNOB]),
                "mean_msgs_per_s": round(float(r["mean"]), 1),
                "ci95_msgs_per_s": None if r["half"] != r["half"] else round(float(r["half"]), 1),
                "runs": int(r["n"]),
                "share_of_best_pct": round(100.0 * float(r["mean"]) / float(top["mean"]), 1),
                "p_vs_best": None if p is None else round(p, 4),
                "differs_from_best": "best" if rank == 1 else differs(p),
                "latency_p50_us": base.f(r.get("latency_p50_us")),
                "latency_p99_us": base.f(r.get("latency_p99_us")),
                "model_rank": model_order.index(design) + 1 if pred else None,
                "model_msgs_per_s": round(pred[0], 1) if pred else None,
                "model_threads": pred[1] if pred else None,
                **{k: r.get(k) for k in GROUP},
            }
        )
    return out


def workloads(table: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(table["workload"])) if not table.empty else []


def ranking_figure(table: pd.DataFrame, workload: str | None = None, *, source: str = "paper") -> FigureDict:
    """One workload's ranking as horizontal bars (share of the best, %), best at the top: colour = pattern,
    hatch = notifier; an open bar where the design does not differ significantly from the best; the
    model's prediction as a diamond on the same scale (share of the measured best)."""
    if table.empty:
        return base.empty_figure("no ok runs to rank")
    workload = workload if workload in set(table["workload"]) else workloads(table)[0]
    t = table[table["workload"] == workload].sort_values("rank")
    recs: list[dict[str, Any]] = base.records(t)
    names = [
        f"{r['rank']}. {r['pattern']} · {r['notifier']} · {r[KNOB]} thr: {r['mean_msgs_per_s']:,.0f} msg/s"
        for r in recs
    ]
    best = float(recs[0]["mean_msgs_per_s"])
    fig = Fig()
    fig.add_trace(
        bar(
            orientation="h",
            y=names,
            x=[r["share_of_best_pct"] for r in recs],
            name="measured: share of the best (pale: not distinguishable from it)",
            marker={
                "color": [
                    style.rgba(
                        style.colour_for(r["pattern"]),
                        0.85 if r["differs_from_best"] in ("yes", "best") else 0.3,
                    )
                    for r in recs
                ],
                "pattern": {
                    "shape": [style.hatch_for(r["notifier"]) for r in recs],
                    "fgcolor": "#ffffff",
                    "solidity": 0.25,
                },
                "line": {"color": [style.colour_for(r["pattern"]) for r in recs], "width": 1.5},
            },
            customdata=[[r["differs_from_best"], r["p_vs_best"] or "—", r["runs"]] for r in recs],
            hovertemplate="%{y}<br>%{x:.1f} % of the best<br>differs from the best: %{customdata[0]} "
            "(p = %{customdata[1]})<br>%{customdata[2]} runs<extra></extra>",
        )
    )
    modelled = [(n, r) for n, r in zip(names, recs, strict=True) if base.f(r["model_msgs_per_s"]) is not None]
    if modelled:
        fig.add_trace(
            scatter(
                y=[n for n, _ in modelled],
                x=[100.0 * float(r["model_msgs_per_s"]) / best for _, r in modelled],
                mode="markers+text",
                name=f"model, {source} rates (its rank)",
                marker={"symbol": "diamond", "size": 11, "color": "#000000"},
                text=[f"#{int(r['model_rank'])}" for _, r in modelled],
                textposition="middle right",
                hovertemplate="%{y}<br>model: %{x:.1f} % of the measured best<br>model rank %{text}"
                "<extra></extra>",
            )
        )
    top = max([100.0] + [100.0 * float(r["model_msgs_per_s"]) / best for _, r in modelled])
    fig.update_layout(
        **style.base_layout(
            title={"text": f"Ranking: {workload}", "x": 0.01},
            height=170 + 34 * len(recs),
            margin={"l": 330, "r": 30, "t": 80, "b": 50},
            xaxis={"title": {"text": "throughput, % of the best design"}, "range": [0, top * 1.12]},
            yaxis={"autorange": "reversed"},
            legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        )
    )
    return fig.to_dict()


def designs_ranked(table: pd.DataFrame, workload: str) -> Sequence[str]:
    t = table[table["workload"] == workload].sort_values("rank")
    return [f"{p}/{n}" for p, n in zip(t["pattern"], t["notifier"], strict=True)]
