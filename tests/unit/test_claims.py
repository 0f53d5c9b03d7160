"""The seed claims' verdicts follow from the data: for every claim, a made-up point table per verdict
(holds, refuted, inconclusive, not testable) must give exactly that verdict; and the recommendation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from demuxlab.claims import (
    CLAIMS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REFUTED,
    Claim,
    Context,
    Part,
    evaluate_claims,
    recommend,
)
from demuxlab.claims.markdown import render_markdown
from demuxlab.errors import DemuxlabError

Row = dict[str, Any]


def pt(
    pattern: str,
    notifier: str,
    threads: int,
    mean_k: float,
    *,
    rel: float = 0.01,
    work: float = 0.0,
    conns: int = 512,
    size: int = 1,
    rate: float | None = None,
    cpus: int | None = None,
    n: int = 5,
    cost: float | None = None,
    cost_rel: float = 0.01,
) -> Row:
    mean = mean_k * 1000.0
    row: Row = {
        "pattern": pattern,
        "notifier": notifier,
        "threads": threads,
        "work_us": work,
        "connections": conns,
        "msg_size": size,
        "rate": rate,
        "mean": mean,
        "ci_low": mean * (1 - rel) if n > 1 else None,
        "ci_high": mean * (1 + rel) if n > 1 else None,
        "n": n,
        "host": "h1",
        "server_cpus": cpus,
    }
    if cost is not None:
        row.update(cost_us=cost, cost_ci_low=cost * (1 - cost_rel), cost_ci_high=cost * (1 + cost_rel))
    return row


def curve(pattern: str, notifier: str, values: Mapping[int, float], **kw: Any) -> list[Row]:
    return [pt(pattern, notifier, t, v, **kw) for t, v in values.items()]


def pred(row: Row, mean_k: float, source: str = "calibration", rel: float = 0.01) -> Row:
    keys = ("pattern", "notifier", "threads", "work_us", "connections", "msg_size", "rate")
    return {**{k: row[k] for k in keys}, "source": source, "mean": mean_k * 1000.0, "ci_halfwidth_rel": rel}


Case = tuple[list[Row], list[Row]]  # points, predictions


# -- per claim: a table for each verdict ---------------------------------------------------------------------


def notifier_2x(verdict: str) -> Case:
    sel = curve("lf", "select", {2: 80, 3: 100, 4: 95})
    if verdict == HOLDS:
        return sel + curve("lf", "epoll-et", {2: 120, 3: 170, 4: 180}), []
    if verdict == REFUTED:  # 3× is more than "up to 2×"
        return sel + curve("lf", "epoll-et", {2: 200, 3: 300, 4: 290}), []
    if verdict == INCONCLUSIVE:
        wide = curve("lf", "select", {2: 80, 3: 100}, rel=0.1)
        return wide + curve("lf", "epoll-et", {2: 100, 3: 115}, rel=0.1), []
    # 5 µs of work: outside the claim's 0 µs scope
    return curve("lf", "select", {2: 80}, work=5) + curve("lf", "epoll-et", {2: 160}, work=5), []


HSHA_EARLY = {2: 50, 3: 80, 4: 100, 5: 90, 6: 85, 7: 80, 8: 75}
LF_LATE = {1: 30, 2: 55, 3: 70, 4: 85, 5: 95, 6: 105, 7: 120, 8: 110}


def hsha_peaks_earlier(verdict: str) -> Case:
    if verdict == HOLDS:
        return curve("hsha", "epoll-et", HSHA_EARLY) + curve("lf", "epoll-et", LF_LATE), []
    if verdict == REFUTED:
        late = {2: 40, 3: 60, 4: 70, 5: 80, 6: 95, 7: 110, 8: 100}
        early = {1: 60, 2: 100, 3: 90, 4: 85}
        return curve("hsha", "epoll-et", late) + curve("lf", "epoll-et", early), []
    if verdict == INCONCLUSIVE:
        return curve("hsha", "epoll-et", HSHA_EARLY, rel=0.3) + curve("lf", "epoll-et", LF_LATE, rel=0.3), []
    return curve("hsha", "epoll-et", {2: 50, 3: 60}) + curve("lf", "epoll-et", {1: 50, 2: 60}), []


def hsha_lt_worse(verdict: str) -> Case:
    sel = curve("hsha", "select", {2: 60, 3: 100})
    if verdict == HOLDS:
        return sel + curve("hsha", "epoll-lt", {2: 60, 3: 80}), []
    if verdict == REFUTED:
        return sel + curve("hsha", "epoll-lt", {2: 60, 3: 120}), []
    if verdict == INCONCLUSIVE:
        return sel + curve("hsha", "epoll-lt", {2: 60, 3: 99}, rel=0.05), []
    return sel + curve("lf", "epoll-lt", {2: 60}), []


def lf_beyond_11(verdict: str) -> Case:
    ts = range(12, 17)
    hsha = curve("hsha", "epoll-et", {t: 100.0 for t in ts})
    if verdict == HOLDS:
        return hsha + curve("lf", "epoll-et", {t: 120.0 for t in ts}), []
    if verdict == REFUTED:
        return hsha + curve("lf", "epoll-et", {t: 120.0 if t != 14 else 80.0 for t in ts}), []
    if verdict == INCONCLUSIVE:
        return hsha + curve("lf", "epoll-et", {t: 101.0 for t in ts}), []
    # the same points, but the server had 8 CPUs: 12+ threads are oversubscribed
    return (
        curve("hsha", "epoll-et", {t: 100.0 for t in ts}, cpus=8)
        + curve("lf", "epoll-et", {t: 120.0 for t in ts}, cpus=8),
        [],
    )


def model_peak_trend(verdict: str) -> Case:
    rel = 0.08 if verdict == INCONCLUSIVE else 0.01
    pts = curve("lf", "epoll-lt", {1: 50, 2: 90, 3: 120, 4: 125}, work=10, rel=rel)
    if verdict == NOT_TESTABLE:
        return pts, []
    if verdict == REFUTED:  # the model's peak 50 % too high
        return pts, [pred(p, p["mean"] / 1000 * 1.5) for p in pts]
    return pts, [pred(p, p["mean"] / 1000 * 1.01) for p in pts]


def lf_beats_hsha(verdict: str) -> Case:
    lf = curve("lf", "epoll-lt", {2: 100, 3: 130}, work=10)
    if verdict == HOLDS:
        return lf + curve("hsha", "epoll-lt", {2: 60, 3: 100}, work=10), []
    if verdict == REFUTED:
        return lf + curve("hsha", "epoll-lt", {2: 120, 3: 100}, work=10), []
    if verdict == INCONCLUSIVE:
        return lf + curve("hsha", "epoll-lt", {2: 60, 3: 129}, work=10), []
    return lf, []


def wrong_architecture(verdict: str) -> Case:
    reactor = [pt("reactor", "select", 1, 100)]
    if verdict == HOLDS:
        return reactor + curve("hsha", "select", {2: 60, 4: 120}), []
    if verdict == REFUTED:
        return reactor + curve("hsha", "select", {2: 110, 4: 150}), []
    if verdict == INCONCLUSIVE:
        return reactor + curve("hsha", "select", {2: 101, 4: 150}), []
    return curve("hsha", "select", {2: 60, 4: 120}), []


def distributed_scales(verdict: str) -> Case:
    if verdict == HOLDS:
        return curve("multireactor", "epoll-et", {1: 100, 4: 300}), []
    if verdict == REFUTED:
        return curve("multireactor", "epoll-et", {1: 100, 4: 70}), []
    if verdict == INCONCLUSIVE:
        return curve("multireactor", "epoll-et", {1: 100, 4: 102}, rel=0.05), []
    return curve("multireactor", "epoll-et", {2: 100}), []


def emulated_proactor(verdict: str) -> Case:
    rows = []
    factor = {HOLDS: 1.2, REFUTED: 0.8, INCONCLUSIVE: 1.12}.get(verdict, 1.2)
    rel = 0.03 if verdict == INCONCLUSIVE else 0.005
    for conns in (10, 100):
        rows.append(pt("reactor", "epoll-et", 1, 100, conns=conns, size=64, rel=rel))
        if verdict != NOT_TESTABLE:
            rows.append(pt("proactor", "epoll-et", 2, 100 * factor, conns=conns, size=64, rel=rel))
    return rows, []


def poll_linear(verdict: str) -> Case:
    conns = (100, 1000, 5000, 10000)
    rate = None if verdict == NOT_TESTABLE else 20000.0
    rel = 0.3 if verdict == INCONCLUSIVE else 0.01
    rows = []
    for c in conns:
        rows.append(pt("reactor", "poll", 1, 20, conns=c, rate=rate, cost=2 + 0.001 * c, cost_rel=rel))
        epoll_cost = 2 + (0.001 * c if verdict == REFUTED else 0.000001 * c)
        rows.append(pt("reactor", "epoll-lt", 1, 20, conns=c, rate=rate, cost=epoll_cost, cost_rel=rel))
    return rows, []


CASES: dict[str, Callable[[str], Case]] = {
    "S0.notifier-2x": notifier_2x,
    "S0.hsha-peaks-earlier": hsha_peaks_earlier,
    "S0.hsha-epoll-lt-worse": hsha_lt_worse,
    "S0.lf-beats-hsha-beyond-11": lf_beyond_11,
    "S1.model-peak-trend": model_peak_trend,
    "S1.lf-beats-hsha-same-threads": lf_beats_hsha,
    "S2.wrong-architecture": wrong_architecture,
    "S2.distributed-demux-scales": distributed_scales,
    "S3.emulated-proactor": emulated_proactor,
    "S4.poll-linear-epoll-flat": poll_linear,
}


def test_every_claim_has_cases() -> None:
    assert {c.id for c in CLAIMS} == set(CASES)
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)


@pytest.mark.parametrize("verdict", [HOLDS, REFUTED, INCONCLUSIVE, NOT_TESTABLE])
@pytest.mark.parametrize("claim_id", list(CASES))
def test_verdict_follows_from_the_data(claim_id: str, verdict: str) -> None:
    points, predictions = CASES[claim_id](verdict)
    (v,) = [v for v in evaluate_claims(points, predictions) if v.claim_id == claim_id]
    assert v.verdict == verdict, (v.reason, v.evidence)
    assert v.reason and v.host == "h1"
    if verdict != NOT_TESTABLE:
        assert v.evidence  # the values it was decided on
        assert any("[" in e for e in v.evidence)  # with their intervals


def test_not_testable_says_why() -> None:
    by_id = {v.claim_id: v for v in evaluate_claims(*notifier_2x(NOT_TESTABLE))}
    assert "0 µs work" in by_id["S0.notifier-2x"].reason and "5" in by_id["S0.notifier-2x"].reason
    by_id = {v.claim_id: v for v in evaluate_claims(*lf_beyond_11(NOT_TESTABLE))}
    assert "12 server CPUs" in by_id["S0.lf-beats-hsha-beyond-11"].reason
    assert "8 CPU" in by_id["S0.lf-beats-hsha-beyond-11"].reason
    by_id = {v.claim_id: v for v in evaluate_claims(*poll_linear(NOT_TESTABLE))}
    assert "closed-loop" in by_id["S4.poll-linear-epoll-flat"].reason
    # No points at all: every claim is not testable.
    assert {v.verdict for v in evaluate_claims([])} == {NOT_TESTABLE}


def test_single_runs_are_inconclusive_not_decided() -> None:
    points = curve("hsha", "select", {2: 60, 3: 100}, n=1) + curve("hsha", "epoll-lt", {2: 60, 3: 50}, n=1)
    (v,) = [v for v in evaluate_claims(points) if v.claim_id == "S0.hsha-epoll-lt-worse"]
    assert v.verdict == INCONCLUSIVE and "no CI" in " ".join(v.evidence)


def flag(rows: list[Row], flags: str = "independence:1") -> list[Row]:
    """The rows with one run of each flagged by a validity check (points.csv's runs_flagged and flags)."""
    return [{**r, "runs_flagged": 1, "flags": flags} for r in rows]


@pytest.mark.parametrize("verdict", [HOLDS, REFUTED, INCONCLUSIVE])
@pytest.mark.parametrize("claim_id", list(CASES))
def test_every_verdict_carries_its_flagged_points_from_the_data(claim_id: str, verdict: str) -> None:
    # Every point flagged: each verdict names, from the points (not its evidence's wording), the flagged
    # ones among those its evidence cites, S1's and S4's (whose evidence lines do not describe runs) too.
    points, predictions = CASES[claim_id](verdict)
    (v,) = [v for v in evaluate_claims(flag(points), predictions) if v.claim_id == claim_id]
    assert v.flagged and all(p.runs_flagged == 1 and p.flags == "independence:1" for p in v.flagged)
    assert {p.label for p in v.flagged} <= {f"{r['pattern']}/{r['notifier']} t{r['threads']}" for r in points}
    note = render_markdown("t", [v], [], {}).split(f"## {claim_id}", 1)[1]
    assert "flagged runs behind this verdict" in note
    assert all(p.label in note for p in v.flagged)
    assert note.count(" of 5 (independence:1)") == len(set(v.flagged))  # each once (its workload if need be)
    # None flagged: none named.
    (plain,) = [v for v in evaluate_claims(points, predictions) if v.claim_id == claim_id]
    assert plain.flagged == () and "flagged runs: none" in render_markdown("t", [plain], [], {})


def test_only_the_flagged_points_a_verdict_cites_are_named() -> None:
    # S1's model claim cites its points without describing their runs; the HSHA point it does not read is
    # flagged too and must not be named.
    lf, preds = model_peak_trend(HOLDS)
    other = flag([pt("hsha", "select", 2, 70)], "placement.core:2 placement.numa:1")
    (v,) = [
        v
        for v in evaluate_claims(flag(lf[2:3]) + lf[:2] + lf[3:] + other, preds)
        if v.claim_id == "S1.model-peak-trend"
    ]
    assert [(p.label, p.flags) for p in v.flagged] == [("lf/epoll-lt t3", "independence:1")]
    md = render_markdown("t", [v], [], {})
    assert (
        "flagged runs behind this verdict (counted in the means, never left out): lf/epoll-lt t3 1 of 5" in md
    )
    assert "hsha/select" not in md


def test_hosts_are_judged_apart_with_their_hardware() -> None:
    a, _ = hsha_lt_worse(HOLDS)
    b, _ = hsha_lt_worse(REFUTED)
    for row in b:
        row["host"] = "h2"
    facts = {"h2": {"cores": 16, "numa_nodes": [{"node": 0}], "cpu_model": "Xeon"}}
    got = {
        (v.host, v.hardware): v.verdict
        for v in evaluate_claims(a + b, facts=facts)
        if v.claim_id == "S0.hsha-epoll-lt-worse"
    }
    assert got == {("h1", ""): HOLDS, ("h2", "16 cores, 1 NUMA node, Xeon"): REFUTED}


def test_a_new_claim_is_a_few_lines() -> None:
    def tpc_ever_wins(ctx: Context) -> Part:
        tpc = ctx.select(patterns=("tpc",))
        if not tpc:
            return Part(NOT_TESTABLE, "no tpc points")
        return Part(HOLDS if max(p.mean for p in tpc) > 0 else REFUTED, "tpc measured")

    claim = Claim("X.tpc", "000", "tpc runs.", "any", tpc_ever_wins)
    (v,) = evaluate_claims([pt("tpc", "none", 2, 10)], claims=[claim])
    assert (v.claim_id, v.verdict) == ("X.tpc", HOLDS)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"pattern": "lf"}, "points[0]: notifier: must be a str"),
        ({**pt("lf", "epoll-lt", 1, 10), "threads": "1"}, "points[0]: threads: must be a int, got '1'"),
        ({**pt("lf", "epoll-lt", 1, 10), "mean": float("nan")}, "points[0]: mean: must be a non-negative"),
        (
            {**pt("lf", "epoll-lt", 1, 10), "ci_low": "x"},
            "points[0]: ci_low: must be a finite number or None",
        ),
    ],
)
def test_bad_rows_are_one_clear_error(row: Row, message: str) -> None:
    with pytest.raises(DemuxlabError, match="^" + message.replace("(", r"\(").replace("[", r"\[")):
        evaluate_claims([row])


def test_recommend_best_ties_and_model_disagreement() -> None:
    points = [
        pt("lf", "epoll-lt", 2, 100, work=10),
        pt("lf", "epoll-lt", 4, 150, work=10),
        pt("hsha", "epoll-lt", 4, 149, work=10),  # tied: intervals overlap
        pt("reactor", "epoll-lt", 1, 60, work=10),
        pt("reactor", "epoll-lt", 1, 500, work=0),  # another workload
    ]
    preds = [pred(points[0], 101), pred(points[1], 120), pred(points[2], 200)]
    recs = recommend(points, preds)
    assert [(r.workload.work_us, r.best.label) for r in recs] == [
        (0.0, "reactor/epoll-lt t1"),
        (10.0, "lf/epoll-lt t4"),
    ]
    r = recs[1]
    assert [p.label for p in r.tied] == ["hsha/epoll-lt t4"] and r.candidates == 4
    assert r.model_source == "calibration" and r.model_best is not None
    assert r.model_best.startswith("hsha/epoll-lt t4")
    # The reactor was measured but not predicted: the model is not judged (issue 43: it "agreed" among the
    # modeled points only), and the row says which design has no prediction.
    assert r.model_agrees is None and r.model_missing == ("reactor/epoll-lt (no calibration prediction)",)
    assert "is not judged: no prediction for reactor/epoll-lt" in r.note
    assert r.to_row()["model_missing"] == "reactor/epoll-lt (no calibration prediction)"
    # With every measured design predicted it is: its first is tied with the data's best.
    (_, full) = recommend(points, [*preds, pred(points[3], 55)])
    assert full.model_agrees is True and full.model_missing == ()
    assert len(r.disagreements) == 2 and r.disagreements[0].startswith("lf/epoll-lt t4: model")
    assert "-20.0%" in r.disagreements[0]
    row = r.to_row()
    assert row["pattern"] == "lf" and row["threads"] == 4 and row["tied_with"] == "hsha/epoll-lt/t4"
    assert "model outside the data's CI at 2 point(s)" in row["note"]
    assert recs[0].model_best is None and recs[0].model_agrees is None


def test_recommend_says_why_a_design_has_no_prediction() -> None:
    """A design without predictions from the model's source (its calibration refused) leaves the model
    unjudged for that workload, and the row gives the reason it was handed (the refusal and its figure)."""
    points = [pt("lf", "epoll-lt", 2, 100, work=10), pt("hsha", "epoll-lt", 2, 80, work=10)]
    why = {("hsha", "epoll-lt"): "calibration refused: self-check +16.0% on its plain runs"}
    (r,) = recommend(points, [pred(points[0], 90)], why_missing=why)
    assert r.model_agrees is None and r.model_best is not None
    assert r.model_missing == ("hsha/epoll-lt (calibration refused: self-check +16.0% on its plain runs)",)
    assert r.to_row()["model_agrees"] is None and "+16.0%" in r.to_row()["note"]


def test_recommend_says_when_the_model_ranks_another_design_first() -> None:
    points = [pt("lf", "epoll-lt", 2, 100, work=10), pt("hsha", "epoll-lt", 2, 80, work=10)]
    preds = [pred(points[0], 90), pred(points[1], 110)]
    (r,) = recommend(points, preds)
    assert r.best.label == "lf/epoll-lt t2" and r.model_agrees is False
    assert "ranks hsha/epoll-lt t2" in r.note


def test_predictions_of_a_hardware_class_stay_with_its_points() -> None:
    """Cluster sweeps: a point row per hardware class (its host is the class id) and each class's own
    calibrated predictions; another class's prediction is never compared with a point."""
    a = [
        {**p, "host": "hw-a"}
        for p in (pt("lf", "epoll-lt", 2, 100, work=10), pt("hsha", "epoll-lt", 2, 80, work=10))
    ]
    b = [
        {**p, "host": "hw-b"}
        for p in (pt("lf", "epoll-lt", 2, 50, work=10), pt("hsha", "epoll-lt", 2, 90, work=10))
    ]
    preds = [
        {**pred(a[0], 90), "host": "hw-a"},
        {**pred(a[1], 110), "host": "hw-a"},  # hw-a's model ranks hsha first
        {**pred(b[0], 40), "host": "hw-b"},
        {**pred(b[1], 95), "host": "hw-b"},  # hw-b's agrees with hw-b's data
    ]
    recs = {r.host: r for r in recommend(a + b, preds)}
    assert recs["hw-a"].best.label == "lf/epoll-lt t2" and recs["hw-a"].model_agrees is False
    assert recs["hw-b"].best.label == "hsha/epoll-lt t2" and recs["hw-b"].model_agrees is True
    # Without a host, a prediction is for every host (local runs, the paper's rates).
    assert all(r.model_best for r in recommend(a + b, [pred(a[0], 90), pred(a[1], 110)]))
    verdicts = evaluate_claims(a + b, preds)
    assert {v.host for v in verdicts} == {"hw-a", "hw-b"}


def test_a_measured_point_holds_the_sweep_points_fields() -> None:
    """The claims' input is a sweep point (demuxlab.point) with its measurement: the same fields, but
    ``instrument`` (calibration points are never claims' input); a point as the database gives it is
    accepted as it is."""
    import dataclasses

    from demuxlab.claims import MeasuredPoint, as_point
    from demuxlab.point import POINT_FIELDS, Point

    names = [f.name for f in dataclasses.fields(MeasuredPoint)]
    assert set(POINT_FIELDS) - {"instrument"} <= set(names)
    point = Point("lf", "epoll-lt", 2, 10.0, 32, 1, 1, None)
    row = {**point.to_json(), "mean": 1000.0, "ci_low": 990.0, "ci_high": 1010.0, "n": 3}
    got = as_point(row)
    assert {name: getattr(got, name) for name in POINT_FIELDS if name != "instrument"} == {
        name: getattr(point, name) for name in POINT_FIELDS if name != "instrument"
    }
    assert got.point_key == point.point_key


def test_the_multireactor_scales_by_the_one_decision() -> None:
    """Issue 45 item 2 (one meaning of "tied"): t1 100k and t4 110k over 5 runs at ±5 % have overlapping 95 %
    intervals, yet Welch's t-test says they differ (p ≈ 0.004), as the Ranking would: the claim holds (the
    ratio's interval, [0.99, 1.22], once made it inconclusive)."""
    points = curve("multireactor", "epoll-et", {1: 100, 4: 110}, rel=0.05)
    (v,) = [v for v in evaluate_claims(points) if v.claim_id == "S2.distributed-demux-scales"]
    assert v.verdict == HOLDS, (v.reason, v.evidence)


def test_the_proactor_is_never_slower_by_the_one_decision() -> None:
    """The proactor 5 % above the reactor over 5 runs at ±3 %: the intervals overlap, Welch's t-test says it
    is faster (p ≈ 0.01): "never slower" is no longer called open ("intervals overlap"); only the 10–35 %
    bound is left inconclusive."""
    rows = []
    for conns in (10, 100):
        rows.append(pt("reactor", "epoll-et", 1, 100, conns=conns, size=64, rel=0.03))
        rows.append(pt("proactor", "epoll-et", 2, 105, conns=conns, size=64, rel=0.03))
    (v,) = [v for v in evaluate_claims(rows) if v.claim_id == "S3.emulated-proactor"]
    assert v.verdict == INCONCLUSIVE and "never slower" not in v.reason and "1.1–1.35" in v.reason
