"""Ranking: per workload, the designs ranked by measured throughput (TechEmpower's results viewer), with
their share of the best, Welch's test against the best, the latency at that load and the model's rank."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data
from demuxlab.dashboard.data import points as queries
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures import ranking as figs
from demuxlab.vocab import RATE_SOURCES, SOURCE_PAPER

dash.register_page(__name__, path="/ranking", name="Ranking", title="demuxlab · ranking")


@common.page_layout("experiment", "workload", "model")
def layout(experiment: str | None = None, workload: str | None = None, model: str = SOURCE_PAPER) -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Ranking"), common.empty_database_panel()]
        chosen = data.resolve_experiment(conn, experiment or options[0]["value"]).value
    return [
        html.H1("Ranking"),
        html.P(
            "Per workload (every point field but the design and its thread count; hardware classes and "
            "server builds apart), each design (pattern × notifier) at its best thread count, ranked by "
            "mean throughput. “differs from the best”: Welch's t-test against the best design's runs, "
            "p < 0.05 (an open bar: not distinguishable from the best). The model's rank orders the same "
            "designs by their stored predictions.",
            className="dlx-muted",
        ),
        html.Div(
            [
                common.control(
                    "Experiment",
                    dcc.Dropdown(id="ranking-experiment", options=options, value=chosen, clearable=False),
                    wide=True,
                ),
                common.control(
                    "workload",
                    dcc.Dropdown(id="ranking-workload", value=workload, placeholder="the first"),
                    wide=True,
                ),
                common.control(
                    "model rates",
                    dcc.Dropdown(
                        id="ranking-model",
                        options=list(RATE_SOURCES),
                        value=model if model in RATE_SOURCES else SOURCE_PAPER,
                        clearable=False,
                    ),
                ),
            ],
            className="dlx-controls",
        ),
        html.Div(id="ranking-status"),
        common.figure_block("ranking-graph"),
        html.H2("Every workload"),
        common.table_block("ranking-table", page_size=20),
        common.url_state_store("ranking"),
    ]


common.url_sync(
    "ranking",
    [
        ("ranking-experiment", "value", "experiment"),
        ("ranking-workload", "value", "workload"),
        ("ranking-model", "value", "model"),
    ],
)


@callback(
    Output("ranking-graph", "figure"),
    Output("ranking-table", "data"),
    Output("ranking-table", "columns"),
    Output("ranking-workload", "options"),
    Output("ranking-status", "children"),
    Input("ranking-experiment", "value"),
    Input("ranking-workload", "value"),
    Input("ranking-model", "value"),
)
def update(experiment: str, workload: str | None, model: str) -> tuple[Any, ...]:
    model = model if model in RATE_SOURCES else SOURCE_PAPER
    try:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            pts = queries.measured(conn, exp, by_build=True, latency=True)
            preds = queries.predictions(conn, exp)
    except data.DataUnavailable as exc:
        return base.empty_figure("database unavailable"), [], [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return base.empty_figure(str(exc)), [], [], [], common.not_found_panel(exc, "experiment")
    table = figs.ranking_table(pts, preds, source=model)
    loads = figs.workloads(table)
    status = None
    if table.empty:
        status = common.message(f"{exp.label} has no ok runs to rank yet.")
    elif workload and workload not in loads:
        status = common.message("That workload is not in this experiment: showing the first.", "warning")
    elif table["model_rank"].isna().all():
        status = common.message(f"No stored predictions with {model} rates for this experiment's designs.")
    shown = table.drop(columns=[c for c in figs.GROUP if c in table and c not in ("hardware_class", "build")])
    t = common.table_props(shown)
    return (
        figs.ranking_figure(table, workload, source=model),
        t["data"],
        t["columns"],
        loads,
        status,
    )
