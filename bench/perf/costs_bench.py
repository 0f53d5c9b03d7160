"""What knowing costs (issue 44): a run's throughput with the kernel's counters read (the record's ``costs``,
demuxlab.launch.counters) against the same run without, at W = 0 where every microsecond shows.

Runs of one point through the native launcher, the modes alternating in balanced blocks (A B C, then
C B A, ...) so that a drift of the machine falls on every mode alike: ``off`` (no collection), ``default``
(what every run collects: /proc and sysfs read at the two phase boundaries, the client's phase events,
and the system calls as the binaries count them themselves, the server asked with SIGUSR1 at each
boundary) and ``tracepoint`` (the default and, on request, the kernel's count of the system calls too: a
perf counter on the raw_syscalls:sys_enter tracepoint per thread, which puts every thread of the host on
the system-call slow path while it is open; ``RunRequest.count_syscalls``). Prints each
mode's mean and its cost against ``off``: the mean of the per-block ratios with a 95 % interval, and the
load average before and after (the machine may be busy: say so with the figure).

Each is judged twice: by throughput, and by the server's CPU time per message (its user + system seconds
over its messages, the whole run): the second is what collection adds to the server's own work, and on a
VM it does not move with CPU time stolen by other guests or processes, which is most of the throughput's
noise on a shared host (issue 44: ±10.7 % per block by throughput at load 2–8). The server is pinned to
its one CPU at W = 0, so its throughput is about one over its CPU per message there: a cost the
collection adds shows in both.

    .venv/bin/python -m bench costs_bench [--blocks 6] [--duration 3] [--warmup 1]
        [--pair reactor/epoll-et/1] [--connections 64]
"""

from __future__ import annotations

import os
import statistics
import uuid
from collections.abc import Sequence

from bench.common.cli import BenchError, entry, positive_int, print_table
from bench.common.pairs import load_parser, pair_thread_list, two_cpus
from demuxlab.launch import RunRequest
from demuxlab.launch.native import NativeLauncher
from demuxlab.phases import Phases
from demuxlab.plan import Pinning
from demuxlab.point import Point
from demuxlab.stats import point_summary

MODES = ("off", "default", "tracepoint")


def run_once(point: Point, phases: Phases, cpus: list[int], mode: str) -> tuple[float, float]:
    """One run's throughput (msg/s) and its server's CPU µs per message."""
    req = RunRequest(
        run_id=f"bench-{uuid.uuid4().hex[:12]}",
        experiment={"name": "bench", "spec_path": None, "spec_sha256": None, "git_rev": None},
        point=point,
        repeat=0,
        phases=phases,
        pinning=Pinning((cpus[0],), (cpus[1],), False, True, ()),
        hosts={},
        stall_timeout_s=10.0,
        collect_costs=mode != "off",
        count_syscalls=mode == "tracepoint",
    )
    record = NativeLauncher().run(req)
    if record["status"] != "ok":
        raise BenchError(f"{point.point_key}: {record['failure_reason']}")
    if mode != "off":
        server = record["costs"]["server"]
        key = "syscalls_kernel" if mode == "tracepoint" else "syscalls"
        if not isinstance(server.get(key), int):
            raise BenchError(f"mode {mode} counted no system calls: {server.get(key)}")
    server = record["server"]
    cpu = server["cpu_s"]
    per_message = (float(cpu["user"]) + float(cpu["sys"])) / int(server["messages"]) * 1e6
    return float(record["stats"]["throughput_msgs_per_s"]), per_message


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.add_argument("--blocks", type=positive_int, default=6, help="blocks of one run per mode")
    ap.add_argument("--pair", type=pair_thread_list, default=[("reactor", "epoll-et", 1)])
    ap.add_argument("--connections", type=positive_int, default=64)
    a = ap.parse_args(argv)
    (pattern, notifier, threads), *_ = a.pair
    point = Point(pattern, notifier, threads, 0.0, a.connections, 1, 1, None, False)
    phases = Phases(a.warmup, a.duration, 0.0)
    cpus = two_cpus()
    load0 = os.getloadavg()
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    for block in range(a.blocks):
        order = MODES if block % 2 == 0 else MODES[::-1]
        for mode in order:
            rate, per_message = run_once(point, phases, cpus, mode)
            runs[mode].append(rate)
            cpu[mode].append(per_message)
        line = "  ".join(f"{m} {runs[m][-1]:,.0f} ({cpu[m][-1]:.2f} µs)" for m in MODES)
        print(
            f"# block {block + 1}/{a.blocks}: {line} msg/s (server CPU per message), load "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    load1 = os.getloadavg()
    rows = []
    for mode in MODES:
        rows.append(
            [
                mode,
                len(runs[mode]),
                point_summary(runs[mode]).mean,
                *_cost(runs, mode, +1),
                point_summary(cpu[mode]).mean,
                *_cost(cpu, mode, -1),
            ]
        )
    print()
    where = f"server on CPU {cpus[0]}, client on CPU {cpus[1]}"
    print(f"{point.point_key}, W = 0, {where}, {a.duration:g} s measured per run")
    before, after = " ".join(f"{x:.2f}" for x in load0), " ".join(f"{x:.2f}" for x in load1)
    print(f"load average (1, 5, 15 min) before {before}, after {after}")
    print("cost: the throughput lost, and the server's CPU per message added, against off (mean of the")
    print("blocks' ratios, 95 % CI, and their median: one block the host disturbed moves the mean, not the")
    print("median): positive is what collecting costs")
    print_table(
        [
            "mode",
            "runs",
            "mean msg/s",
            "cost",
            "95 % CI",
            "median",
            "server CPU µs/msg",
            "cost",
            "95 % CI",
            "median",
        ],
        rows,
    )


def _cost(values: dict[str, list[float]], mode: str, sign: int) -> list[str]:
    """``mode``'s cost against ``off``, paired by block: the mean of sign × (1 − mode / off) (``sign`` +1 for
    a figure that falls as it costs, throughput; −1 for one that grows, CPU per message), its 95 %
    half-width and the median of the blocks' ratios."""
    if mode == "off":
        return ["", "", ""]
    ratios = [sign * (1.0 - x / off) for x, off in zip(values[mode], values["off"], strict=True)]
    cost = point_summary(ratios)
    half = "" if cost.halfwidth is None else f"±{cost.halfwidth:.2%}"
    return [f"{cost.mean:+.2%}", half, f"{statistics.median(ratios):+.2%}"]


if __name__ == "__main__":
    entry(main)
