"""The ``sim`` launcher: a run on a simulated pair, for the scale benchmark and the scheduler tests.

It starts no process: it waits the run's duration (warm-up + measure + cool-down) and writes a record like
a real run's (a flat throughput of one sample per measured second), so the real workflow, scheduler,
leases, quarantine and ingest are exercised at any scale without hosts. A simulated pair listed as failing
(see :mod:`demuxlab.remote.hostpairs`) fails its runs as a lost host would, after half the run's duration.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from demuxlab.launch.base import Launcher, RunRequest, _Outcome, _utc_now, total_s
from demuxlab.remote.hostpairs import ClusterPair


class SimLauncher(Launcher):
    name = "sim"

    def __init__(self, pair: ClusterPair | None = None, runs_on_pair: int = 0) -> None:
        self.pair = pair
        self.runs_on_pair = runs_on_pair

    def artifacts(self) -> dict[str, dict[str, Any]]:
        return {role: {"kind": "sim", "image": f"demuxlab/{role}:sim"} for role in ("server", "client")}

    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        raise NotImplementedError("the sim launcher starts no process")

    def steady_stats(self, per_second: list[float]) -> dict[str, Any]:
        """What :func:`demuxlab.stats.steady_state` gives the constant series a simulated run produces (no
        transient, no drift; tests/unit/test_ticket.py compares them), without importing numpy into
        every simulated run: the scale benchmark measures the controller, not the statistics."""
        if len(set(per_second)) != 1:
            return super().steady_stats(per_second)
        n = len(per_second)
        return {
            "throughput_msgs_per_s": per_second[0],
            "stationary": True if n >= 3 else None,
            "drift_rel": 0.0 if n >= 3 else None,
            "trimmed_seconds": 0,
        }

    def failing(self) -> bool:
        sim = self.pair.sim if self.pair is not None else None
        return bool(sim and sim.fail_from_run is not None and self.runs_on_pair >= sim.fail_from_run)

    def run(self, req: RunRequest) -> dict[str, Any]:
        started_at, t0 = _utc_now(), time.monotonic()
        out = _Outcome()
        duration = total_s(req.phases)
        if self.failing():
            time.sleep(duration / 2)
            out.fail(f"simulated host lost: ssh to {req.host_pair}-server dropped mid-run")
        else:
            time.sleep(duration)
            seconds = max(1, math.floor(req.phases.measure_s))
            tput = 1000.0 * req.point.threads
            out.client = {
                "ok": True,
                "mode": "closed",
                "rate": None,
                "connections": req.point.connections,
                "threads": req.point.client_threads,
                "msg_size": req.point.msg_size,
                "throughput_msgs_per_s": tput,
                "messages": int(tput * seconds),
                "duration_s": float(seconds),
                "per_second": [tput] * seconds,
                "latency_us": {"p50": 1.0, "p90": 1.0, "p99": 1.0, "p999": 1.0, "max": 1.0, "mean": 1.0},
                "cpu_s": {"user": 0.0, "sys": 0.0},
                "errors": 0,
            }
        return self._record(req, out, self.artifacts(), started_at, time.monotonic() - t0)
