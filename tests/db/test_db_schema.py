"""Migrations (up/down/up, alembic check, parallel upgrades), the read-only role, key constraints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError, ProgrammingError

from demuxlab import vocab
from demuxlab.db import migrations
from demuxlab.db.models import Base
from demuxlab.errors import DatabaseError

pytestmark = pytest.mark.postgres


def _engine(url: str) -> Iterator[Engine]:
    eng = create_engine(url)
    yield eng
    eng.dispose()


@pytest.fixture
def empty_engine(empty_database_url: str) -> Iterator[Engine]:
    yield from _engine(empty_database_url)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    yield from _engine(database_url)


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def test_up_down_up_and_check(empty_engine: Engine) -> None:
    model_tables = set(Base.metadata.tables)
    assert migrations.current_revision(empty_engine) is None
    with pytest.raises(DatabaseError, match="not up to date"):
        migrations.check(empty_engine)

    migrations.upgrade("head", empty_engine)
    assert migrations.current_revision(empty_engine) == migrations.head_revision() == "0007_adaptive"
    assert _tables(empty_engine) == model_tables | {"alembic_version"}
    migrations.check(empty_engine)

    migrations.downgrade("base", empty_engine)
    assert migrations.current_revision(empty_engine) is None
    assert _tables(empty_engine) == {"alembic_version"}

    migrations.upgrade("head", empty_engine)
    migrations.check(empty_engine)
    migrations.ensure_schema(empty_engine)  # no-op at head

    with empty_engine.begin() as conn:
        conn.execute(text("ALTER TABLE runs DROP COLUMN errors"))
    with pytest.raises(DatabaseError, match=r"add_column.*runs.*errors"):
        migrations.check(empty_engine)


def test_unknown_revision_is_a_clean_error(empty_engine: Engine) -> None:
    with pytest.raises(DatabaseError, match="upgrade 9999"):
        migrations.upgrade("9999", empty_engine)


def test_parallel_upgrades_serialise(empty_database_url: str) -> None:
    """Parallel jobs (separate processes) upgrading one database wait for each other's migration."""
    code = "from demuxlab.db import migrations; migrations.upgrade()"
    env = {**os.environ, "DEMUXLAB_DATABASE_URL": empty_database_url}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    eng = create_engine(empty_database_url)
    try:
        migrations.check(eng)
    finally:
        eng.dispose()


def test_read_only_role(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE later_table (x int)"))  # default privileges cover future tables
        conn.execute(text("INSERT INTO later_table VALUES (1)"))
    with engine.connect() as conn:
        conn.execute(text("SET ROLE demuxlab_ro"))
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 0
        assert conn.execute(text("SELECT x FROM later_table")).scalar_one() == 1
        with pytest.raises(ProgrammingError, match="permission denied"):
            conn.execute(text("INSERT INTO experiments (name, spec_sha256) VALUES ('x', 'y')"))
        conn.rollback()
        conn.execute(text("SET ROLE demuxlab_ro"))
        with pytest.raises(ProgrammingError, match="permission denied"):
            conn.execute(text("DELETE FROM hosts"))


def test_op_timings_all_row_is_unique(engine: Engine) -> None:
    """(run_id, op, events) with events NULL may appear once: NULLS NOT DISTINCT."""
    run_id = uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO experiments (name, spec_sha256) VALUES ('e', 'h')"))
        conn.execute(
            text(
                "INSERT INTO points (experiment_id, point_key, pattern, notifier, threads, work_us,"
                " connections, msg_size, client_threads)"
                " SELECT id, 'k', 'lf', 'poll', 2, 0, 1, 1, 1 FROM experiments"
            )
        )
        conn.execute(
            text(
                "INSERT INTO runs (run_id, point_id, repeat_index, attempt, status, started_at, warmup_s,"
                " measure_s, cooldown_s) SELECT :r, id, 0, 1, 'ok', now(), 0, 1, 0 FROM points"
            ),
            {"r": run_id},
        )
        ins = text("INSERT INTO op_timings (run_id, op, events, count) VALUES (:r, 'notify', :e, 1)")
        conn.execute(ins, {"r": run_id, "e": None})
        conn.execute(ins, {"r": run_id, "e": 1})
    with engine.begin() as conn, pytest.raises(IntegrityError, match="uq_op_timings_run_id_op_events"):
        conn.execute(ins, {"r": run_id, "e": None})
    with engine.begin() as conn, pytest.raises(IntegrityError, match="ck_runs_status"):
        conn.execute(
            text(
                "INSERT INTO runs (run_id, point_id, repeat_index, attempt, status, failure_reason,"
                " started_at, warmup_s, measure_s, cooldown_s)"
                " SELECT :r, id, 1, 1, 'maybe', 'x', now(), 0, 1, 0 FROM points"
            ),
            {"r": uuid.uuid4()},
        )


def test_a_new_pattern_or_notifier_needs_no_migration(engine: Engine) -> None:
    """Issue 46: the names are demuxlab.vocab's, checked by ingest (the record schema); no check constraint
    of the migrated database lists them, so a pattern or notifier added to vocab is storable as it is."""
    names = {*vocab.PATTERNS, *vocab.NOTIFIERS}
    with engine.connect() as conn:
        checks = conn.execute(
            text("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c'")
        ).all()
    assert checks, "the schema has check constraints (runs.status, ...): the query must see them"
    assert [(n, d) for n, d in checks if names & set(re.findall(r"'([^']*)'", d))] == []
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO experiments (name, spec_sha256) VALUES ('new-names', 'h')"))
        conn.execute(
            text(
                "INSERT INTO points (experiment_id, point_key, pattern, notifier, threads, work_us,"
                " connections, msg_size, client_threads)"
                " SELECT id, 'k', 'actor', 'kqueue', 2, 0, 1, 1, 1 FROM experiments WHERE name = 'new-names'"
            )
        )
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT pattern, notifier FROM points WHERE point_key = 'k'")).all()
    assert [tuple(r) for r in stored] == [("actor", "kqueue")]
