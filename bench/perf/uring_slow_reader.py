"""Benchmark: one slow reader beside closed-loop connections, io_uring patterns (issue 48, item 3).

For each pattern × thread count × build: the server (pinned to --server-cpu) serves --connections
closed-loop demux-client connections of --msg-size bytes (pinned to --client-cpu) for --duration
seconds, once alone and once beside one extra connection that sends messages as fast as the server takes
them and never reads (at most --slow-limit MiB). Printed: the client's msg/s alone and beside the slow
reader, their ratio (target ≥ 0.9), the server's peak RSS (VmHWM, target ≤ 64 MiB at 64 KiB messages)
and how far the slow reader got (MiB the server took from it, and whether the server closed it: it does
after --stall-ms, default 5000, so with --duration below that it stays open and blocked throughout).
With --before OLD-BUILD both builds run, alternating, --rounds times (which build, and whether alone or
beside goes first, flips every round), and medians are printed.

    .venv/bin/python -m bench uring_slow_reader [--before /tmp/old/demux-server] [--rounds 3]
        [--pairs uring,uring-shared] [--threads 1,2] [--duration 4] [--msg-size 65536]

Measured on a shared machine the load average is printed with every row; say so when quoting.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from bench.common.cli import entry, int_list, positive_int
from bench.common.pairs import (
    binary,
    client_report,
    cpu_list,
    load_parser,
    pattern_list,
    peak_rss_mib,
    start_server,
)


class Slow(threading.Thread):
    """Sends and never reads, until `limit` bytes are taken or the server closes it."""

    def __init__(self, port: int, msg_size: int, limit: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.msg = b"s" * msg_size
        self.limit = limit
        self.sent = 0
        self.closed = False
        self.stop = threading.Event()

    def run(self) -> None:
        while self.sent < self.limit and not self.stop.is_set():
            _, w, _ = select.select([], [self.sock], [], 0.2)
            if not w:
                continue
            try:
                self.sent += self.sock.send(self.msg)
            except OSError:
                self.closed = True
                return


def client_args(a: argparse.Namespace) -> list[str]:
    return (
        f"--connections {a.connections} --threads 1 --msg-size {a.msg_size} "
        f"--warmup {a.warmup} --duration {a.duration} --cpus {a.client_cpu}"
    ).split()


def one_run(server: Path, pattern: str, threads: int, slow: bool, a: argparse.Namespace) -> dict[str, float]:
    argv = f"--pattern {pattern} --notifier uring --threads {threads} --msg-size {a.msg_size} --port 0"
    proc, port = start_server(["taskset", "-c", a.server_cpu, str(server), *argv.split()])
    try:
        s = Slow(port, a.msg_size, a.slow_limit << 20) if slow else None
        if s is not None:
            s.start()
        client = client_report(port, client_args(a), timeout=a.duration + 60)
        peak = peak_rss_mib(proc.pid)
        row = {"msgs": float(client["throughput_msgs_per_s"]), "rss": peak, "slow_mib": 0.0, "closed": 0.0}
        if s is not None:
            s.stop.set()
            s.join(timeout=5)
            row["slow_mib"] = s.sent / 2**20
            row["closed"] = 1.0 if s.closed else 0.0
            s.sock.close()
        return row
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=4.0)
    ap.set_defaults(warmup=0.5)
    ap.add_argument("--before", default=None, help="an older demux-server build to compare")
    ap.add_argument("--rounds", type=positive_int, default=1)
    ap.add_argument(
        "--pairs",
        type=pattern_list,
        default=pattern_list("uring,uring-shared"),
        help="patterns (notifier uring)",
    )
    ap.add_argument("--threads", type=int_list, default=[1, 2], help="server thread counts, e.g. 1,2")
    ap.add_argument("--msg-size", type=positive_int, default=65536)
    ap.add_argument("--connections", type=positive_int, default=8)
    ap.add_argument("--slow-limit", type=positive_int, default=512, help="MiB the slow reader sends at most")
    ap.add_argument("--server-cpu", type=cpu_list, default="0")
    ap.add_argument("--client-cpu", type=cpu_list, default="1")
    a = ap.parse_args(argv)
    builds = {"after": binary("demux-server")}
    if a.before:
        builds = {"before": Path(a.before), **builds}
    print(
        f"host {os.uname().nodename}, {os.cpu_count()} CPUs; {a.connections} closed-loop connections of "
        f"{a.msg_size} B, {a.duration:g} s, median of {a.rounds} round(s); load = 1-min average"
    )
    print(
        f"{'pattern':>12} {'T':>2} {'build':>6} {'alone':>8} {'beside':>8} {'ratio':>6} "
        f"{'RSS MiB':>8} {'slow MiB':>8} {'closed':>6} {'load':>5}"
    )
    for pattern in a.pairs:
        for threads in a.threads:
            rows: dict[str, list[tuple[dict[str, float], dict[str, float], float]]] = {b: [] for b in builds}
            for rnd in range(a.rounds):
                order = list(builds) if rnd % 2 == 0 else list(reversed(builds))
                for b in order:
                    if rnd % 2 == 0:  # which goes first flips too
                        alone = one_run(builds[b], pattern, threads, False, a)
                        beside = one_run(builds[b], pattern, threads, True, a)
                    else:
                        beside = one_run(builds[b], pattern, threads, True, a)
                        alone = one_run(builds[b], pattern, threads, False, a)
                    rows[b].append((alone, beside, os.getloadavg()[0]))
            for b in builds:
                al = statistics.median(r[0]["msgs"] for r in rows[b])
                be = statistics.median(r[1]["msgs"] for r in rows[b])
                rss = statistics.median(r[1]["rss"] for r in rows[b])
                mib = statistics.median(r[1]["slow_mib"] for r in rows[b])
                closed = sum(r[1]["closed"] for r in rows[b])
                ld = statistics.median(r[2] for r in rows[b])
                print(
                    f"{pattern:>12} {threads:>2} {b:>6} {al:>8.0f} {be:>8.0f} {be / al:>6.2f} "
                    f"{rss:>8.1f} {mib:>8.1f} {closed:>6.0f} {ld:>5.1f}"
                )
            sys.stdout.flush()


if __name__ == "__main__":
    entry(main)
