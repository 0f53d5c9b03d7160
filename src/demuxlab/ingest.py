"""Load run records (CONTRACTS.md §5, ``"format": "demuxlab.run/1"``) into PostgreSQL.

A record is validated completely before anything is written; then, in ONE transaction, the experiment,
hosts and point are upserted (``INSERT … ON CONFLICT DO NOTHING`` then ``SELECT``, so parallel ingests of
the same experiment never collide) and the run is replaced: every row of its ``run_id`` and of its
``(point, repeat)`` is deleted (samples and op timings cascade) and inserted anew, the per-second samples
with ``COPY``. A crash leaves either the old run or the new one, never half of either.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import os
import stat
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import jsonschema
import numpy as np
import psycopg
from sqlalchemy import (
    CompoundSelect,
    Connection,
    Engine,
    Table,
    and_,
    bindparam,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from demuxlab import paths
from demuxlab.db.models import Base, Experiment, Host, OpTiming, Point, Run, Sample
from demuxlab.errors import DatabaseError, DemuxlabError
from demuxlab.limits import MAX_RUNS, limits
from demuxlab.point import POINT_FIELDS as _POINT_PARAMS
from demuxlab.point import Point as SpecPoint
from demuxlab.spec import StrictValidator, run_id_of

MAX_PHASE_S = limits().max_phase_s
FORMAT = "demuxlab.run/1"

_NUM_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}
_STR_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}
_OBJ_OR_NULL: dict[str, Any] = {"type": ["object", "null"]}
BIGINT_MAX = 2**63 - 1
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": BIGINT_MAX}
INT_MAX = 2**31 - 1
_NONNEG_OR_NULL: dict[str, Any] = {"type": ["number", "null"], "minimum": 0}
# Stored in bigint columns (rounded): bounded like them.
_NS_OR_NULL: dict[str, Any] = {"type": ["number", "null"], "minimum": 0, "maximum": BIGINT_MAX}
_SMALL_COUNT_OR_NULL: dict[str, Any] = {"type": ["integer", "null"], "minimum": 0, "maximum": INT_MAX}
_CPU_S: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {"user": {"type": "number", "minimum": 0}, "sys": {"type": "number", "minimum": 0}},
}
_FACTS: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["hostname"],
    "properties": {
        "hostname": {"type": "string", "minLength": 1},
        # Stored in integer columns of hosts.
        "numa_nodes": {"type": ["array", "integer", "null"], "minimum": 0, "maximum": INT_MAX},
        "sockets": _SMALL_COUNT_OR_NULL,
        "cores": _SMALL_COUNT_OR_NULL,
        "threads_per_core": _SMALL_COUNT_OR_NULL,
    },
}
_OP: dict[str, Any] = {
    "type": "object",
    "required": ["count"],
    "properties": {
        "count": _COUNT,
        "mean_ns": _NONNEG_OR_NULL,
        **{k: _NS_OR_NULL for k in ("total_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")},
    },
}

# Structure only; per-item checks of the (long) per-second series are done by hand, jsonschema is too slow.
RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "format",
        "run_id",
        "experiment",
        "point",
        "repeat",
        "attempt",
        "status",
        "started_at",
        "phases",
    ],
    "properties": {
        "format": {"const": FORMAT},
        "run_id": {"type": "string"},
        "experiment": {
            "type": "object",
            "required": ["name", "spec_sha256"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                "spec_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "git_rev": _STR_OR_NULL,
                "spec_path": _STR_OR_NULL,
                "spec_text": _STR_OR_NULL,
            },
        },
        "point": {
            "type": "object",
            "required": [
                "point_key",
                "pattern",
                "notifier",
                "threads",
                "work_us",
                "connections",
                "msg_size",
                "client_threads",
                "rate",
            ],
            "properties": {
                "point_key": {"type": "string", "minLength": 1},
                "pattern": {"type": "string", "minLength": 1},
                "notifier": {"type": "string", "minLength": 1},
                # The binaries' limits, as for specs (demuxlab.limits).
                "threads": {"type": "integer", "minimum": 1, "maximum": limits().max_threads},
                "work_us": {"type": "number", "minimum": 0, "maximum": limits().max_work_us},
                "connections": {"type": "integer", "minimum": 1, "maximum": limits().connections},
                "msg_size": {"type": "integer", "minimum": 1, "maximum": limits().msg_size},
                "client_threads": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": limits().client_max_threads,
                },
                "rate": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": limits().max_rate},
                # Absent in records written before calibration points existed: a measured point.
                "instrument": {"type": "boolean"},
            },
        },
        # Bounded like a spec's sweep (a repeat index is below its repeats) and PostgreSQL's integer.
        "repeat": {"type": "integer", "minimum": 0, "maximum": MAX_RUNS - 1},
        "attempt": {"type": "integer", "minimum": 1, "maximum": 1000},
        "launcher": _STR_OR_NULL,
        "host_pair": _STR_OR_NULL,
        "status": {"enum": ["ok", "failed"]},
        "failure_reason": _STR_OR_NULL,
        "started_at": {"type": "string"},
        "finished_at": _STR_OR_NULL,
        "phases": {
            "type": "object",
            "required": ["warmup_s", "measure_s", "cooldown_s"],
            "properties": {
                k: {"type": "number", "minimum": 0, "maximum": MAX_PHASE_S}
                for k in ("warmup_s", "measure_s", "cooldown_s")
            },
        },
        "hosts": {"type": ["object", "null"], "properties": {"server": _FACTS, "client": _FACTS}},
        "pinning": {
            "type": ["object", "null"],
            "properties": {"oversubscribed": {"type": ["boolean", "null"]}},
        },
        "artifacts": {
            "type": ["object", "null"],
            "properties": {"server": _OBJ_OR_NULL, "client": _OBJ_OR_NULL},
        },
        "server": {
            "type": ["object", "null"],
            "properties": {
                "messages": _COUNT,
                "cpu_s": _CPU_S,
                "ops": {"type": "object", "additionalProperties": _OP, "maxProperties": 256},
                "notify_by_events": {
                    "type": "array",
                    "maxItems": 4096,
                    "items": {
                        "type": "object",
                        "required": ["events", "count", "mean_ns"],
                        "properties": {
                            "events": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
                            "count": _COUNT,
                            "mean_ns": _NONNEG_OR_NULL,
                        },
                    },
                },
            },
        },
        "client": {
            "type": ["object", "null"],
            "properties": {
                "throughput_msgs_per_s": _NONNEG_OR_NULL,
                "messages": _COUNT,
                "per_second": {"type": "array", "maxItems": MAX_PHASE_S + 1},
                # Latencies in microseconds: none negative.
                "latency_us": {"type": ["object", "null"], "additionalProperties": _NONNEG_OR_NULL},
                "cpu_s": _CPU_S,
                "errors": _COUNT,
            },
        },
        "stats": {
            "type": ["object", "null"],
            "properties": {
                "throughput_msgs_per_s": _NONNEG_OR_NULL,
                "stationary": {"type": ["boolean", "null"]},
                "drift_rel": _NUM_OR_NULL,
            },
        },
        "orchestration_s": _NONNEG_OR_NULL,
        # Cluster runs: the pair (with its hardware class) and the noise check of both hosts.
        "pair": {
            "type": ["object", "null"],
            "properties": {
                "hardware_class": {
                    "type": ["object", "null"],
                    "properties": {"id": {"type": "string", "minLength": 1}},
                }
            },
        },
        "noise": {"type": ["object", "null"], "properties": {"flagged": {"type": "boolean"}}},
    },
    "allOf": [
        {
            "if": {"required": ["status"], "properties": {"status": {"const": "failed"}}},
            "then": {
                "required": ["failure_reason"],
                "properties": {"failure_reason": {"type": "string", "minLength": 1}},
            },
        }
    ],
}

# The spec's strict types: an integer is not 2.0, a number is finite.
_VALIDATOR = StrictValidator(RECORD_SCHEMA)

# A record is a page of JSON plus one sample per second: generous, but not unbounded.
MAX_RECORD_BYTES = 4 * 1024 * 1024  # a day of per-second samples is about 1 MiB
MAX_RECORD_DEPTH = 64


@dataclass(frozen=True)
class IngestResult:
    run_id: str
    source: str | None
    experiment_id: int
    point_id: int
    status: str
    samples: int
    op_timings: int
    replaced: int  # rows of earlier ingests removed (same run_id or same point and repeat)


@dataclass(frozen=True)
class _Prepared:
    """A validated record, already shaped into rows."""

    source: str
    run_id: uuid.UUID
    experiment: dict[str, Any]
    spec_text: str | None
    point: dict[str, Any]
    hosts: dict[str, dict[str, Any] | None]
    run: dict[str, Any]
    per_second: Sequence[float]
    op_rows: list[dict[str, Any]]


# -- validation ----------------------------------------------------------------------------------------------


def _field(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<record>"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(source: str, field: str, problem: str) -> DemuxlabError:
    return DemuxlabError(f"{source}: field {field}: {problem}")


def _schema_error(source: str, record: Any) -> DemuxlabError | None:
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(record))
    if error is None:
        return None
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        return _fail(source, _field([*path, missing[0]]), "missing")
    if error.validator == "type":
        expected = error.validator_value
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return _fail(source, _field(path), f"expected {wanted}, got {_short(error.instance)}")
    return _fail(
        source,
        _field(path),
        f"{_short(error.instance)} is invalid ({error.validator}: {_short(error.validator_value)})",
    )


def _timestamp(source: str, field: str, value: str) -> dt.datetime:
    try:
        stamp = dt.datetime.fromisoformat(value)
    except ValueError:
        raise _fail(source, field, f"not an ISO 8601 timestamp: {_short(value)}") from None
    # The launchers write UTC; a naive stamp is taken as UTC rather than the ingesting host's zone.
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=dt.UTC)


def _int(value: Any) -> int | None:
    return round(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _typed(value: Any, kind: type) -> Any:
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, kind) else None


def facts_sha256(facts: Mapping[str, Any]) -> str:
    """The identity of a host's facts: sha256 of their canonical JSON without the volatile facts
    (``collected_at``, ``load``)."""
    stable = {k: v for k, v in facts.items() if k not in ("collected_at", "load")}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _host_row(facts: dict[str, Any]) -> dict[str, Any]:
    nodes = facts.get("numa_nodes")
    return {
        "hostname": facts["hostname"],
        "facts": facts,
        "facts_sha256": facts_sha256(facts),
        "numa_nodes": len(nodes) if isinstance(nodes, list) else _typed(nodes, int),
        "sockets": _typed(facts.get("sockets"), int),
        "cores": _typed(facts.get("cores"), int),
        "threads_per_core": _typed(facts.get("threads_per_core"), int),
        "smt": _typed(facts.get("smt"), bool),
        "governor": _typed(facts.get("governor"), str),
        "turbo": _typed(facts.get("turbo"), bool),
        "irqbalance": _typed(facts.get("irqbalance"), bool),
        "kernel": _typed(facts.get("kernel"), str),
        "cpu_model": _typed(facts.get("cpu_model"), str),
    }


def _spec_text(experiment: Mapping[str, Any]) -> str | None:
    """The spec as it was run: the spec file if it still hashes to spec_sha256, else the embedded text."""
    spec_path = experiment.get("spec_path")
    if spec_path:
        path = Path(spec_path)
        if not path.is_absolute():
            path = paths.repo_root() / path
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is not None and hashlib.sha256(data).hexdigest() == experiment["spec_sha256"]:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
    text = experiment.get("spec_text")
    return text if isinstance(text, str) else None


def _check_series(source: str, per_second: list[Any]) -> None:
    for i, value in enumerate(per_second):
        if type(value) not in (float, int) or not math.isfinite(value) or value < 0:
            raise _fail(
                source, f"client.per_second[{i}]", f"expected a finite number >= 0, got {_short(value)}"
            )


def _check_values(source: str, record: Any) -> None:
    """Every number finite, every key a string, nesting bounded (records may come as Python objects)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(record, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_RECORD_DEPTH:
            raise _fail(source, _field(path[:8]) + "…", f"nested more than {MAX_RECORD_DEPTH} levels deep")
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise _fail(source, _field(path), f"key {_short(k)} is not a string")
                stack.append((v, (*path, k)))
        elif isinstance(value, list | tuple):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise _fail(source, _field(path), f"{value} is not a finite number")


def _check_identity(source: str, record: dict[str, Any], run_id: uuid.UUID) -> None:
    """The point's fields make its key, and the run id is the rule over (experiment, spec, point, repeat)."""
    point = record["point"]
    try:
        key = SpecPoint(
            pattern=point["pattern"],
            notifier=point["notifier"],
            threads=point["threads"],
            work_us=point["work_us"],
            connections=point["connections"],
            msg_size=point["msg_size"],
            client_threads=point["client_threads"],
            rate=point["rate"],
            instrument=bool(point.get("instrument", False)),
        ).point_key
    except (TypeError, ValueError, OverflowError):
        key = None
    if key != point["point_key"]:
        raise _fail(
            source,
            "point.point_key",
            f"{_short(point['point_key'])} does not match the point's fields (they make {_short(key)})",
        )
    exp = record["experiment"]
    expected = run_id_of(exp["name"], exp["spec_sha256"], point["point_key"], record["repeat"])
    if str(run_id) != expected:
        raise _fail(
            source,
            "run_id",
            f"{run_id} is not the id of experiment {_short(exp['name'])}, spec {exp['spec_sha256'][:12]}…, "
            f"point {_short(point['point_key'])}, repeat {record['repeat']} (expected {expected})",
        )


def prepare_record(record: Any, source: str = "<record>") -> _Prepared:
    """Validate a run record and shape it into rows; raise :class:`DemuxlabError` naming the field."""
    if not isinstance(record, dict):
        raise _fail(source, "<record>", f"expected a JSON object, got {type(record).__name__}")
    fmt = record.get("format")
    if fmt != FORMAT:
        problem = "missing" if fmt is None else f"unknown format {_short(fmt)} (expected {FORMAT!r})"
        raise _fail(source, "format", problem)
    _check_values(source, record)
    error = _schema_error(source, record)
    if error is not None:
        raise error
    try:
        run_id = uuid.UUID(record["run_id"])
    except ValueError:
        raise _fail(source, "run_id", f"not a UUID: {_short(record['run_id'])}") from None
    _check_identity(source, record, run_id)
    started = _timestamp(source, "started_at", record["started_at"])
    finished = record.get("finished_at")
    finished_at = _timestamp(source, "finished_at", finished) if finished is not None else None
    if finished_at is not None and finished_at < started:
        raise _fail(
            source, "finished_at", f"{_short(finished)} is before started_at {_short(record['started_at'])}"
        )

    client: dict[str, Any] = record.get("client") or {}
    server: dict[str, Any] = record.get("server") or {}
    stats: dict[str, Any] = record.get("stats") or {}
    per_second: list[Any] = client.get("per_second") or []
    _check_series(source, per_second)

    seen_events: set[int] = set()
    for i, row in enumerate(server.get("notify_by_events") or []):
        if row["events"] in seen_events:
            raise _fail(source, f"server.notify_by_events[{i}].events", f"duplicate value {row['events']}")
        seen_events.add(row["events"])

    hosts_doc: dict[str, Any] = record.get("hosts") or {}
    hosts = {
        role: _host_row(hosts_doc[role]) if hosts_doc.get(role) else None for role in ("server", "client")
    }
    pinning = record.get("pinning")
    artifacts: dict[str, Any] = record.get("artifacts") or {}
    phases = record["phases"]
    client_cpu: dict[str, Any] = client.get("cpu_s") or {}
    server_cpu: dict[str, Any] = server.get("cpu_s") or {}
    throughput = stats.get("throughput_msgs_per_s")
    if throughput is None:
        throughput = client.get("throughput_msgs_per_s")

    run = {
        "run_id": run_id,
        "repeat_index": record["repeat"],
        "attempt": record["attempt"],
        "status": record["status"],
        "failure_reason": record.get("failure_reason"),
        "started_at": started,
        "finished_at": finished_at,
        "launcher": record.get("launcher"),
        "host_pair": record.get("host_pair"),
        "pinning": pinning,
        "oversubscribed": pinning.get("oversubscribed") if pinning else None,
        "server_artifact": artifacts.get("server"),
        "client_artifact": artifacts.get("client"),
        "warmup_s": phases["warmup_s"],
        "measure_s": phases["measure_s"],
        "cooldown_s": phases["cooldown_s"],
        "throughput_msgs_per_s": throughput,
        "stationary": stats.get("stationary"),
        "drift_rel": stats.get("drift_rel"),
        "latency_us": client.get("latency_us"),
        "client_cpu_user_s": client_cpu.get("user"),
        "client_cpu_sys_s": client_cpu.get("sys"),
        "server_cpu_user_s": server_cpu.get("user"),
        "server_cpu_sys_s": server_cpu.get("sys"),
        "server_messages": server.get("messages"),
        "client_messages": client.get("messages"),
        "errors": client.get("errors"),
        "orchestration_s": record.get("orchestration_s"),
        # The series goes to ``samples``; keeping it here too would double the run's size.
        "client_result": {k: v for k, v in client.items() if k != "per_second"}
        if record.get("client")
        else None,
        "server_result": record.get("server"),
        "hardware_class": ((record.get("pair") or {}).get("hardware_class") or {}).get("id"),
        "noisy": (record.get("noise") or {}).get("flagged"),
        "noise": record.get("noise"),
    }

    op_rows: list[dict[str, Any]] = []
    for name, op in (server.get("ops") or {}).items():
        op_rows.append(
            {
                "run_id": run_id,
                "op": name,
                "events": None,
                "count": op["count"],
                "total_ns": _int(op.get("total_ns")),
                "mean_ns": op.get("mean_ns"),
                **{k: _int(op.get(k)) for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")},
            }
        )
    for row in server.get("notify_by_events") or []:
        op_rows.append(
            {
                "run_id": run_id,
                "op": "notify",
                "events": row["events"],
                "count": row["count"],
                "total_ns": None,
                "mean_ns": row.get("mean_ns"),
                **dict.fromkeys(("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")),
            }
        )

    experiment = record["experiment"]
    return _Prepared(
        source=source,
        run_id=run_id,
        experiment={
            "name": experiment["name"],
            "spec_sha256": experiment["spec_sha256"],
            "git_rev": experiment.get("git_rev"),
        },
        spec_text=_spec_text(experiment),
        point={
            **{k: record["point"][k] for k in RECORD_SCHEMA["properties"]["point"]["required"]},
            "instrument": bool(record["point"].get("instrument", False)),
        },
        hosts=hosts,
        run=run,
        per_second=per_second,
        op_rows=op_rows,
    )


# -- writing -------------------------------------------------------------------------------------------------


def _table(model: type[Base]) -> Table:
    return cast(Table, model.__table__)


@functools.cache
def _upsert_statement(
    table: Table, conflict: tuple[str, ...], columns: tuple[str, ...]
) -> CompoundSelect[Any]:
    """``INSERT … ON CONFLICT DO NOTHING RETURNING id`` and the existing row's id, in one round trip.

    Returns (id, inserted). A row inserted by a concurrent transaction that committed while we waited on
    the conflict is invisible to this statement's snapshot: the caller then re-selects.
    """
    params = {c: bindparam(c, type_=table.c[c].type) for c in columns}
    ins = (
        pg_insert(table)
        .values(params)
        .on_conflict_do_nothing(index_elements=list(conflict))
        .returning(table.c.id)
        .cte("ins")
    )
    match = and_(*(table.c[c] == params[c] for c in conflict))
    return select(ins.c.id, true().label("inserted")).union_all(
        select(table.c.id, false().label("inserted")).where(match)
    )


def _upsert(conn: Connection, table: Table, conflict: tuple[str, ...], values: dict[str, Any]) -> int:
    row = conn.execute(_upsert_statement(table, conflict, tuple(values)), values).first()
    if row is None:
        match = and_(*(table.c[c] == values[c] for c in conflict))
        row_id: int = conn.execute(select(table.c.id).where(match)).scalar_one()
        return row_id
    return int(row[0])


def _upsert_experiment(conn: Connection, prep: _Prepared) -> int:
    values = {**prep.experiment, "spec_text": prep.spec_text}
    exp_id = _upsert(conn, _table(Experiment), ("name", "spec_sha256"), values)
    if prep.spec_text is not None:
        # An earlier record may have lacked the text; fill it in, never overwrite it.
        conn.execute(
            update(Experiment)
            .where(Experiment.id == exp_id, Experiment.spec_text.is_(None))
            .values(spec_text=prep.spec_text)
        )
    return exp_id


# PostgreSQL's binary COPY row for samples: field count, then (length, big-endian value) per column.
_SAMPLE_ROW = np.dtype(
    [
        ("n", ">i2"),
        ("l_run", ">i4"),
        ("run", "V16"),
        ("l_sec", ">i4"),
        ("sec", ">i4"),
        ("l_tp", ">i4"),
        ("tp", ">f8"),
    ]
)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
_COPY_TRAILER = b"\xff\xff"


def _samples_payload(run_id: uuid.UUID, per_second: Sequence[float]) -> bytes:
    """The samples of a run as one binary COPY stream, built without a Python loop over the rows."""
    rows = np.empty(len(per_second), dtype=_SAMPLE_ROW)
    rows["n"], rows["l_run"], rows["l_sec"], rows["l_tp"] = 3, 16, 4, 8
    rows["run"] = np.frombuffer(run_id.bytes, dtype="V16")[0]
    rows["sec"] = np.arange(len(per_second))
    rows["tp"] = np.asarray(per_second, dtype=np.float64)
    return _COPY_HEADER + rows.tobytes() + _COPY_TRAILER


def _copy_samples(
    conn: Connection, run_id: uuid.UUID, per_second: Sequence[float], *, skip_triggers: bool
) -> None:
    if not per_second:
        return
    raw = conn.connection.driver_connection
    if raw is None:
        raise DatabaseError("ingest: no DBAPI connection available for COPY")
    payload = _samples_payload(run_id, per_second)
    # The foreign-key check on samples.run_id is a trigger run once per row and costs more than the rest of
    # the COPY together. Every row references the run inserted just above in this transaction, so where we
    # may (superuser) we skip triggers for the COPY only; CHECK constraints and the primary key still apply.
    table = Sample.__tablename__
    with raw.cursor() as cur:
        if skip_triggers:
            cur.execute("SET LOCAL session_replication_role = replica")
        columns = "run_id, second, throughput_msgs_per_s"
        with cur.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT binary)") as copy:
            copy.write(payload)
        if skip_triggers:
            cur.execute("SET LOCAL session_replication_role = origin")


def _write(conn: Connection, prep: _Prepared) -> IngestResult:
    # The run record file stays the source of truth and re-ingest is idempotent, so a commit need not
    # wait for the WAL flush (an OS crash may lose the last ingests, never corrupt them).
    superuser = conn.execute(
        text("SELECT set_config('synchronous_commit', 'off', true), current_setting('is_superuser') = 'on'")
    ).one()[1]
    experiment_id = _upsert_experiment(conn, prep)
    host_ids = {
        f"{role}_host_id": _upsert(conn, _table(Host), ("facts_sha256",), row) if row is not None else None
        for role, row in prep.hosts.items()
    }
    point_id = _upsert(
        conn, _table(Point), ("experiment_id", "point_key"), {**prep.point, "experiment_id": experiment_id}
    )
    repeat = prep.run["repeat_index"]
    # Two ingests of the same (point, repeat) at once would both delete nothing and collide on insert.
    conn.execute(select(func.pg_advisory_xact_lock(point_id, repeat)))
    replaced = conn.execute(
        delete(Run).where(
            or_(Run.run_id == prep.run_id, and_(Run.point_id == point_id, Run.repeat_index == repeat))
        )
    ).rowcount
    conn.execute(insert(Run).values({**prep.run, **host_ids, "point_id": point_id}))
    _copy_samples(conn, prep.run_id, prep.per_second, skip_triggers=superuser)
    if prep.op_rows:
        conn.execute(insert(OpTiming), prep.op_rows)
    return IngestResult(
        run_id=str(prep.run_id),
        source=prep.source,
        experiment_id=experiment_id,
        point_id=point_id,
        status=prep.run["status"],
        samples=len(prep.per_second),
        op_timings=len(prep.op_rows),
        replaced=replaced,
    )


def _db_error(source: str, exc: DBAPIError | psycopg.Error) -> DatabaseError:
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    return DatabaseError(
        f"{source}: ingest failed, nothing written: {lines[0] if lines else type(exc).__name__}"
    )


def ingest_run_record(
    target: Engine | Connection | Session, record: Mapping[str, Any], *, source: str | None = None
) -> IngestResult:
    """Validate and write one run record in one transaction.

    With an :class:`Engine` the transaction is committed here. With a :class:`Session` or
    :class:`Connection` the record is written inside a savepoint of the caller's transaction (rolled back
    alone on failure); the caller commits.
    """
    prep = prepare_record(dict(record) if isinstance(record, Mapping) else record, source or "<record>")
    try:
        if isinstance(target, Engine):
            with target.begin() as conn:
                return _write(conn, prep)
        if isinstance(target, Session):
            with target.begin_nested():
                return _write(target.connection(), prep)
        with target.begin_nested():
            return _write(target, prep)
    except (DBAPIError, psycopg.Error) as exc:
        raise _db_error(prep.source, exc) from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_short(key)}")
            seen.add(key)
    return out


def _read_record_bytes(path: Path) -> bytes:
    """A regular file (no FIFO or device), at most MAX_RECORD_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise DemuxlabError(f"{path}: cannot read run record: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DemuxlabError(f"{path}: cannot read run record: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        raise DemuxlabError(f"{path}: cannot read run record: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_RECORD_BYTES:
        raise DemuxlabError(f"{path}: more than {MAX_RECORD_BYTES} bytes, more than a run record holds")
    return raw


def parse_record(raw: bytes, source: str) -> Any:
    """JSON as run records are written: UTF-8, no duplicate keys, bounded nesting."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DemuxlabError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    try:
        # NaN and Infinity parse (to be refused by field in prepare_record); duplicate keys do not.
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise DemuxlabError(
            f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:  # from the hooks
        raise DemuxlabError(f"{source}: not a valid run record: {exc}") from None
    except RecursionError:
        raise DemuxlabError(f"{source}: not a valid run record: JSON nested too deeply") from None


def load_record(path: str | Path) -> _Prepared:
    """Read and validate one run record file."""
    path = Path(path)
    record = parse_record(_read_record_bytes(path), str(path))
    return prepare_record(record, str(path))


def ingest_files(
    paths_: Iterable[str | Path], *, engine: Engine | None = None, check_schema: bool = True
) -> list[IngestResult]:
    """Ingest run record files, all or nothing: ONE transaction for the whole batch.

    Every file is read and validated before the first write; then all are written in one transaction,
    so a failure of any (a malformed file, a database error) leaves the database exactly as it was and
    the message "nothing written" is true. Records are written in a fixed order (experiment, point key,
    repeat) so that concurrent batches take their locks in the same order. The schema is upgraded to head
    first if needed (unless ``check_schema`` is false: the caller did it).
    """
    from demuxlab.db import migrations
    from demuxlab.db.engine import get_engine

    prepared = [load_record(p) for p in paths_]
    order = sorted(
        range(len(prepared)),
        key=lambda i: (
            prepared[i].experiment["name"],
            prepared[i].experiment["spec_sha256"],
            prepared[i].point["point_key"],
            prepared[i].run["repeat_index"],
        ),
    )
    engine = engine or get_engine()
    if check_schema:
        migrations.ensure_schema(engine)
    results: list[IngestResult | None] = [None] * len(prepared)
    current = prepared[order[0]] if order else None
    try:
        with engine.begin() as conn:
            for i in order:
                current = prepared[i]
                results[i] = _write(conn, current)
    except (DBAPIError, psycopg.Error) as exc:
        assert current is not None
        error = _db_error(current.source, exc)
        if len(prepared) > 1:
            error = DatabaseError(f"{error.message} (batch of {len(prepared)} records: none written)")
        raise error from None
    return [r for r in results if r is not None]


_WORKFLOW_LOCK = threading.Lock()
_SCHEMA_CHECKED: set[str] = set()  # engine URLs whose schema this process has checked


def ingest_for_workflow(record: str | Path, done: str | Path, log: str | Path) -> IngestResult:
    """The workflow's ``ingest_run`` job, run in a thread of the Snakemake controller itself.

    The same write as ``demuxlab ingest RECORD --done DONE`` (one transaction, idempotent per run id, the
    done file written atomically after the commit), without a process per run: a process would spend a
    second or more importing SQLAlchemy, psycopg and jsonschema and connecting, for a few milliseconds of
    writing, and the cluster profile ingests 10,000 runs on two cores. The engine is made, and the schema
    checked, once per controller and database (the ``database`` rule upgraded it first). A killed
    controller loses at most an uncommitted transaction and the done file, so the rerun ingests again.
    """
    from demuxlab.db import migrations
    from demuxlab.db.engine import get_engine
    from demuxlab.jsonio import write_json_atomic

    log_path = Path(log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _WORKFLOW_LOCK:
            engine = get_engine()
            url = engine.url.render_as_string(hide_password=False)
            if url not in _SCHEMA_CHECKED:
                migrations.ensure_schema(engine)
                _SCHEMA_CHECKED.add(url)
        (result,) = ingest_files([record], engine=engine, check_schema=False)
    except DemuxlabError as exc:
        log_path.write_text(f"demuxlab: error: {exc.message}\n")
        raise
    write_json_atomic(Path(done), {"ingested": [str(record)]})
    log_path.write_text(f"ingested {result}\n")
    return result


# -- queries -------------------------------------------------------------------------------------------------


def point_summaries(
    session: Session, experiment_name: str, spec_sha256: str | None = None
) -> list[dict[str, Any]]:
    """Per point of an experiment: its parameters, runs ok / failed, and the ok runs' throughputs.

    Without ``spec_sha256`` the experiment's most recently created spec version is used. Points are
    ordered by point_key; ``throughputs`` follow ``repeats`` (ok runs by repeat index).
    """
    query = select(Experiment).where(Experiment.name == experiment_name)
    if spec_sha256 is not None:
        query = query.where(Experiment.spec_sha256 == spec_sha256)
    experiment = session.scalars(query.order_by(Experiment.created_at.desc(), Experiment.id.desc())).first()
    if experiment is None:
        suffix = f" with spec_sha256 {spec_sha256}" if spec_sha256 else ""
        raise DemuxlabError(
            f"experiment {experiment_name!r}{suffix}: not in the database (ingest its runs first)"
        )

    rows = session.execute(
        select(Point, Run.repeat_index, Run.status, Run.throughput_msgs_per_s, Run.run_id)
        .outerjoin(Run, Run.point_id == Point.id)
        .where(Point.experiment_id == experiment.id)
        .order_by(Point.point_key, Run.repeat_index)
    ).all()
    out: dict[int, dict[str, Any]] = {}
    for point, repeat, status, throughput, run_id in rows:
        summary = out.get(point.id)
        if summary is None:
            summary = {
                "experiment": experiment.name,
                "spec_sha256": experiment.spec_sha256,
                "point_id": point.id,
                "point_key": point.point_key,
                **{k: getattr(point, k) for k in _POINT_PARAMS},
                "runs_ok": 0,
                "runs_failed": 0,
                "repeats": [],
                "throughputs": [],
                "run_ids": [],
            }
            out[point.id] = summary
        if status == "ok":
            summary["runs_ok"] += 1
            if throughput is not None:
                summary["repeats"].append(repeat)
                summary["throughputs"].append(throughput)
                summary["run_ids"].append(str(run_id))
        elif status == "failed":
            summary["runs_failed"] += 1
    return list(out.values())
