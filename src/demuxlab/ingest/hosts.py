"""Host facts of inventory hosts into the ``hosts`` table.

``demuxlab hosts store FACTS.json…`` (:mod:`demuxlab.cli.hosts`) puts facts collected on cluster hosts (the
``host_facts`` role brings them back to the controller) into the ``hosts`` table: the same rows, by the
same code (:func:`demuxlab.ingest.record.host_row`), as the ingest of a run writes for its hosts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from demuxlab.errors import ConfigError
from demuxlab.jsonio import read_json, write_json_atomic

_REQUIRED = ("hostname", "online_cpus", "cpus")


def read_facts(path: Path) -> dict[str, Any]:
    """A facts file (docs/CONTRACTS.md §3), checked; a bad one is one :class:`ConfigError` line."""
    return _check_facts(read_json(path, "facts file"), str(path))


def _check_facts(doc: Any, path: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a facts object (docs/CONTRACTS.md §3), got {type(doc).__name__}")
    for key in _REQUIRED:
        if key not in doc:
            raise ConfigError(f"{path}: {key}: missing (docs/CONTRACTS.md §3)")
    if not isinstance(doc["hostname"], str) or not doc["hostname"]:
        raise ConfigError(f"{path}: hostname: expected a non-empty string, got {doc['hostname']!r}")
    return doc


def store_facts(paths: list[Path]) -> list[tuple[Path, int, str, bool]]:
    """Upsert each facts file into ``hosts`` (one transaction); see :func:`store_docs`."""
    return store_docs([(path, read_facts(path)) for path in paths])


def store_docs(docs: list[tuple[Path, dict[str, Any]]]) -> list[tuple[Path, int, str, bool]]:
    """Upsert each (source, facts) into ``hosts`` (one transaction).

    Returns (source, host id, hostname, new); ``new`` is false when that machine state was known.
    """
    from sqlalchemy import select

    from demuxlab.db.engine import get_engine
    from demuxlab.db.models import Host
    from demuxlab.ingest.record import host_row
    from demuxlab.ingest.write import table_of, upsert

    engine = get_engine()
    out: list[tuple[Path, int, str, bool]] = []
    with engine.begin() as conn:
        for path, doc in docs:
            row = host_row(doc)
            known = conn.execute(select(Host.id).where(Host.facts_sha256 == row["facts_sha256"])).scalar()
            host_id = known if known is not None else upsert(conn, table_of(Host), ("facts_sha256",), row)
            out.append((path, host_id, doc["hostname"], known is None))
    return out


def facts_by_host(stream: IO[str], write_dir: Path | None) -> list[tuple[Path, dict[str, Any]]]:
    """The (source, facts) of one JSON object ``{inventory host: facts}`` read from ``stream``; with
    ``write_dir`` each host's facts are also written to ``write_dir/<host>.json``."""
    where = getattr(stream, "name", "<stream>")
    try:
        doc = json.load(stream)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected an object {{host: facts}}, got {type(doc).__name__}")
    docs: list[tuple[Path, dict[str, Any]]] = []
    for host, facts in doc.items():
        checked = _check_facts(facts, f"{where}: {host}")
        docs.append((Path(write_dir or ".") / f"{host}.json", checked))
        if write_dir:
            write_json_atomic(write_dir / f"{host}.json", checked)
    return docs
