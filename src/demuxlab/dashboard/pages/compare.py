"""Compare: two experiments, two host pairs or two builds of the server on the same axes, with the ratio
and whether the 95 % CIs overlap."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data, figures

dash.register_page(__name__, path="/compare", name="Compare", title="demuxlab · compare")


def _side(
    side: str, options: list[dict[str, str]], experiment: str | None, pair: str, build: str
) -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    html.Label(f"{side.upper()}: experiment"),
                    dcc.Dropdown(
                        id=f"compare-{side}-experiment", options=options, value=experiment, clearable=False
                    ),
                ],
                className="dlx-control dlx-wide",
            ),
            html.Div(
                [
                    html.Label(f"{side.upper()}: host pair"),
                    dcc.Dropdown(id=f"compare-{side}-pair", value=pair or None, placeholder="any"),
                ],
                className="dlx-control",
            ),
            html.Div(
                [
                    html.Label(f"{side.upper()}: server build"),
                    dcc.Dropdown(id=f"compare-{side}-build", value=build or None, placeholder="any"),
                ],
                className="dlx-control dlx-wide",
            ),
        ],
        className="dlx-controls",
    )


def layout(
    a: str | None = None,
    b: str | None = None,
    a_pair: str = "",
    b_pair: str = "",
    a_build: str = "",
    b_build: str = "",
    x: str = "threads",
    **_: Any,
) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            options = data.experiment_options(conn)
            if not options:
                return [html.H1("Compare"), common.empty_database_panel()]
            a_val = a or options[0]["value"]
            b_val = b or (options[1]["value"] if len(options) > 1 else a_val)
            data.resolve_experiment(conn, a_val)
            data.resolve_experiment(conn, b_val)
        return [
            html.H1("Compare"),
            html.P(
                "Two sides, each an experiment optionally narrowed to one host pair or one server build "
                "(binary hash or image digest); points are matched on their parameters. The same experiment "
                "with two pairs or two builds compares machines or code.",
                className="dlx-muted",
            ),
            _side("a", options, a_val, a_pair, a_build),
            _side("b", options, b_val, b_pair, b_build),
            html.Div(
                [
                    html.Label("x axis"),
                    dcc.Dropdown(
                        id="compare-x",
                        options=[{"label": v, "value": k} for k, v in data.AXES.items()],
                        value=x if x in data.AXES else "threads",
                        clearable=False,
                    ),
                ],
                className="dlx-control",
            ),
            html.Div(id="compare-status"),
            common.figure_block("compare-graph"),
            common.table_block("compare-table"),
            common.url_state_store("compare"),
        ]

    return common.guard("experiment", body, hint=html.P(dcc.Link("all experiments", href="/")))


common.url_sync(
    "compare",
    [
        ("compare-a-experiment", "value", "a"),
        ("compare-b-experiment", "value", "b"),
        ("compare-a-pair", "value", "a_pair"),
        ("compare-b-pair", "value", "b_pair"),
        ("compare-a-build", "value", "a_build"),
        ("compare-b-build", "value", "b_build"),
        ("compare-x", "value", "x"),
    ],
)


def _choices(side: str) -> None:
    @callback(
        Output(f"compare-{side}-pair", "options"),
        Output(f"compare-{side}-build", "options"),
        Input(f"compare-{side}-experiment", "value"),
    )
    def choices(experiment: str) -> tuple[Any, Any]:
        try:
            with common.store().connect() as conn:
                pairs, builds = data.host_pairs_and_builds(conn, data.resolve_experiment(conn, experiment))
        except (data.DataUnavailable, data.NotFound):
            return [], []
        return pairs, builds


_choices("a")
_choices("b")


def label(experiment: str, pair: str | None, build: str | None) -> str:
    return experiment + (f" on {pair}" if pair else "") + (f" build {build[:15]}" if build else "")


@callback(
    Output("compare-graph", "figure"),
    Output("compare-table", "data"),
    Output("compare-table", "columns"),
    Output("compare-status", "children"),
    Input("compare-a-experiment", "value"),
    Input("compare-a-pair", "value"),
    Input("compare-a-build", "value"),
    Input("compare-b-experiment", "value"),
    Input("compare-b-pair", "value"),
    Input("compare-b-build", "value"),
    Input("compare-x", "value"),
)
def update(
    a: str, a_pair: str | None, a_build: str | None, b: str, b_pair: str | None, b_build: str | None, x: str
) -> tuple[Any, ...]:
    try:
        with common.store().connect() as conn:
            pa = data.sweep_points(conn, data.resolve_experiment(conn, a), host_pair=a_pair, build=a_build)
            pb = data.sweep_points(conn, data.resolve_experiment(conn, b), host_pair=b_pair, build=b_build)
    except data.DataUnavailable as exc:
        return figures.empty_figure("database unavailable"), [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return figures.empty_figure(str(exc)), [], [], common.not_found_panel(exc, "experiment")
    la, lb = label(a, a_pair, a_build), label(b, b_pair, b_build)
    table = figures.compare_table(pa, pb)
    t = common.table_props(table)
    status = None
    if table.empty:
        status = common.message("The two sides share no point with ok runs (same parameters).", "warning")
    elif la == lb:
        status = common.message(
            "Both sides are the same selection: choose another experiment, pair or build."
        )
    return (
        figures.compare_figure(pa, pb, x=x, label_a=f"A: {la}", label_b=f"B: {lb}"),
        t["data"],
        t["columns"],
        status,
    )
