"""Ranking: per workload, the designs ranked by measured throughput (TechEmpower's results viewer), with
their share of the best, Welch's test against the best, the latency at that load and the model's rank."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data, fold
from demuxlab.dashboard.data import models as model_queries
from demuxlab.dashboard.data import points as queries
from demuxlab.dashboard.figures import absence, base
from demuxlab.dashboard.figures import ranking as figs
from demuxlab.dashboard.whatif import model_patterns
from demuxlab.stats import ALPHA, DIFFERENCE_TEST
from demuxlab.vocab import RATE_SOURCES

dash.register_page(__name__, path="/ranking", name="Ranking", title="demuxlab · ranking")


@common.page_layout("experiment", "workload", "model")
def layout(experiment: str | None = None, workload: str | None = None, model: str | None = None) -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Ranking"), common.empty_database_panel()]
        chosen = data.resolve_experiment(conn, experiment or options[0]["value"]).value
    return [
        html.H1("Ranking"),
        html.P(
            "Per workload (every point field but the design and its thread count; hardware classes and "
            "server builds apart), each design (pattern × notifier) at its best thread count that fits the "
            "server's CPUs, ranked by mean throughput; a design measured only with more server threads "
            "than server CPUs is listed under the ranked ones, not ranked. “differs from the best”: "
            f"{DIFFERENCE_TEST} against the best design's runs, p < {ALPHA} (filled bar: differs, or is the "
            "best; open bar: tied with the best, or untested with fewer than 2 runs), p and the runs on "
            "each side in the column beside the bars: the decision Claims, recommendations, History and "
            "Compare make too. The model's rank orders the same designs by their stored predictions "
            "(calibrated rates where the experiment has them, as recommendations.csv).",
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
                        value=model if model in RATE_SOURCES else None,
                        placeholder="calibrated where there are any",
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


fold.fold_columns("ranking-table", figs.KEY_COLUMNS, figs.PARAM_COLUMNS)


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
def update(experiment: str, workload: str | None, model: str | None) -> tuple[Any, ...]:
    try:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            pts = queries.measured(conn, exp, by_build=True, latency=True)
            preds = queries.predictions(conn, exp)
            states = model_queries.calibration_states(conn, exp)
            cal_points = model_queries.calibration_points(conn, exp)
            shared = queries.shared_machine(conn, exp)
    except data.DataUnavailable as exc:
        return base.empty_figure("database unavailable"), [], [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return base.empty_figure(str(exc)), [], [], [], common.not_found_panel(exc, "experiment")
    model = model if model in RATE_SOURCES else figs.default_source(preds)
    table = figs.ranking_table(pts, preds, source=model)
    loads = figs.workloads(table)
    found = absence.absences(pts, preds, states, cal_points, model_patterns(), (model,))
    missing = absence.lines(found)
    status = None
    if table.empty:
        status = common.message(f"{exp.label} has no ok runs to rank yet.")
    elif workload and workload not in loads:
        status = common.message("That workload is not in this experiment: showing the first.", "warning")
    elif missing:
        status = common.message(
            html.Details(
                [
                    html.Summary(
                        html.B(f"No model rank ({model} rates): " + "; ".join(absence.summary(found)))
                    ),
                    html.Ul([html.Li(m) for m in missing]),
                ],
                open=len(missing) <= 3,
            ),
            id="ranking-no-model",
        )
    hidden = [c for c in figs.GROUP if c in table and c not in ("hardware_class", "build")] + ["_best_runs"]
    shown = table.drop(columns=[c for c in hidden if c in table])
    t = common.table_props(shown)
    return (
        figs.ranking_figure(table, workload, source=model, model_notes=absence.summary(found)),
        t["data"],
        t["columns"],
        loads,
        [common.shared_machine_panel(shared), status],
    )
