"""Run records as the policy's observations: every ``*.json`` of a folder (the files ``run-point`` writes),
each read bounded and parsed as ingest reads them (:mod:`demuxlab.ingest.files`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from demuxlab.adaptive.runs import Observed, observe
from demuxlab.errors import DemuxlabError


def read_runs(folder: Path) -> list[Observed]:
    """The runs of every record in ``folder`` (not its subfolders: ``failures/`` holds attempts that were
    retried), sorted by file name."""
    from demuxlab.ingest.files import read_record_bytes
    from demuxlab.ingest.record import parse_record

    if not folder.is_dir():
        raise DemuxlabError(f"{folder}: not a folder of run records")
    files = sorted(p for p in folder.glob("*.json") if p.is_file())
    if not files:
        raise DemuxlabError(f"{folder}: no run records (*.json)")
    return [observe(parse_record(read_record_bytes(f), str(f)), str(f)) for f in files]


def read_decisions(path: Path) -> dict[str, Any]:
    """An adaptive experiment's ``decisions.json`` (``demuxlab adaptive decisions``), format checked."""
    from demuxlab.adaptive.experiment import FORMAT
    from demuxlab.jsonio import read_json

    doc = read_json(path, "adaptive decisions")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("grid"), list):
        raise DemuxlabError(f"{path}: not the output of `demuxlab adaptive decisions` (format {FORMAT})")
    return doc
