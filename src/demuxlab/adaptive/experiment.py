"""An adaptive experiment as the workflow runs it: the policy over the experiment's own run records, round
by round (``demuxlab adaptive next``), and its decisions once it stops (``demuxlab adaptive decisions``).

The policy is a deterministic function of the runs (:mod:`demuxlab.adaptive.policy`), so nothing but the
records is kept between rounds: each call replays the rounds from the first, taking each requested run
from its record, up to the first round whose runs are not all recorded yet. That is also why the
experiment's record (its run records, in a bundle too) is enough to replay its decisions.

Pure: the spec and the observed runs in, documents (plain JSON values) out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from demuxlab.adaptive.guide import Curve
from demuxlab.adaptive.models import Shapes, model_shapes
from demuxlab.adaptive.policy import Design, Request, design_of
from demuxlab.adaptive.replay import Outcome, RunIndex, run_policy
from demuxlab.adaptive.runs import Observed, summarize
from demuxlab.errors import DemuxlabError
from demuxlab.spec.adaptive import curves
from demuxlab.spec.expand import run_id
from demuxlab.spec.model import Spec

FORMAT = "demuxlab.adaptive/1"


def own_runs(spec: Spec, runs: Sequence[Observed]) -> list[Observed]:
    """The runs of this spec version (their run id is this spec's for their point and repeat); records of
    other versions in the same folder are left out."""
    return [r for r in runs if r.run_id == run_id(spec, r.point, r.repeat)]


def decide(spec: Spec, runs: Sequence[Observed], *, models: bool = True) -> tuple[Design, Outcome, Shapes]:
    """The policy over the experiment's runs so far: every round whose runs are recorded, and the round
    after them (pending, or the stop)."""
    if spec.adaptive is None:
        raise DemuxlabError(f"{spec.path}: adaptive: the spec has no adaptive block (docs/adaptive.md)")
    design = design_of(spec)
    index = RunIndex(own_runs(spec, runs))

    def fetch(req: Request) -> Observed | None:
        return index.runs.get((req.point.point_key, req.repeat))

    def shapes_of(calibration: Sequence[Observed]) -> Shapes:
        if not models:
            return Shapes()
        return model_shapes(
            design.points, calibration, experiment=spec.name, spec_sha256=spec.sha256, seed=spec.seed
        )

    outcome, shapes = run_policy(design, fetch, shapes_of)
    return design, outcome, shapes


def round_doc(spec: Spec, outcome: Outcome, index: int) -> dict[str, Any]:
    """Round ``index`` as the workflow reads it: its runs (run id, point, repeat, why) in run order, or its
    stop. Every earlier round's runs must be recorded."""
    if index >= len(outcome.rounds):
        last = len(outcome.rounds) - 1
        raise DemuxlabError(
            f"{spec.path}: adaptive round {index}: round {last} is not done (its runs are not all recorded)"
        )
    rnd = outcome.rounds[index]
    return {
        "format": FORMAT,
        "experiment": spec.name,
        "spec_sha256": spec.sha256,
        "round": index,
        "stop": rnd.stop,
        "runs": [
            {
                "run_id": run_id(spec, r.point, r.repeat),
                "point_key": r.point.point_key,
                "repeat": r.repeat,
                "instrument": r.point.instrument,
                "kind": r.kind,
                "reason": r.reason,
            }
            for r in rnd.requests
        ],
    }


def decisions_doc(spec: Spec, design: Design, outcome: Outcome, shapes: Shapes) -> dict[str, Any]:
    """Everything the adaptive sweep decided, once it stopped: each round, each point of the grid measured
    (its runs and why it was chosen) or model-only (what the model says there and from what), the run time
    spent against the fixed design's, and what the runs that ended when steady saved."""
    if outcome.pending:
        last = outcome.rounds[-1]
        raise DemuxlabError(
            f"{spec.path}: adaptive: round {last.index} is not done ({len(last.requests)} runs asked for)"
        )
    points = _grid_rows(design, outcome, shapes)
    calibration = [r for r in outcome.runs if r.point.instrument]
    stopped = [r for r in outcome.runs if r.steady is not None and r.steady.get("stopped_early")]
    last = outcome.rounds[-1]
    return {
        "format": FORMAT,
        "experiment": spec.name,
        "spec_sha256": spec.sha256,
        "settings": design.settings.to_json(),
        "run_s": {
            "spent": sum(r.run_s for r in outcome.runs),
            "fixed_design": design.full_s,
            "budget": design.budget_s,
            "saved_by_steady_stops": sum(spec.phases.measure_s - r.measured_s for r in stopped),
        },
        "runs": {
            "done": len(outcome.runs),
            "fixed_design": design.full_runs,
            "calibration": len(calibration),
            "stopped_when_steady": len(stopped),
        },
        "points": {
            "measured": sum(1 for p in points if p["measured"]),
            "grid": len(points),
        },
        "stop": last.stop,
        "models": shapes.notes,
        "rounds": [r.to_json() for r in outcome.rounds],
        "grid": points,
    }


def _grid_rows(design: Design, outcome: Outcome, shapes: Shapes) -> list[dict[str, Any]]:
    """A row per point of the grid, curve by curve: measured (its runs, mean and CI, the round that first
    chose it and why), or model-only (what the curve predicts there, and from what)."""
    first: dict[str, tuple[int, Request]] = {}
    for rnd in outcome.rounds:
        for req in rnd.requests:
            first.setdefault(req.point.point_key, (rnd.index, req))
    by_point: dict[str, list[Observed]] = {}
    for r in outcome.runs:
        by_point.setdefault(r.point.point_key, []).append(r)
    summaries = {}
    for key, runs in by_point.items():
        s = summarize(runs)
        if s is not None:
            summaries[key] = s
    points: list[dict[str, Any]] = []
    for pts in curves(design.points).values():
        curve = Curve(pts, summaries, shapes.by_point)
        for p in pts:
            runs = by_point.get(p.point_key, [])
            row: dict[str, Any] = {**p.to_json(), "measured": p.point_key in summaries}
            chosen = first.get(p.point_key)
            if runs:
                s = summaries.get(p.point_key)
                ok = sum(1 for r in runs if r.ok)
                row.update(
                    runs=len(runs),
                    runs_ok=ok,
                    mean=s.mean if s else None,
                    ci_low=s.ci_low if s else None,
                    ci_high=s.ci_high if s else None,
                    chosen_round=chosen[0] if chosen is not None else None,
                    chosen_kind=chosen[1].kind if chosen is not None else None,
                    why=chosen[1].reason if chosen is not None else "",
                )
            else:
                pred = curve.predict(p)
                around = [q.threads for q in curve.measured]
                how = "the CTMC model's shape scaled to" if curve.modelled else "interpolated between"
                row.update(
                    runs=0,
                    runs_ok=0,
                    mean=pred,
                    ci_low=None,
                    ci_high=None,
                    chosen_round=None,
                    chosen_kind=None,
                    why=(
                        f"model-only: never measured; {how} the measured thread counts {around}"
                        if around
                        else "model-only: never measured, and no point of its curve was measured"
                    ),
                )
            points.append(row)
    return points
