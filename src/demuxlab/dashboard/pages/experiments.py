"""Experiments: every experiment with its state, runs ok / failed / remaining and the points the server
cut; one experiment's live progress. The page polls only while something is running."""

from __future__ import annotations

import datetime as dt
from typing import Any

import dash
import pandas as pd
from dash import Input, Output, State, callback, dcc, html

from demuxlab.dashboard import common, data
from demuxlab.dashboard.data import experiments as queries
from demuxlab.dashboard.data import points as points_queries
from demuxlab.dashboard.data.plans import plan
from demuxlab.dashboard.figures import experiments as figs
from demuxlab.dashboard.figures.base import short_build

dash.register_page(__name__, path="/", name="Experiments", title="demuxlab · experiments")

LIVE_TEXT = "live: refreshes by itself while a sweep is running"
IDLE_TEXT = "not refreshing: no experiment is running (reload the page to look again)"


@common.page_layout("experiment")
def layout(experiment: str | None = None) -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if experiment:
            experiment = data.resolve_experiment(conn, experiment).value
    if not options:
        return [html.H1("Experiments"), common.empty_database_panel()]
    return [
        html.H1("Experiments"),
        html.Div(
            [
                html.Span(className="dlx-live", id="experiments-live-dot"),
                html.Span(LIVE_TEXT, id="experiments-live"),
            ],
            className="dlx-muted",
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


def _refresh() -> dcc.Interval:
    return dcc.Interval(id="experiments-refresh", interval=common.REFRESH_MS)


common.url_sync("experiments", [("experiments-choice", "value", "experiment")])


def statuses(exps: pd.DataFrame, now: dt.datetime) -> list[figs.Status]:
    out = []
    for e in exps.to_dict("records"):
        p = plan(e["name"], e["spec_sha256"], e["spec_text"])
        out.append(
            figs.status(
                ok=int(e["ok"]),
                failed=int(e["failed"]),
                planned=p.runs,
                exact=p.exact,
                planned_note=p.note,
                cut_runs=p.cut_runs,
                first_started=_ts(e["first_started"]),
                last_finished=_ts(e["last_finished"]),
                wall_p90_s=None if pd.isna(e["wall_p90_s"]) else float(e["wall_p90_s"]),
                now=now,
            )
        )
    return out


def _ts(v: Any) -> dt.datetime | None:
    return None if v is None or pd.isna(v) else pd.Timestamp(v).to_pydatetime()


def overview_frame(conn: Any, now: dt.datetime | None = None) -> tuple[pd.DataFrame, bool]:
    """The experiments table, and whether any experiment is running (or about to)."""
    exps = queries.experiments(conn)
    now = now or dt.datetime.now(dt.UTC)
    rows = []
    sts = statuses(exps, now)
    for e, st in zip(exps.to_dict("records"), sts, strict=True):
        ref = e["name"] if e["newest"] else f"{e['name']}@{e['spec_sha256'][:8]}"
        rows.append(
            {
                "experiment": f"[{e['name']}](/?experiment={ref})",
                "version": e["spec_sha256"][:8],
                "state": st.state,
                "why": st.why,
                "ok": int(e["ok"]),
                "failed": int(e["failed"]),
                "remaining": st.remaining,
                "cut": figs.cut_text(len(plan(e["name"], e["spec_sha256"], e["spec_text"]).cut), st.cut_runs),
                "planned": st.planned,
                "host_pairs": ", ".join(e["pairs"] or []),
                "started": e["first_started"],
                "last_run": e["last_finished"],
                "git_rev": e["git_rev"],
                "open": f"[sweep](/sweep?experiment={ref}) · [ranking](/ranking?experiment={ref}) · "
                f"[history](/history?experiment={e['name']}) · [model](/model?experiment={ref}) · "
                f"[claims](/claims?experiment={ref})",
            }
        )
    return pd.DataFrame(rows), any(st.live for st in sts)


@callback(
    Output("experiments-table", "data"),
    Output("experiments-table", "columns"),
    Output("experiments-detail", "children"),
    Output("experiments-refresh", "disabled"),
    Output("experiments-live", "children"),
    Output("experiments-live-dot", "className"),
    Input("experiments-refresh", "n_intervals"),
    Input("experiments-choice", "value"),
)
def refresh(_n: int | None, experiment: str | None) -> tuple[Any, ...]:
    nothing = dash.no_update
    try:
        with common.store().connect() as conn:
            table, live = overview_frame(conn)
            props = common.table_props(table, markdown=("experiment", "open"))
            detail = (
                _detail(conn, experiment)
                if experiment
                else common.message(
                    "Choose an experiment (or click its name) for its live progress, failures, runs, spec.",
                    id="experiments-hint",
                )
            )
    except data.DataUnavailable as exc:
        return nothing, nothing, common.unavailable_panel(exc), nothing, nothing, nothing
    except data.NotFound as exc:
        return nothing, nothing, common.not_found_panel(exc, "experiment"), nothing, nothing, nothing
    return (
        props["data"],
        props["columns"],
        detail,
        not live,
        LIVE_TEXT if live else IDLE_TEXT,
        "dlx-live" if live else "dlx-idle",
    )


def _detail(conn: Any, experiment: str) -> Any:
    """One experiment's progress: its state, counts and pace, the latest runs by design, what the server
    cuts and the failures."""
    exp = data.resolve_experiment(conn, experiment)
    prog = queries.progress(conn, exp)
    p = prog["plan"]
    st = figs.status(
        ok=prog["ok"],
        failed=prog["failed"],
        planned=p.runs,
        exact=p.exact,
        planned_note=p.note,
        cut_runs=p.cut_runs,
        first_started=prog["first_started"],
        last_finished=prog["last_finished"],
        wall_p90_s=prog["wall_p90_s"],
        now=dt.datetime.now(dt.UTC),
    )
    notes: list[Any] = [html.P([html.B(f"{st.state}: "), st.why], id="experiments-why")]
    shared = common.shared_machine_panel(points_queries.shared_machine(conn, exp))
    if shared is not None:
        notes.append(shared)
    if p.note:
        notes.append(html.P(p.note, className="dlx-muted", id="experiments-plan-note"))
    return [
        html.H2(f"{exp.name} @{exp.spec_sha256[:8]}", id="experiments-title"),
        html.Div(_cards(st, prog, p), className="dlx-cards"),
        *notes,
        html.Div(
            _bar(st, prog),
            className="dlx-progress",
            title="ok (green), failed (orange) of the runs this server plans (points it cuts not counted)",
        ),
        # No loading overlay: the live refresh replaces this block every few seconds.
        common.figure_block("experiments-latest-graph", figs.progress_figure(prog["latest"]), loading=False),
        html.Div(
            [
                html.H2("Latest run of each design"),
                common.table_block(
                    "experiments-per-design", figs.latest_per_design(prog["per_design"]), markdown=("run",)
                ),
            ],
            className="dlx-section",
        ),
        _cut_section(p),
        html.Div(
            [
                html.H2("Failures by reason"),
                common.table_block("experiments-reasons", prog["reasons"])
                if not prog["reasons"].empty
                else common.message("no failed runs"),
            ],
            className="dlx-section",
        ),
    ]


def _cards(st: figs.Status, prog: dict[str, Any], p: Any) -> list[html.Div]:
    at_most = "" if p.exact else "≤ "
    return [
        _card("state", st.state, "experiments-state", st.state.replace(" ", "-")),
        _card("runs done", f"{st.done}" + (f" / {st.planned}" if st.planned else ""), "experiments-done"),
        _card("ok", prog["ok"], "experiments-ok", "ok"),
        _card("failed", prog["failed"], "experiments-failed", "failed"),
        _card(
            "remaining",
            "?" if st.remaining is None else f"{at_most}{st.remaining}",
            "experiments-remaining",
        ),
        _card("cut by the server", figs.cut_text(len(p.cut), st.cut_runs), "experiments-cut"),
        _card("designs measured", len(prog["per_design"]), "experiments-designs"),
        _card("estimated finish", st.eta_text, "experiments-eta"),
    ]


def _bar(st: figs.Status, prog: dict[str, Any]) -> list[Any]:
    if not st.planned:
        return []
    return [
        html.Div(className="ok", style={"width": f"{100 * prog['ok'] / st.planned:.2f}%"}),
        html.Div(className="failed", style={"width": f"{100 * prog['failed'] / st.planned:.2f}%"}),
    ]


def _cut_section(p: Any) -> html.Div:
    if not p.cut:
        return html.Div([], className="dlx-section")
    cut = pd.DataFrame([{"point": c.point_key, "runs": c.runs, "why": c.reason} for c in p.cut])
    return html.Div(
        [
            html.H2(f"Cut by the server: {figs.cut_text(len(p.cut), p.cut_runs)}, not run, not remaining"),
            html.P(
                "Points the spec names that this server's thread ranges exclude (demux-server --list): "
                "the workflow skips them.",
                className="dlx-muted",
            ),
            common.table_block("experiments-cut-table", cut, page_size=10),
        ],
        className="dlx-section",
    )


def _runs(conn: Any, exp: data.ExperimentRef) -> Any:
    runs = queries.runs_of(conn, exp)
    runs["run_id"] = runs["run_id"].map(common.link_run)
    return runs


@callback(Output("experiments-static", "children"), Input("experiments-choice", "value"))
def static(experiment: str | None) -> Any:
    """What does not change while runs come in (the spec), and the runs table, whose data the live
    callback below refreshes without rebuilding it (its sorting, filter and page stay)."""
    if not experiment:
        return None

    def body() -> Any:
        from demuxlab.dashboard.data import points

        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            info = data.experiment_detail(conn, exp)
            pairs, builds = points.host_pairs_and_builds(conn, exp)
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
                            ("server builds", ", ".join(short_build(b) for b in builds)),
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
