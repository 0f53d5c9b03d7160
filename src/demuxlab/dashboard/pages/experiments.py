"""Experiments: every experiment with its runs ok / failed / remaining, and the live progress of one."""

from __future__ import annotations

import datetime as dt
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, callback, dcc, html

from demuxlab.dashboard import common, data, figures

dash.register_page(__name__, path="/", name="Experiments", title="demuxlab · experiments")

RUNNING_WITHIN = dt.timedelta(minutes=15)


def layout(experiment: str | None = None, **_: Any) -> Any:
    def body() -> Any:
        with common.store().connect() as conn:
            options = data.experiment_options(conn)
        if not options:
            return [html.H1("Experiments"), common.empty_database_panel(), _refresh()]
        return [
            html.H1("Experiments"),
            html.Div(
                [
                    html.Span(className="dlx-live"),
                    html.Span("live: refreshes by itself", className="dlx-muted"),
                ]
            ),
            common.table_block("experiments-table", page_size=20, markdown=("experiment", "open")),
            html.Div(
                [
                    html.Div(
                        [
                            html.Label("Experiment", htmlFor="experiments-choice"),
                            dcc.Dropdown(
                                id="experiments-choice",
                                options=options,
                                value=experiment,
                                placeholder="choose one for its progress, runs and spec",
                            ),
                        ],
                        className="dlx-control dlx-wide",
                    ),
                ],
                className="dlx-controls",
            ),
            html.Div(id="experiments-detail"),
            html.Div(id="experiments-static"),
            common.url_state_store("experiments"),
            _refresh(),
        ]

    return common.guard("experiment", body)


def _refresh() -> dcc.Interval:
    return dcc.Interval(id="experiments-refresh", interval=common.REFRESH_MS)


common.url_sync("experiments", [("experiments-choice", "value", "experiment")])


def overview_frame(conn: Any, now: dt.datetime | None = None) -> pd.DataFrame:
    """The experiments table: state (running / complete / stopped) from the planned runs and activity."""
    exps = data.experiments(conn)
    now = now or dt.datetime.now(dt.UTC)
    rows = []
    for _, e in exps.iterrows():
        planned = data.planned_runs(e["name"], e["spec_sha256"], e["spec_text"])
        done = int(e["ok"]) + int(e["failed"])
        remaining = None if planned is None else max(planned - done, 0)
        last = e["last_ingested"]
        if remaining == 0:
            state = "complete"
        elif last is not None and not pd.isna(last) and now - last.to_pydatetime() < RUNNING_WITHIN:
            state = "running"
        elif done == 0:
            state = "not started"
        else:
            state = "stopped" if remaining else "unknown"
        ref = e["name"] if _is_newest(exps, e) else f"{e['name']}@{e['spec_sha256'][:8]}"
        rows.append(
            {
                "experiment": f"[{e['name']}](/?experiment={ref})",
                "version": e["spec_sha256"][:8],
                "state": state,
                "ok": int(e["ok"]),
                "failed": int(e["failed"]),
                "remaining": remaining,
                "planned": planned,
                "host_pairs": ", ".join(e["pairs"] or []),
                "started": e["first_started"],
                "last_run": e["last_finished"],
                "git_rev": e["git_rev"],
                "open": f"[sweep](/sweep?experiment={ref}) · [model](/model?experiment={ref}) · "
                f"[claims](/claims?experiment={ref})",
            }
        )
    return pd.DataFrame(rows)


def _is_newest(exps: pd.DataFrame, e: pd.Series) -> bool:
    same = exps[exps["name"] == e["name"]]
    return bool(same.iloc[0]["id"] == e["id"])


@callback(
    Output("experiments-table", "data"),
    Output("experiments-table", "columns"),
    Output("experiments-detail", "children"),
    Input("experiments-refresh", "n_intervals"),
    Input("experiments-choice", "value"),
)
def refresh(_n: int | None, experiment: str | None) -> tuple[Any, Any, Any]:
    try:
        with common.store().connect() as conn:
            props = common.table_props(overview_frame(conn), markdown=("experiment", "open"))
            detail = (
                _detail(conn, experiment)
                if experiment
                else common.message(
                    "Choose an experiment (or click its name) for its live progress, failures, runs, spec.",
                    id="experiments-hint",
                )
            )
    except data.DataUnavailable as exc:
        return dash.no_update, dash.no_update, common.unavailable_panel(exc)
    except data.NotFound as exc:
        return dash.no_update, dash.no_update, common.not_found_panel(exc, "experiment")
    return props["data"], props["columns"], detail


def _detail(conn: Any, experiment: str) -> Any:
    exp = data.resolve_experiment(conn, experiment)
    prog = data.progress(conn, exp)
    latest = prog["latest"]
    last_ok = latest[latest["status"] == "ok"]
    latest_thr = None if last_ok.empty else float(last_ok.iloc[0]["throughput_msgs_per_s"])
    planned = prog["planned"]
    bar: list[Any] = []
    if planned:
        bar = [
            html.Div(className="ok", style={"width": f"{100 * prog['ok'] / planned:.2f}%"}),
            html.Div(className="failed", style={"width": f"{100 * prog['failed'] / planned:.2f}%"}),
        ]
    cards = [
        _card("runs done", f"{prog['done']}" + (f" / {planned}" if planned else ""), "experiments-done"),
        _card("ok", prog["ok"], "experiments-ok", "ok"),
        _card("failed", prog["failed"], "experiments-failed", "failed"),
        _card("remaining", "?" if prog["remaining"] is None else prog["remaining"], "experiments-remaining"),
        _card(
            "latest throughput",
            "—" if latest_thr is None else f"{latest_thr:,.0f} msg/s",
            "experiments-latest",
        ),
        _card(
            "estimated finish",
            "done" if prog["remaining"] == 0 else figures.humanize_seconds(prog["eta_s"]),
            "experiments-eta",
        ),
    ]
    reasons = prog["reasons"]
    return [
        html.H2(f"{exp.name} @{exp.spec_sha256[:8]}", id="experiments-title"),
        html.Div(cards, className="dlx-cards"),
        html.Div(bar, className="dlx-progress", title="ok (green), failed (orange) of the planned runs"),
        # No loading overlay: the live refresh replaces this block every few seconds.
        common.figure_block("experiments-latest-graph", figures.progress_figure(latest), loading=False),
        html.Div(
            [
                html.H2("Failures by reason"),
                common.table_block("experiments-reasons", reasons)
                if not reasons.empty
                else common.message("no failed runs"),
            ],
            className="dlx-section",
        ),
    ]


def _runs(conn: Any, exp: data.ExperimentRef) -> Any:
    runs = data.runs_of(conn, exp)
    runs["run_id"] = runs["run_id"].map(common.link_run)
    return runs


@callback(Output("experiments-static", "children"), Input("experiments-choice", "value"))
def static(experiment: str | None) -> Any:
    """What does not change while runs come in (the spec), and the runs table, whose data the live
    callback below refreshes without rebuilding it (its sorting, filter and page stay)."""
    if not experiment:
        return None

    def body() -> Any:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            info = data.experiment_detail(conn, exp)
            pairs, builds = data.host_pairs_and_builds(conn, exp)
            runs = _runs(conn, exp)
        return [
            html.Div(
                [
                    html.H2("Runs"),
                    html.P("failed first, then newest (200); the id opens the run", className="dlx-muted"),
                    common.table_block("experiments-runs", runs, markdown=("run_id",)),
                ],
                className="dlx-section",
            ),
            html.Div(
                [
                    html.H2("Spec and provenance"),
                    common.facts_list(
                        [
                            ("spec sha256", info["spec_sha256"]),
                            ("git revision", info["git_rev"]),
                            ("first ingested", info["created_at"]),
                            ("host pairs", ", ".join(pairs)),
                            ("server builds", ", ".join(builds)),
                        ]
                    ),
                    html.Pre(info["spec_text"] or "(spec text not stored)", className="dlx-spec"),
                ],
                className="dlx-section",
            ),
        ]

    return common.guard("experiment", body)


@callback(
    Output("experiments-runs", "data"),
    Input("experiments-refresh", "n_intervals"),
    State("experiments-choice", "value"),
    prevent_initial_call=True,
)
def live_runs(_n: int | None, experiment: str | None) -> Any:
    if not experiment:
        return dash.no_update
    try:
        with common.store().connect() as conn:
            runs = _runs(conn, data.resolve_experiment(conn, experiment))
    except (data.DataUnavailable, data.NotFound):
        return dash.no_update
    return common.table_props(runs, markdown=("run_id",))["data"]


def _card(label: str, value: Any, id_: str, kind: str = "") -> html.Div:
    return html.Div(
        [html.Div(str(value), className="v", id=id_), html.Div(label, className="k")],
        className=f"dlx-card {kind}",
    )
