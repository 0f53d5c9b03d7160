"""Run: one run, down to its seconds: throughput per second with the measure phase and the stationarity
verdict, latency percentiles, the "why" (its validity checks and its costs per message in the kernel's terms,
demuxlab.dashboard.why), the pinning plan over the topology, facts, artifacts, failure reason."""

from __future__ import annotations

from typing import Any

import dash
from dash import dcc, html

from demuxlab.dashboard import common, why
from demuxlab.dashboard.data import runs as queries
from demuxlab.dashboard.figures import run as figs

dash.register_page(__name__, path="/run", name="Run", title="demuxlab · run")


@common.page_layout("run", what="run")
def layout(run: str | None = None) -> Any:
    if not run:
        return [
            html.H1("Run"),
            common.message(
                [
                    "No run chosen: open one from an experiment's run list (",
                    dcc.Link("Experiments", href="/"),
                    ") or a repeat's marker on the Sweep page; the address is /run?run=<run id>.",
                ],
                id="run-none",
            ),
        ]
    return _body(run)


def _body(run_id: str) -> Any:
    from demuxlab.stats import leading_transient

    with common.store().connect() as conn:
        r = queries.run_detail(conn, run_id)
        samples = queries.run_samples(conn, run_id)
        ops = queries.run_ops(conn, run_id)
    trimmed = leading_transient(samples["throughput_msgs_per_s"].tolist()) if len(samples) >= 3 else 0
    exp_ref = r["experiment"]
    pinning = r["pinning"] or {}
    server_result = r["server_result"] or {}
    same_host = bool(pinning.get("same_host")) or (
        r["server_host_id"] is not None and r["server_host_id"] == r["client_host_id"]
    )
    hosts = (
        [(f"server + client: {r['server_hostname']}", r["server_facts"])]
        if same_host
        else [
            (f"server: {r['server_hostname']}", r["server_facts"]),
            (f"client: {r['client_hostname']}", r["client_facts"]),
        ]
    )
    status_panel: Any
    if r["status"] == "failed":
        status_panel = html.Div(
            [html.H3("This run failed"), html.P(r["failure_reason"], className="dlx-mono", id="run-failure")],
            className="dlx-msg dlx-msg-error",
        )
    else:
        status_panel = None
    point_items = [
        ("experiment", f"{exp_ref} @{r['spec_sha256'][:8]}"),
        ("point", r["point_key"]),
        ("repeat / attempt", f"{r['repeat_index']} / {r['attempt']}"),
        ("status", r["status"]),
        (
            "throughput",
            None if r["throughput_msgs_per_s"] is None else f"{r['throughput_msgs_per_s']:,.1f} msg/s",
        ),
        (
            "stationary",
            figs.stationarity_text(
                r["stationary"], r["drift_rel"], status=r["status"], samples=len(samples), trimmed=trimmed
            ),
        ),
        ("drift", None if r["drift_rel"] is None else f"{r['drift_rel'] * 100:+.2f} %"),
        ("leading transient (s)", trimmed),
        ("started / finished", f"{r['started_at']} / {r['finished_at']}"),
        ("launcher, host pair", f"{r['launcher']}, {r['host_pair']}"),
        ("oversubscribed", r["oversubscribed"]),
        ("client messages / errors", f"{r['client_messages']} / {r['errors']}"),
        ("server messages", r["server_messages"]),
        ("CPU s server (user/sys)", f"{r['server_cpu_user_s']} / {r['server_cpu_sys_s']}"),
        ("CPU s client (user/sys)", f"{r['client_cpu_user_s']} / {r['client_cpu_sys_s']}"),
        ("orchestration", None if r["orchestration_s"] is None else f"{r['orchestration_s']:.2f} s"),
        ("run id", r["run_id_text"]),
    ]
    artifacts = []
    for side in ("server", "client"):
        a = r[f"{side}_artifact"] or {}
        artifacts.append((f"{side} {a.get('kind', '')}".strip(), a.get("sha256") or a.get("digest")))
        if a.get("image") or a.get("path"):
            artifacts.append(
                (f"{side} {'image' if a.get('image') else 'path'}", a.get("image") or a.get("path"))
            )
    return [
        html.H1(["Run ", html.Span(r["run_id_text"][:8], className="dlx-mono")]),
        html.P(
            [
                dcc.Link(f"{exp_ref}", href=f"/?experiment={exp_ref}@{r['spec_sha256'][:8]}"),
                " · ",
                dcc.Link("its sweep", href=f"/sweep?experiment={exp_ref}@{r['spec_sha256'][:8]}"),
            ]
        ),
        status_panel,
        common.figure_block(
            "run-timeline-graph",
            figs.run_timeline_figure(
                samples,
                warmup_s=float(r["warmup_s"]),
                measure_s=float(r["measure_s"]),
                cooldown_s=float(r["cooldown_s"]),
                throughput=r["throughput_msgs_per_s"],
                stationary=r["stationary"],
                drift_rel=r["drift_rel"],
                trimmed_seconds=trimmed,
                status=r["status"],
            ),
        ),
        html.Div(
            [
                html.Div([html.H2("Run"), common.facts_list(point_items)], className="dlx-section"),
                html.Div(
                    [common.figure_block("run-latency-graph", figs.latency_figure(r["latency_us"]))],
                    className="dlx-section",
                ),
            ],
            className="dlx-grid2",
        ),
        why.run_panel(run_id),
        common.figure_block(
            "run-topology-graph",
            figs.topology_figure(
                hosts, pinning, server_result.get("threads_detail") or [], same_host=same_host
            ),
        ),
        html.P(" · ".join(pinning.get("notes") or []), className="dlx-muted"),
        html.Div(
            [
                html.Div(
                    [html.H2("Server host"), common.facts_list(_host_facts(r["server_facts"]))],
                    className="dlx-section",
                ),
                html.Div(
                    [html.H2("Client host"), common.facts_list(_host_facts(r["client_facts"]))],
                    className="dlx-section",
                ),
            ],
            className="dlx-grid2",
        ),
        html.Div([html.H2("Artifacts"), common.facts_list(artifacts)], className="dlx-section"),
        html.Div(
            [html.H2("Operations (instrumented runs)"), common.table_block("run-ops", ops.round(4))]
            if not ops.empty
            else [],
            className="dlx-section",
        ),
        html.Div(
            [html.H2("Per-second samples"), common.table_block("run-samples", samples, page_size=10)],
            className="dlx-section",
        ),
    ]


NOISE_FACTS = ("governor", "turbo", "smt", "irqbalance")


def _host_facts(facts: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not facts:
        return [("facts", "not recorded")]
    keys = (
        "hostname",
        "cpu_model",
        "kernel",
        "sockets",
        "cores",
        "threads_per_core",
        "memory_bytes",
        *NOISE_FACTS,
    )
    items: list[tuple[str, Any]] = [(k, facts.get(k)) for k in keys]
    items.append(("NUMA nodes", len(facts.get("numa_nodes") or [])))
    items.append(("online CPUs", len(facts.get("online_cpus") or [])))
    items.append(("collected at", facts.get("collected_at")))
    return items
