"""The Run page's queries: one run, its per-second samples and its operation timings."""

from __future__ import annotations

import uuid
from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard import address
from demuxlab.dashboard.data import POINT_COLUMNS, ExperimentRef, NotFound, frame


def run_detail(conn: Connection, run_id: str) -> dict[str, Any]:
    try:
        rid = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFound(f"{address.excerpt(run_id)} is not a run id (a UUID)") from None
    row = conn.execute(
        text(
            f"""
            SELECT r.*, r.run_id::text AS run_id_text, p.point_key, {POINT_COLUMNS}, p.instrument,
                   e.id AS experiment_id, e.name AS experiment, e.spec_sha256,
                   sh.hostname AS server_hostname, sh.facts AS server_facts,
                   ch.hostname AS client_hostname, ch.facts AS client_facts
            FROM runs r JOIN points p ON p.id = r.point_id JOIN experiments e ON e.id = p.experiment_id
            LEFT JOIN hosts sh ON sh.id = r.server_host_id LEFT JOIN hosts ch ON ch.id = r.client_host_id
            WHERE r.run_id = :rid
            """
        ),
        {"rid": rid},
    ).one_or_none()
    if row is None:
        raise NotFound(f"no run {run_id} in the database")
    return dict(row._mapping)


def run_samples(conn: Connection, run_id: str) -> pd.DataFrame:
    return frame(
        conn,
        "SELECT second, throughput_msgs_per_s FROM samples WHERE run_id = :rid ORDER BY second",
        {"rid": uuid.UUID(str(run_id))},
    )


def run_ops(conn: Connection, run_id: str) -> pd.DataFrame:
    return frame(
        conn,
        """
        SELECT op, count, mean_ns / 1000.0 AS mean_us, p50_ns / 1000.0 AS p50_us, p99_ns / 1000.0 AS p99_us,
               max_ns / 1000.0 AS max_us
        FROM op_timings WHERE run_id = :rid AND events IS NULL ORDER BY op
        """,
        {"rid": uuid.UUID(str(run_id))},
    )


#: The Run page's picker holds this many runs at a time (a search asks the database for the others): a
#: dropdown of 500 took chromium 2.4 s to draw the page (bench/perf/dashboard_bench.py --browser).
RUN_OPTIONS = 40


def run_options(
    conn: Connection,
    exp: ExperimentRef,
    search: str = "",
    chosen: str | None = None,
    limit: int = RUN_OPTIONS,
) -> list[dict[str, str]]:
    """The Run page's picker: the experiment's runs, failed first, then by point and repeat, each named by
    its point, repeat, status and throughput; at most ``limit``, those whose point key or run id holds
    ``search`` (case-insensitive) where one is typed, and ``chosen`` (the run shown) always among them."""
    typed = "".join(ch for ch in search.strip() if ch not in "\\%_")  # LIKE's own characters dropped
    like = f"%{typed}%"
    rows = conn.execute(
        text(
            """
            SELECT r.run_id::text AS run_id, p.point_key, r.repeat_index, r.status, r.throughput_msgs_per_s
            FROM runs r JOIN points p ON p.id = r.point_id
            WHERE p.experiment_id = :id AND (p.point_key ILIKE :like OR r.run_id::text ILIKE :like
                                             OR r.run_id::text = :chosen)
            ORDER BY r.run_id::text = :chosen DESC, (r.status = 'failed') DESC, p.instrument, p.point_key,
                     r.repeat_index
            LIMIT :limit
            """
        ),
        {"id": exp.id, "limit": limit, "like": like, "chosen": chosen or ""},
    ).fetchall()
    out = []
    for r in rows:
        thr = "" if r.throughput_msgs_per_s is None else f", {r.throughput_msgs_per_s / 1e3:.3g}k msg/s"
        out.append({"label": f"{r.point_key} · repeat {r.repeat_index} · {r.status}{thr}", "value": r.run_id})
    return out
