"""The Operations page's queries: per-operation service times of instrumented runs, events per call."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Connection

from demuxlab.dashboard.data import POINT_COLUMNS, ExperimentRef, frame


def operation_times(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """Per point × hardware class × operation of the instrumented ok runs: mean time per call (µs, total
    over count, pooled over runs), the median of the runs' p50 and p99, calls and runs."""
    return frame(
        conn,
        f"""
        SELECT {POINT_COLUMNS}, r.hardware_class, o.op,
               sum(o.total_ns)::float8 / nullif(sum(o.count), 0) / 1000.0 AS mean_us,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY o.p50_ns) / 1000.0 AS p50_us,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY o.p99_ns) / 1000.0 AS p99_us,
               sum(o.count)::bigint AS calls, count(DISTINCT o.run_id) AS runs
        FROM op_timings o JOIN runs r ON r.run_id = o.run_id JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND r.status = 'ok' AND o.events IS NULL
        GROUP BY {POINT_COLUMNS}, r.hardware_class, o.op
        ORDER BY o.op, p.pattern, p.notifier, p.threads
        """,
        {"id": exp.id},
    )


def events_per_call(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """Per point × hardware class: mean descriptors returned per notifier call, from the notify rows by
    events."""
    return frame(
        conn,
        f"""
        SELECT {POINT_COLUMNS}, r.hardware_class,
               sum(o.events::float8 * o.count) / nullif(sum(o.count), 0) AS events_per_call,
               count(DISTINCT o.run_id) AS runs
        FROM op_timings o JOIN runs r ON r.run_id = o.run_id JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND r.status = 'ok' AND o.op = 'notify' AND o.events IS NOT NULL
        GROUP BY {POINT_COLUMNS}, r.hardware_class
        ORDER BY p.pattern, p.notifier, p.threads
        """,
        {"id": exp.id},
    )
