"""Alembic environment for demuxlab.

The connection comes from ``config.attributes["connection"]`` when demuxlab drives Alembic, else from
``DEMUXLAB_DATABASE_URL`` / the embedded cluster (plain ``alembic`` command line). Migrations run under a
transaction-scoped advisory lock so that parallel jobs upgrading the same database wait for each other
instead of both creating the tables.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from demuxlab.db.models import Base

# Arbitrary constant: the advisory lock key that serialises migrations of one database.
MIGRATION_LOCK_KEY = 0x64656D75

config = context.config
target_metadata = Base.metadata

if config.attributes.get("connection") is None and config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def run_migrations_offline() -> None:
    from demuxlab.db.engine import database_url

    context.configure(
        url=config.get_main_option("sqlalchemy.url") or database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
        return
    from demuxlab.db.engine import get_engine

    url = config.get_main_option("sqlalchemy.url")
    with get_engine(url or None).connect() as conn:
        do_run_migrations(conn)
        conn.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
