"""ω: what a request costs the client more when it wakes a server thread asleep in its notifier, and the
hand-off of a released lock to a server thread asleep on it, measured on the host by ``build/bin/wake-cost``
(images/bench/wake_cost.c) from the client's first CPU to the server's.

A one-byte loopback send that wakes a thread asleep in epoll_wait on another CPU costs its sender ~8 µs
more than one that finds it polling (2-core VM; docs/ctmc-reference.md, "The client that wakes the
dispatcher"). HSHA's and the proactor's calibrated chains charge it to the client (``Rates.r_v``). A pthread
mutex released while a thread on another CPU sleeps on it stays idle until that thread runs, 20–28 µs later on
the same VM: uring-shared's chain holds its submission lock that long per hand-off (``Rates.r_h``;
"uring-shared's submission lock"). So the calibration needs both from the host of its runs: a run point on
the local launchers (``runpoint.run_leased``: native, docker) measures them before every instrumented run
whose sides share this host (``Pinning.wake_us``, ``Pinning.handoff_us`` in the run record) and
``validation.calibration`` passes them on. Runs whose client is on another host have neither: there the
client's send does not wake the server, the NIC's interrupt does (and the server host's hand-off is not
measured there yet).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from demuxlab.errors import LaunchError
from demuxlab.paths import bin_dir
from demuxlab.plan import Pinning

WAKE_COST = "wake-cost"
RUNS = 3  # wake-cost runs per measurement (each ~0.4 s: 3 × 2,000 sends); their median is kept


def wake_cost_path() -> Path:
    return bin_dir() / WAKE_COST


@dataclass(frozen=True)
class WakeCost:
    wake_us: float  # ω: the sender's CPU to wake the receiver asleep in epoll_wait (wake_ns)
    handoff_us: float  # a released mutex's hand-off to its waiter asleep on it (handoff_ns)


def measure_wake(sender: int, receiver: int, runs: int = RUNS, prog: Path | None = None) -> WakeCost:
    """The medians over ``runs`` runs of wake-cost's ``wake_ns`` and ``handoff_ns``, in µs, with the sender
    (and the lock's releaser) on CPU ``sender`` and the sleeper on CPU ``receiver``. Raises
    :class:`LaunchError` naming what failed."""
    path = prog if prog is not None else wake_cost_path()
    if not os.access(path, os.X_OK):
        raise LaunchError(f"{WAKE_COST} not found at {path}: run `make build`")
    got: list[float] = []
    handoffs: list[float] = []
    for _ in range(runs):
        try:
            res = subprocess.run(
                [str(path), "--cpus", f"{sender},{receiver}"], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise LaunchError(f"{WAKE_COST}: {exc}") from None
        if res.returncode != 0:
            raise LaunchError(f"{WAKE_COST}: {res.stderr.strip() or f'exit status {res.returncode}'}")
        try:
            doc = json.loads(res.stdout)
            got.append(float(doc["wake_ns"]) / 1000.0)
            handoffs.append(float(doc["handoff_ns"]) / 1000.0)
        except (ValueError, KeyError, TypeError):
            raise LaunchError(
                f"{WAKE_COST}: no wake_ns and handoff_ns in its output {res.stdout.strip()[:200]!r} (an old "
                "build: run `make build`)"
            ) from None
    return WakeCost(statistics.median(got), statistics.median(handoffs))


def with_wake_cost(pinning: Pinning, prog: Path | None = None) -> Pinning:
    """``pinning`` with ω and the lock's hand-off measured from the client's first CPU to the server's
    (``wake_us``, ``handoff_us``), where both sides share this host on different CPUs; otherwise as it is.
    A measurement that fails leaves them unset and says why in the notes (the calibration then charges
    neither)."""
    if not (pinning.same_host and pinning.server_cpus and pinning.client_cpus):
        return pinning
    sender, receiver = pinning.client_cpus[0], pinning.server_cpus[0]
    if sender == receiver:
        return pinning
    try:
        got = measure_wake(sender, receiver, prog=prog)
    except LaunchError as exc:
        return replace(pinning, notes=(*pinning.notes, f"the client's wake-up cost was not measured: {exc}"))
    return replace(pinning, wake_us=round(got.wake_us, 3), handoff_us=round(got.handoff_us, 3))
