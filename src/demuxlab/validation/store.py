"""Storage of calibrations and predictions through ``demuxlab.db.models`` (thin; no model logic).

It lived in ``demuxlab.ctmc`` once; it is here so the CTMC package stays pure (it imports no database),
and the model stages (:mod:`demuxlab.validation.db`) and the ``demuxlab model`` commands store through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from demuxlab.ctmc.predict import Prediction
from demuxlab.ctmc.rates import Rates
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import CALIBRATION_REFUSED, SOURCE_CALIBRATION, SOURCE_PAPER


def save_calibration(
    rates: Rates,
    pattern: str,
    notifier: str,
    source_runs: Sequence[str],
    *,
    host_id: int | None = None,
    artifacts: dict[str, Any] | None = None,
    method: str = "seed001-lowest-concurrency",
    url: str | None = None,
) -> int:
    """Store a calibration and return its id.

    A calibration is identified by what it was fitted from: storing one again for the same pattern,
    notifier, method and set of source runs updates that row in place (its id, and so the predictions
    that reference it, stay), which makes the workflow's calibrate stage idempotent.
    """
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration

    runs = sorted(str(r) for r in source_runs)
    values = {
        "host_id": host_id,
        "rates": rates.to_doc(),
        "artifacts": dict(artifacts or {}),
    }
    with session(url) as s:
        row = s.scalars(
            select(Calibration)
            .where(
                Calibration.pattern == pattern,
                Calibration.notifier == notifier,
                Calibration.method == method,
                Calibration.source_runs == runs,
            )
            .order_by(Calibration.id)
            .with_for_update()
        ).first()
        if row is None:
            row = Calibration(pattern=pattern, notifier=notifier, method=method, source_runs=runs, **values)
            s.add(row)
        else:
            for key, value in values.items():
                setattr(row, key, value)
        s.flush()
        return int(row.id)


#: The ``method`` of a calibration row that records a refusal (or a pair without a successful run) instead of
#: rates: its ``rates`` are empty, its ``artifacts`` say why (``error``) and hold the self-check
#: (``self_check``), so that a reader of the database (the dashboard) can say where a model line is missing
#: and why. No prediction ever references one.
REFUSED = CALIBRATION_REFUSED


def save_refusal(
    pattern: str,
    notifier: str,
    source_runs: Sequence[str],
    *,
    experiment: str,
    spec_sha256: str,
    error: str,
    self_check: Sequence[dict[str, Any]] = (),
    hardware_class: str | None = None,
    url: str | None = None,
) -> int:
    """Record that an experiment's calibration of ``pattern``/``notifier`` (and hardware class) was not
    fitted, and why; one row per experiment, pair and class, replaced when stored again. Returns its id."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration

    artifacts: dict[str, Any] = {
        "experiment": experiment,
        "spec_sha256": spec_sha256,
        "error": error,
        "self_check": list(self_check),
        **({"hardware_class": hardware_class} if hardware_class is not None else {}),
    }
    with session(url) as s:
        row = next(
            (
                r
                for r in s.scalars(
                    select(Calibration)
                    .where(
                        Calibration.pattern == pattern,
                        Calibration.notifier == notifier,
                        Calibration.method == REFUSED,
                        Calibration.artifacts["spec_sha256"].astext == spec_sha256,
                    )
                    .with_for_update()
                )
                if (r.artifacts or {}).get("hardware_class") == hardware_class
            ),
            None,
        )
        runs = sorted(str(r) for r in source_runs)
        if row is None:
            row = Calibration(
                pattern=pattern, notifier=notifier, method=REFUSED, rates={}, source_runs=runs, artifacts={}
            )
            s.add(row)
        row.source_runs = runs
        row.artifacts = artifacts
        s.flush()
        return int(row.id)


def refusal_reasons(spec_sha256: str, url: str | None = None) -> dict[tuple[str, str], str]:
    """Why each (pattern, notifier) of an experiment has no calibration, from its stored refusals, in the
    words calibrations.json gives the workflow's ``demuxlab claims --calibrations``
    (:func:`demuxlab.validation.calibration.join_reasons`): what a bundle's reproduce has instead."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration
    from demuxlab.validation.calibration import join_reasons, refusal_status

    with session(url) as s:
        rows = s.scalars(
            select(Calibration).where(
                Calibration.method == REFUSED, Calibration.artifacts["spec_sha256"].astext == spec_sha256
            )
        ).all()
        found = [(r.pattern, r.notifier, list(r.source_runs or ()), r.artifacts or {}) for r in rows]
    return join_reasons(
        (pattern, notifier, a.get("hardware_class"), refusal_status(runs, a["error"]), a["error"])
        for pattern, notifier, runs, a in found
        if isinstance(a.get("error"), str)
    )


def clear_refusal(
    pattern: str,
    notifier: str,
    *,
    spec_sha256: str,
    hardware_class: str | None = None,
    url: str | None = None,
) -> None:
    """Forget an experiment's refused calibration of a pair and class (it has been fitted since)."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration

    with session(url) as s:
        for r in s.scalars(
            select(Calibration).where(
                Calibration.pattern == pattern,
                Calibration.notifier == notifier,
                Calibration.method == REFUSED,
                Calibration.artifacts["spec_sha256"].astext == spec_sha256,
            )
        ):
            if (r.artifacts or {}).get("hardware_class") == hardware_class:
                s.delete(r)


def load_calibration(calibration_id: int, url: str | None = None) -> tuple[str, str, Rates]:
    """(pattern, notifier, rates) of a stored calibration."""
    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration

    with session(url) as s:
        row = s.get(Calibration, calibration_id)
        if row is None:
            raise DemuxlabError(f"calibration: no calibration with id {calibration_id}")
        return row.pattern, row.notifier, Rates.from_dict(dict(row.rates), f"calibration {calibration_id}")


def save_prediction(
    prediction: Prediction, point_id: int, calibration_id: int | None = None, url: str | None = None
) -> int:
    """Store (replacing any earlier one for the same point, rates and method) a prediction."""
    return save_predictions([(prediction, point_id, calibration_id)], url)[0]


def save_predictions(
    items: Sequence[tuple[Prediction, int, int | None]], url: str | None = None
) -> list[int]:
    """Store predictions ``(prediction, point id, calibration id or None for the paper's rates)`` in one
    transaction: all of them or, on any error, none. Each replaces an earlier prediction of the same point,
    rates and method. A prediction must match its point (pattern, threads) and its calibration (pattern,
    notifier)."""
    from sqlalchemy import delete

    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration, Point
    from demuxlab.db.models import Prediction as PredictionRow

    ids: list[int] = []
    with session(url) as s:
        for prediction, point_id, calibration_id in items:
            point = s.get(Point, point_id)
            if point is None:
                raise DemuxlabError(f"prediction: no point with id {point_id}")
            if point.pattern != prediction.pattern or point.threads != prediction.threads:
                raise DemuxlabError(
                    f"prediction: point {point_id} is {point.pattern}/t{point.threads}, "
                    f"the prediction is {prediction.pattern}/t{prediction.threads}"
                )
            if calibration_id is not None:
                cal = s.get(Calibration, calibration_id)
                if cal is None:
                    raise DemuxlabError(f"prediction: no calibration with id {calibration_id}")
                if (cal.pattern, cal.notifier) != (point.pattern, point.notifier):
                    raise DemuxlabError(
                        f"prediction: calibration {calibration_id} is for {cal.pattern}/{cal.notifier}, "
                        f"point {point_id} is {point.pattern}/{point.notifier}"
                    )
            source = SOURCE_PAPER if calibration_id is None else SOURCE_CALIBRATION
            cond = (
                PredictionRow.calibration_id.is_(None)
                if calibration_id is None
                else (PredictionRow.calibration_id == calibration_id)
            )
            s.execute(
                delete(PredictionRow).where(
                    PredictionRow.point_id == point_id,
                    PredictionRow.rates_source == source,
                    PredictionRow.method == prediction.method,
                    cond,
                )
            )
            row = PredictionRow(
                point_id=point_id,
                calibration_id=calibration_id,
                rates_source=source,
                method=prediction.method,
                parameters={**prediction.as_dict(), **prediction.details},
                throughput_msgs_per_s=prediction.throughput_msgs_per_s,
                ci_halfwidth_rel=prediction.ci_halfwidth_rel,
            )
            s.add(row)
            s.flush()
            ids.append(int(row.id))
    return ids
