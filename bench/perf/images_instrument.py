"""Benchmark 3: the cost of `--instrument`: throughput with and without it, for several patterns.

Alternates plain and instrumented runs of each design and prints the median throughput of each and the
relative loss. Target: loss <= 3%.

    .venv/bin/python -m bench images_instrument [--duration 2] [--warmup 1] [--repeats 3] [--connections 512]
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.common.cli import BenchError, entry, positive_int, print_table
from bench.common.pairs import Server, load_parser, run_pair, two_cpus

TARGET = 0.03
DESIGNS = [
    ("reactor", "epoll-lt", 1),
    ("hsha", "epoll-lt", 2),
    ("lf", "epoll-lt", 2),
    ("multireactor", "epoll-et", 2),
]


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=2.0)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--connections", type=positive_int, default=512)
    a = ap.parse_args(argv)
    cpus = two_cpus()
    rows = []
    for pattern, notifier, threads in DESIGNS:
        thr: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(a.repeats):
            for instrument in (False, True):
                r = run_pair(
                    Server(pattern, notifier, threads, cpus=cpus[0], instrument=instrument),
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
    entry(main)
