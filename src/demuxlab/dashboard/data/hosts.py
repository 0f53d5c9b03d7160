"""The Hosts page's queries: every host, one host's facts and the runs that used it."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard.data import NotFound, frame


def hosts(conn: Connection) -> pd.DataFrame:
    return frame(
        conn,
        """
        WITH used AS (
            SELECT server_host_id AS host_id, 'server' AS side, count(*) AS runs FROM runs
            WHERE server_host_id IS NOT NULL GROUP BY server_host_id
            UNION ALL
            SELECT client_host_id, 'client', count(*) FROM runs
            WHERE client_host_id IS NOT NULL GROUP BY client_host_id
        )
        SELECT h.id, h.hostname, h.cpu_model, h.kernel, h.sockets, h.cores, h.threads_per_core,
               h.numa_nodes, h.smt, h.turbo, h.governor, h.irqbalance, h.first_seen,
               coalesce(sum(u.runs) FILTER (WHERE u.side = 'server'), 0)::int AS runs_as_server,
               coalesce(sum(u.runs) FILTER (WHERE u.side = 'client'), 0)::int AS runs_as_client
        FROM hosts h LEFT JOIN used u ON u.host_id = h.id
        GROUP BY h.id ORDER BY h.hostname, h.first_seen DESC
        """,
    )


def host_detail(conn: Connection, host_id: int) -> dict[str, Any]:
    row = conn.execute(text("SELECT * FROM hosts WHERE id = :id"), {"id": host_id}).one_or_none()
    if row is None:
        raise NotFound(f"no host {host_id} in the database")
    return dict(row._mapping)


def host_usage(conn: Connection, host_id: int) -> pd.DataFrame:
    return frame(
        conn,
        """
        SELECT e.name AS experiment, left(e.spec_sha256, 8) AS version,
               CASE WHEN r.server_host_id = :id AND r.client_host_id = :id THEN 'server+client'
                    WHEN r.server_host_id = :id THEN 'server' ELSE 'client' END AS side,
               count(*) AS runs, count(*) FILTER (WHERE r.status = 'failed') AS failed,
               min(r.started_at) AS first, max(r.started_at) AS last
        FROM runs r JOIN points p ON p.id = r.point_id JOIN experiments e ON e.id = p.experiment_id
        WHERE r.server_host_id = :id OR r.client_host_id = :id
        GROUP BY 1, 2, 3 ORDER BY max(r.started_at) DESC
        """,
        {"id": host_id},
    )


def core_use(conn: Connection, host_id: int) -> dict[int, dict[str, int]]:
    """CPU → {"server": runs, "client": runs}: which of the host's CPUs each role was pinned to, over the
    runs that used the host (CONTRACTS.md §5, ``pinning.server_cpus`` / ``client_cpus``)."""
    rows = conn.execute(
        text(
            """
            SELECT cpu::int AS cpu, side, count(*) AS runs FROM (
                SELECT jsonb_array_elements_text(r.pinning->'server_cpus') AS cpu, 'server' AS side
                FROM runs r WHERE r.server_host_id = :id AND jsonb_typeof(r.pinning->'server_cpus') = 'array'
                UNION ALL
                SELECT jsonb_array_elements_text(r.pinning->'client_cpus'), 'client'
                FROM runs r WHERE r.client_host_id = :id AND jsonb_typeof(r.pinning->'client_cpus') = 'array'
            ) u GROUP BY 1, 2
            """
        ),
        {"id": host_id},
    ).fetchall()
    out: dict[int, dict[str, int]] = {}
    for r in rows:
        out.setdefault(int(r.cpu), {})[str(r.side)] = int(r.runs)
    return out
