"""The Run page's builders: per-second throughput over the run's phases with the stationarity verdict,
latency percentiles, and the pinning plan over the hosts' topology."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

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
    if not latency:
        return base.empty_figure("no latency percentiles (failed run or open-loop client without them)", 300)
    keys = [k for k in LATENCY_KEYS if latency.get(k) is not None]
    fig = Fig()
    fig.add_trace(
        bar(
            x=keys,
            y=[float(latency[k]) for k in keys],
            marker={"color": [style.OKABE_ITO[i] for i in range(len(keys))]},
            text=[f"{float(latency[k]):,.1f}" for k in keys],
            textposition="outside",
        )
    )
    if latency.get("mean") is not None:
        fig.add_hline(y=float(latency["mean"]), line_dash="dot", annotation_text=f"mean {latency['mean']} µs")
    fig.update_layout(
        **style.base_layout(
            title={"text": "Latency percentiles", "x": 0.01},
            height=300,
            yaxis_title="µs (log)",
            yaxis_type="log",
        )
    )
    # A log axis sized to the bars (their labels outside them need the room above), not Plotly's decades.
    vals = [float(latency[k]) for k in keys if float(latency[k]) > 0]
    if vals:
        fig.update_yaxes(range=[math.log10(min(vals)) - 0.3, math.log10(max(vals)) + 0.4])
    return fig.to_dict()


def topology_figure(
    hosts: Sequence[tuple[str, Mapping[str, Any] | None]],
    pinning: Mapping[str, Any] | None = None,
    threads_detail: Sequence[Mapping[str, Any]] | None = None,
    *,
    same_host: bool = False,
    per_row: int = 16,
) -> FigureDict:
    """Each host's CPUs grouped by NUMA node (a square per CPU, labelled with its number and core); with a
    pinning plan, which CPUs the server (and which of its threads) and the client were given."""
    panels = [(label, facts) for label, facts in hosts if facts]
    if not panels:
        return base.empty_figure("no topology facts for this host", 260)
    fig = Fig(rows=1, cols=len(panels), subplot_titles=[label for label, _ in panels])
    pinning = pinning or {}
    server_cpus = set(pinning.get("server_cpus") or [])
    client_cpus = set(pinning.get("client_cpus") or [])
    roles_by_cpu: dict[int, list[str]] = {}
    for t in threads_detail or []:
        if t.get("cpu") is not None:
            roles_by_cpu.setdefault(int(t["cpu"]), []).append(
                f"T{t.get('index')} {t.get('role', '')}".strip()
            )
    legend_done: set[str] = set()
    max_rows = 1
    for col, (label, facts) in enumerate(panels, start=1):
        cpus = {int(c["cpu"]): c for c in facts.get("cpus") or [] if c.get("cpu") is not None}
        nodes = facts.get("numa_nodes") or [{"node": 0, "cpus": sorted(cpus)}]
        is_server = label.startswith("server") or same_host
        is_client = label.startswith("client") or same_host
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
                r = row + i // per_row
                if is_server and cpu in server_cpus and is_client and cpu in client_cpus:
                    kind = "server + client"
                elif is_server and cpu in server_cpus:
                    kind = "server"
                elif is_client and cpu in client_cpus:
                    kind = "client"
                else:
                    kind = "unused"
                info = cpus.get(cpu, {})
                who = roles_by_cpu.get(cpu, []) if is_server and cpu in server_cpus else []
                g = groups.setdefault(kind, {"x": [], "y": [], "text": [], "hover": []})
                g["x"].append(i % per_row)
                g["y"].append(-r)
                g["text"].append(str(cpu))
                g["hover"].append(
                    f"cpu {cpu} · core {info.get('core')} · socket {info.get('socket')}"
                    + f" · node {node.get('node')}"
                    + (f"<br>{kind}" if kind != "unused" else "")
                    + ("<br>" + "<br>".join(who) if who else "")
                )
            row += max(1, math.ceil(len(node_cpus) / per_row))
        max_rows = max(max_rows, row)
        palette = {
            "server": style.OKABE_ITO[0],
            "client": style.OKABE_ITO[1],
            "server + client": style.OKABE_ITO[3],
            "unused": "#DDDDDD",
        }
        for kind, g in groups.items():
            fig.add_trace(
                scatter(
                    x=g["x"],
                    y=g["y"],
                    mode="markers+text",
                    text=g["text"],
                    textfont={"color": "#000" if kind == "unused" else "#fff", "size": 10},
                    hovertext=g["hover"],
                    hoverinfo="text",
                    marker={"symbol": "square", "size": 26, "color": palette[kind]},
                    name=kind,
                    legendgroup=kind,
                    showlegend=kind not in legend_done,
                ),
                row=1,
                col=col,
            )
            legend_done.add(kind)
        fig.update_xaxes(visible=False, range=[-2.2, per_row], row=1, col=col)
        fig.update_yaxes(visible=False, row=1, col=col)
    fig.update_layout(
        **style.base_layout(
            title={"text": "Pinning over the topology" if pinning else "Topology", "x": 0.01},
            height=140 + 36 * max_rows,
            legend={"orientation": "h", "y": -0.05},
        )
    )
    return fig.to_dict()
