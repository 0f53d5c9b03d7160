"""uring-shared's submission lock against runs that predate its timing: docs/ctmc-reference.md,
"uring-shared's submission lock".

    .venv/bin/python -m bench uring_shared_lock bench/data/ctmc/validation-2026-11-28-16core.json.gz \
        --handoff-us 4,5,6,7

The handler of uring-shared holds the shared ring's submission lock across its submit, in which the kernel
runs the send; a thread that finds the lock held sleeps on it, and the release hands it to a sleeper, who
runs after its wake-up (uring_shared.py: r_h). Servers since 2026-11-29 time the hold (``send``, ``rearm``)
and the validation bench measures the hand-off (``handoff_us``); a runs file from before has neither, and its
calibration
leaves the lock uncontended (the chain's growth with the threads, +400 % at 8 threads on 16 cores).

This bench calibrates uring-shared from such a file's runs at the calibration concurrency as the validation
bench does, and then predicts every measured thread count three ways (SSA): as calibrated; with the hold
taken as the handlers' **system CPU per message** (their one system call per message is that submit: a
proxy for the timing the runs lack; moved out of r_x, so the CPU per message is unchanged) and an
instant hand-off; and with that hold and each hand-off given (not measured on that host). It prints measured
against each, and per hand-off the mean and largest |error|: how far the lock and its hand-off explain the
server.
``--rearm-us`` is the completion thread's hold per message (the runs lack it too; default 0.1 µs, its
``prep_recv``).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench.common.cli import BenchError, entry, parser, positive_float, print_table
from bench.fidelity.ctmc_validation import load_runs
from demuxlab.ctmc.calibrate import calibrate
from demuxlab.ctmc.predict import predict
from demuxlab.ctmc.rates import Host, Rates, calibration_threads

PATTERN = "uring-shared"


def handler_sys_us(runs: list[dict[str, Any]]) -> float:
    """The handlers' system CPU per message (µs) over ``runs``."""
    handlers = [t for r in runs for t in r["server"]["threads_detail"] if t["role"] == "handler"]
    sys_s = sum(float(t["cpu_s"]["sys"]) for t in handlers)
    return sys_s / sum(int(r["server"]["messages"]) for r in runs) * 1e6


def with_lock(rates: Rates, hold_us: float, rearm_us: float, handoff_us: float | None) -> Rates:
    """``rates`` with the lock's hold taken out of the handler's untimed CPU (at the calibration's speed)."""
    left = 1.0 / rates.r_x - hold_us * rates.speed
    if left <= 0:
        raise BenchError(
            f"the hold ({hold_us:.3g} µs) exceeds the handler's untimed CPU ({1 / rates.r_x:.3g} µs)"
        )
    source = {**rates.source, "r_o": "handlers' sys cpu/message (proxy)", "r_a": "--rearm-us"}
    return dataclasses.replace(
        rates,
        r_o=1.0 / hold_us,
        r_a=1.0 / rearm_us,
        r_x=1.0 / left,
        r_h=1.0 / handoff_us if handoff_us else rates.r_h,
        source=source,
        workloads={},
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("runs", help="a --runs-out file of ctmc_validation with uring-shared's runs")
    ap.add_argument("--handoff-us", default="4,5,6,7", help="hand-offs to try, µs (comma list)")
    ap.add_argument(
        "--rearm-us", type=float, default=0.1, help="the completion thread's hold per message, µs"
    )
    ap.add_argument("--rel-ci", type=positive_float, default=0.02, help="SSA target relative CI")
    a = ap.parse_args(argv)
    try:
        omegas = [float(w) for w in a.handoff_us.split(",")]
    except ValueError:
        ap.error(f"--handoff-us: a comma list of µs, got {a.handoff_us!r}")
    if any(w <= 0 for w in omegas) or a.rearm_us <= 0:
        ap.error("--handoff-us and --rearm-us: µs > 0")
    doc = load_runs(a.runs)
    runs = [r for r in doc["runs"] if r["point"]["pattern"] == PATTERN]
    if not runs:
        raise BenchError(f"{a.runs}: no {PATTERN} runs")
    if any("send" in (r["server"].get("ops") or {}) for r in runs):
        print("# these runs time the lock's hold: ctmc_validation --replay calibrates it (no proxy)")
    lo = calibration_threads(PATTERN)
    measured: dict[tuple[int, float, int], list[float]] = defaultdict(list)
    calib: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        p = r["point"]
        if p["instrument"] and p["threads"] == lo:
            calib[p["connections"]].append(r)
        elif not p["instrument"] and p["threads"] >= lo:
            measured[(p["threads"], float(p["work_us"]), p["connections"])].append(
                r["client"]["throughput_msgs_per_s"]
            )
    # the server's CPUs: as many as its widest run was pinned to (the planner's half of the host)
    server_cores = max(len({t.get("cpu") for t in r["server"]["threads_detail"]}) for r in runs)
    host_doc = doc.get("host") or {}
    print(
        f"# {a.runs}: {len(runs)} {PATTERN} runs; host {host_doc.get('cpu_model', '?')}, hand-off measured: "
        f"{doc.get('handoff_us')}"
    )
    errors: dict[str, list[float]] = defaultdict(list)
    rows = []
    for (threads, work, conns), values in sorted(measured.items()):
        cal = calib.get(conns)
        if not cal:
            continue
        client_cpus = max(1, int(cal[0]["point"].get("client_threads") or 1))
        rates = calibrate([r["server"] for r in cal], PATTERN, clients=[r["client"] for r in cal],
                          client_cores=[client_cpus] * len(cal))  # fmt: skip
        works = {float(r["point"]["work_us"]) for r in cal}
        hold = handler_sys_us(
            [r for r in cal if float(r["point"]["work_us"]) == work] if work in works else cal
        )
        host = Host(server_cores, client_threads=client_cpus, client_cores=client_cpus)
        m = statistics.mean(values)
        row: list[object] = [threads, f"{work:g}", conns, f"{m:,.0f}", f"{hold:.2f}"]
        for label, r in [("calibrated", rates), ("hold", with_lock(rates, hold, a.rearm_us, None))] + [
            (f"hand-off {w:g}", with_lock(rates, hold, a.rearm_us, w)) for w in omegas
        ]:
            got = predict(PATTERN, threads, work, connections=conns, rates=r, host=host, rel_ci=a.rel_ci)
            err = got.throughput_msgs_per_s / m - 1
            errors[label].append(abs(err))
            row.append(f"{got.throughput_msgs_per_s:,.0f} ({err:+.1%})")
        rows.append(row)
    if not rows:
        raise BenchError(f"{a.runs}: no measured point has a calibration run at {lo} threads")
    heads = ["threads", "work µs", "conns", "measured", "hold µs", "calibrated", "hold, hand-off 0"]
    print_table(heads + [f"hold, hand-off {w:g} µs" for w in omegas], rows)
    print()
    print_table(
        ["chain", "points", "mean |error|", "max |error|"],
        [[k, len(v), f"{statistics.mean(v):.1%}", f"{max(v):.1%}"] for k, v in errors.items()],
    )


if __name__ == "__main__":
    entry(main)
