"""Benchmark 3: the cost of `--instrument`: throughput with and without it, for several patterns.

Alternates plain and instrumented runs of each design and prints the median throughput of each and the
relative loss. Target: loss <= 3%.

    .venv/bin/python bench/images_instrument.py [--duration 2] [--warmup 1] [--repeats 3] [--connections 512]
"""

from __future__ import annotations

import argparse
import statistics

from images_lib import BenchError, cpus_available, main_guard, print_table, run_pair, server_cmd

TARGET = 0.03
DESIGNS = [
    ("reactor", "epoll-lt", 1),
    ("hsha", "epoll-lt", 2),
    ("lf", "epoll-lt", 2),
    ("multireactor", "epoll-et", 2),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--connections", type=int, default=512)
    a = ap.parse_args()
    cpus = cpus_available()
    if len(cpus) < 2:
        raise BenchError("needs two CPUs: one for the server, one for the client")
    rows = []
    for pattern, notifier, threads in DESIGNS:
        thr: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(a.repeats):
            for instrument in (False, True):
                r = run_pair(
                    server_cmd(pattern, notifier, threads, cpu=cpus[0], instrument=instrument),
                    connections=a.connections,
                    warmup=a.warmup,
                    duration=a.duration,
                    client_cpu=cpus[1],
                )
                if instrument and not r.server.get("ops"):
                    raise BenchError(f"{pattern}/{notifier} --instrument reported no ops")
                thr[instrument].append(r.throughput)
        plain, instr = statistics.median(thr[False]), statistics.median(thr[True])
        loss = 1 - instr / plain
        rows.append(
            [
                f"{pattern}/{notifier} t{threads}",
                plain,
                instr,
                f"{loss * 100:+.1f}%",
                "ok" if loss <= TARGET else "ABOVE TARGET",
            ]
        )
        print(f"# {pattern}/{notifier}: plain {plain:,.0f}, instrumented {instr:,.0f} msg/s", flush=True)
    print()
    print(f"median of {a.repeats} alternating runs, {a.connections} connections, target loss <= {TARGET:.0%}")
    print_table(["design", "plain msg/s", "instrumented msg/s", "loss", "verdict"], rows)


if __name__ == "__main__":
    main_guard(main)
