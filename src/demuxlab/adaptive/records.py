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


def store_decisions(spec_name: str, spec_sha256: str, doc: dict[str, Any], url: str | None = None) -> int:
    """Store an adaptive experiment's decisions in the database (table ``adaptive_decisions``), replacing
    what was stored for it; the experiment must be there (its runs ingested). Returns its id."""
    from sqlalchemy import func, select
    from sqlalchemy.dialects.postgresql import insert

    from demuxlab.db.engine import session
    from demuxlab.db.models import AdaptiveDecisions, Experiment

    if doc.get("experiment") != spec_name or doc.get("spec_sha256") != spec_sha256:
        raise DemuxlabError(
            f"adaptive decisions of {doc.get('experiment')!r} (spec {str(doc.get('spec_sha256'))[:12]}) "
            f"are not this spec's ({spec_name!r}, {spec_sha256[:12]})"
        )
    with session(url) as s:
        exp_id = s.scalar(
            select(Experiment.id).where(Experiment.name == spec_name, Experiment.spec_sha256 == spec_sha256)
        )
        if exp_id is None:
            raise DemuxlabError(
                f"experiment {spec_name!r} (spec {spec_sha256[:12]}) has no runs in the database "
                "(ingest first)"
            )
        stmt = insert(AdaptiveDecisions).values(experiment_id=exp_id, decisions=doc)
        s.execute(
            stmt.on_conflict_do_update(
                index_elements=["experiment_id"], set_={"decisions": doc, "stored_at": func.now()}
            )
        )
    return int(exp_id)
