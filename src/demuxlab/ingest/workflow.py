"""The workflow's ``ingest_run`` job, run in a thread of the Snakemake controller itself."""

from __future__ import annotations

import threading
from pathlib import Path

from demuxlab.errors import DemuxlabError
from demuxlab.ingest.write import IngestResult, ingest_files
from demuxlab.jsonio import write_json_atomic

_WORKFLOW_LOCK = threading.Lock()
_SCHEMA_CHECKED: set[str] = set()  # engine URLs whose schema this process has checked


def ingest_for_workflow(record: str | Path, done: str | Path, log: str | Path) -> IngestResult:
    """The workflow's ``ingest_run`` job, run in a thread of the Snakemake controller itself.

    The same write as ``demuxlab ingest RECORD --done DONE`` (one transaction, the done file written
    atomically after the commit), but for a stored run: the record is this workflow's own ``run_point``
    output, so a different record of a stored run is the run executed again (a retry, a forced or resumed
    rerun). It replaces the stored run when it started later, the stored record kept in ``runs_history``
    (policy ``"rerun"``, :mod:`demuxlab.ingest.replace`); the same record again is a no-op. No process per
    run: a process would spend a second or more importing SQLAlchemy, psycopg and jsonschema and
    connecting, for a few milliseconds of writing, and the cluster profile ingests 10,000 runs on two
    cores. The engine is made, and the schema
    checked, once per controller and database (the ``database`` rule upgraded it first). A killed
    controller loses at most an uncommitted transaction and the done file, so the rerun ingests again.
    """
    from demuxlab.db import migrations
    from demuxlab.db.engine import get_engine

    log_path = Path(log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _WORKFLOW_LOCK:
            engine = get_engine()
            url = engine.url.render_as_string(hide_password=False)
            if url not in _SCHEMA_CHECKED:
                migrations.ensure_schema(engine)
                _SCHEMA_CHECKED.add(url)
        (result,) = ingest_files([record], engine=engine, check_schema=False, replace="rerun")
    except DemuxlabError as exc:
        log_path.write_text(f"demuxlab: error: {exc.message}\n")
        raise
    write_json_atomic(Path(done), {"ingested": [str(record)]})
    log_path.write_text(result.describe() + "\n")
    return result
