"""The Model page's queries: the stored calibrations, and an experiment's calibrations as they stand (fitted,
refused with their reason and self-check, or never run), which Sweep, Ranking and Model read to say why a
model line is missing."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard.data import ExperimentRef, frame

#: The ``method`` of a refused calibration's row (:data:`demuxlab.validation.store.REFUSED`; the dashboard
#: reads the database, not the validation package).
REFUSED = "refused"


def calibrations(conn: Connection) -> pd.DataFrame:
    """Every fitted calibration (refusals are :func:`calibration_states`')."""
    return frame(
        conn,
        """
        SELECT c.id, c.pattern, c.notifier, c.method, c.rates, c.created_at, h.hostname,
               jsonb_array_length(c.source_runs) AS runs, c.artifacts->>'experiment' AS experiment,
               c.artifacts AS artifacts
        FROM calibrations c LEFT JOIN hosts h ON h.id = c.host_id
        WHERE c.method <> :refused
        ORDER BY c.pattern, c.notifier, c.created_at DESC
        """,
        {"refused": REFUSED},
    )


def calibration_states(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """The experiment's calibrations, fitted or refused (``refused``: the reason; ``self_check``: the fitted
    model against the calibration runs), newest first, per pattern × notifier × hardware class."""
    return frame(
        conn,
        """
        SELECT c.id AS calibration_id, c.pattern, c.notifier,
               c.artifacts->>'hardware_class' AS hardware_class,
               CASE WHEN c.method = :refused THEN coalesce(c.artifacts->>'error', 'not fitted') END
                   AS refused,
               c.artifacts->'self_check' AS self_check, jsonb_array_length(c.source_runs) AS runs,
               c.created_at
        FROM calibrations c
        WHERE c.artifacts->>'spec_sha256' = :sha AND c.artifacts->>'experiment' = :name
        ORDER BY c.created_at DESC, c.id DESC
        """,
        {"refused": REFUSED, "sha": exp.spec_sha256, "name": exp.name},
    )


def calibration_points(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """The experiment's calibration points per pattern × notifier: their runs and ok runs."""
    return frame(
        conn,
        """
        SELECT p.pattern, p.notifier, count(r.run_id) AS runs,
               count(r.run_id) FILTER (WHERE r.status = 'ok') AS ok
        FROM points p LEFT JOIN runs r ON r.point_id = p.id
        WHERE p.experiment_id = :id AND p.instrument
        GROUP BY p.pattern, p.notifier
        """,
        {"id": exp.id},
    )


def server_cores(conn: Connection, experiment_id: int, side: str = "server") -> int | None:
    """The number of CPUs most of the experiment's runs pinned the server (``side``: or the client) to (the
    what-if's cores), or None where no run says."""
    key = "client_cpus" if side == "client" else "server_cpus"
    row = conn.execute(
        text(
            f"""
            SELECT jsonb_array_length(r.pinning->'{key}') AS n, count(*) AS k
            FROM runs r JOIN points p ON p.id = r.point_id
            WHERE p.experiment_id = :id AND jsonb_typeof(r.pinning->'{key}') = 'array'
            GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1
            """
        ),
        {"id": experiment_id},
    ).one_or_none()
    return None if row is None or not row.n else int(row.n)


def calibration_rates(conn: Connection, calibration_id: int) -> dict[str, Any] | None:
    row = conn.execute(
        text("SELECT pattern, notifier, rates FROM calibrations WHERE id = :id"), {"id": calibration_id}
    ).one_or_none()
    return None if row is None else dict(row._mapping)
