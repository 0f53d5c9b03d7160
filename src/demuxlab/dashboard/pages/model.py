"""Model: calibrated rates next to the paper's with their provenance, model vs measured with errors, and
an interactive what-if (fluid at once, SSA on request) through :mod:`demuxlab.ctmc`.

Whatever the models cover comes from :mod:`demuxlab.ctmc` (its patterns, its rates) and from the stored
predictions: nothing here names a pattern. The what-if starts from the chosen experiment's workload (its
first modelled pattern, its most common work and connections, its thread counts), so the measured overlay
is never silently empty; every input is checked here, in the page's own words."""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, callback, ctx, dcc, html

from demuxlab.dashboard import common, data
from demuxlab.dashboard.data import models as model_queries
from demuxlab.dashboard.data import points as point_queries
from demuxlab.dashboard.figures import base, summary
from demuxlab.dashboard.figures import model as figs
from demuxlab.dashboard.figures import sweep as sweep_figs
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import METHOD_FLUID, METHOD_SSA, SOURCE_PAPER

dash.register_page(__name__, path="/model", name="Model", title="demuxlab · model")

MAX_POINTS = 32
MAX_THREADS = 128
MAX_WORK_US = 1_000_000.0
MAX_CONNECTIONS = 1_000_000
DEFAULTS = {"threads": "1-16", "work": "10", "connections": "512"}


class InputError(Exception):
    """An input of the what-if the models cannot take; the message says which and why."""


# -- the models, as demuxlab.ctmc offers them -------------------------------------------------------------


def model_patterns() -> tuple[str, ...]:
    from demuxlab.ctmc.rates import PATTERNS

    return tuple(PATTERNS)


def rate_fields() -> tuple[str, ...]:
    from demuxlab.ctmc.rates import RATE_FIELDS

    return tuple(RATE_FIELDS)


def min_threads(pattern: str) -> int:
    from demuxlab.ctmc.rates import min_threads as lowest

    return int(lowest(pattern))


def paper() -> dict[str, dict[str, float]]:
    from demuxlab.ctmc.rates import paper_rates

    return {p: paper_rates(p).as_dict() for p in model_patterns()}


# -- inputs ----------------------------------------------------------------------------------------------


def parse_threads(text: Any) -> list[int]:
    """``1-16``, ``2,4,8`` or both (``1-4,8``) as sorted thread counts; :class:`InputError` else."""
    raw = str(text or "").strip()
    if not raw:
        raise InputError("threads: give the thread counts to predict, e.g. 1-16 or 2,4,8")
    out: set[int] = set()
    for part in raw.split(","):
        part = part.strip()
        lo, dash_, hi = part.partition("-")
        if not (lo.strip().isdigit() and (not dash_ or hi.strip().isdigit())):
            raise InputError(f"threads: write counts like 1-16 or 2,4,8 (got {_shown(raw)})")
        a, b = int(lo), int(hi) if dash_ else int(lo)
        if a < 1 or b < a:
            raise InputError(f"threads: {part} is not a range of counts from 1 up (got {_shown(raw)})")
        if b > MAX_THREADS or len(out) + (b - a + 1) > MAX_POINTS:
            raise InputError(
                f"threads: at most {MAX_POINTS} counts, each at most {MAX_THREADS} (got {_shown(raw)})"
            )
        out.update(range(a, b + 1))
    return sorted(out)


def positive(value: Any, what: str, unit: str, limit: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number of {unit} (got {_shown(value)})") from None
    if not math.isfinite(v) or v <= 0 or v > limit:
        raise InputError(
            f"{what} must be more than 0 and at most {base.fmt(limit)} {unit} (got {_shown(value)})"
        )
    return v


def _shown(value: Any) -> str:
    from demuxlab.dashboard.address import excerpt

    if value is None or value == "":
        return "nothing"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return base.fmt(float(value))
    return excerpt(value, 30)


def rate_overrides(values: tuple[Any, ...]) -> dict[str, float]:
    """The times per operation (µs) typed over the chosen rates; an empty box keeps the chosen rate."""
    out: dict[str, float] = {}
    for k, v in zip(rate_fields(), values, strict=False):
        if v is None or v == "":
            continue
        out[k] = positive(v, figs.rate_name(k), "µs", 1e9)
    return out


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


# -- layout ----------------------------------------------------------------------------------------------


@common.page_layout("experiment", "pattern", "rates", "threads", "work", "connections", *rate_fields())
def layout(
    experiment: str | None = None,
    pattern: str | None = None,
    rates: str = SOURCE_PAPER,
    threads: str | None = None,
    work: str | None = None,
    connections: str | None = None,
    **query: str,
) -> Any:
    patterns = model_patterns()
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        cals = model_queries.calibrations(conn)
        chosen = None
        workload: dict[str, Any] = {}
        if experiment or options:
            exp = data.resolve_experiment(conn, experiment or options[0]["value"])
            chosen = exp.value
            workload = figs.workload_defaults(point_queries.parameters(conn, exp), patterns)
    pattern = pattern if pattern in patterns else workload.get("pattern", patterns[0])
    cal_options = [{"label": "paper's rates (seed 001)", "value": SOURCE_PAPER}] + [
        {
            "label": f"calibration #{c.id!s}: {c.pattern!s}/{c.notifier!s} ({c.experiment or '?'!s})",
            "value": str(c.id),
        }
        for c in cals.itertuples()
    ]
    provenance = cals.drop(columns=["rates"]).rename(columns={"hostname": "host"})
    rate_rows = figs.rates_table(cals, paper(), rate_fields())
    rate_inputs = [
        html.Div(
            [
                html.Label(f"{figs.rate_name(k)}, µs", htmlFor=f"model-{k}"),
                dcc.Input(
                    id=f"model-{k}",
                    type="text",
                    inputMode="numeric",
                    value=query.get(k) if _number(query.get(k)) is not None else None,
                    placeholder="as chosen",
                    debounce=True,
                    style={"width": "120px"},
                ),
            ],
            className="dlx-control dlx-rate",
        )
        for k in rate_fields()
    ]
    note = (
        f"Inputs start from {chosen}'s workload."
        if workload
        else "Inputs start from the defaults: the chosen experiment measured none of the modelled patterns."
    )
    return [
        html.H1("Model"),
        html.Div(
            [
                html.H2("Calibrations"),
                html.P(
                    "Time per operation (1/rate) fitted from instrumented runs, next to the paper's.",
                    className="dlx-muted",
                ),
                common.figure_block("model-rates-graph", figs.rates_figure(rate_rows)),
                common.table_block("model-rates", rate_rows),
                html.H2("Provenance"),
                common.table_block("model-provenance", provenance, page_size=8),
            ],
            className="dlx-section",
        ),
        html.Div(
            [
                html.H2("What if"),
                html.P(
                    "Change the rates, the threads, the work or the connections: the fluid approximation "
                    "answers at once; the SSA (stochastic simulation, 95 % CI) runs on request. " + note,
                    className="dlx-muted",
                    id="model-whatif-origin",
                ),
                html.Div(
                    [
                        _control(
                            "measured (overlay)",
                            dcc.Dropdown(
                                id="model-experiment", options=options, value=chosen, placeholder="none"
                            ),
                            wide=True,
                        ),
                        _control(
                            "pattern",
                            dcc.Dropdown(
                                id="model-pattern", options=list(patterns), value=pattern, clearable=False
                            ),
                        ),
                        _control(
                            "rates",
                            dcc.Dropdown(
                                id="model-rates-choice",
                                options=cal_options,
                                value=rates if rates in {o["value"] for o in cal_options} else SOURCE_PAPER,
                                clearable=False,
                            ),
                            wide=True,
                        ),
                        _control(
                            "threads",
                            dcc.Input(
                                id="model-threads",
                                value=threads or workload.get("threads", DEFAULTS["threads"]),
                                debounce=True,
                                style={"width": "110px"},
                            ),
                        ),
                        _control(
                            "work per message (µs)",
                            dcc.Input(
                                id="model-work",
                                type="text",
                                inputMode="numeric",
                                value=work or workload.get("work", DEFAULTS["work"]),
                                debounce=True,
                                style={"width": "110px"},
                            ),
                        ),
                        _control(
                            "connections",
                            dcc.Input(
                                id="model-connections",
                                type="text",
                                inputMode="numeric",
                                value=connections or workload.get("connections", DEFAULTS["connections"]),
                                debounce=True,
                                style={"width": "110px"},
                            ),
                        ),
                        html.Button("Run SSA", id="model-ssa", className="dlx-btn"),
                    ],
                    className="dlx-controls",
                ),
                html.P(
                    "Time per operation, over the chosen rates (empty: as chosen):", className="dlx-muted"
                ),
                html.Div(rate_inputs, className="dlx-controls"),
                html.Div(id="model-whatif-status"),
                common.figure_block("model-whatif-graph"),
                common.table_block("model-whatif-table", page_size=16),
            ],
            className="dlx-section",
        ),
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


def _control(label: str, child: Any, wide: bool = False) -> html.Div:
    return html.Div([html.Label(label), child], className="dlx-control" + (" dlx-wide" if wide else ""))


common.url_sync(
    "model",
    [
        ("model-experiment", "value", "experiment"),
        ("model-pattern", "value", "pattern"),
        ("model-rates-choice", "value", "rates"),
        ("model-threads", "value", "threads"),
        ("model-work", "value", "work"),
        ("model-connections", "value", "connections"),
        *[(f"model-{k}", "value", k) for k in rate_fields()],
    ],
)


# -- predictions -----------------------------------------------------------------------------------------


def base_rates(choice: str | None, pattern: str) -> tuple[str, Any]:
    """(pattern, Rates) for the choice: the paper's for ``pattern``, or a calibration's (its own pattern)."""
    from demuxlab.ctmc.rates import Rates, paper_rates

    if choice in (None, "", SOURCE_PAPER):
        return pattern, paper_rates(pattern)
    if not str(choice).isdigit():
        raise data.NotFound(f"no calibration {_shown(choice)}")
    with common.store().connect() as conn:
        row = model_queries.calibration_rates(conn, int(choice))
    if row is None:
        raise data.NotFound(f"no calibration {_shown(choice)}")
    return str(row["pattern"]), Rates.from_dict(dict(row["rates"]), where=f"calibration {choice}")


def override(rates: Any, overrides: dict[str, float]) -> Any:
    """The rates with each given time per operation (µs) replacing its rate (1/µs)."""
    if not overrides:
        return rates
    src = dict(rates.source)
    src.update({k: "what-if" for k in overrides})
    return replace(rates, **{k: 1.0 / v for k, v in overrides.items()}, source=src)


@functools.lru_cache(maxsize=4096)
def _predict(
    pattern: str, rates: Any, threads: int, work_us: float, connections: int, method: str
) -> tuple[float, float | None]:
    """One prediction; cached, since the solvers are deterministic (the SSA's seed is fixed) and the
    what-if asks the same points again as the user moves one control. ``rates`` is the models' own
    :class:`demuxlab.ctmc.rates.Rates` (a frozen dataclass: its rates are its hash), passed whole so that
    whatever a calibration holds beyond the eight rates reaches the model."""
    from demuxlab.ctmc.predict import predict

    p = predict(pattern, threads, work_us, method=method, connections=connections, rates=rates, rel_ci=0.03)
    return p.throughput_msgs_per_s, p.ci_halfwidth_rel


def predict_curve(
    pattern: str, rates: Any, threads: list[int], work_us: float, connections: int, method: str
) -> pd.DataFrame:
    rows = []
    for t in threads:
        if t < min_threads(pattern):
            continue
        thr, ci = _predict(pattern, rates, t, float(work_us), int(connections), method)
        rows.append({"threads": t, "throughput_msgs_per_s": thr, "ci_halfwidth_rel": ci})
    return pd.DataFrame(rows, columns=["threads", "throughput_msgs_per_s", "ci_halfwidth_rel"])


@callback(
    Output("model-whatif-graph", "figure"),
    Output("model-whatif-table", "data"),
    Output("model-whatif-table", "columns"),
    Output("model-whatif-status", "children"),
    Input("model-pattern", "value"),
    Input("model-rates-choice", "value"),
    Input("model-threads", "value"),
    Input("model-work", "value"),
    Input("model-connections", "value"),
    Input("model-experiment", "value"),
    Input("model-ssa", "n_clicks"),
    *[Input(f"model-{k}", "value") for k in rate_fields()],
)
def whatif(
    pattern: str,
    choice: str,
    threads_text: str,
    work: Any,
    connections: Any,
    experiment: str | None,
    _ssa: int | None,
    *overrides: Any,
) -> tuple[Any, ...]:
    run_ssa = ctx.triggered_id == "model-ssa"
    try:
        if pattern not in model_patterns():
            raise InputError(
                f"pattern: the models cover {', '.join(model_patterns())} (got {_shown(pattern)})"
            )
        threads = parse_threads(threads_text)
        work_us = positive(work, "work per message", "µs", MAX_WORK_US)
        conns = positive(connections, "connections", "connections", MAX_CONNECTIONS)
        if not float(conns).is_integer():
            raise InputError(f"connections must be a whole number (got {_shown(connections)})")
        pattern, rates = base_rates(choice, pattern)
        rates = override(rates, rate_overrides(overrides))
        left_out = [t for t in threads if t < min_threads(pattern)]
        if len(left_out) == len(threads):
            raise InputError(f"threads: {pattern} needs at least {min_threads(pattern)} threads")
        fluid = predict_curve(pattern, rates, threads, work_us, int(conns), METHOD_FLUID)
        ssa = predict_curve(pattern, rates, threads, work_us, int(conns), METHOD_SSA) if run_ssa else None
        measured = _measured(experiment, pattern, work_us, int(conns)) if experiment else None
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
    table = figs.whatif_table(fluid, ssa)
    t = common.table_props(table.round(4))
    label = "paper's rates" if choice in (None, "", SOURCE_PAPER) else f"calibration #{choice}"
    fig = figs.whatif_figure(
        fluid,
        ssa,
        measured,
        pattern=pattern,
        title=f"What if: {pattern}, {label}, work {work_us:g} µs, {int(conns)} connections",
    )
    lines: list[Any] = [
        "SSA done." if run_ssa else "Fluid shown; press “Run SSA” for the stochastic simulation with its CI."
    ]
    if left_out:
        lines.append(f" {pattern} needs at least {min_threads(pattern)} threads: {left_out} left out.")
    if measured is not None and measured.empty:
        lines.append(
            f" {experiment} has no ok runs of {pattern} at {work_us:g} µs and {int(conns)} connections."
        )
    notes = [common.message(lines, id="model-whatif-note")]
    flag = figs.disagreement(table)
    if flag:
        notes.append(common.message(flag, "warning", id="model-fluid-flag"))
    return fig, t["data"], t["columns"], notes


def _measured(experiment: str, pattern: str, work_us: float, connections: int) -> pd.DataFrame:
    """The experiment's measured points of ``pattern`` at this work and connection count, summarised per
    notifier and hardware class (each with its own interval: never averaged across notifiers)."""
    with common.store().connect() as conn:
        pts = point_queries.measured(conn, data.resolve_experiment(conn, experiment))
    sel = pts[(pts["pattern"] == pattern) & (pts["work_us"] == work_us) & (pts["connections"] == connections)]
    out = summary.summarise(sel) if not sel.empty else sel
    return out[out["n"] > 0] if not out.empty else out


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
    except data.DataUnavailable as exc:
        return [], [], [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return [], [], [], [], common.not_found_panel(exc, "experiment")
    pts = pts[pts["point_id"].isin(preds["point_id"])] if not preds.empty else pts.iloc[0:0]
    table = sweep_figs.sweep_table(pts, preds)
    t = common.table_props(table)
    s = common.table_props(sweep_figs.error_summary(table))
    status = None if not preds.empty else common.message(f"{exp.label} has no stored predictions.")
    return t["data"], t["columns"], s["data"], s["columns"], status
