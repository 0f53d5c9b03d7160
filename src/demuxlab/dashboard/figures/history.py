"""The History page's builders, after asv and conbench: each point's throughput across the server builds
its runs record and the spec versions, oldest to newest, and each change beyond noise between two
consecutive revisions flagged as a regression or an improvement, with the two builds named and links to
the pair of runs (and the comparison) that show it.

A revision is one spec version × one server build, ordered by its first run. A change is flagged when the
one decision (:func:`demuxlab.stats.difference`: Welch's t-test, p < :data:`demuxlab.stats.ALPHA`) says the
two revisions' runs differ *and* the means moved by at least :data:`CHANGE_MIN_REL`: significance alone
flags a 0.5 % shift once there are many repeats, size alone flags noise when there are few (the same
two-part rule as the run's stationarity test, ``demuxlab.stats``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import address, fields, style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import (
    difference_of,
    listed,
    oversubscribed_text,
    summarise,
    values_of,
)
from demuxlab.dashboard.plot import Fig, FigureDict, scatter

#: The least relative change of the mean that counts as a change (5 %: asv flags at 10 % by default,
#: conbench at a z-score of 5; our repeats are few, so the test carries the noise and this the size).
CHANGE_MIN_REL = 0.05
REGRESSION = "regression"
IMPROVEMENT = "improvement"
CHANGE_COLUMNS: tuple[str, ...] = (
    "verdict",
    "point",
    "hardware_class",
    "before",
    "after",
    "before_msgs_per_s",
    "after_msgs_per_s",
    "change_pct",
    "p_value",
    "n",
    "runs",
    "compare",
)


@dataclass(frozen=True)
class Revision:
    index: int
    experiment_id: int
    spec_sha256: str
    build: str | None
    experiment_value: str  # how the dashboard names the spec version (name@sha8)

    @property
    def label(self) -> str:
        build = base.short_build(self.build) if self.build else "?"
        return f"{self.index + 1}. spec {self.spec_sha256[:8]} · build {build}"


def revisions(frame: pd.DataFrame, name: str) -> list[Revision]:
    """The (spec version, build) pairs of ``frame``, oldest first (by their first run)."""
    if frame.empty:
        return []
    firsts = (
        frame.assign(build=pd.Series([base.cls(b) for b in frame["build"]], index=frame.index, dtype=object))
        .groupby(["experiment_id", "spec_sha256", "build"], dropna=False, sort=False)
        .agg(first=("first_started", "min"))
        .reset_index()
        .sort_values(["first", "experiment_id"])
    )
    return [
        Revision(
            i,
            int(r["experiment_id"]),
            str(r["spec_sha256"]),
            base.cls(r["build"]),
            f"{name}@{str(r['spec_sha256'])[:8]}",
        )
        for i, r in enumerate(base.records(firsts))
    ]


def _rev_key(r: dict[str, Any]) -> tuple[int, str | None]:
    return (int(r["experiment_id"]), base.cls(r["build"]))


def _series(frame: pd.DataFrame, revs: list[Revision]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Point (× class) → its summarised rows in revision order (each row with ``rev``)."""
    index = {(r.experiment_id, r.build): r for r in revs}
    pts = summarise(frame)
    pts = pts[pts["n"] > 0]
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    records: list[dict[str, Any]] = base.records(pts)
    for r in records:
        r["rev"] = index[_rev_key(r)]
        k = (*(base.key(r[f]) for f in fields.PARAMS), base.cls(r.get("hardware_class")))
        out.setdefault(k, []).append(r)
    for rows in out.values():
        rows.sort(key=lambda r: r["rev"].index)
    return out


def _representative(r: dict[str, Any]) -> str | None:
    """The run of a revision's point closest to its mean: the one to open to see the level."""
    vals, ids = values_of(r["values"]), [str(i) for i in listed(r["run_ids"])]
    if not vals or len(ids) != len(vals):
        return None
    mean = sum(vals) / len(vals)
    return ids[min(range(len(vals)), key=lambda i: abs(vals[i] - mean))]


@dataclass(frozen=True)
class History:
    """One experiment's history, computed once per request: its revisions, each point's summarised rows
    in revision order, and the changes beyond noise."""

    name: str
    frame: pd.DataFrame
    revisions: list[Revision]
    series: dict[tuple[Any, ...], list[dict[str, Any]]]
    changes: pd.DataFrame


def analyse(frame: pd.DataFrame, name: str) -> History:
    revs = revisions(frame, name)
    series = _series(frame, revs) if revs else {}
    return History(name, frame, revs, series, _changes(series))


def changes(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Every change beyond noise between consecutive revisions of each point (module doc's rule)."""
    return analyse(frame, name).changes


def _changes(all_series: dict[tuple[Any, ...], list[dict[str, Any]]]) -> pd.DataFrame:
    rows = []
    for pkey, series in all_series.items():
        cls = pkey[-1]
        for a, b in itertools.pairwise(series):
            diff = difference_of(a, b)
            p = diff.p
            rel = (float(b["mean"]) - float(a["mean"])) / float(a["mean"]) if float(a["mean"]) else 0.0
            if p is None or not diff.differs or abs(rel) < CHANGE_MIN_REL:
                continue
            ra, rb = _representative(a), _representative(b)
            ea, eb = a["rev"], b["rev"]
            query = {"a": ea.experiment_value, "b": eb.experiment_value}
            if ea.build:
                query["a_build"] = ea.build[: address.BUILD_CHARS]
            if eb.build:
                query["b_build"] = eb.build[: address.BUILD_CHARS]
            rows.append(
                {
                    "verdict": REGRESSION if rel < 0 else IMPROVEMENT,
                    "point": str(a["point_key"]),
                    "hardware_class": cls or "",
                    "before": ea.label,
                    "after": eb.label,
                    "before_msgs_per_s": marks.sig(float(a["mean"])),
                    "after_msgs_per_s": marks.sig(float(b["mean"])),
                    "change_pct": marks.sig(100.0 * rel, 3),
                    "p_value": marks.sig(p, 2),
                    "n": f"{diff.n_a} vs {diff.n_b}",
                    "runs": (f"[{ra[:8]}](/run?run={ra}) → [{rb[:8]}](/run?run={rb})" if ra and rb else ""),
                    "compare": f"[{ea.label.split('. ', 1)[1]} → {eb.label.split('. ', 1)[1]}]"
                    f"(/compare?{urlencode(query)})",
                }
            )
    out = pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))
    return out.sort_values(["verdict", "change_pct"]).reset_index(drop=True) if not out.empty else out


def revisions_table(h: History) -> pd.DataFrame:
    """One row per revision: its spec version, build, first run, points and runs."""
    frame, revs = h.frame, h.revisions
    rows = []
    for rev in revs:
        same = np.array([base.cls(b) == rev.build for b in frame["build"]], dtype=bool)
        mine = frame[(frame["experiment_id"] == rev.experiment_id).to_numpy() & same]
        rows.append(
            {
                "revision": rev.label,
                "spec": rev.experiment_value,
                "build": rev.build or "",
                "first_run": mine["first_started"].min(),
                "points": len(mine),
                "runs_ok": int(mine["n_ok"].sum()),
                "runs_failed": int(mine["n_failed"].sum()),
            }
        )
    return pd.DataFrame(
        rows, columns=["revision", "spec", "build", "first_run", "points", "runs_ok", "runs_failed"]
    )


@dataclass(frozen=True)
class _Marks:
    """How History tells its series apart: colour = pattern, dash = notifier (as on every page), and the
    marker = the first other parameter that varies (the thread count: lf at 1 and at 2 threads would
    otherwise share colour, dash and marker), else the notifier; ``dx``: each point's x offset, where two
    series' marks meet at one revision (set side by side, :func:`base.dodge_panel`)."""

    label_keys: list[str]
    symbol_key: str | None
    symbol_order: list[Any]
    dx: dict[str, float]

    def symbol(self, r: dict[str, Any]) -> str:
        if self.symbol_key is None:
            return style.symbol_for(r["notifier"])
        return style.symbol_of(base.key(r[self.symbol_key]), self.symbol_order)

    @property
    def legend_title(self) -> str:
        marker = fields.label(self.symbol_key) if self.symbol_key else "notifier"
        return f"colour: pattern · line: notifier · marker: {marker}"


def _marks(ordered: list[list[dict[str, Any]]], label_keys: list[str], top: float) -> _Marks:
    others = [k for k in label_keys if k not in ("pattern", "notifier", "hardware_class")]
    symbol_key = others[0] if others else None
    order = sorted({base.key(r[symbol_key]) for rows in ordered for r in rows}, key=str) if symbol_key else []
    at = [[{"i": r["rev"].index, "mean": r["mean"]} for r in rows] for rows in ordered]
    offsets = base.dodge_panel(at, "i", top=top)
    dx = {_series_id(rows): d for rows, d in zip(ordered, offsets, strict=True)}
    return _Marks(label_keys, symbol_key, order, dx)


def _series_id(rows: list[dict[str, Any]]) -> str:
    return f"{rows[0]['point_key']}|{base.cls(rows[0].get('hardware_class')) or ''}"


def history_figure(h: History) -> FigureDict:
    """Each point's mean throughput (95 % CI, :mod:`demuxlab.marks`' rule) per revision, oldest to newest:
    a line per point, colour = pattern, dash = notifier, marker = thread count (:class:`_Marks`), series
    that meet at a revision set side by side; a flagged change's later point ringed (red: regression,
    blue: improvement) and labelled; an oversubscribed revision's point ringed too."""
    revs, series, flagged, name = h.revisions, h.series, h.changes, h.name
    if not revs:
        return base.empty_figure("no ok runs for this experiment")
    marks_of: dict[tuple[str, str], str] = {
        (str(r["point"]), str(r["after"])): str(r["verdict"]) for r in base.records(flagged)
    }
    union = pd.DataFrame([r for rows in series.values() for r in rows])
    label_keys = base.varying(union, [*fields.PARAMS, "hardware_class"]) or ["pattern", "notifier"]
    ordered = sorted(series.values(), key=lambda rs: base.label(rs[0], label_keys))
    ivs_all = [marks.interval(float(r["mean"]), base.f(r["half"]), int(r["n"])) for rs in ordered for r in rs]
    top = marks.axis_top([iv.mean for iv in ivs_all], [iv.hi for iv in ivs_all])
    look = _marks(ordered, label_keys, top.top)
    fig = Fig()
    for rows in ordered:
        _add_point(fig, rows, look, marks_of)
    _annotate_changes(fig, series, flagged, look)
    fig.update_layout(
        **style.base_layout(
            title={"text": f"{name}: throughput across spec versions and server builds", "x": 0.01},
            height=base.legend_height(len(series), 460),
            hovermode="closest",
        )
    )
    fig.update_layout(legend={"title": {"text": look.legend_title, "side": "top"}})
    fig.update_xaxes(
        tickmode="array",
        tickvals=[r.index for r in revs],
        ticktext=[r.label for r in revs],
        range=[-0.5, len(revs) - 0.5],
        zeroline=False,
        title_text="revision (oldest → newest)",
    )
    fig.update_yaxes(title_text="throughput (msg/s)", rangemode="tozero", range=[0, top.top])
    return fig.to_dict()


def _ring(m: str | None, r: dict[str, Any], c: str) -> tuple[int, int, str]:
    """(size, ring width, ring colour) of a point's marker: a flagged change, an oversubscribed point, or
    neither."""
    if m:
        return 13, 3, style.REGRESSION if m == REGRESSION else style.IMPROVEMENT
    if r.get("over"):
        return 12, 2, style.OVERSUBSCRIBED
    return 7, 0, c


def _add_point(
    fig: Fig, rows: list[dict[str, Any]], look: _Marks, marks_of: dict[tuple[str, str], str]
) -> None:
    first = rows[0]
    c = style.colour_for(first["pattern"])
    name_ = base.label(first, look.label_keys)
    point = str(first["point_key"])
    ring = [marks_of.get((point, r["rev"].label)) for r in rows]
    looks = [_ring(m, r, c) for m, r in zip(ring, rows, strict=True)]
    ivs = [marks.interval(float(r["mean"]), base.f(r["half"]), int(r["n"])) for r in rows]
    symbol = look.symbol(first)
    dx = look.dx.get(_series_id(rows), 0.0)
    fig.add_trace(
        scatter(
            x=[r["rev"].index + dx for r in rows],
            y=[iv.mean for iv in ivs],
            mode="lines+markers",
            name=name_,
            line={"color": c, "dash": style.dash_for(first["notifier"])},
            marker={
                "color": c,
                "symbol": [symbol if iv.drawn else f"{symbol}-open" for iv in ivs],
                "size": [lk[0] for lk in looks],
                "line": {"width": [lk[1] for lk in looks], "color": [lk[2] for lk in looks]},
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [iv.plus for iv in ivs],
                "arrayminus": [iv.minus for iv in ivs],
            },
            customdata=[
                [int(r["n"]), m or "", iv.note(), oversubscribed_text(r), r["rev"].label]
                for r, m, iv in zip(rows, ring, ivs, strict=True)
            ],
            hovertemplate=f"{name_}<br>%{{customdata[4]}}<br>%{{y:,.0f}} msg/s (%{{customdata[0]}} runs)"
            "<br>%{customdata[2]}<br>%{customdata[1]} %{customdata[3]}<extra></extra>",
        )
    )


def _annotate_changes(
    fig: Fig, series: dict[tuple[Any, ...], list[dict[str, Any]]], flagged: pd.DataFrame, look: _Marks
) -> None:
    """Each flagged change's size beside its later point (where that point is drawn, dodge included)."""
    for ch in base.records(flagged):
        for rows in series.values():
            after = next(
                (r for r in rows if str(r["point_key"]) == ch["point"] and r["rev"].label == ch["after"]),
                None,
            )
            if after is None:
                continue
            fig.add_annotation(
                x=after["rev"].index + look.dx.get(_series_id(rows), 0.0),
                y=float(after["mean"]),
                text=f"{ch['change_pct']:+.0f} %",
                showarrow=True,
                arrowhead=0,
                ax=34,
                ay=-18 if ch["verdict"] == IMPROVEMENT else 18,
                font={
                    "size": 12,
                    "color": style.REGRESSION if ch["verdict"] == REGRESSION else style.IMPROVEMENT,
                },
            )
            break
