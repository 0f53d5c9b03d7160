"""The dashboard's data access: the read-only store, its errors, and the experiment names every page takes.

The queries live beside this module, one per concern (``experiments``, ``points``, ``history``, ``runs``,
``operations``, ``models``, ``hosts``, ``claims``), each returning a small ``pandas.DataFrame``; the
figure builders (:mod:`demuxlab.dashboard.figures`) never import them. The dashboard reads through the
read-only role (:func:`demuxlab.db.engine.readonly_url`) in read-only transactions. Aggregation happens
in PostgreSQL: pages get per-point or per-run rows, and per-second samples are read for one run at a
time, never for a whole experiment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from demuxlab.dashboard import address
from demuxlab.dashboard.fields import PARAMS
from demuxlab.db.engine import mask_url, parse_url, readonly_url

#: The point's parameter columns as a select list (``p.pattern, p.notifier, …``), from the point's fields.
POINT_COLUMNS = ", ".join(f"p.{f}" for f in PARAMS)
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
    # Column lists: several times faster than handing pandas a list of Row objects. Text stays Python
    # objects (dtype object): pandas' default Arrow-backed strings cost a conversion per element whenever
    # the builders iterate them, which they do (records, keys, labels).
    data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
    return pd.DataFrame(
        {c: pd.Series(v, dtype=object) if _text(v) else v for c, v in data.items()}, columns=columns
    )


def _text(values: list[Any]) -> bool:
    first = next((v for v in values if v is not None), None)
    return isinstance(first, str)


# -- experiments ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentRef:
    id: int
    name: str
    spec_sha256: str
    newest: bool = True  # the newest version of its name (then ``name`` alone names it)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.spec_sha256[:8]}"

    @property
    def value(self) -> str:
        """How the experiment dropdowns and links name it: ``name``, or ``name@sha8`` for an older version."""
        return self.name if self.newest else self.label


_MAX_ID = 2**31 - 1  # experiments.id is an integer


def resolve_experiment(conn: Connection, ref: str | None) -> ExperimentRef:
    """``name`` (its newest version), ``name@<sha256 prefix>`` or a numeric id, as everywhere in demuxlab;
    :class:`NotFound` (with a readable excerpt of ``ref``) for anything else."""
    if ref is None or not str(ref).strip():
        raise NotFound("no experiment chosen")
    why = address.problem("experiment", ref)
    if why is not None:
        raise NotFound(why)
    ref = str(ref).strip()
    name, at, sha = ref.partition("@")
    sha = sha.lower()
    params: dict[str, Any]
    if ref.isascii() and ref.isdigit():
        if int(ref) > _MAX_ID:
            raise NotFound(f"no experiment {address.excerpt(ref)} in the database")
        where, params = "e.id = :id", {"id": int(ref)}
    elif at and not (sha and all(c in "0123456789abcdef" for c in sha) and len(sha) <= 64):
        raise NotFound(
            f"{address.excerpt(ref)}: the part after @ must be the first hex digits of the spec's SHA-256"
        )
    else:
        where, params = (
            "e.name = :name AND left(e.spec_sha256, :n) = :sha",
            {
                "name": name,
                "n": len(sha),
                "sha": sha,
            },
        )
    row = conn.execute(
        text(
            f"""
            SELECT e.id, e.name, e.spec_sha256,
                   NOT EXISTS (SELECT 1 FROM experiments o WHERE o.name = e.name
                               AND (o.created_at, o.id) > (e.created_at, e.id)) AS newest
            FROM experiments e WHERE {where}
            ORDER BY e.created_at DESC, e.id DESC LIMIT 1
            """
        ),
        params,
    ).one_or_none()
    if row is None:
        raise NotFound(f"no experiment {address.excerpt(ref)} in the database")
    return ExperimentRef(int(row.id), str(row.name), str(row.spec_sha256), bool(row.newest))


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


def newest_experiments(conn: Connection, limit: int = 2) -> list[ExperimentRef]:
    """The experiments made last (newest first), as the dropdowns name them."""
    rows = conn.execute(
        text(
            """
            SELECT e.id, e.name, e.spec_sha256,
                   NOT EXISTS (SELECT 1 FROM experiments o WHERE o.name = e.name
                               AND (o.created_at, o.id) > (e.created_at, e.id)) AS newest
            FROM experiments e ORDER BY e.created_at DESC, e.id DESC LIMIT :n
            """
        ),
        {"n": limit},
    ).fetchall()
    return [ExperimentRef(int(r.id), str(r.name), str(r.spec_sha256), bool(r.newest)) for r in rows]
