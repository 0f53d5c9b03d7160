"""Run records for the dashboard tests: a real spec, its planned runs as records in the format the
workflow writes (built from ``tests/db/data/run_record.json``), ingested by the real ingest."""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).parent.parent / "db" / "data" / "run_record.json"

SPEC = """\
# dashboard test experiment
name: dashdemo
description: "HSHA and LF over two notifiers, for the dashboard tests."
reproduces: none
launcher: native
seed: 11
repeats: 3
phases: {warmup_s: 2, measure_s: 10, cooldown_s: 1}
calibration: {repeats: 1}
client: {threads: 1, rate: null}
designs:
  - {pattern: hsha, notifiers: [epoll-lt, select], threads: [2, 4, 8]}
  - {pattern: lf, notifiers: [epoll-lt, select]}
matrix:
  threads: [1, 2, 4, 8]
  work_us: [10]
  connections: [64]
  msg_size: [1]
"""


def load(tmp: Path, text: str = SPEC) -> Any:
    from demuxlab.spec import load_spec

    path = tmp / "dashdemo.yaml"
    path.write_text(text)
    return load_spec(path)


def expected_throughput(pattern: str, notifier: str, threads: int) -> float:
    """A plausible curve: rising with threads, saturating; select slower; LF a little faster."""
    base = 60_000.0 if pattern == "hsha" else 70_000.0
    if notifier == "select":
        base *= 0.8
    return base * (1 - math.exp(-threads / 3.0)) * 2


def record(
    spec: Any, point: Any, repeat: int, *, failed: bool = False, jitter: float = 0.0
) -> dict[str, Any]:
    from demuxlab.spec import run_id

    rec: dict[str, Any] = copy.deepcopy(json.loads(TEMPLATE.read_text()))
    rec["experiment"] = {
        "name": spec.name,
        "spec_sha256": spec.sha256,
        "git_rev": "abc1234",
        "spec_path": None,
        "spec_text": spec.text,
    }
    rec["point"] = {k: v for k, v in point.to_json().items() if k != "instrument"}
    if point.instrument:
        rec["point"]["instrument"] = True
    rec["repeat"] = repeat
    rec["run_id"] = run_id(spec, point, repeat)
    rec["server"].update(
        {
            "pattern": point.pattern,
            "notifier": point.notifier,
            "threads": point.threads,
            "instrument": point.instrument,
        }
    )
    thr = expected_throughput(point.pattern, point.notifier, point.threads) * (1 + jitter)
    rec["client"]["per_second"] = [round(thr * (1 + 0.01 * math.sin(i + repeat)), 2) for i in range(10)]
    rec["client"]["throughput_msgs_per_s"] = round(thr, 2)
    rec["stats"]["throughput_msgs_per_s"] = round(thr, 2)
    rec["pinning"]["server_cpus"] = list(range(min(point.threads, 4)))
    rec["server"]["threads_detail"] = [
        {
            "index": i,
            "role": "worker" if i else ("monitor" if point.pattern == "hsha" else "leader"),
            "cpu": i % 4,
            "messages": 100,
            "cpu_s": {"user": 0.1, "sys": 0.2},
        }
        for i in range(point.threads)
    ]
    if not point.instrument:
        rec["server"]["ops"] = {}
        rec["server"].pop("notify_by_events", None)
    else:
        for op in rec["server"]["ops"].values():
            op["mean_ns"] = op["mean_ns"] * (1 + 0.1 * point.threads)
    if failed:
        rec["status"] = "failed"
        rec["failure_reason"] = "demux-client: connection reset by peer after 3.2 s"
        rec["client"] = None
        rec["stats"] = None
        rec["server"]["ops"] = {}
        rec["server"].pop("notify_by_events", None)
    return rec


def planned(spec: Any) -> list[tuple[Any, int]]:
    from demuxlab.spec import run_order

    return run_order(spec)


def jitter_for(key: str, repeat: int) -> float:
    h = hashlib.sha256(f"{key}|{repeat}".encode()).digest()
    return (h[0] / 255.0 - 0.5) * 0.06


def write_records(
    spec: Any, runs: list[tuple[Any, int]], out: Path, fail_keys: set[str] = frozenset()
) -> list[Path]:  # type: ignore[assignment]
    paths = []
    for point, repeat in runs:
        failed = f"{point.point_key}|{repeat}" in fail_keys
        rec = record(spec, point, repeat, failed=failed, jitter=jitter_for(point.point_key, repeat))
        p = out / f"{rec['run_id']}.json"
        p.write_text(json.dumps(rec))
        paths.append(p)
    return paths


def store_model(spec: Any, url: str) -> None:
    """A calibration for LF/epoll-lt and predictions (paper and calibrated) for every HSHA/LF point, through
    the CTMC store (the same writer the workflow's model stages use)."""
    from sqlalchemy import create_engine, text

    from demuxlab.ctmc.predict import Prediction
    from demuxlab.ctmc.rates import paper_rates
    from demuxlab.validation.store import save_calibration, save_predictions

    engine = create_engine(url)
    with engine.connect() as conn:
        points = conn.execute(
            text("SELECT id, pattern, notifier, threads, work_us, connections, instrument FROM points")
        ).fetchall()
        cal_runs = [
            str(r[0])
            for r in conn.execute(
                text(
                    "SELECT r.run_id FROM runs r JOIN points p ON p.id = r.point_id WHERE p.instrument "
                    "AND p.pattern = 'lf' AND p.notifier = 'epoll-lt'"
                )
            )
        ]
    engine.dispose()
    from dataclasses import replace

    rates = replace(paper_rates("lf"), r_e=1 / 0.9, r_a=1 / 0.7, source={"r_e": "notify", "r_a": "rearm"})
    cal_id = save_calibration(
        rates,
        "lf",
        "epoll-lt",
        cal_runs,
        artifacts={"experiment": spec.name, "spec_sha256": spec.sha256},
        url=url,
    )
    items = []
    for p in points:
        if p.instrument:
            continue
        measured = expected_throughput(p.pattern, p.notifier, p.threads)
        for source, factor in (("paper", 1.12), ("calibration", 0.97)):
            if source == "calibration" and (p.pattern, p.notifier) != ("lf", "epoll-lt"):
                continue
            pred = Prediction(
                p.pattern, p.threads, p.work_us, p.connections, "ssa", measured * factor, 0.01, {}
            )
            items.append((pred, p.id, cal_id if source == "calibration" else None))
    save_predictions(items, url=url)
