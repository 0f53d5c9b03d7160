"""The workflow's three model stages (seed 001): calibrate, predict, validate — each one call that reads the
database, runs the pure steps and writes what the stage produces. ``demuxlab model calibrate-experiment``,
``predict-experiment`` and ``validate-experiment`` are thin commands over :func:`calibrate_stage`,
:func:`predict_stage` and :func:`write_validation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from demuxlab.spec import Spec, calibration_points
from demuxlab.validation import db, files
from demuxlab.validation.calibration import (
    CalibrationKey,
    CalibrationOutcome,
    calibration_keys,
    calibrations_doc,
    fit_calibration,
)
from demuxlab.validation.prediction import (
    classes_of,
    drop_unsettled,
    plan_predictions,
    prediction_entries,
    predictions_doc,
)
from demuxlab.validation.rows import measured_by_point, validation_table
from demuxlab.vocab import METHOD_SSA

# -- 1. calibrate --------------------------------------------------------------------------------------------


def calibrate_experiment(spec: Spec, url: str | None = None) -> list[CalibrationOutcome]:
    """Fit and store one calibration per (pattern, notifier) of the spec's calibration points and hardware
    class of their runs."""
    wanted = {(p.pattern, p.notifier) for p in calibration_points(spec)}
    if not wanted:  # no calibration runs (calibration.repeats 0): nothing to fit, nothing to wait for
        return []
    runs, failed = db.calibration_runs(spec, url)
    plain = db.plain_calibration_runs(spec, url)  # the same points' plain runs: speed and self-check
    outcomes = []
    for key in calibration_keys(wanted, [*runs, *failed]):
        fit = fit_calibration(
            key, runs.get(key, []), failed.get(key, 0), spec.name, spec.sha256, plain.get(key, [])
        )
        outcomes.append(fit.outcome if fit.rates is None else fit.stored(db.save_fit(fit, url)))
    return outcomes


def calibrate_stage(spec: Spec, out: Path, url: str | None = None) -> list[CalibrationOutcome]:
    """:func:`calibrate_experiment`, and its outcomes written to ``out`` (``calibrations.json``)."""
    outcomes = calibrate_experiment(spec, url)
    files.write_doc(out, calibrations_doc(spec.name, spec.sha256, outcomes))
    return outcomes


# -- 2. predict ----------------------------------------------------------------------------------------------


def predict_experiment(
    spec: Spec,
    calibration_ids: Mapping[CalibrationKey, int],
    *,
    method: str = METHOD_SSA,
    rel_ci: float = 0.01,
    seed: int = 0,
    jobs: int = 1,
    url: str | None = None,
) -> list[dict[str, Any]]:
    """Predict every measured point of a modelled pattern from the paper's rates and from its calibration
    (if any), and store the predictions in one transaction.

    ``calibration_ids`` maps (pattern, notifier, hardware class) to a stored calibration; a point is
    predicted from the calibration of each class it ran on, never from another class's. Returns one entry
    per point, rates source (and class): the stored prediction, or ``skipped`` with the reason.
    """
    from demuxlab.ctmc.predict import predict_many

    rates_of = db.calibration_rates(calibration_ids, url)
    plan = plan_predictions(
        db.model_points(spec, url), calibration_ids, rates_of, method=method, rel_ci=rel_ci, seed=seed
    )
    predictions = drop_unsettled(plan, predict_many(plan.requests, jobs=jobs), classes_of(calibration_ids))
    ids = db.save_predictions(
        [(p, pt.point_id, cal) for p, (pt, cal) in zip(predictions, plan.jobs, strict=True)], url
    )
    return prediction_entries(plan, predictions, ids, calibration_ids)


def predict_stage(
    spec: Spec,
    calibrations: Path | None,
    out: Path,
    *,
    method: str = METHOD_SSA,
    rel_ci: float = 0.01,
    seed: int = 0,
    jobs: int = 1,
    url: str | None = None,
) -> list[dict[str, Any]]:
    """:func:`predict_experiment` from the calibrations file ``calibrations`` (``calibrate-experiment``'s
    output; None: the paper's rates only), its entries written to ``out`` (``predictions.json``)."""
    ids = files.read_calibration_ids(calibrations, spec.sha256) if calibrations is not None else {}
    entries = predict_experiment(spec, ids, method=method, rel_ci=rel_ci, seed=seed, jobs=jobs, url=url)
    doc = predictions_doc(spec.name, spec.sha256, entries, method=method, rel_ci=rel_ci, seed=seed)
    files.write_doc(out, doc)
    return entries


# -- 3. validate ---------------------------------------------------------------------------------------------


def validation_rows(spec: Spec, method: str = METHOD_SSA, url: str | None = None) -> list[dict[str, Any]]:
    """Per measured point of a modelled pattern and hardware class: the measurement (that class's runs
    only) and each source's prediction with its relative error (:mod:`demuxlab.validation.rows`)."""
    measured = measured_by_point(db.measured_summary(spec, url))
    points = db.model_points(spec, url)
    predictions = db.stored_predictions([p.point_id for p in points], method, url)
    return validation_table(points, measured, predictions, method)


def write_validation(
    spec: Spec, out_dir: Path, method: str = METHOD_SSA, url: str | None = None
) -> list[Path]:
    """``validation.csv`` (per point), ``validation_summary.csv`` (per pattern/notifier/source) and
    ``validation.png`` for ``spec``, from the database."""
    from demuxlab.validation.plot import plot_validation

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = validation_rows(spec, method, url)
    table, summary, figure = (
        out_dir / "validation.csv",
        out_dir / "validation_summary.csv",
        out_dir / "validation.png",
    )
    files.write_tables(rows, table, summary)
    plot_validation(rows, f"{spec.name} ({spec.reproduces})", figure)
    return [table, summary, figure]
