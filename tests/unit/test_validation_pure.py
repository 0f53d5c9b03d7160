"""The model stages' pure parts (demuxlab.validation's calibration, prediction and rows modules): plain
values in and out, no database; the stages against a real database are tests/ctmc/test_validation.py."""

from __future__ import annotations

from typing import Any

import pytest

from demuxlab.ctmc.predict import Prediction
from demuxlab.ctmc.rates import INSTANT_RATE, PATTERNS, paper_rates
from demuxlab.errors import DemuxlabError
from demuxlab.validation.calibration import (
    CalibrationOutcome,
    CalibrationRun,
    calibration_ids,
    calibration_keys,
    calibrations_doc,
    fit_calibration,
)
from demuxlab.validation.prediction import (
    ModelPoint,
    classes_of,
    drop_unsettled,
    plan_predictions,
    prediction_entries,
    predictions_message,
)
from demuxlab.validation.rows import (
    StoredPrediction,
    measured_by_point,
    summarize_errors,
    validation_table,
)
from demuxlab.vocab import SOURCE_CALIBRATION, SOURCE_PAPER

SHA = "ab" * 32


def point(pid: int, pattern: str = "lf", threads: int = 2, **kw: Any) -> ModelPoint:
    fields: dict[str, Any] = {"notifier": "epoll-lt", "work_us": 10.0, "connections": 8, "rate": None}
    fields.update(kw)
    key = f"{pattern}/{fields['notifier']}/t{threads}/w{fields['work_us']:g}"
    return ModelPoint(pid, key, pattern, fields.pop("notifier"), threads, **fields)


def test_calibration_keys_one_per_class_and_one_without_runs() -> None:
    seen = [("lf", "poll", "hw-b"), ("lf", "poll", "hw-a"), ("lf", "poll", "hw-a"), ("hsha", "select", None)]
    keys = calibration_keys([("lf", "poll"), ("hsha", "select"), ("lf", "epoll-et")], seen)
    assert keys == [
        ("hsha", "select", None),
        ("lf", "epoll-et", None),  # no run at all: one key, no class (its outcome says why)
        ("lf", "poll", "hw-a"),
        ("lf", "poll", "hw-b"),
    ]


def test_a_pair_without_successful_runs_is_an_outcome_not_an_error() -> None:
    fit = fit_calibration(("lf", "poll", "hw-a"), [], 3, "exp", SHA)
    assert fit.rates is None and fit.outcome.calibration_id is None
    assert fit.outcome.error == "no successful calibration run (3 failed)"
    assert (
        fit.outcome.message
        == "calibration lf/poll on class hw-a: not fitted: no successful calibration run (3 failed)"
    )


def test_unusable_timings_are_refused_with_the_reason() -> None:
    run = CalibrationRun("r1", {"pattern": "lf", "ops": {}}, 1000.0, 8, 1, {"sha256": "x"}, "native")
    fit = fit_calibration(("lf", "poll", None), [run], 0, "exp", SHA)
    assert fit.rates is None and fit.outcome.source_runs == ["r1"]
    assert fit.outcome.error and "lf" in fit.outcome.error


def test_the_wake_up_measured_beside_the_runs_is_charged() -> None:
    """The runs' pinning carries ω (demuxlab.launch.wake); the fit charges their median to HSHA's and the
    proactor's client (r_v), and a pinning without one (two hosts, not measured, junk) charges none."""
    from demuxlab.validation.calibration import pinned_us
    from helpers.ctmc_runs import server_json

    pinnings = ({"wake_us": 8.25}, {}, None, {"wake_us": "8"}, {"wake_us": -1})
    assert [pinned_us(p, "wake_us") for p in pinnings] == [8.25, None, None, None, None]
    client = {"threads": 1, "messages": 3000, "cpu_s": {"user": 0.012, "sys": 0.012}}
    res = server_json("proactor", 2.0, alpha_us=1.0, work_us=0.0, connections_accepted=2)

    def run(rid: str, omega: float | None) -> CalibrationRun:
        return CalibrationRun(rid, res, None, 2, 1, {"sha256": "x"}, "native", client, None, omega)

    fit = fit_calibration(
        ("proactor", "epoll-lt", None), [run("a", 4.0), run("b", 5.0), run("c", None)], 0, "e", SHA
    )
    assert fit.rates is not None and fit.rates.wakes
    assert 1 / fit.rates.r_v == pytest.approx(4.5) and fit.outcome.rate_sources is not None
    assert fit.outcome.rate_sources["r_v"] == "wake-cost 4.5 µs at the client's share"
    fit = fit_calibration(("proactor", "epoll-lt", None), [run("a", None)], 0, "e", SHA)
    assert fit.rates is not None and not fit.rates.wakes and 1 / fit.rates.r_z == pytest.approx(8.0)


def test_the_lock_hand_off_measured_beside_the_runs_is_charged_to_uring_shared() -> None:
    """The pinning's ``handoff_us`` (measured with ω): the fit charges the runs' median to uring-shared's
    submission lock (r_h) and to no client (r_v stays instant there); runs without it charge none."""
    from demuxlab.validation.calibration import pinned_us
    from helpers.ctmc_runs import server_json

    assert pinned_us({"wake_us": 8.0, "handoff_us": 21.5}, "handoff_us") == 21.5
    assert pinned_us({"wake_us": 8.0}, "handoff_us") is None
    res = server_json("uring-shared", 2.0)

    def run(rid: str, handoff: float | None) -> CalibrationRun:
        return CalibrationRun(
            rid, res, None, 8, 1, {"sha256": "x"}, "native", wake_us=9.0, handoff_us=handoff
        )

    fit = fit_calibration(
        ("uring-shared", "uring", None), [run("a", 20.0), run("b", 30.0), run("c", None)], 0, "e", SHA
    )
    assert fit.rates is not None and 1 / fit.rates.r_h == pytest.approx(25.0)
    assert fit.rates.r_v == INSTANT_RATE and fit.outcome.rate_sources is not None
    assert fit.outcome.rate_sources["r_h"].startswith("handoff_us: 25 µs, the submission lock's hand-off")
    fit = fit_calibration(("uring-shared", "uring", None), [run("a", None)], 0, "e", SHA)
    assert fit.rates is not None and fit.rates.r_h == INSTANT_RATE


def test_a_refusal_is_carried_with_its_reason_and_self_check_figure() -> None:
    """Issue 43: a design whose calibration is refused keeps, in its outcome (calibrations.json, the stored
    refusal), the status, the reason with its figure, and the self-check comparison that refused it, which
    names the plain runs it was judged against."""
    from demuxlab.ctmc.calibrate import calibrate, self_check
    from demuxlab.validation.calibration import PlainCalibrationRun
    from helpers.ctmc_runs import server_json

    res = server_json("reactor", 2.0, work_us=10.0, connections_accepted=4)
    (own,) = self_check(calibrate([res], "reactor"), "reactor", [res], [1.0])
    plain = {**res, "instrument": False, "ops": {}}
    for key in ("events_per_call", "notify_by_events"):
        plain.pop(key)
    runs = [CalibrationRun("i1", res, own.predicted_msgs_per_s, 4, 1, {"sha256": "x"}, "native")]
    slow = [PlainCalibrationRun("p1", plain, 0.7 * own.predicted_msgs_per_s, 4)]  # a third slower
    fit = fit_calibration(("reactor", "epoll-lt", None), runs, 0, "exp", SHA, slow)
    doc = fit.outcome.to_json()
    assert fit.rates is None and doc["status"] == "refused" and doc["plain_runs"] == ["p1"]
    assert doc["error"].startswith("calibrate reactor/epoll-lt: refused: the fitted rates predict ")
    assert "for the plain runs of their calibration point run(s) at 10 µs work" in doc["error"]
    worst = doc["self_check_worst"]
    assert worst["against"] == "plain" and worst["rel_error"] == pytest.approx(1 / 0.7 - 1, abs=0.05)
    assert f"{worst['rel_error']:+.1%}" in doc["error"] and doc["self_check"] == [worst]
    # the same runs with plain runs that agree: fitted, judged against them
    fair = [PlainCalibrationRun("p1", plain, own.predicted_msgs_per_s, 4)]
    ok = fit_calibration(("reactor", "epoll-lt", None), runs, 0, "exp", SHA, fair).outcome.to_json()
    assert ok["status"] == "fitted" and ok["error"] is None and ok["self_check_worst"]["against"] == "plain"
    assert fit_calibration(("lf", "poll", None), [], 3, "exp", SHA).outcome.to_json()["status"] == "no runs"


def test_the_recommendation_names_a_refused_design_with_its_reason() -> None:
    """Issue 43 item 6: calibrations.json's refusals, the reasons the recommendation's model_missing gives
    (``demuxlab claims --calibrations``): each design without a calibration with its reason and figure; a
    fitted pair is not listed."""
    from demuxlab.validation.calibration import calibrations_doc, missing_reasons

    refused = CalibrationOutcome(
        "lf", "epoll-lt", None, None, None, ["r1"], 0, "calibrate lf/epoll-lt: refused: … (+16.0%; …)"
    )
    fitted = CalibrationOutcome("hsha", "epoll-lt", 7, {"r_l": 1.0}, {"r_l": "paper"}, ["r2"], 0, None)
    doc = calibrations_doc("exp", SHA, [refused, fitted])
    why = missing_reasons(doc, "calibrations.json", SHA)
    assert why == {("lf", "epoll-lt"): "calibration refused: calibrate lf/epoll-lt: refused: … (+16.0%; …)"}
    with pytest.raises(DemuxlabError, match="is not this spec's"):
        missing_reasons(doc, "calibrations.json", "cd" * 32)


def test_stored_outcome_and_document_round_trip() -> None:
    outcome = CalibrationOutcome("lf", "poll", None, {"r_l": 1.0}, {"r_l": "paper"}, ["r1"], 0, None)
    fit = fit_calibration(("lf", "poll", None), [], 0, "exp", SHA)
    stored = type(fit)(outcome).stored(7)
    assert stored.calibration_id == 7 and stored.message == "calibration lf/poll: id 7 from 1 runs"
    doc = calibrations_doc("exp", SHA, [stored, fit.outcome])
    assert calibration_ids(doc, "cal.json", SHA) == {("lf", "poll", None): 7}  # the unfitted one is left out


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "not the output of"),
        ({"spec_sha256": "cd" * 32, "calibrations": []}, "is not this spec's"),
        ({"spec_sha256": SHA, "calibrations": [3]}, r"calibrations\[0\]: not an object"),
        ({"spec_sha256": SHA, "calibrations": [{"calibration_id": "7"}]}, "not an integer"),
        ({"spec_sha256": SHA, "calibrations": [{"calibration_id": 7, "hardware_class": 1}]}, "not a string"),
    ],
)
def test_bad_calibrations_documents_are_one_line(doc: Any, message: str) -> None:
    with pytest.raises(DemuxlabError, match=message) as err:
        calibration_ids(doc, "cal.json", SHA)
    assert err.value.message.startswith("cal.json: ") and "\n" not in err.value.message


def test_plan_skips_what_the_models_do_not_describe() -> None:
    pts = [
        point(1, classes=("hw-a", "hw-b")),
        point(2, work_us=0.0),
        point(3, rate=5000.0),
    ]
    rates = paper_rates("lf")
    plan = plan_predictions(
        pts, {("lf", "epoll-lt", "hw-a"): 11}, {11: rates}, method="exact", rel_ci=0.05, seed=3
    )
    # Work 0 is predicted too (issue 19: the work step is then instant); open loops are not.
    assert [(pt.point_id, cal) for pt, cal in plan.jobs] == [(1, None), (1, 11), (2, None)]
    assert [r.rates for r in plan.requests] == [None, rates, None]
    assert all(r.notifier == "epoll-lt" for r in plan.requests)
    assert all((r.method, r.rel_ci, r.seed) == ("exact", 0.05, 3) for r in plan.requests)
    reasons = {
        (s["point_key"], s["rates_source"], s.get("hardware_class")): s["skipped"] for s in plan.skipped
    }
    assert (
        reasons[(pts[0].point_key, SOURCE_CALIBRATION, "hw-b")]
        == "no calibration of lf/epoll-lt on class hw-b"
    )
    assert reasons[(pts[2].point_key, SOURCE_PAPER, None)].startswith("open-loop load")

    made = [Prediction("lf", 2, 10.0, 8, "exact", 1000.0 + i, None, {}) for i in range(3)]
    entries = prediction_entries(plan, made, [101, 102, 103], {("lf", "epoll-lt", "hw-a"): 11})
    assert [e["point_key"] for e in entries] == sorted(e["point_key"] for e in entries)
    calibrated = next(e for e in entries if e.get("prediction_id") == 102)
    assert (calibrated["rates_source"], calibrated["calibration_id"], calibrated["hardware_class"]) == (
        SOURCE_CALIBRATION,
        11,
        "hw-a",
    )
    assert predictions_message(entries) == "predictions: 3 stored, 4 skipped"


def test_a_fluid_that_did_not_settle_is_skipped_not_stored() -> None:
    """A stalled fluid's value is no prediction (Prediction.settled): its pair leaves the plan for the
    skipped entries, with the reason and the calibration's class, and the rest are stored as planned."""
    pts = [point(1, classes=("hw-a",)), point(2)]
    ids = {("lf", "epoll-lt", "hw-a"): 11}
    plan = plan_predictions(pts, ids, {11: paper_rates("lf")}, method="fluid", rel_ci=0.01, seed=0)
    assert [(pt.point_id, cal) for pt, cal in plan.jobs] == [(1, None), (1, 11), (2, None)]

    def made(value: float, converged: bool) -> Prediction:
        return Prediction("lf", 2, 10.0, 8, "fluid", value, None, {"converged": converged})

    got = drop_unsettled(plan, [made(5e4, True), made(600.0, False), made(6e4, True)], classes_of(ids))
    assert [p.throughput_msgs_per_s for p in got] == [5e4, 6e4]
    assert [(pt.point_id, cal) for pt, cal in plan.jobs] == [(1, None), (2, None)]
    assert len(plan.requests) == 2 and plan.requests[1].rates is None
    assert plan.skipped[0]["skipped"] == "no calibration of lf/epoll-lt"  # point 2's, as planned
    assert plan.skipped[1:] == [
        {
            "point_key": pts[0].point_key,
            "rates_source": SOURCE_CALIBRATION,
            "skipped": "the fluid approximation did not settle (one connection per thread or fewer): "
            "use the SSA",
            "hardware_class": "hw-a",
        }
    ]
    entries = prediction_entries(plan, got, [101, 102], ids)
    assert predictions_message(entries) == "predictions: 2 stored, 2 skipped"
    assert made(1.0, False).as_dict()["throughput_msgs_per_s"] == 1.0  # the solver's value is kept there
    assert not made(1.0, False).settled and Prediction("lf", 2, 10.0, 8, "ssa", 1.0, 0.01, {}).settled


def test_measured_rows_are_the_modelled_patterns_only() -> None:
    rows = [
        {"point_key": f"{p}/x", "hardware_class": None, "instrument": False, "pattern": p}
        for p in ("reactor", *PATTERNS)
    ]
    rows.append({"point_key": "lf/x/instr", "hardware_class": None, "instrument": True, "pattern": "lf"})
    assert sorted(k for k, _ in measured_by_point(rows)) == sorted(f"{p}/x" for p in PATTERNS)


def test_table_takes_the_newest_prediction_of_the_points_own_class() -> None:
    pt = point(1, classes=("hw-a", "hw-b"))
    measured = {
        (pt.point_key, "hw-a"): {"throughput_mean": 1000.0, "runs_ok": 2, "throughput_ci_halfwidth_rel": 0.1},
        (pt.point_key, "hw-b"): {"throughput_mean": 2000.0, "runs_ok": 2, "throughput_ci_halfwidth_rel": 0.2},
    }
    preds = [
        StoredPrediction(1, SOURCE_PAPER, None, 900.0, None, None),
        StoredPrediction(1, SOURCE_PAPER, None, 1100.0, None, None),  # newer: wins
        StoredPrediction(1, SOURCE_CALIBRATION, "hw-a", 1200.0, 0.01, 5),
    ]
    rows = validation_table([pt], measured, preds, "ssa")
    assert [r["hardware_class"] for r in rows] == ["hw-a", "hw-b"]
    a, b = rows
    assert a["paper_msgs_per_s"] == b["paper_msgs_per_s"] == 1100.0
    assert a["paper_rel_error"] == pytest.approx(0.1) and b["paper_rel_error"] == pytest.approx(-0.45)
    assert (a["calibration_id"], a["calibration_rel_error"]) == (5, pytest.approx(0.2))
    # hw-b has no calibration of its own: never hw-a's.
    assert b["calibration_msgs_per_s"] is None and b["calibration_rel_error"] is None
    summary = summarize_errors(rows)
    assert [(s["hardware_class"], s["rates_source"], s["points"]) for s in summary] == [
        ("hw-a", SOURCE_CALIBRATION, 1),
        ("hw-a", SOURCE_PAPER, 1),
        ("hw-b", SOURCE_PAPER, 1),
    ]


def test_a_point_without_measurement_keeps_its_row() -> None:
    (row,) = validation_table([point(4, threads=3)], {}, [], "fluid")
    assert (row["runs_ok"], row["measured_msgs_per_s"], row["paper_rel_error"], row["method"]) == (
        0,
        None,
        None,
        "fluid",
    )


def test_equal_lines_of_a_panel_are_drawn_apart(tmp_path: Any) -> None:
    """One pattern's paper-rate lines are the same for every notifier: drawn at the same x they hide each
    other. Each line is drawn at its own offset, within ±DODGE_SPAN/2 of its thread count, in both rows."""
    from demuxlab.validation.plot import DODGE_SPAN, draw_validation, plot_validation

    rows = [
        {
            "pattern": "lf",
            "notifier": notifier,
            "hardware_class": None,
            "work_us": 10.0,
            "connections": 8,
            "threads": threads,
            "measured_msgs_per_s": 50_000.0 * threads,
            "measured_ci_halfwidth_rel": 0.02,
            "paper_msgs_per_s": 60_000.0 * threads,
            "paper_rel_error": 0.2,
            "calibration_msgs_per_s": None,
            "calibration_rel_error": None,
        }
        for notifier in ("epoll-lt", "poll", "select")
        for threads in (1, 2, 4)
    ]
    fig = draw_validation(rows, "dodge")
    top, bottom = fig.axes[0], fig.axes[1]
    for ax in (top, bottom):
        lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert len(lines) == 3  # one paper line per notifier, none dropped
        xs = [tuple(float(v) for v in ln.get_xdata()) for ln in lines]
        assert len(set(xs)) == 3  # equal values, three distinct positions
        for pos in xs:
            for x, threads in zip(pos, (1, 2, 4), strict=True):
                assert abs(x - threads) <= DODGE_SPAN / 2 + 1e-12
    path = tmp_path / "validation.png"
    plot_validation(rows, "dodge", path)
    assert path.stat().st_size > 10_000


def test_a_fluid_whose_integrator_gave_up_is_skipped_with_that_reason() -> None:
    pts = [point(1)]
    plan = plan_predictions(pts, {}, {}, method="fluid", rel_ci=0.01, seed=0)
    failed = Prediction(
        "lf", 2, 10.0, 8, "fluid", float("nan"), None,
        {"converged": False, "failed": "fluid lf: ODE solver failed: step size underflow"},
    )  # fmt: skip
    assert drop_unsettled(plan, [failed], {}) == [] and not plan.jobs
    assert plan.skipped[-1]["skipped"] == "fluid lf: ODE solver failed: step size underflow: use the SSA"
