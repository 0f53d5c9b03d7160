"""What every figure builder shares: blank figures that say why, series names and grouping over records,
integer ticks for integer axes, and a legend the figure (and its PNG/SVG export) has room for."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from demuxlab.dashboard import fields, style
from demuxlab.dashboard.plot import Fig, FigureDict

#: Columns that, beside the point's parameters, tell series apart: a line per hardware class (runs of
#: different classes are never joined) and per server build where a frame has them.
CLASS_KEYS: tuple[str, ...] = ("hardware_class",)
#: Height of one vertical legend entry (px); the legend's own padding; the top and bottom margins of
#: style.base_layout, between which the legend stands.
LEGEND_ENTRY_PX = 20  # Plotly draws 19.9 at font size 13
LEGEND_PAD_PX = 12
LEGEND_MARGINS_PX = 100


def empty_figure(message: str, height: int = 320) -> FigureDict:
    """A blank figure that says why it is blank (no data, nothing chosen)."""
    fig = Fig()
    fig.update_layout(**style.base_layout(height=height))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=message, showarrow=False, font={"size": 15, "color": style.MUTED})
    return fig.to_dict()


def cls(value: Any) -> str | None:
    """A hardware class (or build) as a key: None for local runs (NULL/NaN in a frame)."""
    return value if isinstance(value, str) and value else None


def key(value: Any) -> Any:
    """A value as a grouping key: NaN and None are one key (NaN != NaN would split every closed-loop
    point's ``rate`` into a series of its own)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def label(row: Any, keys: Sequence[str]) -> str:
    """A series name from the values of ``keys`` in ``row``: ``hsha · epoll-lt · 4 thr``."""
    parts = []
    for k in keys:
        v = row[k]
        if k in fields.PARAMS:
            parts.append(fields.value_text(k, v))
        elif k.endswith("hardware_class"):
            side = "" if k == "hardware_class" else f"{k.split('_', 1)[0].upper()} "
            parts.append(f"{side}class {v}" if cls(v) else f"{side}local")
        elif k == "build":
            parts.append(f"build {short_build(v)}" if cls(v) else "build ?")
        else:
            parts.append(f"{k}={v}")
    return " · ".join(parts)


def short_build(build: Any) -> str:
    """A build id as shown: the binary's SHA-256 or the image digest, 8 hex digits."""
    text = str(build or "")
    return text.removeprefix("sha256:")[:8] or "?"


def f(v: Any) -> float | None:
    """A float for JSON, None for missing (NaN/None)."""
    if v is None:
        return None
    x = float(v)
    return None if x != x else x


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return fields.number(v)
    return str(v)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as dicts, from column lists: five times faster than ``to_dict("records")``
    (which boxes every cell), which matters on pages of thousands of rows."""
    cols = [str(c) for c in frame.columns]
    data = [frame[c].tolist() for c in frame.columns]
    return [dict(zip(cols, row, strict=True)) for row in zip(*data, strict=True)]


def series(frame: pd.DataFrame, keys: Sequence[str], x: str) -> list[list[dict[str, Any]]]:
    """The rows of ``frame`` grouped by ``keys`` (in sorted key order), each group sorted by ``x``: plain
    Python over records, much cheaper than pandas groupby for the few hundred rows a figure has. Rows
    without an ``x`` value (a closed loop has no rate) are left out."""
    return series_of(records(frame), keys, x)


def series_of(recs: Iterable[dict[str, Any]], keys: Sequence[str], x: str) -> list[list[dict[str, Any]]]:
    """:func:`series` over records."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in recs:
        if key(rec[x]) is None:
            continue
        groups.setdefault(tuple(key(rec[k]) for k in keys), []).append(rec)
    ordered = sorted(groups, key=lambda k: tuple(str(v) for v in k))
    return [sorted(groups[k], key=lambda r: float(r[x])) for k in ordered]


def varying(frame: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    """The keys whose column takes more than one value in ``frame``."""
    return [k for k in keys if k in frame and frame[k].map(key).nunique(dropna=False) > 1]


def series_keys(frame: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """What tells one line from another: every parameter not excluded (the x axis, the facet), and the
    hardware class / build columns the frame has."""
    skip = set(exclude)
    return [k for k in (*fields.PARAMS, *CLASS_KEYS, "build") if k in frame and k not in skip]


def integer_ticks(values: Iterable[Any]) -> dict[str, Any]:
    """Axis settings for a whole-number axis (threads, connections, sizes): the values themselves when
    they are few and apart, else a whole-number step, never a tick at 1.5 threads."""
    xs = sorted({float(v) for v in values if key(v) is not None})
    if not xs:
        return {}
    span = xs[-1] - xs[0]
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    if len(xs) <= 16 and (not gaps or min(gaps) >= span / 30):
        return {"tickmode": "array", "tickvals": xs, "ticktext": [fields.number(v) for v in xs]}
    step = _nice(max(1.0, span / 8))
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": ",d"}


def _nice(x: float) -> float:
    """The smallest of 1, 2, 5 × 10^k not below ``x``."""
    exp = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * exp >= x:
            return float(m * exp)
    return float(10 * exp)


def x_axis(x: str, values: Iterable[Any]) -> dict[str, Any]:
    """Title, ticks and range of an x axis showing parameter ``x``: the range padded so that a marker at
    either end is drawn whole. (A figure that gives ranges must say ``autorange=True`` on the axes it
    leaves to Plotly: plotly.js leaves a matched axis group without a range at [-1, 4].)"""
    vals = [float(v) for v in values if key(v) is not None]
    props: dict[str, Any] = {"title_text": fields.label(x)}
    if x in fields.INTEGER:
        props.update(integer_ticks(vals))
    if vals:
        pad = (max(vals) - min(vals)) * 0.08 or 0.5
        props["range"] = [min(vals) - pad, max(vals) + pad]
    return props


def legend_height(entries: int, plot_px: int, margins_px: int = LEGEND_MARGINS_PX) -> int:
    """A figure height at which a vertical legend of ``entries`` fits whole: Plotly scrolls an overflowing
    legend on screen and cuts it in PNG/SVG exports. ``margins_px``: the figure's top and bottom margins
    together, where they are not style.base_layout's (the legend has the height between them)."""
    return max(plot_px, margins_px + LEGEND_PAD_PX + LEGEND_ENTRY_PX * entries)


def legend_entries(traces: Sequence[Mapping[str, Any]]) -> int:
    """How many entries the legend of a figure with these traces has (a trace without a name, or with
    ``showlegend`` false, has none)."""
    return sum(1 for t in traces if t.get("showlegend", True) and t.get("name"))


#: Series of a panel are dodged when two of them meet: at one x, nearer than this share of the panel's height.
MEET_SHARE = 0.05
#: How far dodged series spread around their x value: this share of the smallest gap between x values
#: (either side), or ±0.3 where the panel has one x value (its axis is padded by 0.5).
DODGE_SHARE = 0.12


def dodge_panel(
    groups: Sequence[Sequence[Mapping[str, Any]]], x: str, y: str = "mean", top: float | None = None
) -> list[float]:
    """The x offset of each of a panel's series (``groups``: each a series' records): 0 for all, unless two
    series meet (the same x, ``y`` within :data:`MEET_SHARE` of the panel's height, ``top`` where the axis
    reaches higher than the values, e.g. for a model's line: one mark would hide the other), when they are
    set side by side (:func:`demuxlab.marks.dodge`) in the order given."""
    from demuxlab import marks

    at: dict[float, list[float]] = {}
    for grp in groups:
        for r in grp:
            v = f(r[y])
            if v is not None and key(r[x]) is not None:
                at.setdefault(float(r[x]), []).append(v)
    ys = [v for vs in at.values() for v in vs]
    if len(groups) < 2 or not ys:
        return [0.0] * len(groups)
    # the axis starts at zero (throughput, service times): marks meet on the page at a share of its height
    span = max(abs(max(ys)), abs(min(ys)), top or 0.0, 1e-12)
    xs = sorted(at)
    # one x value (a sweep by connections of one workload): every series in one column, their intervals
    # one over another; else only where two marks meet
    meet = len(xs) == 1 or any(
        abs(a - b) <= MEET_SHARE * span for vs in at.values() for i, a in enumerate(vs) for b in vs[i + 1 :]
    )
    if not meet:
        return [0.0] * len(groups)
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    width = DODGE_SHARE * 2 * min(gaps) if gaps else 0.6
    return marks.dodge(len(groups), width)


def notes_below(fig: Fig, notes: Sequence[str], first_px: int) -> None:
    """The figure's notes, one muted line each, left-aligned under the plot: the first ``first_px`` pixels
    below the plot area's bottom (clear of the x axis's ticks and title), the others 18 px apart."""
    for i, note in enumerate(notes):
        fig.add_annotation(
            text=note,
            xref="paper",
            yref="paper",
            x=0,
            y=0,
            yshift=-first_px - 18 * i,
            xanchor="left",
            yanchor="top",
            showarrow=False,
            font={"size": 11, "color": style.MUTED},
        )
