"""Sweep: throughput vs threads (or work, connections, size) with CIs, repeats, the models and residuals;
under it a cost per message on the same axis (demuxlab.dashboard.why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, callback, dcc, html

from demuxlab.dashboard import common, data, fields, fold, why
from demuxlab.dashboard.data import models as model_queries
from demuxlab.dashboard.data import points as queries
from demuxlab.dashboard.figures import absence, adaptive, base
from demuxlab.dashboard.figures import sweep as figs
from demuxlab.dashboard.whatif import model_patterns
from demuxlab.vocab import NOTIFIERS, PATTERNS

dash.register_page(__name__, path="/sweep", name="Sweep", title="demuxlab · sweep")

COLOUR_CHOICES = fields.PARAMS
SHOW = ("paper", "calibration", "residuals")
SOURCE_OPTIONS = [
    {"label": "model: paper rates", "value": "paper"},
    {"label": "model: calibrated rates", "value": "calibration"},
    {"label": "residual panel", "value": "residuals"},
]


@common.page_layout("experiment", "x", "colour", "facet", "patterns", "notifiers", "show", "cost", "side")
def layout(
    experiment: str | None = None,
    x: str = "threads",
    colour: str = "pattern",
    facet: str = "notifier",
    patterns: str = "",
    notifiers: str = "",
    show: str = ",".join(SHOW),
    cost: str = why.DEFAULT_METRIC,
    side: str = "server",
) -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Sweep"), common.empty_database_panel()]
        exp = data.resolve_experiment(conn, experiment or options[0]["value"])
        chosen = exp.value
        patterns_here, notifiers_here = queries.designs(conn, exp)
    return [
        html.H1("Sweep"),
        _controls(
            options, chosen, x, colour, facet, patterns, notifiers, show, patterns_here, notifiers_here
        ),
        html.Div(id="sweep-status"),
        common.figure_block("sweep-graph", pdf=True),
        html.Div(id="sweep-clicked", className="dlx-muted"),
        why.sweep_block(cost, side),
        html.Div(
            [
                html.H2("Points"),
                html.P(
                    "mean and 95 % CI half-width of the ok runs (an interval is drawn from 2 runs on, "
                    "clipped at 0); the server's CPUs and whether its threads outnumber them; predictions "
                    "and their error (model − measured) / measured",
                    className="dlx-muted",
                ),
                common.table_block("sweep-table"),
                html.H2("Model error by pattern × notifier"),
                common.table_block("sweep-errors", page_size=10),
            ],
            className="dlx-section",
        ),
        common.url_state_store("sweep"),
    ]


def _controls(
    options: list[dict[str, str]],
    chosen: str,
    x: str,
    colour: str,
    facet: str,
    patterns: str,
    notifiers: str,
    show: str,
    patterns_here: list[str],
    notifiers_here: list[str],
) -> html.Div:
    """The control bar: experiment, axis, colour, facet, the patterns and notifiers shown, what else."""
    return html.Div(
        [
            common.control(
                "Experiment",
                dcc.Dropdown(id="sweep-experiment", options=options, value=chosen, clearable=False),
                wide=True,
            ),
            common.control(
                "x axis",
                dcc.Dropdown(
                    id="sweep-x",
                    options=[{"label": v, "value": k} for k, v in fields.AXES.items()],
                    value=x if x in fields.AXES else "threads",
                    clearable=False,
                ),
            ),
            common.control(
                "colour",
                dcc.Dropdown(
                    id="sweep-colour",
                    options=[{"label": fields.label(c), "value": c} for c in COLOUR_CHOICES],
                    value=colour if colour in COLOUR_CHOICES else "pattern",
                    clearable=False,
                ),
            ),
            common.control(
                "facet (columns)",
                dcc.Dropdown(
                    id="sweep-facet",
                    options=[{"label": "none", "value": "none"}]
                    + [{"label": fields.label(c), "value": c} for c in fields.PARAMS],
                    value=facet if facet in (*fields.PARAMS, "none") else "notifier",
                    clearable=False,
                ),
            ),
            _names_control("patterns", "sweep-patterns", patterns_here, PATTERNS, patterns),
            _names_control("notifiers", "sweep-notifiers", notifiers_here, NOTIFIERS, notifiers),
            common.control(
                "show",
                dcc.Checklist(
                    id="sweep-show",
                    options=SOURCE_OPTIONS,
                    value=[v for v in common.split_list(show) if v in SHOW],
                    inline=True,
                ),
                wide=True,
            ),
        ],
        className="dlx-controls",
    )


def _names_control(
    label: str, id_: str, here: list[str], vocabulary: tuple[str, ...], chosen: str
) -> html.Div:
    """A multi-select of the names present (the patterns, the notifiers), in the vocabulary's order."""
    return common.control(
        label,
        dcc.Dropdown(
            id=id_,
            options=_ordered(here, vocabulary),
            value=common.split_list(chosen),
            multi=True,
            placeholder="all",
        ),
    )


def _ordered(values: Any, vocabulary: tuple[str, ...]) -> list[str]:
    """The values present, in the vocabulary's order (unknown ones after, sorted)."""
    present = {str(v) for v in values}
    return [v for v in vocabulary if v in present] + sorted(present - set(vocabulary))


common.url_sync(
    "sweep",
    [
        ("sweep-experiment", "value", "experiment"),
        ("sweep-x", "value", "x"),
        ("sweep-colour", "value", "colour"),
        ("sweep-facet", "value", "facet"),
        ("sweep-patterns", "value", "patterns"),
        ("sweep-notifiers", "value", "notifiers"),
        ("sweep-show", "value", "show"),
        ("sweep-cost-metric", "value", "cost"),
        ("sweep-cost-side", "value", "side"),
    ],
)


@dataclass(frozen=True)
class Loaded:
    """One experiment's sweep as the page reads it."""

    exp: data.ExperimentRef
    points: pd.DataFrame
    preds: pd.DataFrame
    decisions: dict[str, Any] | None
    states: pd.DataFrame  # its calibrations, fitted or refused
    calibration_points: pd.DataFrame
    shared: list[str]  # hosts sharing one machine's CPUs (the test cluster): not performance data


def load(experiment: str) -> Loaded:
    with common.store().connect() as conn:
        exp = data.resolve_experiment(conn, experiment)
        return Loaded(
            exp,
            queries.measured(conn, exp),
            queries.predictions(conn, exp),
            queries.adaptive_decisions(conn, exp),
            model_queries.calibration_states(conn, exp),
            model_queries.calibration_points(conn, exp),
            queries.shared_machine(conn, exp),
        )


def select(points: pd.DataFrame, patterns: list[str] | None, notifiers: list[str] | None) -> pd.DataFrame:
    out = points
    if patterns:
        out = out[out["pattern"].isin(patterns)]
    if notifiers:
        out = out[out["notifier"].isin(notifiers)]
    return out


def view(x: Any, colour: Any, facet: Any) -> tuple[str, str, str | None]:
    """The axis, colour and facet as the figure takes them; anything else (a crafted request) falls back to
    the defaults."""
    x = x if x in fields.AXES else "threads"
    colour = colour if colour in COLOUR_CHOICES else "pattern"
    facet = facet if facet in fields.PARAMS else None
    return x, colour, facet


@callback(
    Output("sweep-patterns", "options"),
    Output("sweep-notifiers", "options"),
    Input("sweep-experiment", "value"),
    prevent_initial_call=True,
)
def options(experiment: str) -> tuple[Any, Any]:
    try:
        with common.store().connect() as conn:
            pats, nots = queries.designs(conn, data.resolve_experiment(conn, experiment))
    except (data.DataUnavailable, data.NotFound):
        return [], []
    return _ordered(pats, PATTERNS), _ordered(nots, NOTIFIERS)


fold.fold_columns("sweep-table", figs.KEY_COLUMNS, figs.PARAM_COLUMNS)


@callback(
    Output("sweep-graph", "figure"),
    Output("sweep-table", "data"),
    Output("sweep-table", "columns"),
    Output("sweep-errors", "data"),
    Output("sweep-errors", "columns"),
    Output("sweep-status", "children"),
    Input("sweep-experiment", "value"),
    Input("sweep-x", "value"),
    Input("sweep-colour", "value"),
    Input("sweep-facet", "value"),
    Input("sweep-patterns", "value"),
    Input("sweep-notifiers", "value"),
    Input("sweep-show", "value"),
)
def update(
    experiment: str,
    x: str,
    colour: str,
    facet: str,
    patterns: list[str] | None,
    notifiers: list[str] | None,
    show: list[str] | None,
) -> tuple[Any, ...]:
    show = show or []
    try:
        got = load(experiment)
    except data.DataUnavailable as exc:
        return (base.empty_figure("database unavailable"), [], [], [], [], common.unavailable_panel(exc))
    except data.NotFound as exc:
        return (base.empty_figure(str(exc)), [], [], [], [], common.not_found_panel(exc, "experiment"))
    exp, pts, preds, decisions = got.exp, got.points, got.preds, got.decisions
    x, colour, facet_ = view(x, colour, facet)
    sel = select(pts, patterns, notifiers)
    if decisions and not sel.empty:  # an adaptive experiment: why each point was measured (its hover)
        reasons = adaptive.why_measured(decisions)
        sel = sel.assign(why=[reasons.get(k, "") for k in sel["point_key"]])
    sources = [s for s in figs.SOURCES if s in show]
    shown_preds = preds[preds["point_id"].isin(sel["point_id"])] if not preds.empty else preds
    missing = absence.absences(
        sel, shown_preds, got.states, got.calibration_points, model_patterns(), sources
    )
    fig = figs.sweep_figure(
        sel,
        shown_preds,
        x=x,
        colour=colour,
        facet=facet_,
        sources=sources,
        residuals="residuals" in show,
        title=f"{exp.name} @{exp.spec_sha256[:8]}: throughput vs {fields.label(x)}",
        model_only=adaptive.model_only(decisions, patterns, notifiers),
        model_notes=absence.summary(missing),
    )
    table = figs.sweep_table(sel, preds)
    errors = figs.error_summary(table)
    t = common.table_props(table)
    e = common.table_props(errors)
    status = [common.shared_machine_panel(got.shared), _status(exp, pts, missing)]
    return fig, t["data"], t["columns"], e["data"], e["columns"], status


def _status(exp: data.ExperimentRef, pts: pd.DataFrame, missing: list[absence.Absence]) -> Any:
    """What the figure cannot show, said above it: no points yet, or each missing model line and why (the
    list folded under a summary line where it is long)."""
    if pts.empty:
        return common.message(f"{exp.label} has no measured points yet.", "info")
    if not missing:
        return None
    return common.message(
        html.Details(
            [
                html.Summary(
                    html.B(
                        f"No model line for {len(missing)} design(s) × rates: "
                        + "; ".join(absence.summary(missing))
                    )
                ),
                html.Ul([html.Li(a.line) for a in missing]),
            ],
            open=len(missing) <= 3,
        ),
        "info",
        id="sweep-no-model",
    )


@callback(
    Output("sweep-graph-pdf-download", "data"),
    Input("sweep-graph-pdf", "n_clicks"),
    State("sweep-experiment", "value"),
    State("sweep-x", "value"),
    State("sweep-colour", "value"),
    State("sweep-facet", "value"),
    State("sweep-patterns", "value"),
    State("sweep-notifiers", "value"),
    State("sweep-show", "value"),
    prevent_initial_call=True,
)
def pdf(
    _n: int,
    experiment: str,
    x: str,
    colour: str,
    facet: str,
    patterns: list[str] | None,
    notifiers: list[str] | None,
    show: list[str] | None,
) -> Any:
    got = load(experiment)
    exp, pts, preds = got.exp, got.points, got.preds
    x, colour, facet_ = view(x, colour, facet)
    sel = select(pts, patterns, notifiers)
    payload = figs.sweep_pdf(
        sel,
        preds,
        x=x,
        colour=colour,
        facet=facet_,
        sources=[s for s in figs.SOURCES if s in (show or [])],
        title=f"{exp.name} @{exp.spec_sha256[:8]}",
    )
    return dcc.send_bytes(  # type: ignore[attr-defined]
        payload, f"demuxlab-{exp.name}-{exp.spec_sha256[:8]}-sweep.pdf"
    )


@callback(
    Output("sweep-clicked", "children"),
    Input("sweep-graph", "clickData"),
    prevent_initial_call=True,
)
def clicked(click: dict[str, Any] | None) -> Any:
    """A click on a repeat's marker offers that run's page."""
    for p in (click or {}).get("points", []):
        cd = p.get("customdata")
        if isinstance(cd, str) and len(cd) == 36:
            return [
                "repeat ",
                dcc.Link(f"run {cd}", href=f"/run?run={cd}", id="sweep-run-link"),
                f": {p['y']:,.0f} msg/s",
            ]
    return "Click a repeat's faint marker to open that run."
