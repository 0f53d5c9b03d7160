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


def calibration_rates(conn: Connection, calibration_id: int) -> dict[str, Any] | None:
    row = conn.execute(
        text("SELECT pattern, notifier, rates FROM calibrations WHERE id = :id"), {"id": calibration_id}
    ).one_or_none()
    return None if row is None else dict(row._mapping)
