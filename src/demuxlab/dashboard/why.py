"""The "why" in the operating system's terms (issue 44), as the Run and Sweep pages show it: the Run page's
panel (what a message cost each side, broken down; the run's validity checks with their verdicts and
reasons) and the Sweep's cost axis (one cost per message against the sweep's x axis, its own controls and
graph under the throughput). Each page adds one call (:func:`run_panel`, :func:`sweep_block`); the queries
are :mod:`demuxlab.dashboard.data.costs`, the builders :mod:`demuxlab.dashboard.figures.costs`."""

from __future__ import annotations

from typing import Any

from dash import Input, Output, callback, dcc, html

from demuxlab.dashboard import common, data, fields
from demuxlab.dashboard.data import costs as queries
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.figures import costs as figs

DEFAULT_METRIC = "syscalls"


def run_panel(run_id: str) -> html.Div:
    """The Run page's "why": the validity verdict in one line, the checks, the costs per message (a
    breakdown figure and the full table, each cost per side or why the host could not say)."""
    with common.store().connect() as conn:
        costs = queries.run_costs(conn, run_id)
        checks = queries.run_checks(conn, run_id)
        doc, throughput = queries.run_threads(conn, run_id)
    threads = figs.thread_table(doc, throughput)
    line = figs.verdict_line(checks)
    flagged = line.startswith("FLAGGED")
    return html.Div(
        [
            html.H2("Why: the run's validity and costs in the kernel's terms"),
            common.message(line, "error" if flagged else "info", id="run-why-verdict"),
            common.table_block("run-why-checks", figs.check_table(checks), page_size=12),
            common.figure_block("run-why-graph", figs.breakdown_figure(costs), loading=False),
            html.P(
                "Per message: the side's counter over the measure phase divided by the messages of that "
                "phase (the run's throughput × the interval between the side's two readings). The CPUs' "
                "times are of every process on the side's CPUs; the process's are its own. The TCP counts "
                "are the side's network namespace's: where server and client share one (a native run on one "
                "host), the two columns count the same packets.",
                className="dlx-muted",
            ),
            common.table_block("run-why-costs", figs.cost_table(costs), page_size=25),
            *(
                [
                    html.H3("Per thread"),
                    html.P(
                        "Each thread alive at the measure phase's end, its events divided by the run's "
                        "messages (not its own share of them): which thread makes the calls, blocks, is "
                        "preempted or waits for a CPU. A thread that ended within the phase is not listed.",
                        className="dlx-muted",
                    ),
                    common.table_block("run-why-threads", threads, page_size=16),
                ]
                if not threads.empty
                else []
            ),
        ],
        className="dlx-section",
        id="run-why",
    )


SIDES: tuple[str, ...] = ("server", "client")


def sweep_block(cost: str = DEFAULT_METRIC, side: str = "server") -> html.Div:
    """The Sweep's cost axis: which cost, of which side, against the page's x axis (and its pattern and
    notifier filters); ``cost`` and ``side`` from the page's address (``cost=``, ``side=``), a value this
    axis does not know falls back to the default."""
    return html.Div(
        [
            html.H2("Cost per message"),
            html.Div(
                [
                    common.control(
                        "cost",
                        dcc.Dropdown(
                            id="sweep-cost-metric",
                            options=figs.metric_options(),
                            value=cost if cost in figs.AXIS_METRICS else DEFAULT_METRIC,
                            clearable=False,
                        ),
                        wide=True,
                    ),
                    common.control(
                        "side",
                        dcc.RadioItems(
                            id="sweep-cost-side",
                            options=list(SIDES),
                            value=side if side in SIDES else "server",
                            inline=True,
                        ),
                    ),
                ],
                className="dlx-controls",
            ),
            common.figure_block("sweep-cost-graph"),
        ],
        className="dlx-section",
    )


@callback(
    Output("sweep-cost-graph", "figure"),
    Input("sweep-experiment", "value"),
    Input("sweep-x", "value"),
    Input("sweep-patterns", "value"),
    Input("sweep-notifiers", "value"),
    Input("sweep-cost-metric", "value"),
    Input("sweep-cost-side", "value"),
)
def sweep_cost(
    experiment: str,
    x: Any,
    patterns: list[str] | None,
    notifiers: list[str] | None,
    metric: Any,
    side: Any,
) -> Any:
    x = x if x in fields.AXES else "threads"
    metric = metric if metric in figs.AXIS_METRICS else DEFAULT_METRIC
    side = side if side in SIDES else "server"
    try:
        with common.store().connect() as conn:
            exp = data.resolve_experiment(conn, experiment)
            pts = queries.point_costs(conn, exp, metric, side)
    except data.DataUnavailable:
        return base.empty_figure("database unavailable")
    except data.NotFound as exc:
        return base.empty_figure(str(exc))
    if patterns:
        pts = pts[pts["pattern"].isin(patterns)]
    if notifiers:
        pts = pts[pts["notifier"].isin(notifiers)]
    return figs.sweep_cost_figure(
        pts,
        x=x,
        metric=metric,
        side=side,
        title=f"{exp.name} @{exp.spec_sha256[:8]}: {side}, {figs.AXIS_METRICS[metric]} vs {fields.label(x)}",
    )
