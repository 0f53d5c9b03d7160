"""Which database, and how to reach it.

``DEMUXLAB_DATABASE_URL`` (a SQLAlchemy URL, ``postgresql+psycopg://…``) names an external server that is
used as is; without it, the embedded cluster under the state folder is started on demand.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from sqlalchemy import Engine, create_engine, make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session

from demuxlab.db.embedded import Cluster
from demuxlab.errors import ConfigError, DatabaseError

ENV_URL = "DEMUXLAB_DATABASE_URL"
_CONNECT_TIMEOUT_S = 10
_ENGINES: dict[str, Engine] = {}


def external_url() -> str | None:
    """``DEMUXLAB_DATABASE_URL`` normalised, or None when demuxlab manages its own cluster."""
    raw = os.environ.get(ENV_URL, "").strip()
    if not raw:
        return None
    return parse_url(raw, origin=ENV_URL).render_as_string(hide_password=False)


def parse_url(raw: str, *, origin: str = "database URL") -> URL:
    """Parse a SQLAlchemy URL and pin the psycopg 3 driver (plain ``postgresql://`` means psycopg2)."""
    try:
        url = make_url(raw)
    except ArgumentError:
        raise ConfigError(f"{origin}: not a SQLAlchemy URL: {raw!r}") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.drivername != "postgresql+psycopg":
        raise ConfigError(
            f"{origin}: driver {url.drivername!r} is not supported, use postgresql+psycopg://… "
            f"(in {mask_url(raw)})"
        )
    return url


def mask_url(url: str | URL) -> str:
    """The URL with its password replaced by ``***`` (for messages)."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except ArgumentError:
        return "<unparsable URL>"
    if parsed.password is None and isinstance(url, str):
        return url  # keep it as written (SQLAlchemy would percent-encode the socket path)
    return parsed.render_as_string(hide_password=True)


def database_url() -> str:
    """The URL in use: ``DEMUXLAB_DATABASE_URL`` or the embedded cluster's (which this does not start)."""
    return external_url() or Cluster.default().url()


def connect_error(url: str | URL, exc: BaseException) -> DatabaseError:
    """A one-line :class:`DatabaseError` for a failed connection, naming the (masked) URL."""
    orig = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    reason = lines[0] if lines else type(orig).__name__
    return DatabaseError(f"cannot connect to database {mask_url(url)}: {reason}")


def get_engine(url: str | None = None) -> Engine:
    """A cached engine for ``url`` (default: :func:`database_url`, starting the embedded cluster if used).

    The first call per URL opens one connection so that an unreachable server fails here, in one line.
    """
    if url is None:
        url = external_url()
        if url is None:
            cluster = Cluster.default()
            url = cluster.url()
            if url not in _ENGINES:
                cluster.ensure_running()
    cached = _ENGINES.get(url)
    if cached is not None:
        return cached
    parsed = parse_url(url)
    engine = create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": _CONNECT_TIMEOUT_S})
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:
        engine.dispose()
        raise connect_error(parsed, exc) from None
    _ENGINES[url] = engine
    return engine


def dispose_engines() -> None:
    """Close every cached engine's connections (before dropping a database, or after a fork)."""
    while _ENGINES:
        _, engine = _ENGINES.popitem()
        engine.dispose()


@contextlib.contextmanager
def session(url: str | None = None) -> Iterator[Session]:
    """A session in one transaction: committed on success, rolled back on any exception."""
    engine = get_engine(url)
    with Session(engine) as sess, sess.begin():
        yield sess


DASHBOARD_ENV_URL = "DEMUXLAB_DASHBOARD_DATABASE_URL"
READONLY_ROLE = "demuxlab_ro"


def readonly_url() -> str:
    """The URL the dashboard reads through: ``DEMUXLAB_DASHBOARD_DATABASE_URL`` as given, else the URL in
    use (:func:`database_url`) with its user swapped for the read-only role ``demuxlab_ro`` (created by
    migration ``0001``) and no password: the same socket or host, port and database.

    This starts nothing. For an external server whose ``demuxlab_ro`` needs a password, give the whole
    URL in ``DEMUXLAB_DASHBOARD_DATABASE_URL``.
    """
    raw = os.environ.get(DASHBOARD_ENV_URL, "").strip()
    if raw:
        return parse_url(raw, origin=DASHBOARD_ENV_URL).render_as_string(hide_password=False)
    url = parse_url(database_url())._replace(
        username=READONLY_ROLE, password=None
    )  # .set() keeps None fields
    return url.render_as_string(hide_password=False)
