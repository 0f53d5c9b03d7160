"""The sweep as a vector PDF for papers: the Sweep figure's data, layout, marks and interval rule
(:mod:`.sweep_view`), drawn by matplotlib through :mod:`demuxlab.staticplot`."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import fields, style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import values_of
from demuxlab.dashboard.figures.sweep_view import (
    NOTHING_TO_PLOT,
    Drawn,
    Series,
    View,
    _interval,
    _plottable,
    _pred_key,
    _prediction_index,
    _series,
    view,
)
from demuxlab.vocab import RATE_SOURCES

SOURCES: tuple[str, ...] = RATE_SOURCES


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
                marker=marks.MPL_MARKER.get(s.symbol, "o"),
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
