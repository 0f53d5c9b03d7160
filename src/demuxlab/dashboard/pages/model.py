"""Model: calibrated rates next to the paper's with their provenance, model vs measured with errors, and
an interactive what-if through :mod:`demuxlab.ctmc`: the exact solution where the chain is small, else the
SSA (95 % CI) with the fluid approximation beside it, flagged where it leaves the SSA's interval.

Whatever the models cover comes from :mod:`demuxlab.ctmc` (its patterns, its rates) and from the stored
predictions: nothing here names a pattern. The what-if starts from the chosen experiment's workload (its
first modelled pattern whose threads can change, its most common notifier, work and connections, a curve
over the pattern's thread range), so the measured overlay is never silently empty; its inputs are checked
and its curve drawn by the callbacks below, in the page's own words.

(Over 500 lines on purpose: one page, its controls and the callbacks that read them side by side: the
what-if's inputs, its curve, its rate boxes and the model-vs-measured table.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, callback, dcc, html

from demuxlab import marks
from demuxlab.dashboard import common, data, fold
from demuxlab.dashboard.data import models as model_queries
from demuxlab.dashboard.data import points as point_queries
from demuxlab.dashboard.figures import absence, base, summary
from demuxlab.dashboard.figures import model as figs
from demuxlab.dashboard.figures import sweep as sweep_figs
from demuxlab.dashboard.whatif import (
    DEFAULTS,
    MAX_CONNECTIONS,
    MAX_CORES,
    MAX_WORK_US,
    InputError,
    chosen_us,
    count,
    max_threads,
    min_threads,
    model_patterns,
    number,
    out_of_range,
    override,
    override_notes,
    paper,
    parse_threads,
    pattern_rates,
    positive,
    predict_curve,
    quick_curve,
    rate_fields,
    rate_overrides,
    shown,
    shown_methods,
    thread_ranges,
    unsettled_note,
    workload_rates,
)
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import METHOD_EXACT, METHOD_SSA, NOTIFIERS, SOURCE_CALIBRATION, SOURCE_PAPER

dash.register_page(__name__, path="/model", name="Model", title="demuxlab · model")

# -- layout ----------------------------------------------------------------------------------------------


@common.page_layout(
    "experiment",
    "pattern",
    "notifier",
    "rates",
    "threads",
    "work",
    "connections",
    "cores",
    "clients",
    "client_cores",
    *rate_fields(),
)
def layout(
    experiment: str | None = None,
    pattern: str | None = None,
    notifier: str | None = None,
    rates: str = SOURCE_PAPER,
    threads: str | None = None,
    work: str | None = None,
    connections: str | None = None,
    cores: str | None = None,
    clients: str | None = None,
    client_cores: str | None = None,
    **query: str,
) -> Any:
    patterns = model_patterns()
    chosen, workload, cals, options, states, notifiers = _start(experiment)
    pattern = pattern if pattern in patterns else workload.get("pattern", patterns[0])
    of_rates = cals.loc[cals["id"].astype(str) == str(rates), "pattern"] if not cals.empty else cals
    if len(of_rates):  # an address with a calibration of another pattern: the calibration's pattern
        pattern = str(of_rates.iloc[0])
    inputs = {
        "threads": threads
        or (workload.get("threads") if workload.get("pattern") == pattern else None)
        or default_threads(pattern),
        "work": work or workload.get("work", DEFAULTS["work"]),
        "connections": connections or workload.get("connections", DEFAULTS["connections"]),
        "cores": cores if number(cores) is not None else workload.get("cores"),
        "clients": clients if number(clients) is not None else workload.get("clients"),
        "client_cores": client_cores if number(client_cores) is not None else workload.get("client_cores"),
        "notifier": notifier or workload.get("notifier"),
    }
    note = (
        f"Inputs start from {chosen}'s workload."
        if workload
        else "Inputs start from the defaults: the chosen experiment measured none of the modelled patterns."
    )
    return [
        html.H1("Model"),
        _calibrations_section(cals, states),
        _whatif_section(options, chosen, pattern, rates, cals, inputs, notifiers, query, note),
        html.Div(
            [
                html.H2("Model vs measured"),
                html.Div(id="model-validation-status"),
                common.table_block("model-validation-summary", page_size=10),
                common.table_block("model-validation"),
            ],
            className="dlx-section",
        ),
        common.url_state_store("model"),
    ]


def default_threads(pattern: str) -> str:
    """A pattern's thread range, as the what-if's threads box takes it (at most 16 counts)."""
    lo, hi = min_threads(pattern), max_threads(pattern)
    top = min(hi, lo + figs.MAX_CURVE - 1, max(lo, 16))
    return f"{lo}-{top}" if top > lo else str(lo)


def _start(experiment: str | None) -> tuple[Any, ...]:
    """What the page opens on: the experiment, its workload, the calibrations, the choices, its
    calibrations' states (refusals) and the notifiers it measured per pattern."""
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        cals = model_queries.calibrations(conn)
        chosen = None
        workload: dict[str, Any] = {}
        states = pd.DataFrame()
        notifiers: dict[str, list[str]] = {}
        if experiment or options:
            exp = data.resolve_experiment(conn, experiment or options[0]["value"])
            chosen = exp.value
            params = point_queries.parameters(conn, exp)
            workload = figs.workload_defaults(params, model_patterns(), thread_ranges())
            for side, key in (("server", "cores"), ("client", "client_cores")):
                pinned = model_queries.server_cores(conn, exp.id, side)
                if workload and pinned is not None:
                    workload[key] = str(pinned)
            states = model_queries.calibration_states(conn, exp)
            for pat, grp in params.groupby("pattern") if not params.empty else []:
                notifiers[str(pat)] = sorted({str(n) for n in grp["notifier"]})
    return chosen, workload, cals, options, states, notifiers


def _calibrations_section(cals: pd.DataFrame, states: pd.DataFrame) -> html.Div:
    provenance = _provenance(cals)
    rate_rows = figs.rates_table(cals, paper(), rate_fields())
    refused = states[states["refused"].notna()] if not states.empty else states
    return html.Div(
        [
            html.H2("Calibrations"),
            html.P(
                "Time per operation (1/rate) fitted from instrumented runs, next to the paper's.",
                className="dlx-muted",
            ),
            common.figure_block("model-rates-graph", figs.rates_figure(rate_rows)),
            common.table_block("model-rates", rate_rows),
            *(
                [
                    html.H2("Refused calibrations (no calibrated model line for these designs)"),
                    html.Ul(
                        [
                            html.Li(
                                absence.Absence(
                                    str(r.pattern),
                                    str(r.notifier),
                                    base.cls(r.hardware_class),
                                    "calibration",
                                    "refused: "
                                    + absence.reason(str(r.refused), str(r.pattern), str(r.notifier)),
                                ).line
                            )
                            for r in refused.itertuples()
                        ],
                        id="model-refused",
                    ),
                    common.figure_block("model-selfcheck-graph", figs.selfcheck_figure(refused)),
                ]
                if not refused.empty
                else []
            ),
            html.H2("Provenance"),
            common.table_block("model-provenance", provenance, page_size=8),
        ],
        className="dlx-section",
    )


def _provenance(cals: pd.DataFrame) -> pd.DataFrame:
    """Each calibration's provenance in columns a reader reads (not its artifacts' JSON): where and what it
    was fitted from, the server build, the self-check's worst error."""
    if cals.empty:
        return cals.drop(columns=["rates"], errors="ignore")
    out = cals.drop(columns=["rates", "artifacts"]).rename(columns={"hostname": "host"})
    docs = [a if isinstance(a, dict) else {} for a in cals["artifacts"]]
    out["server_build"] = [
        base.short_build(((d.get("server_artifacts") or [{}])[0] or {}).get("sha256")) for d in docs
    ]
    out["self_check_error_pct"] = [
        marks.sig(
            100.0
            * max((abs(float(c.get("rel_error") or 0.0)) for c in d.get("self_check") or []), default=0.0),
            3,
        )
        if d.get("self_check")
        else None
        for d in docs
    ]
    return out


def _box(label: str, id_: str, value: Any, placeholder: str | None = None) -> html.Div:
    return common.control(
        label,
        dcc.Input(
            id=id_,
            type="text",
            inputMode="numeric",
            value=value,
            placeholder=placeholder,
            debounce=True,
            style={"width": "110px"},
        ),
    )


def _whatif_section(
    options: list[dict[str, str]],
    chosen: str | None,
    pattern: str,
    rates: str,
    cals: pd.DataFrame,
    inputs: dict[str, Any],
    notifiers: dict[str, list[str]],
    query: dict[str, str],
    note: str,
) -> html.Div:
    return html.Div(
        [
            html.H2("What if"),
            html.P(
                "A curve over the pattern's thread range. Change the rates, the threads, the server's cores, "
                "the work or the connections: the model answers exactly where the chain is small (a few "
                "connections; solid line), and elsewhere by the SSA (stochastic simulation, its 95 % CI) "
                "with the fluid approximation (dashed) beside it, ringed where the fluid leaves the SSA's "
                "interval. The measured points of the chosen notifier sit on the curve with the workflow's "
                "own predictions of them (hollow diamonds). No cores: a core per thread (seed 001); fewer "
                "cores than runnable threads share them. " + note,
                className="dlx-muted",
                id="model-whatif-origin",
            ),
            _whatif_controls(options, chosen, pattern, rates, cals, inputs, notifiers),
            html.P(
                "Time per operation of each step the pattern's chain takes, over the chosen rates "
                "(empty: as chosen, in grey):",
                className="dlx-muted",
                id="model-rates-origin",
            ),
            html.Div(_rate_inputs(query), className="dlx-controls"),
            html.Div(id="model-whatif-status"),
            common.figure_block("model-whatif-graph"),
            common.table_block("model-whatif-table", page_size=16),
        ],
        className="dlx-section",
    )


def _whatif_controls(
    options: list[dict[str, str]],
    chosen: str | None,
    pattern: str,
    rates: str,
    cals: pd.DataFrame,
    inputs: dict[str, Any],
    notifiers: dict[str, list[str]],
) -> html.Div:
    """The what-if's inputs: the overlay, the pattern, its notifier, the rates and the chain's sizes."""
    cal_options = rates_options(cals, pattern)
    notifier_options = notifiers.get(pattern) or list(NOTIFIERS)
    notifier = inputs["notifier"] if inputs["notifier"] in notifier_options else notifier_options[0]
    return html.Div(
        [
            common.control(
                "measured (overlay)",
                dcc.Dropdown(id="model-experiment", options=options, value=chosen, placeholder="none"),
                wide=True,
            ),
            common.control(
                "pattern",
                dcc.Dropdown(
                    id="model-pattern", options=list(model_patterns()), value=pattern, clearable=False
                ),
            ),
            common.control(
                "notifier",
                dcc.Dropdown(id="model-notifier", options=notifier_options, value=notifier, clearable=False),
            ),
            common.control(
                "rates",
                dcc.Dropdown(
                    id="model-rates-choice",
                    options=cal_options,
                    value=rates if rates in {o["value"] for o in cal_options} else SOURCE_PAPER,
                    clearable=False,
                ),
                wide=True,
            ),
            _box("threads", "model-threads", inputs["threads"]),
            _box("work per message (µs)", "model-work", inputs["work"]),
            _box("connections", "model-connections", inputs["connections"]),
            _box("server cores", "model-cores", inputs["cores"], "one per thread"),
            _box("client threads", "model-clients", inputs["clients"], "1"),
            _box("client cores", "model-client-cores", inputs["client_cores"], "one per thread"),
        ],
        className="dlx-controls",
    )


def _rate_inputs(query: dict[str, str]) -> list[html.Div]:
    return [
        html.Div(
            [
                html.Label(f"{figs.rate_name(k)}, µs", htmlFor=f"model-{k}"),
                dcc.Input(
                    id=f"model-{k}",
                    type="text",
                    inputMode="numeric",
                    value=query.get(k) if number(query.get(k)) is not None else None,
                    placeholder="as chosen",
                    debounce=True,
                    style={"width": "120px"},
                ),
            ],
            id=f"model-rate-box-{k}",
            className="dlx-control dlx-rate",
        )
        for k in rate_fields()
    ]


common.url_sync(
    "model",
    [
        ("model-experiment", "value", "experiment"),
        ("model-pattern", "value", "pattern"),
        ("model-notifier", "value", "notifier"),
        ("model-rates-choice", "value", "rates"),
        ("model-threads", "value", "threads"),
        ("model-work", "value", "work"),
        ("model-connections", "value", "connections"),
        ("model-cores", "value", "cores"),
        ("model-clients", "value", "clients"),
        ("model-client-cores", "value", "client_cores"),
        *[(f"model-{k}", "value", k) for k in rate_fields()],
    ],
)


def rates_options(cals: pd.DataFrame, pattern: str, notifier: str | None = None) -> list[dict[str, str]]:
    """The rates the what-if of ``pattern`` can start from: the paper's, and the calibrations of that
    pattern (a calibration predicts its own pattern only), ``notifier``'s first."""
    mine = cals[cals["pattern"] == pattern] if not cals.empty else cals
    if notifier is not None and not mine.empty:
        mine = mine.assign(_other=mine["notifier"] != notifier).sort_values("_other", kind="stable")
    return [{"label": "paper's rates (seed 001)", "value": SOURCE_PAPER}] + [
        {
            "label": f"calibration #{c.id!s}: {c.pattern!s}/{c.notifier!s} ({c.experiment or '?'!s})",
            "value": str(c.id),
        }
        for c in mine.itertuples()
    ]


@callback(
    Output("model-rates-choice", "options"),
    Output("model-rates-choice", "value"),
    Output("model-notifier", "options"),
    Input("model-pattern", "value"),
    State("model-rates-choice", "value"),
    State("model-notifier", "value"),
    State("model-experiment", "value"),
    prevent_initial_call=True,
)
def pattern_rates_choice(
    pattern: str, choice: str | None, notifier: str | None, experiment: str | None
) -> tuple[Any, ...]:
    """Another pattern: its calibrations to choose from, the paper's rates unless the chosen calibration is
    one of them, and the notifiers the experiment measured it with."""
    try:
        with common.store().connect() as conn:
            options = rates_options(model_queries.calibrations(conn), pattern, notifier)
            measured = (
                point_queries.parameters(conn, data.resolve_experiment(conn, experiment))
                if experiment
                else None
            )
    except (data.DataUnavailable, data.NotFound):
        return dash.no_update, dash.no_update, dash.no_update
    kept = choice if choice in {o["value"] for o in options} else SOURCE_PAPER
    mine = (
        sorted(set(measured.loc[measured["pattern"] == pattern, "notifier"])) if measured is not None else []
    )
    return options, kept, mine or list(NOTIFIERS)


# -- predictions -----------------------------------------------------------------------------------------


def base_rates(choice: str | None, pattern: str) -> tuple[str, Any]:
    """(pattern, Rates) for the choice: the paper's for ``pattern``, or a calibration's (its own pattern)."""
    from demuxlab.ctmc.rates import Rates, paper_rates

    if choice in (None, "", SOURCE_PAPER):
        return pattern, paper_rates(pattern)
    if not str(choice).isdigit():
        raise data.NotFound(f"no calibration {shown(choice)}")
    with common.store().connect() as conn:
        row = model_queries.calibration_rates(conn, int(choice))
    if row is None:
        raise data.NotFound(f"no calibration {shown(choice)}")
    return str(row["pattern"]), Rates.from_dict(dict(row["rates"]), where=f"calibration {choice}")


@callback(
    Output("model-whatif-graph", "figure"),
    Output("model-whatif-table", "data"),
    Output("model-whatif-table", "columns"),
    Output("model-whatif-status", "children"),
    Input("model-pattern", "value"),
    Input("model-notifier", "value"),
    Input("model-rates-choice", "value"),
    Input("model-threads", "value"),
    Input("model-work", "value"),
    Input("model-connections", "value"),
    Input("model-experiment", "value"),
    Input("model-cores", "value"),
    Input("model-clients", "value"),
    Input("model-client-cores", "value"),
    *[Input(f"model-{k}", "value") for k in rate_fields()],
)
def whatif(
    pattern: str,
    notifier: str | None,
    choice: str,
    threads_text: str,
    work: Any,
    connections: Any,
    experiment: str | None,
    cores_text: Any,
    clients_text: Any,
    client_cores_text: Any,
    *overrides: Any,
) -> tuple[Any, ...]:
    try:
        host = (
            count(cores_text, "server cores", MAX_CORES),
            count(clients_text, "client threads", MAX_CORES),
            count(client_cores_text, "client cores", MAX_CORES),
        )
        w = _whatif_inputs(pattern, choice, threads_text, work, connections, host, overrides)
        curve = quick_curve(w.pattern, w.rates, w.threads, w.work_us, w.conns, w.host)
        fluid = curve.loc[curve["method"] != METHOD_EXACT, "threads"].tolist()
        # the fluid is off by up to 2.3× where a lock or the monitor is the bottleneck (docs/ctmc.md,
        # "Solvers"): the SSA stands beside each fluid point, to a 3 % CI (≤ 1.3 s a curve of 1–16 threads)
        ssa = (
            predict_curve(w.pattern, w.rates, fluid, w.work_us, w.conns, METHOD_SSA, w.host)
            if fluid
            else None
        )
        measured, stored, notes = (
            _measured(experiment, w.pattern, notifier, w.work_us, w.conns, w.threads, choice)
            if experiment
            else (None, None, [])
        )
    except InputError as exc:
        return (
            base.empty_figure(str(exc)),
            [],
            [],
            common.message(str(exc), "warning", id="model-input-error"),
        )
    except DemuxlabError as exc:  # the models refused what the checks above let through
        return base.empty_figure(exc.message), [], [], common.message(exc.message, "warning")
    except data.DataUnavailable as exc:
        return base.empty_figure("database unavailable"), [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return base.empty_figure(str(exc)), [], [], common.not_found_panel(exc, "calibration")
    table = figs.whatif_table(curve, ssa)
    t = common.table_props(table)
    label = "paper's rates" if choice in (None, "", SOURCE_PAPER) else f"calibration #{choice}"
    where = f"{w.host[0]} server core(s)" if w.host[0] else "a core per thread"
    title = f"What if: {w.pattern}, {label}, work {w.work_us:g} µs, {w.conns} connections, {where}"
    fig = figs.whatif_figure(curve, ssa, measured, pattern=w.pattern, title=title, stored=stored, notes=notes)
    lines: list[Any] = [f"{shown_methods(curve)}."]
    if w.left_out:
        lines.append(
            f" {w.pattern} runs {min_threads(w.pattern)} to {max_threads(w.pattern)} threads: "
            f"{w.left_out} left out."
        )
    if measured is not None and measured.empty:
        lines.append(
            f" {experiment} has no ok runs of {w.pattern}/{notifier} at {w.work_us:g} µs and {w.conns} "
            "connections in this thread range."
        )
    status = [common.message(lines, id="model-whatif-note"), *_warnings(curve, table, w.typed_notes)]
    return fig, t["data"], t["columns"], status


@dataclass(frozen=True)
class WhatIf:
    """The what-if's inputs, checked: the pattern the rates predict, the rates (typed times over them),
    the thread counts it runs (and those it left out), the workload and the host."""

    pattern: str
    rates: Any
    threads: list[int]
    left_out: list[int]
    work_us: float
    conns: int
    host: tuple[int | None, ...]
    typed_notes: list[str]


def _whatif_inputs(
    pattern: str,
    choice: str,
    threads_text: str,
    work: Any,
    connections: Any,
    host: tuple[int | None, ...],
    overrides: tuple[Any, ...],
) -> WhatIf:
    """Every input checked, in the page's own words (:class:`InputError`); ``host``: (server cores, client
    threads, client cores), checked already."""
    if pattern not in model_patterns():
        raise InputError(f"pattern: the models cover {', '.join(model_patterns())} (got {shown(pattern)})")
    threads = parse_threads(threads_text)
    work_us = positive(work, "work per message", "µs", MAX_WORK_US, zero=True)
    conns = positive(connections, "connections", "connections", MAX_CONNECTIONS)
    if not float(conns).is_integer():
        raise InputError(f"connections must be a whole number (got {shown(connections)})")
    pattern, rates = base_rates(choice, pattern)
    typed = rate_overrides(overrides)
    rates = override(rates, typed)
    notes = override_notes(pattern, workload_rates(rates, int(conns)), typed)
    left_out = out_of_range(pattern, threads)
    return WhatIf(
        pattern, rates, [t for t in threads if t not in left_out], left_out, work_us, int(conns), host, notes
    )


def _warnings(curve: pd.DataFrame, table: pd.DataFrame, typed: list[str]) -> list[Any]:
    """The what-if's warnings: where the fluid did not settle, typed rates that change nothing, and where
    the fluid leaves the SSA's interval."""
    found = [
        ("model-fluid-stalled", unsettled_note(curve)),
        ("model-rates-flag", " ".join(typed)),
        ("model-fluid-flag", figs.disagreement(table)),
    ]
    return [common.message(text, "warning", id=name) for name, text in found if text]


@callback(
    Output("model-rates-origin", "children"),
    *[Output(f"model-rate-box-{k}", "style") for k in rate_fields()],
    *[Output(f"model-{k}", "placeholder") for k in rate_fields()],
    Input("model-pattern", "value"),
    Input("model-rates-choice", "value"),
    Input("model-connections", "value"),
)
def rate_boxes(pattern: str, choice: str, connections: Any) -> tuple[Any, ...]:
    """A box for each rate the chain of the pattern predicted reads (a calibration's own pattern where one
    is chosen), each showing the chosen rate it would replace (the workload's, for a calibration of
    several); the other boxes are hidden, as typing in them would change nothing."""
    fields = rate_fields()
    # where the inputs name no rates, the what-if's own message says why; meanwhile every box, blank
    unknown = (
        "Time per operation, over the chosen rates (empty: as chosen):",
        *[{} for _ in fields],
        *["as chosen" for _ in fields],
    )
    if pattern not in model_patterns():
        return unknown
    try:
        pattern, rates = base_rates(choice, pattern)
    except (DemuxlabError, data.DataUnavailable, data.NotFound):
        return unknown
    conns = number(connections)
    if conns is not None and conns.is_integer():
        rates = workload_rates(rates, int(conns))
    read = set(pattern_rates(pattern))
    origin = (
        f"Time per operation of each step {pattern}'s chain takes, over the chosen rates (empty: the "
        "chosen value, in grey; instant: not measured, the step costs nothing or is off):"
    )
    styles = [{} if k in read else {"display": "none"} for k in fields]
    return (origin, *styles, *[chosen_us(rates, k) for k in fields])


def _measured(
    experiment: str,
    pattern: str,
    notifier: str | None,
    work_us: float,
    connections: int,
    threads: list[int],
    choice: str | None,
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The experiment's measured points of ``pattern`` over ``notifier`` at this work and connection count
    within the curve's thread counts, summarised per hardware class (each with its own interval: never
    averaged); the workflow's stored predictions of them (the source the what-if's rates are); and why a
    model line of theirs is missing."""
    with common.store().connect() as conn:
        exp = data.resolve_experiment(conn, experiment)
        pts = point_queries.measured(conn, exp)
        preds = point_queries.predictions(conn, exp)
        states = model_queries.calibration_states(conn, exp)
        cal_points = model_queries.calibration_points(conn, exp)
    sel = pts[
        (pts["pattern"] == pattern)
        & (pts["notifier"] == notifier)
        & (pts["work_us"] == work_us)
        & (pts["connections"] == connections)
        & (pts["threads"].isin(threads))
    ]
    out = summary.summarise(sel) if not sel.empty else sel
    out = out[out["n"] > 0] if not out.empty else out
    source = SOURCE_PAPER if choice in (None, "", SOURCE_PAPER) else SOURCE_CALIBRATION
    notes = absence.lines(absence.absences(sel, preds, states, cal_points, model_patterns(), (source,)))
    if preds.empty or sel.empty:
        return out, pd.DataFrame(), notes
    picked = summary.pick_predictions(preds[preds["point_id"].isin(sel["point_id"])])
    picked = picked[picked["source"] == source].merge(sel[["point_id", "threads"]], on="point_id")
    return out, picked[["threads", "source", "predicted"]], notes


fold.fold_columns("model-validation", sweep_figs.KEY_COLUMNS, sweep_figs.PARAM_COLUMNS)


@callback(
    Output("model-validation", "data"),
    Output("model-validation", "columns"),
    Output("model-validation-summary", "data"),
    Output("model-validation-summary", "columns"),
    Output("model-validation-status", "children"),
    Input("model-experiment", "value"),
)
def validation(experiment: str | None) -> tuple[Any, ...]:
    if not experiment:
        return (
            [],
            [],
            [],
            [],
            common.message("Choose an experiment (“measured”) for its model-vs-measured table."),
        )
    try:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            pts = point_queries.measured(conn, exp)
            preds = point_queries.predictions(conn, exp)
            shared = point_queries.shared_machine(conn, exp)
    except data.DataUnavailable as exc:
        return [], [], [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return [], [], [], [], common.not_found_panel(exc, "experiment")
    pts = pts[pts["point_id"].isin(preds["point_id"])] if not preds.empty else pts.iloc[0:0]
    table = sweep_figs.sweep_table(pts, preds)
    t = common.table_props(table)
    s = common.table_props(sweep_figs.error_summary(table))
    status = [
        common.shared_machine_panel(shared, validation=True),
        None if not preds.empty else common.message(f"{exp.label} has no stored predictions."),
    ]
    return t["data"], t["columns"], s["data"], s["columns"], status
