"""The database subset of some experiments as Parquet, and back (the bundle's portable dump, ``db/``).

One Parquet file per table (uncompressed: the archive compresses), columns named and typed as the models
(JSONB as canonical JSON text, UUIDs as text, timestamps as UTC microseconds), rows in a fixed order, plus
``db/schema.json`` (format, Alembic revision, columns, row counts). Nothing in it depends on the PostgreSQL
version, and any Parquet reader opens it.

:func:`load` puts a dump into any demuxlab database in ONE transaction, idempotently: experiments, hosts
and points are matched by their natural keys (name + spec hash, facts hash, point key), runs are replaced by
run id (their samples, op timings, costs and checks with them; a stored run that differs from the bundle's
is kept in ``runs_history``, one that is the same is left as it was, so importing twice is a no-op),
calibrations are matched by (pattern, notifier, method, source runs), refused ones (method ``refused``) by
experiment, spec hash, pattern, notifier and hardware class, and predictions by their unique key.
Serial ids are kept where the target does not use them (so a fresh database gets the very same rows),
else new ones are drawn and every reference is mapped. Other experiments are never touched.

(Over 500 lines on purpose: one concern, the tables' dump and load, whose parts share the id mapping of
every table; the run's children (samples, op timings, costs, checks) are loaded with their runs.)
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Double,
    Engine,
    Integer,
    Table,
    Text,
    Uuid,
    and_,
    delete,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB

from demuxlab.bundle.archive import BundleError
from demuxlab.bundle.layout import canonical_json
from demuxlab.db.models import (
    Calibration,
    Experiment,
    Host,
    OpTiming,
    Point,
    Prediction,
    Run,
    RunCheck,
    RunCost,
    Sample,
)
from demuxlab.ingest.replace import drop_unchanged_history, keep_in_history
from demuxlab.vocab import CALIBRATION_REFUSED

DUMP_FORMAT = "demuxlab.dump/1"
# In load order: a table only refers to tables before it.
TABLES: tuple[str, ...] = (
    "experiments",
    "hosts",
    "points",
    "runs",
    "samples",
    "op_timings",
    "run_costs",
    "run_checks",
    "calibrations",
    "predictions",
)
#: Tables a bundle made before them lacks (0008_costs): read as empty.
OPTIONAL_TABLES: frozenset[str] = frozenset({"run_costs", "run_checks"})
_MODELS = {
    m.__tablename__: m
    for m in (Experiment, Host, Point, Run, Sample, OpTiming, RunCost, RunCheck, Calibration, Prediction)
}


def table(name: str) -> Table:
    t = _MODELS[name].__table__
    assert isinstance(t, Table)
    return t


def _arrow_type(col: Column[Any]) -> Any:
    import pyarrow as pa

    t = col.type
    if isinstance(t, BigInteger):
        return pa.int64()
    if isinstance(t, Integer):
        return pa.int32()
    if isinstance(t, Double):
        return pa.float64()
    if isinstance(t, Boolean):
        return pa.bool_()
    if isinstance(t, DateTime):
        return pa.timestamp("us", tz="UTC")
    if isinstance(t, Uuid | Text | JSONB):
        return pa.string()
    raise TypeError(f"{col.table.name}.{col.name}: no Parquet type for {t!r}")


def _to_cell(col: Column[Any], value: Any) -> Any:
    if value is None:
        return None
    if isinstance(col.type, JSONB):
        return canonical_json(value).decode().rstrip("\n")
    if isinstance(col.type, Uuid):
        return str(value)
    return value


def _from_cell(col: Column[Any], value: Any) -> Any:
    if value is None:
        return None
    if isinstance(col.type, JSONB):
        return json.loads(value)
    if isinstance(col.type, Uuid):
        return uuid.UUID(value)
    return value


# -- dump --------------------------------------------------------------------------------------------------


@dataclass
class Dump:
    """The dump's files (``db/<table>.parquet``, ``db/schema.json``) and what they hold."""

    files: dict[str, bytes] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _rows(conn: Connection, t: Table, where: Any, order: Sequence[Any]) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(select(t).where(where).order_by(*order))]


def collect(conn: Connection, experiments: Sequence[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``experiments`` ((name, spec_sha256) pairs) and of everything they refer to."""
    e, p, r, s, o, h, c, x = (
        table(n)
        for n in (
            "experiments",
            "points",
            "runs",
            "samples",
            "op_timings",
            "hosts",
            "calibrations",
            "predictions",
        )
    )
    out: dict[str, list[dict[str, Any]]] = {}
    out["experiments"] = _rows(
        conn, e, tuple_(e.c.name, e.c.spec_sha256).in_(list(experiments)), [e.c.name, e.c.spec_sha256]
    )
    exp_ids = [row["id"] for row in out["experiments"]]
    out["points"] = _rows(conn, p, p.c.experiment_id.in_(exp_ids), [p.c.experiment_id, p.c.point_key])
    point_ids = [row["id"] for row in out["points"]]
    out["runs"] = _rows(conn, r, r.c.point_id.in_(point_ids), [r.c.run_id])
    runs_q = select(r.c.run_id).where(r.c.point_id.in_(point_ids)).scalar_subquery()
    out["samples"] = _rows(conn, s, s.c.run_id.in_(runs_q), [s.c.run_id, s.c.second])
    out["op_timings"] = _rows(conn, o, o.c.run_id.in_(runs_q), [o.c.run_id, o.c.op, o.c.events.nulls_first()])
    k, v = table("run_costs"), table("run_checks")
    out["run_costs"] = _rows(conn, k, k.c.run_id.in_(runs_q), [k.c.run_id, k.c.side, k.c.metric])
    out["run_checks"] = _rows(conn, v, v.c.run_id.in_(runs_q), [v.c.run_id, v.c.check])
    out["predictions"] = _rows(conn, x, x.c.point_id.in_(point_ids), [x.c.id])
    from_predictions = {row["calibration_id"] for row in out["predictions"]} - {None}
    by_experiment = or_(
        *(
            and_(c.c.artifacts["experiment"].astext == name, c.c.artifacts["spec_sha256"].astext == sha)
            for name, sha in experiments
        )
    )
    out["calibrations"] = _rows(conn, c, or_(c.c.id.in_(from_predictions), by_experiment), [c.c.id])
    host_ids = {row[k] for row in out["runs"] for k in ("server_host_id", "client_host_id")}
    host_ids |= {row["host_id"] for row in out["calibrations"]}
    out["hosts"] = _rows(conn, h, h.c.id.in_(host_ids - {None}), [h.c.id])
    return out


def alembic_revision(conn: Connection) -> str | None:
    try:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except Exception:
        return None


def to_parquet(rows: Mapping[str, list[dict[str, Any]]], revision: str | None) -> dict[str, bytes]:
    """``db/<table>.parquet`` and ``db/schema.json`` for ``rows`` (deterministic bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files: dict[str, bytes] = {}
    meta: dict[str, Any] = {"format": DUMP_FORMAT, "alembic_revision": revision, "tables": {}}
    for name in TABLES:
        t = table(name)
        cols = list(t.columns)
        schema = pa.schema([pa.field(col.name, _arrow_type(col), nullable=True) for col in cols])
        data = {col.name: [_to_cell(col, row[col.name]) for row in rows[name]] for col in cols}
        arrow = pa.Table.from_pydict(data, schema=schema)
        buf = io.BytesIO()
        pq.write_table(arrow, buf, compression="none", use_dictionary=True, write_statistics=False)
        files[f"db/{name}.parquet"] = buf.getvalue()
        meta["tables"][name] = {
            "rows": len(rows[name]),
            "columns": [{"name": col.name, "type": str(_arrow_type(col))} for col in cols],
        }
    files["db/schema.json"] = canonical_json(meta)
    return files


def dump(engine: Engine, experiments: Sequence[tuple[str, str]]) -> Dump:
    with engine.connect() as conn:
        rows = collect(conn, experiments)
        files = to_parquet(rows, alembic_revision(conn))
    return Dump(files, rows)


# -- load --------------------------------------------------------------------------------------------------


def read_parquet(files: Mapping[str, bytes]) -> dict[str, list[dict[str, Any]]]:
    """Rows per table from the dump's files; a column this demuxlab does not know is an error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: dict[str, list[dict[str, Any]]] = {}
    for name in TABLES:
        where = f"db/{name}.parquet"
        if where not in files and name in OPTIONAL_TABLES:
            out[name] = []
            continue
        if where not in files:
            raise BundleError(f"{where}: missing from the bundle")
        t = table(name)
        try:
            arrow = pq.read_table(pa.BufferReader(files[where]))
        except Exception as exc:  # pyarrow's errors: one line
            raise BundleError(f"{where}: not a readable Parquet file: {str(exc).splitlines()[0]}") from None
        unknown = [c for c in arrow.column_names if c not in t.columns]
        if unknown:
            raise BundleError(
                f"{where}: column {unknown[0]!r} is not in this demuxlab's schema (upgrade demuxlab)"
            )
        cols = [t.columns[c] for c in arrow.column_names]
        for col in cols:
            got, want = arrow.schema.field(col.name).type, _arrow_type(col)
            if got != want:
                raise BundleError(f"{where}: column {col.name!r} is {got}, expected {want}")
        missing = [
            c.name
            for c in t.columns
            if c.name not in arrow.column_names and not c.nullable and c.server_default is None
        ]
        if missing:
            raise BundleError(f"{where}: column {missing[0]!r} is missing")
        rows = arrow.to_pylist()
        try:
            out[name] = [{col.name: _from_cell(col, row[col.name]) for col in cols} for row in rows]
        except ValueError as exc:  # bad JSON or UUID text (json.JSONDecodeError is a ValueError)
            raise BundleError(f"{where}: a value does not parse: {str(exc).splitlines()[0]}") from None
    return out


@dataclass
class LoadResult:
    experiments: list[tuple[str, str]]
    runs: int
    samples: int
    kept_ids: bool  # every serial id as in the bundle
    replaced: int = 0  # stored runs the bundle's differed from: each kept in runs_history


def _free_ids(conn: Connection, t: Table, ids: Iterable[int]) -> set[int]:
    wanted = sorted(set(ids))
    if not wanted:
        return set()
    taken = set(conn.scalars(select(t.c.id).where(t.c.id.in_(wanted))))
    return set(wanted) - taken


def _match(conn: Connection, t: Table, row: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    cond = and_(
        *(t.c[k].is_not_distinct_from(row[k]) if row[k] is not None else t.c[k].is_(None) for k in keys)
    )
    found = conn.scalars(select(t.c.id).where(cond).order_by(t.c.id)).first()
    return int(found) if found is not None else None


def _match_refusal(conn: Connection, c: Table, row: Mapping[str, Any]) -> int | None:
    """A stored refusal the bundle's ``row`` is, keyed as ``validation.store.save_refusal`` keys it: one per
    experiment (name and spec hash), pattern, notifier and hardware class. Its source runs do not identify
    it: two experiments' refusals of one design for want of runs both have none."""
    a = row.get("artifacts") or {}
    klass = a.get("hardware_class")
    art = c.c.artifacts
    cond = and_(
        c.c.pattern == row["pattern"],
        c.c.notifier == row["notifier"],
        c.c.method == CALIBRATION_REFUSED,
        art["experiment"].astext.is_not_distinct_from(a.get("experiment")),
        art["spec_sha256"].astext.is_not_distinct_from(a.get("spec_sha256")),
        art["hardware_class"].astext.is_(None) if klass is None else art["hardware_class"].astext == klass,
    )
    found = conn.scalars(select(c.c.id).where(cond).order_by(c.c.id)).first()
    return int(found) if found is not None else None


class _Placer:
    """Inserts rows keeping their ids where free, else drawing new ones; maps old id → new id."""

    def __init__(self, conn: Connection, t: Table, rows: Sequence[dict[str, Any]]) -> None:
        self.conn, self.t = conn, t
        self.free = _free_ids(conn, t, (r["id"] for r in rows))
        self.map: dict[int, int] = {}
        self.explicit = False
        self.all_kept = True

    def insert(self, row: dict[str, Any]) -> int:
        old = row["id"]
        values = dict(row)
        if old in self.free:
            self.free.discard(old)
            self.explicit = True
            new = int(self.conn.execute(insert(self.t).values(values).returning(self.t.c.id)).scalar_one())
        else:
            values.pop("id")
            self.all_kept = False
            new = int(self.conn.execute(insert(self.t).values(values).returning(self.t.c.id)).scalar_one())
        self.map[old] = new
        return new

    def matched(self, old: int, new: int) -> None:
        self.map[old] = new
        if old != new:
            self.all_kept = False

    def finish(self) -> None:
        if self.explicit:
            name = self.t.name
            self.conn.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                    f"GREATEST((SELECT max(id) FROM {name}), 1))"
                )
            )


def load(engine: Engine, rows: Mapping[str, list[dict[str, Any]]]) -> LoadResult:
    """Load the dump's ``rows`` into the database behind ``engine`` (at schema head) in one transaction."""
    e, h, p, r, s, o, c, x = (
        table(n)
        for n in (
            "experiments",
            "hosts",
            "points",
            "runs",
            "samples",
            "op_timings",
            "calibrations",
            "predictions",
        )
    )
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('demuxlab bundle import'))"))
        exps = _load_experiments(conn, e, rows["experiments"])
        hosts = _Placer(conn, h, rows["hosts"])
        for row in rows["hosts"]:
            found = _match(conn, h, row, ("facts_sha256",))
            hosts.insert(dict(row)) if found is None else hosts.matched(row["id"], found)
        hosts.finish()
        points = _Placer(conn, p, rows["points"])
        for row in rows["points"]:
            mapped = {**row, "experiment_id": exps.map[row["experiment_id"]]}
            found = _match(conn, p, mapped, ("experiment_id", "point_key"))
            points.insert(mapped) if found is None else points.matched(row["id"], found)
        points.finish()
        history_ids = _load_runs(conn, (r, s, o), rows, points, hosts)
        replaced = drop_unchanged_history(conn, history_ids)
        cals, preds = _load_models(conn, (c, x), rows, points, hosts)
    kept = all(pl.all_kept for pl in (exps, hosts, points, cals, preds))
    return LoadResult(
        [(row["name"], row["spec_sha256"]) for row in rows["experiments"]],
        len(rows["runs"]),
        len(rows["samples"]),
        kept,
        replaced,
    )


def _load_experiments(conn: Connection, e: Table, rows: Sequence[dict[str, Any]]) -> _Placer:
    """Experiments by (name, spec_sha256); the spec text is filled in, never overwritten; then the reruns'
    links to what they rerun."""
    exps = _Placer(conn, e, rows)
    for row in rows:
        values = {**row, "rerun_of_id": None} if "rerun_of_id" in row else dict(row)
        found = _match(conn, e, row, ("name", "spec_sha256"))
        if found is None:
            exps.insert(values)
        else:
            exps.matched(row["id"], found)
            if row.get("spec_text") is not None:
                conn.execute(
                    update(e)
                    .where(e.c.id == found, e.c.spec_text.is_(None))
                    .values(spec_text=row["spec_text"])
                )
    for row in rows:
        link = row.get("rerun_of_id")
        if link is not None and link in exps.map:
            conn.execute(
                update(e)
                .where(e.c.id == exps.map[row["id"]], e.c.rerun_of_id.is_(None))
                .values(rerun_of_id=exps.map[link])
            )
    exps.finish()
    return exps


def _load_runs(
    conn: Connection,
    tables: tuple[Table, Table, Table],
    rows: Mapping[str, list[dict[str, Any]]],
    points: _Placer,
    hosts: _Placer,
) -> list[int]:
    """Runs, replaced by run id and by (point, repeat) as ingest does (samples, op timings, costs and
    checks cascade), then their samples, op timings, costs and checks; returns the ids of the replaced runs
    kept in runs_history."""
    r, s, o = tables
    run_rows = [
        {
            **row,
            "point_id": points.map[row["point_id"]],
            "server_host_id": hosts.map.get(row["server_host_id"]) if row["server_host_id"] else None,
            "client_host_id": hosts.map.get(row["client_host_id"]) if row["client_host_id"] else None,
        }
        for row in rows["runs"]
    ]
    history_ids: list[int] = []
    if run_rows:
        ids = [row["run_id"] for row in run_rows]
        slots = [(row["point_id"], row["repeat_index"]) for row in run_rows]
        # A stored run is never lost (docs/CONTRACTS.md §5): each one the bundle replaces is kept in
        # runs_history first; those the bundle holds as they are drop out again (drop_unchanged_history).
        stored = conn.execute(
            select(r.c.run_id).where(
                or_(r.c.run_id.in_(ids), tuple_(r.c.point_id, r.c.repeat_index).in_(slots))
            )
        ).scalars()
        history_ids = keep_in_history(conn, list(stored), "bundle import")
        conn.execute(delete(r).where(r.c.run_id.in_(ids)))
        conn.execute(delete(r).where(tuple_(r.c.point_id, r.c.repeat_index).in_(slots)))
        conn.execute(insert(r), run_rows)
    sample_cols = [col.name for col in s.columns]
    _copy_rows(conn, "samples", sample_cols, ([row[k] for k in sample_cols] for row in rows["samples"]))
    # op timings: their ids are referenced by nothing; kept when all are free (a fresh database).
    timing_ids = [row["id"] for row in rows["op_timings"]]
    keep_timing_ids = len(_free_ids(conn, o, timing_ids)) == len(set(timing_ids))
    timing_cols = [col.name for col in o.columns if keep_timing_ids or col.name != "id"]
    _copy_rows(conn, "op_timings", timing_cols, ([row[k] for k in timing_cols] for row in rows["op_timings"]))
    if keep_timing_ids and timing_ids:
        conn.execute(
            text(
                "SELECT setval(pg_get_serial_sequence('op_timings', 'id'), "
                "GREATEST((SELECT max(id) FROM op_timings), 1))"
            )
        )
    for name in ("run_costs", "run_checks"):
        cols = [col.name for col in table(name).columns]
        _copy_rows(conn, name, cols, ([row[k] for k in cols] for row in rows.get(name, [])))
    return history_ids


def _load_models(
    conn: Connection,
    tables: tuple[Table, Table],
    rows: Mapping[str, list[dict[str, Any]]],
    points: _Placer,
    hosts: _Placer,
) -> tuple[_Placer, _Placer]:
    """Calibrations by (pattern, notifier, method, source runs), refusals by what identifies them (below),
    and predictions by (point, rates source, calibration, method): a stored one is updated to the bundle's
    values."""
    c, x = tables
    cals = _Placer(conn, c, rows["calibrations"])
    for row in rows["calibrations"]:
        mapped = {**row, "host_id": hosts.map.get(row["host_id"]) if row["host_id"] else None}
        if row["method"] == CALIBRATION_REFUSED:
            found = _match_refusal(conn, c, mapped)
        else:
            found = _match(conn, c, mapped, ("pattern", "notifier", "method", "source_runs"))
        if found is None:
            cals.insert(mapped)
        else:
            cals.matched(row["id"], found)
            conn.execute(
                update(c).where(c.c.id == found).values({k: v for k, v in mapped.items() if k != "id"})
            )
    cals.finish()
    preds = _Placer(conn, x, rows["predictions"])
    for row in rows["predictions"]:
        cal = row["calibration_id"]
        mapped = {
            **row,
            "point_id": points.map[row["point_id"]],
            "calibration_id": cals.map.get(cal) if cal else None,
        }
        found = _match(conn, x, mapped, ("point_id", "rates_source", "calibration_id", "method"))
        if found is None:
            preds.insert(mapped)
        else:
            preds.matched(row["id"], found)
            conn.execute(
                update(x).where(x.c.id == found).values({k: v for k, v in mapped.items() if k != "id"})
            )
    preds.finish()
    return cals, preds


def _copy_rows(conn: Connection, name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """COPY ``rows`` into table ``name`` (text format) on the transaction's connection."""
    dbapi = conn.connection.driver_connection
    if dbapi is None:
        raise BundleError("import: no DBAPI connection available for COPY")
    quoted = ", ".join(f'"{c}"' for c in columns)  # run_checks has a column named check, a reserved word
    with dbapi.cursor() as cur, cur.copy(f"COPY {name} ({quoted}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
