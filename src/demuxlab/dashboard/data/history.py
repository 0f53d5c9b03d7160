"""The History page's queries: one experiment name's points across its spec versions and server builds."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard import address
from demuxlab.dashboard.data import POINT_COLUMNS, NotFound, frame
from demuxlab.dashboard.data.points import BUILD, SERVER_CPUS

_OK = "r.status = 'ok' AND r.throughput_msgs_per_s IS NOT NULL"


def names(conn: Connection) -> pd.DataFrame:
    """Every experiment name with its spec versions and the server builds its runs used."""
    return frame(
        conn,
        f"""
        SELECT e.name, count(DISTINCT e.id) AS versions, count(DISTINCT {BUILD}) AS builds,
               max(e.created_at) AS newest
        FROM experiments e LEFT JOIN points p ON p.experiment_id = e.id LEFT JOIN runs r ON r.point_id = p.id
        GROUP BY e.name ORDER BY max(e.created_at) DESC, e.name
        """,
    )


def points(conn: Connection, name: str) -> pd.DataFrame:
    """Per spec version × server build × measured point × hardware class of the experiments named
    ``name``: the ok runs' throughputs and ids, and when the revision's first run started (the order of
    the history: oldest first)."""
    why = address.problem("experiment", name)
    if why is not None:
        raise NotFound(why)
    exists = conn.execute(text("SELECT 1 FROM experiments WHERE name = :n LIMIT 1"), {"n": name}).first()
    if exists is None:
        raise NotFound(f"no experiment named {address.excerpt(name)} in the database")
    return frame(
        conn,
        f"""
        SELECT e.id AS experiment_id, e.spec_sha256, e.created_at, {BUILD} AS build,
               p.point_key, {POINT_COLUMNS}, r.hardware_class,
               count(*) FILTER (WHERE {_OK}) AS n_ok,
               count(*) FILTER (WHERE r.status = 'failed') AS n_failed,
               coalesce(array_agg(r.throughput_msgs_per_s ORDER BY r.started_at) FILTER (WHERE {_OK}),
                        '{{}}') AS values,
               coalesce(array_agg(r.run_id::text ORDER BY r.started_at) FILTER (WHERE {_OK}),
                        '{{}}') AS run_ids,
               min(r.started_at) AS first_started, {SERVER_CPUS} AS server_cpus
        FROM experiments e JOIN points p ON p.experiment_id = e.id JOIN runs r ON r.point_id = p.id
        WHERE e.name = :name AND NOT p.instrument
        GROUP BY e.id, {BUILD}, p.id, r.hardware_class
        """,
        {"name": name},
    )
