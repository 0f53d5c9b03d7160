"""Where the hypervisor runs the two CPUs, and what it costs an echo pair (docs/ctmc-reference.md, "The host's
two speeds"): one demux-server point against demux-client, run again and again, each run with the round trip
of a cache line between the server's and the client's CPU before and after it (cpu-pingpong).

    .venv/bin/python -m bench cpu_placement [--runs 40] [--pattern reactor] [--notifier epoll-et] \\
        [--threads 1] [--connections 100] [--msg-size 64] [--near 250]

Prints a row per run (throughput, the server's and the client's CPU per message, the round trips, how busy
the server's and the client's CPU were over the run and the share of it in softirq, /proc/stat), then
the runs whose round trips both stayed at most --near ns against those with one above it: their count,
mean throughput and CPU per message, and the ratio of the two groups' means.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.common.cli import entry, positive_float, positive_int, print_table
from bench.common.pairs import CpuTimes, RoundTrip, Server, build_helper, load_parser, run_pair, two_cpus
from demuxlab.vocab import NOTIFIERS, PATTERNS


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=2.0)
    ap.add_argument("--runs", type=positive_int, default=40)
    ap.add_argument("--pattern", choices=PATTERNS, default="reactor")
    ap.add_argument("--notifier", choices=NOTIFIERS, default="epoll-et")
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument("--connections", type=positive_int, default=100)
    ap.add_argument("--msg-size", type=positive_int, default=64)
    ap.add_argument("--client-threads", type=positive_int, default=2)
    ap.add_argument(
        "--near", type=positive_float, default=250.0, help="a round trip at most this (ns) is near"
    )
    a = ap.parse_args(argv)
    cpus = two_cpus()
    trip = RoundTrip(build_helper("cpu_pingpong"), (cpus[0], cpus[1]))
    rows = []
    groups: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for n in range(1, a.runs + 1):
        before = trip.measure()
        start = CpuTimes()
        r = run_pair(
            Server(a.pattern, a.notifier, a.threads, cpus=cpus[0]),
            connections=a.connections,
            warmup=a.warmup,
            duration=a.duration,
            client_threads=a.client_threads,
            msg_size=a.msg_size,
            client_cpu=cpus[1],
        )
        split = [start.split(CpuTimes(), cpu) for cpu in cpus[:2]]
        after = trip.measure()
        near = max(before, after) <= a.near
        groups[near].append((r.throughput, r.server_cpu_per_msg_us, r.client_cpu_per_msg_us))
        rows.append([n, r.throughput, r.server_cpu_per_msg_us, r.client_cpu_per_msg_us, before, after,
                     "near" if near else "far", *(f"{b:.0%} ({s:.0%})" for b, s in split)])  # fmt: skip
        print(
            f"# run {n}/{a.runs}: {r.throughput:,.0f} msg/s, round trip {before:.0f}/{after:.0f} ns",
            flush=True,
        )
    print(
        f"{a.pattern}/{a.notifier}, {a.threads} thread(s), {a.connections} connections, {a.msg_size} B; "
        f"server CPU {cpus[0]}, client CPU {cpus[1]} ({a.client_threads} threads)"
    )
    print_table(
        ["run", "msg/s", "server µs/msg", "client µs/msg", "trip before ns", "after ns", "CPUs",
         "server CPU busy (softirq)", "client CPU busy (softirq)"],
        rows,
    )  # fmt: skip
    summary = []
    for near in (True, False):
        g = groups[near]
        if g:
            label = f"near (≤ {a.near:g} ns)" if near else f"far (> {a.near:g} ns)"
            summary.append([label, len(g), *(statistics.mean(x[i] for x in g) for i in range(3))])
    print()
    print_table(["runs", "count", "msg/s", "server µs/msg", "client µs/msg"], summary)
    if groups[True] and groups[False]:
        ratio = statistics.mean(x[0] for x in groups[False]) / statistics.mean(x[0] for x in groups[True])
        print(f"far / near throughput: {ratio:.2f}")


if __name__ == "__main__":
    entry(main)
