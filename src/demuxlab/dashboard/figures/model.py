"""The Model page's builders: calibrated rates next to the paper's, named by the operation each stands for;
the what-if figure (the exact solution where the chain is small, else the fluid approximation with the
SSA's points and their interval beside it; the measured points per notifier with theirs) and its table,
which flags where the fluid leaves the SSA's interval. Whatever patterns and rates :mod:`demuxlab.ctmc`
models come in through the frames: nothing here names one."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.plot import Fig, FigureDict, bar, scatter
from demuxlab.vocab import METHOD_EXACT, METHOD_FLUID, SOURCE_CALIBRATION

# What each rate stands for (docs/ctmc-reference.md): seed 001 §V-A's, then what a calibration adds; a rate a
# model adds without an entry here is shown by its own name.
RATE_NAMES: dict[str, str] = {
    "r_l": "lock acquire/release",
    "r_p": "queue put",
    "r_g": "queue get",
    "r_t": "descriptor fetch (cached)",
    "r_i": "receive (recv)",
    "r_o": "send",
    "r_a": "re-arm",
    "r_e": "event notification, per descriptor",
    "r_c": "work (the request's service)",
    # what a calibration adds to seed 001's (docs/ctmc-reference.md)
    "r_n": "notifier, per call",
    "r_x": "untimed CPU, per message",
    "r_z": "client turnaround",
    "r_w": "wake-up, per other thread",
    "r_v": "client waking the dispatcher (ω)",
    "r_k": "re-arm's kick of the dispatcher",
    "r_u": "woken client's latency",
    "r_h": "lock's hand-off to a sleeping waiter",
}
_PAPER_GREYS: tuple[str, ...] = ("#BBBBBB", "#888888", "#DDDDDD", "#666666")


def rate_name(rate: str) -> str:
    """``lock acquire/release (r_l)``: the operation first, the symbol after."""
    name = RATE_NAMES.get(rate)
    return f"{name} ({rate})" if name else rate


# Characters per line of a rate's name under its bars, at TICK_FONT px: with every rate shown (fifteen groups
# beside the legend, ~70 px each on a 1,400 px page) two neighbours' widest lines stay apart
# (tests/dashboard/test_browser.py measures the drawn labels).
TICK_WIDTH = 10
TICK_FONT = 10


def _tick(rate: str) -> str:
    """A rate's name on a category axis: the operation, wrapped to lines of at most TICK_WIDTH characters
    (at spaces, and after a '/'), over its symbol."""
    name = RATE_NAMES.get(rate)
    if not name:
        return rate
    wrap = textwrap.wrap(name.replace("/", "/ "), TICK_WIDTH, break_long_words=False, break_on_hyphens=False)
    return "<br>".join([*(line.replace("/ ", "/") for line in wrap), f"({rate})"])


def rates_table(
    calibrations: pd.DataFrame, paper: Mapping[str, Mapping[str, float]], rate_fields: Sequence[str]
) -> pd.DataFrame:
    """Per calibration: each rate it stores (``r_*``: the models' rates in ``rate_fields``' order, then any
    other it holds) as mean time per operation (µs = 1/rate), next to the paper's for the calibration's
    pattern, with the ratio and where the value came from; ``paper`` is {pattern: {rate: per µs}}. A rate
    the calibration left instant (its source ``instant:…``: not measured, or a step the pattern does not
    take) has no time: its 1 ns placeholder is not a measurement, and its row says why."""
    cols = ["calibration", "pattern", "notifier", "operation", "rate", "calibrated_us", "paper_us", "ratio"]
    rows = []
    for c in base.records(calibrations):
        rates = c["rates"] or {}
        source = rates.get("source") or {}
        stored = [k for k in rates if k.startswith("r_") and isinstance(rates[k], int | float)]
        for k in [*(f for f in rate_fields if f in stored), *sorted(set(stored) - set(rate_fields))]:
            instant = str(source.get(k, "")).startswith("instant:")
            cal_us = 1.0 / float(rates[k]) if float(rates[k]) > 0 and not instant else math.nan
            ref = paper.get(str(c["pattern"]), {}).get(k)
            paper_us = 1.0 / ref if ref else math.nan
            rows.append(
                {
                    "calibration": int(c["id"]),
                    "pattern": c["pattern"],
                    "notifier": c["notifier"],
                    "operation": RATE_NAMES.get(k, k),
                    "rate": k,
                    "calibrated_us": round(cal_us, 4),
                    "paper_us": round(paper_us, 4),
                    "ratio": round(cal_us / paper_us, 3) if paper_us == paper_us and paper_us > 0 else None,
                    "from": source.get(k, ""),
                }
            )
    return pd.DataFrame(rows, columns=[*cols, "from"])


def rates_figure(table: pd.DataFrame) -> FigureDict:
    """Calibrated time per operation vs the paper's (log scale), one group per rate: a grey bar per
    pattern's paper values, then each calibration in its pattern's colour, hatched by notifier."""
    # A rate no calibration measured (every one left it instant) and the paper has no time for: no bars.
    table = table[table["calibrated_us"].notna() | table["paper_us"].notna()]
    if table.empty:
        return base.empty_figure("no calibrations yet (experiments with calibration runs make them)", 300)
    fig = Fig()
    ops = [_tick(r) for r in dict.fromkeys(table["rate"])]
    # One grey bar per set of paper values, named by the patterns that share it: seed 001 gives every
    # pattern the same rates but r_e, so a bar per pattern would repeat the same bar in repeating greys.
    paper_sets: dict[tuple[tuple[str, float], ...], list[str]] = {}
    for pattern, grp in table.groupby("pattern", sort=True):
        first = grp[grp["paper_us"].notna()].drop_duplicates("rate")
        key = tuple((str(r), float(v)) for r, v in zip(first["rate"], first["paper_us"], strict=True))
        paper_sets.setdefault(key, []).append(str(pattern))
    for i, (key, patterns) in enumerate(paper_sets.items()):
        fig.add_trace(
            bar(
                x=[_tick(r) for r, _ in key],
                y=[v for _, v in key],
                name=f"paper: {', '.join(patterns)}",
                marker={"color": _PAPER_GREYS[i % len(_PAPER_GREYS)]},
            )
        )
    for cid, grp in table.groupby("calibration", sort=True):
        head = grp.iloc[0]
        fig.add_trace(
            bar(
                x=[_tick(r) for r in grp["rate"]],
                y=grp["calibrated_us"].tolist(),
                name=f"#{cid} {head['pattern']}/{head['notifier']}",
                marker={
                    "color": style.colour_for(head["pattern"]),
                    "pattern": {"shape": style.hatch_for(head["notifier"])},
                },
            )
        )
    margin = {"l": 60, "r": 20, "t": 50, "b": 110}  # the bottom: a name's four lines and its symbol
    times = [float(v) for v in (*table["calibrated_us"], *table["paper_us"]) if v == v and float(v) > 0]
    fig.update_layout(
        **style.base_layout(
            title={"text": "Rates: time per operation, calibrated vs paper", "x": 0.01},
            barmode="group",
            height=base.legend_height(len(fig.data), 380, margin["t"] + margin["b"]),
            yaxis={
                **style.log_axis(min(times) / 2, max(times) * 2),
                "title": {"text": "µs per operation (1/rate, log scale)"},
            },
            xaxis={
                "categoryorder": "array",
                "categoryarray": ops,
                "tickangle": 0,
                "tickfont": {"size": TICK_FONT},
            },
            margin=margin,
        )
    )
    return fig.to_dict()


#: A fluid point is flagged where it leaves the SSA's 95 % interval *and* is this far off: significance
#: alone flags a 2–3 % difference at every point of a curve whose SSA ran to 2 % (History's rule too).
FLUID_TOLERANCE = 0.05


def whatif_table(curve: pd.DataFrame, ssa: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per thread count: the model's throughput at once and its ``method`` (the exact solution where the
    chain is small, else the fluid approximation), and with an SSA its throughput, interval and the
    model's difference from it; ``model_outside_ssa_ci`` is true where a fluid value leaves the SSA's 95 %
    interval, by more than :data:`FLUID_TOLERANCE` (the approximation is not to be trusted there). An exact
    value is the chain's own answer, which the SSA estimates: its interval misses it one time in twenty by
    chance, and that flags nothing."""
    table = curve.rename(columns={"throughput_msgs_per_s": "model_msgs_per_s"}).drop(
        columns=["ci_halfwidth_rel", "settled"], errors="ignore"
    )
    if ssa is None or ssa.empty:
        return table
    table = table.merge(
        ssa.rename(
            columns={"throughput_msgs_per_s": "ssa_msgs_per_s", "ci_halfwidth_rel": "ssa_ci_rel"}
        ).drop(columns=["settled", "method"], errors="ignore"),
        on="threads",
        how="left",
    )
    diff = (table["model_msgs_per_s"] - table["ssa_msgs_per_s"]) / table["ssa_msgs_per_s"]
    table["model_vs_ssa_pct"] = (diff * 100).round(2)
    fluid = table["method"] == METHOD_FLUID
    # where the fluid did not settle (NaN) there is nothing to hold against the SSA
    table["model_outside_ssa_ci"] = [
        bool(f and d == d and abs(d) > max(c, FLUID_TOLERANCE))
        for f, d, c in zip(fluid, diff, table["ssa_ci_rel"].fillna(0), strict=True)
    ]
    return table


def disagreement(table: pd.DataFrame) -> str | None:
    """One line when the fluid approximation leaves the SSA's interval somewhere, else None."""
    if "model_outside_ssa_ci" not in table:
        return None
    bad = table[table["model_outside_ssa_ci"] == True]  # noqa: E712 - a pandas mask
    if bad.empty:
        return None
    worst = bad.iloc[int(bad["model_vs_ssa_pct"].abs().to_numpy().argmax())]
    return (
        f"Fluid and SSA disagree by more than {FLUID_TOLERANCE * 100:.0f} % and beyond the SSA's 95 % "
        f"interval at {len(bad)} of {len(table)} thread counts (up to {worst['model_vs_ssa_pct']:+.1f} % at "
        f"{int(worst['threads'])} threads): the fluid approximation is off here; trust the SSA."
    )


def whatif_figure(
    curve: pd.DataFrame,
    ssa: pd.DataFrame | None = None,
    measured: pd.DataFrame | None = None,
    *,
    pattern: str | None = None,
    title: str = "What if",
    stored: pd.DataFrame | None = None,
    notes: Sequence[str] = (),
) -> FigureDict:
    """Predicted throughput vs threads over the pattern's thread range: the model's curve (solid with
    markers where it is the exact solution, dashed where it is the fluid approximation; one trace each),
    SSA points with their 95 % CI (the page's beside the fluid's; ringed where the fluid leaves it), the
    measured points of the chosen notifier in range with their 95 % CI (:mod:`demuxlab.marks`' rule), in
    the pattern's colour and the notifier's marker, and the workflow's stored predictions of those points
    (``stored``: ``threads``, ``source``, ``predicted``) as hollow diamonds; ``notes`` under the figure."""
    if curve.empty:
        return base.empty_figure("no prediction for these inputs")
    c = style.colour_for(pattern) if pattern else style.OKABE_ITO[0]
    fig = Fig()
    means: list[float] = [v for v in curve["throughput_msgs_per_s"].tolist() if v == v]
    highs: list[float] = []
    _add_curve(fig, curve, c)
    if ssa is not None and not ssa.empty:
        _add_ssa(fig, curve, ssa, c, means)
    xs = curve["threads"].tolist()
    if measured is not None and not measured.empty:
        _add_measured(fig, measured, c, means, highs)
        xs += measured["threads"].tolist()
    if stored is not None and not stored.empty:
        _add_stored(fig, stored, c, means)
    top = marks.axis_top(means, highs)
    margin = {"l": 60, "r": 20, "t": 50, "b": 50 + 18 * len(notes)}
    fig.update_layout(
        **style.base_layout(
            title={"text": title, "x": 0.01},
            height=base.legend_height(len(fig.data), 420 + 18 * len(notes), margin["t"] + margin["b"]),
            yaxis_title="throughput (msg/s)",
            margin=margin,
        )
    )
    base.notes_below(fig, notes, 46)
    fig.update_xaxes(**base.x_axis("threads", xs))
    fig.update_yaxes(rangemode="tozero", range=[0, top.top])
    return fig.to_dict()


def _add_curve(fig: Fig, curve: pd.DataFrame, c: str) -> None:
    method = curve["method"].tolist()
    for name, dash, size in ((METHOD_EXACT, "solid", 7), (METHOD_FLUID, "dash", 4)):
        mine = [m == name for m in method]
        if not any(mine):
            continue
        fig.add_trace(
            scatter(
                x=curve["threads"].tolist(),
                # the other method's points and a point left out (NaN): gaps
                y=[
                    base.f(v) if m else None
                    for v, m in zip(curve["throughput_msgs_per_s"], mine, strict=True)
                ],
                mode="lines+markers",
                name=name,
                line={"color": c, "width": 2, "dash": dash},
                marker={"color": c, "size": size},
                showlegend=True,  # named even when alone: which method drew the curve
            )
        )


def _add_ssa(fig: Fig, curve: pd.DataFrame, ssa: pd.DataFrame, c: str, means: list[float]) -> None:
    flags = whatif_table(curve, ssa).set_index("threads")["model_outside_ssa_ci"]
    off = [bool(flags.get(t, False)) for t in ssa["threads"]]  # the SSA's own points: the fluid's
    err = (ssa["throughput_msgs_per_s"] * ssa["ci_halfwidth_rel"].fillna(0)).tolist()
    means.extend(v + e for v, e in zip(ssa["throughput_msgs_per_s"], err, strict=True))
    fig.add_trace(
        scatter(
            x=ssa["threads"].tolist(),
            y=ssa["throughput_msgs_per_s"].tolist(),
            mode="markers",
            name="SSA (95 % CI)",
            marker={
                "color": style.beside(c),
                "size": 9,
                "symbol": "hexagon-open",
                "line": {"width": [3 if o else 1 for o in off], "color": style.beside(c)},
            },
            error_y={"type": "data", "array": err, "color": style.beside(c)},
        )
    )


def _add_measured(fig: Fig, measured: pd.DataFrame, c: str, means: list[float], highs: list[float]) -> None:
    keys = [k for k in ("notifier", "hardware_class") if k in measured]
    label_keys = ["notifier", *base.varying(measured, ["hardware_class"])]
    for grp in base.series(measured, keys, "threads"):
        first = grp[0]
        name = "measured · " + base.label(first, label_keys)
        ivs = [marks.interval(float(g["mean"]), base.f(g["half"]), int(g["n"])) for g in grp]
        means.extend(iv.mean for iv in ivs)
        highs.extend(iv.hi for iv in ivs)
        symbol = style.symbol_for(first["notifier"])
        fig.add_trace(
            scatter(
                x=[float(g["threads"]) for g in grp],
                y=[iv.mean for iv in ivs],
                mode="markers",
                name=name,
                marker={
                    "color": c,
                    "size": [13 if g.get("over") else 9 for g in grp],
                    "symbol": [symbol if iv.drawn else f"{symbol}-open" for iv in ivs],
                    "line": {
                        "width": 2,
                        "color": [style.OVERSUBSCRIBED if g.get("over") else c for g in grp],
                    },
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [iv.plus for iv in ivs],
                    "arrayminus": [iv.minus for iv in ivs],
                    "color": c,
                },
                customdata=[[int(g["n"]), iv.note()] for g, iv in zip(grp, ivs, strict=True)],
                hovertemplate=f"{name}<br>%{{y:,.0f}} msg/s (%{{customdata[0]}} runs)<br>%{{customdata[1]}}"
                "<extra></extra>",
            )
        )


def _add_stored(fig: Fig, stored: pd.DataFrame, c: str, means: list[float]) -> None:
    """The workflow's own predictions of the measured points (each source), to hold the what-if against."""
    for source, grp in stored.groupby("source", sort=True):
        grp = grp.sort_values("threads")
        means.extend(grp["predicted"].tolist())
        fig.add_trace(
            scatter(
                x=grp["threads"].tolist(),
                y=grp["predicted"].tolist(),
                mode="markers",
                name=f"stored prediction, {'calibrated' if source == SOURCE_CALIBRATION else 'paper'} rates",
                marker={"symbol": "diamond-open", "size": 11, "color": style.beside(c), "line": {"width": 2}},
                hovertemplate="stored %{y:,.0f} msg/s at %{x} threads<extra>" + str(source) + "</extra>",
            )
        )


def workload_defaults(
    points: pd.DataFrame, patterns: Sequence[str], ranges: Mapping[str, tuple[int, int]] | None = None
) -> dict[str, Any]:
    """What-if inputs from an experiment's measured points: the first modelled pattern it measured whose
    thread count can change (``ranges``: each pattern's (min, max) threads; a fixed-thread pattern such as
    the reactor only where it measured nothing else), its most common notifier, work and connections, and
    the pattern's thread range (from its least to at least 16 threads or its most measured, at most
    :data:`MAX_CURVE` counts), so the curve spans the range (``{}`` when it measured none of
    ``patterns``)."""
    if points.empty:
        return {}
    sel = points[points["pattern"].isin(list(patterns))]
    if sel.empty:
        return {}
    ranges = ranges or {}
    measured = sorted(sel["pattern"].unique().tolist(), key=list(patterns).index)
    ranged = [p for p in measured if p in ranges and ranges[p][0] < ranges[p][1]]
    pattern = (ranged or measured)[0]
    mine = sel[sel["pattern"] == pattern]
    lo, hi = ranges.get(pattern, (int(mine["threads"].min()), int(mine["threads"].max())))
    top = min(hi, max(16, int(mine["threads"].max())), lo + MAX_CURVE - 1)
    out = {
        "pattern": pattern,
        "notifier": str(mine["notifier"].mode().iloc[0]),
        "work": base.fmt(float(mine["work_us"].mode().iloc[0])),
        "connections": str(int(mine["connections"].mode().iloc[0])),
        "threads": f"{lo}-{top}" if top > lo else str(lo),
    }
    if "client_threads" in mine and mine["client_threads"].notna().any():
        out["clients"] = str(int(mine["client_threads"].mode().iloc[0]))
    return out


#: The most thread counts a default curve has.
MAX_CURVE = 16


def selfcheck_figure(states: pd.DataFrame) -> FigureDict:
    """Each refused calibration's self-check (the fitted model against its own calibration runs, per
    workload): measured and predicted throughput side by side, the error above; why those rates were not
    used."""
    refused = [r for r in base.records(states) if r.get("refused")] if not states.empty else []
    rows = [
        (
            f"{r['pattern']}/{r['notifier']}"
            + (f" [{r['hardware_class']}]" if base.cls(r.get("hardware_class")) else "")
            + f"<br>{c.get('threads')} thr, {c.get('connections')} conn",
            c,
        )
        for r in refused
        for c in (r["self_check"] if isinstance(r.get("self_check"), list) else [])
        if isinstance(c, dict) and c.get("measured_msgs_per_s")
    ]
    if not rows:
        return base.empty_figure("no refused calibration with a self-check", 220)
    names = [n for n, _ in rows]
    fig = Fig()
    for key, label, colour in (
        ("measured_msgs_per_s", "measured (calibration runs)", "#000000"),
        ("predicted_msgs_per_s", "model with the fitted rates", style.REGRESSION),
    ):
        fig.add_trace(
            bar(
                x=names,
                y=[float(c[key]) for _, c in rows],
                name=label,
                marker={"color": colour},
                text=[marks.quantity(float(c[key])) for _, c in rows],
                textposition="outside",
                cliponaxis=False,
            )
        )
    for n, c in rows:
        fig.add_annotation(
            x=n,
            y=max(float(c["measured_msgs_per_s"]), float(c["predicted_msgs_per_s"])),
            yshift=26,
            text=f"{float(c.get('rel_error') or 0):+.0%}",
            showarrow=False,
            font={"size": 12, "color": style.REGRESSION},
        )
    top = max(max(float(c["measured_msgs_per_s"]), float(c["predicted_msgs_per_s"])) for _, c in rows)
    fig.update_layout(
        **style.base_layout(
            title={"text": "Refused calibrations: the fitted model against its own runs", "x": 0.01},
            barmode="group",
            height=360,
            margin={"l": 60, "r": 20, "t": 50, "b": 70},  # a design and its workload, on two lines
            xaxis={"tickangle": 0, "tickfont": {"size": 11}},
            yaxis={"title": {"text": "throughput (msg/s)"}, "range": [0, top * 1.3]},
        )
    )
    return fig.to_dict()
