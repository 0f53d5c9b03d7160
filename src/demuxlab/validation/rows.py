"""Model against measurement: the validation table (one row per modelled point and hardware class) and its
summary (per pattern, notifier, class and rates source), seed 001's comparison.

Pure: the modelled points, the measured summaries (:func:`demuxlab.report.summarize`'s rows) and the stored
predictions in, the rows of ``validation.csv`` and ``validation_summary.csv`` out.

relative error = (predicted − measured) / measured. The paper's rates are the same for every class; the
calibrated prediction of a (point, class) is the one from that class's calibration, never another class's;
where a (point, class) has predictions from several calibrations, the newest is taken.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.registry import patterns
from demuxlab.validation.prediction import ModelPoint
from demuxlab.vocab import RATE_SOURCES, SOURCE_CALIBRATION

VALIDATION_FIELDS: tuple[str, ...] = (
    "point_key",
    "hardware_class",
    "pattern",
    "notifier",
    "threads",
    "work_us",
    "connections",
    "runs_ok",
    "measured_msgs_per_s",
    "measured_ci_halfwidth_rel",
    "method",
    "paper_msgs_per_s",
    "paper_ci_halfwidth_rel",
    "paper_rel_error",
    "calibration_id",
    "calibration_msgs_per_s",
    "calibration_ci_halfwidth_rel",
    "calibration_rel_error",
    "skipped",
)
SUMMARY_FIELDS: tuple[str, ...] = (
    "pattern",
    "notifier",
    "hardware_class",
    "rates_source",
    "points",
    "mean_abs_rel_error",
    "max_abs_rel_error",
)

# (point id, rates source, hardware class of its calibration: None for the paper's rates or a local sweep)
PredictionKey = tuple[int, str, str | None]


@dataclass(frozen=True)
class StoredPrediction:
    """What the table reads of one stored prediction."""

    point_id: int
    rates_source: str
    hardware_class: str | None  # its calibration's class; None: the paper's rates, or a local sweep
    throughput_msgs_per_s: float
    ci_halfwidth_rel: float | None
    calibration_id: int | None


def newest_predictions(predictions: Iterable[StoredPrediction]) -> dict[PredictionKey, StoredPrediction]:
    """Per (point, rates source, class): the last of ``predictions`` (given oldest first)."""
    return {(p.point_id, p.rates_source, p.hardware_class): p for p in predictions}


def measured_by_point(
    summary: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str | None], Mapping[str, Any]]:
    """The measured (not calibration) rows of the modelled patterns, by (point key, hardware class)."""
    modelled = patterns()
    return {
        (row["point_key"], row["hardware_class"]): row
        for row in summary
        if not row["instrument"] and row["pattern"] in modelled
    }


def validation_table(
    points: Iterable[ModelPoint],
    measured: Mapping[tuple[str, str | None], Mapping[str, Any]],
    predictions: Iterable[StoredPrediction],
    method: str,
) -> list[dict[str, Any]]:
    """Per modelled point (by key) and hardware class it was measured on: the measurement (that class's
    runs only) and each rates source's prediction by ``method`` with its relative error."""
    best = newest_predictions(predictions)
    rows: list[dict[str, Any]] = []
    for pt in sorted(points, key=lambda p: p.point_key):
        classes = sorted({c for (k, c) in measured if k == pt.point_key}, key=lambda c: c or "") or [None]
        for cls in classes:
            rows.append(validation_row(pt, cls, measured.get((pt.point_key, cls)), best, method))
    return rows


def validation_row(
    pt: ModelPoint,
    cls: str | None,
    m: Mapping[str, Any] | None,
    best: Mapping[PredictionKey, StoredPrediction],
    method: str,
) -> dict[str, Any]:
    mean = m["throughput_mean"] if m else None
    row: dict[str, Any] = {
        "point_key": pt.point_key,
        "hardware_class": cls,
        "pattern": pt.pattern,
        "notifier": pt.notifier,
        "threads": pt.threads,
        "work_us": pt.work_us,
        "connections": pt.connections,
        "runs_ok": m["runs_ok"] if m else 0,
        "measured_msgs_per_s": mean,
        "measured_ci_halfwidth_rel": m["throughput_ci_halfwidth_rel"] if m else None,
        "method": method,
    }
    for source in RATE_SOURCES:
        got = best.get((pt.point_id, source, cls if source == SOURCE_CALIBRATION else None))
        predicted = got.throughput_msgs_per_s if got else None
        row[f"{source}_msgs_per_s"] = predicted
        row[f"{source}_ci_halfwidth_rel"] = got.ci_halfwidth_rel if got else None
        row[f"{source}_rel_error"] = (predicted - mean) / mean if predicted is not None and mean else None
        if source == SOURCE_CALIBRATION:
            row["calibration_id"] = got.calibration_id if got else None
    row["skipped"] = pt.skip_reason or ""
    return row


def summarize_errors(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (pattern, notifier, hardware class, rates source): points compared, mean and largest absolute
    relative error. Classes are never pooled."""
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        for source in RATE_SOURCES:
            err = row[f"{source}_rel_error"]
            if err is not None:
                key = (row["pattern"], row["notifier"], row.get("hardware_class") or "", source)
                groups[key].append(abs(err))
    return [
        {
            "pattern": pattern,
            "notifier": notifier,
            "hardware_class": cls or None,
            "rates_source": source,
            "points": len(errs),
            "mean_abs_rel_error": sum(errs) / len(errs),
            "max_abs_rel_error": max(errs),
        }
        for (pattern, notifier, cls, source), errs in sorted(groups.items())
    ]
