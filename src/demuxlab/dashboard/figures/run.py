"""The Run page's builders: per-second throughput over the run's phases with the stationarity verdict,
latency percentiles, and the pinning plan over the hosts' topology."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.plot import Fig, FigureDict, bar, scatter
from demuxlab.stats import DRIFT_LIMIT_REL
from demuxlab.vocab import RUN_FAILED, RUN_OK


def stationarity_text(
    stationary: bool | None,
    drift_rel: float | None,
    *,
    status: str = RUN_OK,
    samples: int = 0,
    trimmed: int = 0,
) -> str:
    """The run's stationarity verdict in words; when there is none, why (never a bare "unknown")."""
    if stationary is not None:
        drift = f" (drift {drift_rel * 100:+.1f} %)" if drift_rel is not None else ""
        return ("stationary" if stationary else "NOT stationary") + drift
    if status == RUN_FAILED:
        return "stationarity: none (the run failed before its measure phase finished)"
    if samples == 0:
        return "stationarity: none (no per-second samples were recorded)"
    kept = samples - trimmed
    if kept < 3:
        return f"stationarity: none (needs 3 per-second samples after the warm-up transient, has {kept})"
    return (
        "stationarity: not recorded (the run's record has no verdict; the test needs a significant slope "
        f"and a drift over {DRIFT_LIMIT_REL:.0%})"
    )


def run_timeline_figure(
    samples: pd.DataFrame,
    *,
    warmup_s: float,
    measure_s: float,
    cooldown_s: float,
    throughput: float | None = None,
    stationary: bool | None = None,
    drift_rel: float | None = None,
    trimmed_seconds: int = 0,
    status: str = RUN_OK,
) -> FigureDict:
    """Per-second throughput over the run's timeline: warm-up and cool-down shaded, the measure phase
    marked (samples cover it, one per whole second), the run's throughput as a line, and the
    stationarity verdict in the title (an unknown one with its reason)."""
    verdict = stationarity_text(
        stationary, drift_rel, status=status, samples=len(samples), trimmed=trimmed_seconds
    )
    fig = Fig()
    total = warmup_s + measure_s + cooldown_s
    fig.add_vrect(x0=0, x1=warmup_s, fillcolor=style.rgba("#999999", 0.18), line_width=0, layer="below")
    fig.add_vrect(
        x0=warmup_s,
        x1=warmup_s + measure_s,
        fillcolor=style.rgba(style.OKABE_ITO[0], 0.07),
        line_width=0,
        layer="below",
        annotation_text="measure",
        annotation_position="top left",
    )
    if cooldown_s > 0:
        fig.add_vrect(x0=warmup_s + measure_s, x1=total, fillcolor=style.rgba("#999999", 0.18), line_width=0)
    if warmup_s > 0:
        fig.add_annotation(
            x=warmup_s / 2, y=1, yref="paper", text="warm-up", showarrow=False, yanchor="bottom"
        )
    if not samples.empty:
        xs = (warmup_s + samples["second"].astype(float) + 0.5).tolist()
        colours = [
            style.rgba(style.MUTED, 0.6) if s < trimmed_seconds else style.OKABE_ITO[0]
            for s in samples["second"]
        ]
        fig.add_trace(
            scatter(
                x=xs,
                y=samples["throughput_msgs_per_s"].tolist(),
                mode="lines+markers",
                name="per second",
                line={"color": style.OKABE_ITO[0], "width": 1.5},
                marker={"color": colours, "size": 6},
                customdata=samples["second"].tolist(),
                hovertemplate="second %{customdata} of the measure phase<br>%{y:,.0f} msg/s<extra></extra>",
            )
        )
    if throughput is not None:
        fig.add_hline(
            y=throughput,
            line={"color": style.OKABE_ITO[1], "dash": "dash"},
            annotation_text=f"run throughput {throughput:,.0f} msg/s",
            annotation_position="bottom right",
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": f"Per-second throughput — {verdict}", "x": 0.01},
            height=360,
            xaxis_title="time since start (s)",
            yaxis_title="throughput (msg/s)",
            showlegend=False,
        )
    )
    fig.update_xaxes(range=[0, max(total, 1)])
    fig.update_yaxes(rangemode="tozero")
    return fig.to_dict()


LATENCY_KEYS: tuple[str, ...] = ("p50", "p90", "p99", "p999", "max")


def latency_figure(latency: Mapping[str, Any] | None) -> FigureDict:
    """The client's latency percentiles as bars, each labelled in µs, on a log axis with 1-2-5 ticks (p50 to
    max span decades), the mean as a dotted line labelled with its value."""
    if not latency:
        return base.empty_figure("no latency percentiles (failed run or open-loop client without them)", 300)
    keys = [k for k in LATENCY_KEYS if latency.get(k) is not None]
    vals = [float(latency[k]) for k in keys]
    fig = Fig()
    fig.add_trace(
        bar(
            x=keys,
            y=vals,
            marker={"color": style.OKABE_ITO[0]},
            text=[marks.quantity(v, "µs") for v in vals],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}: %{y:.4g} µs<extra></extra>",
        )
    )
    positive = [v for v in vals if v > 0]
    mean = base.f(latency.get("mean"))
    if mean is not None and mean > 0:
        positive.append(mean)
        fig.add_hline(
            y=mean,
            line={"color": style.OKABE_ITO[1], "dash": "dot", "width": 2},
            annotation_text=f"mean {marks.quantity(mean, 'µs')}",
            log=True,
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": "Latency percentiles (client, µs)", "x": 0.01},
            height=320,
            yaxis_title="µs (log scale)",
        )
    )
    if positive:
        # room above the tallest bar for its label; 1-2-5 ticks labelled as numbers (Plotly's log ticks
        # read "2, 10, 5, 2, 1")
        fig.update_yaxes(**style.log_axis(min(positive) / 2.0, max(positive) * 3.0))
    return fig.to_dict()


PALETTE: dict[str, str] = {
    "server": style.OKABE_ITO[0],
    "client": style.OKABE_ITO[1],
    "server + client": style.OKABE_ITO[3],
    "unused": "#DDDDDD",
}


def _kind(cpu: int, server: set[int], client: set[int]) -> str:
    if cpu in server and cpu in client:
        return "server + client"
    if cpu in server:
        return "server"
    if cpu in client:
        return "client"
    return "unused"


def topology_figure(
    hosts: Sequence[tuple[str, Mapping[str, Any] | None]],
    pinning: Mapping[str, Any] | None = None,
    threads_detail: Sequence[Mapping[str, Any]] | None = None,
    *,
    same_host: bool = False,
    per_row: int = 16,
    usage: Mapping[int, Mapping[str, int]] | None = None,
) -> FigureDict:
    """Each host's CPUs grouped by NUMA node (a square per CPU, labelled with its number and core); with a
    pinning plan, which CPUs the server (and which of its threads) and the client were given; with
    ``usage`` (CPU → {"server": runs, "client": runs}: the Hosts page), which CPUs each role used over the
    host's runs, and in how many."""
    panels = [(label, facts) for label, facts in hosts if facts]
    if not panels:
        return base.empty_figure("no topology facts for this host", 260)
    fig = Fig(rows=1, cols=len(panels), subplot_titles=[label for label, _ in panels])
    pinning = pinning or {}
    roles_by_cpu: dict[int, list[str]] = {}
    for t in threads_detail or []:
        if t.get("cpu") is not None:
            roles_by_cpu.setdefault(int(t["cpu"]), []).append(
                f"T{t.get('index')} {t.get('role', '')}".strip()
            )
    legend_done: set[str] = set()
    max_rows = 1
    for col, (label, facts) in enumerate(panels, start=1):
        if usage is not None:
            server = {c for c, u in usage.items() if u.get("server")}
            client = {c for c, u in usage.items() if u.get("client")}
        else:
            server = (
                set(pinning.get("server_cpus") or []) if label.startswith("server") or same_host else set()
            )
            client = (
                set(pinning.get("client_cpus") or []) if label.startswith("client") or same_host else set()
            )
        groups, rows = _cpu_squares(fig, col, facts, server, client, roles_by_cpu, usage, per_row)
        max_rows = max(max_rows, rows)
        for kind, g in groups.items():
            _add_squares(fig, col, kind, g, legend_done)
        fig.update_xaxes(visible=False, range=[-2.2, per_row], row=1, col=col)
        fig.update_yaxes(visible=False, row=1, col=col)
    title = "Cores each role used over this host's runs" if usage is not None else "Topology"
    fig.update_layout(
        **style.base_layout(
            title={"text": "Pinning over the topology" if pinning else title, "x": 0.01},
            height=140 + 36 * max_rows,
            legend={"orientation": "h", "y": -0.05},
        )
    )
    return fig.to_dict()


def _cpu_squares(
    fig: Fig,
    col: int,
    facts: Mapping[str, Any],
    server: set[int],
    client: set[int],
    roles_by_cpu: Mapping[int, list[str]],
    usage: Mapping[int, Mapping[str, int]] | None,
    per_row: int,
) -> tuple[dict[str, dict[str, list[Any]]], int]:
    """Each CPU of a host as a square by NUMA node, grouped by what used it; the rows the panel takes."""
    cpus = {int(c["cpu"]): c for c in facts.get("cpus") or [] if c.get("cpu") is not None}
    nodes = facts.get("numa_nodes") or [{"node": 0, "cpus": sorted(cpus)}]
    row = 0
    groups: dict[str, dict[str, list[Any]]] = {}
    for node in sorted(nodes, key=lambda n: int(n.get("node", 0))):
        node_cpus = sorted(int(c) for c in node.get("cpus") or [])
        fig.add_annotation(
            x=-0.9,
            y=-row,
            text=f"node {node.get('node')}",
            showarrow=False,
            xanchor="right",
            row=1,
            col=col,
            font={"size": 11, "color": style.MUTED},
        )
        for i, cpu in enumerate(node_cpus):
            kind = _kind(cpu, server, client)
            info = cpus.get(cpu, {})
            who = roles_by_cpu.get(cpu, []) if cpu in server else []
            used = usage.get(cpu, {}) if usage is not None else {}
            runs = ", ".join(f"{role} in {n} run{'s' * (n != 1)}" for role, n in sorted(used.items()) if n)
            g = groups.setdefault(kind, {"x": [], "y": [], "text": [], "hover": []})
            g["x"].append(i % per_row)
            g["y"].append(-(row + i // per_row))
            g["text"].append(str(cpu))
            g["hover"].append(
                f"cpu {cpu} · core {info.get('core')} · socket {info.get('socket')} · node {node.get('node')}"
                + (f"<br>{kind}" if kind != "unused" else "")
                + (f"<br>{runs}" if runs else "")
                + ("<br>" + "<br>".join(who) if who else "")
            )
        row += max(1, math.ceil(len(node_cpus) / per_row))
    return groups, row


def _add_squares(fig: Fig, col: int, kind: str, g: Mapping[str, list[Any]], legend_done: set[str]) -> None:
    fig.add_trace(
        scatter(
            x=g["x"],
            y=g["y"],
            mode="markers+text",
            text=g["text"],
            textfont={"color": "#000" if kind == "unused" else "#fff", "size": 10},
            hovertext=g["hover"],
            hoverinfo="text",
            marker={"symbol": "square", "size": 26, "color": PALETTE[kind]},
            name=kind,
            legendgroup=kind,
            showlegend=kind not in legend_done,
        ),
        row=1,
        col=col,
    )
    legend_done.add(kind)
