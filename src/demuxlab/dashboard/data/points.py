"""Measured points and the models' predictions for them: what Sweep, Compare, Ranking and Model read.

A measured point comes back once per hardware class (runs of different classes are never pooled; local
runs have none) and, when asked, once per server build, with its ok runs' throughputs as a list: the
statistics (mean, confidence interval, tests) are computed from those values by :mod:`demuxlab.stats`, in
:mod:`demuxlab.dashboard.figures.summary`, never in SQL.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Connection, text

from demuxlab.dashboard import address
from demuxlab.dashboard.data import POINT_COLUMNS, ExperimentRef, frame

#: A run's server build: the binary's SHA-256, else the image's digest (CONTRACTS.md §5, ``artifacts``).
BUILD = "coalesce(r.server_artifact->>'sha256', r.server_artifact->>'digest')"
_OK = "r.status = 'ok' AND r.throughput_msgs_per_s IS NOT NULL"
#: The fewest CPUs a point's runs pinned the server to (CONTRACTS.md §5, ``pinning.server_cpus``): a point
#: whose threads outnumber them is oversubscribed (NULL: no run says).
SERVER_CPUS = (
    "min(CASE WHEN jsonb_typeof(r.pinning->'server_cpus') = 'array' "
    "THEN jsonb_array_length(r.pinning->'server_cpus') END)"
)


def measured(
    conn: Connection,
    exp: ExperimentRef,
    *,
    host_pair: str | None = None,
    build: str | None = None,
    by_build: bool = False,
    latency: bool = False,
) -> pd.DataFrame:
    """Per measured point × hardware class (× build with ``by_build``): the point's parameters, runs ok
    and failed, the ok runs' throughputs (``values``) and run ids (``run_ids``) in repeat order, the fewest
    CPUs its runs' server was pinned to (``server_cpus``), and with
    ``latency`` their mean latency p50/p99 (µs; reading each run's latency document costs two thirds of
    the query, so only the Ranking asks). ``host_pair``/``build`` (a prefix of the build id) restrict the
    runs."""
    build_col = f"{BUILD} AS build" if by_build else "NULL::text AS build"
    group_build = f", {BUILD}" if by_build else ""
    lat = (
        f"avg((r.latency_us->>'p50')::float8) FILTER (WHERE {_OK}) AS latency_p50_us, "
        f"avg((r.latency_us->>'p99')::float8) FILTER (WHERE {_OK}) AS latency_p99_us"
        if latency
        else "NULL::float8 AS latency_p50_us, NULL::float8 AS latency_p99_us"
    )
    return frame(
        conn,
        f"""
        SELECT p.id AS point_id, p.point_key, {POINT_COLUMNS}, r.hardware_class, {build_col},
               count(r.run_id) FILTER (WHERE {_OK}) AS n_ok,
               count(r.run_id) FILTER (WHERE r.status = 'failed') AS n_failed,
               coalesce(array_agg(r.throughput_msgs_per_s ORDER BY r.repeat_index) FILTER (WHERE {_OK}),
                        '{{}}') AS values,
               coalesce(array_agg(r.run_id::text ORDER BY r.repeat_index) FILTER (WHERE {_OK}),
                        '{{}}') AS run_ids,
               {SERVER_CPUS} AS server_cpus,
               {lat}
        FROM points p LEFT JOIN runs r ON r.point_id = p.id {run_filter(host_pair, build)}
        WHERE p.experiment_id = :id AND NOT p.instrument
        GROUP BY p.id, r.hardware_class{group_build}
        ORDER BY p.pattern, p.notifier, p.work_us, p.connections, p.msg_size, p.threads, r.hardware_class
        """,
        {"id": exp.id, "pair": host_pair, "build": build},
    )


def parameters(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """The experiment's measured points' parameters only (no runs): what its workload is."""
    return frame(
        conn,
        f"SELECT p.id AS point_id, {POINT_COLUMNS} FROM points p "
        "WHERE p.experiment_id = :id AND NOT p.instrument",
        {"id": exp.id},
    )


def designs(conn: Connection, exp: ExperimentRef) -> tuple[list[str], list[str]]:
    """The patterns and the notifiers of the experiment's measured points (for the pages' choices)."""
    rows = conn.execute(
        text("SELECT DISTINCT pattern, notifier FROM points WHERE experiment_id = :id AND NOT instrument"),
        {"id": exp.id},
    ).fetchall()
    return sorted({r.pattern for r in rows}), sorted({r.notifier for r in rows})


def run_filter(host_pair: str | None, build: str | None) -> str:
    """Join conditions restricting the runs to a host pair and a build (a prefix of its id)."""
    clauses = []
    if host_pair:
        clauses.append("r.host_pair = :pair")
    if build:
        clauses.append(f"left({BUILD}, length(:build)) = :build")
    return "".join(f" AND {c}" for c in clauses)


def predictions(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """The models' throughputs for the experiment's points, as stored: one row per point × source × method
    (× the hardware class of the calibration, for calibrated rates; the paper's rates have none). Whatever
    patterns the models cover appear here; nothing is filtered by pattern."""
    return frame(
        conn,
        """
        SELECT pr.point_id, pr.rates_source AS source, pr.method, pr.calibration_id,
               pr.throughput_msgs_per_s AS predicted, pr.ci_halfwidth_rel,
               c.artifacts->>'hardware_class' AS hardware_class
        FROM predictions pr JOIN points p ON p.id = pr.point_id
        LEFT JOIN calibrations c ON c.id = pr.calibration_id
        WHERE p.experiment_id = :id
        """,
        {"id": exp.id},
    )


def host_pairs_and_builds(conn: Connection, exp: ExperimentRef) -> tuple[list[str], list[str]]:
    rows = conn.execute(
        text(
            f"""
            SELECT DISTINCT r.host_pair, left({BUILD}, {address.BUILD_CHARS}) AS build
            FROM runs r JOIN points p ON p.id = r.point_id WHERE p.experiment_id = :id
            """
        ),
        {"id": exp.id},
    ).fetchall()
    pairs = sorted({r.host_pair for r in rows if r.host_pair})
    builds = sorted({r.build for r in rows if r.build})
    return pairs, builds


def adaptive_decisions(conn: Connection, exp: ExperimentRef) -> dict[str, Any] | None:
    """An adaptive experiment's stored decisions (``adaptive_decisions``, docs/adaptive.md), or None."""
    row = conn.execute(
        text("SELECT decisions FROM adaptive_decisions WHERE experiment_id = :id"), {"id": exp.id}
    ).first()
    return dict(row.decisions) if row is not None else None


def builds_by_time(conn: Connection, exp: ExperimentRef) -> list[str]:
    """The server builds of the experiment's runs (their address form, :data:`address.BUILD_CHARS`), in
    the order their first runs started."""
    rows = conn.execute(
        text(
            f"""
            SELECT left({BUILD}, {address.BUILD_CHARS}) AS build, min(r.started_at) AS first
            FROM runs r JOIN points p ON p.id = r.point_id
            WHERE p.experiment_id = :id AND {BUILD} IS NOT NULL
            GROUP BY 1 ORDER BY 2
            """
        ),
        {"id": exp.id},
    ).fetchall()
    return [str(r.build) for r in rows]


def shared_machine(conn: Connection, exp: ExperimentRef) -> list[str]:
    """The hosts of the experiment's runs whose CPUs were shared with other hosts of one machine (the test
    cluster: the run record's ``noise.cpus_shared``, CONTRACTS.md §5): their runs are not performance
    data."""
    rows = conn.execute(
        text(
            """
            SELECT DISTINCT jsonb_array_elements_text(r.noise->'cpus_shared') AS host
            FROM runs r JOIN points p ON p.id = r.point_id
            WHERE p.experiment_id = :id AND jsonb_typeof(r.noise->'cpus_shared') = 'array'
            ORDER BY 1
            """
        ),
        {"id": exp.id},
    ).fetchall()
    return [str(r.host) for r in rows]
