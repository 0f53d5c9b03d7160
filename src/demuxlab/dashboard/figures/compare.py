"""The Compare page's builders: two or more sides (experiments, host pairs, server builds) on the same
points. Side A is the baseline: every other side gets its ratio to A and the one decision of whether they
differ (:func:`demuxlab.stats.difference`: Welch's t-test, p < 0.05, n beside it).

A side whose runs have hardware classes keeps a row and a line per class (``<side>_hardware_class``):
classes are compared, never averaged. The comparison is computed once (:func:`analyse`) and both the
table and the figure are read from it, over records (a few hundred rows per side), not pandas."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import style
from demuxlab.dashboard.fields import PARAMS
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import difference_of, oversubscribed_text, summarise
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
        matched: list[list[dict[str, Any] | None]] = []
        for i in others:
            hits = by_point[i].get(_point(ra))
            matched.append(list(hits) if hits else [None])
        if all(m == [None] for m in matched):
            continue
        for combo in itertools.product(*matched):
            picked: dict[int, dict[str, Any] | None] = {0: ra, **dict(zip(others, combo, strict=True))}
            rows.append(_row(ra, picked, others, letters, classed))
    cols = [
        *PARAMS,
        *(f"{letters[i]}_hardware_class" for i in range(len(recs)) if classed[i]),
        *(f"{letters[i]}_{s}" for i in (0, *others) for s in ("mean", "ci95", "runs")),
        *(
            f"{p}{letters[i]}{q}"
            for i in others
            for p, q in (("ratio_", "_over_a"), ("p_", "_vs_a"), ("", "_differs"), ("cis_overlap_", ""))
        ),
        "oversubscribed",
    ]
    table = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    return Comparison(letters, recs, classed, rows, table)


def _row(
    ra: dict[str, Any],
    picked: dict[int, dict[str, Any] | None],
    others: list[int],
    letters: tuple[str, ...],
    classed: tuple[bool, ...],
) -> dict[str, Any]:
    """One row of the table: a point's parameters, each side's measurement, each other side against A."""
    row: dict[str, Any] = {f: ra[f] for f in PARAMS}
    row["rate"] = base.key(row["rate"])
    for i, rx in picked.items():
        if classed[i]:
            row[f"{letters[i]}_hardware_class"] = rx["hardware_class"] if rx else None
    for i, rx in picked.items():
        x = letters[i]
        row[f"{x}_mean"] = marks.sig(float(rx["mean"])) if rx else None
        row[f"{x}_ci95"] = marks.sig(base.f(rx["half"])) if rx else None
        row[f"{x}_runs"] = int(rx["n"]) if rx else 0
        row[f"_{x}"] = rx
    over = sorted({t for rx in picked.values() if rx and (t := oversubscribed_text(rx))})
    row["oversubscribed"] = "; ".join(over)
    for i in others:
        x, rx = letters[i], picked[i]
        if rx is None:
            row.update({f"ratio_{x}_over_a": None, f"p_{x}_vs_a": None, f"{x}_differs": ""})
            row[f"cis_overlap_{x}"] = ""
            continue
        diff = difference_of(ra, rx)
        row[f"ratio_{x}_over_a"] = marks.sig(float(rx["mean"]) / float(ra["mean"]))
        row[f"p_{x}_vs_a"] = None if diff.p is None else marks.sig(diff.p, 2)
        row[f"{x}_differs"] = diff.verdict()
        known = ra["half"] == ra["half"] and rx["half"] == rx["half"]
        overlap = ra["lo"] <= rx["hi"] and rx["lo"] <= ra["hi"]
        row[f"cis_overlap_{x}"] = ("yes" if overlap else "no") if known else "n/a (<2 runs)"
    return row


def compare_table(sides: Sequence[pd.DataFrame]) -> pd.DataFrame:
    return analyse(sides).table


def compare_figure(
    sides: Sequence[pd.DataFrame] | Comparison,
    labels: Sequence[str],
    *,
    x: str = "threads",
) -> FigureDict:
    """One column per side on a shared throughput axis (colour = pattern, dash and marker = notifier, as
    on every page), each point with its 95 % CI (:mod:`demuxlab.marks`' rule, as on the Sweep), series that
    meet set side by side, oversubscribed points ringed; under each side after A, its ratio to A (marker
    filled where the one decision says the two differ)."""
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
    axis = base.x_axis(x, [r[x] for r in cmp.rows])
    means: list[float] = []
    highs: list[float] = []
    shown = 0
    for col, (letter, lab, recs) in enumerate(zip(cmp.letters, labels, cmp.sides, strict=True), start=1):
        shown += _side_means(fig, cmp, recs, col, lab, x, keys, label_keys, means, highs)
        if letter == "a":
            fig.update_xaxes(row=2, col=col, visible=False)
            fig.update_yaxes(row=2, col=col, visible=False)
            fig.update_xaxes(row=1, col=col, showticklabels=True, **axis)
            continue
        _side_ratios(fig, cmp, letter, lab, col, x)
        fig.update_xaxes(row=2, col=col, **axis)
    top = marks.axis_top(means, highs)
    note = marks.cut_note(top.cut)
    fig.update_layout(
        **style.base_layout(
            title={"text": " vs ".join(labels[1:]) + f" against {labels[0]}", "x": 0.01},
            height=base.legend_height(shown, 580),
        )
    )
    if note:
        base.notes_below(fig, [note], 40)
    fig.update_yaxes(title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero", range=[0, top.top])
    fig.update_yaxes(row=2, autorange=True)  # see base.x_axis: a matched group left without a range
    # The ratios' scale on the first side that has them: shared axes number only the first column's, and
    # A's (no ratio to itself) is hidden, which left the ratios without a number.
    fig.update_yaxes(title_text="ratio to A", showticklabels=True, row=2, col=2 if n > 1 else 1)
    return fig.to_dict()


def _side_means(
    fig: Fig,
    cmp: Comparison,
    recs: Records,
    col: int,
    lab: str,
    x: str,
    keys: list[str],
    label_keys: list[str],
    means: list[float],
    highs: list[float],
) -> int:
    """A side's series (the points it shares with A); returns how many."""
    shared = {_point(r) for r in cmp.rows}
    groups = base.series_of((r for r in recs if _point(r) in shared), keys, x)
    offsets = base.dodge_panel(groups, x)
    for grp, dx in zip(groups, offsets, strict=True):
        first = grp[0]
        c = style.colour_for(first["pattern"])
        name = f"{base.label(first, label_keys)} · {lab}"
        ivs = [marks.interval(float(g["mean"]), base.f(g["half"]), int(g["n"])) for g in grp]
        means.extend(iv.mean for iv in ivs)
        highs.extend(iv.hi for iv in ivs)
        symbol = style.symbol_for(first["notifier"])
        fig.add_trace(
            scatter(
                x=[float(g[x]) + dx for g in grp],
                y=[iv.mean for iv in ivs],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line={"color": c, "dash": style.dash_for(first["notifier"])},
                marker={
                    "color": c,
                    "symbol": [symbol if iv.drawn else f"{symbol}-open" for iv in ivs],
                    "size": [12 if g.get("over") else 7 for g in grp],
                    "line": {
                        "color": [style.OVERSUBSCRIBED if g.get("over") else c for g in grp],
                        "width": 2,
                    },
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [iv.plus for iv in ivs],
                    "arrayminus": [iv.minus for iv in ivs],
                },
                customdata=[
                    [base.fmt(g[x]), iv.note(), oversubscribed_text(g)]
                    for g, iv in zip(grp, ivs, strict=True)
                ],
                hovertemplate=f"{name}<br>{x} %{{customdata[0]}}<br>%{{y:,.0f}} msg/s<br>%{{customdata[1]}}"
                "<br>%{customdata[2]}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    return len(groups)


def _side_ratios(fig: Fig, cmp: Comparison, letter: str, lab: str, col: int, x: str) -> None:
    """A side's ratio to A per point, the marker filled where the two differ (Welch, p < 0.05)."""
    ratio = f"ratio_{letter}_over_a"
    rkeys = [k for k in PARAMS if k != x] + [
        k for k in ("a_hardware_class", f"{letter}_hardware_class") if cmp.rows and k in cmp.rows[0]
    ]
    mine = [r for r in cmp.rows if r.get(ratio) is not None]
    rlabel = base.varying(pd.DataFrame(mine, columns=rkeys), rkeys) or ["pattern", "notifier"]
    groups = base.series_of(mine, rkeys, x)
    offsets = base.dodge_panel(groups, x, ratio)
    for grp, dx in zip(groups, offsets, strict=True):
        first = grp[0]
        c = style.colour_for(first["pattern"])
        verdict = [str(g[f"{letter}_differs"]) for g in grp]
        fig.add_trace(
            scatter(
                x=[float(g[x]) + dx for g in grp],
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
                customdata=[_ratio_words(g, letter) for g in grp],
                hovertemplate=f"{lab} / A %{{y:.3f}}<br>%{{customdata}}<extra></extra>",
            ),
            row=2,
            col=col,
        )
    fig.add_hline(y=1.0, line={"color": style.MUTED, "dash": "dot"}, row=2, col=col)


def _ratio_words(g: dict[str, Any], letter: str) -> str:
    verdict = str(g[f"{letter}_differs"])
    p = g[f"p_{letter}_vs_a"]
    runs = f"n = {g['a_runs']} vs {g[f'{letter}_runs']}"
    if p is None:
        return f"untested: fewer than 2 runs on a side ({runs})"
    what = "differs" if verdict == "yes" else "tied"
    return f"{what} (Welch, p = {p}, {runs})"


def side_label(letter: str, experiment: str, pair: str | None, build: str | None) -> str:
    return (
        f"{letter.upper()}: {experiment}"
        + (f" on {pair}" if pair else "")
        + (f" build {base.short_build(build)}" if build else "")
    )
