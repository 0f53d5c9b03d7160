"""Scratch databases for the benchmarks: the one place a bench creates, migrates and drops its databases.

The server is ``$DEMUXLAB_DATABASE_URL``'s when set, else the embedded PostgreSQL (started here if it was
not running, and stopped again at the end).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator


@contextlib.contextmanager
def scratch_databases(prefix: str, count: int = 1, keep: bool = False) -> Iterator[list[str]]:
    """``count`` new databases named ``<prefix>_<random>`` at schema head, as SQLAlchemy URLs (passwords
    rendered); dropped at the end unless ``keep``."""
    import psycopg
    from psycopg import sql
    from sqlalchemy import create_engine, make_url

    from demuxlab.db import migrations
    from demuxlab.db.embedded import Cluster
    from demuxlab.db.engine import external_url

    cluster: Cluster | None = None
    started_here = False
    admin = external_url()
    if admin is None:
        cluster = Cluster.default()
        started_here = cluster.ensure_running().started
        admin = cluster.admin_url("postgres")
    conninfo = make_url(admin).set(drivername="postgresql").render_as_string(hide_password=False)
    names = [f"{prefix}_{uuid.uuid4().hex[:10]}" for _ in range(count)]
    created: list[str] = []
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for name in names:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                created.append(name)
        urls = [make_url(admin).set(database=n).render_as_string(hide_password=False) for n in names]
        for url in urls:
            engine = create_engine(url)
            try:
                migrations.upgrade("head", engine)
            finally:
                engine.dispose()  # no connection crosses a fork
        yield urls
    finally:
        if not keep and created:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                for name in created:
                    stmt = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                    conn.execute(stmt)
        if cluster is not None and started_here and not keep:
            cluster.stop()
