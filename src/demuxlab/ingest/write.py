"""Run records into PostgreSQL, one transaction per call.

A record is validated completely before anything is written (:mod:`.record`); then, in ONE transaction,
the experiment, hosts and point are upserted (``INSERT … ON CONFLICT DO NOTHING`` then ``SELECT``, so
parallel ingests of the same experiment never collide) and the run is replaced: every row of its
``run_id`` and of its ``(point, repeat)`` is deleted (samples and op timings cascade) and inserted anew,
the per-second samples with ``COPY``. A crash leaves either the old run or the new one, never half of
either.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

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

from demuxlab.db.models import Base, Experiment, Host, OpTiming, Point, Run, Sample
from demuxlab.errors import DatabaseError
from demuxlab.ingest.files import load_record, spec_text
from demuxlab.ingest.record import Prepared, prepare_record


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


def table_of(model: type[Base]) -> Table:
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


def upsert(conn: Connection, table: Table, conflict: tuple[str, ...], values: dict[str, Any]) -> int:
    row = conn.execute(_upsert_statement(table, conflict, tuple(values)), values).first()
    if row is None:
        match = and_(*(table.c[c] == values[c] for c in conflict))
        row_id: int = conn.execute(select(table.c.id).where(match)).scalar_one()
        return row_id
    return int(row[0])


def _upsert_experiment(conn: Connection, prep: Prepared) -> int:
    values = {**prep.experiment, "spec_text": prep.spec_text}
    exp_id = upsert(conn, table_of(Experiment), ("name", "spec_sha256"), values)
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


def _write(conn: Connection, prep: Prepared) -> IngestResult:
    # The run record file stays the source of truth and re-ingest is idempotent, so a commit need not
    # wait for the WAL flush (an OS crash may lose the last ingests, never corrupt them).
    superuser = conn.execute(
        text("SELECT set_config('synchronous_commit', 'off', true), current_setting('is_superuser') = 'on'")
    ).one()[1]
    experiment_id = _upsert_experiment(conn, prep)
    host_ids = {
        f"{role}_host_id": upsert(conn, table_of(Host), ("facts_sha256",), row) if row is not None else None
        for role, row in prep.hosts.items()
    }
    point_id = upsert(
        conn, table_of(Point), ("experiment_id", "point_key"), {**prep.point, "experiment_id": experiment_id}
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
    doc = dict(record) if isinstance(record, Mapping) else record
    prep = prepare_record(doc, source or "<record>", spec_text)
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
