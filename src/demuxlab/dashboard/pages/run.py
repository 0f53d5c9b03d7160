"""Run: one run, down to its seconds: throughput per second with the measure phase and the stationarity
verdict, latency percentiles, the "why" (its validity checks and its costs per message in the kernel's terms,
demuxlab.dashboard.why), the pinning plan over the topology, facts, artifacts, failure reason."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, callback, dcc, html

from demuxlab import marks
from demuxlab.dashboard import common, data, why
from demuxlab.dashboard.data import runs as queries
from demuxlab.dashboard.figures import run as figs

dash.register_page(__name__, path="/run", name="Run", title="demuxlab · run")


@common.page_layout("run", what="run")
def layout(run: str | None = None) -> Any:
    """The run picker (an experiment, then one of its runs) over the chosen run; without a run, the newest
    experiment's runs to pick from."""
    with common.store().connect() as conn:
        r = (
            queries.run_detail(conn, run) if run else None
        )  # an unknown run says so, even in an empty database
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Run"), common.empty_database_panel()]
        exp = data.resolve_experiment(
            conn, f"{r['experiment']}@{r['spec_sha256'][:12]}" if r else options[0]["value"]
        )
        runs = queries.run_options(conn, exp, chosen=run)
    body: Any = (
        _body(run)
        if run
        else common.message(
            "No run chosen: pick one above (failed runs first), or open one from an experiment's run list or "
            "a repeat's marker on the Sweep page; the address is /run?run=<run id>.",
            id="run-none",
        )
    )
    return [
        html.H1("Run"),
        html.Div(
            [
                common.control(
                    "Experiment",
                    dcc.Dropdown(id="run-experiment", options=options, value=exp.value, clearable=False),
                    wide=True,
                ),
                common.control(
                    "run",
                    dcc.Dropdown(id="run-choice", options=runs, value=run, placeholder="choose a run"),
                    wide=True,
                ),
            ],
            className="dlx-controls dlx-picker",
        ),
        html.Div(body, id="run-body"),
        common.url_state_store("run"),
    ]


common.url_sync("run", [("run-choice", "value", "run")])


@callback(
    Output("run-choice", "options"),
    Input("run-experiment", "value"),
    Input("run-choice", "search_value"),
    State("run-choice", "value"),
    prevent_initial_call=True,
)
def runs_of(experiment: str, search: str | None, chosen: str | None) -> Any:
    """The picker's runs: the experiment's first :data:`~demuxlab.dashboard.data.runs.RUN_OPTIONS`, or
    those matching what is typed (the database searches: the picker never holds every run)."""
    if dash.ctx.triggered_id == "run-choice" and search is None:
        return dash.no_update
    try:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            return queries.run_options(conn, exp, search or "", chosen)
    except (data.DataUnavailable, data.NotFound):
        return []


@callback(Output("run-body", "children"), Input("run-choice", "value"), prevent_initial_call=True)
def chosen(run: str | None) -> Any:
    if not run:
        return dash.no_update
    return common.guard("run", lambda: _body(run))


def _body(run_id: str) -> Any:
    """One run: its timeline, facts, latency, pinning over the topology, hosts, artifacts and timings."""
    from demuxlab.stats import leading_transient

    with common.store().connect() as conn:
        r = queries.run_detail(conn, run_id)
        samples = queries.run_samples(conn, run_id)
        ops = queries.run_ops(conn, run_id)
    trimmed = leading_transient(samples["throughput_msgs_per_s"].tolist()) if len(samples) >= 3 else 0
    exp_ref = f"{r['experiment']}@{r['spec_sha256'][:8]}"
    pinning = r["pinning"] or {}
    same_host = bool(pinning.get("same_host")) or (
        r["server_host_id"] is not None and r["server_host_id"] == r["client_host_id"]
    )
    status_panel = (
        html.Div(
            [html.H3("This run failed"), html.P(r["failure_reason"], className="dlx-mono", id="run-failure")],
            className="dlx-msg dlx-msg-error",
        )
        if r["status"] == "failed"
        else None
    )
    return [
        html.H2(["Run ", html.Span(r["run_id_text"][:8], className="dlx-mono")], id="run-title"),
        html.P(
            [
                dcc.Link(r["experiment"], href=f"/?experiment={exp_ref}"),
                " · ",
                dcc.Link("its sweep", href=f"/sweep?experiment={exp_ref}"),
            ]
        ),
        status_panel,
        common.figure_block("run-timeline-graph", _timeline(r, samples, trimmed)),
        html.Div(
            [
                html.Div(
                    [html.H2("Run"), common.facts_list(_run_facts(r, samples, trimmed))],
                    className="dlx-section",
                ),
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
                _hosts(r, same_host),
                pinning,
                (r["server_result"] or {}).get("threads_detail") or [],
                same_host=same_host,
            ),
        ),
        html.P(" · ".join(pinning.get("notes") or []), className="dlx-muted"),
        *_sections(r, samples, ops),
    ]


def _timeline(r: dict[str, Any], samples: Any, trimmed: int) -> Any:
    return figs.run_timeline_figure(
        samples,
        warmup_s=float(r["warmup_s"]),
        measure_s=float(r["measure_s"]),
        cooldown_s=float(r["cooldown_s"]),
        throughput=r["throughput_msgs_per_s"],
        stationary=r["stationary"],
        drift_rel=r["drift_rel"],
        trimmed_seconds=trimmed,
        status=r["status"],
    )


def _hosts(r: dict[str, Any], same_host: bool) -> list[tuple[str, Any]]:
    if same_host:
        return [(f"server + client: {r['server_hostname']}", r["server_facts"])]
    return [
        (f"server: {r['server_hostname']}", r["server_facts"]),
        (f"client: {r['client_hostname']}", r["client_facts"]),
    ]


def _run_facts(r: dict[str, Any], samples: Any, trimmed: int) -> list[tuple[str, Any]]:
    thr = r["throughput_msgs_per_s"]
    cpus = (r["pinning"] or {}).get("server_cpus")
    over = r["oversubscribed"]
    if isinstance(cpus, list) and cpus and r["threads"] > len(cpus):
        over = f"yes: {r['threads']} server threads on {len(cpus)} CPU{'s' * (len(cpus) != 1)}"
    return [
        ("experiment", f"{r['experiment']} @{r['spec_sha256'][:8]}"),
        ("point", r["point_key"]),
        ("repeat / attempt", f"{r['repeat_index']} / {r['attempt']}"),
        ("status", r["status"]),
        ("throughput", None if thr is None else marks.quantity(thr, "msg/s", 4)),
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
        ("oversubscribed", over),
        ("client messages / errors", f"{r['client_messages']} / {r['errors']}"),
        ("server messages", r["server_messages"]),
        ("CPU s server (user/sys)", f"{_s(r['server_cpu_user_s'])} / {_s(r['server_cpu_sys_s'])}"),
        ("CPU s client (user/sys)", f"{_s(r['client_cpu_user_s'])} / {_s(r['client_cpu_sys_s'])}"),
        ("orchestration", None if r["orchestration_s"] is None else f"{r['orchestration_s']:.2f} s"),
        ("run id", r["run_id_text"]),
    ]


def _s(v: Any) -> str:
    return "—" if v is None else marks.quantity(float(v), "s")


def _sections(r: dict[str, Any], samples: Any, ops: Any) -> list[Any]:
    artifacts = []
    for side in ("server", "client"):
        a = r[f"{side}_artifact"] or {}
        artifacts.append((f"{side} {a.get('kind', '')}".strip(), a.get("sha256") or a.get("digest")))
        if a.get("image") or a.get("path"):
            artifacts.append(
                (f"{side} {'image' if a.get('image') else 'path'}", a.get("image") or a.get("path"))
            )
    return [
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
            [html.H2("Operations (instrumented runs)"), common.table_block("run-ops", common.sig_frame(ops))]
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
    items: list[tuple[str, Any]] = [
        (k, marks.bytes_text(facts.get(k)) if k == "memory_bytes" else facts.get(k)) for k in keys
    ]
    items.append(("NUMA nodes", len(facts.get("numa_nodes") or [])))
    items.append(("online CPUs", len(facts.get("online_cpus") or [])))
    items.append(("collected at", facts.get("collected_at")))
    return items
