"""The builders of Compare, Operations, Run, Model and Experiments on small frames (no database, no
browser); the plotting grid and the one look every page shares."""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd
import pytest

from demuxlab import marks
from demuxlab.dashboard import style
from demuxlab.dashboard.figures import base, compare, experiments, model, operations, run
from demuxlab.dashboard.plot import Fig
from demuxlab.vocab import NOTIFIERS, PATTERNS
from helpers.dashboard_frames import names, points, scaled, titles


def test_compare_keeps_hardware_classes_apart() -> None:
    a = points()  # local: no class column in the output
    b = pd.concat([points(hardware_class="hw-a"), scaled(points(hardware_class="hw-b"), [True] * 12, 2.0)])
    assert "a_hardware_class" not in compare.compare_table([a, a])
    table = compare.compare_table([a, b])
    assert len(table) == 2 * len(a) and set(table["b_hardware_class"]) == {"hw-a", "hw-b"}
    ratios = table.groupby("b_hardware_class")["ratio_b_over_a"].unique()
    assert list(ratios["hw-a"]) == [1.0] and list(ratios["hw-b"]) == [2.0]
    fig = compare.compare_figure([a, b], ["A", "B"])
    got = set(names(fig))
    assert "hsha · epoll-lt · class hw-b · B" in got and "hsha · epoll-lt · class hw-a · B" in got


def test_compare_table_ratio_overlap_and_test() -> None:
    a = points()
    b = scaled(points(), [p == "lf" for p in points()["pattern"]], 1.5)  # lf clearly faster on B
    b["values"] = [
        [v + 1.0 for v in vals] if p == "hsha" else vals
        for vals, p in zip(b["values"], b["pattern"], strict=False)
    ]
    table = compare.compare_table([a, b])
    lf = table[table["pattern"] == "lf"]
    hsha = table[table["pattern"] == "hsha"]
    assert lf["ratio_b_over_a"].tolist() == pytest.approx([1.5] * len(lf))
    assert set(lf["cis_overlap_b"]) == {"no"} and set(hsha["cis_overlap_b"]) == {"yes"}
    # Welch's test, not the overlap, decides "differs".
    assert set(lf["b_differs"]) == {"yes"} and set(hsha["b_differs"]) == {"no"}
    assert (lf["p_b_vs_a"] < 0.05).all() and (hsha["p_b_vs_a"] > 0.5).all()
    one = a.assign(values=[[v[0]] for v in a["values"]])
    t1 = compare.compare_table([one, b])
    assert set(t1["cis_overlap_b"]) == {"n/a (<2 runs)"} and set(t1["b_differs"]) == {"untested (< 2 runs)"}
    fig = compare.compare_figure([a, b], ["A", "B"])
    assert any(n.endswith("· B") for n in names(fig))


def test_compare_takes_more_than_two_sides_with_one_colour_per_pattern() -> None:
    a, b, c = points(), scaled(points(), [True] * 12, 1.2), scaled(points(), [True] * 12, 0.5)
    table = compare.compare_table([a, b, c])
    assert table["ratio_b_over_a"].tolist() == pytest.approx([1.2] * 12)
    assert table["ratio_c_over_a"].tolist() == pytest.approx([0.5] * 12)
    fig = compare.compare_figure([a, b, c], ["A", "B", "C"])
    assert titles(fig)[:3] == ["A", "B", "C"]
    for t in fig["data"]:
        pattern = t["name"].split(" · ")[0]
        assert t["line"]["color"] == style.PATTERN_COLOUR[pattern]
    ratio_c = [t for t in fig["data"] if t["name"].endswith("C / A")]
    assert ratio_c and ratio_c[0]["xaxis"] == "x6"  # row 2, column 3
    two = compare.compare_figure([points(n=2), points(n=3)], ["A", "B"])
    a_bars = [t["error_y"]["array"] for t in two["data"] if t["name"].endswith("· A")]
    b_bars = [t["error_y"]["array"] for t in two["data"] if t["name"].endswith("· B")]
    assert all(all(b) for b in a_bars + b_bars)  # intervals from 2 runs on (demuxlab.marks' one rule)


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
                "client_threads": 1,
                "rate": None,
                "hardware_class": None,
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
    fig = operations.operations_figure(ops)
    assert titles(fig) == ["obtain events (notifier call)", "lock wait", "re-arm", "zzz"]  # 3 + 1 panels
    assert fig["data"][-1]["xaxis"] == "x4"
    assert fig["data"][0]["line"]["color"] == style.PATTERN_COLOUR["hsha"]
    assert fig["layout"]["xaxis"]["tickvals"] == [2.0, 4.0]
    assert operations.operations_figure(ops.iloc[0:0])["layout"]["annotations"][0]["text"].startswith(
        "no instrumented"
    )
    ev = ops[ops["op"] == "notify"].drop(columns=["op", "mean_us", "p50_us", "p99_us", "calls"])
    ev = ev.assign(events_per_call=3.5)
    assert operations.events_figure(ev)["data"][0]["y"] == [3.5, 3.5]


def test_run_timeline_marks_the_phases_and_the_verdict() -> None:
    samples = pd.DataFrame({"second": [0, 1, 2], "throughput_msgs_per_s": [10.0, 20.0, 30.0]})
    fig = run.run_timeline_figure(
        samples, warmup_s=2, measure_s=3, cooldown_s=1, throughput=20.0, stationary=False, drift_rel=0.25
    )
    assert fig["data"][0]["x"] == [2.5, 3.5, 4.5]  # second i of the measure phase is at warm-up + i + ½
    assert "NOT stationary (drift +25.0 %)" in fig["layout"]["title"]["text"]
    rects = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
    assert [(r["x0"], r["x1"]) for r in rects] == [(0, 2), (2, 5), (5, 6)]


def test_an_unknown_stationarity_says_why() -> None:
    assert "failed" in run.stationarity_text(None, None, status="failed")
    assert "no per-second samples" in run.stationarity_text(None, None, samples=0)
    assert "has 2" in run.stationarity_text(None, None, samples=3, trimmed=1)
    assert "unknown" not in run.stationarity_text(None, None, samples=10)


def test_topology_figure_places_threads_on_cpus() -> None:
    facts = {
        "cpus": [{"cpu": c, "core": c, "socket": 0, "node": c // 2} for c in range(4)],
        "numa_nodes": [{"node": 0, "cpus": [0, 1]}, {"node": 1, "cpus": [2, 3]}],
    }
    pinning = {"server_cpus": [0, 1], "client_cpus": [3]}
    detail = [{"index": 0, "role": "leader", "cpu": 1}]
    fig = run.topology_figure([("server: a", facts), ("client: b", facts)], pinning, detail)
    by_name = {(t["name"], t.get("xaxis", "x")): t for t in fig["data"]}
    assert by_name[("server", "x")]["text"] == ["0", "1"]
    assert "T0 leader" in by_name[("server", "x")]["hovertext"][1]
    assert by_name[("client", "x2")]["text"] == ["3"]  # the client's CPU on the client panel only
    assert ("client", "x") not in by_name


def test_rates_table_against_the_paper_named_by_operation() -> None:
    rates = {"r_e": 2.0, "r_l": 50.0, "r_n": 10.0, "speed": 1.0, "source": {"r_e": "notify"}}
    cals = pd.DataFrame([{"id": 7, "pattern": "lf", "notifier": "epoll-lt", "rates": rates}])
    table = model.rates_table(cals, {"lf": {"r_e": 1.0, "r_l": 100.0}}, ("r_l", "r_e"))
    # The models' rates in their order, then any other rate the calibration stores (a newer model's).
    assert list(table["rate"]) == ["r_l", "r_e", "r_n"]
    row = table[table["rate"] == "r_e"].iloc[0]
    assert (row["calibrated_us"], row["paper_us"], row["ratio"], row["from"]) == (0.5, 1.0, 0.5, "notify")
    assert row["operation"] == "event notification, per descriptor"
    fig = model.rates_figure(table[table["rate"] != "r_n"])
    assert fig["data"][0]["name"] == "paper: lf"
    assert fig["data"][0]["x"] == [
        "lock<br>acquire/<br>release<br>(r_l)",
        "event<br>notification,<br>per<br>descriptor<br>(r_e)",
    ]
    for rate in model.RATE_NAMES:  # no line of a name wider than its bars, but for a single longer word
        lines = model._tick(rate).split("<br>")[:-1]
        assert all(len(line) <= model.TICK_WIDTH or " " not in line for line in lines), rate
    # seed 001's rates are the same for every pattern but r_e: one grey bar per set of values, named by
    # the patterns that share it (not a bar per pattern in repeating greys)
    cals = pd.DataFrame(
        [
            {"id": i, "pattern": p, "notifier": "poll", "rates": rates}
            for i, p in enumerate(("tpc", "hsha", "lf"))
        ]
    )
    paper = {p: {"r_e": 1 / (2.9 if p == "hsha" else 0.635), "r_l": 1 / 0.013} for p in ("hsha", "lf", "tpc")}
    fig = model.rates_figure(model.rates_table(cals, paper, ("r_l", "r_e")))
    greys = [t for t in fig["data"] if t["name"].startswith("paper: ")]
    assert [(t["name"], t["y"]) for t in greys] == [
        ("paper: hsha", [0.013, 2.9]),  # no bar for r_n: not in seed 001
        ("paper: lf, tpc", [0.013, 0.635]),
    ]
    assert len({t["marker"]["color"] for t in greys}) == 2
    assert model.rate_name("r_q") == "r_q"  # a rate without a name here: its own
    assert model.rate_name("r_w") == "wake-up, per other thread (r_w)"


def test_whatif_flags_fluid_outside_the_ssa_interval() -> None:
    fluid = pd.DataFrame(
        {
            "threads": [1, 2, 4],
            "throughput_msgs_per_s": [100.0, 200.0, 400.0],
            "ci_halfwidth_rel": None,
            "method": "fluid",
        }
    )
    ssa = pd.DataFrame(
        {"threads": [1, 2, 4], "throughput_msgs_per_s": [101.0, 260.0, 400.0], "ci_halfwidth_rel": 0.02}
    )
    table = model.whatif_table(fluid, ssa)
    assert table["model_outside_ssa_ci"].tolist() == [False, True, False]
    assert "1 of 3 thread counts" in str(model.disagreement(table))
    # outside a 2 % interval by 3 %: significant, but within the 5 % the fluid is held to
    close = model.whatif_table(fluid, ssa.assign(throughput_msgs_per_s=[103.0, 206.0, 400.0]))
    assert (
        close["model_outside_ssa_ci"].tolist() == [False, False, False] and model.disagreement(close) is None
    )
    # the same values solved exactly: the SSA estimates them, a miss of its interval is chance, not a flag
    exact = model.whatif_table(fluid.assign(method="exact"), ssa)
    assert (
        exact["model_outside_ssa_ci"].tolist() == [False, False, False] and model.disagreement(exact) is None
    )
    assert model.disagreement(model.whatif_table(fluid, fluid.assign(ci_halfwidth_rel=0.01))) is None


def test_whatif_measured_overlay_per_notifier_with_its_interval() -> None:
    from demuxlab.dashboard.figures.summary import summarise

    fluid = pd.DataFrame(
        {
            "threads": [2, 4, 8],
            "throughput_msgs_per_s": [1.0, 2.0, 3.0],
            "ci_halfwidth_rel": None,
            "method": "fluid",
        }
    )
    measured = summarise(points(patterns=("lf",)))
    fig = model.whatif_figure(fluid, None, measured, pattern="lf")
    overlay = [t for t in fig["data"] if t["name"].startswith("measured")]
    assert [t["name"] for t in overlay] == ["measured · epoll-lt", "measured · select"]
    assert all(t["marker"]["color"] == style.PATTERN_COLOUR["lf"] for t in overlay)
    assert overlay[0]["marker"]["symbol"][0] == style.NOTIFIER_SYMBOL["epoll-lt"]
    assert all(e > 0 for e in overlay[0]["error_y"]["array"])


def test_whatif_defaults_come_from_the_experiment() -> None:
    """The what-if opens on a curve: the first modelled pattern measured whose threads can change (never
    the reactor, which refuses every thread change, where another was measured), over its thread range."""
    pts = points(patterns=("reactor", "lf"), threads=(1, 2, 4))
    ranges = {"reactor": (1, 1), "hsha": (2, 128), "lf": (1, 128)}
    assert model.workload_defaults(pts, ("reactor", "hsha", "lf"), ranges) == {
        "pattern": "lf",
        "notifier": "epoll-lt",
        "work": "10",
        "connections": "64",
        "threads": "1-16",
        "clients": "1",  # the client's threads (a calibrated client's parallelism)
    }
    assert model.workload_defaults(points(patterns=("reactor",)), ("reactor",), ranges)["threads"] == "1"
    assert model.workload_defaults(points(patterns=("reactor",)), ("hsha", "lf"), ranges) == {}


NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


def test_a_stopped_sweep_has_no_estimate_and_no_polling() -> None:
    st = experiments.status(
        ok=20,
        failed=0,
        planned=28,
        cut_runs=8,
        first_started=NOW - dt.timedelta(hours=2),
        last_finished=NOW - dt.timedelta(hours=1),
        wall_p90_s=4.0,
        now=NOW,
    )
    assert st.state == "stopped" and not st.live and st.eta_s is None
    assert st.remaining == 8 and st.cut_runs == 8 and "never ran" in st.why
    assert "stopped" in st.eta_text and "min" not in st.eta_text


def test_a_running_sweep_has_an_estimate_a_complete_one_is_done() -> None:
    running = experiments.status(
        ok=10,
        failed=0,
        planned=20,
        first_started=NOW - dt.timedelta(seconds=100),
        last_finished=NOW - dt.timedelta(seconds=5),
        wall_p90_s=10.0,
        now=NOW,
    )
    assert running.state == "running" and running.live and running.eta_s == pytest.approx(95.0)
    done = experiments.status(
        ok=20, failed=0, planned=20, first_started=NOW, last_finished=NOW, wall_p90_s=1.0, now=NOW
    )
    assert (done.state, done.eta_text, done.live) == ("complete", "done", False)
    unknown = experiments.status(
        ok=3,
        failed=0,
        planned=None,
        planned_note="no spec text",
        first_started=NOW,
        last_finished=NOW,
        wall_p90_s=1.0,
        now=NOW,
    )
    assert "no spec text" in unknown.eta_text


def test_fig_grid_domains_and_shared_axes() -> None:
    fig = Fig(rows=2, cols=2, shared_xaxes=True, shared_yaxes=True, subplot_titles=["a", "b"])
    d = fig.to_dict()["layout"]
    assert d["xaxis"]["domain"][0] == 0 and d["xaxis2"]["domain"][1] == pytest.approx(1)
    assert d["xaxis"]["matches"] == "x3" and d["yaxis2"]["matches"] == "y"
    assert d["yaxis3"]["domain"][0] == pytest.approx(0) and d["yaxis"]["domain"][1] == pytest.approx(1)


def test_one_colour_per_pattern_one_dash_and_marker_per_notifier() -> None:
    assert style.colour_for("hsha") == "#E69F00"
    assert style.colour_for(12.5) == style.colour_for(12.5)  # not Python's randomised hash
    assert set(style.PATTERN_COLOUR.values()) <= set(marks.OKABE_ITO + marks.TOL_MUTED)
    assert marks.GREY not in style.PATTERN_COLOUR.values()  # the grey of unused cores, not a pattern
    # Every pattern and notifier of the vocabulary has its own, from one place.
    assert set(style.PATTERN_COLOUR) == set(PATTERNS) and len(set(style.PATTERN_COLOUR.values())) == len(
        PATTERNS
    )
    assert set(style.NOTIFIER_DASH) == set(NOTIFIERS) and len(set(style.NOTIFIER_DASH.values())) == len(
        NOTIFIERS
    )
    assert len(set(style.NOTIFIER_SYMBOL.values())) == len(NOTIFIERS)
    assert (
        experiments.humanize_seconds(3725) == "1 h 02 min" and experiments.humanize_seconds(None) == "unknown"
    )


def test_an_empty_figure_says_why_and_hides_its_axes() -> None:
    fig = base.empty_figure("no runs yet", 220)
    assert fig["data"] == []
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["no runs yet"]
    assert fig["layout"]["height"] == 220
    assert fig["layout"]["xaxis"]["visible"] is False and fig["layout"]["yaxis"]["visible"] is False


def test_latency_bars_per_known_percentile_on_a_log_axis_sized_to_them() -> None:
    fig = run.latency_figure(
        {"p50": 10.0, "p90": 20.0, "p99": 300.0, "p999": None, "max": 1000.0, "mean": 15.2}
    )
    (bars,) = fig["data"]
    assert bars["x"] == ["p50", "p90", "p99", "max"]  # the unknown p999 is left out, the order kept
    assert bars["y"] == [10.0, 20.0, 300.0, 1000.0]
    low, high = fig["layout"]["yaxis"]["range"]
    assert fig["layout"]["yaxis"]["type"] == "log" and low < 1.0 < 3.0 < high  # log10(10) .. log10(1000)
    assert [s["y0"] for s in fig["layout"]["shapes"]] == [15.2]  # the mean, as a line
    assert run.latency_figure(None)["layout"]["annotations"][0]["text"].startswith("no latency percentiles")


def test_progress_shows_ok_runs_by_design_in_time_order_and_failures_at_zero() -> None:
    """The latest runs were one line joining ten runs of different designs (calibration runs too): now a
    series per design, markers only, calibration runs apart and open."""
    t0 = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
    latest = pd.DataFrame(
        {
            "finished_at": [t0 + dt.timedelta(seconds=20), t0, None, t0 + dt.timedelta(seconds=10), t0],
            "ingested_at": [t0 + dt.timedelta(seconds=21), t0, t0 + dt.timedelta(seconds=5), t0, t0],
            "status": ["ok", "ok", "failed", "failed", "ok"],
            "throughput_msgs_per_s": [200.0, 100.0, None, None, 50.0],
            "point_key": ["b", "a", "c", "d", "e/instr"],
            "failure_reason": [None, None, "client stall", "server crashed", None],
            "pattern": ["hsha", "hsha", "lf", "lf", "hsha"],
            "notifier": ["select", "select", "poll", "poll", "select"],
            "instrument": [False, False, False, False, True],
        }
    )
    ok, calibration, failed = experiments.progress_figure(latest)["data"]
    assert ok["name"] == "hsha · select" and ok["mode"] == "markers"  # never a line across designs
    assert ok["y"] == [100.0, 200.0] and ok["text"] == ["a", "b"]  # by the time each finished
    assert calibration["name"] == "hsha · select (calibration)" and calibration["marker"]["symbol"].endswith(
        "-open"
    )
    assert failed["y"] == [0, 0] and failed["text"] == ["client stall", "server crashed"]  # no finish: ingest
    assert experiments.progress_figure(latest.iloc[0:0])["layout"]["annotations"][0]["text"] == "no runs yet"
    assert experiments.cut_text(4, 8) == "4 points (8 runs)" and experiments.cut_text(0, 0) == "none"


def test_rates_the_paper_does_not_measure_have_no_paper_value() -> None:
    """α, the untimed CPU, the client and the scheduler's wake-up are instant in paper_rates (not measured in
    seed 001): the table shows no paper time for them (no 0.001 µs bar, no ratio of thousands)."""
    from demuxlab.dashboard.whatif import paper

    rates = {
        "r_e": 2.0,
        "r_n": 0.1,
        "r_w": 0.09,
        "r_x": 1000.0,
        "speed": 1.0,
        "source": {"r_w": "fit:monitor wait_s", "r_x": "instant:not in seed 001"},
    }
    cals = pd.DataFrame([{"id": 3, "pattern": "hsha", "notifier": "select", "rates": rates}])
    table = model.rates_table(cals, paper(), ("r_e",))
    by_rate = {row["rate"]: row for _, row in table.iterrows()}
    assert by_rate["r_e"]["paper_us"] == 2.9 and by_rate["r_e"]["ratio"] == pytest.approx(0.5 / 2.9, abs=1e-3)
    for k in ("r_n", "r_w"):
        assert math.isnan(by_rate[k]["paper_us"]) and pd.isna(by_rate[k]["ratio"])
    assert by_rate["r_w"]["calibrated_us"] == pytest.approx(11.1111, abs=1e-4)
    # left instant by the calibration: no time (the 1 ns placeholder is not a measurement), the reason kept;
    # and no empty place for it among the bars
    assert math.isnan(by_rate["r_x"]["calibrated_us"]) and by_rate["r_x"]["from"] == "instant:not in seed 001"
    ticks = model.rates_figure(table)["layout"]["xaxis"]["categoryarray"]
    assert ticks == [model._tick(r) for r in ("r_e", "r_n", "r_w")]


def test_a_refused_calibration_shows_its_self_check() -> None:
    """Where the calibrated line is missing, the Model page shows why: the fitted model against its own
    calibration runs, side by side, with the error."""
    states = pd.DataFrame(
        [
            {
                "calibration_id": 9,
                "pattern": "lf",
                "notifier": "select",
                "hardware_class": None,
                "refused": "misses its own runs by 32 %",
                "self_check": [
                    {
                        "threads": 1,
                        "connections": 32,
                        "measured_msgs_per_s": 80_000.0,
                        "predicted_msgs_per_s": 54_400.0,
                        "rel_error": -0.32,
                    }
                ],
            },
            {
                "calibration_id": 10,
                "pattern": "hsha",
                "notifier": "poll",
                "hardware_class": None,
                "refused": None,
            },
        ]
    )
    fig = model.selfcheck_figure(states)
    measured, predicted = fig["data"]
    assert measured["x"] == ["lf/select<br>1 thr, 32 conn"] and measured["y"] == [80_000.0]
    assert predicted["y"] == [54_400.0] and predicted["text"] == ["54.4k"]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["-32%"]
    assert (
        "no refused calibration"
        in model.selfcheck_figure(states.iloc[1:])["layout"]["annotations"][0]["text"]
    )
