"""The model stages' database side: the calibration runs, the modelled points, the stored calibrations and
predictions, and the measured summaries, read as the plain values the pure modules take; the fitted rates
and the predictions stored (through :mod:`demuxlab.validation.store`).

Every query is of one experiment, identified by the spec's name and SHA-256 (this exact spec).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from demuxlab.ctmc.predict import Prediction
from demuxlab.ctmc.rates import Rates
from demuxlab.ctmc.registry import patterns
from demuxlab.errors import DemuxlabError
from demuxlab.spec import Spec
from demuxlab.validation.calibration import (
    CalibrationKey,
    CalibrationRun,
    Fit,
    PlainCalibrationRun,
    pinned_us,
)
from demuxlab.validation.prediction import ModelPoint
from demuxlab.validation.rows import StoredPrediction
from demuxlab.vocab import RUN_OK


def experiment_id(s: Any, spec: Spec) -> int:
    """The id of ``spec``'s experiment in session ``s``; none is one clear error (ingest first)."""
    from sqlalchemy import select

    from demuxlab.db.models import Experiment

    exp_id = s.scalar(
        select(Experiment.id).where(Experiment.name == spec.name, Experiment.spec_sha256 == spec.sha256)
    )
    if exp_id is None:
        raise DemuxlabError(
            f"experiment {spec.name!r} (spec {spec.sha256[:12]}) has no runs in the database (ingest first)"
        )
    return int(exp_id)


def calibration_runs(
    spec: Spec, url: str | None = None
) -> tuple[dict[CalibrationKey, list[CalibrationRun]], dict[CalibrationKey, int]]:
    """The experiment's calibration runs by (pattern, notifier, hardware class): the successful ones (in
    point and repeat order) and how many failed."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point, Run

    runs: dict[CalibrationKey, list[CalibrationRun]] = defaultdict(list)
    failed: dict[CalibrationKey, int] = defaultdict(int)
    with session(url) as s:
        exp_id = experiment_id(s, spec)
        rows = s.execute(
            select(Point.pattern, Point.notifier, Point.connections, Run)
            .join(Run, Run.point_id == Point.id)
            .where(Point.experiment_id == exp_id, Point.instrument.is_(True))
            .order_by(Point.point_key, Run.repeat_index)
        ).all()
        for pattern, notifier, connections, run in rows:
            key = (pattern, notifier, run.hardware_class)
            if run.status == RUN_OK and run.server_result is not None:
                runs[key].append(
                    CalibrationRun(
                        run_id=str(run.run_id),
                        server_result=run.server_result,
                        throughput_msgs_per_s=run.throughput_msgs_per_s,
                        connections=connections,
                        server_host_id=run.server_host_id,
                        server_artifact=run.server_artifact,
                        launcher=str(run.launcher),
                        client_result=run.client_result,
                        client_cores=_cpu_count(run.pinning, "client_cpus"),
                        wake_us=pinned_us(run.pinning, "wake_us"),
                        handoff_us=pinned_us(run.pinning, "handoff_us"),
                    )
                )
            else:
                failed[key] += 1
    return dict(runs), dict(failed)


def plain_calibration_runs(
    spec: Spec, url: str | None = None
) -> dict[CalibrationKey, list[PlainCalibrationRun]]:
    """The experiment's successful plain runs at a calibration point's setting (the same pattern, notifier,
    threads, work, connections, size, client threads and rate, uninstrumented: a point of the sweep the
    spec measures anyway), by (pattern, notifier, hardware class): a calibration's speed and self-check
    (issue 43). A spec whose grid has no such point leaves its calibration to the instrumented runs."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point, Run

    def setting(p: Any) -> tuple[Any, ...]:
        return (
            p.pattern,
            p.notifier,
            p.threads,
            p.work_us,
            p.connections,
            p.msg_size,
            p.client_threads,
            p.rate,
        )

    out: dict[CalibrationKey, list[PlainCalibrationRun]] = defaultdict(list)
    with session(url) as s:
        exp_id = experiment_id(s, spec)
        points = s.scalars(select(Point).where(Point.experiment_id == exp_id)).all()
        wanted = {setting(p) for p in points if p.instrument}
        twins = [p.id for p in points if not p.instrument and setting(p) in wanted]
        if not twins:
            return {}
        rows = s.execute(
            select(Point.pattern, Point.notifier, Point.connections, Run)
            .join(Run, Run.point_id == Point.id)
            .where(Point.id.in_(twins), Run.status == RUN_OK)
            .order_by(Point.point_key, Run.repeat_index)
        ).all()
        for pattern, notifier, connections, run in rows:
            if run.server_result is None:
                continue
            out[(pattern, notifier, run.hardware_class)].append(
                PlainCalibrationRun(
                    run_id=str(run.run_id),
                    server_result=run.server_result,
                    throughput_msgs_per_s=run.throughput_msgs_per_s,
                    connections=connections,
                    client_result=run.client_result,
                    client_cores=_cpu_count(run.pinning, "client_cpus"),
                )
            )
    return dict(out)


def save_fit(fit: Fit, url: str | None = None) -> int:
    """Store a fitted calibration (:func:`.store.save_calibration`: idempotent per pattern, notifier and
    source runs); returns its id."""
    from demuxlab.validation.store import save_calibration

    if fit.rates is None:
        raise DemuxlabError(
            f"calibration {fit.outcome.pattern}/{fit.outcome.notifier}: nothing fitted to store"
        )
    o = fit.outcome
    return save_calibration(
        fit.rates, o.pattern, o.notifier, o.source_runs, host_id=fit.host_id, artifacts=fit.artifacts, url=url
    )


def model_points(spec: Spec, url: str | None = None) -> list[ModelPoint]:
    """The experiment's measured (not calibration) points of the modelled patterns, by key."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point, Run

    with session(url) as s:
        exp_id = experiment_id(s, spec)
        pts = s.scalars(
            select(Point)
            .where(Point.experiment_id == exp_id, Point.instrument.is_(False), Point.pattern.in_(patterns()))
            .order_by(Point.point_key)
        ).all()
        classes: dict[int, set[str | None]] = defaultdict(set)
        pinning: dict[int, tuple[int | None, int | None]] = {}  # the CPUs of the point's (first) run's sides
        for point_id, cls, pin in s.execute(
            select(Run.point_id, Run.hardware_class, Run.pinning)
            .where(Run.point_id.in_([p.id for p in pts]))
            .order_by(Run.point_id, Run.repeat_index)
        ):
            classes[point_id].add(cls)
            pinning.setdefault(point_id, (_cpu_count(pin, "server_cpus"), _cpu_count(pin, "client_cpus")))
        return [
            ModelPoint(
                p.id,
                p.point_key,
                p.pattern,
                p.notifier,
                p.threads,
                p.work_us,
                p.connections,
                p.rate,
                tuple(sorted(classes[p.id], key=lambda c: c or "")) or (None,),
                msg_size=p.msg_size,
                client_threads=p.client_threads,
                cores=pinning.get(p.id, (None, None))[0],
                client_cores=pinning.get(p.id, (None, None))[1],
            )
            for p in pts
        ]


def _cpu_count(pinning: Any, side: str) -> int | None:
    """How many CPUs a run's pinning gave ``side`` (``server_cpus``/``client_cpus``), None if unknown."""
    cpus = pinning.get(side) if isinstance(pinning, dict) else None
    return len(set(cpus)) if isinstance(cpus, list) and cpus else None


def calibration_rates(
    calibration_ids: Mapping[CalibrationKey, int], url: str | None = None
) -> dict[int, Rates]:
    """The stored rates of each calibration id; one that calibrates another pattern or notifier than its
    key says is an error."""
    from demuxlab.validation.store import load_calibration

    rates_of: dict[int, Rates] = {}
    for (pattern, notifier, _cls), cid in calibration_ids.items():
        cal_pattern, cal_notifier, rates = load_calibration(cid, url)
        if (cal_pattern, cal_notifier) != (pattern, notifier):
            raise DemuxlabError(
                f"calibration {cid}: calibrates {cal_pattern}/{cal_notifier}, not {pattern}/{notifier}"
            )
        rates_of[cid] = rates
    return rates_of


def save_predictions(
    items: Sequence[tuple[Prediction, int, int | None]], url: str | None = None
) -> list[int]:
    """Store ``(prediction, point id, calibration id)`` in one transaction (:mod:`.store`)."""
    from demuxlab.validation.store import save_predictions as save

    return save(items, url)


def stored_predictions(
    point_ids: Iterable[int], method: str, url: str | None = None
) -> list[StoredPrediction]:
    """The stored predictions by ``method`` of these points, oldest first, each with its calibration's
    hardware class."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration
    from demuxlab.db.models import Prediction as PredictionRow

    with session(url) as s:
        preds = s.scalars(
            select(PredictionRow)
            .where(PredictionRow.point_id.in_(list(point_ids)), PredictionRow.method == method)
            .order_by(PredictionRow.created_at, PredictionRow.id)
        ).all()
        cal_ids = {p.calibration_id for p in preds if p.calibration_id is not None}
        class_of: dict[int, str | None] = {
            cid: (artifacts or {}).get("hardware_class")
            for cid, artifacts in s.execute(
                select(Calibration.id, Calibration.artifacts).where(Calibration.id.in_(list(cal_ids)))
            )
        }
        return [
            StoredPrediction(
                point_id=p.point_id,
                rates_source=p.rates_source,
                hardware_class=class_of.get(p.calibration_id) if p.calibration_id is not None else None,
                throughput_msgs_per_s=p.throughput_msgs_per_s,
                ci_halfwidth_rel=p.ci_halfwidth_rel,
                calibration_id=p.calibration_id,
            )
            for p in preds
        ]


def measured_summary(spec: Spec, url: str | None = None) -> list[dict[str, Any]]:
    """Every point's measurement per hardware class (:func:`demuxlab.report.summarize`)."""
    from demuxlab.report import load_rows, summarize

    return summarize(load_rows(spec.name, spec.sha256, url))
