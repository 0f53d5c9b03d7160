"""The model stages' files: ``calibrations.json`` and ``predictions.json`` (written atomically, read back
with one clear error), the validation tables (``validation.csv``, ``validation_summary.csv``) and their page
(``validation.html``).

The documents' content is built by the pure modules (``calibration.calibrations_doc``,
``prediction.predictions_doc``); this module only moves it to and from disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from demuxlab.jsonio import read_json, write_json_atomic, write_text_atomic
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


def describe(rows: Sequence[Mapping[str, Any]], refused: Sequence[Mapping[str, Any]], method: str) -> str:
    """What the validation holds, in a sentence: the designs compared per rates source, and those refused."""
    measured = [r for r in rows if r.get("measured_msgs_per_s") is not None]
    designs = sorted({f"{r['pattern']}/{r['notifier']}" for r in measured})
    by_source = {
        source: sorted(
            {f"{r['pattern']}/{r['notifier']}" for r in measured if r.get(f"{source}_rel_error") is not None}
        )
        for source in ("paper", "calibration")
    }
    text = (
        f"{len(measured)} measured points of {len(designs)} designs ({', '.join(designs) or 'none'}) "
        f"against the CTMC models ({method}): {len(by_source['paper'])} with the paper's rates, "
        f"{len(by_source['calibration'])} with rates calibrated on this experiment's runs"
        + (f" ({', '.join(by_source['calibration'])})" if by_source["calibration"] else "")
        + "."
    )
    if refused:
        names = ", ".join(f"{r['pattern']}/{r['notifier']}" for r in refused)
        text += (
            f" {len(refused)} calibration(s) refused, so without a calibrated prediction ({names}): "
            "the table of refusals below gives each one's reason and self-check."
        )
    skipped = sorted({str(r["skipped"]) for r in rows if r.get("skipped")})
    if skipped:
        text += " Skipped: " + "; ".join(skipped) + "."
    return text


def write_page(
    path: Path,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    refused: Sequence[Mapping[str, Any]],
    png: bytes,
    method: str,
    shared: Sequence[str] = (),
) -> None:
    """``validation.html``: what was validated and refused, the figure, the error summary, every point;
    runs on hosts sharing one machine's CPUs (``shared``: the test cluster) said first: not a validation."""
    from demuxlab import reporthtml
    from demuxlab.reporthtml import SHARED_TEXT

    body = [
        reporthtml.image(png, "model against measurement"),
        "<h2>Error per pattern, notifier and rates</h2>",
        reporthtml.table(summarize_errors(rows), SUMMARY_FIELDS),
        "<h2>Every point</h2>",
        reporthtml.table([dict(r) for r in rows], VALIDATION_FIELDS),
    ]
    if refused:
        body.insert(1, "<h2>Refused calibrations</h2>")
        body.insert(
            2,
            reporthtml.table(
                [
                    {**{k: r[k] for k in ("pattern", "notifier", "hardware_class", "error")}, **_worst(r)}
                    for r in refused
                ],
                ["pattern", "notifier", "hardware_class", "error", "self_check"],
                drop_constant=False,
            ),
        )
    lead = describe(rows, refused, method)
    title = f"{name}: CTMC model against measurement"
    if shared:
        lead = (
            SHARED_TEXT.format(hosts=", ".join(shared))
            + " This comparison is not a validation of the models. "
            + lead
        )
        title += " (test cluster: not a validation)"
    text = reporthtml.page(title, body, lead)
    write_text_atomic(path, text)


def _worst(r: Mapping[str, Any]) -> dict[str, str]:
    checks = [c for c in r.get("self_check") or [] if c.get("measured_msgs_per_s")]
    if not checks:
        return {"self_check": ""}
    c = max(checks, key=lambda c: abs(float(c.get("rel_error") or 0.0)))
    return {
        "self_check": f"model {float(c['predicted_msgs_per_s']):,.0f} vs measured "
        f"{float(c['measured_msgs_per_s']):,.0f} msg/s ({float(c.get('rel_error') or 0.0):+.0%}) at "
        f"{c.get('threads')} threads, {c.get('connections')} connections"
    }
