"""The Sweep page's builders: throughput vs a parameter with each point's interval and repeats, the models'
predictions and their residuals; the points table and the model-error summary; the PDF for papers.

What the figure promises a reader (each one a past bug):
- A band is a filled outline only (``mode: "lines"``, no markers): Plotly's default mode drew each band's
  corners as opaque markers in the next colour of the cycle, which looked like repeats.
- A band is drawn only over contiguous points with at least :data:`summary.MIN_REPEATS_FOR_BAND` runs; a
  point with fewer shows its repeats, an open marker, and says in its hover and under the figure that its
  interval is too wide to draw. A band or bar that would go below zero is clipped at zero and says so.
- A series with a single x value gets error bars instead of a band (a band of one point has no width).
- Throughput axes start at zero and never go below it; whole-number axes get whole-number ticks; every
  facet has its own tick labels; a single-point model line shows its marker.
- The figure is tall enough for its whole legend, so the PNG/SVG export keeps every series.

(Over 500 lines on purpose: the Sweep figure is half of it, and each promise above is a rule inside that
one figure; the points table, the model-error summary and the PDF are the same page's, built from the same
records.)
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from demuxlab.dashboard import fields, style
from demuxlab.dashboard.fields import PARAMS
from demuxlab.dashboard.figures import adaptive, base
from demuxlab.dashboard.figures.summary import (
    MIN_REPEATS_FOR_BAND,
    listed,
    pick_predictions,
    summarise,
    values_of,
)
from demuxlab.dashboard.plot import Fig, FigureDict, scatter
from demuxlab.vocab import RATE_SOURCES

SOURCES: tuple[str, ...] = RATE_SOURCES
_PLOT_PX = 440
_RESIDUAL_PX = 560


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


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return base.records(frame)


def interval_note(r: dict[str, Any]) -> str:
    """How a point's interval is shown, in words (hover and table)."""
    n = int(r["n"])
    if n == 0:
        return "no ok run"
    if n == 1:
        return "1 run: no interval"
    if n < MIN_REPEATS_FOR_BAND:
        return (
            f"{n} runs: the 95 % interval (±{r['half']:,.0f}) is too wide to draw; "
            f"it needs {MIN_REPEATS_FOR_BAND} runs"
        )
    if r["lo"] < 0:
        return "95 % interval clipped at 0 (it reaches below zero)"
    return "95 % interval drawn"


def _runs(grp: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The maximal stretches of consecutive points whose interval is drawn."""
    out: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    for r in grp:
        if r["band"] and r["half"] == r["half"]:
            cur.append(r)
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


NOTHING_TO_PLOT = "no ok runs to plot for this selection"


def _plottable(points: pd.DataFrame) -> pd.DataFrame | None:
    """The points summarised (:func:`summarise`), or None when no point has an ok run to draw."""
    pts = summarise(points) if not points.empty else points
    return None if pts.empty or pts["mean"].notna().sum() == 0 else pts


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
) -> FigureDict:
    """Throughput vs ``x`` from :func:`demuxlab.dashboard.data.points.measured` rows: per series the mean,
    its 95 % CI (band, or error bars for a single x), every repeat as a faint marker (click: its run), the
    models' predictions per source (SSA CI as error bars) and a residual panel (model − measured, % of
    measured) under it. One column per value of ``facet``. ``model_only``: an adaptive experiment's points
    it never measured (:mod:`demuxlab.dashboard.figures.adaptive`), drawn dashed without an interval; a
    ``why`` column in ``points`` says in each hover why the point was measured.

    Grouping is done in plain Python over records (a sweep has hundreds of points, not millions): per-group
    pandas operations would cost more than the rest of the request."""
    pts = _plottable(points)
    if pts is None:
        return base.empty_figure(NOTHING_TO_PLOT)
    pts = pts[pts["n"] > 0]
    facet = facet if facet and facet != x and facet in pts else None
    facet_values = sorted({base.key(v) for v in pts[facet]}, key=str) if facet else [None]
    pred_by = _prediction_index(preds)
    have_sources = [src for src in sources if any(k[1] == src for k in pred_by)]
    show_res = residuals and bool(have_sources)
    rows = 2 if show_res else 1
    fig = Fig(
        rows=rows,
        cols=len(facet_values),
        shared_xaxes=True,
        shared_yaxes=True,
        row_heights=[0.72, 0.28] if show_res else None,
        vertical_spacing=0.08,
        horizontal_spacing=0.05,
        subplot_titles=[f"{fields.label(facet)}: {base.fmt(v)}" for v in facet_values] if facet else None,
    )
    keys = base.series_keys(pts, exclude=(x, *([facet] if facet else [])))
    notifier_dashed = colour != "notifier" and facet != "notifier" and pts["notifier"].nunique() > 1
    if "hardware_class" in pts:
        pts = pts.assign(hardware_class=[base.cls(c) or "" for c in pts["hardware_class"]])
    label_keys = base.varying(pts, keys)
    colour_order = sorted({base.key(v) for v in pts[colour]}, key=str) if colour in pts else []
    records: list[dict[str, Any]] = base.records(pts)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in records:
        if base.key(rec[x]) is None:
            continue
        fkey = base.key(rec[facet]) if facet else None
        groups.setdefault((fkey, *(base.key(rec[k]) for k in keys)), []).append(rec)
    shown: set[str] = set()
    narrow: list[str] = []
    clipped = 0
    top = 0.0
    res_cols: set[int] = set()
    for col, fv in enumerate(facet_values, start=1):
        for gkey in sorted((k for k in groups if k[0] == fv), key=lambda k: tuple(str(v) for v in k[1:])):
            grp = sorted(groups[gkey], key=lambda r: float(r[x]))
            first = grp[0]
            name = base.label(first, label_keys) or base.label(first, [colour])
            c = style.colour_for(first[colour], colour_order)
            # The notifier's dash where notifiers share a panel; solid where the colour or the columns
            # already tell the notifier (a dash then would only compete with the model lines).
            dash = style.dash_for(first["notifier"]) if notifier_dashed else "solid"
            symbol = style.symbol_for(first["notifier"])
            legend = name not in shown
            shown.add(name)
            xs = [float(r[x]) for r in grp]
            single = len({*xs}) == 1
            for r in grp:
                if 0 < int(r["n"]) < MIN_REPEATS_FOR_BAND and int(r["n"]) > 1:
                    narrow.append(f"{name} at {base.fmt(r[x])}" + (f" ({base.fmt(fv)})" if facet else ""))
                if r["band"] and r["lo"] == r["lo"] and r["lo"] < 0:
                    clipped += 1
                top = max(top, float(r["hi"]) if r["band"] and r["hi"] == r["hi"] else float(r["mean"]))
            if not single:
                for stretch in _runs(grp):
                    if len(stretch) < 2:
                        continue
                    bx = [float(r[x]) for r in stretch]
                    fig.add_trace(
                        scatter(
                            x=bx + bx[::-1],
                            y=[float(r["hi"]) for r in stretch]
                            + [max(0.0, float(r["lo"])) for r in stretch][::-1],
                            mode="lines",
                            fill="toself",
                            fillcolor=style.rgba(c, 0.16),
                            line={"width": 0, "color": style.rgba(c, 0.0)},
                            hoverinfo="skip",
                            showlegend=False,
                            legendgroup=name,
                            name=f"{name} 95% CI",
                        ),
                        row=1,
                        col=col,
                    )
            # Error bars where no band can show the interval: a single x, or a drawn-interval point
            # between points without one.
            in_band = {id(r) for s in _runs(grp) if len(s) >= 2 and not single for r in s}
            bars = [
                (float(r["half"]), min(float(r["half"]), float(r["mean"])))
                if r["band"] and r["half"] == r["half"] and id(r) not in in_band
                else (0.0, 0.0)
                for r in grp
            ]
            fig.add_trace(
                scatter(
                    x=xs,
                    y=[base.f(r["mean"]) for r in grp],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=legend,
                    line={"color": c, "dash": dash, "width": 2},
                    marker={
                        "symbol": [symbol if r["band"] else f"{symbol}-open" for r in grp],
                        "size": 8,
                        "color": c,
                        "line": {"color": c, "width": 1.5},
                    },
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [b[0] for b in bars],
                        "arrayminus": [b[1] for b in bars],
                        "visible": any(b[0] > 0 for b in bars),
                        "color": c,
                    },
                    customdata=[
                        [
                            int(r["n"]),
                            base.f(r["half"]) or 0.0,
                            int(r["n_failed"]),
                            interval_note(r) + (f"<br>measured: {r['why']}" if r.get("why") else ""),
                        ]
                        for r in grp
                    ],
                    hovertemplate=(
                        f"{name}<br>{fields.label(x)} %{{x}}<br>"
                        "mean %{y:,.0f} msg/s<br>%{customdata[3]}"
                        "<br>runs ok %{customdata[0]}, failed %{customdata[2]}<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
            rx, ry, rid = [], [], []
            for r in grp:
                for thr, run in zip(values_of(r["values"]), listed(r["run_ids"]), strict=False):
                    rx.append(float(r[x]))
                    ry.append(float(thr))
                    rid.append(str(run))
                    top = max(top, float(thr))
            if rx:
                fig.add_trace(
                    scatter(
                        x=rx,
                        y=ry,
                        mode="markers",
                        name=f"{name} repeats",
                        legendgroup=name,
                        showlegend=False,
                        marker={"color": style.rgba(c, 0.4), "size": 6, "symbol": symbol},
                        customdata=rid,
                        hovertemplate="run %{customdata}<br>%{y:,.0f} msg/s<extra>repeat</extra>",
                    ),
                    row=1,
                    col=col,
                )
            for source in have_sources:
                pr = [(r, pred_by[_pred_key(r, source)]) for r in grp if _pred_key(r, source) in pred_by]
                if not pr:
                    continue
                sname = f"{name} · {style.SOURCE_LABEL[source]}"
                err = [val * ci for _, (val, ci) in pr]
                px = [float(r[x]) for r, _ in pr]
                top = max(top, *(val + e for (_, (val, _ci)), e in zip(pr, err, strict=True)))
                fig.add_trace(
                    scatter(
                        x=px,
                        y=[val for _, (val, _ci) in pr],
                        mode="lines" if len(pr) > 1 else "lines+markers",
                        name=sname,
                        legendgroup=sname,
                        showlegend=sname not in shown,
                        line={"color": c, "dash": style.SOURCE_DASH[source], "width": 1.5},
                        marker={"symbol": symbol, "size": 7, "color": c},
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
                shown.add(sname)
                if show_res:
                    res_cols.add(col)
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
                            line={"color": c, "dash": style.SOURCE_DASH[source], "width": 1},
                            marker={"symbol": symbol, "size": 5, "color": c},
                            hovertemplate=f"{sname}<br>model − measured %{{y:+.1f}} %<extra></extra>",
                        ),
                        row=2,
                        col=col,
                    )
    if model_only:
        top = max(
            top,
            adaptive.add_model_only(
                fig,
                model_only,
                x=x,
                colour=colour,
                facet=facet,
                facet_values=facet_values,
                colour_order=colour_order,
                label_keys=label_keys,
            ),
        )
    notes = []
    if narrow:
        shown_narrow = ", ".join(narrow[:4]) + (f" and {len(narrow) - 4} more" if len(narrow) > 4 else "")
        notes.append(
            f"open markers: fewer than {MIN_REPEATS_FOR_BAND} runs, the 95 % interval is too wide to draw "
            f"({shown_narrow})"
        )
    if clipped:
        notes.append(f"{clipped} interval(s) clipped at 0 msg/s")
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
    xvals = [r[x] for r in records]
    axis = base.x_axis(x, xvals)
    x_range = axis.pop("range")
    for col in range(1, len(facet_values) + 1):
        bottom = rows if (show_res and col in res_cols) else 1
        # Each facet shows its own ticks: on the residual row where it has residuals, else on the top row
        # (a residual axis with nothing on it is hidden and says why).
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
    fig.update_yaxes(
        title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero", range=[0, max(top, 1.0) * 1.06]
    )
    if show_res:
        # autorange said explicitly: with ranges given on the other axes, Plotly leaves a matched axis
        # group without one at its default [-1, 4] (seen in plotly.js 2.x).
        fig.update_yaxes(row=2, autorange=True)
        fig.update_yaxes(title_text="model − measured (%)", row=2, col=1, zeroline=True, zerolinewidth=1)
    return fig.to_dict()


def sweep_table(points: pd.DataFrame, preds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per point (and hardware class, where the points have one: a row each, never averaged): parameters,
    runs, mean, its 95 % CI and how it is shown, and each source's prediction and error (%); a calibrated
    prediction is matched to its own class's row."""
    cols = [*PARAMS, "runs_ok", "runs_failed", "mean_msgs_per_s", "ci95_msgs_per_s", "interval"]
    if points.empty:
        return pd.DataFrame(columns=cols)
    pts = summarise(points)
    out = pts[["point_id", *PARAMS]].copy()
    classed = "hardware_class" in pts
    if classed:
        out["hardware_class"] = [base.cls(c) or "" for c in pts["hardware_class"]]
    out["runs_ok"] = pts["n"].astype(int)
    out["runs_failed"] = pts["n_failed"].astype(int)
    out["mean_msgs_per_s"] = pts["mean"].round(1)
    out["ci95_msgs_per_s"] = pts["half"].round(1)
    out["interval"] = [interval_note(r) for r in _records(pts)]
    picked = pick_predictions(preds) if preds is not None and not preds.empty else pd.DataFrame()
    for source in SOURCES:
        if picked.empty:
            break
        pr = picked[picked["source"] == source]
        on = ["point_id"]
        if classed and source == "calibration":
            pcls = pr["hardware_class"] if "hardware_class" in pr else [None] * len(pr)
            pr = pr.assign(hardware_class=[base.cls(c) or "" for c in pcls])
            on.append("hardware_class")
        pr = pr[[*on, "predicted", "ci_halfwidth_rel", "method"]]
        if pr.empty:
            continue
        pr = pr.rename(
            columns={
                "predicted": f"{source}_msgs_per_s",
                "ci_halfwidth_rel": f"{source}_ci_rel",
                "method": f"{source}_method",
            }
        )
        out = out.merge(pr, on=on, how="left")
        out[f"{source}_msgs_per_s"] = out[f"{source}_msgs_per_s"].round(1)
        out[f"{source}_error_pct"] = (
            (out[f"{source}_msgs_per_s"] - out["mean_msgs_per_s"]) / out["mean_msgs_per_s"] * 100
        ).round(2)
    return out.drop(columns="point_id")


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
                    "mean_abs_error_pct": round(float(err.mean()), 2),
                    "max_abs_error_pct": round(float(err.max()), 2),
                }
            )
    return pd.DataFrame(rows, columns=[*keys, "source", "points", "mean_abs_error_pct", "max_abs_error_pct"])


_MPL_DASH: dict[str, Any] = {
    "solid": "-",
    "dash": "--",
    "dot": ":",
    "dashdot": "-.",
    "longdash": (0, (8, 3)),
    "longdashdot": (0, (8, 2, 1, 2)),
    style.SOURCE_DASH["paper"]: (0, (5, 1.5, 1, 1.5, 1, 1.5)),
    style.SOURCE_DASH["calibration"]: (0, (1, 2.5)),
}
_MPL_MARKER = {"circle": "o", "square": "s", "diamond": "D", "triangle-up": "^", "x": "x", "star": "*"}


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
    """The sweep as a vector PDF for papers (matplotlib): the same data, palette, line styles and interval
    rules as :func:`sweep_figure` (bands from 3 runs, clipped at zero; open markers below)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = _plottable(points)
    if pts is None:  # as sweep_figure: say so, on a page of its own
        fig = plt.figure(figsize=(4.2, 3.8))
        fig.text(0.5, 0.5, NOTHING_TO_PLOT, ha="center", va="center")
        return _pdf_bytes(fig, plt)
    pts = pts[pts["n"] > 0]
    facet = facet if facet and facet != x and facet in pts else None
    facet_values = sorted({base.key(v) for v in pts[facet]}, key=str) if facet else [None]
    fig, axes = plt.subplots(
        1, len(facet_values), figsize=(4.2 * len(facet_values), 3.8), sharey=True, squeeze=False
    )
    pred_by = _prediction_index(preds)
    keys = base.series_keys(pts, exclude=(x, *([facet] if facet else [])))
    label_keys = base.varying(pts, keys)
    colour_order = sorted({base.key(v) for v in pts[colour]}, key=str)
    for ax, fv in zip(axes[0], facet_values, strict=True):
        sub = pts if facet is None else pts[[base.key(v) == fv for v in pts[facet]]]
        for grp in base.series(sub, keys, x):
            first = grp[0]
            c = style.colour_for(first[colour], colour_order)
            name = base.label(first, label_keys) or base.label(first, [colour])
            dashed = colour != "notifier" and facet != "notifier" and pts["notifier"].nunique() > 1
            ls = _MPL_DASH[style.dash_for(first["notifier"])] if dashed else "-"
            mk = _MPL_MARKER.get(style.symbol_for(first["notifier"]), "o")
            xs = [float(r[x]) for r in grp]
            ax.plot(xs, [r["mean"] for r in grp], linestyle=ls, color=c, lw=1.5, label=name)
            for r in grp:
                ax.plot([float(r[x])], [r["mean"]], mk, color=c, ms=4, mfc=c if r["band"] else "white", mew=1)
            for stretch in _runs(grp):
                bx = [float(r[x]) for r in stretch]
                lo = [max(0.0, float(r["lo"])) for r in stretch]
                hi = [float(r["hi"]) for r in stretch]
                if len(stretch) > 1:
                    ax.fill_between(bx, lo, hi, color=c, alpha=0.18, lw=0)
                else:
                    m = float(stretch[0]["mean"])
                    ax.errorbar(bx, [m], yerr=[[m - lo[0]], [hi[0] - m]], color=c, capsize=3, lw=1)
            rx = [float(r[x]) for r in grp for _ in values_of(r["values"])]
            ry = [v for r in grp for v in values_of(r["values"])]
            ax.scatter(rx, ry, color=c, alpha=0.3, s=6)
            for source in sources:
                pr = [(r, pred_by[_pred_key(r, source)]) for r in grp if _pred_key(r, source) in pred_by]
                if not pr:
                    continue
                ax.plot(
                    [float(r[x]) for r, _ in pr],
                    [val for _, (val, _ci) in pr],
                    linestyle=_MPL_DASH[style.SOURCE_DASH[source]],
                    color=c,
                    lw=1,
                    marker="." if len(pr) == 1 else None,
                    label=f"{name}, {style.SOURCE_LABEL[source]}",
                )
        ax.set_xlabel(fields.label(x))
        if x in fields.INTEGER:
            ticks = base.integer_ticks(pts[x])
            if ticks.get("tickmode") == "array":
                ax.set_xticks(ticks["tickvals"], ticks["ticktext"])
            else:
                from matplotlib.ticker import MaxNLocator

                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if facet:
            ax.set_title(f"{fields.label(facet)}: {base.fmt(fv)}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("throughput (msg/s)")
    axes[0][0].set_ylim(bottom=0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    # The legend below the panels, whole: every series named once.
    fig.legend(handles, labels, loc="lower center", ncol=min(3, max(1, len(labels))), fontsize=6)
    if title:
        fig.suptitle(title, fontsize=11)
    rows_of_legend = math.ceil(len(labels) / 3)
    fig.tight_layout(rect=(0, min(0.45, 0.05 + 0.035 * rows_of_legend), 1, 1))
    return _pdf_bytes(fig, plt)


def _pdf_bytes(fig: Any, plt: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf")
    plt.close(fig)
    return buf.getvalue()
