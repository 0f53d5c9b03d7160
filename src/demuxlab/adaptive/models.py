"""The CTMC models' predictions of an adaptive sweep's points, from its own calibration runs, through the
validation stages' pure interfaces (:func:`demuxlab.validation.calibration.fit_calibration`,
:func:`demuxlab.validation.prediction.plan_predictions`) and the solvers (:func:`demuxlab.ctmc.predict.
predict_many`): the shapes that guide the model-guided points (:mod:`demuxlab.adaptive.guide`) and the
predictions the claims read.

No database and no files: the calibration runs are the policy's observations (their records' server
results). A point the models do not describe (open-loop load; since issue 19 every pattern has a
model, zero work included) has no shape; its curve is then guided by the measurements alone. Every point
that has one is predicted from its pattern × notifier's calibration when it could be fitted, else from
the paper's rates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from demuxlab.adaptive.runs import Observed
from demuxlab.ctmc.rates import Rates
from demuxlab.point import Point
from demuxlab.validation.calibration import CalibrationKey
from demuxlab.vocab import SOURCE_CALIBRATION

if TYPE_CHECKING:
    from demuxlab.validation.prediction import ModelPoint


@dataclass
class Shapes:
    """Predicted msg/s per point key, the claims' prediction rows, what the fit said, and why each pattern ×
    notifier it could not calibrate has no calibration (its refusal with the figure, in the words of
    recommendations.csv's ``model_missing``: :func:`demuxlab.validation.calibration.join_reasons`)."""

    by_point: dict[str, float] = field(default_factory=dict)
    predictions: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    why_missing: dict[tuple[str, str], str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"by_point": dict(sorted(self.by_point.items())), "notes": list(self.notes)}


def model_shapes(
    points: Sequence[Point],
    calibration_runs: Sequence[Observed],
    *,
    experiment: str = "",
    spec_sha256: str = "",
    method: str = "fluid",
    seed: int = 0,
) -> Shapes:
    """Fit each modelled pattern × notifier from ``calibration_runs`` and predict ``points``."""
    from demuxlab.ctmc.predict import predict_many
    from demuxlab.ctmc.registry import patterns
    from demuxlab.validation.prediction import FLUID_STALLED, drop_unsettled, plan_predictions

    out = Shapes()
    modelled = [p for p in points if p.pattern in patterns() and not p.instrument]
    if not modelled:
        return out
    ids, rates_of = _fit(modelled, calibration_runs, experiment, spec_sha256, out.notes, out.why_missing)
    model_points = _model_points(modelled, calibration_runs)
    plan = plan_predictions(model_points, ids, rates_of, method=method, rel_ci=0.01, seed=seed)
    for skip in plan.skipped:
        if skip["rates_source"] != SOURCE_CALIBRATION:
            out.notes.append(f"{skip['point_key']}: no model ({skip['skipped']})")
    predictions = drop_unsettled(plan, predict_many(plan.requests), {})
    stalled = dict.fromkeys(s["point_key"] for s in plan.skipped if s["skipped"] == FLUID_STALLED)
    by_key = {p.point_key: p for p in modelled}
    best: dict[str, tuple[str, float, float | None]] = {}
    for pred, (mp, cal) in zip(predictions, plan.jobs, strict=True):
        source = "paper" if cal is None else SOURCE_CALIBRATION
        if mp.point_key not in best or source == SOURCE_CALIBRATION:
            best[mp.point_key] = (source, pred.throughput_msgs_per_s, pred.ci_halfwidth_rel)
    out.notes += [f"{key}: no model ({FLUID_STALLED})" for key in stalled if key not in best]
    for key, (source, mean, ci) in sorted(best.items()):
        if mean > 0:
            out.by_point[key] = mean
            out.predictions.append(
                {**by_key[key].to_json(), "source": source, "mean": mean, "ci_halfwidth_rel": ci}
            )
    return out


def _fit(
    modelled: Sequence[Point],
    calibration_runs: Sequence[Observed],
    experiment: str,
    spec_sha256: str,
    notes: list[str],
    why_missing: dict[tuple[str, str], str],
) -> tuple[dict[CalibrationKey, int], dict[int, Rates]]:
    """Each pattern × notifier of ``modelled`` fitted from its calibration runs (its id and rates, in
    key order), or a note that its points take the paper's rates and, in ``why_missing``, why."""
    from demuxlab.validation.calibration import CalibrationRun, fit_calibration, join_reasons

    rates_of: dict[int, Rates] = {}
    ids: dict[CalibrationKey, int] = {}
    keys = sorted({(p.pattern, p.notifier) for p in modelled})
    for i, (pattern, notifier) in enumerate(keys):
        mine = [r for r in calibration_runs if (r.point.pattern, r.point.notifier) == (pattern, notifier)]
        ok = [
            CalibrationRun(
                run_id=r.run_id or f"{r.point.point_key}#{r.repeat}",
                server_result=dict(r.server_result or {}),
                throughput_msgs_per_s=r.throughput,
                connections=r.point.connections,
                server_host_id=None,
                server_artifact=None,
                launcher="",
                client_result=dict(r.client_result) if r.client_result else None,
                client_cores=r.client_cpus,
                wake_us=r.wake_us,
                handoff_us=r.handoff_us,
            )
            for r in mine
            if r.ok and r.server_result
        ]
        fit = fit_calibration((pattern, notifier, None), ok, len(mine) - len(ok), experiment, spec_sha256)
        if fit.rates is None:
            error = fit.outcome.error or "not fitted"
            notes.append(f"{pattern}/{notifier}: paper's rates ({error})")
            why_missing |= join_reasons([(pattern, notifier, None, fit.outcome.status, error)])
            continue
        ids[(pattern, notifier, None)] = i
        rates_of[i] = fit.rates
        notes.append(f"{pattern}/{notifier}: calibrated from {len(ok)} runs")
    return ids, rates_of


def _model_points(modelled: Sequence[Point], calibration_runs: Sequence[Observed]) -> list[ModelPoint]:
    """The points to predict, on the host the runs had."""
    from demuxlab.validation.prediction import ModelPoint

    # The models know the host's cores (issue 19): the server's and the client's CPUs of the runs, the
    # same for every point of a local sweep (the planner pins by topology, not by point).
    cores = Counter(r.server_cpus for r in calibration_runs if r.server_cpus).most_common(1)
    client_cores = Counter(r.client_cpus for r in calibration_runs if r.client_cpus).most_common(1)
    return [
        ModelPoint(
            i,
            p.point_key,
            p.pattern,
            p.notifier,
            p.threads,
            p.work_us,
            p.connections,
            p.rate,
            msg_size=p.msg_size,
            client_threads=p.client_threads,
            cores=cores[0][0] if cores else None,
            client_cores=client_cores[0][0] if client_cores else None,
        )
        for i, p in enumerate(modelled)
    ]
