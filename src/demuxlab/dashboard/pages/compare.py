"""Compare: two to four sides (experiments, optionally narrowed to a host pair or a server build) on the
same axes; every side after A with its ratio to A and Welch's test of the difference."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data, fields
from demuxlab.dashboard.data import points as queries
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures import compare as figs

dash.register_page(__name__, path="/compare", name="Compare", title="demuxlab · compare")

SIDES = figs.SIDES
KEYS = tuple(k for s in SIDES for k in (s, f"{s}_pair", f"{s}_build"))
OPTIONAL = SIDES[2:]  # C and D: shown when chosen


def _side(
    side: str, options: list[dict[str, str]], experiment: str | None, pair: str, build: str
) -> html.Div:
    optional = side in OPTIONAL
    return html.Div(
        [
            common.control(
                f"{side.upper()}: experiment",
                dcc.Dropdown(
                    id=f"compare-{side}-experiment",
                    options=options,
                    value=experiment,
                    clearable=optional,
                    placeholder="none (add a side)" if optional else None,
                ),
                wide=True,
            ),
            common.control(
                f"{side.upper()}: host pair",
                dcc.Dropdown(
                    id=f"compare-{side}-pair",
                    options=[pair] if pair else [],
                    value=pair or None,
                    placeholder="any",
                ),
            ),
            common.control(
                f"{side.upper()}: server build",
                dcc.Dropdown(
                    id=f"compare-{side}-build",
                    options=[{"label": base.short_build(build), "value": build}] if build else [],
                    value=build or None,
                    placeholder="any",
                ),
                wide=True,
            ),
        ],
        className="dlx-controls",
    )


@common.page_layout(*KEYS, "x")
def layout(x: str = "threads", **query: str) -> Any:
    with common.store().connect() as conn:
        options = data.experiment_options(conn)
        if not options:
            return [html.H1("Compare"), common.empty_database_panel()]
        picked = {k: v for k, v in query.items() if v}
        if not picked.get("a") and not picked.get("b"):
            picked = opening(conn)
        chosen = {s: data.resolve_experiment(conn, picked[s]).value if picked.get(s) else None for s in SIDES}
    return [
        html.H1("Compare"),
        html.P(
            "Up to four sides, each an experiment optionally narrowed to one host pair or one server build "
            "(binary hash or image digest); points are matched on their parameters. A is the baseline: every "
            "other side gets its ratio to A and Welch's t-test against A (filled marker: they differ, "
            "p < 0.05), the decision the Ranking and History make too. The same experiment with two pairs "
            "or two builds compares machines or code. The page opens on the newest experiment with two "
            "server builds or two spec versions (they share its points), else the two newest experiments.",
            className="dlx-muted",
        ),
        *[
            _side(s, options, chosen[s], picked.get(f"{s}_pair", ""), picked.get(f"{s}_build", ""))
            for s in SIDES
        ],
        common.control(
            "x axis",
            dcc.Dropdown(
                id="compare-x",
                options=[{"label": v, "value": k} for k, v in fields.AXES.items()],
                value=x if x in fields.AXES else "threads",
                clearable=False,
            ),
        ),
        html.Div(id="compare-status"),
        common.figure_block("compare-graph"),
        common.table_block("compare-table"),
        common.url_state_store("compare"),
    ]


def opening(conn: Any) -> dict[str, str]:
    """The two sides the page opens on when the address names none, never one selection twice: of the
    experiments newest first (up to :data:`OPENING_LOOKS`), the first with two server builds, its first
    against its latest, or with two spec versions, its previous against its latest (two sides of one
    experiment share its points); else the experiment made before the newest against it (they may share
    none: the page says so); else the newest alone (the page then says what to choose)."""
    newest = data.newest_experiments(conn, OPENING_LOOKS)
    if not newest:
        return {}
    options = [o["value"] for o in data.experiment_options(conn)]
    seen: set[str] = set()
    for exp in newest:
        if exp.name in seen:
            continue
        seen.add(exp.name)
        builds = queries.builds_by_time(conn, exp)
        if len(builds) >= 2:
            return {"a": exp.value, "a_build": builds[0], "b": exp.value, "b_build": builds[-1]}
        versions = [v for v in options if v.split("@")[0] == exp.name]
        if len(versions) >= 2:
            return {"a": versions[1], "b": versions[0]}
    if len(newest) >= 2:
        return {"a": newest[1].value, "b": newest[0].value}
    return {"a": newest[0].value}


#: How many experiments, newest first, the opening looks through for one with two builds or versions.
OPENING_LOOKS = 20


common.url_sync(
    "compare",
    [
        *[(f"compare-{s}-experiment", "value", s) for s in SIDES],
        *[(f"compare-{s}-pair", "value", f"{s}_pair") for s in SIDES],
        *[(f"compare-{s}-build", "value", f"{s}_build") for s in SIDES],
        ("compare-x", "value", "x"),
    ],
)


def _choices(side: str) -> None:
    @callback(
        Output(f"compare-{side}-pair", "options"),
        Output(f"compare-{side}-build", "options"),
        Input(f"compare-{side}-experiment", "value"),
    )
    def choices(experiment: str | None) -> tuple[Any, Any]:
        if not experiment:
            return [], []
        try:
            with common.store().connect() as conn:
                pairs, builds = queries.host_pairs_and_builds(conn, data.resolve_experiment(conn, experiment))
        except (data.DataUnavailable, data.NotFound):
            return [], []
        return pairs, [{"label": base.short_build(b), "value": b} for b in builds]


for _s in SIDES:
    _choices(_s)


@callback(
    Output("compare-graph", "figure"),
    Output("compare-table", "data"),
    Output("compare-table", "columns"),
    Output("compare-status", "children"),
    *[Input(f"compare-{s}-{part}", "value") for s in SIDES for part in ("experiment", "pair", "build")],
    Input("compare-x", "value"),
)
def update(*values: Any) -> tuple[Any, ...]:
    *picked, x = values
    x = x if x in fields.AXES else "threads"
    sides: list[tuple[str, str, str | None, str | None]] = []
    for i, s in enumerate(SIDES):
        experiment, pair, build = picked[3 * i : 3 * i + 3]
        if experiment:
            sides.append((s, experiment, pair, build))
    frames: list[pd.DataFrame] = []
    labels: list[str] = []
    shared: list[str] = []
    try:
        with common.store().connect() as conn:
            for s, experiment, pair, build in sides:
                exp = data.resolve_experiment(conn, experiment)
                frames.append(queries.measured(conn, exp, host_pair=pair, build=build))
                labels.append(figs.side_label(s, experiment, pair, build))
                shared += queries.shared_machine(conn, exp)
    except data.DataUnavailable as exc:
        return base.empty_figure("database unavailable"), [], [], common.unavailable_panel(exc)
    except data.NotFound as exc:
        return base.empty_figure(str(exc)), [], [], common.not_found_panel(exc, "experiment")
    if len(frames) < 2:
        msg = (
            "Compare needs a second side: choose B, another experiment or this one narrowed to another host "
            "pair or server build."
        )
        return base.empty_figure(msg), [], [], common.message(msg, "warning", id="compare-choose")
    comparison = figs.analyse(frames)
    table = comparison.table
    t = common.table_props(table)
    status = None
    if table.empty:
        status = common.message("The sides share no point with ok runs (same parameters).", "warning")
    elif len({lab.split(": ", 1)[1] for lab in labels}) < len(labels):
        status = common.message("Two sides are the same selection: choose another experiment, pair or build.")
    banner = common.shared_machine_panel(sorted(set(shared)))
    return figs.compare_figure(comparison, labels, x=x), t["data"], t["columns"], [banner, status]
