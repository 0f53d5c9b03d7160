"""The Sweep page's builders: throughput vs a parameter with each point's interval and repeats, the models'
predictions and their residuals; the points table and the model-error summary; the PDF for papers.

What the figure promises a reader (each one a past bug):
- Intervals follow :mod:`demuxlab.marks`' one rule (the report's figures follow it too): a point's 95 %
  interval is drawn from 2 runs on, whatever its width, as a band over consecutive points or an error bar;
  below zero it is clipped at zero and the figure says so; the throughput axis stops at twice the highest
  mean and names the intervals it cuts. A point of one run has an open marker and says why.
- A band is a filled outline only (``mode: "lines"``, no markers): Plotly's default mode drew each band's
  corners as opaque markers in the next colour of the cycle, which looked like repeats.
- No mark hides another: where two series of a panel meet at an x value, the panel's series are set side
  by side (dodged; the hover says the true value); series of one colour differ by marker (the notifier where
  notifiers share a panel, else the next parameter that varies, e.g. the thread count), and a legend entry's
  marker is the marker of its series in every panel.
- A point whose server threads outnumber its server's CPUs is ringed, said in its hover and in the table.
- Where a model line is missing the figure says why (``model_notes``: a refused calibration, no
  calibration runs, no rates for the pattern).
- Throughput axes start at zero and never go below it; whole-number axes get whole-number ticks; every
  facet has its own tick labels; a single-point model line shows its marker.
- The figure is tall enough for its whole legend, so the PNG/SVG export keeps every series.

The layout (panels, series, marks, dodge) is :mod:`.sweep_view`'s, shared with the PDF (:mod:`.sweep_pdf`);
the tables are :mod:`.sweep_table`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import fields, style
from demuxlab.dashboard.figures import adaptive, base
from demuxlab.dashboard.figures.summary import listed, oversubscribed_text, values_of
from demuxlab.dashboard.figures.sweep_pdf import sweep_pdf
from demuxlab.dashboard.figures.sweep_table import (
    KEY_COLUMNS,
    PARAM_COLUMNS,
    SOURCES,
    error_summary,
    sweep_table,
)
from demuxlab.dashboard.figures.sweep_view import (
    NOTHING_TO_PLOT,
    Drawn,
    Series,
    View,
    _interval,
    _plottable,
    _pred_key,
    _prediction_index,
    _runs,
    _series,
    dodge_offsets,
    interval_note,
    view,
)
from demuxlab.dashboard.plot import Fig, FigureDict, scatter

# the page's and the tests' one place: the figure, its tables and its PDF
__all__ = [
    "KEY_COLUMNS",
    "PARAM_COLUMNS",
    "SOURCES",
    "error_summary",
    "interval_note",
    "sweep_figure",
    "sweep_pdf",
    "sweep_table",
    "view",
]

_PLOT_PX = 440
_RESIDUAL_PX = 560

# -- the traces ---------------------------------------------------------------------------------------------


def _add_band(fig: Fig, s: Series, col: int, x: str) -> None:
    """The interval as a band over each stretch of 2 or more consecutive points that have one."""
    if len({float(r[x]) for r in s.grp}) == 1:
        return
    for stretch in _runs(s.grp):
        if len(stretch) < 2:
            continue
        bx = [float(r[x]) + s.dx for r in stretch]
        ivs = [_interval(r) for r in stretch]
        fig.add_trace(
            scatter(
                x=bx + bx[::-1],
                y=[iv.hi for iv in ivs] + [iv.lo for iv in ivs][::-1],
                mode="lines",
                fill="toself",
                fillcolor=style.rgba(s.colour, 0.16),
                line={"width": 0, "color": style.rgba(s.colour, 0.0)},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=s.name,
                name=f"{s.name} 95% CI",
            ),
            row=1,
            col=col,
        )


def _add_mean(fig: Fig, s: Series, col: int, x: str, drawn: Drawn) -> None:
    """The means as a line with markers (open: one run, no interval), with error bars where no band shows
    the interval (a single x, or a point with an interval between points without one)."""
    single = len({float(r[x]) for r in s.grp}) == 1
    in_band = {id(r) for st in _runs(s.grp) if len(st) >= 2 and not single for r in st}
    ivs = [_interval(r) for r in s.grp]
    bars = [
        (iv.plus, iv.minus) if iv.drawn and id(r) not in in_band else (0.0, 0.0)
        for r, iv in zip(s.grp, ivs, strict=True)
    ]
    for r, iv in zip(s.grp, ivs, strict=True):
        if iv.n == 1:
            drawn.single_run.append(f"{s.name} at {base.fmt(r[x])}{s.facet_text}")
        drawn.clipped += iv.clipped
        drawn.means.append(iv.mean)
        drawn.highs.append(iv.hi)
    fig.add_trace(
        scatter(
            x=s.xs(x),
            y=[base.f(r["mean"]) for r in s.grp],
            mode="lines+markers",
            name=s.name,
            legendgroup=s.name,
            showlegend=s.legend,
            line={"color": s.colour, "dash": s.dash, "width": 2},
            marker={
                "symbol": [s.symbol if iv.drawn else f"{s.symbol}-open" for iv in ivs],
                "size": 8,
                "color": s.colour,
                "line": {"color": s.colour, "width": 1.5},
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [b[0] for b in bars],
                "arrayminus": [b[1] for b in bars],
                "visible": any(b[0] > 0 for b in bars),
                "color": s.colour,
            },
            customdata=[_hover(r, iv, x) for r, iv in zip(s.grp, ivs, strict=True)],
            hovertemplate=(
                f"{s.name}<br>{fields.label(x)} %{{customdata[4]}}<br>"
                "mean %{y:,.0f} msg/s<br>%{customdata[3]}"
                "<br>runs ok %{customdata[0]}, failed %{customdata[2]}<extra></extra>"
            ),
        ),
        row=1,
        col=col,
    )


def _hover(r: dict[str, Any], iv: marks.Interval, x: str) -> list[Any]:
    over = oversubscribed_text(r)
    why = f"<br>measured: {r['why']}" if r.get("why") else ""
    return [
        iv.n,
        base.f(r["half"]) or 0.0,
        int(r["n_failed"]),
        iv.note() + (f"<br><b>{over}</b>" if over else "") + why,
        base.fmt(r[x]),
    ]


def _add_oversubscribed(fig: Fig, s: Series, col: int, x: str, drawn: Drawn) -> None:
    """A ring round each point whose server threads outnumber its server's CPUs (one legend entry)."""
    over = [r for r in s.grp if r.get("over")]
    if not over:
        return
    fig.add_trace(
        scatter(
            x=[float(r[x]) + s.dx for r in over],
            y=[base.f(r["mean"]) for r in over],
            mode="markers",
            name=marks.OVERSUBSCRIBED_TEXT,
            legendgroup="oversubscribed",
            showlegend=not drawn.over,
            legendrank=2000,  # after the series: a key to a mark, not a series
            marker={"symbol": "circle-open", "size": 17, "color": style.OVERSUBSCRIBED, "line": {"width": 2}},
            hoverinfo="skip",
        ),
        row=1,
        col=col,
    )
    drawn.over += len(over)


def _add_repeats(fig: Fig, s: Series, col: int, x: str, drawn: Drawn) -> None:
    """Every ok run as a faint marker (a click opens its run)."""
    rx, ry, rid = [], [], []
    for r in s.grp:
        for thr, run in zip(values_of(r["values"]), listed(r["run_ids"]), strict=False):
            rx.append(float(r[x]) + s.dx)
            ry.append(float(thr))
            rid.append(str(run))
    drawn.means.extend(ry)
    if rx:
        fig.add_trace(
            scatter(
                x=rx,
                y=ry,
                mode="markers",
                name=f"{s.name} repeats",
                legendgroup=s.name,
                showlegend=False,
                marker={"color": style.rgba(s.colour, 0.4), "size": 6, "symbol": s.symbol},
                customdata=rid,
                hovertemplate="run %{customdata}<br>%{y:,.0f} msg/s<extra>repeat</extra>",
            ),
            row=1,
            col=col,
        )


def _add_model(
    fig: Fig,
    s: Series,
    col: int,
    x: str,
    source: str,
    pred_by: dict[tuple[int, str, str | None], tuple[float, float]],
    residuals: bool,
    drawn: Drawn,
) -> None:
    """One source's predictions of the series (the SSA's interval as error bars), and its residuals."""
    pr = [(r, pred_by[_pred_key(r, source)]) for r in s.grp if _pred_key(r, source) in pred_by]
    if not pr:
        return
    sname = f"{s.name} · {style.SOURCE_LABEL[source]}"
    err = [val * ci for _, (val, ci) in pr]
    px = [float(r[x]) + s.dx for r, _ in pr]
    drawn.means.extend(val for _, (val, _ci) in pr)
    fig.add_trace(
        scatter(
            x=px,
            y=[val for _, (val, _ci) in pr],
            mode="lines" if len(pr) > 1 else "lines+markers",
            name=sname,
            legendgroup=sname,
            showlegend=sname not in drawn.shown,
            line={"color": s.colour, "dash": style.SOURCE_DASH[source], "width": 1.5},
            marker={"symbol": s.symbol, "size": 7, "color": s.colour},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": err,
                "arrayminus": [min(e, val) for e, (_, (val, _ci)) in zip(err, pr, strict=True)],
                "visible": any(e > 0 for e in err),
            },
            hovertemplate=f"{sname}<br>%{{y:,.0f}} msg/s<extra>{source}</extra>",
        ),
        row=1,
        col=col,
    )
    drawn.shown.add(sname)
    if not residuals:
        return
    drawn.res_cols.add(col)
    resid = [
        (val - float(r["mean"])) / float(r["mean"]) * 100.0 if base.f(r["mean"]) else None
        for r, (val, _ci) in pr
    ]
    fig.add_trace(
        scatter(
            x=px,
            y=resid,
            mode="lines+markers",
            name=f"{sname} residual",
            legendgroup=sname,
            showlegend=False,
            line={"color": s.colour, "dash": style.SOURCE_DASH[source], "width": 1},
            marker={"symbol": s.symbol, "size": 5, "color": s.colour},
            hovertemplate=f"{sname}<br>model − measured %{{y:+.1f}} %<extra></extra>",
        ),
        row=2,
        col=col,
    )


# -- the figure ---------------------------------------------------------------------------------------------


def sweep_figure(
    points: pd.DataFrame,
    preds: pd.DataFrame | None = None,
    *,
    x: str = "threads",
    colour: str = "pattern",
    facet: str | None = "notifier",
    sources: Sequence[str] = SOURCES,
    residuals: bool = True,
    title: str = "",
    model_only: Sequence[dict[str, Any]] = (),
    model_notes: Sequence[str] = (),
) -> FigureDict:
    """Throughput vs ``x`` from :func:`demuxlab.dashboard.data.points.measured` rows: per series the mean,
    its 95 % CI (band, or error bars for a single x), every repeat as a faint marker (click: its run), the
    models' predictions per source (SSA CI as error bars) and a residual panel (model − measured, % of
    measured) under it. One column per value of ``facet``. ``model_only``: an adaptive experiment's points
    it never measured (:mod:`demuxlab.dashboard.figures.adaptive`), drawn dashed without an interval; a
    ``why`` column in ``points`` says in each hover why the point was measured. ``model_notes``: why model
    lines are missing (:mod:`demuxlab.dashboard.figures.absence`), said under the figure."""
    pts = _plottable(points)
    if pts is None:
        return base.empty_figure(NOTHING_TO_PLOT)
    pts = pts[pts["n"] > 0]
    if "hardware_class" in pts:
        pts = pts.assign(hardware_class=[base.cls(c) or "" for c in pts["hardware_class"]])
    v = view(pts, x, colour, facet)
    pred_by = _prediction_index(preds)
    have_sources = [src for src in sources if any(k[1] == src for k in pred_by)]
    # marks meet at a share of the axis's height, which the model lines may raise above the means
    marked = [float(m) for m in pts["mean"]] + [
        val for k, (val, _ci) in pred_by.items() if k[1] in have_sources
    ]
    v.offsets = dodge_offsets(v, top=marks.axis_top(marked, [float(h) for h in pts["hi"] if h == h]).top)
    show_res = residuals and bool(have_sources)
    fig = Fig(
        rows=2 if show_res else 1,
        cols=len(v.facet_values),
        shared_xaxes=True,
        shared_yaxes=True,
        row_heights=[0.72, 0.28] if show_res else None,
        vertical_spacing=0.08,
        horizontal_spacing=0.05,
        subplot_titles=[f"{fields.label(v.facet)}: {base.fmt(fv)}" for fv in v.facet_values]
        if v.facet
        else None,
    )
    drawn = Drawn()
    for col, fv in enumerate(v.facet_values, start=1):
        for gkey in v.in_panel(fv):
            s = _series(v, gkey, drawn)
            _add_band(fig, s, col, x)
            _add_mean(fig, s, col, x, drawn)
            _add_oversubscribed(fig, s, col, x, drawn)
            _add_repeats(fig, s, col, x, drawn)
            for source in have_sources:
                _add_model(fig, s, col, x, source, pred_by, show_res, drawn)
    if model_only:
        top = adaptive.add_model_only(
            fig,
            model_only,
            x=x,
            colour=colour,
            facet=v.facet,
            facet_values=v.facet_values,
            colour_order=v.colour_order,
            label_keys=v.label_keys,
        )
        drawn.means.append(top)
    axis = marks.axis_top(drawn.means, drawn.highs)
    notes = _notes(drawn, axis, model_notes)
    _layout(fig, v, drawn, notes, show_res, title)
    _axes(fig, v, pts, show_res, drawn, axis)
    return fig.to_dict()


def _notes(drawn: Drawn, axis: marks.Axis, model_notes: Sequence[str]) -> list[str]:
    """The lines under the figure: what it does not draw, and why."""
    notes = []
    if drawn.single_run:
        few = ", ".join(drawn.single_run[:4])
        more = f" and {len(drawn.single_run) - 4} more" if len(drawn.single_run) > 4 else ""
        notes.append(f"open markers: 1 run, no interval ({few}{more})")
    if drawn.clipped:
        notes.append(f"{drawn.clipped} interval(s) clipped at 0 msg/s (they reach below zero)")
    cut = marks.cut_note(axis.cut)
    if cut:
        notes.append(cut)
    if drawn.over:
        notes.append(f"ringed: {drawn.over} point(s) {marks.OVERSUBSCRIBED_TEXT} (not comparable)")
    notes.extend(f"no model line ({n}; the page says why)" for n in model_notes[:6])
    if len(model_notes) > 6:
        notes.append(f"… and {len(model_notes) - 6} more without a model line (the page lists them)")
    return notes


def _layout(fig: Fig, v: View, drawn: Drawn, notes: list[str], show_res: bool, title: str) -> None:
    plot_px = _RESIDUAL_PX if show_res else _PLOT_PX
    # the notes sit in the bottom margin, which the legend does not use
    margin = {"l": 70, "r": 20, "t": 60, "b": 60 + (22 + 18 * len(notes) if notes else 0)}
    entries = base.legend_entries(fig.data)  # the model-only curves' entries too
    height = base.legend_height(entries, plot_px + 24 * len(notes), margin["t"] + margin["b"])
    fig.update_layout(
        **style.base_layout(
            title={"text": title or "Throughput", "x": 0.01},
            height=height,
            hovermode="closest",
            margin=margin,
        )
    )
    base.notes_below(fig, notes, 62)


def _axes(fig: Fig, v: View, pts: pd.DataFrame, show_res: bool, drawn: Drawn, top: marks.Axis) -> None:
    """Each facet's x ticks (on its residual row where it has residuals, else on the top row: a residual
    axis with nothing on it is hidden and says why), the throughput axis from zero, the residuals'."""
    axis = base.x_axis(v.x, pts[v.x])
    x_range = axis.pop("range")
    spread = max((abs(d) for d in v.offsets.values()), default=0.0)
    x_range = [x_range[0] - spread, x_range[1] + spread]
    rows = 2 if show_res else 1
    for col in range(1, len(v.facet_values) + 1):
        bottom = rows if (show_res and col in drawn.res_cols) else 1
        fig.update_xaxes(row=bottom, col=col, range=x_range, showticklabels=True, **axis)
        if show_res and bottom == 1:
            fig.update_xaxes(row=2, col=col, visible=False, range=x_range)
            fig.update_yaxes(row=2, col=col, visible=False)
            fig.add_annotation(
                row=2,
                col=col,
                text="no model for these series",
                x=sum(x_range) / 2,
                y=0,
                showarrow=False,
                font={"size": 11, "color": style.MUTED},
            )
        elif show_res:
            fig.update_xaxes(row=1, col=col, range=x_range, showticklabels=False)
    fig.update_yaxes(title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero", range=[0, top.top])
    if show_res:
        # autorange said explicitly: with ranges given on the other axes, Plotly leaves a matched axis
        # group without one at its default [-1, 4] (seen in plotly.js 2.x).
        fig.update_yaxes(row=2, autorange=True)
        fig.update_yaxes(title_text="model − measured (%)", row=2, col=1, zeroline=True, zerolinewidth=1)
