"""Hosts: every host (one row per distinct machine state) with its topology and noise facts, and the runs
that used it."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from demuxlab import marks
from demuxlab.dashboard import address, common, data
from demuxlab.dashboard.data import hosts as queries
from demuxlab.dashboard.figures import run as figs

dash.register_page(__name__, path="/hosts", name="Hosts", title="demuxlab · hosts")


@common.page_layout("host", what="host", hint=html.P(dcc.Link("all hosts", href="/hosts")))
def layout(host: str | None = None) -> Any:
    with common.store().connect() as conn:
        hosts = queries.hosts(conn)
    if hosts.empty:
        return [
            html.H1("Hosts"),
            common.message("No hosts yet: they are recorded with the first ingested run."),
        ]
    options = [
        {
            "label": f"{h.hostname!s} (#{h.id!s}, {h.cpu_model or '?'!s}, "
            f"first seen {h.first_seen:%Y-%m-%d})",
            "value": str(h.id),
        }
        for h in hosts.itertuples()
    ]
    chosen = host if host and host in {o["value"] for o in options} else options[0]["value"]
    if host and host != chosen:
        raise data.NotFound(f"no host {address.excerpt(host)} in the database")
    return [
        html.H1("Hosts"),
        common.table_block("hosts-table", hosts, page_size=10),
        common.control(
            "Host", dcc.Dropdown(id="hosts-choice", options=options, value=chosen, clearable=False), wide=True
        ),
        html.Div(id="hosts-detail"),
        common.url_state_store("hosts"),
    ]


common.url_sync("hosts", [("hosts-choice", "value", "host")])


@callback(Output("hosts-detail", "children"), Input("hosts-choice", "value"))
def detail(host: str) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            if not str(host).isascii() or not str(host).isdigit() or int(host) > 2**31 - 1:
                raise data.NotFound(f"no host {address.excerpt(host)} in the database")
            h = queries.host_detail(conn, int(host))
            usage = queries.host_usage(conn, int(host))
            cores = queries.core_use(conn, int(host))
        facts = h["facts"] or {}
        items = [
            (k, h.get(k))
            for k in ("hostname", "cpu_model", "kernel", "sockets", "cores", "threads_per_core", "numa_nodes")
        ] + [(k, h.get(k)) for k in ("smt", "turbo", "governor", "irqbalance")]
        items += [
            ("memory", marks.bytes_text(facts.get("memory_bytes"))),
            ("facts sha256", h["facts_sha256"]),
            ("collected at", facts.get("collected_at")),
        ]
        return [
            html.Div(
                [
                    html.Div([html.H2("Facts"), common.facts_list(items)], className="dlx-section"),
                    common.figure_block(
                        "hosts-topology-graph", figs.topology_figure([(h["hostname"], facts)], usage=cores)
                    ),
                ],
                className="dlx-grid2",
            ),
            html.H2("Runs on this host"),
            common.table_block("hosts-usage", usage),
        ]

    return common.guard("host", body)
