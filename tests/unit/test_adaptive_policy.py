"""The adaptive policy (demuxlab.adaptive, demuxlab.spec.adaptive, demuxlab.steady): pure decisions over
made-up runs whose truth is known."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from demuxlab.adaptive.guide import Curve
from demuxlab.adaptive.policy import (
    CALIBRATION,
    COARSE,
    CROSSING,
    INTERVAL,
    MISS,
    PEAK,
    Design,
    Request,
    Round,
    next_round,
    rank,
)
from demuxlab.adaptive.replay import RunIndex, replay_fetch, run_policy
from demuxlab.adaptive.runs import Observed, observe, stopped_when_steady
from demuxlab.errors import DemuxlabError
from demuxlab.point import Point
from demuxlab.spec.adaptive import Adaptive, PointRule, RepeatRule, coarse_points, spread
from demuxlab.stats import point_summary
from demuxlab.steady import SteadyRule, check, first_stop

THREADS = (1, 2, 3, 4, 6, 8)


def pt(
    pattern: str, threads: int, notifier: str = "epoll-lt", work: float = 0.0, instr: bool = False
) -> Point:
    return Point(pattern, notifier, threads, work, 64, 1, 1, None, instr)


def grid(*patterns: str) -> tuple[Point, ...]:
    return tuple(pt(p, t) for p in patterns for t in THREADS)


REPEATS = RepeatRule(3, 5, 0.05)
POINTS = PointRule(3, 0.05)


def settings(
    repeats: RepeatRule | None = REPEATS,
    steady: SteadyRule | None = None,
    points: PointRule | None = POINTS,
    budget_h: float | None = None,
) -> Adaptive:
    return Adaptive(budget_h, repeats, steady, points)


def design(points: tuple[Point, ...], s: Adaptive, calibration: tuple[Point, ...] = ()) -> Design:
    return Design(points, calibration, 5, 2, 11.0, 7, s)


def run(point: Point, repeat: int, value: float | None, measured_s: float = 10.0) -> Observed:
    return Observed(
        point=point,
        repeat=repeat,
        ok=value is not None,
        throughput=value,
        warmup_s=1.0,
        measured_s=measured_s,
        cooldown_s=0.0,
        host="h",
        server_cpus=8,
    )


def truth_runner(
    truth: Callable[[Point], float], noise: Callable[[Point], float]
) -> Callable[[Request], Observed]:
    """Runs from a known curve: mean truth(p), relative noise noise(p), seeded by point and repeat."""

    def fetch(req: Request) -> Observed:
        rng = random.Random(f"{req.point.point_key}|{req.repeat}")
        return run(req.point, req.repeat, truth(req.point) * (1 + noise(req.point) * rng.gauss(0, 1)))

    return fetch


def drive(d: Design, fetch: Callable[[Request], Observed]) -> tuple[list[Round], list[Observed]]:
    history: list[Round] = []
    runs: list[Observed] = []
    while True:
        rnd = next_round(d, history, runs)
        history.append(rnd)
        if rnd.stop is not None:
            return history, runs
        runs += [fetch(r) for r in rnd.requests]


# -- the coarse design ------------------------------------------------------------------------------------


def test_spread_keeps_both_ends_and_spaces_evenly() -> None:
    assert spread(6, 3) == [0, 2, 5]
    assert spread(6, 2) == [0, 5]
    assert spread(2, 3) == [0, 1]
    assert spread(9, 5) == [0, 2, 4, 6, 8]


def test_coarse_points_per_curve_and_all_without_model_guided_points() -> None:
    points = grid("lf", "hsha")
    coarse = coarse_points(points, settings())
    assert [(p.pattern, p.threads) for p in coarse] == [
        ("lf", 1), ("lf", 3), ("lf", 8), ("hsha", 1), ("hsha", 3), ("hsha", 8)
    ]  # fmt: skip
    assert coarse_points(points, settings(points=None)) == list(points)


def test_first_round_is_the_coarse_design_at_the_minimum_and_every_calibration_run() -> None:
    cal = (pt("lf", 1, instr=True),)
    d = design(grid("lf"), settings(), cal)
    first = next_round(d, [], [])
    coarse = [r for r in first.requests if r.kind == COARSE]
    assert sorted((r.point.threads, r.repeat) for r in coarse) == [
        (t, r) for t in (1, 3, 8) for r in range(3)
    ]
    assert sorted(r.repeat for r in first.requests if r.kind == CALIBRATION) == [0, 1]
    keys = [rank(7, r.point.point_key, r.repeat) for r in first.requests]
    assert keys == sorted(keys)  # randomized as the fixed design's run order, by the spec's seed
    fixed = next_round(design(grid("lf"), settings(repeats=None, points=None)), [], [])
    assert len(fixed.requests) == 6 * 5  # nothing adaptive about the first round then


# -- sequential repeats -----------------------------------------------------------------------------------


def test_a_tight_point_stops_at_the_minimum_and_a_noisy_one_goes_on_to_the_maximum() -> None:
    quiet, loud = pt("reactor", 1, "poll"), pt("reactor", 1, "select")
    d = design((quiet, loud), settings(points=None))
    # The noisy one is far below the quiet one: no tie between them for the best of the workload.
    history, runs = drive(
        d, truth_runner(lambda p: 1000.0 if p == quiet else 300.0, lambda p: 0.001 if p == quiet else 0.3)
    )
    counts = {p.point_key: sum(1 for r in runs if r.point == p) for p in (quiet, loud)}
    assert counts == {quiet.point_key: 3, loud.point_key: 5}
    reasons = [r.reason for rnd in history for r in rnd.requests if r.kind == INTERVAL]
    assert reasons and all("wider than ±5.0%" in why for why in reasons)
    assert history[-1].stop is not None and history[-1].stop.startswith("converged")


def test_failed_runs_count_as_repeats_and_get_another_run() -> None:
    p = pt("reactor", 1)
    d = design((p,), settings(points=None))
    first = next_round(d, [], [])
    runs = [run(p, 0, None), run(p, 1, None), run(p, 2, 1000.0)]
    second = next_round(d, [first], runs)
    assert [(r.repeat, r.kind) for r in second.requests] == [(3, INTERVAL)]
    assert "1 successful run" in second.requests[0].reason


def test_a_run_asked_for_without_its_record_is_an_error() -> None:
    p = pt("reactor", 1)
    d = design((p,), settings(points=None))
    first = next_round(d, [], [])
    with pytest.raises(DemuxlabError, match="repeat 2 was asked for but has no record"):
        next_round(d, [first], [run(p, 0, 1.0), run(p, 1, 1.0)])


# -- model-guided points ----------------------------------------------------------------------------------


def test_the_peak_is_found_beside_the_coarse_design() -> None:
    # LF over 1-12 threads peaks at 5; the coarse design measures 1, 6, 12.
    points = tuple(pt("lf", t) for t in range(1, 13))
    d = design(points, settings())
    history, runs = drive(d, truth_runner(lambda p: 300.0 - 20.0 * abs(p.threads - 5), lambda p: 0.005))
    measured = {r.point.threads for r in runs}
    assert {4, 5, 6} <= measured
    peaks = [r for rnd in history for r in rnd.requests if r.kind == PEAK]
    assert peaks and "peak of lf/epoll-lt" in peaks[0].reason
    assert len(measured) < 12  # it did not measure everything


def test_where_two_curves_cross_is_measured() -> None:
    # HSHA above LF at few threads, below at many: the order changes between 3 and 8.
    d = design(grid("lf", "hsha"), settings(repeats=RepeatRule(3, 3, 0.5)))
    lf = {1: 100.0, 2: 110.0, 3: 120.0, 4: 200.0, 6: 210.0, 8: 220.0}
    hsha = {t: 160.0 for t in THREADS}
    truth = {"lf": lf, "hsha": hsha}
    history, runs = drive(d, truth_runner(lambda p: truth[p.pattern][p.threads], lambda p: 0.002))
    crossing = [r for rnd in history for r in rnd.requests if r.kind == CROSSING]
    assert crossing and "cross between" in crossing[0].reason
    measured = {(r.point.pattern, r.point.threads) for r in runs}
    assert {("lf", 4), ("hsha", 4)} <= measured or {("lf", 6), ("hsha", 6)} <= measured


def test_a_model_miss_measures_between_the_point_and_its_neighbours() -> None:
    # A flat curve with a dip at 3 threads: interpolating 1 and 8 misses 3 by far.
    p = grid("multireactor")
    d = design(p, settings(repeats=RepeatRule(3, 3, 0.5)))
    truth = {1: 100.0, 2: 100.0, 3: 60.0, 4: 100.0, 6: 100.0, 8: 100.0}
    history, runs = drive(d, truth_runner(lambda q: truth[q.threads], lambda q: 0.002))
    misses = [r for rnd in history for r in rnd.requests if r.kind == MISS]
    assert misses and "misses multireactor/epoll-lt/t3" in misses[0].reason
    assert any(rnd.misses for rnd in history)
    assert {r.point.threads for r in runs} >= {2, 4}


def test_the_ctmc_shape_is_scaled_to_the_measurements_and_judged_leave_one_out() -> None:
    points = grid("lf")
    model = {p.point_key: 10.0 * p.threads for p in points}  # the model says linear
    summaries = {p.point_key: point_summary([20.0 * p.threads] * 2) for p in points if p.threads in (1, 8)}
    curve = Curve(points, summaries, model)
    assert curve.modelled
    at4 = curve.predict(points[3])
    assert at4 == pytest.approx(80.0)  # the model's shape at twice its level
    plain = Curve(points, summaries, {})
    assert not plain.modelled
    assert plain.predict(points[3]) == pytest.approx(20.0 + (160.0 - 20.0) * 3 / 7)
    # A measured middle point the shape predicts well is no miss; one it does not is.
    summaries[points[2].point_key] = point_summary([60.0, 60.0])
    assert Curve(points, summaries, model).misses(0.05) == []
    summaries[points[2].point_key] = point_summary([30.0, 30.0])
    (miss,) = Curve(points, summaries, model).misses(0.05)
    assert miss.point == points[2] and miss.rel == pytest.approx(1.0)


def test_points_never_measured_are_predicted_not_measured() -> None:
    points = grid("lf")
    summaries = {
        points[0].point_key: point_summary([1.0, 1.0]),
        points[-1].point_key: point_summary([2.0, 2.0]),
    }
    values = Curve(points, summaries, {}).values()
    assert [v.measured for v in values] == [True, False, False, False, False, True]
    assert all(v.ci_low is None for v in values if not v.measured)


# -- the stop -------------------------------------------------------------------------------------------


def test_the_sweep_stops_when_the_budget_cannot_pay_for_more() -> None:
    d = design(grid("lf", "hsha"), settings(budget_h=20 * 11.0 / 3600))  # 20 runs: the coarse design is 18
    history, runs = drive(d, truth_runner(lambda p: 100.0 * p.threads, lambda p: 0.3))
    assert len(runs) <= 20
    assert history[-1].stop is not None and history[-1].stop.startswith("budget spent")
    assert history[-1].dropped > 0


def test_a_stable_answer_with_a_model_that_agrees_stops_the_sweep() -> None:
    d = design(grid("lf"), settings())
    history, runs = drive(d, truth_runner(lambda p: 100.0, lambda p: 0.001))
    assert history[-1].stop is not None and "converged" in history[-1].stop
    assert history[-1].stable is True or not history[-1].requests
    assert len(runs) < 6 * 5


def test_the_policy_is_deterministic() -> None:
    d = design(grid("lf", "hsha"), settings())
    fetch = truth_runner(lambda p: 100.0 + 10 * p.threads, lambda p: 0.05)
    a, _ = drive(d, fetch)
    b, _ = drive(d, fetch)
    assert [r.to_json() for r in a] == [r.to_json() for r in b]


def test_the_replay_takes_runs_from_records_and_refuses_a_missing_one() -> None:
    d = design(grid("lf"), settings(points=None))
    recorded = [run(p, r, 100.0 + r) for p in d.points for r in range(5)]
    outcome, _ = run_policy(d, replay_fetch(d, RunIndex(recorded)))
    assert {(r.point.point_key, r.repeat) for r in outcome.runs} <= {
        (r.point.point_key, r.repeat) for r in recorded
    }
    with pytest.raises(DemuxlabError, match="no run of lf/epoll-lt/t1"):
        run_policy(d, replay_fetch(d, RunIndex(recorded[1:])))
    with pytest.raises(DemuxlabError, match="also in"):
        RunIndex([*recorded, recorded[0]])


# -- runs that end when steady ----------------------------------------------------------------------------


def test_a_steady_run_stops_after_the_minimum_and_a_drifting_one_runs_on() -> None:
    rng = random.Random(3)
    flat = [1000.0 * (1 + 0.004 * rng.gauss(0, 1)) for _ in range(10)]
    stop = first_stop(flat, 4, 0.02)
    assert stop.stop and stop.seconds == 4 and stop.stationary
    ramp = [1000.0 + 60.0 * i for i in range(10)]
    never = first_stop(ramp, 4, 0.02)
    assert not never.stop and never.seconds == 10 and "not stationary" in never.reason
    assert not check(flat[:3], 4, 0.02).stop  # under the minimum
    noisy = [1000.0 * (1 + 0.2 * rng.gauss(0, 1)) for _ in range(10)]
    assert "wider than" in first_stop(noisy, 4, 0.02).reason


def test_a_recorded_run_cut_where_it_became_steady() -> None:
    rng = random.Random(5)
    samples = tuple(500.0 * (1 + 0.003 * rng.gauss(0, 1)) for _ in range(10))
    whole = Observed(pt("lf", 1), 0, True, 500.0, 1.0, 10.0, 0.0, "h", 1, samples)
    cut = stopped_when_steady(whole, 3, 0.02)
    assert cut.measured_s == 3.0 and cut.run_s == 4.0
    assert cut.throughput == pytest.approx(sum(samples[:3]) / 3)
    assert cut.steady is not None and cut.steady["stopped_early"] is True
    assert stopped_when_steady(cut, 3, 0.02) is cut  # a run that had the rule keeps its own decision


def test_a_run_record_is_observed_with_its_host_cpus_and_samples() -> None:
    record: dict[str, Any] = {
        "run_id": "x",
        "point": {**pt("lf", 2).to_json()},
        "repeat": 1,
        "status": "ok",
        "phases": {"warmup_s": 1, "measure_s": 10, "cooldown_s": 0},
        "client": {"per_second": [1.0, 2.0], "duration_s": 10},
        "stats": {"throughput_msgs_per_s": 1.5},
        "hosts": {"server": {"hostname": "box"}},
        "pinning": {"server_cpus": [0]},
    }
    o = observe(record, "r.json")
    assert (o.repeat, o.host, o.server_cpus, o.per_second, o.run_s) == (1, "box", 1, (1.0, 2.0), 11.0)
    with pytest.raises(DemuxlabError, match=r"r.json: field phases: missing"):
        observe({k: v for k, v in record.items() if k != "phases"}, "r.json")
    bad = {**record, "point": {**record["point"], "point_key": "lf/other"}}
    with pytest.raises(DemuxlabError, match="is not its fields' key"):
        observe(bad, "r.json")
    assert math.isclose(observe({**record, "status": "failed"}, "r").run_s, 11.0)


def test_a_fluid_that_does_not_settle_gives_no_shape() -> None:
    """A multireactor thread with one connection of its own stalls the fluid approximation at a tiny
    throughput: that point gets no shape (and a note), the others theirs."""
    from demuxlab.adaptive.models import model_shapes

    def mr(threads: int, connections: int) -> Point:
        return Point("multireactor", "epoll-lt", threads, 5.0, connections, 1, 1, None)

    shapes = model_shapes([mr(1, 4), mr(2, 4), mr(4, 4)], [])
    assert sorted(shapes.by_point) == [mr(1, 4).point_key, mr(2, 4).point_key]
    assert all(v > 50_000 for v in shapes.by_point.values())
    stalled = "the fluid approximation did not settle (one connection per thread or fewer): use the SSA"
    assert f"{mr(4, 4).point_key}: no model ({stalled})" in shapes.notes


# -- why a design has no calibrated prediction -------------------------------------------------------------


def test_the_answer_names_a_refused_calibration_as_recommendations_csv_does() -> None:
    """The adaptive answer's recommendation says why a design has no calibrated prediction: its
    calibration's refusal with the figure (the fit's), not "no calibration prediction"."""
    from demuxlab.adaptive.models import Shapes

    d = design(grid("lf", "hsha"), settings(points=None))
    refused = "calibration refused: the fitted rates predict 30,829 msg/s, measured 14,007 msg/s (+120.1%)"

    def shapes_of(calibration: Sequence[Observed]) -> Shapes:
        del calibration
        preds = [
            {**p.to_json(), "source": "calibration", "mean": 100.0 + 10 * p.threads, "ci_halfwidth_rel": 0.01}
            for p in d.points
            if p.pattern == "lf"
        ]
        return Shapes(predictions=preds, why_missing={("hsha", "epoll-lt"): refused})

    fetch = truth_runner(lambda p: 100.0 + 10 * p.threads, lambda p: 0.01)
    outcome, _ = run_policy(d, fetch, shapes_of)
    assert outcome.answer is not None
    (rec,) = outcome.answer.recommendations
    assert rec.model_source == "calibration" and rec.model_agrees is None
    assert rec.model_missing == (f"hsha/epoll-lt ({refused})",)
    (best,) = outcome.answer.to_json()["best"]
    assert best["model_missing"] == [f"hsha/epoll-lt ({refused})"]


def test_a_pair_the_fit_cannot_calibrate_says_why() -> None:
    from demuxlab.adaptive.models import model_shapes

    shapes = model_shapes([pt("lf", 1), pt("lf", 2)], [])
    assert shapes.why_missing == {
        ("lf", "epoll-lt"): "not calibrated: no successful calibration run (0 failed)"
    }
