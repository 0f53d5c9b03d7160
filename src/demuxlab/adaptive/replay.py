"""The adaptive policy over recorded runs instead of a host pair: the benchmark of an adaptive sweep against
the full fixed design whose runs the records are (docs/adaptive.md), and the check that an adaptive
experiment's record replays its own decisions.

:func:`run_policy` drives the policy round by round, asking ``fetch`` for each requested run; the replay's
``fetch`` takes it from the records (a run that ends when steady is the recorded run cut where its samples
became steady: the same decision the live run makes, :mod:`demuxlab.steady`). :func:`compare` sets the
outcome beside the full design's: run-minutes, the claims' verdicts and the best design per workload of
both, and the largest gap between the two figures at the measured points in units of the full design's
95 % interval.

Pure: observed runs in, values out (the records are read by :mod:`demuxlab.adaptive.records`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.adaptive.answer import Answer, MeasuredRow, answer, best_label
from demuxlab.adaptive.models import Shapes
from demuxlab.adaptive.policy import Design, Request, Round, measured_rows, next_round
from demuxlab.adaptive.runs import Observed, stopped_when_steady
from demuxlab.errors import DemuxlabError

#: More rounds than any grid needs (each round measures something new or repeats a point below its max).
MAX_ROUNDS = 10_000


@dataclass
class Outcome:
    """A sweep as run: its rounds, its runs, and the answer of its measured points."""

    rounds: list[Round]
    runs: list[Observed]
    rows: list[MeasuredRow]
    answer: Answer | None  # None while the first round is not done
    pending: bool = False  # the last round's runs are not all done (an experiment in progress)

    @property
    def spent_s(self) -> float:
        return sum(r.run_s for r in self.runs)

    @property
    def points(self) -> int:
        return len({r.point.point_key for r in self.runs if not r.point.instrument})


class RunIndex:
    """Recorded runs by (point key, repeat)."""

    def __init__(self, runs: Sequence[Observed]) -> None:
        self.runs: dict[tuple[str, int], Observed] = {}
        for r in runs:
            key = (r.point.point_key, r.repeat)
            if key in self.runs:
                raise DemuxlabError(
                    f"{r.source}: point {key[0]} repeat {key[1]} is also in {self.runs[key].source}"
                )
            self.runs[key] = r

    def get(self, point_key: str, repeat: int) -> Observed:
        try:
            return self.runs[(point_key, repeat)]
        except KeyError:
            raise DemuxlabError(
                f"records: no run of {point_key} repeat {repeat} (the replay needs every run the policy asks "
                "for: the records of the full fixed design, or of the adaptive experiment itself)"
            ) from None


def replay_fetch(design: Design, index: RunIndex) -> Callable[[Request], Observed]:
    """The replay's runs: each from its record, cut where it became steady when the rule is on."""
    steady = design.settings.steady

    def fetch(req: Request) -> Observed:
        run = index.get(req.point.point_key, req.repeat)
        if steady is not None and not req.point.instrument:
            run = stopped_when_steady(run, steady.min_s, steady.target_rel)
        return run

    return fetch


def run_policy(
    design: Design,
    fetch: Callable[[Request], Observed | None],
    shapes_of: Callable[[Sequence[Observed]], Shapes] | None = None,
) -> tuple[Outcome, Shapes]:
    """The policy to its stop, round after round, each requested run from ``fetch``; or, when ``fetch``
    has no run for a request (None: not run yet), up to that round (``pending``). ``shapes_of`` gives the
    models' predictions from the calibration runs (called once, after the first round)."""
    history: list[Round] = []
    runs: list[Observed] = []
    shapes = Shapes()
    while True:
        if len(history) >= MAX_ROUNDS:
            raise DemuxlabError(f"adaptive: no stop after {MAX_ROUNDS} rounds")
        rnd = next_round(design, history, runs, shapes.by_point, shapes.predictions, shapes.why_missing)
        history.append(rnd)
        if rnd.stop is not None:
            break
        fetched = [fetch(req) for req in rnd.requests]
        runs += [f for f in fetched if f is not None]
        if any(f is None for f in fetched):
            return Outcome(history, runs, measured_rows(design, runs), rnd.answer, pending=True), shapes
        if len(history) == 1 and shapes_of is not None:
            shapes = shapes_of([r for r in runs if r.point.instrument])
    return Outcome(history, runs, measured_rows(design, runs), history[-1].answer), shapes


def full_outcome(design: Design, index: RunIndex, shapes: Shapes) -> Outcome:
    """The fixed design from the records: every point, every repeat, whole runs."""
    runs = [index.get(p.point_key, r) for p in design.points for r in range(design.repeats)]
    runs += [index.get(p.point_key, r) for p in design.calibration for r in range(design.calibration_repeats)]
    rows = measured_rows(design, runs)
    return Outcome([], runs, rows, answer(rows, shapes.predictions, design.facts, shapes.why_missing))


@dataclass
class Comparison:
    """The adaptive outcome beside the full design's."""

    adaptive_s: float
    full_s: float
    rounds: int
    points: int
    full_points: int
    runs: int
    full_runs: int
    verdicts: list[tuple[str, str, str, str]]  # claim id, host, full, adaptive
    best: list[tuple[str, str, str, str, bool]]  # host, workload, full, adaptive, adaptive within full's ties
    gaps: list[tuple[str, float]] = field(default_factory=list)  # point key, |Δmean| / full half-width
    stop: str = ""

    @property
    def saving(self) -> float:
        return self.full_s / self.adaptive_s if self.adaptive_s else float("inf")

    @property
    def verdicts_agree(self) -> int:
        return sum(1 for _, _, f, a in self.verdicts if f == a)

    @property
    def best_agree(self) -> int:
        return sum(1 for _, _, f, a, _ in self.best if f == a)

    @property
    def best_tied(self) -> int:
        return sum(1 for *_, tied in self.best if tied)

    @property
    def largest_gap(self) -> tuple[str, float] | None:
        return max(self.gaps, key=lambda g: g[1]) if self.gaps else None

    @property
    def outside(self) -> int:
        """Measured adaptive points whose mean lies outside the full design's 95 % interval."""
        return sum(1 for _, g in self.gaps if g > 1.0)

    def to_json(self) -> dict[str, Any]:
        big = self.largest_gap
        return {
            "run_minutes": {
                "adaptive": self.adaptive_s / 60,
                "full": self.full_s / 60,
                "saving": self.saving,
            },
            "rounds": self.rounds,
            "points": {"adaptive": self.points, "full": self.full_points},
            "runs": {"adaptive": self.runs, "full": self.full_runs},
            "verdicts": [
                {"claim_id": c, "host": h, "full": f, "adaptive": a} for c, h, f, a in self.verdicts
            ],
            "verdicts_agree": self.verdicts_agree,
            "best": [
                {"host": h, "workload": w, "full": f, "adaptive": a, "within_full_ties": t}
                for h, w, f, a, t in self.best
            ],
            "best_agree": self.best_agree,
            "best_within_ties": self.best_tied,
            "largest_gap": None if big is None else {"point_key": big[0], "halfwidths": big[1]},
            "outside_full_interval": self.outside,
            "stop": self.stop,
        }


def compare(design: Design, adaptive: Outcome, full: Outcome) -> Comparison:
    assert full.answer is not None and adaptive.answer is not None
    fv = full.answer.verdict_map
    av = adaptive.answer.verdict_map
    verdicts = [(c, h, fv[(c, h)], av.get((c, h), "—")) for c, h in sorted(fv)]
    fb = {(r.host, str(r.workload)): r for r in full.answer.recommendations}
    ab = adaptive.answer.best_map
    best = []
    for (host, wl), rec in sorted(fb.items()):
        a = ab.get((host, wl), "—")
        ties = {best_label(rec), *(f"{p.pattern}/{p.notifier}/t{p.threads}" for p in rec.tied)}
        best.append((host, wl, best_label(rec), a, a in ties))
    full_rows: Mapping[tuple[str, str], MeasuredRow] = {(r.point.point_key, r.host): r for r in full.rows}
    gaps = []
    for row in adaptive.rows:
        ref = full_rows.get((row.point.point_key, row.host))
        if ref is None or ref.summary.halfwidth is None:
            continue
        hw = ref.summary.halfwidth
        gap = abs(row.summary.mean - ref.summary.mean) / hw if hw > 0 else float("inf")
        gaps.append((row.point.point_key, gap))
    last = adaptive.rounds[-1] if adaptive.rounds else None
    return Comparison(
        adaptive_s=adaptive.spent_s,
        full_s=full.spent_s,
        rounds=len(adaptive.rounds) - 1,
        points=adaptive.points,
        full_points=full.points,
        runs=len(adaptive.runs),
        full_runs=len(full.runs),
        verdicts=verdicts,
        best=best,
        gaps=gaps,
        stop=last.stop or "" if last is not None else "",
    )


@dataclass
class Replay:
    """A replay: the adaptive outcome, the full design's, and the two compared."""

    design: Design
    adaptive: Outcome
    full: Outcome
    comparison: Comparison
    shapes: Shapes


def replay(
    design: Design,
    runs: Sequence[Observed],
    *,
    models: bool = True,
    experiment: str = "",
    spec_sha256: str = "",
) -> Replay:
    """The policy over recorded ``runs`` (a full fixed design's), and the full design beside it.

    ``models``: fit the CTMC models from the calibration runs to guide the points (else the measurements
    alone guide them)."""
    import dataclasses

    from demuxlab.adaptive.models import model_shapes

    index = RunIndex(runs)
    # A calibration point the records have no run of was not part of the full design they recorded (made
    # before its pattern had a model): it is left out of both designs, as the full design left it out.
    recorded = tuple(
        p
        for p in design.calibration
        if all((p.point_key, r) in index.runs for r in range(design.calibration_repeats))
    )
    design = dataclasses.replace(design, calibration=recorded)

    def shapes_of(calibration: Sequence[Observed]) -> Shapes:
        if not models:
            return Shapes()
        return model_shapes(design.points, calibration, experiment=experiment, spec_sha256=spec_sha256)

    adaptive, shapes = run_policy(design, replay_fetch(design, index), shapes_of)
    full = full_outcome(design, index, shapes)
    return Replay(design, adaptive, full, compare(design, adaptive, full), shapes)
