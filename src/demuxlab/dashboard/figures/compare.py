"""The Compare page's builders: two or more sides (experiments, host pairs, server builds) on the same
points. Side A is the baseline: every other side gets its ratio to A and Welch's test of the difference.

A side whose runs have hardware classes keeps a row and a line per class (``<side>_hardware_class``):
classes are compared, never averaged."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from demuxlab.dashboard import style
from demuxlab.dashboard.fields import PARAMS
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures.summary import differs, summarise, values_of, welch_p
from demuxlab.dashboard.plot import Fig, FigureDict, scatter

#: The sides' letters, in order (the address keys ``a``, ``b``, …).
SIDES: tuple[str, ...] = ("a", "b", "c", "d")


def _classes(frame: pd.DataFrame) -> bool:
    return "hardware_class" in frame and any(base.cls(c) for c in frame["hardware_class"])


def compare_table(sides: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Points measured on side A and on at least one other side (same parameters): each side's mean,
    95 % CI half-width and runs; for each side after A its ratio to A, Welch's p-value against A and
    whether it differs (p < 0.05), and whether the two CIs overlap."""
    letters = SIDES[: len(sides)]
    base_cols = [*PARAMS]
    if len(sides) < 2 or any(s.empty for s in sides[:1]):
        return pd.DataFrame(columns=base_cols)
    merged: pd.DataFrame | None = None
    classes: list[str] = []
    for letter, frame in zip(letters, sides, strict=True):
        if frame.empty:
            continue
        s = summarise(frame)
        s = s[s["n"] > 0]
        keep = [*PARAMS, "mean", "half", "lo", "hi", "n", "values"]
        if _classes(s):
            s = s.assign(hardware_class=[base.cls(c) or "" for c in s["hardware_class"]])
            keep.append("hardware_class")
            classes.append(f"{letter}_hardware_class")
        part = s[keep].rename(columns={c: f"{letter}_{c}" for c in keep if c not in PARAMS})
        part = part.assign(rate=[base.key(v) for v in part["rate"]]) if "rate" in part else part
        merged = part if merged is None else merged.merge(part, on=list(PARAMS), how="left")
    if merged is None or "a_mean" not in merged:
        return pd.DataFrame(columns=base_cols)
    others = [x for x in letters[1:] if f"{x}_mean" in merged]
    if not others:
        return pd.DataFrame(columns=base_cols)
    merged = merged[merged[[f"{x}_mean" for x in others]].notna().any(axis=1)].reset_index(drop=True)
    out = merged[[*PARAMS, *classes]].copy()
    for letter in letters:
        if f"{letter}_mean" not in merged:
            continue
        out[f"{letter}_mean"] = merged[f"{letter}_mean"].round(1)
        out[f"{letter}_ci95"] = merged[f"{letter}_half"].round(1)
        out[f"{letter}_runs"] = merged[f"{letter}_n"].fillna(0).astype(int)
    for x in others:
        out[f"ratio_{x}_over_a"] = (merged[f"{x}_mean"] / merged["a_mean"]).round(4)
        ps = [
            welch_p(values_of(va), values_of(vx)) if vx is not None and vx == vx else None
            for va, vx in zip(merged["a_values"], merged[f"{x}_values"], strict=True)
        ]
        out[f"p_{x}_vs_a"] = [None if p is None else round(p, 4) for p in ps]
        out[f"{x}_differs"] = [
            differs(p) if m == m else "" for p, m in zip(ps, merged[f"{x}_mean"], strict=True)
        ]
        overlap = (merged["a_lo"] <= merged[f"{x}_hi"]) & (merged[f"{x}_lo"] <= merged["a_hi"])
        unknown = merged["a_half"].isna() | merged[f"{x}_half"].isna()
        out[f"cis_overlap_{x}"] = np.where(unknown, "n/a (<2 runs)", np.where(overlap, "yes", "no"))
    return out


def compare_figure(sides: Sequence[pd.DataFrame], labels: Sequence[str], *, x: str = "threads") -> FigureDict:
    """One column per side on a shared throughput axis (colour = pattern, dash and marker = notifier, as
    on every page), each point with its 95 % CI; under each side after A, its ratio to A (marker filled
    where Welch's test says the two differ)."""
    letters = SIDES[: len(sides)]
    table = compare_table(sides)
    if table.empty:
        return base.empty_figure("the sides share no point with ok runs")
    fig = Fig(
        rows=2,
        cols=len(sides),
        shared_xaxes=True,
        shared_yaxes=True,
        row_heights=[0.68, 0.32],
        vertical_spacing=0.08,
        horizontal_spacing=0.05,
        subplot_titles=list(labels),
    )
    summaries = [summarise(s) if not s.empty else s for s in sides]
    union = pd.concat([s for s in summaries if not s.empty], ignore_index=True)
    keys = base.series_keys(union, exclude=(x,))
    label_keys = base.varying(union, keys) or ["pattern", "notifier"]
    shared = {tuple(base.key(r[k]) for k in PARAMS) for r in table.to_dict("records")}
    top = 0.0
    shown = 0
    for col, (letter, lab, frame) in enumerate(zip(letters, labels, summaries, strict=True), start=1):
        if frame.empty:
            continue
        frame = frame[[tuple(base.key(r[k]) for k in PARAMS) in shared for r in frame.to_dict("records")]]
        frame = frame[frame["n"] > 0]
        for grp in base.series(frame, keys, x):
            first = grp[0]
            c = style.colour_for(first["pattern"])
            name = f"{base.label(first, label_keys)} · {lab}"
            bars = [
                (float(g["half"]), min(float(g["half"]), float(g["mean"])))
                if g["band"] and g["half"] == g["half"]
                else (0.0, 0.0)  # as on the Sweep: an interval is drawn from 3 runs on (figures.summary)
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
            fig.update_xaxes(row=1, col=col, showticklabels=True, **base.x_axis(x, table[x]))
            continue
        ratio = f"ratio_{letter}_over_a"
        if ratio not in table:
            continue
        rkeys = [k for k in PARAMS if k != x] + [
            k for k in ("a_hardware_class", f"{letter}_hardware_class") if k in table
        ]
        rlabel = base.varying(table, rkeys) or ["pattern", "notifier"]
        for grp in base.series(table[table[ratio].notna()], rkeys, x):
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
        fig.update_xaxes(row=2, col=col, **base.x_axis(x, table[x]))
    fig.update_layout(
        **style.base_layout(
            title={"text": " vs ".join(labels[1:]) + f" against {labels[0]}", "x": 0.01},
            height=base.legend_height(shown, 580),
        )
    )
    fig.update_yaxes(
        title_text="throughput (msg/s)", row=1, col=1, rangemode="tozero", range=[0, max(top, 1.0) * 1.06]
    )
    fig.update_yaxes(row=2, autorange=True)  # see figures.sweep: a matched group left without a range
    fig.update_yaxes(title_text="ratio to A", row=2, col=2 if len(sides) > 1 else 1)
    return fig.to_dict()


def side_label(letter: str, experiment: str, pair: str | None, build: str | None) -> str:
    return (
        f"{letter.upper()}: {experiment}"
        + (f" on {pair}" if pair else "")
        + (f" build {base.short_build(build)}" if build else "")
    )
