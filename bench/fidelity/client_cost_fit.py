"""What the load client's CPU per message follows, from the runs of ctmc_validation (its --runs-out):
docs/ctmc-reference.md, "What the client's CPU per message follows".

    .venv/bin/python -m bench client_cost_fit RUNS.json.gz [RUNS.json.gz ...] [--near 250] [--json OUT]

Takes every instrumented run at 0 µs work with a client result (a run whose cross-CPU round trip exceeded
--near ns is left out where the file has round trips: the host's slow spell, docs/ctmc-reference.md) and, per
message size, fits the client's CPU per message (µs) by least squares against, per message:

- ``client waits``: the client's epoll waits (``notify_calls``, CONTRACTS §2);
- ``server sleeps``: the server's threads' blocking waits (``ops.idle.count``: a notifier call that found
  nothing and blocked, a worker waiting for work);
- both.

It prints each fit's intercept and slopes (µs per message, µs per wait or sleep), R² and the residual's
standard deviation, and the client's and the server's CPU seconds per second of their run (their busy
share on one CPU each): where both are near 1, the pair is saturated on both sides and the client's CPU per
message is 1 / throughput, whatever the client does per message.

``--chain`` also asks the calibrated chains of the dispatching patterns (HSHA, the proactor) whether they see
those sleeps: per workload (pattern, notifier, connections, size) it calibrates from the runs at the
calibration concurrency (as the validation bench does) and, at every thread count the file has instrumented
runs of (``--probe``), prints the chain's throughput and how often per message the client's request finds the
dispatcher asleep in its notifier (m1 with nothing ready: the chain's ``client_wake`` step; the calibration
charges it nothing here, so the chain is the one without the client's wake-ups), against the measured
throughput and the server's notifier sleeps per message (``events_per_call.calls`` − ``ops.notify.count``).
``--only`` keeps the workloads whose label (``pattern/notifier c<connections> b<bytes>``) contains it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.common.cli import BenchError, entry, parser, positive_float, print_table
from bench.common.pairs import Result
from bench.fidelity.ctmc_validation import load_runs
from demuxlab.ctmc.calibrate import WAKE, WAKE_REL_CI, calibrate
from demuxlab.ctmc.rates import Host, build, calibration_threads
from demuxlab.ctmc.ssa import per_message, simulate
from demuxlab.errors import DemuxlabError

DISPATCHING = ("hsha", "proactor")  # the chains with a dispatcher asleep in its notifier: m1 while c1 = 0

FITS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("client waits", ("client_waits",)),
    ("server sleeps", ("server_sleeps",)),
    ("both", ("client_waits", "server_sleeps")),
)


def _cpu(doc: dict[str, Any]) -> float:
    times = doc["cpu_s"]
    return float(times["user"]) + float(times["sys"])


def observation(run: dict[str, Any], near: float) -> dict[str, float] | None:
    """One run's figures per message, or None for a run the fit leaves out (not instrumented, with work, no
    client result or counts, or its CPUs far apart)."""
    point, server, client = run.get("point") or {}, run.get("server"), run.get("client")
    if not point.get("instrument") or point.get("work_us") != 0 or not server or not client:
        return None
    trips = run.get("round_trip_ns")
    if trips and max(trips) > near:
        return None
    msgs, smsgs = client.get("messages"), server.get("messages")
    idle = ((server.get("ops") or {}).get("idle") or {}).get("count")
    if not msgs or not smsgs or client.get("notify_calls") is None or idle is None:
        return None
    return {
        "size": float(point["msg_size"]),
        "cpu_us": Result(server, client).client_cpu_per_msg_us,
        "client_waits": client["notify_calls"] / msgs,
        "server_sleeps": idle / smsgs,
        "client_busy": _cpu(client) / float(client["duration_s"]),
        "server_busy": _cpu(server) / float(server["elapsed_s"]),
    }


def fit(obs: Sequence[dict[str, float]], columns: Sequence[str]) -> dict[str, Any]:
    """Least squares cpu_us = b0 + Σ b_i · column_i: the coefficients, R² and the residual's sd."""
    y = np.array([o["cpu_us"] for o in obs])
    x = np.column_stack([np.ones(len(obs)), *([o[c] for o in obs] for c in columns)])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    spread = float(((y - y.mean()) ** 2).sum())
    return {
        "intercept_us": float(coef[0]),
        "slopes_us": {c: float(b) for c, b in zip(columns, coef[1:], strict=True)},
        "r2": 1.0 - float((resid**2).sum()) / spread if spread > 0 else 1.0,
        "resid_sd_us": float(resid.std()),
    }


def observations(path: str, near: float) -> list[dict[str, float]]:
    """Every run of the --runs-out file ``path`` the fit takes; a run that lacks a figure the fit reads is a
    one-line error naming the file and the run."""
    out = []
    for i, run in enumerate(load_runs(path, "runs file")["runs"]):
        try:
            o = observation(run, near)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            what = "not a run of bench/fidelity/ctmc_validation.py"
            raise BenchError(f"{path}: run #{i}: {what} ({exc!r})") from None
        if o is not None:
            out.append(o)
    return out


def chain_rows(runs: Sequence[dict[str, Any]], only: str | None) -> list[list[object]]:
    """--chain's rows: per dispatching workload and thread count, the chain's and the server's throughput
    and sleeps (see the module's doc)."""
    groups: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for r in runs:
        p = r.get("point") or {}
        if p.get("pattern") in DISPATCHING and p.get("instrument") and r.get("server") and r.get("client"):
            key = (p["pattern"], p["notifier"], p["connections"], p["msg_size"])
            groups.setdefault(key, []).append(r)
    rows: list[list[object]] = []
    for (pattern, notifier, conns, size), group in sorted(groups.items()):
        label = f"{pattern}/{notifier} c{conns} b{size}"
        if only and only not in label:
            continue
        cal = [r for r in group if r["point"]["threads"] == calibration_threads(pattern)]
        if not cal:
            continue
        try:
            rates = calibrate(
                [r["server"] for r in cal],
                pattern,
                clients=[r["client"] for r in cal],
                client_cores=[1] * len(cal),
            )
        except DemuxlabError as exc:
            print(f"# {label}: no chain: {exc.message}")
            continue
        for threads in sorted({r["point"]["threads"] for r in group}):
            at = [r for r in group if r["point"]["threads"] == threads and r["point"]["work_us"] == 0]
            if not at:
                continue
            cores = len({t.get("cpu") for t in at[0]["server"].get("threads_detail", [])}) or 1
            host = Host(cores=cores, client_threads=int(at[0]["client"]["threads"]), client_cores=1)
            model = build(pattern, threads, 0.0, conns, rates, host=host)
            msgs = simulate(model, rel_ci=0.02).throughput_per_us
            wakes = per_message(model, (WAKE,), msgs, rel_ci=WAKE_REL_CI).get(WAKE, 0.0)  # per message
            sleeps = [
                (r["server"]["events_per_call"]["calls"] - r["server"]["ops"]["notify"]["count"])
                / r["server"]["messages"]
                for r in at
            ]
            measured = statistics.mean(r["client"]["throughput_msgs_per_s"] for r in at)
            rows.append([label, threads, msgs * 1e6, measured, wakes, statistics.mean(sleeps), len(at)])
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("runs", nargs="+", help="--runs-out files of ctmc_validation")
    ap.add_argument(
        "--near", type=positive_float, default=250.0, help="leave out runs with a round trip above (ns)"
    )
    ap.add_argument("--json", dest="json_out", help="write the fits here as JSON")
    ap.add_argument("--chain", action="store_true", help="also the dispatching chains' sleeps (see above)")
    ap.add_argument("--only", help="with --chain: the workloads whose label contains this")
    a = ap.parse_args(argv)
    if a.only is not None and not a.chain:
        ap.error("--only: chooses the workloads of --chain, which is not given")
    obs = [o for path in a.runs for o in observations(path, a.near)]
    if not obs:
        raise BenchError(
            f"{', '.join(a.runs)}: no instrumented run at 0 µs work with client and server counts"
        )
    rows: list[list[object]] = []
    out: list[dict[str, Any]] = []
    for size in sorted({o["size"] for o in obs}):
        group = [o for o in obs if o["size"] == size]
        if len(group) < 3:
            continue
        for name, columns in FITS:
            f = fit(group, columns)
            slopes = ", ".join(f"{f['slopes_us'][c]:.2f}" for c in columns)
            rows.append([int(size), len(group), name, f["intercept_us"], slopes, f["r2"], f["resid_sd_us"]])
            out.append({"msg_size": int(size), "runs": len(group), "against": list(columns), **f})
    print_table(["bytes", "runs", "against", "µs/msg", "µs per wait/sleep", "R²", "resid sd µs"], rows)
    busy = {side: statistics.median(o[f"{side}_busy"] for o in obs) for side in ("client", "server")}
    print(
        f"{len(obs)} runs; CPU seconds per second, median: client {busy['client']:.2f}, "
        f"server {busy['server']:.2f}"
    )
    chain: list[list[object]] = []
    if a.chain:
        for path in a.runs:
            try:
                chain += chain_rows(load_runs(path, "runs file")["runs"], a.only)
            except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
                raise BenchError(f"{path}: not runs of bench/fidelity/ctmc_validation.py ({exc!r})") from None
        print()
        print_table(
            ["workload", "threads", "chain msg/s", "measured msg/s", "chain: demux woken by client /msg",
             "server: notifier sleeps /msg", "runs"],
            chain,
        )  # fmt: skip
    if a.json_out:
        with open(a.json_out, "w") as fh:
            doc = {"runs": len(obs), "fits": out, "busy_median": busy}
            if a.chain:
                keys = ("workload", "threads", "chain", "measured", "chain_wakes", "server_sleeps", "runs")
                doc["chain"] = [dict(zip(keys, row, strict=True)) for row in chain]
            json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    entry(main)
