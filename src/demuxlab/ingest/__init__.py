"""Run records (CONTRACTS.md §5) into PostgreSQL; host facts into its ``hosts`` table.

The pure parts take and return plain values: :mod:`.schema` (the record's JSON schema, as data) and
:mod:`.record` (parse, check, shape into rows). The I/O is outside them: :mod:`.files` (read a record
file, find its spec), :mod:`.write` (one transaction per record or batch, samples by ``COPY``),
:mod:`.workflow` (the Snakemake controller's in-process ingest) and :mod:`.hosts` (facts files into
``hosts``).
"""

from demuxlab.ingest.files import load_record
from demuxlab.ingest.record import Prepared, facts_sha256, parse_record, prepare_record
from demuxlab.ingest.workflow import ingest_for_workflow
from demuxlab.ingest.write import IngestResult, ingest_files, ingest_run_record

__all__ = [
    "IngestResult",
    "Prepared",
    "facts_sha256",
    "ingest_files",
    "ingest_for_workflow",
    "ingest_run_record",
    "load_record",
    "parse_record",
    "prepare_record",
]
