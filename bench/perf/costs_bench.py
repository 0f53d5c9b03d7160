"""What knowing costs (issue 44): a run's throughput with the kernel's counters read (the record's ``costs``,
demuxlab.launch.counters) against the same run without, at W = 0 where every microsecond shows.

Runs of one point through the native launcher, the modes alternating in balanced blocks (A B C, then
C B A, ...) so that a drift of the machine falls on every mode alike: ``off`` (no collection), ``counters``
(every counter but the system calls: /proc and sysfs read at the two phase boundaries, the client's phase
events) and ``all`` (with the system calls: a perf counter on the raw_syscalls:sys_enter tracepoint per
thread, which puts every thread of the host on the system-call slow path while it is open). Prints each
mode's mean and its cost against ``off``: the mean of the per-block ratios with a 95 % interval, and the
load average before and after (the machine may be busy: say so with the figure).

    .venv/bin/python -m bench costs_bench [--blocks 6] [--duration 3] [--warmup 1]
        [--pair reactor/epoll-et/1] [--connections 64]
"""

from __future__ import annotations

import os
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

MODES = ("off", "counters", "all")


def run_once(point: Point, phases: Phases, cpus: list[int], mode: str) -> float:
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
        count_syscalls=mode == "all",
    )
    record = NativeLauncher().run(req)
    if record["status"] != "ok":
        raise BenchError(f"{point.point_key}: {record['failure_reason']}")
    if mode == "all" and isinstance(record["costs"]["server"].get("syscalls"), str):
        raise BenchError(f"mode all counted no system calls: {record['costs']['server']['syscalls']}")
    return float(record["stats"]["throughput_msgs_per_s"])


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
    for block in range(a.blocks):
        order = MODES if block % 2 == 0 else MODES[::-1]
        for mode in order:
            runs[mode].append(run_once(point, phases, cpus, mode))
        line = "  ".join(f"{m} {runs[m][-1]:,.0f}" for m in MODES)
        print(f"# block {block + 1}/{a.blocks}: {line} msg/s, load {os.getloadavg()[0]:.1f}", flush=True)
    load1 = os.getloadavg()
    rows = []
    for mode in MODES:
        mean = point_summary(runs[mode]).mean
        ratios = [x / off - 1.0 for x, off in zip(runs[mode], runs["off"], strict=True)]
        cost = point_summary(ratios)
        ci = "" if cost.halfwidth is None else f"±{cost.halfwidth:.2%}"
        rows.append([mode, len(runs[mode]), mean, f"{cost.mean:+.2%}" if mode != "off" else "", ci])
    print()
    where = f"server on CPU {cpus[0]}, client on CPU {cpus[1]}"
    print(f"{point.point_key}, W = 0, {where}, {a.duration:g} s measured per run")
    before, after = " ".join(f"{x:.2f}" for x in load0), " ".join(f"{x:.2f}" for x in load1)
    print(f"load average (1, 5, 15 min) before {before}, after {after}")
    print_table(["mode", "runs", "mean msg/s", "vs off (mean of block ratios)", "95 % CI"], rows)


if __name__ == "__main__":
    entry(main)
