"""The "why" queries (issue 44): a run's costs per message and its validity checks (the ``run_costs`` and
``run_checks`` tables, docs/CONTRACTS.md §5), and one cost of every ok run of an experiment for the Sweep's
cost axis."""

from __future__ import annotations

import uuid
from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard.data import POINT_COLUMNS, ExperimentRef, frame


def run_costs(conn: Connection, run_id: str) -> pd.DataFrame:
    """``side, metric, value, per_message, unavailable``: every row of the run's (none: not collected)."""
    return frame(
        conn,
        "SELECT side, metric, value, per_message, unavailable FROM run_costs WHERE run_id = :rid "
        "ORDER BY side, metric",
        {"rid": uuid.UUID(str(run_id))},
    )


def run_checks(conn: Connection, run_id: str) -> pd.DataFrame:
    """``check, verdict, reason, value``: the run's checks (none: ingested before they were made)."""
    return frame(
        conn,
        'SELECT "check", verdict, reason, value FROM run_checks WHERE run_id = :rid',
        {"rid": uuid.UUID(str(run_id))},
    )


def point_costs(conn: Connection, exp: ExperimentRef, metric: str, side: str) -> pd.DataFrame:
    """Per ok run of the experiment's measured points: the point's parameters, ``hardware_class``,
    ``run_id``, ``flagged`` and the metric's ``per_message`` for that side (NULL with ``unavailable``: the
    host could not say; no row: the run has no costs)."""
    return frame(
        conn,
        f"""
        SELECT p.id AS point_id, p.point_key, {POINT_COLUMNS}, r.hardware_class, r.run_id::text AS run_id,
               r.flagged, c.per_message, c.unavailable
        FROM points p JOIN runs r ON r.point_id = p.id
        JOIN run_costs c ON c.run_id = r.run_id AND c.metric = :metric AND c.side = :side
        WHERE p.experiment_id = :id AND NOT p.instrument AND r.status = 'ok'
        ORDER BY p.pattern, p.notifier, p.work_us, p.connections, p.msg_size, p.threads, r.repeat_index
        """,
        {"id": exp.id, "metric": metric, "side": side},
    )


def run_threads(conn: Connection, run_id: str) -> tuple[Any, float | None]:
    """The run's ``costs`` document as its record has it (its threads are there, not in ``run_costs``)
    and its throughput; ``(None, None)`` for a run without them."""
    row = conn.execute(
        text("SELECT costs, throughput_msgs_per_s FROM runs WHERE run_id = :rid"),
        {"rid": uuid.UUID(str(run_id))},
    ).first()
    return (None, None) if row is None else (row[0], row[1])
