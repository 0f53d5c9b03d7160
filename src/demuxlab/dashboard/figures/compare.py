"""The Compare page's builders: two or more sides (experiments, host pairs, server builds) on the same
points. Side A is the baseline: every other side gets its ratio to A and Welch's test of the difference.

A side whose runs have hardware classes keeps a row and a line per class (``<side>_hardware_class``):
classes are compared, never averaged. The comparison is computed once (:func:`analyse`) and both the
table and the figure are read from it, over records (a few hundred rows per side), not pandas."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from demuxlab.dashboard import style
from demuxlab.dashboard.fields import PARAMS
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import differs, summarise, welch_of
from demuxlab.dashboard.plot import Fig, FigureDict, scatter

#: The sides' letters, in order (the address keys ``a``, ``b``, …).
SIDES: tuple[str, ...] = ("a", "b", "c", "d")

Records = list[dict[str, Any]]


@dataclass(frozen=True)
class Comparison:
    letters: tuple[str, ...]
    sides: tuple[Records, ...]  # each side's summarised points with ok runs
    classed: tuple[bool, ...]  # whether a side's runs have hardware classes
    rows: Records  # the table's rows: a point measured on A and on at least one other side
    table: pd.DataFrame


def _point(r: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(base.key(r[k]) for k in PARAMS)


def _summarised(frame: pd.DataFrame) -> tuple[Records, bool]:
    if frame.empty:
        return [], False
    recs = [r for r in base.records(summarise(frame)) if r["n"] > 0]
    classed = any(base.cls(r.get("hardware_class")) for r in recs)
    for r in recs:
        r["hardware_class"] = base.cls(r.get("hardware_class")) or ""
    return recs, classed


def analyse(sides: Sequence[pd.DataFrame]) -> Comparison:
    """Points measured on side A and on at least one other side (same parameters): each side's mean,
    95 % CI half-width and runs; for each side after A its ratio to A, Welch's p-value against A and
    whether it differs (p < 0.05), and whether the two CIs overlap."""
    letters = SIDES[: len(sides)]
    done = [_summarised(s) for s in sides]
    recs = tuple(r for r, _ in done)
    classed = tuple(c for _, c in done)
    by_point: list[dict[tuple[Any, ...], Records]] = []
    for side in recs:
        index: dict[tuple[Any, ...], Records] = {}
        for r in side:
            index.setdefault(_point(r), []).append(r)
        by_point.append(index)
    others = [i for i in range(1, len(recs)) if recs[i]]
    rows: Records = []
    for ra in recs[0] if recs else []:
        k = _point(ra)
        matched: list[list[dict[str, Any] | None]] = []
        for i in others:
            hits = by_point[i].get(k)
            matched.append(list(hits) if hits else [None])
        if all(m == [None] for m in matched):
            continue
        for combo in itertools.product(*matched):
            row: dict[str, Any] = {f: ra[f] for f in PARAMS}
            row["rate"] = base.key(row["rate"])
            picked: dict[int, dict[str, Any] | None] = {0: ra, **dict(zip(others, combo, strict=True))}
            for i, rx in picked.items():
                if classed[i]:
                    row[f"{letters[i]}_hardware_class"] = rx["hardware_class"] if rx else None
            for i, rx in picked.items():
                x = letters[i]
                row[f"{x}_mean"] = round(float(rx["mean"]), 1) if rx else None
                row[f"{x}_ci95"] = base.f(round(float(rx["half"]), 1)) if rx else None
                row[f"{x}_runs"] = int(rx["n"]) if rx else 0
                row[f"_{x}"] = rx
            for i in others:
                x, rx = letters[i], picked[i]
                if rx is None:
                    row.update({f"ratio_{x}_over_a": None, f"p_{x}_vs_a": None, f"{x}_differs": ""})
                    row[f"cis_overlap_{x}"] = ""
                    continue
                p = welch_of(ra, rx)
                row[f"ratio_{x}_over_a"] = round(float(rx["mean"]) / float(ra["mean"]), 4)
                row[f"p_{x}_vs_a"] = None if p is None else round(p, 4)
                row[f"{x}_differs"] = differs(p)
                known = ra["half"] == ra["half"] and rx["half"] == rx["half"]
                overlap = ra["lo"] <= rx["hi"] and rx["lo"] <= ra["hi"]
                row[f"cis_overlap_{x}"] = ("yes" if overlap else "no") if known else "n/a (<2 runs)"
            rows.append(row)
    cols = [
        *PARAMS,
        *(f"{letters[i]}_hardware_class" for i in range(len(recs)) if classed[i]),
        *(f"{letters[i]}_{s}" for i in (0, *others) for s in ("mean", "ci95", "runs")),
        *(
            f"{p}{letters[i]}{q}"
            for i in others
            for p, q in (("ratio_", "_over_a"), ("p_", "_vs_a"), ("", "_differs"), ("cis_overlap_", ""))
        ),
    ]
    table = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    return Comparison(letters, recs, classed, rows, table)


def compare_table(sides: Sequence[pd.DataFrame]) -> pd.DataFrame:
    return analyse(sides).table


def compare_figure(
    sides: Sequence[pd.DataFrame] | Comparison,
    labels: Sequence[str],
    *,
    x: str = "threads",
) -> FigureDict:
    """One column per side on a shared throughput axis (colour = pattern, dash and marker = notifier, as
    on every page), each point with its 95 % CI (from 3 runs on, as on the Sweep); under each side after
    A, its ratio to A (marker filled where Welch's test says the two differ)."""
    cmp = sides if isinstance(sides, Comparison) else analyse(sides)
    if not cmp.rows:
        return base.empty_figure("the sides share no point with ok runs")
    n = len(cmp.letters)
    fig = Fig(
        rows=2,
        cols=n,
        shared_xaxes=True,
        shared_yaxes=True,
        row_heights=[0.68, 0.32],
        vertical_spacing=0.08,
        horizontal_spacing=0.05,
        subplot_titles=list(labels),
    )
    union = pd.DataFrame([r for side in cmp.sides for r in side])
    keys = base.series_keys(union, exclude=(x,))
    label_keys = base.varying(union, keys) or ["pattern", "notifier"]
    shared = {_point(r) for r in cmp.rows}
    xs_all = [r[x] for r in cmp.rows]
    axis = base.x_axis(x, xs_all)
    top = 0.0
    shown = 0
    for col, (letter, lab, recs) in enumerate(zip(cmp.letters, labels, cmp.sides, strict=True), start=1):
        for grp in base.series_of((r for r in recs if _point(r) in shared), keys, x):
            first = grp[0]
            c = style.colour_for(first["pattern"])
            name = f"{base.label(first, label_keys)} · {lab}"
            bars = [
                (float(g["half"]), min(float(g["half"]), float(g["mean"])))
                if g["band"] and g["half"] == g["half"]
                else (0.0, 0.0)
                for g in grp
            ]
            top = max(top, *(float(g["mean"]) + b[0] for g, b in zip(grp, bars, strict=True)))
            shown += 1
            fig.add_trace(
                scatter(
                    x=[float(g[x]) for g in grp],
                    y=[base.f(g["mean"]) for g in grp],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    line={"color": c, "dash": style.dash_for(first["notifier"])},
                    marker={"color": c, "symbol": style.symbol_for(first["notifier"])},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [b[0] for b in bars],
                        "arrayminus": [b[1] for b in bars],
                    },
                ),
                row=1,
                col=col,
            )
        if letter == "a":
            fig.update_xaxes(row=2, col=col, visible=False)
            fig.update_yaxes(row=2, col=col, visible=False)
            fig.update_xaxes(row=1, col=col, showticklabels=True, **axis)
            continue
        ratio = f"ratio_{letter}_over_a"
        rkeys = [k for k in PARAMS if k != x] + [
            k for k in ("a_hardware_class", f"{letter}_hardware_class") if cmp.rows and k in cmp.rows[0]
        ]
        mine = [r for r in cmp.rows if r.get(ratio) is not None]
        rlabel = base.varying(pd.DataFrame(mine, columns=rkeys), rkeys) or ["pattern", "notifier"]
        for grp in base.series_of(mine, rkeys, x):
            first = grp[0]
            c = style.colour_for(first["pattern"])
            verdict = [str(g[f"{letter}_differs"]) for g in grp]
            fig.add_trace(
                scatter(
                    x=[float(g[x]) for g in grp],
                    y=[base.f(g[ratio]) for g in grp],
                    mode="lines+markers",
                    name=f"{base.label(first, rlabel)} · {lab} / A",
                    showlegend=False,
                    line={"color": c, "dash": style.dash_for(first["notifier"])},
                    marker={
                        "color": [c if v == "yes" else "white" for v in verdict],
                        "symbol": style.symbol_for(first["notifier"]),
                        "line": {"color": c, "width": 2},
                        "size": 9,
                    },
                    customdata=[
                        [v, "—" if g[f"p_{letter}_vs_a"] is None else g[f"p_{letter}_vs_a"]]
                        for v, g in zip(verdict, grp, strict=True)
                    ],
                    hovertemplate=f"{lab} / A %{{y:.3f}}<br>differs (Welch, p < 0.05): %{{customdata[0]}}"
                    "<br>p = %{customdata[1]}<extra></extra>",
                ),
                row=2,
                col=col,
            )
        fig.add_hline(y=1.0, line={"color": style.MUTED, "dash": "dot"}, row=2, col=col)
        fig.update_xaxes(row=2, col=col, **axis)
    fig.update_layout(
        **style.base_layout(
            title={"text": " vs ".join(labels[1:]) + f" against {labels[0]}", "x": 0.01},
            height=base.legend_height(shown, 580),
        )
    )
    fig.update_yaxes(
        title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero", range=[0, max(top, 1.0) * 1.06]
    )
    fig.update_yaxes(row=2, autorange=True)  # see base.x_axis: a matched group left without a range
    # The ratios' scale on the first side that has them: shared axes number only the first column's, and
    # A's (no ratio to itself) is hidden, which left the ratios without a number.
    fig.update_yaxes(title_text="ratio to A", showticklabels=True, row=2, col=2 if n > 1 else 1)
    return fig.to_dict()


def side_label(letter: str, experiment: str, pair: str | None, build: str | None) -> str:
    return (
        f"{letter.upper()}: {experiment}"
        + (f" on {pair}" if pair else "")
        + (f" build {base.short_build(build)}" if build else "")
    )
