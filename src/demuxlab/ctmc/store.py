"""Storage of calibrations and predictions through ``demuxlab.db.models`` (thin; no model logic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from demuxlab.ctmc.predict import Prediction
from demuxlab.ctmc.rates import Rates
from demuxlab.errors import DemuxlabError


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
    from demuxlab.db.engine import session
    from demuxlab.db.models import Calibration

    row = Calibration(
        pattern=pattern,
        notifier=notifier,
        host_id=host_id,
        rates={**rates.as_dict(), "source": dict(rates.source)},
        source_runs=list(source_runs),
        artifacts=dict(artifacts or {}),
        method=method,
    )
    with session(url) as s:
        s.add(row)
        s.flush()
        return int(row.id)


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
    from sqlalchemy import delete

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point
    from demuxlab.db.models import Prediction as PredictionRow

    source = "paper" if calibration_id is None else "calibration"
    with session(url) as s:
        point = s.get(Point, point_id)
        if point is None:
            raise DemuxlabError(f"prediction: no point with id {point_id}")
        if point.pattern != prediction.pattern or point.threads != prediction.threads:
            raise DemuxlabError(
                f"prediction: point {point_id} is {point.pattern}/t{point.threads}, "
                f"the prediction is {prediction.pattern}/t{prediction.threads}"
            )
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
        return int(row.id)
