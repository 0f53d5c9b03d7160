"""Figure and table builders of the dashboard on small frames (no database, no browser)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from demuxlab.dashboard import figures, style
from demuxlab.dashboard.plot import Fig


def points(**over: Any) -> pd.DataFrame:
    rows = []
    pid = 0
    for pattern in ("hsha", "lf"):
        for notifier in ("epoll-lt", "select"):
            for threads in (2, 4, 8):
                pid += 1
                rows.append(
                    {
                        "point_id": pid,
                        "point_key": f"{pattern}/{notifier}/t{threads}",
                        "pattern": pattern,
                        "notifier": notifier,
                        "threads": threads,
                        "work_us": 10.0,
                        "connections": 64,
                        "msg_size": 1,
                        "n_ok": 3,
                        "n_failed": 0,
                        "mean": 1000.0 * threads,
                        "sd": 10.0 * threads,
                        **over,
                    }
                )
    return pd.DataFrame(rows)


def repeats(pts: pd.DataFrame) -> pd.DataFrame:
    rows = [
        {
            "point_id": p,
            "run_id": f"{p:08d}-0000-0000-0000-{r:012d}",
            "repeat": r,
            "throughput_msgs_per_s": m + r,
        }
        for p, m in zip(pts["point_id"], pts["mean"], strict=True)
        for r in range(3)
    ]
    return pd.DataFrame(rows)


def preds(pts: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for p, m in zip(pts["point_id"], pts["mean"], strict=True):
        rows.append(
            {
                "point_id": p,
                "source": "paper",
                "method": "fluid",
                "predicted": m * 2,
                "ci_halfwidth_rel": None,
            }
        )
        rows.append(
            {
                "point_id": p,
                "source": "paper",
                "method": "ssa",
                "predicted": m * 1.1,
                "ci_halfwidth_rel": 0.02,
            }
        )
        rows.append(
            {
                "point_id": p,
                "source": "calibration",
                "method": "ssa",
                "predicted": m * 0.9,
                "ci_halfwidth_rel": 0.01,
            }
        )
    return pd.DataFrame(rows)


def names(fig: dict[str, Any]) -> list[str]:
    return [t.get("name", "") for t in fig["data"]]


def titles(fig: dict[str, Any]) -> list[str]:
    return [a["text"] for a in fig["layout"]["annotations"]]


def test_ci_is_student_t_over_the_ok_runs() -> None:
    out = figures.with_ci(pd.DataFrame({"mean": [100.0, 50.0], "sd": [10.0, 5.0], "n_ok": [4, 1]}))
    # t(0.975, 3) = 3.182446...
    assert out["half"][0] == pytest.approx(3.182446 * 10 / 2, rel=1e-5)
    assert math.isnan(out["half"][1])  # one run: no interval, not a zero-width one
    assert out["lo"][0] == pytest.approx(100 - out["half"][0])


def test_sweep_figure_has_bands_repeats_models_and_residuals() -> None:
    pts = points()
    fig = figures.sweep_figure(pts, repeats(pts), preds(pts), x="threads", colour="pattern", facet="notifier")
    n = names(fig)
    assert "hsha" in n and "lf" in n
    assert sum(name.endswith("95% CI") for name in n) == 4  # 2 patterns × 2 notifier facets
    assert sum(name.endswith("repeats") for name in n) == 4
    assert titles(fig) == ["notifier: epoll-lt", "notifier: select"]
    mean = next(t for t in fig["data"] if t["name"] == "hsha" and t.get("xaxis") is None)
    assert mean["x"] == [2.0, 4.0, 8.0] and mean["y"] == [2000.0, 4000.0, 8000.0]
    assert mean["line"]["color"] == style.PATTERN_COLOUR["hsha"]
    # SSA is preferred over fluid for the paper's line; the residual is (model − measured) / measured.
    paper = next(
        t for t in fig["data"] if t["name"] == "hsha · model, paper rates" and t.get("xaxis") is None
    )
    assert paper["y"] == pytest.approx([2200.0, 4400.0, 8800.0])
    assert paper["error_y"]["array"] == pytest.approx([44.0, 88.0, 176.0])
    resid = [t for t in fig["data"] if t["name"] == "hsha · model, paper rates residual"]
    assert resid and resid[0]["y"] == pytest.approx([10.0, 10.0, 10.0])
    assert resid[0]["yaxis"] == "y3"  # second row, first column of a 2 × 2 grid
    calibrated = [t for t in fig["data"] if t["name"] == "lf · model, calibrated rates residual"]
    assert calibrated[0]["y"] == pytest.approx([-10.0, -10.0, -10.0])


def test_sweep_figure_keeps_hardware_classes_apart() -> None:
    # The same points measured on two classes (as data.sweep_points returns them: a row per point × class);
    # class hw-b measures twice hw-a, and each class has its own calibrated prediction.
    a, b = points(hardware_class="hw-a"), points(hardware_class="hw-b")
    b["mean"] = b["mean"] * 2
    pts = pd.concat([a, b], ignore_index=True)
    reps = pd.concat(
        [repeats(a).assign(hardware_class="hw-a"), repeats(b).assign(hardware_class="hw-b")],
        ignore_index=True,
    )
    pr = preds(a)
    pr["hardware_class"] = [None if s == "paper" else "hw-a" for s in pr["source"]]
    pb = preds(b)
    pb = pb[pb["source"] == "calibration"].assign(hardware_class="hw-b")
    fig = figures.sweep_figure(
        pts, reps, pd.concat([pr, pb], ignore_index=True), x="threads", colour="pattern", facet="notifier"
    )
    first = [t for t in fig["data"] if t.get("xaxis") is None]
    means = {t["name"]: t["y"] for t in first if t["name"] in ("hsha · class hw-a", "hsha · class hw-b")}
    assert means == {
        "hsha · class hw-a": [2000.0, 4000.0, 8000.0],
        "hsha · class hw-b": [4000.0, 8000.0, 16000.0],
    }
    reps_b = next(t for t in first if t["name"] == "hsha · class hw-b repeats")
    assert sorted(reps_b["y"])[:3] == [4000.0, 4001.0, 4002.0]  # hw-b's runs only, never hw-a's
    cal = {
        t["name"]: t["y"]
        for t in first
        if t["name"].endswith("calibrated rates") and t["name"].startswith("hsha")
    }
    assert cal["hsha · class hw-a · model, calibrated rates"] == pytest.approx([1800.0, 3600.0, 7200.0])
    assert cal["hsha · class hw-b · model, calibrated rates"] == pytest.approx([3600.0, 7200.0, 14400.0])
    # The table and its error summary: a row per point × class, each with its own class's calibration.
    table = figures.sweep_table(pts, pd.concat([pr, pb], ignore_index=True))
    assert len(table) == 2 * len(a)
    assert set(table["calibration_error_pct"].round(6)) == {-10.0}
    assert set(table[table["hardware_class"] == "hw-b"]["paper_error_pct"].round(6)) == {-45.0}
    summary = figures.error_summary(table)
    cal_rows = summary[summary["source"] == "calibration"]
    assert sorted(set(cal_rows["hardware_class"])) == ["hw-a", "hw-b"] and set(cal_rows["points"]) == {3}


def test_sweep_figure_follows_axes_facet_colour_and_sources() -> None:
    pts = points()
    fig = figures.sweep_figure(
        pts, None, preds(pts), colour="notifier", facet="pattern", sources=["calibration"]
    )
    assert titles(fig) == ["pattern: hsha", "pattern: lf"]
    assert "epoll-lt" in names(fig) and "select" in names(fig)
    assert not any("paper" in n for n in names(fig))
    flat = figures.sweep_figure(pts, None, None, facet=None)
    assert titles(flat) == [] and "yaxis2" not in flat["layout"]  # one panel, no residuals without models
    assert figures.sweep_figure(pts.iloc[0:0], None, None)["layout"]["annotations"][0]["text"].startswith(
        "no ok"
    )


def test_sweep_table_and_error_summary() -> None:
    pts = points()
    table = figures.sweep_table(pts, preds(pts))
    assert list(table.columns[:6]) == ["pattern", "notifier", "threads", "work_us", "connections", "msg_size"]
    assert table["paper_error_pct"].tolist() == pytest.approx([10.0] * len(pts))
    assert table["calibration_method"].unique().tolist() == ["ssa"]
    summary = figures.error_summary(table)
    assert len(summary) == 8 and set(summary["source"]) == {"paper", "calibration"}
    assert summary["max_abs_error_pct"].max() == pytest.approx(10.0)


def test_sweep_pdf_is_a_pdf() -> None:
    pts = points()
    payload = figures.sweep_pdf(pts, repeats(pts), preds(pts), title="t")
    assert payload.startswith(b"%PDF") and len(payload) > 2000


def test_compare_keeps_hardware_classes_apart() -> None:
    a = points()  # local: no class column in the output
    b = pd.concat([points(hardware_class="hw-a"), points(hardware_class="hw-b")], ignore_index=True)
    b.loc[b["hardware_class"] == "hw-b", "mean"] *= 2
    assert "a_hardware_class" not in figures.compare_table(a, a)
    table = figures.compare_table(a, b)
    assert len(table) == 2 * len(a) and set(table["b_hardware_class"]) == {"hw-a", "hw-b"}
    ratios = table.groupby("b_hardware_class")["ratio_b_over_a"].unique()
    assert list(ratios["hw-a"]) == [1.0] and list(ratios["hw-b"]) == [2.0]
    fig = figures.compare_figure(a, b, label_a="A", label_b="B")
    names = {t["name"] for t in fig["data"]}
    assert "hsha · epoll-lt · B class hw-b · B" in names and "hsha · epoll-lt · B class hw-a · B" in names


def test_compare_table_ratio_and_overlap() -> None:
    a = points()
    b = points()
    b.loc[b["pattern"] == "lf", "mean"] *= 1.5  # lf clearly faster on B: CIs apart
    b.loc[b["pattern"] == "hsha", "mean"] += 1.0  # hsha the same within noise
    table = figures.compare_table(a, b)
    lf = table[table["pattern"] == "lf"]
    hsha = table[table["pattern"] == "hsha"]
    assert lf["ratio_b_over_a"].tolist() == pytest.approx([1.5] * len(lf))
    assert set(lf["cis_overlap"]) == {"no"} and set(hsha["cis_overlap"]) == {"yes"}
    one = a.assign(n_ok=1)
    assert set(figures.compare_table(one, b)["cis_overlap"]) == {"n/a (<2 runs)"}
    fig = figures.compare_figure(a, b, label_a="A", label_b="B")
    assert any(n.endswith("· B") for n in names(fig))


def test_operations_and_events_figures() -> None:
    ops = pd.DataFrame(
        [
            {
                "pattern": "hsha",
                "notifier": "epoll-lt",
                "threads": t,
                "work_us": 10.0,
                "connections": 64,
                "msg_size": 1,
                "op": op,
                "mean_us": t * 0.1,
                "p50_us": 0.1,
                "p99_us": 1.0,
                "calls": 10,
                "runs": 1,
            }
            for t in (2, 4)
            for op in ("notify", "lock", "zzz", "rearm")
        ]
    )
    fig = figures.operations_figure(ops)
    assert titles(fig) == ["obtain events (notifier call)", "lock wait", "re-arm", "zzz"]  # 3 + 1 panels
    assert fig["data"][-1]["xaxis"] == "x4"
    assert figures.operations_figure(ops.iloc[0:0])["layout"]["annotations"][0]["text"].startswith(
        "no instrumented"
    )
    ev = pd.DataFrame(
        [
            {
                "pattern": "lf",
                "notifier": "select",
                "threads": 2,
                "work_us": 10.0,
                "connections": 64,
                "msg_size": 1,
                "events_per_call": 3.5,
                "runs": 2,
            }
        ]
    )
    assert figures.events_figure(ev)["data"][0]["y"] == [3.5]


def test_run_timeline_marks_the_phases_and_the_verdict() -> None:
    samples = pd.DataFrame({"second": [0, 1, 2], "throughput_msgs_per_s": [10.0, 20.0, 30.0]})
    fig = figures.run_timeline_figure(
        samples, warmup_s=2, measure_s=3, cooldown_s=1, throughput=20.0, stationary=False, drift_rel=0.25
    )
    assert fig["data"][0]["x"] == [2.5, 3.5, 4.5]  # second i of the measure phase is at warm-up + i + ½
    assert "NOT stationary (drift +25.0 %)" in fig["layout"]["title"]["text"]
    rects = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
    assert [(r["x0"], r["x1"]) for r in rects] == [(0, 2), (2, 5), (5, 6)]


def test_topology_figure_places_threads_on_cpus() -> None:
    facts = {
        "cpus": [{"cpu": c, "core": c, "socket": 0, "node": c // 2} for c in range(4)],
        "numa_nodes": [{"node": 0, "cpus": [0, 1]}, {"node": 1, "cpus": [2, 3]}],
    }
    pinning = {"server_cpus": [0, 1], "client_cpus": [3]}
    detail = [{"index": 0, "role": "leader", "cpu": 1}]
    fig = figures.topology_figure([("server: a", facts), ("client: b", facts)], pinning, detail)
    by_name = {(t["name"], t.get("xaxis", "x")): t for t in fig["data"]}
    assert by_name[("server", "x")]["text"] == ["0", "1"]
    assert "T0 leader" in by_name[("server", "x")]["hovertext"][1]
    assert by_name[("client", "x2")]["text"] == ["3"]  # the client's CPU on the client panel only
    assert ("client", "x") not in by_name


def test_rates_table_against_the_paper() -> None:
    cals = pd.DataFrame(
        [
            {
                "id": 7,
                "pattern": "lf",
                "notifier": "epoll-lt",
                "rates": {"r_e": 2.0, "r_l": 50.0, "source": {"r_e": "notify"}},
            }
        ]
    )
    table = figures.rates_table(cals, {"lf": {"r_e": 1.0, "r_l": 100.0}})
    row = table[table["rate"] == "r_e"].iloc[0]
    assert (row["calibrated_us"], row["paper_us"], row["ratio"], row["from"]) == (0.5, 1.0, 0.5, "notify")
    assert figures.rates_figure(table)["data"][0]["name"] == "paper"


def test_fig_grid_domains_and_shared_axes() -> None:
    fig = Fig(rows=2, cols=2, shared_xaxes=True, shared_yaxes=True, subplot_titles=["a", "b"])
    d = fig.to_dict()["layout"]
    assert d["xaxis"]["domain"][0] == 0 and d["xaxis2"]["domain"][1] == pytest.approx(1)
    assert d["xaxis"]["matches"] == "x3" and d["yaxis2"]["matches"] == "y"
    assert d["yaxis3"]["domain"][0] == pytest.approx(0) and d["yaxis"]["domain"][1] == pytest.approx(1)


def test_palette_is_stable_and_colour_blind_safe() -> None:
    assert style.colour_for("hsha") == "#E69F00"
    assert style.colour_for(12.5) == style.colour_for(12.5)  # not Python's randomised hash
    assert set(style.PATTERN_COLOUR.values()) <= set(style.OKABE_ITO)
    assert figures.humanize_seconds(3725) == "1 h 02 min" and figures.humanize_seconds(None) == "unknown"
