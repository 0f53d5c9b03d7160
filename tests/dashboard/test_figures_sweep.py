"""The Sweep page's builders on small frames (no database, no browser)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from demuxlab.dashboard import style
from demuxlab.dashboard.figures import sweep
from demuxlab.dashboard.figures.summary import summarise
from helpers.dashboard_frames import names, points, preds, scaled, spread, titles


def first_panel(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t.get("xaxis") is None]


def test_ci_is_student_t_over_the_ok_runs() -> None:
    frame = pd.DataFrame({"values": [spread(100.0, 10.0, 4), [50.0], []]})
    out = summarise(frame)
    # t(0.975, 3) = 3.182446...
    assert out["half"][0] == pytest.approx(3.182446 * 10 / 2, rel=1e-5)
    assert math.isnan(out["half"][1])  # one run: no interval, not a zero-width one
    assert out["lo"][0] == pytest.approx(100 - out["half"][0])
    assert list(out["n"]) == [4, 1, 0] and math.isnan(out["mean"][2])


def test_sweep_figure_has_bands_repeats_models_and_residuals() -> None:
    pts = points()
    fig = sweep.sweep_figure(pts, preds(pts), x="threads", colour="pattern", facet="notifier")
    n = names(fig)
    assert "hsha" in n and "lf" in n
    assert sum(name.endswith("95% CI") for name in n) == 4  # 2 patterns × 2 notifier facets
    assert sum(name.endswith("repeats") for name in n) == 4
    assert titles(fig)[:2] == ["notifier: epoll-lt", "notifier: select"]
    mean = next(t for t in fig["data"] if t["name"] == "hsha" and t.get("xaxis") is None)
    # hsha and lf measure alike here: their marks would hide each other, so they stand side by side around
    # each thread count (the hover says the count)
    assert [c[4] for c in mean["customdata"]] == ["2", "4", "8"]
    assert mean["x"] == pytest.approx([2.0, 4.0, 8.0], abs=0.25) and mean["x"] != [2.0, 4.0, 8.0]
    assert mean["y"] == pytest.approx([2000.0, 4000.0, 8000.0])
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


def test_bands_are_outlines_without_markers() -> None:
    # Plotly's default mode put a marker on each band corner, in the next colour of the cycle.
    pts = points()
    fig = sweep.sweep_figure(pts, preds(pts))
    bands = [t for t in fig["data"] if t.get("fill") == "toself"]
    assert bands and all(t["mode"] == "lines" for t in bands)
    assert all("markers" not in t.get("mode", "") for t in bands)


def test_two_repeats_draw_their_interval_and_one_run_says_why() -> None:
    """One rule for intervals (demuxlab.marks): drawn from 2 runs on, whatever their width; a point of one
    run has an open marker and says it has no interval (the page once said "±7,325 is too wide to draw; it
    needs 3 runs" of a 67.9k mean)."""
    two = points(n=2)
    fig = sweep.sweep_figure(two, None, facet=None)
    assert [t for t in fig["data"] if t.get("fill")]  # a band over the 2-run points
    mean = next(t for t in fig["data"] if t["name"] == "hsha · epoll-lt")
    assert not any(s.endswith("-open") for s in mean["marker"]["symbol"])
    assert "95 % interval ±" in mean["customdata"][0][3] and "over 2 runs" in mean["customdata"][0][3]
    assert not any("too wide" in a["text"] for a in fig["layout"]["annotations"])
    table = sweep.sweep_table(two)
    assert all(i.startswith("±") and i.endswith("(2 runs)") for i in table["interval"])
    one = points(n=1)
    fig = sweep.sweep_figure(one, None, facet=None)
    assert not [t for t in fig["data"] if t.get("fill")]
    mean = next(t for t in fig["data"] if t["name"] == "hsha · epoll-lt")
    assert all(s.endswith("-open") for s in mean["marker"]["symbol"])
    assert mean["customdata"][0][3].startswith("1 run: no interval")
    assert any("open markers: 1 run, no interval" in a["text"] for a in fig["layout"]["annotations"])
    assert not any(mean["error_y"]["array"])


def test_a_wide_interval_is_drawn_but_never_squashes_the_means() -> None:
    """The report's PNGs once drew a 2-run interval of ±372k round a 54k mean on a 400k axis: every mean in
    the bottom fifth. The axis stops at twice the highest mark (a mean, a repeat, a model) and the figure
    names the interval it cuts."""
    pts = points(patterns=("hsha",), notifiers=("epoll-lt",), threads=(2, 4))
    pts["values"] = [[50_000.0, 58_000.0], [20_000.0, 80_000.0]]  # t(0.975, 1) × 30k / √2 ≈ ±270k
    fig = sweep.sweep_figure(pts, None, facet=None)
    top = fig["layout"]["yaxis"]["range"][1]
    assert 80_000 <= top <= 2.0 * 80_000 * 1.06 + 1  # the highest repeat: 80k
    assert any("past the top of the axis" in a["text"] for a in fig["layout"]["annotations"])


def test_oversubscribed_points_are_ringed_and_said() -> None:
    pts = points(patterns=("tpc",), notifiers=("none",), threads=(1, 2), server_cpus=1)
    fig = sweep.sweep_figure(pts, None, facet=None)
    ring = next(t for t in fig["data"] if t["name"].startswith("oversubscribed"))
    assert ring["x"] == [2.0] and ring["y"] == pytest.approx([2000.0])
    mean = next(t for t in fig["data"] if t["name"] == "tpc")
    assert "oversubscribed: 2 server threads on 1 CPU" in mean["customdata"][1][3]
    assert "oversubscribed" not in mean["customdata"][0][3]
    table = sweep.sweep_table(pts)
    assert table["oversubscribed"].tolist() == ["", "yes"] and table["server_cpus"].tolist() == [1, 1]


def test_series_that_meet_stand_apart_and_keep_one_marker_per_legend_entry() -> None:
    """Sweep by connections (one value) stacked every point in one column; lf at 1 and 2 threads shared
    colour and marker; the reactor's legend marker was a triangle, a square in another panel."""
    pts = points(
        patterns=("lf", "reactor"),
        notifiers=("epoll-lt", "poll"),
        threads=(1, 2),
        mean=lambda p, n, t: 1000.0,
    )
    fig = sweep.sweep_figure(pts, None, x="connections", facet="notifier")
    means = [t for t in fig["data"] if t.get("mode") == "lines+markers" and not t["name"].endswith("repeats")]
    for panel in {t.get("xaxis") for t in means}:
        xs = [t["x"][0] for t in means if t.get("xaxis") == panel]
        assert len(set(xs)) == len(xs) == 4  # lf·1, lf·2, reactor·1, reactor·2 side by side
    lf = [t for t in means if t["name"].startswith("lf")]
    assert len({t["marker"]["symbol"][0] for t in lf if t.get("xaxis") is None}) == 2  # threads tell them
    for name in {t["name"] for t in means}:
        assert len({t["marker"]["symbol"][0] for t in means if t["name"] == name}) == 1, name


def test_an_interval_below_zero_is_clipped_and_said() -> None:
    wide = points(threads=(2, 4))
    wide["values"] = [[10.0, 1000.0, 5.0] for _ in range(len(wide))]  # a t-interval far below zero
    fig = sweep.sweep_figure(wide, None, facet=None)
    bands = [t for t in fig["data"] if t.get("fill")]
    assert bands and min(min(t["y"]) for t in bands) == 0.0
    assert fig["layout"]["yaxis"]["range"][0] == 0
    assert any("clipped at 0" in a["text"] for a in fig["layout"]["annotations"])
    for t in fig["data"]:  # no throughput trace below zero, error bars included
        if t.get("yaxis") in (None, "y"):
            ys = [y for y in t.get("y", []) if y is not None]
            minus = t.get("error_y", {}).get("arrayminus") or [0] * len(ys)
            assert all(y - m >= 0 for y, m in zip(ys, minus, strict=False))


def test_a_single_thread_count_gets_error_bars() -> None:
    one = points(threads=(4,))
    fig = sweep.sweep_figure(one, preds(one), facet=None)
    assert not [t for t in fig["data"] if t.get("fill")]
    mean = next(t for t in fig["data"] if t["name"] == "hsha · epoll-lt")
    assert mean["error_y"]["visible"] and mean["error_y"]["array"][0] > 0
    model = next(t for t in fig["data"] if t["name"] == "hsha · epoll-lt · model, paper rates")
    assert "markers" in model["mode"]  # a one-point line would be invisible


def test_integer_axes_have_integer_ticks_and_every_facet_its_ticks() -> None:
    pts = points(threads=(1, 2, 3, 4))
    pr = preds(pts)
    pr = pr[pts.set_index("point_id").loc[pr["point_id"], "notifier"].to_numpy() == "epoll-lt"]
    fig = sweep.sweep_figure(pts, pr, facet="notifier")
    lay = fig["layout"]
    # Column 1 has residuals (ticks on its bottom axis x3), column 2 none: its top axis x2 shows them.
    assert lay["xaxis3"]["tickvals"] == [1.0, 2.0, 3.0, 4.0] and lay["xaxis3"]["showticklabels"]
    assert lay["xaxis2"]["tickvals"] == [1.0, 2.0, 3.0, 4.0] and lay["xaxis2"]["showticklabels"]
    assert lay["xaxis4"]["visible"] is False
    assert "no model for these series" in titles(fig)


def test_the_legend_fits_the_figure() -> None:
    pts = points(patterns=("reactor", "hsha", "lf", "tpc"), notifiers=("epoll-lt", "select", "poll"))
    fig = sweep.sweep_figure(pts, preds(pts), facet=None)
    entries = sum(1 for t in fig["data"] if t.get("showlegend", True))
    assert fig["layout"]["height"] >= 19 * entries + 110


def test_sweep_figure_keeps_hardware_classes_apart() -> None:
    # The same points measured on two classes (as data.points.measured returns them: a row per point ×
    # class); class hw-b measures twice hw-a, and each class has its own calibrated prediction.
    a = points(hardware_class="hw-a")
    b = scaled(points(hardware_class="hw-b"), [True] * 12, 2.0)
    pts = pd.concat([a, b], ignore_index=True)
    pr = preds(a)
    pr["hardware_class"] = [None if s == "paper" else "hw-a" for s in pr["source"]]
    pb = preds(b)
    pb = pb[pb["source"] == "calibration"].assign(hardware_class="hw-b")
    fig = sweep.sweep_figure(pts, pd.concat([pr, pb], ignore_index=True), colour="pattern", facet="notifier")
    first = first_panel(fig)
    means = {t["name"]: t["y"] for t in first if t["name"] in ("hsha · class hw-a", "hsha · class hw-b")}
    assert means["hsha · class hw-a"] == pytest.approx([2000.0, 4000.0, 8000.0])
    assert means["hsha · class hw-b"] == pytest.approx([4000.0, 8000.0, 16000.0])
    reps_b = next(t for t in first if t["name"] == "hsha · class hw-b repeats")
    assert sorted(reps_b["y"])[:3] == pytest.approx([3960.0, 4000.0, 4040.0])  # hw-b's runs only
    cal = {
        t["name"]: t["y"]
        for t in first
        if t["name"].endswith("calibrated rates") and t["name"].startswith("hsha")
    }
    assert cal["hsha · class hw-a · model, calibrated rates"] == pytest.approx([1800.0, 3600.0, 7200.0])
    assert cal["hsha · class hw-b · model, calibrated rates"] == pytest.approx([3600.0, 7200.0, 14400.0])
    # The table and its error summary: a row per point × class, each with its own class's calibration.
    table = sweep.sweep_table(pts, pd.concat([pr, pb], ignore_index=True))
    assert len(table) == 2 * len(a)
    assert set(table["calibration_error_pct"].round(6)) == {-10.0}
    assert set(table[table["hardware_class"] == "hw-b"]["paper_error_pct"].round(6)) == {-45.0}
    summary = sweep.error_summary(table)
    cal_rows = summary[summary["source"] == "calibration"]
    assert sorted(set(cal_rows["hardware_class"])) == ["hw-a", "hw-b"] and set(cal_rows["points"]) == {3}


def test_sweep_figure_follows_axes_facet_colour_and_sources() -> None:
    pts = points()
    fig = sweep.sweep_figure(pts, preds(pts), colour="notifier", facet="pattern", sources=["calibration"])
    assert titles(fig)[:2] == ["pattern: hsha", "pattern: lf"]
    assert "epoll-lt" in names(fig) and "select" in names(fig)
    assert not any("paper" in n for n in names(fig))
    flat = sweep.sweep_figure(pts, None, facet=None)
    assert "yaxis2" not in flat["layout"]  # one panel, no residuals without models
    assert sweep.sweep_figure(pts.iloc[0:0], None)["layout"]["annotations"][0]["text"].startswith("no ok")


def test_sweep_table_and_error_summary() -> None:
    pts = points()
    table = sweep.sweep_table(pts, preds(pts))
    assert list(table.columns[:6]) == ["pattern", "notifier", "threads", "work_us", "connections", "msg_size"]
    assert table["paper_error_pct"].tolist() == pytest.approx([10.0] * len(pts))
    assert table["calibration_method"].unique().tolist() == ["ssa"]
    summary = sweep.error_summary(table)
    assert len(summary) == 8 and set(summary["source"]) == {"paper", "calibration"}
    assert summary["max_abs_error_pct"].max() == pytest.approx(10.0)


def test_sweep_pdf_is_a_pdf() -> None:
    pts = points()
    payload = sweep.sweep_pdf(pts, preds(pts), title="t")
    assert payload.startswith(b"%PDF") and len(payload) > 2000


@pytest.mark.parametrize("which", ["no rows", "no ok runs"])
def test_sweep_pdf_of_an_empty_selection_says_so(which: str) -> None:
    """A filter that matches nothing gave the PDF button an HTTP 500 (zero columns of panels)."""
    pts = points()
    pts = pts.iloc[0:0] if which == "no rows" else pts.assign(values=[[] for _ in range(len(pts))])
    payload = sweep.sweep_pdf(pts, None)
    assert payload.startswith(b"%PDF")
    fig = sweep.sweep_figure(pts, None)
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["no ok runs to plot for this selection"]


def test_summaries_and_tests_are_the_platforms_own() -> None:
    """The fast paths give demuxlab.stats.point_summary's intervals and scipy's Welch p-values."""
    import numpy as np
    from scipy.stats import ttest_ind

    from demuxlab.dashboard.figures.summary import welch_p
    from demuxlab.stats import point_summary

    rng = np.random.default_rng(7)
    samples = [list(rng.normal(1000, 50, size=n)) for n in (2, 3, 5, 14)]
    out = summarise(pd.DataFrame({"values": samples}))
    for (_, row), vals in zip(out.iterrows(), samples, strict=True):
        ref = point_summary(vals)
        assert row["mean"] == pytest.approx(ref.mean) and row["half"] == pytest.approx(ref.halfwidth)
    for a in samples:
        for b in samples:
            assert welch_p(a, b) == pytest.approx(float(ttest_ind(a, b, equal_var=False).pvalue), rel=1e-9)
    assert welch_p([1.0, 1.0], [1.0, 1.0]) == 1.0 and welch_p([1.0, 1.0], [2.0, 2.0]) == 0.0
    assert welch_p([1.0], [1.0, 2.0]) is None
