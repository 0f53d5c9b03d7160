"""Every query the dashboard makes, each returning a small ``pandas.DataFrame``.

The dashboard reads through the read-only role (:func:`demuxlab.db.engine.readonly_url`) in read-only
transactions. Aggregation happens in PostgreSQL: pages get per-point or per-run rows, and per-second
samples are read for one run at a time, never for a whole experiment.
"""

from __future__ import annotations

import functools
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from demuxlab.db.engine import mask_url, parse_url, readonly_url

PARAMS: tuple[str, ...] = ("pattern", "notifier", "threads", "work_us", "connections", "msg_size")
AXES: dict[str, str] = {
    "threads": "server threads",
    "work_us": "work per message (µs)",
    "connections": "connections",
    "msg_size": "message size (B)",
}
_CONNECT_TIMEOUT_S = 3
_STATEMENT_TIMEOUT_MS = 15_000


class DataUnavailable(Exception):
    """The database cannot answer (unreachable, no schema); ``message`` says so in one line."""

    def __init__(self, message: str, *, kind: str = "unreachable") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class NotFound(Exception):
    """A name or id from the URL that the database does not have."""


class Store:
    """The read-only engine (created lazily, so that the app starts while the database is down)."""

    def __init__(self, url: str | None = None) -> None:
        self._url = url
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = readonly_url()
        return self._url

    def masked_url(self) -> str:
        return mask_url(self.url)

    def engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                self._engine = create_engine(
                    parse_url(self.url, origin="dashboard database URL"),
                    pool_pre_ping=True,
                    pool_size=8,
                    max_overflow=8,
                    connect_args={
                        "connect_timeout": _CONNECT_TIMEOUT_S,
                        "application_name": "demuxlab-dashboard",
                        # Read-only on top of the role's privileges; a runaway query is cut off.
                        "options": f"-c default_transaction_read_only=on "
                        f"-c statement_timeout={_STATEMENT_TIMEOUT_MS}",
                    },
                )
            return self._engine

    def dispose(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        try:
            with self.engine().connect() as conn:
                yield conn
        except ProgrammingError as exc:
            if "does not exist" in str(exc.orig) and "relation" in str(exc.orig):
                raise DataUnavailable(
                    f"database {self.masked_url()} has no demuxlab schema yet: run `demuxlab db upgrade` "
                    "(or ingest runs) first",
                    kind="no-schema",
                ) from None
            if "permission denied" in str(exc.orig):
                raise DataUnavailable(
                    f"database {self.masked_url()}: {_first_line(exc)} (the read-only role needs SELECT; "
                    "run `demuxlab db upgrade`)",
                    kind="permission",
                ) from None
            raise
        except OperationalError as exc:
            if "statement timeout" in str(exc.orig):
                raise DataUnavailable(
                    f"database {self.masked_url()}: a query took longer than "
                    f"{_STATEMENT_TIMEOUT_MS // 1000} s and was cancelled",
                    kind="timeout",
                ) from None
            self._forget_pool()  # the server went away: start from fresh connections when it is back
            raise DataUnavailable(
                f"cannot reach database {self.masked_url()}: {_first_line(exc)}", kind="unreachable"
            ) from None

    def _forget_pool(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()

    def ping(self) -> None:
        with self.connect() as conn:
            conn.execute(text("SELECT 1 FROM experiments LIMIT 1"))


def _first_line(exc: DBAPIError) -> str:
    orig = exc.orig if exc.orig is not None else exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    return lines[0] if lines else type(orig).__name__


def frame(conn: Connection, sql: str, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
    result = conn.execute(text(sql), dict(params or {}))
    columns = list(result.keys())
    rows = result.fetchall()
    # Column lists: several times faster than handing pandas a list of Row objects.
    return pd.DataFrame({c: [r[i] for r in rows] for i, c in enumerate(columns)}, columns=columns)


# -- experiments ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentRef:
    id: int
    name: str
    spec_sha256: str

    @property
    def label(self) -> str:
        return f"{self.name}@{self.spec_sha256[:8]}"


def experiments(conn: Connection) -> pd.DataFrame:
    """One row per experiment (newest first) with its run counts, host pairs and times."""
    return frame(
        conn,
        """
        SELECT e.id, e.name, e.spec_sha256, e.spec_text, e.git_rev, e.created_at,
               count(r.run_id) FILTER (WHERE r.status = 'ok') AS ok,
               count(r.run_id) FILTER (WHERE r.status = 'failed') AS failed,
               min(r.started_at) AS first_started, max(r.finished_at) AS last_finished,
               max(r.ingested_at) AS last_ingested,
               array_remove(array_agg(DISTINCT r.host_pair), NULL) AS pairs
        FROM experiments e LEFT JOIN points p ON p.experiment_id = e.id LEFT JOIN runs r ON r.point_id = p.id
        GROUP BY e.id
        ORDER BY e.created_at DESC, e.id DESC
        """,
    )


def resolve_experiment(conn: Connection, ref: str | None) -> ExperimentRef:
    """``name`` (its newest version), ``name@<sha256 prefix>`` or a numeric id; :class:`NotFound` else."""
    if ref is None or not str(ref).strip():
        raise NotFound("no experiment chosen")
    ref = str(ref).strip()
    name, _, sha = ref.partition("@")
    rows: list[Any]
    if ref.isdigit():
        rows = list(
            conn.execute(
                text("SELECT id, name, spec_sha256 FROM experiments WHERE id = :id"), {"id": int(ref)}
            )
        )
    else:
        rows = list(
            conn.execute(
                text(
                    "SELECT id, name, spec_sha256 FROM experiments WHERE name = :name "
                    "AND spec_sha256 LIKE :sha ORDER BY created_at DESC, id DESC LIMIT 1"
                ),
                {"name": name, "sha": f"{sha}%"},
            )
        )
    if not rows:
        raise NotFound(f"no experiment {ref!r} in the database")
    row = rows[0]
    return ExperimentRef(int(row.id), str(row.name), str(row.spec_sha256))


def experiment_options(conn: Connection) -> list[dict[str, str]]:
    rows = conn.execute(
        text(
            "SELECT name, spec_sha256, count(*) OVER (PARTITION BY name) AS versions, "
            "row_number() OVER (PARTITION BY name ORDER BY created_at DESC, id DESC) AS rank "
            "FROM experiments ORDER BY name, created_at DESC"
        )
    )
    out = []
    for r in rows:
        value = r.name if r.rank == 1 else f"{r.name}@{r.spec_sha256[:8]}"
        label = r.name if r.versions == 1 else f"{r.name} @{r.spec_sha256[:8]}"
        out.append({"label": label, "value": value})
    return out


def experiment_detail(conn: Connection, exp: ExperimentRef) -> dict[str, Any]:
    row = conn.execute(
        text("SELECT id, name, spec_sha256, spec_text, git_rev, created_at FROM experiments WHERE id = :id"),
        {"id": exp.id},
    ).one()
    return dict(row._mapping)


@functools.lru_cache(maxsize=256)
def planned_runs(name: str, spec_sha256: str, spec_text: str | None) -> int | None:
    """How many runs the spec plans (points × repeats + calibration runs), from its stored text; None if
    the text is missing or no longer loads. Cached: a spec's text never changes under its hash."""
    if not spec_text:
        return None
    from demuxlab.errors import DemuxlabError
    from demuxlab.spec import load_spec as _load
    from demuxlab.spec import run_order

    with tempfile.TemporaryDirectory(prefix="dlx-dash-") as tmp:
        path = Path(tmp) / f"{name}.yaml"  # the spec's name must match its file's
        try:
            path.write_text(spec_text)
            spec = _load(path)
        except (DemuxlabError, OSError):
            return None
        return len(run_order(spec))


def progress(conn: Connection, exp: ExperimentRef) -> dict[str, Any]:
    """Runs done / failed / remaining, the latest throughput, the recent pace and an estimated finish."""
    detail = experiment_detail(conn, exp)
    counts = conn.execute(
        text(
            """
            SELECT count(*) FILTER (WHERE r.status = 'ok') AS ok,
                   count(*) FILTER (WHERE r.status = 'failed') AS failed,
                   min(r.started_at) AS first_started, max(r.finished_at) AS last_finished,
                   max(r.ingested_at) AS last_ingested
            FROM runs r JOIN points p ON p.id = r.point_id WHERE p.experiment_id = :id
            """
        ),
        {"id": exp.id},
    ).one()
    latest = frame(
        conn,
        """
        SELECT r.run_id, r.status, r.failure_reason, r.throughput_msgs_per_s, r.started_at, r.finished_at,
               r.ingested_at, p.point_key
        FROM runs r JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id ORDER BY r.ingested_at DESC, r.started_at DESC LIMIT 10
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
    planned = planned_runs(exp.name, exp.spec_sha256, detail["spec_text"])
    done = int(counts.ok) + int(counts.failed)
    remaining = None if planned is None else max(planned - done, 0)
    eta_s: float | None = None
    if remaining and counts.first_started is not None and counts.last_finished is not None and done > 0:
        elapsed = (counts.last_finished - counts.first_started).total_seconds()
        if elapsed > 0:
            eta_s = remaining * elapsed / done
    return {
        "ok": int(counts.ok),
        "failed": int(counts.failed),
        "done": done,
        "planned": planned,
        "remaining": remaining,
        "eta_s": eta_s,
        "first_started": counts.first_started,
        "last_finished": counts.last_finished,
        "last_ingested": counts.last_ingested,
        "latest": latest,
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


# -- sweep ----------------------------------------------------------------------------------------------


def sweep_points(
    conn: Connection,
    exp: ExperimentRef,
    *,
    host_pair: str | None = None,
    build: str | None = None,
) -> pd.DataFrame:
    """Per measured point and hardware class (runs of different classes are never averaged; local runs
    have none): parameters, runs ok/failed, mean and sample standard deviation of the ok runs' throughputs
    (aggregated in PostgreSQL). ``host_pair``/``build`` restrict the runs counted."""
    return frame(
        conn,
        f"""
        SELECT p.id AS point_id, p.point_key, p.pattern, p.notifier, p.threads, p.work_us, p.connections,
               p.msg_size, p.client_threads, p.rate, r.hardware_class,
               count(r.run_id) FILTER (WHERE r.status = 'ok') AS n_ok,
               count(r.run_id) FILTER (WHERE r.status = 'failed') AS n_failed,
               avg(r.throughput_msgs_per_s) FILTER (WHERE r.status = 'ok') AS mean,
               stddev_samp(r.throughput_msgs_per_s) FILTER (WHERE r.status = 'ok') AS sd
        FROM points p LEFT JOIN runs r ON r.point_id = p.id {_run_filter(host_pair, build)}
        WHERE p.experiment_id = :id AND NOT p.instrument
        GROUP BY p.id, r.hardware_class
        ORDER BY p.pattern, p.notifier, p.work_us, p.connections, p.msg_size, p.threads, r.hardware_class
        """,
        {"id": exp.id, "pair": host_pair, "build": build},
    )


def _run_filter(host_pair: str | None, build: str | None) -> str:
    clauses = []
    if host_pair:
        clauses.append("r.host_pair = :pair")
    if build:
        clauses.append(
            "coalesce(r.server_artifact->>'sha256', r.server_artifact->>'digest') LIKE :build || '%'"
        )
    return "".join(f" AND {c}" for c in clauses)


def sweep_repeats(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """Every ok run of the measured points: its point and throughput (one row per run, no samples)."""
    return frame(
        conn,
        """
        SELECT r.point_id, r.run_id::text AS run_id, r.repeat_index AS repeat, r.throughput_msgs_per_s,
               r.hardware_class
        FROM runs r JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND NOT p.instrument AND r.status = 'ok'
          AND r.throughput_msgs_per_s IS NOT NULL
        """,
        {"id": exp.id},
    )


def predictions(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """The models' throughputs for the experiment's points: one row per point × source × method (× the
    hardware class of the calibration, for calibrated rates; the paper's rates have none)."""
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
            """
            SELECT DISTINCT r.host_pair,
                   left(coalesce(r.server_artifact->>'sha256', r.server_artifact->>'digest'), 19) AS build
            FROM runs r JOIN points p ON p.id = r.point_id WHERE p.experiment_id = :id
            """
        ),
        {"id": exp.id},
    ).fetchall()
    pairs = sorted({r.host_pair for r in rows if r.host_pair})
    builds = sorted({r.build for r in rows if r.build})
    return pairs, builds


# -- operations -----------------------------------------------------------------------------------------


def operation_times(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """Per point × operation of the instrumented ok runs: mean time per call (µs, total over count, pooled
    over runs), the median of the runs' p50 and p99, calls and runs."""
    return frame(
        conn,
        """
        SELECT p.pattern, p.notifier, p.threads, p.work_us, p.connections, p.msg_size, o.op,
               sum(o.total_ns)::float8 / nullif(sum(o.count), 0) / 1000.0 AS mean_us,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY o.p50_ns) / 1000.0 AS p50_us,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY o.p99_ns) / 1000.0 AS p99_us,
               sum(o.count)::bigint AS calls, count(DISTINCT o.run_id) AS runs
        FROM op_timings o JOIN runs r ON r.run_id = o.run_id JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND r.status = 'ok' AND o.events IS NULL
        GROUP BY p.pattern, p.notifier, p.threads, p.work_us, p.connections, p.msg_size, o.op
        ORDER BY o.op, p.pattern, p.notifier, p.threads
        """,
        {"id": exp.id},
    )


def events_per_call(conn: Connection, exp: ExperimentRef) -> pd.DataFrame:
    """Per point: mean descriptors returned per notifier call, from the notify rows by events."""
    return frame(
        conn,
        """
        SELECT p.pattern, p.notifier, p.threads, p.work_us, p.connections, p.msg_size,
               sum(o.events::float8 * o.count) / nullif(sum(o.count), 0) AS events_per_call,
               count(DISTINCT o.run_id) AS runs
        FROM op_timings o JOIN runs r ON r.run_id = o.run_id JOIN points p ON p.id = r.point_id
        WHERE p.experiment_id = :id AND r.status = 'ok' AND o.op = 'notify' AND o.events IS NOT NULL
        GROUP BY p.pattern, p.notifier, p.threads, p.work_us, p.connections, p.msg_size
        ORDER BY p.pattern, p.notifier, p.threads
        """,
        {"id": exp.id},
    )


# -- one run ---------------------------------------------------------------------------------------------


def run_detail(conn: Connection, run_id: str) -> dict[str, Any]:
    try:
        rid = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFound(f"{run_id!r} is not a run id (a UUID)") from None
    row = conn.execute(
        text(
            """
            SELECT r.*, r.run_id::text AS run_id_text, p.point_key, p.pattern, p.notifier, p.threads,
                   p.work_us, p.connections, p.msg_size, p.client_threads, p.rate, p.instrument,
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


# -- model ----------------------------------------------------------------------------------------------


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


# -- hosts ----------------------------------------------------------------------------------------------


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
