"""Benchmark 1: every pattern × notifier of `demux-server --list` at 0 µs work and 512 connections.

Prints throughput and the server's CPU time per message (exit JSON cpu_s / messages). The server runs
pinned to one CPU and the client to another; tpc gets one thread per connection, the other patterns
max(min_threads, 2) threads (capped at max_threads) unless --threads is given.

    .venv/bin/python -m bench images_patterns [--duration 2] [--warmup 1] [--connections 512]
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.common.cli import BenchError, entry, positive_int, print_table
from bench.common.pairs import Server, list_pairs, load_parser, run_pair, two_cpus


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=2.0)
    ap.add_argument("--connections", type=positive_int, default=512)
    ap.add_argument(
        "--threads", type=positive_int, default=None, help="server threads for every pattern but tpc"
    )
    ap.add_argument("--only", default=None, help="run only this pattern")
    a = ap.parse_args(argv)
    cpus = two_cpus()
    rows = []
    pairs = list_pairs()
    if a.only and a.only not in {pair["pattern"] for pair in pairs}:
        ap.error(f"--only: {a.only!r} is not a pattern of demux-server --list")
    for pair in pairs:
        pattern, notifier = pair["pattern"], pair["notifier"]
        if a.only and pattern != a.only:
            continue
        if pattern == "tpc":
            threads = a.connections
        else:
            threads = min(max(pair["min_threads"], a.threads or 2), pair["max_threads"])
        try:
            r = run_pair(
                Server(pattern, notifier, threads, cpus=cpus[0]),
                connections=a.connections,
                warmup=a.warmup,
                duration=a.duration,
                client_cpu=cpus[1],
            )
        except BenchError as exc:
            rows.append([pattern, notifier, threads, "failed", str(exc)[:60], "", ""])
            continue
        lat = r.client["latency_us"]
        rows.append(
            [pattern, notifier, threads, r.throughput, r.server_cpu_per_msg_us, lat["p50"], lat["p99"]]
        )
        print(f"# {pattern}/{notifier} t{threads}: {r.throughput:,.0f} msg/s", flush=True)
    print()
    print(
        f"0 µs work, {a.connections} connections, 1-byte messages, "
        f"server on CPU {cpus[0]}, client on CPU {cpus[1]}"
    )
    print_table(["pattern", "notifier", "threads", "msg/s", "server µs CPU/msg", "p50 µs", "p99 µs"], rows)


if __name__ == "__main__":
    entry(main)
