"""The "why" builders (issue 44): what a message cost a run's server and client in the kernel's terms
(``run_costs``: CPU time by kind, system calls, context switches, migrations, TCP), its validity checks with
their verdicts (``run_checks``), and one cost per message against a parameter for the Sweep's cost axis.

Pure: frames in (:mod:`demuxlab.dashboard.data.costs`), plain Plotly dicts and frames out. A cost the host
could not give is said to be unavailable, with its reason, never drawn as a zero.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

import pandas as pd

from demuxlab.costs import METRICS, SIDES, THREAD_COLUMNS, Cost, thread_rows, why_rows
from demuxlab.dashboard import fields, style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.plot import Fig, FigureDict, bar, scatter
from demuxlab.vocab import CHECK_FAIL, CHECK_PASS, CHECK_UNKNOWN, CHECK_WARN, CHECKS

#: The breakdown's two panels: CPU time per message (µs) and the kernel's events per message.
CPU_METRICS: tuple[str, ...] = ("cpu_user_s", "cpu_sys_s", "cpus_softirq_s", "cpus_irq_s", "threads_wait_s")
EVENT_METRICS: tuple[str, ...] = ("syscalls", "ctx_voluntary", "ctx_involuntary", "migrations")
#: Counted per message but not drawn (thousands a message, beside the events' few): in the table, and their
#: absence named under the breakdown.
HARDWARE_METRICS: tuple[str, ...] = ("cycles", "instructions")
#: What the Sweep's cost axis offers (a metric name → its label and unit).
AXIS_METRICS: dict[str, str] = {m.name: f"{m.label} ({m.unit})" for m in METRICS}
SIDE_COLOUR = {"server": style.OKABE_ITO[4], "client": style.OKABE_ITO[1]}
VERDICT_MARK = {CHECK_PASS: "pass", CHECK_WARN: "warn", CHECK_FAIL: "FAIL", CHECK_UNKNOWN: "unknown"}
_BY_NAME = {m.name: m for m in METRICS}
#: The breakdown's bar labels wrap at this many characters: a line of 13 px text (~7.5 px a character) fits
#: the left margin (250 px) and the gap between the two panels (0.22 of the plot's width, ~215 px at 1,400).
LABEL_WRAP = 26
#: The notes under the breakdown (what the host could not give) wrap at this many characters: 11 px text
#: (~6.5 px a character) across the plot's width at 1,400 px (~1,050 px).
NOTE_WRAP = 150


def _wrapped(label: str) -> str:
    """A bar's label in lines of at most :data:`LABEL_WRAP` characters (Plotly cuts a long tick label off at
    the figure's edge: "its CPUs: softirq (…)" read "s: softirq (…)")."""
    return "<br>".join(textwrap.wrap(label, LABEL_WRAP)) or label


def _cell(row: Any, key: str) -> Any:
    if row is None:
        return None
    v = row[key]
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _number(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """One row per metric the run has (the metrics' order, :func:`demuxlab.costs.why_rows`): per side its
    cost per message and its delta over the measure phase, or ``unavailable: <why>``."""
    stored = [
        Cost(r["side"], r["metric"], _cell(r, "value"), _cell(r, "per_message"), _cell(r, "unavailable"))
        for r in base.records(costs)
    ]
    out = []
    for row in why_rows(stored):
        shown: dict[str, Any] = {"cost": row["label"], "unit": row["unit"]}
        for side in SIDES:
            why, per, total = row[f"{side}_unavailable"], row[side], row[f"{side}_total"]
            if why is not None or total is None:
                shown[f"{side} per msg"] = shown[f"{side} over the phase"] = why or "not read"
            else:
                shown[f"{side} per msg"] = "" if per is None else _number(float(per))
                shown[f"{side} over the phase"] = _number(float(total))
        out.append(shown)
    return pd.DataFrame(out)


#: :func:`thread_table`'s headers for :data:`demuxlab.costs.THREAD_COLUMNS`.
THREAD_HEADERS: dict[str, str] = {
    "syscalls": "system calls /msg",
    "voluntary": "voluntary switches /msg",
    "involuntary": "involuntary switches /msg",
    "migrations": "migrations /msg",
    "on_cpu_us": "on a CPU µs/msg",
    "waiting_us": "waiting for a CPU µs/msg",
}


def thread_table(costs: Any, throughput: float | None) -> pd.DataFrame:
    """Per thread of each side (:func:`demuxlab.costs.thread_rows`): which one makes the calls, blocks,
    is preempted or waits for a CPU, per message of the run; "not read" where its record has no value."""
    rows = []
    for r in thread_rows(costs, throughput):
        shown: dict[str, Any] = {
            "side": r["side"],
            "thread": f"{r['comm']} {r['tid']}" + (" (new)" if r["new"] else ""),
            "CPUs": r["cpus"],
        }
        for column, _, _ in THREAD_COLUMNS:
            v = r[column]
            shown[THREAD_HEADERS[column]] = "not read" if v is None else _number(float(v))
        rows.append(shown)
    return pd.DataFrame(rows, columns=["side", "thread", "CPUs", *THREAD_HEADERS.values()])


def check_table(checks: pd.DataFrame) -> pd.DataFrame:
    """The run's checks in the vocabulary's order, a fail in capitals: ``check, verdict, reason``."""
    order = {c: i for i, c in enumerate(CHECKS)}
    recs = sorted(base.records(checks), key=lambda r: order.get(r["check"], len(order)))
    return pd.DataFrame(
        [
            {
                "check": r["check"],
                "verdict": VERDICT_MARK.get(r["verdict"], r["verdict"]),
                "reason": r["reason"],
            }
            for r in recs
        ],
        columns=["check", "verdict", "reason"],
    )


def verdict_line(checks: pd.DataFrame) -> str:
    """The run's validity in one line: flagged by which checks, else how many passed and how many could
    not be told."""
    if checks.empty:
        return "No validity checks stored for this run (ingested before they were made)."
    verdicts = dict(zip(checks["check"], checks["verdict"], strict=True))
    failed = [c for c in CHECKS if verdicts.get(c) == CHECK_FAIL]
    warned = [c for c in CHECKS if verdicts.get(c) == CHECK_WARN]
    unknown = sum(1 for v in verdicts.values() if v == CHECK_UNKNOWN)
    tail = (f"; warnings: {', '.join(warned)}" if warned else "") + (
        f"; {unknown} could not be told (reasons below)" if unknown else ""
    )
    if failed:
        return f"FLAGGED: {', '.join(failed)} failed (the run stays in its point's mean){tail}."
    return f"Not flagged: {sum(1 for v in verdicts.values() if v == CHECK_PASS)} checks passed{tail}."


def breakdown_figure(costs: pd.DataFrame) -> FigureDict:
    """What a message cost each side: CPU time per message by kind (µs) on the left, the kernel's events
    per message on the right, server and client side by side; a metric the host could not give is left
    out of the bars and named under them."""
    if costs.empty:
        return base.empty_figure("no costs recorded for this run (collection off, or an older record)")
    rows = {(r["side"], r["metric"]): r for r in base.records(costs)}
    fig = Fig(
        1,
        2,
        subplot_titles=["CPU time per message (µs)", "the kernel's events per message"],
        horizontal_spacing=0.22,
    )
    gaps: dict[str, list[str]] = {}  # why → the side's metrics it holds for
    for name in (*CPU_METRICS, *EVENT_METRICS, *HARDWARE_METRICS, "energy_uj"):
        for side in SIDES:
            why = _cell(rows.get((side, name)), "unavailable")
            if why is not None:
                gaps.setdefault(str(why), []).append(f"{side} {_BY_NAME[name].label}")
    # One line per reason, wrapped (an annotation does not wrap itself: a long one ran off the figure).
    missing = [
        line
        for why, what in list(gaps.items())[:8]
        for line in textwrap.wrap(f"{', '.join(what)}: {why}", NOTE_WRAP)
    ]
    for col, metrics in ((1, CPU_METRICS), (2, EVENT_METRICS)):
        for side in SIDES:
            ys, xs, text = [], [], []
            for name in metrics:
                per = _cell(rows.get((side, name)), "per_message")
                if per is None:
                    continue
                ys.append(_wrapped(_BY_NAME[name].label))
                xs.append(float(per))
                text.append(_number(float(per)))
            if xs:
                fig.add_trace(
                    bar(
                        name=side,
                        x=xs,
                        y=ys,
                        orientation="h",
                        text=text,
                        textposition="auto",
                        marker={"color": SIDE_COLOUR[side]},
                        legendgroup=side,
                        showlegend=col == 1,
                        hovertemplate=f"{side}: %{{y}} %{{x:.4g}}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
    fig.update_layout(
        **style.base_layout(
            height=360 + 18 * len(missing),
            barmode="group",
            title={"text": "What a message cost, in the kernel's terms (measure phase)"},
            margin={"l": 250, "r": 20, "t": 70, "b": 60 + 18 * len(missing)},
        )
    )
    fig.update_yaxes(autorange="reversed")
    if missing:
        fig.add_annotation(
            text="<br>".join(missing),
            xref="paper",
            yref="paper",
            x=0,
            y=-0.12,
            yanchor="top",
            showarrow=False,
            align="left",
            font={"size": 11, "color": style.MUTED},
        )
    return fig.to_dict()


def sweep_cost_figure(points: pd.DataFrame, *, x: str, metric: str, side: str, title: str = "") -> FigureDict:
    """One cost per message (``metric`` of ``side``) against ``x``: each series (pattern · notifier and the
    other parameters that vary) the mean over its runs, each run a faint marker (a flagged run hollow)."""
    unit = _BY_NAME[metric].unit if metric in _BY_NAME else ""
    known = points[points["per_message"].notna()] if not points.empty else points
    if known.empty:
        why = ""
        if not points.empty and points["unavailable"].notna().any():
            why = f": {points['unavailable'].dropna().iloc[0]}"
        return base.empty_figure(f"no run of this sweep has {side} {metric}{why}")
    varying = base.varying(known, base.series_keys(known, exclude=(x,)))
    keys = ["pattern", "notifier", *(k for k in varying if k not in ("pattern", "notifier"))]
    fig = Fig()
    for group in base.series(known, keys, x):
        first = group[0]
        name = base.label(first, keys)
        colour = style.colour_for(first["pattern"])
        by_x: dict[float, list[float]] = {}
        for r in group:
            by_x.setdefault(float(r[x]), []).append(float(r["per_message"]))
        xs = sorted(by_x)
        fig.add_trace(
            scatter(
                name=name,
                x=xs,
                y=[sum(by_x[v]) / len(by_x[v]) for v in xs],
                mode="lines+markers",
                line={"color": colour, "dash": style.dash_for(first["notifier"])},
                marker={"symbol": style.symbol_for(first["notifier"])},
                legendgroup=name,
                hovertemplate=f"{name}<br>{fields.label(x)} %{{x}}<br>mean %{{y:.4g}} {unit}<extra></extra>",
            )
        )
        flagged = [bool(r["flagged"]) for r in group]
        fig.add_trace(
            scatter(
                name=f"{name} runs",
                x=[float(r[x]) for r in group],
                y=[float(r["per_message"]) for r in group],
                mode="markers",
                marker={
                    "color": style.rgba(colour, 0.35),
                    "symbol": ["circle-open" if f else "circle" for f in flagged],
                    "size": 7,
                },
                customdata=[r["run_id"] for r in group],
                legendgroup=name,
                showlegend=False,
                hovertemplate="run %{customdata}<br>%{y:.4g} " + unit + "<extra></extra>",
            )
        )
    label = AXIS_METRICS.get(metric, metric)
    absent = _absent_designs(points, known)
    fig.update_layout(
        **style.base_layout(
            height=base.legend_height(len(fig.data) // 2, 420) + 18 * len(absent),
            title={"text": title or f"{side}: {label} vs {fields.label(x)}"},
        )
    )
    if absent:
        fig.update_layout(margin={"b": 76 + 18 * len(absent)})
        base.notes_below(fig, absent, 62)  # under the x axis's title, as the Sweep's notes
    fig.update_xaxes(title={"text": fields.label(x)}, **base.integer_ticks(known[x]))
    # The axis says the side and the unit (the title names the cost): a cost's full label in a vertical
    # title of 420 px was cut at both ends ("er: voluntary context switches (it blocked) (switches/").
    fig.update_yaxes(title={"text": f"{side}: {unit}" if unit else side}, rangemode="tozero")
    return fig.to_dict()


def _absent_designs(points: pd.DataFrame, known: pd.DataFrame) -> list[str]:
    """A note per design (pattern · notifier) none of whose runs has the cost, with the first reason its
    runs give (a tpc sweep's thread sums: its connection threads end before the reading), wrapped."""
    have = set(zip(known["pattern"], known["notifier"], strict=True))
    out: list[str] = []
    for (pattern, notifier), rows in points.groupby(["pattern", "notifier"], sort=True):
        if (pattern, notifier) in have:
            continue
        whys = rows["unavailable"].dropna()
        why = str(whys.iloc[0]) if not whys.empty else "no value recorded"
        out.extend(textwrap.wrap(f"not shown: {pattern} · {notifier}: {why}", NOTE_WRAP))
    return out


def metric_options(metrics: Sequence[str] = tuple(AXIS_METRICS)) -> list[dict[str, str]]:
    return [{"label": AXIS_METRICS[m], "value": m} for m in metrics if m in AXIS_METRICS]
