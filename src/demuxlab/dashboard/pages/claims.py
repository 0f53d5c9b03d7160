"""Claims: an experiment's claims (which design is fastest where, does the model hold) and the
recommendations, from :mod:`demuxlab.claims` when that module is installed.

The hook is :func:`evaluate`: it hands the experiment's per-point summary (the Sweep page's table), the
stored predictions and the hosts' facts to ``demuxlab.claims.evaluate_claims`` and ``recommend`` and
shows what comes back as tables. Until the module exists the page says so.
"""

from __future__ import annotations

import importlib
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, callback, dcc, html
from sqlalchemy import text

from demuxlab.dashboard import common, data, figures

dash.register_page(__name__, path="/claims", name="Claims", title="demuxlab · claims")


def layout(experiment: str | None = None, **_: Any) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            options = data.experiment_options(conn)
            if not options:
                return [html.H1("Claims"), common.empty_database_panel()]
            chosen = experiment or options[0]["value"]
            data.resolve_experiment(conn, chosen)
        return [
            html.H1("Claims and recommendations"),
            html.Div(
                [
                    html.Label("Experiment"),
                    dcc.Dropdown(id="claims-experiment", options=options, value=chosen, clearable=False),
                ],
                className="dlx-control dlx-wide",
            ),
            html.Div(id="claims-body"),
            common.url_state_store("claims"),
        ]

    return common.guard("experiment", body, hint=html.P(dcc.Link("all experiments", href="/")))


common.url_sync("claims", [("claims-experiment", "value", "experiment")])


def _as_frame(value: Any) -> pd.DataFrame:
    if isinstance(value, pd.DataFrame):
        return value
    rows = [
        v.as_dict() if hasattr(v, "as_dict") else (v if isinstance(v, dict) else vars(v)) for v in value or []
    ]
    return pd.DataFrame(rows)


def evaluate(
    points: pd.DataFrame, preds: pd.DataFrame, facts: list[dict[str, Any]]
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(claims, recommendations) from ``demuxlab.claims``, or None when it is not installed."""
    try:
        claims = importlib.import_module("demuxlab.claims")
    except ModuleNotFoundError:
        return None
    records = figures.sweep_table(points, preds).to_dict("records")
    found = claims.evaluate_claims(records, predictions=preds.to_dict("records"), facts=facts)
    recommended = claims.recommend(records) if hasattr(claims, "recommend") else []
    return _as_frame(found), _as_frame(recommended)


@callback(Output("claims-body", "children"), Input("claims-experiment", "value"))
def update(experiment: str) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            pts = data.sweep_points(conn, exp)
            preds = data.predictions(conn, exp)
            facts = [
                h.facts
                for h in conn.execute(
                    text(
                        "SELECT DISTINCT h.id, h.facts FROM hosts h JOIN runs r ON r.server_host_id = h.id "
                        "JOIN points p ON p.id = r.point_id WHERE p.experiment_id = :id"
                    ),
                    {"id": exp.id},
                )
            ]
        result = evaluate(pts, preds, facts)
        if result is None:
            return common.message(
                "The claims module (demuxlab.claims) is not installed in this build: claims and "
                "recommendations appear here once it is.",
                id="claims-missing",
            )
        found, recommended = result
        return [
            html.H2("Claims"),
            common.table_block("claims-table", found),
            html.H2("Recommendations"),
            common.table_block("claims-recommendations", recommended),
        ]

    return common.guard("experiment", body)
