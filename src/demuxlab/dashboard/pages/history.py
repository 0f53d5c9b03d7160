"""History: one experiment's points across spec versions and server builds, oldest to newest (asv,
conbench), with every change beyond noise flagged as a regression or an improvement."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data
from demuxlab.dashboard.data import history as queries
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures import history as figs
from demuxlab.dashboard.figures.summary import ALPHA
from demuxlab.vocab import NOTIFIERS, PATTERNS

dash.register_page(__name__, path="/history", name="History", title="demuxlab · history")


@common.page_layout("experiment", "patterns", "notifiers")
def layout(experiment: str | None = None, patterns: str = "", notifiers: str = "") -> Any:
    with common.store().connect() as conn:
        names = queries.names(conn)
        if names.empty:
            return [html.H1("History"), common.empty_database_panel()]
        name = experiment or str(names.iloc[0]["name"])
        if name not in set(names["name"]):
            # name@sha or an id name a version: the history is the name's.
            name = data.resolve_experiment(conn, name).name
    options = [
        {
            "label": f"{r['name']} ({r['versions']} spec version{'s' * (r['versions'] != 1)}, "
            f"{r['builds']} build{'s' * (r['builds'] != 1)})",
            "value": r["name"],
        }
        for r in names.to_dict("records")
    ]
    return [
        html.H1("History"),
        html.P(
            "Each point's mean throughput (95 % CI) across the spec versions and the server builds its runs "
            "recorded, oldest first. A change between two consecutive revisions is flagged when Welch's "
            f"t-test says they differ (p < {ALPHA}) and the mean moved by at least "
            f"{figs.CHANGE_MIN_REL:.0%}: red rings regressions, blue improvements.",
            className="dlx-muted",
        ),
        html.Div(
            [
                common.control(
                    "Experiment",
                    dcc.Dropdown(id="history-experiment", options=options, value=name, clearable=False),
                    wide=True,
                ),
                common.control(
                    "patterns",
                    dcc.Dropdown(
                        id="history-patterns",
                        options=list(PATTERNS),
                        value=common.split_list(patterns),
                        multi=True,
                        placeholder="all",
                    ),
                ),
                common.control(
                    "notifiers",
                    dcc.Dropdown(
                        id="history-notifiers",
                        options=list(NOTIFIERS),
                        value=common.split_list(notifiers),
                        multi=True,
                        placeholder="all",
                    ),
                ),
            ],
            className="dlx-controls",
        ),
        html.Div(id="history-status"),
        common.figure_block("history-graph"),
        html.H2("Changes beyond noise"),
        common.table_block("history-changes", markdown=("runs", "compare")),
        html.H2("Revisions"),
        common.table_block("history-revisions", page_size=10),
        common.url_state_store("history"),
    ]


common.url_sync(
    "history",
    [
        ("history-experiment", "value", "experiment"),
        ("history-patterns", "value", "patterns"),
        ("history-notifiers", "value", "notifiers"),
    ],
)


@callback(
    Output("history-graph", "figure"),
    Output("history-changes", "data"),
    Output("history-changes", "columns"),
    Output("history-revisions", "data"),
    Output("history-revisions", "columns"),
    Output("history-status", "children"),
    Input("history-experiment", "value"),
    Input("history-patterns", "value"),
    Input("history-notifiers", "value"),
)
def update(name: str, patterns: list[str] | None, notifiers: list[str] | None) -> tuple[Any, ...]:
    try:
        with common.store().connect() as conn:
            frame = queries.points(conn, name)
    except data.DataUnavailable as exc:
        return base.empty_figure("database unavailable"), [], [], [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return base.empty_figure(str(exc)), [], [], [], [], common.not_found_panel(exc, "experiment")
    if patterns:
        frame = frame[frame["pattern"].isin(patterns)]
    if notifiers:
        frame = frame[frame["notifier"].isin(notifiers)]
    history = figs.analyse(frame, name)
    changes = history.changes
    revisions = figs.revisions_table(history)
    c = common.table_props(changes, markdown=("runs", "compare"))
    r = common.table_props(revisions)
    status = None
    if len(revisions) < 2:
        status = common.message(
            f"{name} has one revision (one spec version and one server build): nothing to compare yet."
        )
    elif changes.empty:
        status = common.message("No change beyond noise between consecutive revisions.", id="history-none")
    return figs.history_figure(history), c["data"], c["columns"], r["data"], r["columns"], status
