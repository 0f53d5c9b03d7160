"""Bundle create / verify / import for an experiment of msept12's size: time and size.

    .venv/bin/python -m bench bundle_bench                    # 500 runs x 300 s of samples (msept12)
    .venv/bin/python -m bench bundle_bench --runs 50 --seconds 60 --compression gz

Synthesizes the run records of msept12's real run order (spec, points, run ids; 300 per-second samples
each, the calibration runs with op timings) from tests/db/data/run_record.json, ingests them through the
real ingest into a scratch database, writes the report, then times ``bundle create`` (without images),
``verify`` and ``import`` into a second scratch database. Targets (issue 12): create <= 60 s, bundle <=
50 MB. Uses the embedded PostgreSQL of the state folder (or ``DEMUXLAB_DATABASE_URL``'s server) like
bench/perf/ingest_bench.py; the scratch databases are dropped afterwards.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import REPO
from bench.common.cli import entry, parser
from bench.common.db import scratch_databases
from demuxlab.db.engine import dispose_engines

TEMPLATE = REPO / "tests" / "db" / "data" / "run_record.json"
SPEC = REPO / "experiments" / "msept12.yaml"


def records(runs: int, seconds: int) -> list[dict[str, Any]]:
    from demuxlab.designs import valid_pairs
    from demuxlab.spec import load_spec, run_id, run_order

    spec = load_spec(SPEC, pairs=valid_pairs())
    base = json.loads(TEMPLATE.read_text())
    rng = random.Random(12)
    order = run_order(spec)
    out = []
    for i in range(runs):
        point, repeat = order[i % len(order)]
        rec: dict[str, Any] = json.loads(json.dumps(base))
        rec["run_id"] = run_id(spec, point, repeat) if i < len(order) else str(uuid.UUID(int=i))
        rec["repeat"] = repeat if i < len(order) else repeat + 1000 * (i // len(order))
        rec["experiment"].update(
            name=spec.name, spec_sha256=spec.sha256, spec_text=spec.text, spec_path="experiments/msept12.yaml"
        )
        rec["point"] = {"point_key": point.point_key, **point.to_json()}
        rec["phases"] = {"warmup_s": 10, "measure_s": seconds, "cooldown_s": 0}
        rec["client"]["per_second"] = [round(rng.gauss(81000.0, 500.0), 1) for _ in range(seconds)]
        rec["stats"]["throughput_msgs_per_s"] = sum(rec["client"]["per_second"]) / seconds
        if not point.instrument:
            rec["server"]["ops"] = {}
            rec["server"].pop("notify_by_events", None)
        out.append(rec)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--seconds", type=int, default=300, help="per-second samples per run")
    ap.add_argument("--compression", choices=["zst", "gz"], default="zst")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.seconds < 1:
        ap.error("--runs and --seconds must be >= 1")

    from demuxlab.bundle.create import Options, create
    from demuxlab.bundle.ops import import_bundle, verify
    from demuxlab.ingest import ingest_files
    from demuxlab.report import write_report
    from demuxlab.spec import load_spec

    with scratch_databases("bench_bundle", count=2) as (source_url, target_url):
        try:
            with tempfile.TemporaryDirectory(prefix="dlx-bundle-bench-") as tmp:
                work = Path(tmp) / "work"
                runs_dir = work / "results" / "msept12" / "runs"
                runs_dir.mkdir(parents=True)
                files = []
                for rec in records(args.runs, args.seconds):
                    path = runs_dir / f"{rec['run_id']}.json"
                    path.write_text(json.dumps(rec, indent=1))
                    files.append(path)
                os.environ["DEMUXLAB_DATABASE_URL"] = source_url
                t0 = time.perf_counter()
                from demuxlab.db.engine import get_engine

                ingest_files(files, engine=get_engine(source_url))
                t_ingest = time.perf_counter() - t0
                write_report(load_spec(SPEC), work / "results" / "msept12" / "report")
                out = Path(tmp) / f"msept12.bundle.tar.{args.compression}"
                t0 = time.perf_counter()
                create(Options(["msept12"], out, work, REPO / "experiments", url=source_url))
                t_create = time.perf_counter() - t0
                size = out.stat().st_size
                t0 = time.perf_counter()
                problems, n_files = verify(out)
                t_verify = time.perf_counter() - t0
                if problems:
                    print(f"bundle_bench: verify failed: {problems[0]}", file=sys.stderr)
                    return 1
                t0 = time.perf_counter()
                res = import_bundle(out, target_url)
                t_import = time.perf_counter() - t0
            samples = args.runs * args.seconds
            print(
                f"experiment: {args.runs} runs x {args.seconds} s = {samples:,} samples "
                f"(ingested in {t_ingest:.1f} s)"
            )
            print(
                f"create: {t_create:.1f} s (target <= 60 s), {n_files} files, "
                f"{size / 1e6:.1f} MB (target <= 50 MB)"
            )
            print(f"verify: {t_verify:.1f} s")
            print(
                f"import: {t_import:.1f} s ({res.runs} runs, {res.samples:,} samples into a fresh database)"
            )
            return 0
        finally:
            os.environ.pop("DEMUXLAB_DATABASE_URL", None)
            dispose_engines()


if __name__ == "__main__":
    entry(main)
