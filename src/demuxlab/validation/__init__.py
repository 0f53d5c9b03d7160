"""The model stages of the workflow: calibrate, predict, and validate against the measurements (seed 001).

Everything is keyed by hardware class too (``runs.hardware_class``, cluster sweeps): runs of different
classes are never pooled, calibrated or compared together. A local sweep has one class (none), so it gets
one calibration per (pattern, notifier) and one validation row per point.

1. :func:`calibrate_experiment` fits the CTMC rates of every modelled (pattern, notifier, hardware class)
   of a spec from the experiment's ingested calibration runs (the instrumented lowest-concurrency points,
   :func:`demuxlab.spec.calibration_points`) and stores them in ``calibrations`` with their provenance
   (source runs, server host, server artifact).
2. :func:`predict_experiment` predicts every measured point of a modelled pattern from the paper's rates
   and, for each hardware class the point ran on, from that class's calibration — into ``predictions``, in
   one transaction.
3. :func:`validation_rows` joins each (point, hardware class)'s measurement (mean of the repeats, 95 % CI)
   with its predictions and the relative errors; :func:`plot_validation` draws them as seed 001's Fig. 3.

The modelled patterns are those the CTMC package has models of (:func:`demuxlab.ctmc.registry.patterns`).
A (pattern, notifier) that cannot be calibrated (every calibration run failed, or its timings are unusable)
is not an error of the workflow: the outcome carries the reason, the predictions of its points are made
from the paper's rates only, and the validation table leaves the calibrated columns empty. Points the
models do not describe are skipped with a reason: open-loop load (the models are closed: every connection
always has its next request), and a fluid prediction that did not settle; zero work is predicted (an instant
work step).

The package is split by concern; the pure modules take and return plain values:

============================  ==========================================================================
module                        what
============================  ==========================================================================
``validation.calibration``    pure: the fit of one (pattern, notifier, class) from its runs, the outcome,
                              the calibrations document and its parsing
``validation.prediction``     pure: the modelled points, which (point, rates) pairs are predicted or
                              skipped, the entries of the predictions document
``validation.rows``           pure: the validation table and its error summary
``validation.db``             the database: calibration runs, modelled points, stored calibrations and
                              predictions, measured summaries
``validation.files``          the files: the JSON documents and the CSV tables
``validation.plot``           ``validation.png`` (matplotlib)
``validation.stages``         the three stages, each one call (what ``demuxlab model *-experiment`` runs)
============================  ==========================================================================
"""

from __future__ import annotations

from demuxlab.validation.calibration import CalibrationOutcome, CalibrationRun, Fit
from demuxlab.validation.db import model_points
from demuxlab.validation.plot import MODEL_STYLES, plot_validation
from demuxlab.validation.prediction import ModelPoint
from demuxlab.validation.rows import SUMMARY_FIELDS, VALIDATION_FIELDS, summarize_errors
from demuxlab.validation.stages import (
    calibrate_experiment,
    calibrate_stage,
    predict_experiment,
    predict_stage,
    validation_rows,
    write_validation,
)

__all__ = [
    "MODEL_STYLES",
    "SUMMARY_FIELDS",
    "VALIDATION_FIELDS",
    "CalibrationOutcome",
    "CalibrationRun",
    "Fit",
    "ModelPoint",
    "calibrate_experiment",
    "calibrate_stage",
    "model_points",
    "plot_validation",
    "predict_experiment",
    "predict_stage",
    "summarize_errors",
    "validation_rows",
    "write_validation",
]
