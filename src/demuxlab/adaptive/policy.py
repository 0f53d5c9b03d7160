"""The adaptive policy: which runs the next round has, and why (docs/adaptive.md).

An adaptive sweep runs in rounds. Round 0 is the coarse design (each curve's ends and evenly spaced thread
counts between, or every point without model-guided points) at the minimum repeats, and every calibration
run. After each round :func:`next_round` looks at every run so far and asks for:

1. **repeats** (sequential repeats): one more run of each measured point whose 95 % interval is wider than
   the target (relative half-width), up to the maximum; and of the best design of a workload and the one
   tied closest with it, while they are tied (the one decision, Welch's t-test) and below the maximum;
2. **points** (model-guided): around each curve's predicted peak (the peak itself when it is not
   measured, else its unmeasured neighbours on the thread axis), where two designs' curves of one
   workload cross between two thread counts, and between a measured point and its neighbours where the
   model misses it (:mod:`demuxlab.adaptive.guide`); a new point gets the minimum repeats.

The runs of a round go in an order randomized by the spec's seed (as the fixed design's: sha256 of
``seed|point_key|repeat``). The sweep stops when nothing is asked for; or when the answer (the claims'
verdicts and the best design per workload, :mod:`demuxlab.adaptive.answer`) is the same as a round before,
the model agrees with every measured point and no interval needs another run; or when the budget (run-hours)
cannot pay for anything asked for. Within the budget, new points come first, then repeats of tied
designs, then repeats for intervals, then the points around a model miss.

Pure: the design, the rounds so far and the observed runs in, the next :class:`Round` out.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.adaptive.answer import Answer, MeasuredRow, answer
from demuxlab.adaptive.guide import Curve
from demuxlab.adaptive.runs import Observed, summarize
from demuxlab.errors import DemuxlabError
from demuxlab.point import Point
from demuxlab.spec.adaptive import Adaptive, coarse_points, curves
from demuxlab.spec.expand import calibration_points, expand_points
from demuxlab.spec.model import Spec
from demuxlab.stats import Summary

# Why a run was asked for: the kinds, in the order a budget pays for them.
COARSE = "coarse"
CALIBRATION = "calibration"
PEAK = "peak"
CROSSING = "crossing"
TIE = "tie"
INTERVAL = "interval"
MISS = "miss"
KINDS = (COARSE, CALIBRATION, PEAK, CROSSING, TIE, INTERVAL, MISS)


@dataclass(frozen=True)
class Request:
    """One run the policy asks for: a repeat of a point, and why."""

    point: Point
    repeat: int
    kind: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "point_key": self.point.point_key,
            "repeat": self.repeat,
            "kind": self.kind,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Round:
    """One round: the runs asked for (in run order), and what they were decided on."""

    index: int
    requests: tuple[Request, ...]
    spent_s: float  # run-seconds of every run before this round
    answer: Answer | None = None  # from the runs before this round (None for the first)
    stable: bool | None = None  # the answer is the previous round's
    misses: tuple[str, ...] = ()  # where the model missed a measured point
    dropped: int = 0  # runs asked for that the budget could not pay for
    stop: str | None = None  # why the sweep ends here (no requests then)

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.index,
            "spent_s": self.spent_s,
            "requests": [r.to_json() for r in self.requests],
            "answer": None if self.answer is None else self.answer.to_json(),
            "stable": self.stable,
            "misses": list(self.misses),
            "dropped": self.dropped,
            "stop": self.stop,
        }


@dataclass(frozen=True)
class Design:
    """What the policy plans over: the fixed design's points and runs, and the adaptive settings."""

    points: tuple[Point, ...]  # the measured grid (spec order)
    calibration: tuple[Point, ...]
    repeats: int  # the fixed design's runs per point
    calibration_repeats: int
    run_s: float  # seconds of phases of one whole run
    seed: int
    settings: Adaptive
    facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def full_runs(self) -> int:
        return len(self.points) * self.repeats + len(self.calibration) * self.calibration_repeats

    @property
    def full_s(self) -> float:
        """Run-seconds of the fixed design."""
        return self.full_runs * self.run_s

    @property
    def budget_s(self) -> float:
        b = self.settings.budget_h
        return self.full_s if b is None else b * 3600.0

    @property
    def first_repeats(self) -> int:
        """Runs a point gets when it is first measured."""
        r = self.settings.repeats
        return r.min if r is not None else self.repeats

    @property
    def max_repeats(self) -> int:
        r = self.settings.repeats
        return r.max if r is not None else self.repeats


def rank(seed: int, point_key: str, repeat: int) -> str:
    """The run-order key of the fixed design (:func:`demuxlab.spec.run_order`), used within a round."""
    return hashlib.sha256(f"{seed}|{point_key}|{repeat}".encode()).hexdigest()


def _ordered(design: Design, requests: Sequence[Request]) -> tuple[Request, ...]:
    return tuple(sorted(requests, key=lambda r: rank(design.seed, r.point.point_key, r.repeat)))


def curve_label(point: Point) -> str:
    rate = "closed" if point.rate is None else f"r{point.rate:g}"
    return (
        f"{point.pattern}/{point.notifier} w{point.work_us:g} c{point.connections} b{point.msg_size} "
        f"ct{point.client_threads} {rate}"
    )


def first_round(design: Design) -> Round:
    """The coarse design at the first repeats, and every calibration run."""
    settings = design.settings
    reqs: list[Request] = []
    coarse = coarse_points(design.points, settings)
    why = (
        f"coarse design: {settings.points.coarse} thread counts per curve"
        if settings.points is not None
        else "every point of the grid"
    )
    for p in coarse:
        reqs += [Request(p, r, COARSE, why) for r in range(design.first_repeats)]
    for p in design.calibration:
        reqs += [
            Request(p, r, CALIBRATION, "calibration run of the CTMC rates")
            for r in range(design.calibration_repeats)
        ]
    return Round(0, _ordered(design, reqs), 0.0)


@dataclass
class _State:
    """What the rounds so far asked for and what their runs gave."""

    requested: dict[str, list[int]]  # point key → repeats asked for
    runs: dict[str, list[Observed]]  # point key → its runs
    summaries: dict[str, Summary]  # measured (not calibration) points with a successful run
    spent_s: float


def _state(design: Design, history: Sequence[Round], runs: Sequence[Observed]) -> _State:
    requested: dict[str, list[int]] = {}
    for rnd in history:
        for r in rnd.requests:
            requested.setdefault(r.point.point_key, []).append(r.repeat)
    by_point: dict[str, list[Observed]] = {}
    for run in runs:
        by_point.setdefault(run.point.point_key, []).append(run)
    for key, reps in requested.items():
        have = {r.repeat for r in by_point.get(key, [])}
        missing = [r for r in reps if r not in have]
        if missing:
            raise DemuxlabError(f"adaptive: run {key} repeat {missing[0]} was asked for but has no record")
    measured = {p.point_key for p in design.points}
    summaries = {}
    for key, point_runs in by_point.items():
        if key in measured:
            s = summarize(_principal(point_runs))
            if s is not None:
                summaries[key] = s
    spent = sum(r.run_s for k, rs in by_point.items() if k in requested for r in rs)
    return _State(requested, by_point, summaries, spent)


def _principal(runs: Sequence[Observed]) -> list[Observed]:
    """A point's runs on its most common host (hardware class): runs of different classes never pool."""
    hosts = Counter(r.host for r in runs if r.ok)
    if not hosts:
        return list(runs)
    host = hosts.most_common(1)[0][0]
    return [r for r in runs if r.host == host]


def measured_rows(design: Design, runs: Sequence[Observed]) -> list[MeasuredRow]:
    """Each measured point's successful runs per server host, summarized for the claims."""
    grid = {p.point_key: p for p in design.points}
    groups: dict[tuple[str, str], list[Observed]] = {}
    for r in runs:
        if r.ok and r.throughput is not None and r.point.point_key in grid:
            groups.setdefault((r.point.point_key, r.host), []).append(r)
    rows = []
    for (key, host), rs in sorted(groups.items()):
        s = summarize(rs)
        assert s is not None
        cpus = [r.server_cpus for r in rs if r.server_cpus is not None]
        rows.append(MeasuredRow(grid[key], s, host, min(cpus) if cpus else None))
    return rows


def _fmt_rel(value: float | None) -> str:
    return "none" if value is None else f"±{value:.1%}"


def _repeat_wants(design: Design, st: _State, ans: Answer) -> list[tuple[Point, str, str]]:
    rule = design.settings.repeats
    if rule is None:
        return []
    grid = {p.point_key: p for p in design.points}
    wants: list[tuple[Point, str, str]] = []
    asked: set[str] = set()
    # Ties first: the best design of a workload and its closest rival, while they are tied (Welch).
    for rec in ans.recommendations:
        for mp in (rec.best, *rec.tied[:1]):
            key = mp.point_key
            if key in grid and key not in asked and len(st.requested.get(key, [])) < rule.max and rec.tied:
                asked.add(key)
                wants.append(
                    (
                        grid[key],
                        TIE,
                        f"tied with the best of {rec.workload} ({rec.best.label} vs {rec.tied[0].label})",
                    )
                )
    for key, reps in st.requested.items():
        if key not in grid or key in asked or len(reps) >= rule.max:
            continue
        s = st.summaries.get(key)
        if s is None or s.n < 2:
            n = 0 if s is None else s.n
            wants.append((grid[key], INTERVAL, f"{n} successful run{'s' if n != 1 else ''}: no interval yet"))
        elif s.halfwidth_rel is None or s.halfwidth_rel > rule.target_rel:
            wants.append(
                (
                    grid[key],
                    INTERVAL,
                    f"interval {_fmt_rel(s.halfwidth_rel)} wider than ±{rule.target_rel:.1%}",
                )
            )
    return wants


def _point_wants(
    design: Design, st: _State, shapes: Mapping[str, float]
) -> tuple[list[tuple[Point, str, str]], list[str]]:
    rule = design.settings.points
    if rule is None:
        return [], []
    wants: list[tuple[Point, str, str]] = []
    misses: list[str] = []
    unmeasured = {p.point_key for p in design.points} - set(st.requested)
    by_curve = {k: Curve(pts, st.summaries, shapes) for k, pts in curves(design.points).items()}
    for curve in by_curve.values():
        values = curve.values()
        if not values:
            continue
        top = max(values, key=lambda v: v.mean)
        label = curve_label(top.point)
        if not top.measured:
            wants.append((top.point, PEAK, f"predicted peak of {label} at t{top.point.threads}"))
        else:
            # A neighbour of the measured peak is measured unless the model puts it clearly below the
            # peak (more than the target): the true peak may lie beside the highest measured count.
            predicted = {v.point.point_key: v.mean for v in values}
            for nb in curve.neighbours(top.point):
                guess = predicted.get(nb.point_key)
                if nb.point_key in unmeasured and (
                    guess is None or guess * (1 + rule.target_rel) >= top.mean
                ):
                    wants.append((nb, PEAK, f"beside the measured peak of {label} (t{top.point.threads})"))
    # Crossings: two designs' curves of one workload whose order changes between two thread counts.
    workloads: dict[tuple[Any, ...], list[Curve]] = {}
    for key, curve in by_curve.items():
        workloads.setdefault(key[2:], []).append(curve)
    for group in workloads.values():
        for i, a in enumerate(group):
            va = {v.point.threads: v for v in a.values()}
            for b in group[i + 1 :]:
                vb = {v.point.threads: v for v in b.values()}
                common = sorted(set(va) & set(vb))
                for t0, t1 in itertools.pairwise(common):
                    d0 = va[t0].mean - vb[t0].mean
                    d1 = va[t1].mean - vb[t1].mean
                    # A crossing is the order changing by more than the target at both counts: curves
                    # within the target of each other (noise) do not cross, they overlap.
                    tol0 = rule.target_rel * max(va[t0].mean, vb[t0].mean)
                    tol1 = rule.target_rel * max(va[t1].mean, vb[t1].mean)
                    if d0 * d1 >= 0 or abs(d0) <= tol0 or abs(d1) <= tol1:
                        continue
                    why = (
                        f"{a.points[0].pattern}/{a.points[0].notifier} and {b.points[0].pattern}/"
                        f"{b.points[0].notifier} cross between t{t0} and t{t1} ({curve_label(a.points[0])})"
                    )
                    for v in (va[t0], va[t1], vb[t0], vb[t1]):
                        if v.point.point_key in unmeasured:
                            wants.append((v.point, CROSSING, why))
    for curve in by_curve.values():
        for miss in curve.misses(rule.target_rel):
            what = "CTMC shape" if curve.modelled else "interpolation"
            text = (
                f"model ({what}) misses {miss.point.point_key} by {miss.rel:+.1%} "
                f"(allowed ±{miss.allowed / miss.measured:.1%})"
            )
            misses.append(text)
            for lo, hi in ((miss.left, miss.point), (miss.point, miss.right)):
                mid = curve.between(lo, hi)
                if mid is not None and mid.point_key in unmeasured:
                    wants.append((mid, MISS, text))
    return wants, misses


def next_round(
    design: Design,
    history: Sequence[Round],
    runs: Sequence[Observed],
    shapes: Mapping[str, float] | None = None,
    predictions: Sequence[Mapping[str, Any]] = (),
    why_missing: Mapping[tuple[str, str], str] | None = None,
) -> Round:
    """The round after ``history`` (empty: the first round), from every run so far (``runs``: each
    requested run's observation; a failed run counts as a repeat). ``shapes``: the CTMC models'
    predictions per point key (msg/s), where there are; ``predictions``: the model's rows for the claims
    (:mod:`demuxlab.claims` input shape); ``why_missing``: why a pattern × notifier has no calibration
    (the answer's recommendations name it)."""
    if not history:
        return first_round(design)
    st = _state(design, history, runs)
    index = len(history)
    rows = measured_rows(design, runs)
    ans = answer(rows, predictions, design.facts, why_missing)
    prev = history[-1].answer
    stable = None if prev is None else prev.key() == ans.key()
    repeat_wants = _repeat_wants(design, st, ans)
    point_wants, misses = _point_wants(design, st, shapes or {})
    if stable and not misses and not repeat_wants:
        stop = "converged: the answer is the previous round's, the model agrees with every measured point "
        stop += "and every interval is within target or at the maximum repeats"
        return Round(index, (), st.spent_s, ans, stable, tuple(misses), 0, stop)
    # Each point once, for the first reason in the budget's order.
    order = {k: i for i, k in enumerate(KINDS)}
    chosen: dict[str, tuple[Point, str, str]] = {}
    for want in sorted([*point_wants, *repeat_wants], key=lambda w: order[w[1]]):
        chosen.setdefault(want[0].point_key, want)
    budget_left = design.budget_s - st.spent_s
    reqs: list[Request] = []
    dropped = 0
    for point, kind, reason in chosen.values():
        done = st.requested.get(point.point_key, [])
        count = design.first_repeats if not done else 1
        first = max(done) + 1 if done else 0
        batch = [Request(point, first + i, kind, reason) for i in range(count)]
        cost = len(batch) * design.run_s
        if cost <= budget_left + 1e-9:
            reqs += batch
            budget_left -= cost
        else:
            dropped += len(batch)
    if not reqs:
        stop = (
            f"budget spent: {st.spent_s / 3600:.3g} of {design.budget_s / 3600:.3g} run-hours, "
            f"{dropped} runs asked for left out"
            if dropped
            else "converged: no point left where the answer could change"
            + ("" if stable else " (the answer changed in the last round)")
            + (
                f"; the model still misses {len(misses)} measured point(s) with no point left between"
                if misses
                else ""
            )
        )
        return Round(index, (), st.spent_s, ans, stable, tuple(misses), dropped, stop)
    return Round(index, _ordered(design, reqs), st.spent_s, ans, stable, tuple(misses), dropped)


def design_of(spec: Spec, settings: Adaptive | None = None) -> Design:
    """The design of an adaptive spec (``settings``: instead of the spec's own, e.g. one mechanism only)."""
    chosen = settings if settings is not None else spec.adaptive
    if chosen is None:
        raise DemuxlabError(f"{spec.path}: adaptive: the spec has no adaptive block (docs/adaptive.md)")
    return Design(
        points=tuple(expand_points(spec)),
        calibration=tuple(calibration_points(spec)),
        repeats=spec.repeats,
        calibration_repeats=spec.calibration_repeats,
        run_s=spec.run_s,
        seed=spec.seed,
        settings=chosen,
    )
