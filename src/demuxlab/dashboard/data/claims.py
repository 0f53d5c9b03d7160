"""Queries of the Claims page: what an experiment's claims are computed from, as a version (the verdicts
themselves come from :mod:`demuxlab.claims.db` and :mod:`demuxlab.claims`, the workflow's own code)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from demuxlab.dashboard.data import ExperimentRef
from demuxlab.vocab import CALIBRATION_REFUSED


def version(conn: Connection, exp: ExperimentRef) -> tuple[Any, ...]:
    """What the claims of ``exp`` are computed from, in a few numbers: its runs (count, last ingest), its
    predictions (count, newest), the calibrations (count, newest) and a digest of its refusals (a refusal
    stored again is updated in place, its reason new, its count and time not). Equal versions, equal
    claims."""
    row = conn.execute(
        text(
            """
            SELECT (SELECT count(*) FROM runs r JOIN points p ON p.id = r.point_id
                    WHERE p.experiment_id = :id) AS runs,
                   (SELECT max(r.ingested_at) FROM runs r JOIN points p ON p.id = r.point_id
                    WHERE p.experiment_id = :id) AS ingested,
                   (SELECT count(*) FROM predictions pr JOIN points p ON p.id = pr.point_id
                    WHERE p.experiment_id = :id) AS predictions,
                   (SELECT max(pr.created_at) FROM predictions pr JOIN points p ON p.id = pr.point_id
                    WHERE p.experiment_id = :id) AS predicted,
                   (SELECT count(*) FROM calibrations) AS calibrations,
                   (SELECT max(created_at) FROM calibrations) AS calibrated,
                   (SELECT md5(coalesce(string_agg(c.artifacts::text, '|' ORDER BY c.id), ''))
                    FROM calibrations c
                    WHERE c.method = :refused AND c.artifacts->>'spec_sha256' = :sha) AS refusals
            """
        ),
        {"id": exp.id, "sha": exp.spec_sha256, "refused": CALIBRATION_REFUSED},
    ).one()
    return tuple(row)
