"""The Experiments page's builders: each experiment's state judged honestly from its runs and plan (what
is running, what stopped, what the server cannot run), and the latest runs' throughputs."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import pandas as pd

from demuxlab import marks
from demuxlab.dashboard import style
from demuxlab.dashboard.figures import base
from demuxlab.dashboard.plot import Fig, FigureDict, scatter

#: A sweep whose last run finished longer ago than this many run wall times (their 90th percentile), and
#: at least :data:`STOPPED_AFTER_MIN_S`, is stopped: a running sweep finishes a run at least that often
#: (its lanes run back to back), so the silence means its controller is gone or was stopped.
STOPPED_AFTER_RUNS = 3.0
STOPPED_AFTER_MIN_S = 120.0

RUNNING = "running"
COMPLETE = "complete"
STOPPED = "stopped"
NOT_STARTED = "not started"


@dataclass(frozen=True)
class Status:
    state: str  # RUNNING, COMPLETE, STOPPED or NOT_STARTED
    why: str  # the reason for the state, one line
    done: int
    planned: int | None  # None: unknown (``why`` and ``planned_note`` say why)
    remaining: int | None
    cut_runs: int  # runs of points the server's thread ranges cut: never to come, not "remaining"
    eta_s: float | None
    eta_text: str  # never a bare "unknown": a time, "done", or why there is none
    live: bool  # whether the page keeps looking for new runs (not for a stopped or complete sweep)
    planned_note: str | None = None


def status(
    *,
    ok: int,
    failed: int,
    planned: int | None,
    exact: bool = True,
    planned_note: str | None = None,
    cut_runs: int = 0,
    first_started: dt.datetime | None,
    last_finished: dt.datetime | None,
    wall_p90_s: float | None,
    now: dt.datetime,
) -> Status:
    """An experiment's state from its counts, plan and run times (rules in the module constants)."""
    done = ok + failed
    remaining = None if planned is None else max(planned - done, 0)
    limit = max(STOPPED_AFTER_MIN_S, STOPPED_AFTER_RUNS * (wall_p90_s or 0.0))
    quiet = None if last_finished is None or _nat(last_finished) else (now - last_finished).total_seconds()
    at_most = "" if exact else "at most "

    def make(state: str, why: str, eta_s: float | None, eta_text: str, live: bool) -> Status:
        return Status(state, why, done, planned, remaining, cut_runs, eta_s, eta_text, live, planned_note)

    if remaining == 0:
        return make(COMPLETE, "every planned run is in", None, "done", False)
    if done == 0 or quiet is None:
        return make(NOT_STARTED, "no run has finished yet", None, "none yet: no run has finished", True)
    if quiet > limit:
        left = f"; {at_most}{remaining} planned runs never ran" if remaining else ""
        return make(
            STOPPED,
            f"no run finished for {humanize_seconds(quiet)} (a run takes about "
            f"{humanize_seconds(wall_p90_s)}){left}",
            None,
            "none: the sweep stopped",
            False,
        )
    why = f"last run finished {humanize_seconds(quiet)} ago"
    if remaining is None:
        return make(RUNNING, why, None, f"none: the runs planned are unknown ({planned_note})", True)
    elapsed = (
        (last_finished - first_started).total_seconds()
        if first_started is not None and last_finished is not None and not _nat(first_started)
        else 0.0
    )
    if elapsed <= 0:
        return make(RUNNING, why, None, "none yet: one run is not a pace", True)
    eta = remaining * elapsed / done
    return make(RUNNING, why, eta, at_most + humanize_seconds(eta), True)


def _nat(v: object) -> bool:
    return v is None or v is pd.NaT or (isinstance(v, float) and math.isnan(v))


def progress_figure(latest: pd.DataFrame) -> FigureDict:
    """The latest runs' throughputs by when each finished, a series per design (colour = pattern, marker =
    notifier, never a line joining two designs), calibration runs open, failed runs as crosses at zero."""
    if latest.empty:
        return base.empty_figure("no runs yet", 220)
    d = latest.assign(when=latest["finished_at"].fillna(latest["ingested_at"])).sort_values("when")
    fig = Fig()
    ok = d[d["status"] == "ok"]
    if "pattern" in ok:
        for (pattern, notifier, instrument), grp in ok.groupby(
            ["pattern", "notifier", "instrument"], sort=True
        ):
            c = style.colour_for(pattern)
            symbol = style.symbol_for(notifier)
            what = " (calibration)" if instrument else ""
            fig.add_trace(
                scatter(
                    x=grp["when"].tolist(),
                    y=grp["throughput_msgs_per_s"].tolist(),
                    mode="markers",
                    name=f"{pattern} · {notifier}{what}",
                    marker={"color": c, "symbol": f"{symbol}-open" if instrument else symbol, "size": 9},
                    text=grp["point_key"].tolist(),
                    hovertemplate="%{text}<br>%{y:,.0f} msg/s<br>%{x}<extra></extra>",
                )
            )
    bad = d[d["status"] != "ok"]
    if not bad.empty:
        fig.add_trace(
            scatter(
                x=bad["when"].tolist(),
                y=[0] * len(bad),
                mode="markers",
                name="failed",
                marker={"color": style.FAILED, "symbol": "x", "size": 10},
                text=bad["failure_reason"].tolist(),
            )
        )
    fig.update_layout(
        **style.base_layout(
            title={"text": f"The latest {len(d)} runs, by design (by the time each finished)", "x": 0.01},
            height=base.legend_height(len(fig.data), 260, 70),
            margin={"l": 60, "r": 20, "t": 40, "b": 30},
            yaxis_title="msg/s",
        )
    )
    fig.update_yaxes(rangemode="tozero")
    return fig.to_dict()


def latest_per_design(per_design: pd.DataFrame) -> pd.DataFrame:
    """Each design's latest measured run: design, threads, throughput (4 significant digits), when, run."""
    if per_design.empty:
        return pd.DataFrame(columns=["design", "threads", "status", "msgs_per_s", "finished", "run"])
    return pd.DataFrame(
        {
            "design": [
                f"{p}/{n}" for p, n in zip(per_design["pattern"], per_design["notifier"], strict=True)
            ],
            "threads": per_design["threads"].astype(int),
            "status": per_design["status"],
            "msgs_per_s": [marks.sig(base.f(v)) for v in per_design["throughput_msgs_per_s"]],
            "finished": per_design["finished"],
            "run": [f"[{r[:8]}](/run?run={r})" for r in per_design["run_id"]],
        }
    )


def cut_text(points: int, runs: int) -> str:
    """``4 points (8 runs)``: what the server's thread ranges cut, counted both ways."""
    if not points:
        return "none"
    return f"{points} point{'s' * (points != 1)} ({runs} run{'s' * (runs != 1)})"


def humanize_seconds(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"
