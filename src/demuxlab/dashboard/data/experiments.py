"""Queries of the Experiments page: every experiment with its counts, and one experiment's progress."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard.data import ExperimentRef, experiment_detail, frame
from demuxlab.dashboard.data.plans import plan

# A run's wall time (finished − started): the 90th percentile over the experiment's runs, the pace by
# which a silent sweep is judged stopped (figures.experiments.status).
_WALL_P90 = "percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - r.started_at))"


def experiments(conn: Connection) -> pd.DataFrame:
    """One row per experiment (newest first) with its run counts, host pairs, times and run pace."""
    return frame(
        conn,
        f"""
        SELECT e.id, e.name, e.spec_sha256, e.spec_text, e.git_rev, e.created_at,
               NOT EXISTS (SELECT 1 FROM experiments o WHERE o.name = e.name
                           AND (o.created_at, o.id) > (e.created_at, e.id)) AS newest,
               count(r.run_id) FILTER (WHERE r.status = 'ok') AS ok,
               count(r.run_id) FILTER (WHERE r.status = 'failed') AS failed,
               min(r.started_at) AS first_started, max(r.finished_at) AS last_finished,
               max(r.ingested_at) AS last_ingested, {_WALL_P90} AS wall_p90_s,
               array_remove(array_agg(DISTINCT r.host_pair), NULL) AS pairs
        FROM experiments e LEFT JOIN points p ON p.experiment_id = e.id LEFT JOIN runs r ON r.point_id = p.id
        GROUP BY e.id
        ORDER BY e.created_at DESC, e.id DESC
        """,
    )


def progress(conn: Connection, exp: ExperimentRef) -> dict[str, Any]:
    """Runs done / failed, the plan (runs expected, points cut), times and pace, the latest runs (with their
    design; calibration runs flagged), each design's latest run and the failures by reason: the facts
    :func:`demuxlab.dashboard.figures.experiments.status` judges."""
    detail = experiment_detail(conn, exp)
    counts = conn.execute(
        text(
            f"""
            SELECT count(*) FILTER (WHERE r.status = 'ok') AS ok,
                   count(*) FILTER (WHERE r.status = 'failed') AS failed,
                   min(r.started_at) AS first_started, max(r.finished_at) AS last_finished,
                   max(r.ingested_at) AS last_ingested, {_WALL_P90} AS wall_p90_s
            FROM runs r JOIN points p ON p.id = r.point_id WHERE p.experiment_id = :id
            """
        ),
        {"id": exp.id},
    ).one()
    latest = frame(
        conn,
        """
        SELECT r.run_id::text AS run_id, r.status, r.failure_reason, r.throughput_msgs_per_s, r.started_at,
               r.finished_at, r.ingested_at, p.point_key, p.pattern, p.notifier, p.threads, p.instrument
        FROM runs r JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id ORDER BY r.ingested_at DESC, r.started_at DESC LIMIT 40
        """,
        {"id": exp.id},
    )
    per_design = frame(
        conn,
        """
        SELECT DISTINCT ON (p.pattern, p.notifier)
               p.pattern, p.notifier, p.threads, r.throughput_msgs_per_s, r.status,
               coalesce(r.finished_at, r.ingested_at) AS finished, r.run_id::text AS run_id
        FROM runs r JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND NOT p.instrument
        ORDER BY p.pattern, p.notifier, r.ingested_at DESC, r.started_at DESC
        """,
        {"id": exp.id},
    )
    reasons = frame(
        conn,
        """
        SELECT r.failure_reason AS reason, count(*) AS runs
        FROM runs r JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND r.status = 'failed'
        GROUP BY r.failure_reason ORDER BY count(*) DESC LIMIT 10
        """,
        {"id": exp.id},
    )
    return {
        "ok": int(counts.ok),
        "failed": int(counts.failed),
        "plan": plan(exp.name, exp.spec_sha256, detail["spec_text"]),
        "first_started": counts.first_started,
        "last_finished": counts.last_finished,
        "last_ingested": counts.last_ingested,
        "wall_p90_s": None if counts.wall_p90_s is None else float(counts.wall_p90_s),
        "latest": latest,
        "per_design": per_design,
        "reasons": reasons,
    }


def runs_of(conn: Connection, exp: ExperimentRef, limit: int = 200) -> pd.DataFrame:
    return frame(
        conn,
        """
        SELECT r.run_id::text AS run_id, p.point_key, r.repeat_index AS repeat, r.status,
               r.throughput_msgs_per_s, r.stationary, r.host_pair, r.started_at, r.failure_reason
        FROM runs r JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id
        ORDER BY (r.status = 'failed') DESC, r.started_at DESC LIMIT :limit
        """,
        {"id": exp.id, "limit": limit},
    )
