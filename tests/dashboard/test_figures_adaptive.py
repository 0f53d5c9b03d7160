"""An adaptive experiment on the Sweep page's figure (no database, no browser): the points it never
measured are drawn as the model's values, dashed, open, without band or error bar, and said to be model
only; each measured point's hover says why it was measured."""

from __future__ import annotations

from typing import Any

from demuxlab.dashboard.figures import adaptive, sweep
from helpers.dashboard_frames import points

MODEL_ONLY = "model-only: never measured; interpolated between the measured thread counts [2, 4, 8]"


def decisions() -> dict[str, Any]:
    grid = []
    for pattern in ("hsha", "lf"):
        for notifier in ("epoll-lt", "select"):
            for t in (2, 3, 4, 6, 8):
                key = f"{pattern}/{notifier}/t{t}/w10/c64/b1/ct1/rclosed"
                measured = t in (2, 4, 8)
                grid.append(
                    {
                        "point_key": key,
                        "pattern": pattern,
                        "notifier": notifier,
                        "threads": t,
                        "work_us": 10.0,
                        "connections": 64,
                        "msg_size": 1,
                        "client_threads": 1,
                        "rate": None,
                        "instrument": False,
                        "measured": measured,
                        "mean": 1000.0 * t,
                        "why": "coarse design: 3 thread counts per curve" if measured else MODEL_ONLY,
                    }
                )
    return {"grid": grid}


def test_model_only_points_are_dashed_open_and_without_an_interval() -> None:
    doc = decisions()
    only = adaptive.model_only(doc, ["hsha"], None)
    assert {r["threads"] for r in only} == {3, 6} and {r["pattern"] for r in only} == {"hsha"}
    pts = points(patterns=("hsha",))
    why = adaptive.why_measured(doc)
    pts = pts.assign(why=[why.get(k, "") for k in pts["point_key"]])
    fig = sweep.sweep_figure(pts, None, x="threads", colour="pattern", facet="notifier", model_only=only)
    traces = [t for t in fig["data"] if t["name"].endswith("model only")]
    assert len(traces) == 2  # one per notifier facet
    for t in traces:
        assert t["x"] == [3.0, 6.0] and t["y"] == [3000.0, 6000.0]
        assert t["line"]["dash"] == "dash" and t["marker"]["symbol"] == "circle-open"
        assert "error_y" not in t and t.get("fill") is None
        assert "never measured" in t["hovertemplate"] and t["customdata"][0].startswith("model-only")
    assert {t.get("xaxis") for t in traces} == {None, "x2"}
    # No band or repeat belongs to a model-only point, and the measured means stay the measured ones.
    assert not any(t["name"].endswith("model only 95% CI") for t in fig["data"])
    mean = next(t for t in fig["data"] if t["name"] == "hsha" and t.get("xaxis") is None)
    assert mean["x"] == [2.0, 4.0, 8.0]
    assert all("measured: coarse design" in c[3] for c in mean["customdata"])


def test_a_fixed_design_has_no_model_only_points() -> None:
    assert adaptive.model_only(None, None, None) == [] and adaptive.why_measured(None) == {}
    fig = sweep.sweep_figure(points(), None)
    assert not any(t["name"].endswith("model only") for t in fig["data"])
