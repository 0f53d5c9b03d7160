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


def operations_figure(ops: pd.DataFrame, *, x: str = "threads", statistic: str = "mean_us") -> FigureDict:
    """Per-operation service time vs ``x`` (one panel per operation; colour = pattern, dash = notifier)."""
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
        for grp in by_op.get(op, []):
            first = grp[0]
            name = base.label(first, label_keys)
            colour = style.colour_for(first["pattern"])
            fig.add_trace(
                scatter(
                    x=[float(g[x]) for g in grp],
                    y=[base.f(g[statistic]) for g in grp],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    line={"color": colour, "dash": style.dash_for(first["notifier"])},
                    marker={"symbol": style.symbol_for(first["notifier"]), "color": colour},
                    customdata=[[int(g["calls"]), int(g["runs"])] for g in grp],
                    hovertemplate=f"{name}<br>{op}: %{{y:.3f}} µs<br>calls %{{customdata[0]:,}}, "
                    "runs %{customdata[1]}<extra></extra>",
                ),
                row=r,
                col=c,
            )
            shown.add(name)
        axis = base.x_axis(x, ops[x])
        if i + cols < len(present):  # a panel below in this column carries the title
            axis.pop("title_text")
        fig.update_xaxes(row=r, col=c, **axis)
        fig.update_yaxes(
            title_text="µs per call" if c == 1 else None, row=r, col=c, rangemode="tozero", autorange=True
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": "Service time per operation", "x": 0.01},
            height=base.legend_height(len(shown), 300 * nrows),
        )
    )
    return fig.to_dict()


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
