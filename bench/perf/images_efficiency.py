"""Benchmark 2: demux-server's CPU cost per message against a minimal single-threaded epoll echo loop.

Runs images/bench/min_echo.c (built into build/bench/min-echo) and the reactor over epoll-lt and epoll-et,
alternating, each pinned to one CPU with the client on the other, and prints server CPU time per message
and its ratio to min-echo's in the same run. Target: ratio <= 1.10.

    .venv/bin/python -m bench images_efficiency [--duration 3] [--warmup 1] [--repeats 3] [--connections 512]
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.common.cli import entry, positive_int, print_table
from bench.common.pairs import Server, build_helper, load_parser, run_pair, two_cpus

TARGET = 1.10


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--connections", type=positive_int, default=512)
    a = ap.parse_args(argv)
    cpus = two_cpus()
    min_echo = build_helper("min_echo")
    designs = {
        "min-echo": Server(cpus=cpus[0], argv=(str(min_echo), "--port", "0", "--cpu", str(cpus[0]))),
        "reactor/epoll-lt": Server("reactor", "epoll-lt", 1, cpus=cpus[0]),
        "reactor/epoll-et": Server("reactor", "epoll-et", 1, cpus=cpus[0]),
    }
    cost: dict[str, list[float]] = {k: [] for k in designs}
    thr: dict[str, list[float]] = {k: [] for k in designs}
    for rep in range(a.repeats):
        for name, server in designs.items():
            r = run_pair(
                server, connections=a.connections, warmup=a.warmup, duration=a.duration, client_cpu=cpus[1]
            )
            cost[name].append(r.server_cpu_per_msg_us)
            thr[name].append(r.throughput)
            print(f"# repeat {rep}: {name}: {r.server_cpu_per_msg_us:.3f} µs/msg, {r.throughput:,.0f} msg/s")
    base = statistics.median(cost["min-echo"])
    rows = []
    for name in designs:
        c = statistics.median(cost[name])
        ratio = c / base
        verdict = "" if name == "min-echo" else ("ok" if ratio <= TARGET else "ABOVE TARGET")
        rows.append([name, statistics.median(thr[name]), c, ratio, verdict])
    print()
    print(
        f"median of {a.repeats} runs, {a.connections} connections, 1-byte messages, target ratio <= {TARGET}"
    )
    print_table(["server", "msg/s", "server µs CPU/msg", "ratio to min-echo", "verdict"], rows)


if __name__ == "__main__":
    entry(main)
