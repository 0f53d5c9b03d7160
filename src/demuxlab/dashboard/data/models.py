"""The Model page's queries: the stored calibrations."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard.data import frame


def calibrations(conn: Connection) -> pd.DataFrame:
    return frame(
        conn,
        """
        SELECT c.id, c.pattern, c.notifier, c.method, c.rates, c.created_at, h.hostname,
               jsonb_array_length(c.source_runs) AS runs, c.artifacts->>'experiment' AS experiment,
               c.artifacts AS artifacts
        FROM calibrations c LEFT JOIN hosts h ON h.id = c.host_id
        ORDER BY c.pattern, c.notifier, c.created_at DESC
        """,
    )


def server_cores(conn: Connection, experiment_id: int) -> int | None:
    """The number of CPUs most of the experiment's runs pinned the server to (the what-if's cores), or
    None where no run says."""
    row = conn.execute(
        text(
            """
            SELECT jsonb_array_length(r.pinning->'server_cpus') AS n, count(*) AS k
            FROM runs r JOIN points p ON p.id = r.point_id
            WHERE p.experiment_id = :id AND jsonb_typeof(r.pinning->'server_cpus') = 'array'
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
