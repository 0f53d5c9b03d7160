"""The models by hand, outside the workflow: predictions for parameters a user types in (``demuxlab model
predict``), and calibrations fitted from run-record files (``demuxlab model calibrate``).

Each function checks and reads everything first (a bad value or file is one clear error before any
output), then yields its results one at a time, so the command prints each as soon as it is computed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from demuxlab.ctmc.predict import Prediction
from demuxlab.ctmc.rates import DESIGNS, Rates
from demuxlab.errors import DemuxlabError
from demuxlab.vocab import METHOD_SSA, RUN_RECORD_FORMAT


def thread_range(pattern: str, notifier: str | None) -> tuple[int, int | None]:
    """The threads ``pattern`` (with ``notifier``, else any of its notifiers) runs: ``demux-server --list``'s
    range, the one source of it (:mod:`demuxlab.designs`), cut to what its chains describe (HSHA's needs a
    monitor and a worker); the chains' own where the binary is not built."""
    from demuxlab.designs import valid_pairs
    from demuxlab.errors import LaunchError

    d = DESIGNS[pattern]
    try:
        pairs = [p for p in valid_pairs() if p.pattern == pattern and notifier in (None, p.notifier)]
    except LaunchError:
        pairs = []
    if not pairs:
        return d.min_threads, d.max_threads
    least = max(d.min_threads, min(p.min_threads for p in pairs))
    most = max(p.max_threads for p in pairs)
    return least, most if d.max_threads is None else min(most, d.max_threads)


def predict_grid(
    pattern: str,
    threads: Sequence[int],
    works: Sequence[float],
    *,
    method: str = METHOD_SSA,
    connections: int = 512,
    rel_ci: float = 0.01,
    seed: int = 0,
    calibration_id: int | None = None,
    url: str | None = None,
    cores: int | None = None,
    notifier: str | None = None,
) -> Iterator[Prediction]:
    """A prediction per work value × thread count (in that order), from the paper's rates or from the
    stored calibration ``calibration_id`` (which must be of ``pattern``), on ``cores`` server cores (None:
    one per thread)."""
    from demuxlab.ctmc.predict import predict
    from demuxlab.ctmc.rates import Host

    least, most = thread_range(pattern, notifier)
    if min(threads) < least:
        raise DemuxlabError(f"--threads: {pattern} needs at least {least} threads, got {min(threads)}")
    if most is not None and max(threads) > most:
        raise DemuxlabError(f"--threads: {pattern} runs at most {most} thread(s), got {max(threads)}")
    rates: Rates | None = None
    if calibration_id is not None:
        from demuxlab.validation.store import load_calibration

        cal_pattern, _, rates = load_calibration(calibration_id, url)
        if cal_pattern != pattern:
            raise DemuxlabError(f"--calibration {calibration_id}: calibrates {cal_pattern}, not {pattern}")
    host = Host(cores=cores)
    return (
        predict(
            pattern,
            n,
            w,
            method=method,
            connections=connections,
            rates=rates,
            rel_ci=rel_ci,
            seed=seed,
            host=host,
            notifier=notifier,
        )
        for w in works
        for n in threads
    )


def read_run_record(path: Path) -> dict[str, Any]:
    """A run record with the server's exit JSON (an instrumented run's, to calibrate from)."""
    from demuxlab.jsonio import read_json

    data = read_json(path, "run record")
    if not isinstance(data, dict) or data.get("format") != RUN_RECORD_FORMAT:
        raise DemuxlabError(f"{path}: format: not a {RUN_RECORD_FORMAT} run record")
    if not isinstance(data.get("server"), dict):
        raise DemuxlabError(f"{path}: server: no server exit JSON in this record")
    return data


def _measured(rec: dict[str, Any]) -> float | None:
    client = rec.get("client")
    value = client.get("throughput_msgs_per_s") if isinstance(client, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _client_cores(rec: dict[str, Any]) -> int | None:
    pinning = rec.get("pinning")
    cpus = pinning.get("client_cpus") if isinstance(pinning, dict) else None
    return len(set(cpus)) if isinstance(cpus, list) and cpus else None


def _connections(rec: dict[str, Any]) -> int | None:
    point = rec.get("point")
    value = point.get("connections") if isinstance(point, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def calibrate_records(
    records: Sequence[Path], *, store: bool = False, url: str | None = None
) -> Iterator[dict[str, Any]]:
    """Per (pattern, notifier) of the records' servers, in order: the rates fitted from its records, their
    sources, the run ids and the self-checks; with ``store``, the id of the stored calibration too."""
    groups: dict[tuple[str, str], list[tuple[Path, dict[str, Any]]]] = {}
    for path in records:
        rec = read_run_record(path)
        server = rec["server"]
        key = (str(server.get("pattern")), str(server.get("notifier")))
        groups.setdefault(key, []).append((path, rec))
    return (
        _calibrate_group(pattern, notifier, items, store, url)
        for (pattern, notifier), items in sorted(groups.items())
    )


def _calibrate_group(
    pattern: str, notifier: str, items: list[tuple[Path, dict[str, Any]]], store: bool, url: str | None
) -> dict[str, Any]:
    from demuxlab.ctmc.calibrate import SelfCheck, calibrate

    labels = [f"{p} (run {r.get('run_id')})" for p, r in items]
    checks: list[SelfCheck] = []
    rates = calibrate(
        [r["server"] for _, r in items],
        pattern,
        labels,
        measured=[_measured(r) for _, r in items],
        connections=[_connections(r) for _, r in items],
        checks=checks,
        clients=[r.get("client") if isinstance(r.get("client"), dict) else None for _, r in items],
        client_cores=[_client_cores(r) for _, r in items],
    )
    out: dict[str, Any] = {
        "pattern": pattern,
        "notifier": notifier,
        "rates": rates.as_dict(),
        "source": rates.source,
        "source_runs": [str(r.get("run_id")) for _, r in items],
        "self_check": [c.as_dict() for c in checks],
    }
    if store:
        from demuxlab.validation.store import save_calibration

        out["calibration_id"] = save_calibration(
            rates,
            pattern,
            notifier,
            out["source_runs"],
            artifacts={"records": [str(p) for p, _ in items]},
            url=url,
        )
    return out
