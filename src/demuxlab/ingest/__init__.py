"""Run records (CONTRACTS.md §5) into PostgreSQL; host facts into its ``hosts`` table.

The pure parts take and return plain values: :mod:`.schema` (the record's JSON schema, as data) and
:mod:`.record` (parse, check, shape into rows). The I/O is outside them: :mod:`.files` (read a record
file, find its spec), :mod:`.write` (one transaction per record or batch, samples by ``COPY``),
:mod:`.replace` (a record of a run already stored: a no-op, refused, or replacing it with the stored one
kept in ``runs_history``), :mod:`.workflow` (the Snakemake controller's in-process ingest) and
:mod:`.hosts` (facts files into ``hosts``).

The names below are imported when first used (PEP 562): checking a record (:func:`load_record`) does not
import SQLAlchemy and psycopg, so ``demuxlab ingest`` refuses a malformed record before it pays for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from demuxlab.ingest.files import load_record
    from demuxlab.ingest.record import Prepared, facts_sha256, parse_record, prepare_record
    from demuxlab.ingest.workflow import ingest_for_workflow
    from demuxlab.ingest.write import IngestResult, ingest_files, ingest_prepared, ingest_run_record

_WHERE = {
    "IngestResult": "write",
    "ingest_files": "write",
    "ingest_prepared": "write",
    "ingest_run_record": "write",
    "ingest_for_workflow": "workflow",
    "load_record": "files",
    "Prepared": "record",
    "facts_sha256": "record",
    "parse_record": "record",
    "prepare_record": "record",
}

__all__ = [
    "IngestResult",
    "Prepared",
    "facts_sha256",
    "ingest_files",
    "ingest_for_workflow",
    "ingest_prepared",
    "ingest_run_record",
    "load_record",
    "parse_record",
    "prepare_record",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
