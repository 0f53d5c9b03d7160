"""An adaptive experiment on the Sweep page (docs/adaptive.md): the points it never measured, drawn as the
model's values (dashed, open markers, no band, no error bar, "model only" in the legend and the hover),
and why each measured point was chosen (in its hover). Read from its stored decisions
(``adaptive_decisions``, :func:`demuxlab.dashboard.data.points.adaptive_decisions`).

Pure: the decisions document and the figure's own grouping in, traces out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from demuxlab.dashboard import fields, style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.plot import Fig, scatter


def model_only(
    decisions: Mapping[str, Any] | None, patterns: Sequence[str] | None, notifiers: Sequence[str] | None
) -> list[dict[str, Any]]:
    """The grid points an adaptive experiment never measured (its calibration points aside), within the
    page's pattern and notifier selection."""
    if not decisions:
        return []
    return [
        g
        for g in decisions.get("grid", [])
        if not g.get("measured")
        and g.get("mean") is not None
        and not g.get("instrument")
        and (not patterns or g["pattern"] in patterns)
        and (not notifiers or g["notifier"] in notifiers)
    ]


def why_measured(decisions: Mapping[str, Any] | None) -> dict[str, str]:
    """Point key → why the adaptive sweep measured it."""
    if not decisions:
        return {}
    return {g["point_key"]: str(g.get("why") or "") for g in decisions.get("grid", []) if g.get("measured")}


def add_model_only(
    fig: Fig,
    rows: Sequence[Mapping[str, Any]],
    *,
    x: str,
    colour: str,
    facet: str | None,
    facet_values: Sequence[Any],
    colour_order: Sequence[Any],
    label_keys: Sequence[str],
) -> float:
    """One trace per series and facet of ``rows`` (model-only points), in the series' colour; returns
    the largest value drawn (for the axis)."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        fkey = base.key(r.get(facet)) if facet else None
        if fkey not in facet_values:
            continue
        groups.setdefault((fkey, *(base.key(r.get(k)) for k in label_keys), r[colour]), []).append(r)
    top = 0.0
    shown: set[str] = set()
    for (fkey, *_), grp in sorted(groups.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        grp = sorted(grp, key=lambda r: float(r[x]))
        first = grp[0]
        name = (base.label(first, label_keys) or base.label(first, [colour])) + " · model only"
        c = style.colour_for(first[colour], list(colour_order))
        top = max(top, *(float(r["mean"]) for r in grp))
        fig.add_trace(
            scatter(
                x=[float(r[x]) for r in grp],
                y=[float(r["mean"]) for r in grp],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=name not in shown,
                line={"color": c, "dash": "dash", "width": 1},
                marker={"symbol": "circle-open", "size": 8, "color": c},
                customdata=[str(r.get("why") or "model only") for r in grp],
                hovertemplate=(
                    f"{name}<br>{fields.label(x)} %{{x}}<br>model %{{y:,.0f}} msg/s (never measured, no "
                    "interval)<br>%{customdata}<extra>model only</extra>"
                ),
            ),
            row=1,
            col=list(facet_values).index(fkey) + 1,
        )
        shown.add(name)
    return top
