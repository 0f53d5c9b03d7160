"""Which measured points the CTMC models predict, from which rates, and the entries the workflow records.

Pure: the modelled points (:class:`ModelPoint`, read by :mod:`demuxlab.validation.db`) and the stored
calibrations' ids and rates in; a :class:`PredictionPlan` out (the solver requests, and the skipped
points with their reasons); after the solvers ran and the predictions were stored, the entries of
``predictions.json``. A point is predicted from the paper's rates and, for each hardware class it ran on,
from that class's calibration, never from another class's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.ctmc.predict import Prediction, PredictRequest
from demuxlab.ctmc.rates import Host, Rates
from demuxlab.validation.calibration import CalibrationKey
from demuxlab.vocab import SOURCE_CALIBRATION, SOURCE_PAPER


@dataclass(frozen=True)
class ModelPoint:
    """A measured (not calibration) point of a modelled pattern (:func:`demuxlab.ctmc.registry.patterns`)."""

    point_id: int
    point_key: str
    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    rate: float | None
    classes: tuple[str | None, ...] = (None,)  # the hardware classes its runs ran on
    msg_size: int = 1
    client_threads: int | None = None
    cores: int | None = None  # the server's CPUs in its runs' pinning (None: unknown, a core per thread)
    client_cores: int | None = None  # the client's

    @property
    def skip_reason(self) -> str | None:
        if self.rate is not None:
            return "open-loop load: the models are closed-loop"
        return None

    def host(self, with_client: bool) -> Host:
        """Where its runs ran, for the models: the server's cores, and the client (for calibrated rates,
        which measured its turnaround)."""
        if not with_client:
            return Host(cores=self.cores)
        return Host(cores=self.cores, client_threads=self.client_threads, client_cores=self.client_cores)


@dataclass
class PredictionPlan:
    """The solver requests, in order, with the point and calibration (None: the paper's rates) of each, and
    the entries of the (point, rates source) pairs that are not predicted, with the reason."""

    requests: list[PredictRequest] = field(default_factory=list)
    jobs: list[tuple[ModelPoint, int | None]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)


def plan_predictions(
    points: Sequence[ModelPoint],
    calibration_ids: Mapping[CalibrationKey, int],
    rates_of: Mapping[int, Rates],
    *,
    method: str,
    rel_ci: float,
    seed: int,
) -> PredictionPlan:
    """Every point from the paper's rates and from the calibration of each class it ran on
    (``calibration_ids``: (pattern, notifier, class) → calibration id; ``rates_of``: id → its rates)."""
    plan = PredictionPlan()
    for pt in points:
        wanted: list[tuple[str, int | None, str | None]] = [(SOURCE_PAPER, None, None)]
        wanted += [
            (SOURCE_CALIBRATION, calibration_ids.get((pt.pattern, pt.notifier, c)), c) for c in pt.classes
        ]
        for source, cal, cls in wanted:
            reason = pt.skip_reason
            if reason is None and source == SOURCE_CALIBRATION and cal is None:
                reason = f"no calibration of {pt.pattern}/{pt.notifier}" + (f" on class {cls}" if cls else "")
            if reason is not None:
                skip: dict[str, Any] = {"point_key": pt.point_key, "rates_source": source, "skipped": reason}
                plan.skipped.append({**skip, "hardware_class": cls} if cls else skip)
                continue
            plan.jobs.append((pt, cal))
            rates = None if cal is None else rates_of[cal].for_workload(pt.connections, pt.msg_size)
            plan.requests.append(
                PredictRequest(
                    pattern=pt.pattern,
                    threads=pt.threads,
                    work_us=pt.work_us,
                    connections=pt.connections,
                    method=method,
                    rates=rates,
                    rel_ci=rel_ci,
                    seed=seed,
                    host=pt.host(rates is not None and rates.has_client),
                    notifier=pt.notifier,
                )
            )
    return plan


FLUID_STALLED = "the fluid approximation did not settle (one connection per thread or fewer): use the SSA"


def classes_of(calibration_ids: Mapping[CalibrationKey, int]) -> dict[int, str | None]:
    """Calibration id → the hardware class it was fitted on (None: unclassed)."""
    return {cid: cls for (_p, _n, cls), cid in calibration_ids.items()}


def drop_unsettled(
    plan: PredictionPlan, predictions: Sequence[Prediction], class_of: Mapping[int, str | None]
) -> list[Prediction]:
    """The predictions that answer (:attr:`Prediction.settled`), in the plan's order; each that does not (a
    fluid that stalled, or whose integrator gave up) leaves the plan's jobs and requests for its skipped
    entries, with the reason."""
    kept: list[Prediction] = []
    jobs, requests = [], []
    for p, (pt, cal), req in zip(predictions, plan.jobs, plan.requests, strict=True):
        if p.settled:
            kept.append(p)
            jobs.append((pt, cal))
            requests.append(req)
            continue
        source = SOURCE_PAPER if cal is None else SOURCE_CALIBRATION
        why = f"{p.failure}: use the SSA" if p.failure else FLUID_STALLED
        skip: dict[str, Any] = {"point_key": pt.point_key, "rates_source": source, "skipped": why}
        cls = class_of.get(cal) if cal is not None else None
        plan.skipped.append({**skip, "hardware_class": cls} if cls else skip)
    plan.jobs[:], plan.requests[:] = jobs, requests
    return kept


def prediction_entries(
    plan: PredictionPlan,
    predictions: Sequence[Prediction],
    prediction_ids: Sequence[int],
    calibration_ids: Mapping[CalibrationKey, int],
) -> list[dict[str, Any]]:
    """One entry per point, rates source (and class): the stored prediction (``predictions`` and their
    ``prediction_ids`` in the plan's order), or the skipped pair with its reason; sorted by point."""
    entries = list(plan.skipped)
    class_of = classes_of(calibration_ids)
    for pid, p, (pt, cal) in zip(prediction_ids, predictions, plan.jobs, strict=True):
        entry: dict[str, Any] = {
            "point_key": pt.point_key,
            "rates_source": SOURCE_PAPER if cal is None else SOURCE_CALIBRATION,
            "calibration_id": cal,
            "prediction_id": pid,
            **p.as_dict(),
        }
        if cal is not None and class_of.get(cal):
            entry["hardware_class"] = class_of[cal]
        entries.append(entry)
    entries.sort(key=lambda e: (e["point_key"], e["rates_source"], e.get("hardware_class") or ""))
    return entries


def predictions_doc(
    experiment: str,
    spec_sha256: str,
    entries: Sequence[dict[str, Any]],
    *,
    method: str,
    rel_ci: float,
    seed: int,
) -> dict[str, Any]:
    """``predictions.json``: the settings and every entry."""
    return {
        "experiment": experiment,
        "spec_sha256": spec_sha256,
        "method": method,
        "rel_ci": rel_ci,
        "seed": seed,
        "predictions": list(entries),
    }


def predictions_message(entries: Sequence[dict[str, Any]]) -> str:
    """The line ``predict-experiment`` prints."""
    done = sum(1 for e in entries if "skipped" not in e)
    return f"predictions: {done} stored, {len(entries) - done} skipped"
