"""Every absent model line says why, where it would be seen (issue 45): LF's refused calibrations left LF
without model lines on Model, Sweep and Ranking, with no word why."""

from __future__ import annotations

import pandas as pd

from demuxlab.dashboard.figures import absence, sweep
from helpers.dashboard_frames import points, preds

MODELLED = ("reactor", "hsha", "lf", "tpc")


def states(**refused: str) -> pd.DataFrame:
    rows = [
        {
            "calibration_id": 7,
            "pattern": "lf",
            "notifier": notifier,
            "hardware_class": None,
            "refused": why,
            "self_check": [
                {
                    "threads": 1,
                    "connections": 32,
                    "runs": 1,
                    "measured_msgs_per_s": 80_000.0,
                    "predicted_msgs_per_s": 54_000.0,
                    "rel_error": -0.325,
                }
            ],
        }
        for notifier, why in refused.items()
    ]
    return pd.DataFrame(rows)


def test_each_missing_line_names_its_reason() -> None:
    pts = points(patterns=("hsha", "lf", "proactor"), notifiers=("epoll-lt", "select"))
    pr = preds(pts)
    keep = pts[pts["pattern"] == "hsha"]["point_id"]
    pr = pr[pr["point_id"].isin(keep) | (pr["source"] == "paper")]  # calibrated lines for hsha only
    pr = pr[pr["point_id"].isin(pts[pts["pattern"] != "proactor"]["point_id"])]
    cal_points = pd.DataFrame(
        [
            {"pattern": "lf", "notifier": "epoll-lt", "runs": 1, "ok": 1},
            {"pattern": "lf", "notifier": "select", "runs": 1, "ok": 0},
        ]
    )
    found = absence.absences(
        pts, pr, states(**{"epoll-lt": "the model misses its own runs by 32 %"}), cal_points, MODELLED
    )
    lines = absence.lines(found)
    by = {(a.pattern, a.notifier, a.source): a.why for a in found}
    assert by[("lf", "epoll-lt", "calibration")].startswith("calibration refused: the model misses")
    assert (
        "self-check: the fitted model gives 54k msg/s where its 1 calibration run(s) measured 80k"
        in by[("lf", "epoll-lt", "calibration")]
    )
    assert by[("lf", "select", "calibration")] == "its 1 calibration run(s) failed"
    assert by[("proactor", "epoll-lt", "paper")].startswith("the CTMC models have no rates for proactor")
    assert ("hsha", "epoll-lt", "calibration") not in by and ("lf", "epoll-lt", "paper") not in by
    assert all(line.count(":") >= 1 for line in lines)
    no_runs = absence.absences(points(patterns=("lf",)), pr.iloc[0:0], None, None, MODELLED, ("calibration",))
    assert all(a.why.startswith("no calibration runs") for a in no_runs)
    stored = absence.absences(points(patterns=("lf",)), pr.iloc[0:0], None, None, MODELLED, ("paper",))
    assert all(a.why.startswith("no prediction stored") for a in stored)


def test_the_sweep_says_it_under_the_figure_in_short() -> None:
    """The page lists each absence whole; the figure names them per reason in a line that fits it."""
    found = [
        absence.Absence("lf", n, None, "calibration", "calibration refused: the fit misses its runs by 32 %")
        for n in ("select", "epoll-lt", "poll", "epoll-et", "uring")
    ]
    (line,) = absence.summary(found)
    assert (
        line
        == "calibrated rates, calibration refused: lf/select, lf/epoll-lt, lf/poll, lf/epoll-et and 1 more"
    )
    fig = sweep.sweep_figure(points(patterns=("lf",)), None, model_notes=[line])
    assert any(
        a["text"] == f"no model line ({line}; the page says why)" for a in fig["layout"]["annotations"]
    )
