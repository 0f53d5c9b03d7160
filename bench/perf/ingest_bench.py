"""Ingest throughput: per-second samples written per second of wall time, through the real ingest path.

    .venv/bin/python -m bench ingest_bench                   # 10 runs x 100,000 s = 1M samples
    .venv/bin/python -m bench ingest_bench --runs 1000 --seconds 1000
    .venv/bin/python -m bench ingest_bench --files           # also JSON encode/parse (ingest_files)

Uses the embedded PostgreSQL of the state folder (``DEMUXLAB_HOME``; started if needed and stopped again
if this script started it), in a scratch database that is dropped afterwards. With
``DEMUXLAB_DATABASE_URL`` set, the scratch database is made on that server instead.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select

from bench import REPO
from bench.common.cli import entry, parser
from bench.common.db import scratch_databases
from demuxlab.db.models import Sample
from demuxlab.ingest import ingest_files, ingest_run_record
from demuxlab.spec import run_id_of

TEMPLATE = REPO / "tests" / "db" / "data" / "run_record.json"


def make_record(base: dict[str, Any], index: int, seconds: int, rng: random.Random) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(json.dumps(base))
    record["repeat"] = index
    record["experiment"]["name"] = "ingest-bench"
    record["run_id"] = run_id_of(
        "ingest-bench", record["experiment"]["spec_sha256"], record["point"]["point_key"], index
    )
    # An ok record carries one sample per second measured and their mean as its throughput.
    record["client"]["per_second"] = [round(rng.gauss(81000.0, 500.0), 1) for _ in range(seconds)]
    record["phases"]["measure_s"] = seconds
    record["stats"].update(
        throughput_msgs_per_s=sum(record["client"]["per_second"]) / seconds, trimmed_seconds=0
    )
    return record


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=86_400, help="samples per run (a day at most)")
    ap.add_argument("--files", action="store_true", help="go through JSON files and ingest_files()")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.seconds < 1:
        ap.error("--runs and --seconds must be >= 1")

    with scratch_databases("bench") as (url,):
        engine = create_engine(url)
        try:
            return measure(engine, args.runs, args.seconds, args.files)
        finally:
            engine.dispose()


def measure(engine: Any, runs: int, seconds: int, files_mode: bool) -> int:
    """Ingest ``runs`` generated records of ``seconds`` samples each and print samples per second."""
    base = json.loads(TEMPLATE.read_text())
    rng = random.Random(1)
    records = [make_record(base, i, seconds, rng) for i in range(runs)]
    total = runs * seconds
    with tempfile.TemporaryDirectory() as tmp:
        if files_mode:
            files = []
            for i, rec in enumerate(records):
                path = Path(tmp) / f"run-{i}.json"
                path.write_text(json.dumps(rec))
                files.append(path)
            t0 = time.perf_counter()
            ingest_files(files, engine=engine)
        else:
            t0 = time.perf_counter()
            for rec in records:
                ingest_run_record(engine, rec)
        elapsed = time.perf_counter() - t0
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(Sample)).scalar_one()
    if stored != total:
        print(f"ingest_bench: stored {stored} samples, expected {total}", file=sys.stderr)
        return 1
    mode = "files" if files_mode else "records"
    print(
        f"ingested {total} samples ({runs} runs x {seconds} s, {mode}) in {elapsed:.2f} s: "
        f"{total / elapsed:,.0f} samples/s"
    )
    return 0


if __name__ == "__main__":
    entry(main)
