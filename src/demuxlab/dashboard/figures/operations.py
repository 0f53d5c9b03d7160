"""The Operations page's builders: per-operation service time vs a parameter (seed 000 Figs. 9, 10, 12, 13)
and descriptors per notifier call. Colour = pattern, dash and marker = notifier, as on every page."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from demuxlab.dashboard import style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.plot import Fig, FigureDict, scatter

OPS_ORDER: tuple[str, ...] = ("notify", "queue_put", "queue_get", "lock", "rearm", "recv", "send", "accept")
OP_LABEL: dict[str, str] = {
    "notify": "obtain events (notifier call)",
    "queue_put": "queue put",
    "queue_get": "queue get",
    "lock": "lock wait",
    "rearm": "re-arm",
    "recv": "recv",
    "send": "send",
}


#: A panel whose values span more than this factor gets a log axis (1-2-5 ticks): on a linear one tpc's
#: recv (691 µs a call) flattened every other design's ~1 µs to zero.
LOG_SPAN = 100.0


def operations_figure(ops: pd.DataFrame, *, x: str = "threads", statistic: str = "mean_us") -> FigureDict:
    """Per-operation service time vs ``x`` (one panel per operation, each on its own scale, a log one where
    its values span more than :data:`LOG_SPAN`×; colour = pattern, dash and marker = notifier; series that
    meet set side by side)."""
    if ops.empty:
        return base.empty_figure(
            "no instrumented runs in this experiment (instrument: true, or calibration runs)"
        )
    present = [op for op in OPS_ORDER if op in set(ops["op"])] + sorted(set(ops["op"]) - set(OPS_ORDER))
    cols = min(3, len(present))
    nrows = math.ceil(len(present) / cols)
    fig = Fig(
        rows=nrows,
        cols=cols,
        subplot_titles=[OP_LABEL.get(str(op), str(op)) for op in present],
        vertical_spacing=0.16 if nrows > 1 else 0.12,
        horizontal_spacing=0.07,
    )
    keys = base.series_keys(ops, exclude=(x,))
    label_keys = base.varying(ops, keys) or ["pattern", "notifier"]
    by_op: dict[str, list[list[dict[str, Any]]]] = {}
    for grp in base.series(ops, ["op", *keys], x):
        by_op.setdefault(str(grp[0]["op"]), []).append(grp)
    shown: set[str] = set()
    for i, op in enumerate(present):
        r, c = i // cols + 1, i % cols + 1
        groups = by_op.get(op, [])
        _add_panel(fig, groups, r, c, op, x, statistic, label_keys, shown)
        axis = base.x_axis(x, ops[x])
        if i + cols < len(present):  # a panel below in this column carries the title
            axis.pop("title_text")
        spread = max((abs(d) for d in base.dodge_panel(groups, x, statistic)), default=0.0)
        if "range" in axis:
            axis["range"] = [axis["range"][0] - spread, axis["range"][1] + spread]
        fig.update_xaxes(row=r, col=c, **axis)
        fig.update_yaxes(row=r, col=c, **_y_axis([g[statistic] for grp in groups for g in grp], c == 1))
    fig.update_layout(
        **style.base_layout(
            title={"text": "Service time per operation", "x": 0.01},
            height=base.legend_height(len(shown), 300 * nrows),
        )
    )
    return fig.to_dict()


def _add_panel(
    fig: Fig,
    groups: list[list[dict[str, Any]]],
    r: int,
    c: int,
    op: str,
    x: str,
    statistic: str,
    label_keys: list[str],
    shown: set[str],
) -> None:
    offsets = base.dodge_panel(groups, x, statistic)
    for grp, dx in zip(groups, offsets, strict=True):
        first = grp[0]
        name = base.label(first, label_keys)
        colour = style.colour_for(first["pattern"])
        fig.add_trace(
            scatter(
                x=[float(g[x]) + dx for g in grp],
                y=[base.f(g[statistic]) for g in grp],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=name not in shown,
                line={"color": colour, "dash": style.dash_for(first["notifier"])},
                marker={"symbol": style.symbol_for(first["notifier"]), "color": colour, "size": 8},
                customdata=[[int(g["calls"]), int(g["runs"]), base.fmt(g[x])] for g in grp],
                hovertemplate=f"{name}<br>{x} %{{customdata[2]}}<br>{op}: %{{y:.4g}} µs<br>calls "
                "%{customdata[0]:,}, runs %{customdata[1]}<extra></extra>",
            ),
            row=r,
            col=c,
        )
        shown.add(name)


def _y_axis(values: list[Any], first_column: bool) -> dict[str, Any]:
    """A panel's own scale: linear from zero, or log with 1-2-5 ticks where its values span more than
    :data:`LOG_SPAN`×."""
    title = {"title_text": "µs per call" if first_column else None}
    vals = [float(v) for v in values if base.f(v) is not None and float(v) > 0]
    if vals and max(vals) / min(vals) > LOG_SPAN:
        lo, hi = min(vals) / 1.5, max(vals) * 1.5
        return {
            **title,
            **style.log_axis(lo, hi),
            "title_text": ("µs per call (log)" if first_column else None),
        }
    return {**title, "rangemode": "tozero", "autorange": True}


def events_figure(ev: pd.DataFrame, *, x: str = "threads") -> FigureDict:
    """Descriptors returned per notifier call vs ``x``."""
    if ev.empty:
        return base.empty_figure("no notifier calls by events recorded (instrumented runs only)")
    fig = Fig()
    keys = base.series_keys(ev, exclude=(x,))
    label_keys = base.varying(ev, keys) or ["pattern", "notifier"]
    groups = base.series(ev, keys, x)
    for grp in groups:
        first = grp[0]
        colour = style.colour_for(first["pattern"])
        fig.add_trace(
            scatter(
                x=[float(g[x]) for g in grp],
                y=[base.f(g["events_per_call"]) for g in grp],
                mode="lines+markers",
                name=base.label(first, label_keys),
                line={"color": colour, "dash": style.dash_for(first["notifier"])},
                marker={"symbol": style.symbol_for(first["notifier"]), "color": colour},
            )
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": "Events per notifier call", "x": 0.01},
            height=base.legend_height(len(groups), 360),
            yaxis_title="descriptors per call",
        )
    )
    fig.update_xaxes(**base.x_axis(x, ev[x]))
    fig.update_yaxes(rangemode="tozero", autorange=True)
    return fig.to_dict()
