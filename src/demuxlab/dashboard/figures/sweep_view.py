"""How a sweep is laid out, for the Sweep figure (:mod:`.sweep`), its PDF (:mod:`.sweep_pdf`) and its table
(:mod:`.sweep_table`): the points summarised, the panels (a facet's values), the series in each and how each
is marked (colour, dash, marker, a dodge where two series meet), each point's interval by
:mod:`demuxlab.marks`' one rule, and the stored predictions by point, source and hardware class. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import pick_predictions, summarise

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


def dodge_offsets(v: View, top: float | None = None) -> dict[tuple[Any, ...], float]:
    """Each group's x offset (:func:`base.dodge_panel`, panel by panel; ``top``: the throughput axis's,
    where a model line reaches above the means)."""
    out: dict[tuple[Any, ...], float] = {}
    for fv in v.facet_values:
        gkeys = v.in_panel(fv)
        out.update(zip(gkeys, base.dodge_panel([v.groups[k] for k in gkeys], v.x, top=top), strict=True))
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
