"""Run records into PostgreSQL, one transaction per call.

A record is validated completely before anything is written (:mod:`.record`); then, in ONE transaction,
the experiment, hosts and point are upserted (``INSERT … ON CONFLICT DO NOTHING`` then ``SELECT``, so
parallel ingests of the same experiment never collide) and the run is written, the per-second samples with
``COPY``. A run already stored under the record's ``run_id`` (:mod:`.replace`): the same rows are left as
they are (``unchanged``); a different record is refused (:class:`~.replace.RunConflict`, the transaction
rolled back: nothing written) unless the caller's policy lets it replace the run, and then the stored run
is copied into ``runs_history`` before it is deleted (samples and op timings cascade) and inserted anew.
A crash leaves either the old run or the new one, never half of either.
"""

from __future__ import annotations

import dataclasses
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

from demuxlab.db.models import Base, Experiment, Host, OpTiming, Point, Run, RunCheck, RunCost, Sample
from demuxlab.errors import DatabaseError, DemuxlabError
from demuxlab.ingest.files import load_record, spec_text
from demuxlab.ingest.record import Prepared, prepare_record
from demuxlab.ingest.replace import (
    REPLACE_POLICIES,
    REPLACED_BY,
    Replace,
    RunConflict,
    keep_in_history,
    refuse_or_allow,
    stored_differences,
)

INGESTED, UNCHANGED, REPLACED = "ingested", "unchanged", "replaced"


@dataclass(frozen=True)
class IngestResult:
    run_id: str
    source: str | None
    experiment_id: int
    point_id: int
    status: str
    samples: int
    op_timings: int
    replaced: int  # stored runs this record replaced (0 or 1), each kept in runs_history
    outcome: str = INGESTED  # INGESTED (new run), UNCHANGED (stored as is: nothing written) or REPLACED
    history_ids: tuple[int, ...] = ()  # the runs_history rows of the records it replaced

    def describe(self) -> str:
        """One line for the user: what became of the record."""
        where = self.source or "<record>"
        if self.outcome == UNCHANGED:
            return f"unchanged {where}: run {self.run_id} is stored as this record has it (nothing written)"
        what = f"run {self.run_id} ({self.status}, {self.samples} sample{'' if self.samples == 1 else 's'})"
        if self.outcome == REPLACED:
            kept = ", ".join(str(i) for i in self.history_ids)
            return f"replaced {where}: {what}; the record it replaced is kept in runs_history (id {kept})"
        return f"ingested {where}: {what}"


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


def _write(conn: Connection, prep: Prepared, replace: Replace = "never") -> IngestResult:
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
    # Two ingests of the same (point, repeat) at once would both find nothing and collide on insert.
    conn.execute(select(func.pg_advisory_xact_lock(point_id, repeat)))
    new_run = {**prep.run, **host_ids, "point_id": point_id}
    result = IngestResult(
        run_id=str(prep.run_id),
        source=prep.source,
        experiment_id=experiment_id,
        point_id=point_id,
        status=prep.run["status"],
        samples=len(prep.per_second),
        op_timings=len(prep.op_rows),
        replaced=0,
    )
    # The run id is the rule over (experiment, point, repeat), so at most one row is found; the (point,
    # repeat) match only guards against a row stored under another id by other means.
    stored = [
        dict(row)
        for row in conn.execute(
            select(table_of(Run)).where(
                or_(Run.run_id == prep.run_id, and_(Run.point_id == point_id, Run.repeat_index == repeat))
            )
        )
        .mappings()
        .all()
    ]
    history_ids: list[int] = []
    if stored:
        differences = stored_differences(conn, stored[0], new_run, prep)
        if len(stored) > 1:
            differences.append(f"{len(stored)} runs stored at this point and repeat")
        if not differences:
            return dataclasses.replace(result, outcome=UNCHANGED)
        refuse_or_allow(prep, stored[0], differences, replace)
        old_ids = [row["run_id"] for row in stored]
        history_ids = keep_in_history(conn, old_ids, f"{REPLACED_BY[replace]}: {prep.source}")
        conn.execute(delete(Run).where(Run.run_id.in_(old_ids)))
    conn.execute(insert(Run).values(new_run))
    _copy_samples(conn, prep.run_id, prep.per_second, skip_triggers=superuser)
    if prep.op_rows:
        conn.execute(insert(OpTiming), prep.op_rows)
    if prep.cost_rows:
        conn.execute(insert(RunCost), prep.cost_rows)
    if prep.check_rows:
        conn.execute(insert(RunCheck), prep.check_rows)
    if not stored:
        return result
    return dataclasses.replace(result, replaced=len(stored), outcome=REPLACED, history_ids=tuple(history_ids))


def _db_error(source: str, exc: DBAPIError | psycopg.Error) -> DatabaseError:
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    return DatabaseError(
        f"{source}: ingest failed, nothing written: {lines[0] if lines else type(exc).__name__}"
    )


def _check_policy(replace: str) -> Replace:
    if replace not in REPLACE_POLICIES:
        raise ValueError(f"replace must be one of {', '.join(REPLACE_POLICIES)}, got {replace!r}")
    return replace


def ingest_run_record(
    target: Engine | Connection | Session,
    record: Mapping[str, Any],
    *,
    source: str | None = None,
    replace: Replace = "never",
) -> IngestResult:
    """Validate and write one run record in one transaction.

    With an :class:`Engine` the transaction is committed here. With a :class:`Session` or
    :class:`Connection` the record is written inside a savepoint of the caller's transaction (rolled back
    alone on failure); the caller commits. A different record of a stored run is refused unless
    ``replace`` allows it (:mod:`demuxlab.ingest.replace`).
    """
    replace = _check_policy(replace)
    doc = dict(record) if isinstance(record, Mapping) else record
    prep = prepare_record(doc, source or "<record>", spec_text)
    try:
        if isinstance(target, Engine):
            with target.begin() as conn:
                return _write(conn, prep, replace)
        if isinstance(target, Session):
            with target.begin_nested():
                return _write(target.connection(), prep, replace)
        with target.begin_nested():
            return _write(target, prep, replace)
    except (DBAPIError, psycopg.Error) as exc:
        raise _db_error(prep.source, exc) from None


def _same_rows(a: Prepared, b: Prepared) -> bool:
    return dataclasses.replace(a, source="") == dataclasses.replace(b, source="")


def ingest_files(
    paths_: Iterable[str | Path],
    *,
    engine: Engine | None = None,
    check_schema: bool = True,
    replace: Replace = "never",
) -> list[IngestResult]:
    """Ingest run record files, all or nothing: ONE transaction for the whole batch.

    Every file is read and validated before the first write; then all are written in one transaction,
    so a failure of any (a malformed file, a record that differs from its stored run and may not replace
    it, a database error) leaves the database exactly as it was and the message "nothing written" is
    true. Two different records of one run in a batch are refused (which should win?). Records are
    written in a fixed order (experiment, point key, repeat) so that concurrent batches take their locks
    in the same order. The schema is upgraded to head first if needed (unless ``check_schema`` is false:
    the caller did it). ``replace``: who may replace a stored run (:mod:`demuxlab.ingest.replace`).
    """
    replace = _check_policy(replace)
    return ingest_prepared(
        [load_record(p) for p in paths_], engine=engine, check_schema=check_schema, replace=replace
    )


def ingest_prepared(
    prepared: Sequence[Prepared],
    *,
    engine: Engine | None = None,
    check_schema: bool = True,
    replace: Replace = "never",
) -> list[IngestResult]:
    """:func:`ingest_files` for records already read and checked (:func:`~demuxlab.ingest.load_record`)."""
    from demuxlab.db import migrations
    from demuxlab.db.engine import get_engine

    replace = _check_policy(replace)
    first_of: dict[uuid.UUID, Prepared] = {}
    for prep in prepared:
        first = first_of.setdefault(prep.run_id, prep)
        if first is not prep and not _same_rows(first, prep):
            raise DemuxlabError(
                f"{prep.source}: run {prep.run_id} is also in {first.source} of this batch, with other "
                "values; nothing written (ingest one of them)"
            )
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
                results[i] = _write(conn, current, replace)
    except RunConflict as exc:
        if len(prepared) > 1:
            raise RunConflict(f"{exc.message} (batch of {len(prepared)} records: none written)") from None
        raise
    except (DBAPIError, psycopg.Error) as exc:
        assert current is not None
        error = _db_error(current.source, exc)
        if len(prepared) > 1:
            error = DatabaseError(f"{error.message} (batch of {len(prepared)} records: none written)")
        raise error from None
    return [r for r in results if r is not None]
