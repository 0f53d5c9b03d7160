"""Operations: per-operation service times of instrumented runs vs threads (seed 000 Figs. 9, 10, 12,
13) and events per notifier call."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data, fields
from demuxlab.dashboard.data import operations as queries
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures import operations as figs

dash.register_page(__name__, path="/operations", name="Operations", title="demuxlab · operations")

STATISTICS = {
    "mean_us": "mean (total / calls)",
    "p50_us": "median of the runs' p50",
    "p99_us": "median of the runs' p99",
}


@common.page_layout("experiment", "x", "statistic")
def layout(experiment: str | None = None, x: str = "threads", statistic: str = "mean_us") -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Operations"), common.empty_database_panel()]
        chosen = data.resolve_experiment(conn, experiment or options[0]["value"]).value
    return [
        html.H1("Operations"),
        html.P(
            "Time per operation inside the server, from instrumented runs (instrument: true, and the "
            "CTMC calibration runs).",
            className="dlx-muted",
        ),
        html.Div(
            [
                common.control(
                    "Experiment",
                    dcc.Dropdown(id="operations-experiment", options=options, value=chosen, clearable=False),
                    wide=True,
                ),
                common.control(
                    "x axis",
                    dcc.Dropdown(
                        id="operations-x",
                        options=[{"label": v, "value": k} for k, v in fields.AXES.items()],
                        value=x if x in fields.AXES else "threads",
                        clearable=False,
                    ),
                ),
                common.control(
                    "statistic",
                    dcc.Dropdown(
                        id="operations-statistic",
                        options=[{"label": v, "value": k} for k, v in STATISTICS.items()],
                        value=statistic if statistic in STATISTICS else "mean_us",
                        clearable=False,
                    ),
                    wide=True,
                ),
            ],
            className="dlx-controls",
        ),
        html.Div(id="operations-status"),
        common.figure_block("operations-graph"),
        common.figure_block("operations-events-graph"),
        html.H2("Per point and operation"),
        common.table_block("operations-table"),
        common.url_state_store("operations"),
    ]


common.url_sync(
    "operations",
    [
        ("operations-experiment", "value", "experiment"),
        ("operations-x", "value", "x"),
        ("operations-statistic", "value", "statistic"),
    ],
)


@callback(
    Output("operations-graph", "figure"),
    Output("operations-events-graph", "figure"),
    Output("operations-table", "data"),
    Output("operations-table", "columns"),
    Output("operations-status", "children"),
    Input("operations-experiment", "value"),
    Input("operations-x", "value"),
    Input("operations-statistic", "value"),
)
def update(experiment: str, x: str, statistic: str) -> tuple[Any, ...]:
    try:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            ops = queries.operation_times(conn, exp)
            ev = queries.events_per_call(conn, exp)
    except data.DataUnavailable as exc:
        blank = base.empty_figure("database unavailable")
        return blank, blank, [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        blank = base.empty_figure(str(exc))
        return blank, blank, [], [], common.not_found_panel(exc, "experiment")
    x = x if x in fields.AXES else "threads"
    statistic = statistic if statistic in STATISTICS else "mean_us"
    t = common.table_props(ops.round(4))
    return (
        figs.operations_figure(ops, x=x, statistic=statistic),
        figs.events_figure(ev, x=x),
        t["data"],
        t["columns"],
        None,
    )
