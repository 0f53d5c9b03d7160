"""Claims: an experiment's claims (which design is fastest where, does the model hold) and the
recommendations: the verdicts the workflow writes to ``report/claims.csv`` and ``recommendations.csv``,
computed by the same code (:mod:`demuxlab.claims`) from the database as it is now.
"""

from __future__ import annotations

import functools
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data, fold
from demuxlab.dashboard.data import claims as queries
from demuxlab.errors import DemuxlabError

dash.register_page(__name__, path="/claims", name="Claims", title="demuxlab · claims")


@common.page_layout("experiment")
def layout(experiment: str | None = None) -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Claims"), common.empty_database_panel()]
        chosen = data.resolve_experiment(conn, experiment or options[0]["value"]).value
    return [
        html.H1("Claims and recommendations"),
        common.control(
            "Experiment",
            dcc.Dropdown(id="claims-experiment", options=options, value=chosen, clearable=False),
            wide=True,
        ),
        html.Div(id="claims-body"),
        common.url_state_store("claims"),
    ]


common.url_sync("claims", [("claims-experiment", "value", "experiment")])
# recommendations.csv's 21 columns fold to the recommended design, its interval and what it is tied with,
# and the model's word; the workload where the rows differ in it (else named once above the table)
fold.fold_columns(
    "claims-recommendations",
    (
        "pattern",
        "notifier",
        "threads",
        "mean",
        "ci_low",
        "ci_high",
        "n",
        "tied_with",
        "model_best",
        "model_agrees",
        "note",
    ),
    ("host", "work_us", "connections", "msg_size", "rate", "client_threads", "model_source"),
)


@functools.lru_cache(maxsize=64)
def evaluate(
    name: str, spec_sha256: str, url: str, version: tuple[Any, ...] = ()
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(claims, recommendations, notes) for one experiment: the same inputs and code as the workflow's
    ``demuxlab claims`` (:func:`demuxlab.claims.db.load_inputs`), read through the dashboard's URL.

    Cached per :func:`demuxlab.dashboard.data.claims.version`: loading every run of an experiment with its
    documents costs a few hundred milliseconds for 2,000 runs, and the verdicts change only when the data
    do. (Callers only read the frames.)"""
    del version  # part of the cache key
    from demuxlab.claims import evaluate_claims, recommend
    from demuxlab.claims.db import load_inputs
    from demuxlab.validation.store import refusal_reasons

    inputs = load_inputs(name, spec_sha256, "ssa", url)
    verdicts = evaluate_claims(inputs.points, inputs.predictions, inputs.facts)
    # Why a design has no prediction: its stored refusal with the figure, as recommendations.csv says it.
    recs = recommend(inputs.points, inputs.predictions, refusal_reasons(spec_sha256, url))
    notes = [
        f"{len(inputs.points)} measured points with a successful run, "
        f"{len(inputs.predictions)} SSA predictions"
    ]
    if inputs.failed_points:
        notes.append(f"left out (no successful run): {', '.join(inputs.failed_points)}")
    return (
        pd.DataFrame([v.to_row() for v in verdicts]),
        pd.DataFrame([r.to_row() for r in recs]),
        notes,
    )


@callback(Output("claims-body", "children"), Input("claims-experiment", "value"))
def update(experiment: str) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            version = queries.version(conn, exp)
        try:
            found, recommended, notes = evaluate(exp.name, exp.spec_sha256, common.store().url, version)
        except DemuxlabError as exc:
            return common.message(str(exc), id="claims-error")
        return [
            html.P("; ".join(notes)),
            html.H2("Claims"),
            common.table_block("claims-table", found),
            html.H2("Recommendations"),
            common.table_block("claims-recommendations", recommended),
        ]

    return common.guard("experiment", body)
