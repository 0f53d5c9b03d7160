"""Benchmark 4: what the load client costs: client CPU time per message against the server's.

The client's cpu_s covers its measure phase and its messages; the server's covers its whole run and all
its messages; both are per message, so they compare. Target: client <= server.

    .venv/bin/python -m bench images_client_cost [--duration 3] [--warmup 1] [--connections 512]
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.common.cli import entry, positive_int, print_table
from bench.common.pairs import Server, load_parser, run_pair, two_cpus

DESIGNS = [
    ("reactor", "epoll-lt", 1),
    ("reactor", "epoll-et", 1),
    ("hsha", "epoll-lt", 2),
    ("lf", "epoll-lt", 2),
]


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=3.0)
    ap.add_argument("--connections", type=positive_int, nargs="+", default=[64, 512])
    a = ap.parse_args(argv)
    cpus = two_cpus()
    rows = []
    for conns in a.connections:
        for pattern, notifier, threads in DESIGNS:
            r = run_pair(
                Server(pattern, notifier, threads, cpus=cpus[0]),
                connections=conns,
                warmup=a.warmup,
                duration=a.duration,
                client_cpu=cpus[1],
            )
            ratio = r.client_cpu_per_msg_us / r.server_cpu_per_msg_us
            rows.append(
                [
                    f"{pattern}/{notifier} t{threads}", conns, r.throughput, r.client_cpu_per_msg_us,
                    r.server_cpu_per_msg_us, ratio, "ok" if ratio <= 1.0 else "ABOVE TARGET",
                ]
            )  # fmt: skip
            print(f"# {pattern}/{notifier} c{conns}: client/server CPU per message {ratio:.2f}", flush=True)
    print()
    print("client pinned to one CPU (1 thread), server to the other; target client/server <= 1.00")
    print_table(
        ["server", "conns", "msg/s", "client µs CPU/msg", "server µs CPU/msg", "client/server", "verdict"],
        rows,
    )


if __name__ == "__main__":
    entry(main)
