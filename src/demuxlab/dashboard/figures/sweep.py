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
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import fields, style
from demuxlab.dashboard.fields import PARAMS
from demuxlab.dashboard.figures import adaptive, base
from demuxlab.dashboard.figures.summary import (
    listed,
    oversubscribed_text,
    pick_predictions,
    summarise,
    values_of,
)
from demuxlab.dashboard.plot import Fig, FigureDict, scatter
from demuxlab.vocab import RATE_SOURCES

SOURCES: tuple[str, ...] = RATE_SOURCES
_PLOT_PX = 440
_RESIDUAL_PX = 560
NOTHING_TO_PLOT = "no ok runs to plot for this selection"


def _prediction_index(preds: pd.DataFrame | None) -> dict[tuple[int, str, str | None], tuple[float, float]]:
    """(point, source, class) → (throughput, CI half-width relative); calibrated predictions belong to
    their calibration's hardware class, the paper's to every class."""
    picked = pick_predictions(preds) if preds is not None and not preds.empty else pd.DataFrame()
    out: dict[tuple[int, str, str | None], tuple[float, float]] = {}
    if picked.empty:
        return out
    pcls = picked["hardware_class"] if "hardware_class" in picked else [None] * len(picked)
    for pid, src, val, ci, c in zip(
        picked["point_id"],
        picked["source"],
        picked["predicted"],
        picked["ci_halfwidth_rel"],
        pcls,
        strict=True,
    ):
        k = (int(pid), str(src), base.cls(c) if src == "calibration" else None)
        out[k] = (float(val), float(ci) if ci is not None and ci == ci else 0.0)
    return out


def _pred_key(r: dict[str, Any], source: str) -> tuple[int, str, str | None]:
    return (
        int(r["point_id"]),
        source,
        base.cls(r.get("hardware_class")) if source == "calibration" else None,
    )


def _interval(r: dict[str, Any]) -> marks.Interval:
    return marks.interval(float(r["mean"]), base.f(r["half"]), int(r["n"]))


def interval_note(r: dict[str, Any]) -> str:
    """How a point's interval is shown, in words (hover and table)."""
    return _interval(r).note()


def _runs(grp: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The maximal stretches of consecutive points whose interval is drawn."""
    out: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    for r in grp:
        if _interval(r).drawn:
            cur.append(r)
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def _plottable(points: pd.DataFrame) -> pd.DataFrame | None:
    """The points summarised (:func:`summarise`), or None when no point has an ok run to draw."""
    pts = summarise(points) if not points.empty else points
    return None if pts.empty or pts["mean"].notna().sum() == 0 else pts


# -- what tells the series apart ----------------------------------------------------------------------------


@dataclass
class View:
    """How a sweep is laid out: the panels (``facet``), the series in each and how each is marked."""

    x: str
    colour: str
    facet: str | None
    facet_values: list[Any]
    keys: list[str]  # what tells one series from another (every parameter but x and the facet)
    label_keys: list[str]  # those that vary: a series' name
    colour_order: list[Any]
    notifier_dashed: bool  # notifiers share a panel: each its dash
    symbol_key: str | None  # the parameter a series' marker tells (None: every series a circle)
    symbol_order: list[Any]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]]  # (facet value, *keys) → records by x
    offsets: dict[tuple[Any, ...], float] = field(default_factory=dict)  # dodge per group

    def in_panel(self, fv: Any) -> list[tuple[Any, ...]]:
        return sorted((k for k in self.groups if k[0] == fv), key=lambda k: tuple(str(v) for v in k[1:]))

    def symbol(self, r: dict[str, Any]) -> str:
        if self.symbol_key is None:
            return "circle"
        if self.symbol_key == "notifier":
            return style.symbol_for(r["notifier"])
        return style.symbol_of(base.key(r[self.symbol_key]), self.symbol_order)


def view(pts: pd.DataFrame, x: str, colour: str, facet: str | None) -> View:
    """The layout of a summarised sweep (see the module doc for the marks)."""
    facet = facet if facet and facet != x and facet in pts else None
    facet_values = sorted({base.key(v) for v in pts[facet]}, key=str) if facet else [None]
    keys = base.series_keys(pts, exclude=(x, *([facet] if facet else [])))
    label_keys = base.varying(pts, keys)
    colour_order = sorted({base.key(v) for v in pts[colour]}, key=str) if colour in pts else []
    notifier_dashed = colour != "notifier" and facet != "notifier" and pts["notifier"].nunique() > 1
    others = [k for k in label_keys if k != colour]
    symbol_key = "notifier" if notifier_dashed else (others[0] if others else None)
    symbol_order = sorted({base.key(v) for v in pts[symbol_key]}, key=str) if symbol_key else []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in base.records(pts):
        if base.key(rec[x]) is None:
            continue
        fkey = base.key(rec[facet]) if facet else None
        groups.setdefault((fkey, *(base.key(rec[k]) for k in keys)), []).append(rec)
    for grp in groups.values():
        grp.sort(key=lambda r: float(r[x]))
    v = View(
        x,
        colour,
        facet,
        facet_values,
        keys,
        label_keys,
        colour_order,
        notifier_dashed,
        symbol_key,
        symbol_order,
        groups,
    )
    v.offsets = dodge_offsets(v)
    return v


def dodge_offsets(v: View) -> dict[tuple[Any, ...], float]:
    """Each group's x offset (:func:`base.dodge_panel`, panel by panel)."""
    out: dict[tuple[Any, ...], float] = {}
    for fv in v.facet_values:
        gkeys = v.in_panel(fv)
        out.update(zip(gkeys, base.dodge_panel([v.groups[k] for k in gkeys], v.x), strict=True))
    return out


@dataclass
class Series:
    """One line of the sweep as drawn."""

    name: str
    colour: str
    dash: str
    symbol: str
    dx: float
    legend: bool
    grp: list[dict[str, Any]]
    facet_text: str

    def xs(self, x: str) -> list[float]:
        return [float(r[x]) + self.dx for r in self.grp]


@dataclass
class Drawn:
    """What the figure drew, for its notes and its axes."""

    shown: set[str] = field(default_factory=set)
    single_run: list[str] = field(default_factory=list)
    clipped: int = 0
    means: list[float] = field(default_factory=list)
    highs: list[float] = field(default_factory=list)
    res_cols: set[int] = field(default_factory=set)
    over: int = 0


def _series(v: View, gkey: tuple[Any, ...], drawn: Drawn) -> Series:
    grp = v.groups[gkey]
    first = grp[0]
    name = base.label(first, v.label_keys) or base.label(first, [v.colour])
    c = style.colour_for(first[v.colour], v.colour_order)
    # The notifier's dash where notifiers share a panel; solid where the colour or the columns already tell
    # the notifier (a dash then would only compete with the model lines).
    dash = style.dash_for(first["notifier"]) if v.notifier_dashed else "solid"
    legend = name not in drawn.shown
    drawn.shown.add(name)
    facet_text = f" ({base.fmt(gkey[0])})" if v.facet else ""
    return Series(name, c, dash, v.symbol(first), v.offsets.get(gkey, 0.0), legend, grp, facet_text)


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
    notes.extend(f"no model line: {n}" for n in model_notes[:6])
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
    for i, note in enumerate(notes):
        fig.add_annotation(
            text=note,
            xref="paper",
            yref="paper",
            x=0,
            y=0,
            yshift=-62 - 18 * i,
            xanchor="left",
            yanchor="top",
            showarrow=False,
            font={"size": 11, "color": style.MUTED},
        )


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


# -- the tables ---------------------------------------------------------------------------------------------


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
    out["interval"] = [interval_note(r) for r in recs]
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


# -- the PDF ------------------------------------------------------------------------------------------------


def sweep_pdf(
    points: pd.DataFrame,
    preds: pd.DataFrame | None,
    *,
    x: str = "threads",
    colour: str = "pattern",
    facet: str | None = "notifier",
    sources: Sequence[str] = SOURCES,
    title: str = "",
) -> bytes:
    """The sweep as a vector PDF for papers (matplotlib, through :mod:`demuxlab.report`'s static marks):
    the same data, layout, marks and interval rule as :func:`sweep_figure`."""
    from demuxlab import staticplot

    plt = staticplot.pyplot()
    pts = _plottable(points)
    if pts is None:  # as sweep_figure: say so, on a page of its own
        fig = plt.figure(figsize=(4.2, 3.8))
        fig.text(0.5, 0.5, NOTHING_TO_PLOT, ha="center", va="center")
        return _pdf_bytes(fig, plt)
    pts = pts[pts["n"] > 0]
    v = view(pts, x, colour, facet)
    fig, axes = plt.subplots(
        1, len(v.facet_values), figsize=(4.2 * len(v.facet_values), 3.8), sharey=True, squeeze=False
    )
    pred_by = _prediction_index(preds)
    drawn = Drawn()
    for ax, fv in zip(axes[0], v.facet_values, strict=True):
        for gkey in v.in_panel(fv):
            _pdf_series(ax, _series(v, gkey, drawn), x, sources, pred_by, drawn)
        _pdf_axis(ax, v, pts, fv)
    cut = staticplot.throughput_axis(axes[0][0], drawn.means, drawn.highs)
    staticplot.legend_below(fig, [ax for ax in axes[0]], title=title, notes=[n for n in [cut] if n])
    return _pdf_bytes(fig, plt)


def _pdf_series(
    ax: Any,
    s: Series,
    x: str,
    sources: Sequence[str],
    pred_by: dict[tuple[int, str, str | None], tuple[float, float]],
    drawn: Drawn,
) -> None:
    from demuxlab import staticplot

    ivs = [_interval(r) for r in s.grp]
    staticplot.draw_series(
        ax,
        s.xs(x),
        ivs,
        colour=s.colour,
        marker=marks.MPL_MARKER.get(s.symbol, "o"),
        dash=_dash_of(s.dash),
        label=s.name,
        over=[bool(r.get("over")) for r in s.grp],
    )
    drawn.means.extend(iv.mean for iv in ivs)
    drawn.highs.extend(iv.hi for iv in ivs)
    rx = [float(r[x]) + s.dx for r in s.grp for _ in values_of(r["values"])]
    ry = [val for r in s.grp for val in values_of(r["values"])]
    ax.scatter(rx, ry, color=s.colour, alpha=0.3, s=6)
    for source in sources:
        pr = [(r, pred_by[_pred_key(r, source)]) for r in s.grp if _pred_key(r, source) in pred_by]
        if pr:
            staticplot.draw_model(
                ax,
                [float(r[x]) + s.dx for r, _ in pr],
                [val for _, (val, _ci) in pr],
                colour=s.colour,
                source=source,
                label=f"{s.name}, {style.SOURCE_LABEL[source]}",
            )
            drawn.means.extend(val for _, (val, _ci) in pr)


def _dash_of(plotly: str) -> marks.Dash:
    for name, d in marks.NAMED_DASHES:
        if name == plotly:
            return d
    return ()


def _pdf_axis(ax: Any, v: View, pts: pd.DataFrame, fv: Any) -> None:
    ax.set_xlabel(fields.label(v.x))
    if v.x in fields.INTEGER:
        ticks = base.integer_ticks(pts[v.x])
        if ticks.get("tickmode") == "array":
            ax.set_xticks(ticks["tickvals"], ticks["ticktext"])
        else:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if v.facet:
        ax.set_title(f"{fields.label(v.facet)}: {base.fmt(fv)}", fontsize=10)
    ax.grid(alpha=0.3)


def _pdf_bytes(fig: Any, plt: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf")
    plt.close(fig)
    return buf.getvalue()
