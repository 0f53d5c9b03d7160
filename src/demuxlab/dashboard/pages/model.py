"""Model: calibrated rates next to the paper's with their provenance, model vs measured with errors, and
an interactive what-if (fluid at once, SSA on request) through :mod:`demuxlab.ctmc`."""

from __future__ import annotations

import functools
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, callback, ctx, dcc, html

from demuxlab.dashboard import common, data, figures
from demuxlab.errors import DemuxlabError

dash.register_page(__name__, path="/model", name="Model", title="demuxlab · model")

RATE_HELP = {
    "r_l": "lock",
    "r_p": "queue put",
    "r_g": "queue get",
    "r_t": "hand-off",
    "r_i": "recv (in)",
    "r_o": "send (out)",
    "r_a": "re-arm",
    "r_e": "notifier call",
}
MAX_POINTS = 32
MAX_THREADS = 128


def _paper() -> dict[str, dict[str, float]]:
    from demuxlab.ctmc.rates import PATTERNS, paper_rates

    return {p: paper_rates(p).as_dict() for p in PATTERNS}


def layout(
    experiment: str | None = None,
    pattern: str = "lf",
    rates: str = "paper",
    threads: str = "1-16",
    work: str = "10",
    connections: str = "512",
    **query: Any,
) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            options = data.experiment_options(conn)
            cals = data.calibrations(conn)
            if experiment:
                data.resolve_experiment(conn, experiment)
            chosen = experiment or (options[0]["value"] if options else None)
        cal_options = [{"label": "paper's rates (seed 001)", "value": "paper"}] + [
            {
                "label": f"calibration #{c.id!s}: {c.pattern!s}/{c.notifier!s} ({c.experiment or '?'!s})",
                "value": str(c.id),
            }
            for c in cals.itertuples()
        ]
        provenance = cals.drop(columns=["rates"]).rename(columns={"hostname": "host"})
        rate_rows = figures.rates_table(cals, _paper())
        rate_inputs = [
            html.Div(
                [
                    html.Label(f"{k} ({RATE_HELP[k]}) µs"),
                    dcc.Input(
                        id=f"model-{k}",
                        type="number",
                        min=0,
                        step="any",
                        value=_float(query.get(k)),
                        placeholder="as chosen",
                        debounce=True,
                        style={"width": "110px"},
                    ),
                ],
                className="dlx-control",
                style={"minWidth": "120px"},
            )
            for k in RATE_HELP
        ]
        return [
            html.H1("Model"),
            html.Div(
                [
                    html.H2("Calibrations"),
                    html.P(
                        "Time per operation (1/rate) fitted from instrumented runs, next to the paper's.",
                        className="dlx-muted",
                    ),
                    common.figure_block("model-rates-graph", figures.rates_figure(rate_rows)),
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
                        "answers at once; the SSA (stochastic simulation, 95 % CI) runs on request.",
                        className="dlx-muted",
                    ),
                    html.Div(
                        [
                            html.Div(
                                [
                                    html.Label("pattern"),
                                    dcc.Dropdown(
                                        id="model-pattern",
                                        options=["hsha", "lf"],
                                        value=pattern if pattern in ("hsha", "lf") else "lf",
                                        clearable=False,
                                    ),
                                ],
                                className="dlx-control",
                            ),
                            html.Div(
                                [
                                    html.Label("rates"),
                                    dcc.Dropdown(
                                        id="model-rates-choice",
                                        options=cal_options,
                                        value=rates
                                        if rates in {o["value"] for o in cal_options}
                                        else "paper",
                                        clearable=False,
                                    ),
                                ],
                                className="dlx-control dlx-wide",
                            ),
                            html.Div(
                                [
                                    html.Label("threads"),
                                    dcc.Input(
                                        id="model-threads",
                                        value=threads,
                                        debounce=True,
                                        style={"width": "90px"},
                                    ),
                                ],
                                className="dlx-control",
                            ),
                            html.Div(
                                [
                                    html.Label("work (µs)"),
                                    dcc.Input(
                                        id="model-work",
                                        type="number",
                                        min=0,
                                        step="any",
                                        value=_float(work) or 10,
                                        debounce=True,
                                        style={"width": "90px"},
                                    ),
                                ],
                                className="dlx-control",
                            ),
                            html.Div(
                                [
                                    html.Label("connections"),
                                    dcc.Input(
                                        id="model-connections",
                                        type="number",
                                        min=1,
                                        step=1,
                                        value=int(_float(connections) or 512),
                                        debounce=True,
                                        style={"width": "90px"},
                                    ),
                                ],
                                className="dlx-control",
                            ),
                            html.Div(
                                [
                                    html.Label("measured (overlay)"),
                                    dcc.Dropdown(
                                        id="model-experiment",
                                        options=options,
                                        value=chosen,
                                        placeholder="none",
                                    ),
                                ],
                                className="dlx-control dlx-wide",
                            ),
                            html.Button("Run SSA", id="model-ssa", className="dlx-btn"),
                        ],
                        className="dlx-controls",
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

    return common.guard("experiment", body, hint=html.P(dcc.Link("all experiments", href="/")))


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f > 0 else None


common.url_sync(
    "model",
    [
        ("model-experiment", "value", "experiment"),
        ("model-pattern", "value", "pattern"),
        ("model-rates-choice", "value", "rates"),
        ("model-threads", "value", "threads"),
        ("model-work", "value", "work"),
        ("model-connections", "value", "connections"),
        *[(f"model-{k}", "value", k) for k in RATE_HELP],
    ],
)


def base_rates(choice: str, pattern: str) -> tuple[str, Any]:
    """(pattern, Rates) for the choice: the paper's for ``pattern``, or a calibration's (its own pattern)."""
    from demuxlab.ctmc.rates import Rates, paper_rates

    if choice in (None, "", "paper"):
        return pattern, paper_rates(pattern)
    with common.store().connect() as conn:
        row = data.calibration_rates(conn, int(choice))
    if row is None:
        raise data.NotFound(f"no calibration {choice}")
    return str(row["pattern"]), Rates.from_dict(dict(row["rates"]), where=f"calibration {choice}")


def override(rates: Any, overrides: dict[str, float | None]) -> Any:
    """The rates with each given time per operation (µs) replacing its rate (1/µs)."""
    from dataclasses import replace

    changes = {k: 1.0 / v for k, v in overrides.items() if v}
    if not changes:
        return rates
    src = dict(rates.source)
    src.update({k: "what-if" for k in changes})
    return replace(rates, **changes, source=src)


@functools.lru_cache(maxsize=4096)
def _predict(
    pattern: str, rates: tuple[float, ...], threads: int, work_us: float, connections: int, method: str
) -> tuple[float, float | None]:
    """One prediction; cached, since the solvers are deterministic (the SSA's seed is fixed) and the
    what-if asks the same points again as the user moves one control."""
    from demuxlab.ctmc.predict import predict
    from demuxlab.ctmc.rates import RATE_FIELDS, Rates

    r = Rates.from_dict(dict(zip(RATE_FIELDS, rates, strict=True)), where="what-if rates")
    p = predict(pattern, threads, work_us, method=method, connections=connections, rates=r, rel_ci=0.03)
    return p.throughput_msgs_per_s, p.ci_halfwidth_rel


def predict_curve(
    pattern: str, rates: Any, threads: list[int], work_us: float, connections: int, method: str
) -> pd.DataFrame:
    from demuxlab.ctmc.rates import RATE_FIELDS, min_threads

    key = tuple(float(getattr(rates, k)) for k in RATE_FIELDS)
    rows = []
    for t in threads:
        if t < min_threads(pattern):
            continue
        thr, ci = _predict(pattern, key, t, float(work_us), int(connections), method)
        rows.append(
            {
                "threads": t,
                "throughput_msgs_per_s": thr,
                "ci_halfwidth_rel": ci,
            }
        )
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
    *[Input(f"model-{k}", "value") for k in RATE_HELP],
)
def whatif(
    pattern: str,
    choice: str,
    threads_text: str,
    work: float | None,
    connections: int | None,
    experiment: str | None,
    _ssa: int | None,
    *overrides: float | None,
) -> tuple[Any, ...]:
    from demuxlab.ctmc.params import parse_int_list

    run_ssa = ctx.triggered_id == "model-ssa"
    try:
        threads = parse_int_list(str(threads_text or ""), "threads")
        if len(threads) > MAX_POINTS or max(threads) > MAX_THREADS:
            raise DemuxlabError(
                f"threads: at most {MAX_POINTS} values up to {MAX_THREADS}, got {threads_text!r}"
            )
        work_us = float(work or 0)
        if not work_us > 0:
            raise DemuxlabError(f"work: must be positive µs, got {work!r}")
        conns = int(connections or 0)
        if conns < 1:
            raise DemuxlabError(f"connections: must be a positive integer, got {connections!r}")
        pattern, rates = base_rates(choice, pattern)
        rates = override(rates, dict(zip(RATE_HELP, overrides, strict=True)))
        fluid = predict_curve(pattern, rates, threads, work_us, conns, "fluid")
        ssa = predict_curve(pattern, rates, threads, work_us, conns, "ssa") if run_ssa else None
        measured = _measured(experiment, pattern, work_us, conns) if experiment else None
    except DemuxlabError as exc:
        return figures.empty_figure(exc.message), [], [], common.message(exc.message, "warning")
    except data.DataUnavailable as exc:
        return figures.empty_figure("database unavailable"), [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return figures.empty_figure(str(exc)), [], [], common.not_found_panel(exc, "calibration")
    table = fluid.rename(columns={"throughput_msgs_per_s": "fluid_msgs_per_s"}).drop(
        columns="ci_halfwidth_rel"
    )
    if ssa is not None:
        table = table.merge(
            ssa.rename(columns={"throughput_msgs_per_s": "ssa_msgs_per_s", "ci_halfwidth_rel": "ssa_ci_rel"}),
            on="threads",
            how="left",
        )
    t = common.table_props(table.round(4))
    label = "paper's rates" if choice in (None, "", "paper") else f"calibration #{choice}"
    fig = figures.whatif_figure(
        fluid, ssa, measured, title=f"What if: {pattern}, {label}, work {work_us:g} µs, {conns} connections"
    )
    note = common.message(
        "SSA done." if run_ssa else "Fluid shown; press “Run SSA” for the stochastic simulation with its CI.",
        id="model-whatif-note",
    )
    return fig, t["data"], t["columns"], note


def _measured(experiment: str, pattern: str, work_us: float, connections: int) -> pd.DataFrame:
    with common.store().connect() as conn:
        pts = data.sweep_points(conn, data.resolve_experiment(conn, experiment))
    sel = pts[(pts["pattern"] == pattern) & (pts["work_us"] == work_us) & (pts["connections"] == connections)]
    return pd.DataFrame(sel.groupby("threads", as_index=False)["mean"].mean())


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
            pts = data.sweep_points(conn, exp)
            preds = data.predictions(conn, exp)
    except data.DataUnavailable as exc:
        return [], [], [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return [], [], [], [], common.not_found_panel(exc, "experiment")
    pts = pts[pts["pattern"].isin(["hsha", "lf"])]
    table = figures.sweep_table(pts, preds)
    t = common.table_props(table)
    s = common.table_props(figures.error_summary(table))
    status = None if not preds.empty else common.message(f"{exp.label} has no stored predictions.")
    return t["data"], t["columns"], s["data"], s["columns"], status
