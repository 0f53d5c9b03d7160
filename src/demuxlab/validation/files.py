"""The model stages' files: ``calibrations.json`` and ``predictions.json`` (written atomically, read back
with one clear error), and the validation tables (``validation.csv``, ``validation_summary.csv``).

The documents' content is built by the pure modules (``calibration.calibrations_doc``,
``prediction.predictions_doc``); this module only moves it to and from disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from demuxlab.jsonio import read_json, write_json_atomic
from demuxlab.validation.calibration import CalibrationKey, calibration_ids, missing_reasons
from demuxlab.validation.rows import SUMMARY_FIELDS, VALIDATION_FIELDS, summarize_errors


def write_doc(path: Path, doc: Mapping[str, Any]) -> None:
    write_json_atomic(path, doc)


def read_calibration_ids(path: Path, spec_sha256: str) -> dict[CalibrationKey, int]:
    """The stored calibration ids in a ``calibrate-experiment`` output, which must be this spec's."""
    return calibration_ids(read_json(path, "calibrations file"), str(path), spec_sha256)


def read_missing_reasons(path: Path, spec_sha256: str) -> dict[tuple[str, str], str]:
    """Why each pattern × notifier of a ``calibrate-experiment`` output has no calibration (its refusal)."""
    return missing_reasons(read_json(path, "calibrations file"), str(path), spec_sha256)


def write_tables(rows: Sequence[Mapping[str, Any]], table: Path, summary: Path) -> None:
    """``validation.csv`` (per point and class) and ``validation_summary.csv`` (per pattern, notifier, class
    and rates source)."""
    from demuxlab.report import write_csv

    write_csv([dict(r) for r in rows], table, VALIDATION_FIELDS)
    write_csv(summarize_errors(rows), summary, SUMMARY_FIELDS)
