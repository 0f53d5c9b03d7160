"""Run records for the dashboard tests: a real spec, its planned runs as records in the format the
workflow writes (built from ``tests/db/data/run_record.json``), ingested by the real ingest.

Each record carries the server build it ran with as the native launcher records it
(:meth:`NativeLauncher.artifacts`): :func:`server_builds` gives two real builds of this checkout, the
sanitizer build (``build/asan/bin``: other compiler flags, another binary) and the release build
(``build/bin``), so the History and Ranking pages see runs of two server builds. Run times are given by the
caller (``start``, ``wall_s``): a sweep that ran days ago, one that stopped an hour ago, one running now.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
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


# The same experiment as first written: another spec version (its text, so its hash, differs).
SPEC_V1 = SPEC.replace("# dashboard test experiment", "# dashboard test experiment, first version")


def load(tmp: Path, text: str = SPEC, name: str = "dashdemo", pairs: Any = None) -> Any:
    from demuxlab.spec import load_spec

    folder = tmp / hashlib.sha256(text.encode()).hexdigest()[:8]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return load_spec(path, pairs=pairs)


def load_smoke(tmp: Path) -> Any:
    """The quickstart's ``smoke`` spec, resolved against this checkout's server (demux-server --list)."""
    from demuxlab.designs import valid_pairs
    from demuxlab.paths import experiments_dir

    return load(tmp, (experiments_dir() / "smoke.yaml").read_text(), "smoke", pairs=valid_pairs())


@contextlib.contextmanager
def _bin(path: Path) -> Iterator[None]:
    old = os.environ.get("DEMUXLAB_BIN")
    os.environ["DEMUXLAB_BIN"] = str(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ["DEMUXLAB_BIN"]
        else:
            os.environ["DEMUXLAB_BIN"] = old


def server_builds() -> tuple[dict[str, Any], dict[str, Any]]:
    """(older, newer): the ``artifacts`` the native launcher records for the sanitizer build and for the
    release build of this checkout (``make build sanitize``): two real server builds."""
    from demuxlab.launch.native import NativeLauncher
    from demuxlab.paths import bin_dir

    out = []
    for variant in ("asan", ""):
        with _bin(bin_dir(variant)):
            out.append(NativeLauncher().artifacts())
    assert out[0]["server"]["sha256"] != out[1]["server"]["sha256"]
    return out[0], out[1]


def expected_throughput(pattern: str, notifier: str, threads: int) -> float:
    """A plausible curve: rising with threads, saturating; select slower; LF a little faster."""
    base = 60_000.0 if pattern == "hsha" else 70_000.0
    if notifier == "select":
        base *= 0.8
    return base * (1 - math.exp(-threads / 3.0)) * 2


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record(
    spec: Any,
    point: Any,
    repeat: int,
    *,
    failed: bool = False,
    jitter: float = 0.0,
    artifacts: dict[str, Any] | None = None,
    started: dt.datetime | None = None,
    wall_s: float = 13.0,
    factor: float = 1.0,
    server_cpus: int | None = None,
) -> dict[str, Any]:
    from demuxlab.spec import run_id

    rec: dict[str, Any] = copy.deepcopy(json.loads(TEMPLATE.read_text()))
    if artifacts is not None:
        rec["artifacts"] = copy.deepcopy(artifacts)
    if started is not None:
        rec["started_at"] = _iso(started)
        rec["finished_at"] = _iso(started + dt.timedelta(seconds=wall_s))
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
    thr = expected_throughput(point.pattern, point.notifier, point.threads) * (1 + jitter) * factor
    # A ripple of mean zero: the throughput is the samples' mean, as ingest requires of an ok record.
    ripple = [math.sin(i + repeat) for i in range(10)]
    ripple = [r - sum(ripple) / 10 for r in ripple]
    rec["client"]["per_second"] = [round(thr * (1 + 0.01 * r), 2) for r in ripple]
    rec["client"]["throughput_msgs_per_s"] = round(thr, 2)
    rec["stats"]["throughput_msgs_per_s"] = round(thr, 2)
    # a CPU per server thread (up to 8), or ``server_cpus`` of them: the quickstart's 2-core machine gives
    # the server one, so its 2-thread points are oversubscribed
    cpus = min(point.threads, 8) if server_cpus is None else server_cpus
    rec["pinning"]["server_cpus"] = list(range(cpus))
    rec["pinning"]["oversubscribed"] = point.threads > cpus
    rec["server"]["threads_detail"] = [
        {
            "index": i,
            "role": "worker" if i else ("monitor" if point.pattern == "hsha" else "leader"),
            "cpu": i % cpus,
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


def jitter_for(key: str, repeat: int, salt: str = "") -> float:
    h = hashlib.sha256(f"{salt}{key}|{repeat}".encode()).digest()
    return (h[0] / 255.0 - 0.5) * 0.06


def write_records(
    spec: Any,
    runs: list[tuple[Any, int]],
    out: Path,
    fail_keys: set[str] = frozenset(),  # type: ignore[assignment]
    *,
    artifacts: dict[str, Any] | None = None,
    start: dt.datetime | None = None,
    wall_s: float = 13.0,
    factor: Callable[[Any], float] | None = None,
    server_cpus: int | None = None,
) -> list[Path]:
    """The records of ``runs``, run back to back from ``start`` (one every ``wall_s`` + 1 s), with
    ``artifacts`` as the server build and ``factor(point)`` scaling a point's throughput (a change of
    build that made it faster or slower)."""
    paths = []
    out.mkdir(parents=True, exist_ok=True)
    for i, (point, repeat) in enumerate(runs):
        failed = f"{point.point_key}|{repeat}" in fail_keys
        rec = record(
            spec,
            point,
            repeat,
            failed=failed,
            jitter=jitter_for(point.point_key, repeat, spec.sha256[:8]),
            artifacts=artifacts,
            started=None if start is None else start + dt.timedelta(seconds=i * (wall_s + 1)),
            wall_s=wall_s,
            factor=factor(point) if factor else 1.0,
            server_cpus=server_cpus,
        )
        p = out / f"{rec['run_id']}.json"
        p.write_text(json.dumps(rec))
        paths.append(p)
    return paths


def store_model(spec: Any, url: str) -> None:
    """A calibration for LF/epoll-lt and predictions (paper and calibrated) for every measured point of the
    experiments named like ``spec`` (every pattern: the dashboard shows whatever the models cover), through
    the CTMC store (the same writer the workflow's model stages use)."""
    from sqlalchemy import create_engine, text

    from demuxlab.ctmc.predict import Prediction
    from demuxlab.ctmc.rates import paper_rates
    from demuxlab.validation.store import save_calibration, save_predictions

    engine = create_engine(url)
    with engine.connect() as conn:
        points = conn.execute(
            text(
                "SELECT p.id, p.pattern, p.notifier, p.threads, p.work_us, p.connections, p.instrument "
                "FROM points p JOIN experiments e ON e.id = p.experiment_id WHERE e.name = :name"
            ),
            {"name": spec.name},
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

    base = paper_rates("lf")
    rates = replace(base, r_e=1 / 0.9, r_a=1 / 0.7, source={**base.source, "r_e": "notify", "r_a": "rearm"})
    cal_id = save_calibration(
        rates,
        "lf",
        "epoll-lt",
        cal_runs,
        artifacts={"experiment": spec.name, "spec_sha256": spec.sha256},
        url=url,
    )
    # Calibrations as the full model stages make them: every rate the pattern's chains read measured (the
    # per-call notifier cost, the untimed CPU, the client, its wake-ups, kicks, the scheduler's wake-up, a
    # lock's hand-off), so the model page shows every rate at once, as a researcher's does.
    from demuxlab.ctmc.rates import rates_read

    measured_us = {
        **{"r_n": 1.4, "r_x": 2.1, "r_z": 3.3, "r_w": 21.0, "r_v": 8.3, "r_k": 0.67, "r_u": 31.6},
        "r_h": 24.0,  # uring-shared's submission lock handed to a sleeping waiter
    }
    for pattern, notifier in (
        ("hsha", "select"),
        ("proactor", "poll"),
        ("uring", "uring"),
        ("uring-shared", "uring"),
    ):
        mine = {k: 1 / v for k, v in measured_us.items() if k in rates_read(pattern)}
        paper = paper_rates(pattern)
        full = replace(paper, **mine, source={**paper.source, **{k: "fit" for k in mine}})
        artifacts = {"experiment": spec.name, "spec_sha256": spec.sha256}
        save_calibration(full, pattern, notifier, [], artifacts=artifacts, url=url)
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
